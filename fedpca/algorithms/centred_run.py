"""Reference centred PCA (no Flower): private centring and scaling, then the algorithm on
the centred (standardised) rows, clipped to the public norm ``C``.

* ``method="dpdis-pca"``: every site releases its column moments
  (:class:`~fedpca.algorithms.centring.CentringSite`), the server turns their sum into a
  mean and a scale (:class:`~fedpca.algorithms.centring.MomentsServer`), every site centres
  and clips its rows with them and runs DPdisPCA's one release
  (:mod:`fedpca.algorithms.dpdis_pca`): per-site noise (``variant="factor"`` or ``"full"``)
  or both rounds inside secure sums of distributed discrete Gaussian messages
  (``"secure-sum"``: a policy with ``secure_min_sites`` and ``discrete``).
* ``method="dps-pca"``: the same moments round, then DPS-PCA's initialisation and ``T``
  power steps (:mod:`fedpca.algorithms.dps_pca`) on the centred rows, per-site noise or
  inside secure sums (a policy with ``discrete``); ``T + 1`` algorithm releases
  (``CentredPolicy.algorithm_releases``). No noisy matrix, so no free explained variance:
  with the policy's ``explained_variance`` (per-site noise only) one more release, every
  site's noisy Rayleigh quotients of the final basis and trace of its centred rows
  (``T + 2`` algorithm releases within the same split).
* :func:`run_centred_kplane`: the same moments round, then SuLQ k-plane's ``T`` rounds
  (:mod:`fedpca.algorithms.kplane`) on the centred rows, per-site noise or inside secure
  sums; its result is a :class:`~fedpca.results.CentredClusteringResult` (one
  basis per cluster, no explained variance).
* :func:`run_centred_ldp`: local moments (every record releases its own noisy row
  statistic, :class:`~fedpca.algorithms.centring.CentredPolicy` with ``local``), then
  LDP-PCA's one release (:mod:`fedpca.algorithms.ldp_pca`) of every record's view of its
  centred row; unit: one record, local.
* ``method="analyze-gauss"``: one trusted curator holding the pooled rows does the same with
  one moments release and one Analyze Gauss release
  (:func:`~fedpca.algorithms.central.calibrated_analyze_gauss`), the same budget split.
* ``method="mod-sulq"`` and ``method="ppca"``: the curator's same moments release, then
  MOD-SuLQ (:func:`~fedpca.algorithms.central.mod_sulq_release`, the paper's own noise) or
  PPCA (:func:`~fedpca.algorithms.ppca.run_ppca`, the exponential mechanism, pure epsilon)
  on the centred clipped rows with the rest of the budget. Neither is a Gaussian of a
  multiplier the Gaussian split can compose, so the two parts compose by basic composition
  (:mod:`fedpca.dp.basic_composition`): the moments keep their multiplier ``z_m`` and
  are (eps_m, delta_m)-DP with ``eps_m`` read off the Gaussian's exact curve; the algorithm
  gets ``eps - eps_m`` at ``delta - delta_m`` (PPCA: ``delta_m = delta``, the algorithm pure;
  MOD-SuLQ: ``delta / 2`` each). The ledger holds the moments release and MOD-SuLQ's (a
  Gaussian, charged at its exact sensitivity ``sqrt(2) C^2 / n``); PPCA's pure release is
  stated in the privacy record (``algorithm_epsilon``), not in the Gaussian ledger. The
  config's ``epsilon_spent`` is the basic composition's (the target), ``epsilon_ledger``
  what the curator's ledger composes exactly of the Gaussian releases it holds.

Privacy guarantee (unit: one record at one site, replace-one; the curator's pooled data
for the central methods): each site's (the curator's) releases compose to the policy's
(epsilon, delta) by its split (:mod:`fedpca.dp.budget_split`; MOD-SuLQ and PPCA:
:mod:`fedpca.dp.basic_composition`), charged to one ledger per site.

Explained variance (post-processing of the releases,
:mod:`fedpca.algorithms.explained_variance`): the top-``k`` eigenvalues of the noisy centred
second moment per record (``X^T X / N`` of the clipped centred rows plus the noise; ``/ N``,
not ``/ (N - 1)``), negative ones clamped at 0; the ratio divides them by the total
variance, that same noisy matrix's trace, so the ratios lie in ``[0, 1]`` and sum to at
most 1.
DPdisPCA's factor variant has no whole noisy matrix at the server (only each site's ``R``
leading directions): its explained variance is that of the merged ``A_c`` and it has no
ratio. A standardised run whose moments floored some columns' scales (their variance was
below the noise) flags its ratio (``explained_variance_ratio_floored``): those columns
weigh almost nothing, so the total is too small and every ratio reads high.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedpca.algorithms.central import (
    ANALYZE_GAUSS,
    CURATOR,
    MOD_SULQ,
    TRUST_CENTRAL,
    UNIT,
    CentralRelease,
    calibrated_analyze_gauss,
    check_components,
    mod_sulq_noise,
    mod_sulq_release,
    run_pooled_pca,
)
from fedpca.algorithms.centring import (
    CentredPolicy,
    CentringSite,
    moments_server,
    moments_sum,
)
from fedpca.algorithms.dpdis_pca import (
    ALGORITHM as DPDIS_PCA,
)
from fedpca.algorithms.dpdis_pca import (
    VARIANT_FACTOR,
    VARIANT_SECURE,
    WEIGHTING_UNIFORM,
    DPdisPCAServer,
    DPdisPCASite,
    answer_round,
    secure_sum_for,
)
from fedpca.algorithms.dps_pca import ALGORITHM as DPS_PCA
from fedpca.algorithms.dps_pca import DPSPCAServer, DPSPCASite, secure_sums
from fedpca.algorithms.dps_pca import answer_rounds as answer_dps_rounds
from fedpca.algorithms.explained_variance import choose_k, explained_variance
from fedpca.algorithms.kplane import KPlaneServer, KPlaneSite, answer_rounds
from fedpca.algorithms.kplane import secure_sum_for as kplane_secure_sum
from fedpca.algorithms.ldp_pca import LDPCovarianceServer, LDPCovarianceSite
from fedpca.algorithms.ppca import ALGORITHM as PPCA
from fedpca.algorithms.ppca import DEFAULT_BURN_IN, run_ppca
from fedpca.algorithms.secure_sum import VERIFIED_TRUST, public_seed
from fedpca.algorithms.site import PrivateSite
from fedpca.errors import ConfigurationError
from fedpca.dp.basic_composition import BasicSplit, basic_split
from fedpca.dp.budget_split import ALGORITHM
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import upper_triangle_sensitivity
from fedpca.dp.moments import ColumnBounds, ColumnMoments
from fedpca.dp.validation import (
    require_choice,
    require_positive_int,
    validate_site_data,
)
from fedpca.results import (
    CentredClusteringResult,
    CentredPCAResult,
    centred_result,
    floored_total,
)

#: The central algorithms (one trusted curator holding the pooled rows).
CENTRAL_METHODS = (ANALYZE_GAUSS, MOD_SULQ, PPCA)
#: The algorithms a centred reference run can end with.
METHODS = (DPDIS_PCA, DPS_PCA, *CENTRAL_METHODS)


def run_centred_pca(
    sites: Sequence[np.ndarray],
    bounds: ColumnBounds,
    k: int,
    policy: CentredPolicy | None = None,
    method: str = DPDIS_PCA,
    variant: str = VARIANT_FACTOR,
    columns: Sequence[str] | None = None,
    seed: int | None = None,
    r: int | None = None,
    weighting: str = WEIGHTING_UNIFORM,
    variance: float | None = None,
    s_hat: int | None = None,
    burn_in: int = DEFAULT_BURN_IN,
) -> CentredPCAResult:
    """Private centring (and scaling), then ``method`` on the centred rows.

    Args:
        sites: each site's preprocessed rows (``Contract.preprocess(table).matrix``), all
            within ``bounds``.
        bounds: the contract's public bounds (``Contract.bounds``).
        k: number of components.
        policy: every site's :class:`~fedpca.algorithms.centring.CentredPolicy` (default: its
            defaults); ``method="analyze-gauss"`` uses its budget, split, scaling and clip
            norm for the curator.
        method: ``"dpdis-pca"``, ``"dps-pca"``, or a central method on the pooled rows:
            ``"analyze-gauss"``, ``"mod-sulq"`` or ``"ppca"``.
        variant: DPdisPCA's ``"factor"``, ``"full"`` or ``"secure-sum"``.
        columns: the contract's output column names (``Contract.output_columns``).
        seed: seed for reproducible simulation only (``None``: OS randomness).
        r, weighting: DPdisPCA's (:func:`~fedpca.algorithms.dpdis_pca.run_dpdis_pca`).
        variance: keep the fewest components, at most ``k``, whose cumulative DP
            explained-variance ratio reaches this share
            (:func:`~fedpca.algorithms.explained_variance.choose_k`; post-processing of the
            whole noisy matrix, so not with DPdisPCA's factor variant, DPS-PCA nor PPCA).
        s_hat: DPS-PCA's rows kept by thresholding (default ``d``: no thresholding); its
            ``T`` power rounds are the policy's ``algorithm_releases - 1``.
        burn_in: PPCA's Gibbs sweeps before the released frame (``k > 1``;
            :func:`~fedpca.algorithms.ppca.run_ppca`).

    Privacy guarantee: see the module docstring; the result's ``privacy`` states the split.
    """
    start = time.perf_counter()
    policy = policy or CentredPolicy()
    require_choice(method, "method", METHODS)
    require_sites(sites, bounds, columns)
    if method == DPS_PCA:
        if variance is not None:
            raise ConfigurationError(
                "DPS-PCA needs k before its first round: give k, not variance")
        result = _dps(sites, bounds, k, policy, seed, bounds.dim if s_hat is None else s_hat)
    elif method in CENTRAL_METHODS:
        result = _central(method, sites, bounds, k, policy, seed, variance, burn_in)
    else:
        result = _dpdis(sites, bounds, k, policy, variant, seed, r, weighting, variance)
    result.columns = None if columns is None else list(columns)
    result.config["wall_seconds"] = time.perf_counter() - start
    return result


def require_sites(sites: Sequence[np.ndarray], bounds: ColumnBounds,
                  columns: Sequence[str] | None) -> None:
    """Refuse a run without sites, or with column names other than the contract's count."""
    if not sites:
        raise ConfigurationError("the run needs at least one site")
    if columns is not None and len(columns) != bounds.dim:
        raise ConfigurationError(
            f"{len(columns)} column names for {bounds.dim} columns: pass the contract's "
            "output_columns")


def run_centred_kplane(
    sites: Sequence[np.ndarray],
    bounds: ColumnBounds,
    clusters: int,
    subspace_dim: int,
    policy: CentredPolicy | None = None,
    columns: Sequence[str] | None = None,
    seed: int | None = None,
) -> CentredClusteringResult:
    """Private centring (and scaling), then SuLQ k-plane on the centred rows clipped to the
    site's own ``C``: ``policy.algorithm_releases`` k-plane rounds ``T``, per-site noise or
    (a policy with ``discrete``) every release inside secure sums of discrete Gaussian
    messages.

    Args:
        sites, bounds, columns, seed: as :func:`run_centred_pca`.
        clusters, subspace_dim: k-plane's ``k`` subspaces of dimension ``q``.
        policy: every site's :class:`~fedpca.algorithms.centring.CentredPolicy`.

    Privacy guarantee (unit: one record at one site, replace-one; the record may change
    cluster): the moments release and the ``T`` rounds compose to the policy's (epsilon,
    delta) by its split, charged to one ledger per site.
    """
    start = time.perf_counter()
    policy = policy or CentredPolicy()
    require_sites(sites, bounds, columns)
    centring, rotation_seed, moments = _moments_round(sites, bounds, policy, seed,
                                                      policy.discrete)
    algorithm = [s.algorithm_site(KPlaneSite, moments.mean, moments.scale) for s in centring]
    share = policy.algorithm_policy(bounds)
    secure = (kplane_secure_sum(share, bounds.dim, clusters, max(s.n for s in centring),
                                len(centring), rotation_seed) if policy.discrete else None)
    server = KPlaneServer(bounds.dim, clusters, subspace_dim, policy.algorithm_releases,
                          clip_norm=share.clip_norm, seed=seed, secure=secure)
    answer_rounds(server, algorithm, secure)
    config = {"clusters": clusters, "subspace_dim": subspace_dim,
              "rounds": policy.algorithm_releases, "sites": len(sites), "seed": seed,
              **_outcome(moments, centring, _clipped(algorithm)),
              "wall_seconds": time.perf_counter() - start}
    result = server.result(centred_privacy(policy, bounds, KPLANE_MECHANISM), config)
    return centred_result(result, moments, columns)


def run_centred_ldp(
    sites: Sequence[np.ndarray],
    bounds: ColumnBounds,
    k: int,
    policy: CentredPolicy | None = None,
    columns: Sequence[str] | None = None,
    seed: int | None = None,
    sparse: bool = False,
    lam: float | None = None,
) -> CentredPCAResult:
    """Local private centring (and scaling), then LDP-PCA on the centred rows clipped to the
    site's own ``C``.

    Args:
        sites, bounds, k, columns, seed: as :func:`run_centred_pca`.
        policy: every site's :class:`~fedpca.algorithms.centring.CentredPolicy`, with
            ``local`` (default: ``CentredPolicy(local=True)``) and one algorithm release.
        sparse, lam: LDP-PCA's (:func:`~fedpca.algorithms.ldp_pca.run_ldp_pca`).

    Privacy guarantee (unit: one record, replace-one; local model): every record's moments
    view (multiplier ``z_m``) and its covariance view ``x_c x_c^T + Z`` (``z_a``) compose to
    the policy's (epsilon, delta) on their own, whoever sees them (its own site included);
    each site's ledger is charged the record's multipliers.
    """
    start = time.perf_counter()
    policy = policy or CentredPolicy(local=True)
    if not policy.local or policy.algorithm_releases != 1:
        raise ConfigurationError(
            "LDP-PCA protects every record against everyone, its own site included: its "
            "moments must be local too and it makes one release; give a CentredPolicy with "
            "local=True and algorithm_releases=1")
    require_sites(sites, bounds, columns)
    centring, _, moments = _moments_round(sites, bounds, policy, seed, secure=False)
    algorithm = [s.algorithm_site(LDPCovarianceSite, moments.mean, moments.scale)
                 for s in centring]
    privacy = centred_ldp_privacy(policy, bounds)
    server = LDPCovarianceServer(bounds.dim, k, sparse=sparse, lam=lam,
                                 record_sigma=privacy["sigma"])
    server.receive([s.answer(s.release_covariance()) for s in algorithm])
    config = {"k": k, "sparse": sparse, "lam": lam, "sites": len(sites), "seed": seed,
              **_outcome(moments, centring, _clipped(algorithm)),
              "wall_seconds": time.perf_counter() - start}
    return centred_result(server.result(privacy, config), moments, columns)


def _clipped(sites: Sequence[PrivateSite]) -> int:
    """The rows the algorithm's sites clipped to ``C``, all sites together."""
    return sum(s.clip_report.clipped_rows for s in sites)


def _outcome(moments: ColumnMoments, centring: Sequence[CentringSite],
             clipped_rows: int) -> dict[str, Any]:
    """The config entries every centred run shares."""
    return {
        "samples": sum(s.n for s in centring),
        "dim": centring[0].dim,
        "clipped_rows": clipped_rows,
        "clamped_means": list(moments.clamped_means),
        "floored_variances": list(moments.floored_variances),
        "epsilon_spent": max(s.ledger.epsilon_spent() for s in centring),
    }


def _dpdis(sites: Sequence[np.ndarray], bounds: ColumnBounds, k: int, policy: CentredPolicy,
           variant: str, seed: int | None, r: int | None, weighting: str,
           variance: float | None) -> CentredPCAResult:
    secure = variant == VARIANT_SECURE
    if secure != policy.discrete:
        raise ConfigurationError(
            "the secure-sum variant needs a policy with secure_min_sites and discrete=True, "
            "and only it takes one")
    centring, rotation_seed, moments = _moments_round(sites, bounds, policy, seed, secure)
    sizes = [s.n for s in centring]
    algorithm = [s.algorithm_site(DPdisPCASite, moments.mean, moments.scale) for s in centring]
    algorithm_secure = (secure_sum_for(policy.algorithm_policy(bounds), bounds.dim, max(sizes),
                                       len(sizes), rotation_seed) if secure else None)
    server = DPdisPCAServer(bounds.dim, k, r, weighting, variant, None, algorithm_secure,
                            variance)
    answer_round(server, algorithm)
    privacy = centred_privacy(policy, bounds)
    if secure:
        privacy["epsilon_worst_case"] = max(s.ledger.worst_case_spent() for s in centring)
    config = {"k": server.k, "variance": variance, "r": server.r, "variant": variant,
              "weighting": weighting, "sites": len(sites), "seed": seed,
              **_outcome(moments, centring, _clipped(algorithm))}
    return centred_result(server.result(privacy, config), moments)


def _moments_round(sites: Sequence[np.ndarray], bounds: ColumnBounds, policy: CentredPolicy,
                   seed: int | None, secure: bool
                   ) -> tuple[list[CentringSite], int, ColumnMoments]:
    """Every site's :class:`CentringSite`, the run's public rotation seed and the released
    moments (inside a secure sum when ``secure``)."""
    centring = [CentringSite(X, bounds, policy, site=str(i), seed=seed)
                for i, X in enumerate(sites)]
    rotation_seed = seed if seed is not None else public_seed()
    moments_secure = (moments_sum(policy, bounds, max(s.n for s in centring), len(centring),
                                  rotation_seed) if secure else None)
    server = moments_server(policy, bounds, len(centring), moments_secure)
    sum_params = None if moments_secure is None else moments_secure[0]
    moments = server.receive([s.answer(s.release_moments(sum_params)) for s in centring])
    return centring, rotation_seed, moments


def _dps(sites: Sequence[np.ndarray], bounds: ColumnBounds, k: int, policy: CentredPolicy,
         seed: int | None, s_hat: int) -> CentredPCAResult:
    rounds = policy.algorithm_releases - 1 - int(policy.explained_variance)
    if rounds < 1:
        raise ConfigurationError(
            "DPS-PCA makes T + 1 releases (its initialisation and T power steps; T + 2 with "
            "the explained variance): give the policy algorithm_releases = T + 1 >= 2 (T + 2 "
            "with explained_variance)")
    centring, rotation_seed, moments = _moments_round(sites, bounds, policy, seed,
                                                      policy.discrete)
    algorithm = [s.algorithm_site(DPSPCASite, moments.mean, moments.scale) for s in centring]
    secure = (secure_sums(policy.algorithm_policy(bounds), bounds.dim, k,
                          max(s.n for s in centring), len(centring), rotation_seed)
              if policy.discrete else None)
    server = DPSPCAServer(bounds.dim, k, s_hat, rounds, seed=seed, secure=secure,
                          explained_variance=policy.explained_variance)
    answer_dps_rounds(server, algorithm, secure)
    config = {"k": k, "s_hat": s_hat, "rounds": rounds, "sites": len(sites), "seed": seed,
              **_outcome(moments, centring, _clipped(algorithm))}
    result = server.result(centred_privacy(policy, bounds, DPS_MECHANISM), config)
    return centred_result(result, moments)


#: A centred DPS-PCA run's mechanism, as its privacy record states it.
DPS_MECHANISM = ("column moments, then DPS-PCA's noisy diagonal and power steps on the "
                 "centred rows")
#: A centred SuLQ k-plane run's mechanism, as its privacy record states it.
KPLANE_MECHANISM = ("column moments, then SuLQ k-plane's noisy per-cluster second moments and "
                    "counts on the centred rows")
#: A centred LDP-PCA run's mechanism, as its privacy record states it.
LDP_MECHANISM = ("every record's noisy column moments, then its view x_c x_c^T + symmetric "
                 "Gaussian of its centred row; a site sends the sums of its records' views")
#: A centred LDP-PCA run's trust model.
LOCAL_TRUST = ("local: every record's moments view and covariance view are together "
               "(epsilon, delta)-DP on their own, against the server, its site and every "
               "other party")
#: A centred DPdisPCA run's mechanism, as its privacy record states it.
DPDIS_MECHANISM = ("column moments, then DPdisPCA's symmetric Gaussian on the upper triangle "
                   "of the centred rows' second moment")


def centred_privacy(policy: CentredPolicy, bounds: ColumnBounds,
                    mechanism: str = DPDIS_MECHANISM) -> dict[str, Any]:
    """The privacy record of a centred federated run of ``mechanism`` under every site's
    ``policy``: per-site noise, or every release inside verified secure sums; its
    ``noise_multiplier`` is the algorithm's releases' (the moments' is
    ``moments_noise_multiplier``)."""
    return {
        **policy.record(bounds),
        "noise_multiplier": policy.split().algorithm_multiplier,
        "mechanism": (mechanism if not policy.discrete else
                      f"{mechanism}, every release a secure sum of distributed discrete "
                      "Gaussian messages"),
        "trust_model": (VERIFIED_TRUST.format(m=policy.secure_min_sites) if policy.discrete
                        else "per-site noise"),
    }


def centred_ldp_privacy(policy: CentredPolicy, bounds: ColumnBounds) -> dict[str, Any]:
    """The privacy record of a centred LDP-PCA run under every site's local ``policy``:
    :func:`centred_privacy` with the per-record ``sigma`` and ``sensitivity`` of the
    covariance view (``sqrt(2) C^2``) and the local trust model."""
    share = policy.algorithm_policy(bounds)
    sensitivity = upper_triangle_sensitivity(share.clip_norm)
    return {**centred_privacy(policy, bounds, LDP_MECHANISM), "sensitivity": sensitivity,
            "sigma": share.part.sigma(sensitivity), "trust_model": LOCAL_TRUST}


def _central(method: str, sites: Sequence[np.ndarray], bounds: ColumnBounds, k: int,
             policy: CentredPolicy, seed: int | None, variance: float | None,
             burn_in: int) -> CentredPCAResult:
    """The curator's run: its split and what can be checked of its method (refused before
    anything is charged: MOD-SuLQ's noise is public, so the ledger tests both releases), one
    moments release on the pooled rows, then ``method`` on the centred clipped rows."""
    k = check_components(k, bounds.dim)
    if method == PPCA and variance is not None:
        raise ConfigurationError(
            "PPCA releases only the subspace (no noisy matrix to choose k from): give k, not "
            "variance")
    curator_policy = dataclasses.replace(policy, secure_min_sites=None, discrete=False)
    composed = (None if method == ANALYZE_GAUSS
                else basic_split(curator_policy.split(), pure_algorithm=method == PPCA))
    curator = CentringSite(np.vstack(sites), bounds, curator_policy, site=CURATOR, seed=seed)
    clip_norm = curator.algorithm_clip_norm
    if method == PPCA:
        require_positive_int(burn_in, "burn_in", minimum=0)
    elif method == MOD_SULQ:  # its noise is public: the ledger tests both releases first
        curator.ledger.require_run([
            curator_policy.plan()[0],
            mod_sulq_noise(bounds.dim, curator.n, composed.algorithm_epsilon,
                           composed.algorithm_delta, clip_norm)])
    moments = moments_server(curator_policy, bounds, 1).receive(
        [curator.answer(curator.release_moments())])
    data = curator.centre(moments.mean, moments.scale)
    if method == PPCA:
        ppca = run_ppca(data, k, composed.algorithm_epsilon, clip_norm, burn_in, seed)
        basis, values, ratio, algorithm = ppca.basis, None, None, ppca.privacy
    else:
        release = (calibrated_analyze_gauss(data, curator_policy.split().part(ALGORITHM),
                                            clip_norm, seed) if composed is None
                   else mod_sulq_release(data, composed.algorithm_epsilon,
                                         composed.algorithm_delta, clip_norm, seed))
        curator.ledger.charge(Release(method, release.privacy["sensitivity"],
                                      release.privacy["sigma"], (bounds.dim, bounds.dim)))
        basis, values, ratio = _noisy_components(release, k, variance)
        algorithm = release.privacy
    config = {"k": basis.shape[1], "variance": variance, "sites": len(sites), "seed": seed,
              **_outcome(moments, [curator], data.clip.clipped_rows)}
    if composed is not None:  # the ledger holds the Gaussian releases only
        config["epsilon_ledger"] = config["epsilon_spent"]
        config["epsilon_spent"] = composed.moments_epsilon + composed.algorithm_epsilon
    privacy = _central_privacy(method, curator_policy, bounds, composed, algorithm)
    return CentredPCAResult(method, basis, privacy, [], config, [[CURATOR]],
                            mean=moments.mean, scale=moments.scale,
                            explained_variance=values, explained_variance_ratio=ratio,
                            explained_variance_ratio_floored=floored_total(moments, ratio))


def _noisy_components(release: CentralRelease, k: int, variance: float | None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top-``k`` eigenvectors of a released noisy matrix (fewer when ``variance`` picks
    fewer), their explained variance and its ratio: post-processing of the release."""
    spectrum = np.linalg.eigvalsh(release.matrix)[::-1] * release.scale
    if variance is not None:
        k = min(k, choose_k(spectrum, variance))
    _, basis = release.factored.top_eigenpairs(k)
    values, ratio = explained_variance(spectrum, k, whole=True)
    return basis, values, ratio


#: What a central run's privacy record keeps of the policy's: the moments release's terms.
_MOMENTS_RECORD = ("standardize", "moments_sensitivity", "clip_norm", "noise_sampler")


def _central_privacy(method: str, policy: CentredPolicy, bounds: ColumnBounds,
                     composed: BasicSplit | None, algorithm: dict[str, Any]
                     ) -> dict[str, Any]:
    """A central run's privacy record: the Gaussian split (Analyze Gauss) or the basic
    composition of the moments and the algorithm (MOD-SuLQ, PPCA), with the algorithm's
    own record (``algorithm``) as its run on the centred rows states it."""
    record = policy.record(bounds)
    if composed is not None:
        record = {**{key: record[key] for key in _MOMENTS_RECORD}, **composed.record(),
                  "algorithm": algorithm}
    return {**record, "mechanism": f"column moments, then {method} on the centred rows",
            "unit": UNIT, "trust_model": TRUST_CENTRAL}


def run_pooled_centred_pca(X: np.ndarray, k: int, standardize: bool = False
                           ) -> CentredPCAResult:
    """Non-private centred (standardised) PCA of the pooled rows: the exact column means
    (and standard deviations, ``/ n``; a constant column keeps scale 1, as scikit-learn's
    ``StandardScaler``), then the top-``k`` eigenvectors of ``Xc^T Xc / n``.

    No privacy: the mean, scale and components are deterministic functions of the raw data
    (the upper bound every private centred run is compared with).
    """
    X = validate_site_data(X, site=CURATOR)
    mean = X.mean(axis=0)
    scale = X.std(axis=0) if standardize else np.ones(X.shape[1])
    moments = ColumnMoments(mean, np.where(scale > 0, scale, 1.0), (), (), standardize)
    return centred_result(run_pooled_pca(moments.transform(X), k), moments)

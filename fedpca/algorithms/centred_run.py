"""Reference centred runs (no Flower): private centring and scaling, then an algorithm on
the centred (standardised) rows, clipped to the public norm ``C``.

:func:`run_centred` is the one federated run, for every algorithm: every site's moments
release (:class:`~fedpca.algorithms.centring.CentringSite`; per-site noise, every record's
own views with a local policy, or inside a secure sum of distributed discrete Gaussian
messages with ``discrete``), the server's mean and scale
(:class:`~fedpca.algorithms.centring.MomentsServer`), then the algorithm's rounds on the
centred rows, each its server's request and its sites' answers as a Flower run carries them
(:func:`~fedpca.algorithms.centred_rounds.answer_in_process`). What is
the algorithm's own, its server, its secure sums, its privacy record and its config, is its
spec's part (:attr:`~fedpca.algorithms.specs.AlgorithmSpec.centred`, a
``CentredSetup -> CentredAlgorithm`` function below):

* :func:`centred_dpdis`: DPdisPCA's one release (:mod:`fedpca.algorithms.dpdis_pca`):
  ``variant="factor"`` or ``"full"``, or ``"secure-sum"`` (a policy with
  ``secure_min_sites`` and ``discrete``).
* :func:`centred_dps`: DPS-PCA's initialisation and ``T`` power steps
  (:mod:`fedpca.algorithms.dps_pca`); ``T + 1`` algorithm releases
  (``CentredPolicy.algorithm_releases``). No noisy matrix, so no free explained variance:
  with the policy's ``explained_variance`` (per-site noise only) one more release, every
  site's noisy Rayleigh quotients of the final basis and trace of its centred rows
  (``T + 2`` algorithm releases within the same split).
* :func:`centred_kplane`: SuLQ k-plane's ``T`` rounds (:mod:`fedpca.algorithms.kplane`);
  its result is a :class:`~fedpca.results.CentredClusteringResult` (one basis per cluster,
  no explained variance).
* :func:`centred_ldp`: local moments, then LDP-PCA's one release
  (:mod:`fedpca.algorithms.ldp_pca`) of every record's view of its centred row; unit: one
  record, local.

:func:`run_centred_pca` (DPdisPCA, DPS-PCA or a central method), :func:`run_centred_kplane`
and :func:`run_centred_ldp` are its public faces with each algorithm's parameters.

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
:mod:`fedpca.dp.basic_composition`), charged to one ledger per site; with secure sums the
privacy record states the worst case too (``epsilon_worst_case``: a site's own share alone).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
from fedpca.algorithms.centred_rounds import answer_in_process
from fedpca.algorithms.centring import (
    CentredPolicy,
    CentringSite,
    MomentsServer,
    moments_server,
    moments_sum,
)
from fedpca.algorithms.dpdis_pca import ALGORITHM as DPDIS_PCA
from fedpca.algorithms.dpdis_pca import (
    VARIANT_FACTOR,
    VARIANT_SECURE,
    WEIGHTING_UNIFORM,
    DPdisPCAServer,
    secure_sum_for,
)
from fedpca.algorithms.dps_pca import ALGORITHM as DPS_PCA
from fedpca.algorithms.dps_pca import DPSPCAServer, secure_sums
from fedpca.algorithms.explained_variance import choose_k, explained_variance
from fedpca.algorithms.kplane import KPlaneServer
from fedpca.algorithms.kplane import secure_sum_for as kplane_secure_sum
from fedpca.algorithms.ldp_pca import LDPCovarianceServer
from fedpca.algorithms.ppca import ALGORITHM as PPCA
from fedpca.algorithms.ppca import DEFAULT_BURN_IN, run_ppca
from fedpca.algorithms.secure_sum import VERIFIED_TRUST, public_seed
from fedpca.algorithms.server import ServerRecord
from fedpca.algorithms.specs import load, spec
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
from fedpca.results import CentredPCAResult, centred_result, floored_total

#: The central algorithms (one trusted curator holding the pooled rows).
CENTRAL_METHODS = (ANALYZE_GAUSS, MOD_SULQ, PPCA)
#: The algorithms :func:`run_centred_pca` can end with.
METHODS = (DPDIS_PCA, DPS_PCA, *CENTRAL_METHODS)


@dataclass(frozen=True)
class CentredSetup:
    """What an algorithm's part of a centred run is built from (all public).

    Attributes:
        bounds: the contract's public bounds (the algorithm's ``d`` is ``bounds.dim``).
        policy: every site's :class:`~fedpca.algorithms.centring.CentredPolicy`.
        sites: the number of sites (the members of every secure sum).
        max_records: the most records a site holds (the secure sums' public bound).
        rotation_seed: the run's public rotation seed of the secure sums.
        seed: the server's seed (``None``: OS randomness; simulation only).
    """

    bounds: ColumnBounds
    policy: CentredPolicy
    sites: int
    max_records: int
    rotation_seed: int
    seed: int | None

    @property
    def share(self) -> Any:
        """The algorithm's part of the policy (its multiplier, clip norm ``C`` and grid)."""
        return self.policy.algorithm_policy(self.bounds)

    def moments(self) -> MomentsServer:
        """The moments round's server, inside its secure sum with a discrete policy."""
        policy = self.policy
        secure = (moments_sum(policy, self.bounds, self.max_records, self.sites,
                              self.rotation_seed) if policy.discrete else None)
        return moments_server(policy, self.bounds, self.sites, secure)


@dataclass(frozen=True)
class CentredAlgorithm:
    """An algorithm's part of a centred run: its ``server``, the run's ``privacy`` record
    and its own ``config`` entries, read once the rounds ran (DPdisPCA's ``variance``
    chooses its ``k`` from the releases)."""

    server: ServerRecord
    privacy: dict[str, Any]
    config: Callable[[], dict[str, Any]]


def run_centred(
    algorithm: str,
    sites: Sequence[np.ndarray],
    bounds: ColumnBounds,
    policy: CentredPolicy | None = None,
    columns: Sequence[str] | None = None,
    seed: int | None = None,
    **params: Any,
) -> Any:
    """Private centring (and scaling), then ``algorithm`` on the centred rows (module
    docstring): a centred federated run in process.

    Args:
        algorithm: a federated algorithm's name (its spec's ``centred`` part builds the
            rest: its server, secure sums and privacy record).
        sites: each site's preprocessed rows (``Contract.preprocess(table).matrix``), all
            within ``bounds``; site ``i`` is named ``str(i)``.
        bounds: the contract's public bounds (``Contract.bounds``).
        policy: every site's :class:`~fedpca.algorithms.centring.CentredPolicy` (default: its
            defaults, local for a local-DP algorithm).
        columns: the contract's output column names (``Contract.output_columns``).
        seed: seed for reproducible simulation only (``None``: OS randomness); with it every
            site's noise is the stream a Flower run's is, so both give the same result.
        params: the algorithm's own (e.g. ``k``; :func:`centred_dpdis`, :func:`centred_dps`,
            :func:`centred_kplane`, :func:`centred_ldp`).

    Privacy guarantee: see the module docstring; the result's ``privacy`` states the split.
    """
    start = time.perf_counter()
    algorithm_spec = spec(algorithm)
    policy = policy or CentredPolicy(local=algorithm_spec.local_dp)
    require_sites(sites, bounds, columns)
    centring = [CentringSite(X, bounds, policy, site=str(i), seed=seed)
                for i, X in enumerate(sites)]
    setup = CentredSetup(bounds, policy, len(centring), max(s.n for s in centring),
                         public_seed(seed), seed)
    part: CentredAlgorithm = load(algorithm_spec.centred)(setup, **params)
    moments_round = setup.moments()
    public = None if moments_round.secure is None else moments_round.secure[0]
    moments = moments_round.receive([s.answer(s.release_moments(public)) for s in centring])
    members = [s.algorithm_site(algorithm_spec.site_class(), moments.mean, moments.scale)
               for s in centring]
    answer_in_process(part.server, members)
    privacy = dict(part.privacy)
    if policy.discrete:  # a site's own share alone
        privacy["epsilon_worst_case"] = max(s.ledger.worst_case_spent() for s in centring)
    clipped = sum(m.clip_report.clipped_rows for m in members)
    config = {**part.config(), "sites": len(sites), "seed": seed,
              **_outcome(moments, centring, clipped), "wall_seconds": time.perf_counter() - start}
    return centred_result(part.server.result(privacy, config), moments, columns)


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
        sites, bounds, columns, seed: as :func:`run_centred`.
        k: number of components.
        policy: every site's :class:`~fedpca.algorithms.centring.CentredPolicy` (default: its
            defaults); a central method uses its budget, split, scaling and clip norm for
            the curator.
        method: ``"dpdis-pca"``, ``"dps-pca"`` (:func:`run_centred`), or a central method
            on the pooled rows: ``"analyze-gauss"``, ``"mod-sulq"`` or ``"ppca"``.
        variant, r, weighting: DPdisPCA's (:func:`centred_dpdis`).
        variance: keep the fewest components, at most ``k``, whose cumulative DP
            explained-variance ratio reaches this share
            (:func:`~fedpca.algorithms.explained_variance.choose_k`; post-processing of the
            whole noisy matrix, so not with DPdisPCA's factor variant, DPS-PCA nor PPCA).
        s_hat: DPS-PCA's (:func:`centred_dps`).
        burn_in: PPCA's Gibbs sweeps before the released frame (``k > 1``;
            :func:`~fedpca.algorithms.ppca.run_ppca`).

    Privacy guarantee: see the module docstring; the result's ``privacy`` states the split.
    """
    require_choice(method, "method", METHODS)
    if method not in CENTRAL_METHODS:
        options = ({"s_hat": s_hat} if method == DPS_PCA
                   else {"variant": variant, "r": r, "weighting": weighting})
        return run_centred(method, sites, bounds, policy, columns, seed, k=k,
                           variance=variance, **options)
    start = time.perf_counter()
    require_sites(sites, bounds, columns)
    result = _central(method, sites, bounds, k, policy or CentredPolicy(), seed, variance,
                      burn_in)
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


def run_centred_kplane(sites: Sequence[np.ndarray], bounds: ColumnBounds, clusters: int,
                       subspace_dim: int, policy: CentredPolicy | None = None,
                       columns: Sequence[str] | None = None, seed: int | None = None) -> Any:
    """:func:`run_centred` of SuLQ k-plane (:func:`centred_kplane`): ``clusters`` subspaces
    of dimension ``subspace_dim``, a :class:`~fedpca.results.CentredClusteringResult`.
    Privacy guarantee (unit: one record at one site, replace-one; the record may change
    cluster): the moments release and the ``T`` rounds compose to the policy's (epsilon,
    delta) by its split, charged to one ledger per site."""
    return run_centred("sulq-kplane", sites, bounds, policy, columns, seed,
                       clusters=clusters, subspace_dim=subspace_dim)


def run_centred_ldp(sites: Sequence[np.ndarray], bounds: ColumnBounds, k: int,
                    policy: CentredPolicy | None = None, columns: Sequence[str] | None = None,
                    seed: int | None = None, sparse: bool = False,
                    lam: float | None = None) -> CentredPCAResult:
    """:func:`run_centred` of LDP-PCA (:func:`centred_ldp`; default policy
    ``CentredPolicy(local=True)``). Privacy guarantee (unit: one record, replace-one; local
    model): every record's moments view (multiplier ``z_m``) and its covariance view
    ``x_c x_c^T + Z`` (``z_a``) compose to the policy's (epsilon, delta) on their own,
    whoever sees them (its own site included); each site's ledger is charged the record's
    multipliers."""
    return run_centred("ldp-pca", sites, bounds, policy, columns, seed, k=k, sparse=sparse,
                       lam=lam)


def centred_dpdis(setup: CentredSetup, k: int, variant: str = VARIANT_FACTOR,
                  r: int | None = None, weighting: str = WEIGHTING_UNIFORM,
                  variance: float | None = None) -> CentredAlgorithm:
    """DPdisPCA's part: its server (``k``, ``variant``, ``r``, ``weighting``, ``variance``:
    :func:`~fedpca.algorithms.dpdis_pca.run_dpdis_pca`'s), inside a secure sum for the
    ``"secure-sum"`` variant, which needs a discrete policy and only it takes one."""
    secure = variant == VARIANT_SECURE
    if secure != setup.policy.discrete:
        raise ConfigurationError(
            "the secure-sum variant needs a policy with secure_min_sites and discrete=True, "
            "and only it takes one")
    algorithm_secure = (secure_sum_for(setup.share, setup.bounds.dim, setup.max_records,
                                       setup.sites, setup.rotation_seed) if secure else None)
    server = DPdisPCAServer(setup.bounds.dim, k, r, weighting, variant, None,
                            algorithm_secure, variance)
    return CentredAlgorithm(server, centred_privacy(setup.policy, setup.bounds), lambda: {
        "k": server.k, "variance": variance, "r": server.r, "variant": variant,
        "weighting": weighting})


def centred_dps(setup: CentredSetup, k: int, s_hat: int | None = None,
                variance: float | None = None) -> CentredAlgorithm:
    """DPS-PCA's part: its server (``k``; ``s_hat`` rows kept by thresholding, default
    ``d``: none), ``T = algorithm_releases - 1`` power rounds (one fewer with the
    explained variance), inside secure sums with a discrete policy. It needs ``k`` before
    its first round, so no ``variance``."""
    if variance is not None:
        raise ConfigurationError("DPS-PCA needs k before its first round: give k, not variance")
    policy, dim = setup.policy, setup.bounds.dim
    rounds = policy.algorithm_releases - 1 - int(policy.explained_variance)
    if rounds < 1:
        raise ConfigurationError(
            "DPS-PCA makes T + 1 releases (its initialisation and T power steps; T + 2 with "
            "the explained variance): give the policy algorithm_releases = T + 1 >= 2 (T + 2 "
            "with explained_variance)")
    secure = (secure_sums(setup.share, dim, k, setup.max_records, setup.sites,
                          setup.rotation_seed) if policy.discrete else None)
    s_hat = dim if s_hat is None else s_hat
    server = DPSPCAServer(dim, k, s_hat, rounds, seed=setup.seed, secure=secure,
                          explained_variance=policy.explained_variance)
    return CentredAlgorithm(server, centred_privacy(policy, setup.bounds, DPS_MECHANISM),
                            lambda: {"k": k, "s_hat": s_hat, "rounds": rounds})


def centred_kplane(setup: CentredSetup, clusters: int, subspace_dim: int) -> CentredAlgorithm:
    """SuLQ k-plane's part: ``policy.algorithm_releases`` rounds ``T`` of ``clusters``
    subspaces of dimension ``subspace_dim`` on rows clipped to the site's own ``C``, inside
    secure sums with a discrete policy."""
    policy, share = setup.policy, setup.share
    secure = (kplane_secure_sum(share, setup.bounds.dim, clusters, setup.max_records,
                                setup.sites, setup.rotation_seed) if policy.discrete else None)
    server = KPlaneServer(setup.bounds.dim, clusters, subspace_dim, policy.algorithm_releases,
                          clip_norm=share.clip_norm, seed=setup.seed, secure=secure)
    return CentredAlgorithm(server, centred_privacy(policy, setup.bounds, KPLANE_MECHANISM),
                            lambda: {"clusters": clusters, "subspace_dim": subspace_dim,
                                     "rounds": policy.algorithm_releases})


def centred_ldp(setup: CentredSetup, k: int, sparse: bool = False,
                lam: float | None = None) -> CentredAlgorithm:
    """LDP-PCA's part: its server (``k``, ``sparse``, ``lam``:
    :func:`~fedpca.algorithms.ldp_pca.run_ldp_pca`'s) with the per-record noise; refused
    unless the policy is local with one algorithm release."""
    policy = setup.policy
    if not policy.local or policy.algorithm_releases != 1:
        raise ConfigurationError(
            "LDP-PCA protects every record against everyone, its own site included: its "
            "moments must be local too and it makes one release; give a CentredPolicy with "
            "local=True and algorithm_releases=1")
    privacy = centred_ldp_privacy(policy, setup.bounds)
    server = LDPCovarianceServer(setup.bounds.dim, k, sparse=sparse, lam=lam,
                                 record_sigma=privacy["sigma"])
    return CentredAlgorithm(server, privacy, lambda: {"k": k, "sparse": sparse, "lam": lam})


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

"""Central baselines: one curator holds the pooled records (MOD-SuLQ, Analyze Gauss, PPCA).

* ``run_pooled_pca``: non-private PCA of the pooled data (top-``k`` eigenvectors of
  ``A = X^T X / n``, uncentred): the upper bound every private method is compared with.
* ``run_local_pca``: the same on one site's records only: what a site gets by not
  collaborating (the lower bound).
* ``run_analyze_gauss``: Analyze Gauss (Dwork, Talwar, Thakurta, Zhang, "Analyze Gauss:
  optimal bounds for privacy-preserving principal component analysis", STOC 2014,
  https://doi.org/10.1145/2591796.2591883): top-``k`` eigenvectors of ``X^T X + E``, ``E``
  symmetric with its upper triangle (diagonal included) i.i.d. ``N(0, sigma^2)``,
  ``sigma = z sqrt(2) C^2``: ``sqrt(2) C^2`` is the replace-one L2 sensitivity of that upper
  triangle, ``z`` the analytic Gaussian multiplier of one release
  (:func:`fedpca.dp.calibration.calibrate_gaussian`, PLD accountant; ``accounting="paper"`` is
  the classic ``sqrt(2 ln(1.25/delta)) / eps``, eps < 1 only).
* ``run_mod_sulq``: MOD-SuLQ (Chaudhuri, Sarwate, Sinha, "Near-optimal differentially
  private principal components", NIPS 2012, Alg. 1): top-``k`` eigenvectors of ``A + N``,
  ``N`` symmetric with upper triangle i.i.d. ``N(0, beta^2)`` and the paper's own
  ``beta = (d+1)/(n alpha) sqrt(2 log((d^2+d)/(2 sqrt(2 pi) delta))) + 1/(sqrt(alpha) n)``.

Privacy (unit: one record of the pooled data, neighbouring datasets differ by replacing one
record, so ``n`` is public; every row clipped to the public norm ``C`` first). Trust model:
a trusted curator sees every raw record and releases only the result. Analyze Gauss is
(epsilon, delta)-DP by the analytic Gaussian mechanism. MOD-SuLQ is (alpha, delta)-DP by the
paper's Theorem 1, for rows of norm ``<= 1`` (fedpca applies it to ``X / C`` and rescales,
which changes no eigenvector); fedpca uses the paper's calibration as published and, as a
cross-check, reports the exact epsilon the same noise gives as a Gaussian mechanism with L2
sensitivity ``sqrt(2) C^2 / n`` (``epsilon_analytic``: well below alpha, the paper's beta is
conservative). The paper's beta is undefined when ``(d^2+d)/(2 sqrt(2 pi) delta) <= 1``
(only ``d = 1`` with ``delta >= 0.399``): refused. The top-``k`` eigenvalues of the noisy matrix
(scaled to ``A``) are
post-processing of the release and are returned in the history, and as the result's
``explained_variance`` (clamped at 0) with its ratio over the noisy matrix's trace
(:mod:`fedpca.algorithms.explained_variance`).

Computation (changes no law, no guarantee): the released matrix is kept factored,
``X^T X / divisor + E`` (:class:`~fedpca.linalg.subspace.GramPlusSymmetric`), and only its top ``k``
eigenpairs are computed: by the thin SVD of ``X`` for the non-private baselines when
``n < d``, by Lanczos on ``v -> X^T (X v) / divisor + E v`` for the noisy matrices when
``d >= 1000`` and ``k`` is small (:func:`fedpca.linalg.subspace.eigensolver_for`), by a dense
``eigh`` otherwise. ``E`` is drawn in blocks of rows, bit for bit the matrix the dense
:func:`fedpca.dp.mechanisms.symmetric_gaussian` gives for the same generator. Either way the
components are the top eigenvectors of the same noisy matrix, to the solver's tolerance
(:data:`fedpca.linalg.subspace.LANCZOS_TOL`): post-processing of the release.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from fedpca.algorithms.explained_variance import along_basis
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import GramPlusSymmetric
from fedpca.dp.calibration import (
    Calibration,
    calibrate_gaussian,
    check_privacy_parameters,
    pld_epsilon,
)
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import NoiseSource, upper_triangle_sensitivity
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_positive_int, validate_site_data
from fedpca.results import PCAResult

logger = logging.getLogger(__name__)

POOLED = "pooled-pca"
LOCAL = "local-pca"
ANALYZE_GAUSS = "analyze-gauss"
MOD_SULQ = "mod-sulq"
#: Name of the curator in messages and in its noise stream.
CURATOR = "curator"
UNIT = "one record of the pooled data (replace-one)"
TRUST_CENTRAL = "central (trusted curator)"
TRUST_NONE = "none"
#: The history entry of a one-shot release.
PHASE_RELEASE = "release"


def check_components(k: object, dim: int) -> int:
    """Return ``k`` if it is an integer in ``1..dim``, else raise ConfigurationError."""
    k = require_positive_int(k, "k")
    if k > dim:
        raise ConfigurationError(
            f"k={k} components exceed the {dim} features of the data; choose k <= {dim}"
        )
    return k


def prepare_central(data: np.ndarray | SiteData, clip_norm: float) -> SiteData:
    """The curator's records, validated and clipped to ``clip_norm`` (once)."""
    if not isinstance(data, SiteData):
        return SiteData.prepare(data, clip_norm, site=CURATOR)
    if data.clip.clip_norm != clip_norm:
        raise ConfigurationError(
            f"data was clipped to norm {data.clip.clip_norm} but clip_norm={clip_norm}; "
            "prepare it with the same clip norm"
        )
    return data


def pool_sites(sites: Sequence[np.ndarray]) -> np.ndarray:
    """The union of the sites' records (rows stacked in site order), each site validated."""
    if not sites:
        raise ConfigurationError("pool_sites needs at least one site")
    arrays = [validate_site_data(X, site=f"site {i}") for i, X in enumerate(sites)]
    dims = {X.shape[1] for X in arrays}
    if len(dims) != 1:
        raise ConfigurationError(f"all sites must have the same number of features, got {dims}")
    return np.vstack(arrays)


def released_eigenvalues(result: PCAResult) -> np.ndarray | None:
    """The eigenvalues a central method released (None if it released none)."""
    try:
        return result.explained_variance_
    except AttributeError:
        return None


@dataclass(frozen=True)
class CentralRelease:
    """The second-moment matrix a central method takes its components from, and how it
    was obtained (noisy and released for the private methods, exact for the baselines).

    The matrix is kept factored, ``X^T X / divisor + E``, so it holds the curator's raw
    records: the object stays with the curator; what may leave is :attr:`matrix` (the
    release) or what is computed from it.

    Attributes:
        factored: the symmetric ``d x d`` matrix as ``X^T X / divisor + E`` (``E`` is the
            noise, ``None`` for the non-private baselines).
        scale: multiply the matrix's eigenvalues by this to put them on ``A = X^T X / n``.
        privacy: the guarantee (the result's privacy record).
        config: the run's parameters.
    """

    factored: GramPlusSymmetric
    scale: float
    privacy: dict[str, Any]
    config: dict[str, Any]

    @cached_property
    def matrix(self) -> np.ndarray:
        """The symmetric ``d x d`` matrix itself (formed on first use: ``O(n d^2)``)."""
        return self.factored.dense()


def _result(algorithm: str, release: CentralRelease, k: int, start: float) -> PCAResult:
    """Top-``k`` eigenvectors of the released matrix, with its (scaled) eigenvalues."""
    values, basis = release.factored.top_eigenpairs(k)
    config = {**release.config, "k": k, "wall_seconds": time.perf_counter() - start}
    history = [
        {"round": 1, "phase": PHASE_RELEASE, "eigenvalues": (values * release.scale).tolist()}
    ]
    logger.info("%s: k=%d, n=%s, d=%d", algorithm, k, config["samples"], basis.shape[0])
    explained, ratio = along_basis(basis, release.factored.matmat(basis) * release.scale,
                                   release.factored.trace() * release.scale)
    return PCAResult(algorithm, basis, release.privacy, history, config, [[CURATOR]],
                     explained_variance=explained, explained_variance_ratio=ratio)


def _nonprivate(X: np.ndarray, k: int, algorithm: str, config: dict[str, Any]) -> PCAResult:
    start = time.perf_counter()
    X = validate_site_data(X, site=CURATOR)
    k = check_components(k, X.shape[1])
    n, d = X.shape
    privacy = {
        "mechanism": "none (non-private baseline)",
        "epsilon": None,
        "delta": None,
        "sensitivity": None,
        "sigma": None,
        "unit": None,
        "trust_model": TRUST_NONE,
    }
    release = CentralRelease(
        GramPlusSymmetric(X), 1.0 / n, privacy, {**config, "samples": n, "dim": d}
    )
    return _result(algorithm, release, k, start)


def run_pooled_pca(X: np.ndarray, k: int) -> PCAResult:
    """Non-private PCA of the pooled records: top-``k`` eigenvectors of ``X^T X / n``.

    No privacy: the output is a deterministic function of the raw data (upper bound).
    Rows are used as given (no clipping, no centring).
    """
    return _nonprivate(X, k, POOLED, {})


def run_local_pca(sites: Sequence[np.ndarray], k: int, site: int = 0) -> PCAResult:
    """Non-private PCA of site ``site``'s records alone (the lower bound).

    No privacy is needed: nothing leaves the site.
    """
    if not 0 <= site < len(sites):
        raise ConfigurationError(f"site must be in 0..{len(sites) - 1}, got {site}")
    return _nonprivate(sites[site], k, LOCAL, {"site": site, "sites": len(sites)})


def _run_config(data: SiteData, clip_norm: float, seed: int | None) -> dict[str, Any]:
    n, d = data.X.shape
    return {
        "samples": n, "dim": d, "clip_norm": clip_norm, "seed": seed,
        "clipped_rows": data.clip.clipped_rows,
    }


def analyze_gauss_release(
    data: np.ndarray | SiteData,
    epsilon: float,
    delta: float,
    clip_norm: float = 1.0,
    accounting: str = "pld",
    seed: int | None = None,
) -> CentralRelease:
    """``X^T X + E``: the Analyze Gauss release (arguments as :func:`run_analyze_gauss`).

    Privacy guarantee: (epsilon, delta)-DP per record (replace-one), central trust model.
    """
    cal = calibrate_gaussian(1, epsilon, delta, accounting, paper_rule="classic")
    release = calibrated_analyze_gauss(data, cal, clip_norm, seed)
    config = {**release.config, "epsilon": epsilon, "delta": delta, "accounting": accounting}
    return CentralRelease(release.factored, release.scale, release.privacy, config)


def calibrated_analyze_gauss(
    data: np.ndarray | SiteData, cal: Calibration, clip_norm: float = 1.0,
    seed: int | None = None,
) -> CentralRelease:
    """``X^T X + E`` with the noise multiplier of ``cal`` (e.g. one part of a run's split
    budget, :mod:`fedpca.dp.budget_split`).

    Privacy guarantee: one Gaussian release of multiplier ``cal.noise_multiplier`` at the
    replace-one sensitivity ``sqrt(2) C^2`` (central trust model); its privacy record
    states ``cal``'s target and achieved epsilon.
    """
    data = prepare_central(data, clip_norm)
    d = data.X.shape[1]
    sensitivity = upper_triangle_sensitivity(clip_norm)
    sigma = cal.sigma(sensitivity)
    noisy = GramPlusSymmetric(
        data.X, 1.0, NoiseSource(seed, ANALYZE_GAUSS).symmetric(0, sigma, d)
    )
    privacy = {
        "mechanism": "analyze-gauss: X^T X + symmetric Gaussian noise on its upper triangle",
        "unit": UNIT,
        "epsilon": cal.target_epsilon,
        "epsilon_achieved": cal.epsilon,
        "epsilon_rdp": cal.epsilon_rdp,
        "delta": cal.delta,
        "accounting": cal.accounting,
        "releases": 1,
        "noise_multiplier": cal.noise_multiplier,
        "sensitivity": sensitivity,
        "sigma": sigma,
        "clip_norm": clip_norm,
        "trust_model": TRUST_CENTRAL,
    }
    return CentralRelease(noisy, 1.0 / data.X.shape[0], privacy,
                          _run_config(data, clip_norm, seed))


def run_analyze_gauss(
    data: np.ndarray | SiteData,
    k: int,
    epsilon: float,
    delta: float,
    clip_norm: float = 1.0,
    accounting: str = "pld",
    seed: int | None = None,
) -> PCAResult:
    """Analyze Gauss: top-``k`` eigenvectors of ``X^T X + E`` (``E`` symmetric Gaussian).

    Privacy guarantee: (epsilon, delta)-DP per record of the pooled data (replace-one),
    central trust model; ``sigma = z sqrt(2) C^2`` with ``z`` the analytic Gaussian
    multiplier for one release (``accounting="pld"``), or the classic formula
    (``"paper"``, eps < 1 only).

    Args:
        data: the pooled ``n x d`` records (or a :class:`SiteData` clipped to ``clip_norm``).
        k: number of components.
        epsilon, delta: the privacy budget of the single release.
        clip_norm: public row-norm bound ``C``.
        accounting: ``"pld"`` (default), ``"rdp"`` or ``"paper"``.
        seed: seed for reproducible simulation only (``None``: OS randomness).
    """
    start = time.perf_counter()
    data = prepare_central(data, clip_norm)
    k = check_components(k, data.X.shape[1])
    release = analyze_gauss_release(data, epsilon, delta, clip_norm, accounting, seed)
    return _result(ANALYZE_GAUSS, release, k, start)


def mod_sulq_beta(dim: int, n: int, epsilon: float, delta: float) -> float:
    """The paper's noise level for ``A = X^T X / n`` with rows of norm ``<= 1``:
    ``(d+1)/(n alpha) sqrt(2 log((d^2+d)/(2 sqrt(2 pi) delta))) + 1/(sqrt(alpha) n)``."""
    check_privacy_parameters(epsilon, delta)
    argument = (dim**2 + dim) / (2 * math.sqrt(2 * math.pi) * delta)
    if argument <= 1:
        raise ConfigurationError(
            f"MOD-SuLQ's beta is undefined for d={dim}, delta={delta}: the logarithm's "
            f"argument (d^2+d)/(2 sqrt(2 pi) delta) = {argument:.3g} is <= 1; use a smaller "
            "delta or run_analyze_gauss"
        )
    return (dim + 1) / (n * epsilon) * math.sqrt(2 * math.log(argument)) + 1 / (
        math.sqrt(epsilon) * n
    )


def mod_sulq_noise(dim: int, n: int, epsilon: float, delta: float,
                   clip_norm: float) -> Release:
    """MOD-SuLQ's release of ``A = X^T X / n`` (``n`` rows of norm ``<= clip_norm``) as the
    ledger accounts for it: noise ``sigma = beta C^2`` (:func:`mod_sulq_beta`) at the
    Gaussian's replace-one sensitivity ``sqrt(2) C^2 / n``. Public: it reads no data."""
    sigma = mod_sulq_beta(dim, n, epsilon, delta) * clip_norm**2
    return Release(MOD_SULQ, upper_triangle_sensitivity(clip_norm) / n, sigma, (dim, dim))


def mod_sulq_release(
    data: np.ndarray | SiteData,
    epsilon: float,
    delta: float,
    clip_norm: float = 1.0,
    seed: int | None = None,
) -> CentralRelease:
    """``A + C^2 N``: the MOD-SuLQ release (arguments as :func:`run_mod_sulq`).

    Privacy guarantee: (epsilon, delta)-DP per record (replace-one) by the paper's Theorem 1,
    central trust model.
    """
    data = prepare_central(data, clip_norm)
    n, d = data.X.shape
    noise = mod_sulq_noise(d, n, epsilon, delta, clip_norm)
    sigma, sensitivity = noise.sigma, noise.sensitivity
    noisy = GramPlusSymmetric(
        data.X, float(n), NoiseSource(seed, MOD_SULQ).symmetric(0, sigma, d)
    )
    privacy = {
        "mechanism": "mod-sulq: A = X^T X / n + symmetric Gaussian noise, the paper's beta",
        "calibration": "paper (Chaudhuri, Sarwate, Sinha 2012, Alg. 1 and Theorem 1)",
        "unit": UNIT,
        "epsilon": epsilon,
        "delta": delta,
        "beta": sigma / clip_norm**2,
        "sigma": sigma,
        "sensitivity": sensitivity,
        "noise_multiplier": sigma / sensitivity,
        "epsilon_analytic": pld_epsilon((sigma / sensitivity,), delta),
        "clip_norm": clip_norm,
        "trust_model": TRUST_CENTRAL,
    }
    config = {**_run_config(data, clip_norm, seed), "epsilon": epsilon, "delta": delta}
    return CentralRelease(noisy, 1.0, privacy, config)


def run_mod_sulq(
    data: np.ndarray | SiteData,
    k: int,
    epsilon: float,
    delta: float,
    clip_norm: float = 1.0,
    seed: int | None = None,
) -> PCAResult:
    """MOD-SuLQ: top-``k`` eigenvectors of ``A + C^2 N``, ``N`` symmetric ``N(0, beta^2)``.

    Privacy guarantee: (epsilon, delta)-DP per record of the pooled data (replace-one),
    central trust model, by the paper's Theorem 1 and its own ``beta`` (see the module
    docstring for what it assumes); ``epsilon`` is the paper's ``alpha``.

    Args:
        data: the pooled ``n x d`` records (or a :class:`SiteData` clipped to ``clip_norm``).
        k: number of components.
        epsilon, delta: the privacy budget (the paper's ``alpha`` and ``delta``).
        clip_norm: public row-norm bound ``C`` (the paper's analysis is for ``C = 1``;
            fedpca runs it on ``X / C``).
        seed: seed for reproducible simulation only (``None``: OS randomness).
    """
    start = time.perf_counter()
    data = prepare_central(data, clip_norm)
    k = check_components(k, data.X.shape[1])
    return _result(MOD_SULQ, mod_sulq_release(data, epsilon, delta, clip_norm, seed), k, start)

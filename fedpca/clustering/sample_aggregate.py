"""Private subspace clustering by sample-aggregate with smooth sensitivity (TSC per block).

Paper: Wang, Wang, Singh, "Differentially Private Subspace Clustering", NIPS 2015
(https://papers.nips.cc/paper/5991), Sec. 3, Alg. 1 (the framework of Nissim, Raskhodnikova,
Smith, "Smooth sensitivity and sampling in private data analysis", STOC 2007, "NRS"), with
thresholding-based subspace clustering (:mod:`fedpca.clustering.tsc`) as the solver ``f``:

1. split the records into ``m`` blocks (a uniformly random partition from public randomness,
   ``floor(n/m)`` records each, the remainder unused);
2. run TSC on every block: ``b_i = f(block_i)``, ``k`` subspaces;
3. map each ``b_i`` to ``R^D`` by the projections ``P_l = U_l U_l^T``, each written as its
   upper triangle with the off-diagonal entries times ``sqrt(2)`` (an isometry:
   ``D = k d (d+1) / 2``); the metric is the paper's Wasserstein distance (eq. 2 with eq. 1's
   ``d(S, S') = ||U U^T - U' U'^T||_F``):
   ``d_M(b, b') = min_pi (sum_l ||P_l - P'_pi(l)||_F^2)^(1/2)``
   (:func:`paper_wasserstein_distance`);
4. aggregation ("center of attention"): with ``s = 1`` and ``t0 = floor((m + s)/2) + 1``,
   output ``g(B) = b_i*``, ``i* = argmin_i r_i(t0)``, ``r_i(t)`` the distance from ``b_i`` to
   its ``t``-th nearest point of ``B`` (``b_i`` itself first, ``r_i(1) = 0``; ``r_i(t) = Lambda``
   for ``t > m``, ``Lambda = (2 k min(q, d - q))^(1/2)`` the diameter of the output space);
5. noise: ``S(B) = max_{k >= 0} e^(-beta k) min(2 rho(t0 + (k+1) s), Lambda)`` and release
   ``g(B) + S(B)/alpha * u``, ``u ~ N(0, I_D)``, ``alpha = eps / (5 sqrt(2 ln(2/delta)))``,
   ``beta = eps / (4 (D + ln(2/delta)))`` (Alg. 1 lines 2, 6, 7);
6. decode (post-processing): each noisy symmetric ``d x d`` matrix gives its top-``q``
   eigenvectors.

Privacy guarantee (central trust model: a trusted curator holds every record). Unit: one
record of the pooled data, replace-one (``n`` public). The release is (eps, delta)-DP by NRS's
smooth-sensitivity framework: Gaussian noise of scale ``S/alpha`` in ``R^D`` is
(eps, delta)-DP when ``S`` is a ``beta``-smooth upper bound on the local sensitivity of ``g``
(NRS's admissible-noise lemma, with the constants of Alg. 1 line 2; the text gives them
without a range of eps and NRS's proof is not in the project's copy: for eps >= 1 this is the
paper's claim, not checked here). The released *set* of subspaces does not depend on the
order of the ``k`` subspaces in ``g(B)`` (the noise is i.i.d.), so the sensitivity is measured
in ``d_M`` (the minimum over orders). The smoothed noise scale ``S(B)`` and the block outputs
are computed from the raw data and are NOT private: they stay in the curator's history.

Where fedpca departs from the text, and why (both towards a guarantee it can prove):

* **Blocks.** Alg. 1 draws ``m`` independent subsets of size ``n/m`` and repeats until no
  record lies in more than ``s = sqrt(m)`` of them. fedpca uses a random *partition*, so each
  record lies in exactly one block and ``s = 1``: every line of the analysis needs only
  ``s >= `` the number of blocks one record touches, and ``s = 1`` shrinks the noise
  (``t0`` and the smoothing steps move by 1 instead of ``sqrt(m)``).
* **rho.** Alg. 1 line 6 says "rho(t) is the mean of the top floor(s/beta) values in
  {r_1(t), ..., r_m(t)}"; the extraction does not say whether "top" is largest or smallest
  nor what happens when ``floor(s/beta) > m`` (with Fig. 2's dimensions and a few dozen
  blocks: at every eps below a few tens),
  and Theorem 3.1 needs ``eps > 2D/sqrt(m)`` for it, which fails on most of Fig. 2's grid.
  fedpca uses the order statistic ``rho(t) = `` the ``(t - t0 + 1)``-th smallest of
  ``{r_i(t)}``, which makes ``S`` a ``beta``-smooth upper bound for every ``m``, ``s``, eps.
  Proof sketch (``B ~ B'``: at most ``s`` entries differ): (a) ``d(g(B), g(B')) <=
  r_i*(t0; B) + r_j*(t0; B')``, because each ball holds ``>= t0 - s`` unchanged points and
  ``2 (t0 - s) > m - s``, so they share one; (b) if ``B''`` differs from ``B`` in at most
  ``(k+1) s`` entries, ``min_i r_i(t0; B'') <= rho_k(B)``, the ``((k+1)s + 1)``-th smallest of
  ``r_i(t0 + (k+1)s; B)``: an unchanged ``i`` keeps ``>= t0`` points in that ball, and at
  most ``(k+1) s`` indices changed. So ``A_k(B) = min(2 rho_k(B), Lambda)`` bounds the local
  sensitivity of every ``B'`` within ``k`` steps; (c) ``rho_k(B) <= rho_{k+1}(B')`` for
  ``B ~ B'`` (``r_i(t; B) <= r_i(t + s; B')`` for unchanged ``i``, and ``s`` changed entries
  move an order statistic by at most ``s`` ranks), hence
  ``S(B) = max_k e^(-beta k) A_k(B) <= e^beta S(B')``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fedpca.algorithms.central import TRUST_CENTRAL, UNIT
from fedpca.clustering.metrics import wasserstein_subspace_distance
from fedpca.clustering.nonprivate import check_problem
from fedpca.clustering.tsc import default_neighbours, tsc_subspaces
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import top_eigenvectors, triangle_size, unpack_symmetric
from fedpca.dp.calibration import check_privacy_parameters
from fedpca.dp.mechanisms import NoiseSource
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_positive_int
from fedpca.results import ClusteringResult

logger = logging.getLogger(__name__)

ALGORITHM = "sample-aggregate-tsc"
#: Blocks one record can change: 1 for a partition (Alg. 1's ``s``; see the module docstring).
BLOCKS_PER_RECORD = 1
#: Stream keys of the public partition and of the TSC starts (one stream per block, so that
#: one record can change its own block's output only: ``s = 1``).
PARTITION_STREAM = 0x5A9
SOLVER_STREAM = 0x75C5
APPROXIMATE_ADMISSIBILITY = (
    "the Gaussian constants alpha, beta are paper 003's (from NRS) and are stated without a "
    "range of eps; NRS's proof is not in the project's copy"
)


def embedding_weights(dim: int) -> np.ndarray:
    """Weights of the upper triangle (row-major, diagonal included): 1 on the diagonal,
    ``sqrt(2)`` off it, so the packed vector's L2 norm is the matrix's Frobenius norm."""
    rows, cols = np.triu_indices(dim)
    return np.where(rows == cols, 1.0, math.sqrt(2.0))


def projection_embedding(bases: list[np.ndarray]) -> np.ndarray:
    """``(k, d(d+1)/2)``: every ``U U^T`` packed isometrically (see :func:`embedding_weights`)."""
    dim = bases[0].shape[0]
    rows, cols = np.triu_indices(dim)
    weights = embedding_weights(dim)
    return np.stack([(U @ U.T)[rows, cols] * weights for U in bases])


def decode_embedding(packed: np.ndarray, subspace_dim: int) -> list[np.ndarray]:
    """Each row of a (noisy) embedding to the top-``q`` eigenvectors of its symmetric matrix."""
    dim = round((math.sqrt(8 * packed.shape[1] + 1) - 1) / 2)
    weights = embedding_weights(dim)
    return [top_eigenvectors(unpack_symmetric(row / weights, dim), subspace_dim)
            for row in packed]


def output_diameter(clusters: int, dim: int, subspace_dim: int) -> float:
    """``Lambda = (2 k min(q, d - q))^(1/2)``: the largest ``d_M`` between two outputs
    (``||P - P'||_F^2 = 2q - 2 ||U^T U'||_F^2`` and ``||U^T U'||_F^2 >= max(0, 2q - d)``)."""
    return math.sqrt(2 * clusters * min(subspace_dim, dim - subspace_dim))


def paper_wasserstein_distance(bases_a: list[np.ndarray], bases_b: list[np.ndarray]) -> float:
    """Paper 003's ``d_W`` (eq. 2 with eq. 1's ``d(S, S') = ||U U^T - U' U'^T||_F``):
    ``(min_pi sum_l ||P_l - P'_pi(l)||_F^2)^(1/2)``, i.e. ``(2 W)^(1/2)`` with ``W`` the
    sum of squared ``||sin Theta||_F`` of :func:`wasserstein_subspace_distance`. It is the
    metric ``d_M`` of the aggregation, and what Fig. 2 plots."""
    return math.sqrt(2.0 * wasserstein_subspace_distance(bases_a, bases_b))


def block_distances(outputs: list[list[np.ndarray]]) -> np.ndarray:
    """``m x m`` matrix of ``d_M`` between the block outputs."""
    m = len(outputs)
    out = np.zeros((m, m))
    for i in range(m):
        for j in range(i + 1, m):
            out[i, j] = out[j, i] = paper_wasserstein_distance(outputs[i], outputs[j])
    return out


def neighbour_radii(distances: np.ndarray) -> np.ndarray:
    """``radii[i, t - 1] = r_i(t)``: each row of ``distances`` sorted (``r_i(1) = 0``)."""
    return np.sort(distances, axis=1)


def attention_rank(blocks: int, s: int = BLOCKS_PER_RECORD) -> int:
    """``t0 = floor((m + s) / 2) + 1`` (Alg. 1 line 5), so that ``2 t0 > m + s``."""
    return (blocks + s) // 2 + 1


def center_of_attention(radii: np.ndarray, s: int = BLOCKS_PER_RECORD) -> int:
    """``i* = argmin_i r_i(t0)`` (the first on ties)."""
    return int(np.argmin(radii[:, attention_rank(radii.shape[0], s) - 1]))


def smooth_sensitivity(
    radii: np.ndarray, beta: float, diameter: float, s: int = BLOCKS_PER_RECORD
) -> float:
    """``S(B) = max_k e^(-beta k) min(2 rho(t0 + (k+1) s), Lambda)`` (see the module
    docstring): ``rho(t)`` is the ``(t - t0 + 1)``-th smallest of ``r_1(t) .. r_m(t)``, and
    ``Lambda`` once ``t > m``. The terms grow with ``k`` until they reach ``Lambda``, after
    which only the factor ``e^(-beta k)`` changes, so the scan stops there."""
    m = radii.shape[0]
    t0 = attention_rank(m, s)
    best, k = 0.0, 0
    while True:
        t = t0 + (k + 1) * s
        term = diameter if t > m else min(
            2.0 * float(np.sort(radii[:, t - 1])[t - t0]), diameter)
        best = max(best, math.exp(-beta * k) * term)
        if term >= diameter:
            return best
        k += 1


@dataclass(frozen=True)
class GaussianSmoothNoise:
    """Alg. 1 line 2's constants for Gaussian noise in ``R^D``.

    Attributes:
        epsilon, delta: the guarantee.
        dimension: ``D``, the output dimension.
        alpha: ``eps / (5 sqrt(2 ln(2/delta)))``: the noise std is ``S(B) / alpha``.
        beta: ``eps / (4 (D + ln(2/delta)))``: the smoothing rate of ``S``.
    """

    epsilon: float
    delta: float
    dimension: int

    @property
    def alpha(self) -> float:
        return self.epsilon / (5.0 * math.sqrt(2.0 * math.log(2.0 / self.delta)))

    @property
    def beta(self) -> float:
        return self.epsilon / (4.0 * (self.dimension + math.log(2.0 / self.delta)))


def block_partition(n: int, blocks: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A uniformly random partition of ``range(n)`` into ``blocks`` blocks of
    ``floor(n / blocks)`` indices (the remainder is left out)."""
    size = n // blocks
    return list(rng.permutation(n)[: blocks * size].reshape(blocks, size))


@dataclass(frozen=True)
class Aggregate:
    """One aggregation of the blocks' outputs (Alg. 1 lines 5-7).

    Attributes:
        released: ``(k, d(d+1)/2)`` noisy embedding of the chosen output: the DP release.
        chosen: index ``i*`` of the block output at the center of attention.
        t0: the rank ``t0``.
        attention_radius: ``r_i*(t0)``.
        smooth_sensitivity: ``S(B)``.
        sigma: the noise standard deviation ``S(B) / alpha`` per coordinate.
        diameter: ``Lambda``.
    All but ``released`` are computed from the raw data: NOT private.
    """

    released: np.ndarray
    chosen: int
    t0: int
    attention_radius: float
    smooth_sensitivity: float
    sigma: float
    diameter: float


def aggregate_outputs(
    outputs: list[list[np.ndarray]], noise: GaussianSmoothNoise, rng: np.random.Generator
) -> Aggregate:
    """The center of attention of the block outputs plus Gaussian noise of scale
    ``S(B) / alpha`` (``outputs``: per block, ``k`` orthonormal ``d x q`` bases)."""
    clusters, (dim, subspace_dim) = len(outputs[0]), outputs[0][0].shape
    radii = neighbour_radii(block_distances(outputs))
    diameter = output_diameter(clusters, dim, subspace_dim)
    chosen = center_of_attention(radii)
    scale = smooth_sensitivity(radii, noise.beta, diameter)
    sigma = scale / noise.alpha
    center = projection_embedding(outputs[chosen])
    t0 = attention_rank(len(outputs))
    return Aggregate(
        released=center + sigma * rng.standard_normal(center.shape), chosen=chosen, t0=t0,
        attention_radius=float(radii[chosen, t0 - 1]), smooth_sensitivity=scale,
        sigma=sigma, diameter=diameter,
    )


def privacy_record(noise: GaussianSmoothNoise, blocks: int, clip_norm: float) -> dict[str, Any]:
    """The guarantee of a sample-aggregate release (see the module docstring)."""
    return {
        "mechanism": "sample-aggregate with smooth sensitivity (NRS 2007, paper 003 Alg. 1): "
        "center of attention of the blocks' TSC outputs + Gaussian noise S(B)/alpha",
        "unit": UNIT,
        **asdict(noise),
        "alpha": noise.alpha,
        "beta": noise.beta,
        "blocks": blocks,
        "blocks_per_record": BLOCKS_PER_RECORD,
        "released": "the noisy embedding's decoded bases",
        "not_private": "history (the smoothed noise scale S(B), the blocks' spread and the "
        "chosen block, computed from the raw data: for the curator only)",
        "clip_norm": clip_norm,
        "trust_model": TRUST_CENTRAL,
        "caveats": [APPROXIMATE_ADMISSIBILITY],
    }


def run_sample_aggregate(
    X: np.ndarray | SiteData,
    clusters: int,
    subspace_dim: int,
    epsilon: float,
    delta: float,
    blocks: int,
    seed: int | None = None,
    neighbours: int | None = None,
    clip_norm: float = 1.0,
) -> ClusteringResult:
    """Sample-aggregate subspace clustering (paper 003 Sec. 3, Alg. 1) with TSC per block.

    Privacy guarantee: (epsilon, delta)-DP per record of the pooled data (replace-one),
    central trust model, by NRS's smooth-sensitivity framework (see the module docstring for
    the two places fedpca departs from the text and the caveat on the Gaussian constants).

    Args:
        X: the pooled ``n x d`` records (rows clipped to norm ``clip_norm``; the release does
            not depend on the records' scale, only on their directions).
        clusters: number of subspaces ``k >= 1``.
        subspace_dim: their dimension ``q``, ``1 <= q < d``.
        epsilon: finite and > 0.
        delta: in (0, 1); the paper uses ``1 / (n ln n)``.
        blocks: ``m >= 2``; each block of ``floor(n/m)`` records must hold more than ``k``
            records and more than TSC's ``neighbours``.
        seed: seed of the partition, the TSC starts and the noise, for reproducible
            simulation only (``None``: OS randomness).
        neighbours: TSC's edges per record (default: from the block size).
        clip_norm: public row-norm bound ``C``.

    Returns:
        A :class:`ClusteringResult` with the private bases (no assignments: releasing them
        is not covered) and one history entry with the curator-only aggregation details.
    """
    start = time.perf_counter()
    check_privacy_parameters(epsilon, delta)
    data, k, q = check_problem(X, clusters, subspace_dim, clip_norm)
    n, d = data.X.shape
    blocks = require_positive_int(blocks, "blocks", minimum=2)
    size = n // blocks
    neighbours = default_neighbours(size, k, q) if neighbours is None else neighbours
    neighbours = require_positive_int(neighbours, "neighbours")
    if size <= max(k, neighbours):
        raise ConfigurationError(
            f"{blocks} blocks of {size} records are too small for TSC with {k} clusters and "
            f"{neighbours} neighbours; use fewer blocks (at most {n // (max(k, neighbours) + 1)})"
        )
    noise = GaussianSmoothNoise(float(epsilon), float(delta), k * triangle_size(d))
    partition = block_partition(n, blocks, np.random.default_rng(
        None if seed is None else [seed, PARTITION_STREAM]))
    outputs = [
        tsc_subspaces(data.X[idx], k, q, neighbours, np.random.default_rng(
            None if seed is None else [seed, SOLVER_STREAM, block]))[0]
        for block, idx in enumerate(partition)
    ]
    result = aggregate_outputs(outputs, noise, NoiseSource(seed, ALGORITHM).generator(0))
    bases = decode_embedding(result.released, q)
    history = [{
        "round": 1, "sites": 1, "phase": "aggregate",
        **{key: value for key, value in asdict(result).items() if key != "released"},
    }]
    logger.info("sample-aggregate: m=%d blocks of %d, S(B)=%.4g, sigma=%.4g", blocks, size,
                result.smooth_sensitivity, result.sigma)
    config = {
        "clusters": k, "subspace_dim": q, "samples": n, "dim": d, "epsilon": epsilon,
        "delta": delta, "blocks": blocks, "block_size": size, "neighbours": neighbours,
        "seed": seed, "clip_norm": clip_norm, "clipped_rows": data.clip.clipped_rows,
        "wall_seconds": time.perf_counter() - start,
    }
    return ClusteringResult(ALGORITHM, bases, None, privacy_record(noise, blocks, clip_norm),
                            history, config)

"""(d) DPdisPCA and LDP-PCA: bytes per site, the server merge at 500 sites, the Fantope ADMM.

* **Bytes per site** (:func:`fedpca.algorithms.dpdis_pca.message_bytes`): a DPdisPCA site
  sends ``P_s`` (``d x R`` float64, ``R = 2K``) instead of the full noisy ``A^_s``
  (``d x d``); d in {200, 784}, K = 50. Totals for S = 500 sites beside them, and the size
  of ``A^_s``'s upper triangle, which is all a symmetric matrix needs (fedpca sends ``d x d``).
* **Server merge**, S = 500, d = 784, K = 50, R = 100: the real merge
  (:func:`fedpca.algorithms.dpdis_factors.merged_factor_basis`: stack the weighted
  ``P_s``, then, as ``S R >= d``, ``eigh`` of the ``d x d`` ``A_c``) against a bare
  ``np.linalg.svd(M, full_matrices=False)`` and ``scipy.linalg.svd(M, full_matrices=False)``
  of the same stacked ``M`` (``d x S R``, built once outside their timings), interleaved,
  median of the repetitions after a warm-up. The merge's time includes stacking ``M``.
  Merge cost does not depend on the factors' values; they are built cheaply with a decaying
  spectrum (a common ``d x R`` part with ``sqrt(exp(-j/25))`` columns plus per-site noise)
  so that the top-K subspace is well defined and the outputs can be compared.
* **Fantope ADMM** (:func:`fedpca.linalg.fantope.fantope_admm`) at paper 004's sparse setting:
  p = 400, n = 2000, k = 10, s = 20, eps = 1, delta = 1e-4, on the real private ``S~`` (one
  site's ``release_covariance() / n``) with the default penalty; median of the repetitions,
  iterations, time per iteration beside one bare ``scipy.linalg.eigh`` of a 400 x 400 matrix
  (the dominant step of each iteration).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg
from common import md_table, median, progress, target, timed

from fedpca.algorithms.dpdis_factors import merged_factor_basis, stacked_factors
from fedpca.algorithms.dpdis_pca import FLOAT_BYTES, merge_weights, message_bytes
from fedpca.algorithms.ldp_pca import LDPCovarianceSite, LDPPolicy, default_lambda
from fedpca.data.ldp_model import LDPSpikedModel
from fedpca.linalg.fantope import fantope_admm
from fedpca.linalg.subspace import subspace_distance, thin_qr

FULL = dict(
    bytes_dims=(200, 784), k=50, bytes_sites=500,
    merge_sites=500, merge_dim=784, merge_repetitions=3,
    admm=dict(dim=400, samples=2000, k=10, sparsity=20, epsilon=1.0, delta=1e-4),
    admm_repetitions=5,
)
QUICK = dict(FULL, merge_sites=50, merge_repetitions=2, admm_repetitions=1)
#: The merge must be no slower than a bare SVD of the same stacked matrix.
MERGE_RATIO_LIMIT = 1.0
#: Relative size of each site's own part of its factor (the common part has norm ~1).
FACTOR_NOISE = 0.05


def bytes_rows(dims: tuple[int, ...], k: int, sites: int) -> list[dict[str, Any]]:
    """Bytes one site sends, factor (``R = 2K``) vs full, and over ``sites`` sites."""
    rows = []
    for d in dims:
        r = min(2 * k, d)
        factor, full = message_bytes(d, r), message_bytes(d, None)
        triangle = d * (d + 1) // 2 * FLOAT_BYTES
        rows.append({"kind": "bytes", "dim": d, "k": k, "r": r, "factor_bytes": factor,
                     "full_bytes": full, "full_over_factor": full / factor,
                     "triangle_bytes": triangle, "triangle_over_factor": triangle / factor,
                     "sites": sites, "factor_total_bytes": sites * factor,
                     "full_total_bytes": sites * full})
    return rows


def site_factors(sites: int, dim: int, r: int, seed: int = 0) -> list[np.ndarray]:
    """``sites`` factors ``d x r``: a shared decaying-spectrum part plus per-site noise."""
    rng = np.random.default_rng(seed)
    common = thin_qr(rng.standard_normal((dim, r))) * np.sqrt(np.exp(-np.arange(r) / 25.0))
    scale = FACTOR_NOISE / math.sqrt(dim)
    return [common + scale * rng.standard_normal((dim, r)) for _ in range(sites)]


def merge_row(sites: int, dim: int, k: int, repetitions: int) -> dict[str, Any]:
    """The real merge vs bare numpy / scipy SVDs of the same stacked matrix."""
    r = 2 * k
    factors = site_factors(sites, dim, r)
    weights = merge_weights([1] * sites, "uniform")
    M = stacked_factors(factors, weights)
    contenders = {
        "fedpca": lambda: merged_factor_basis(factors, weights, k),
        "numpy": lambda: np.linalg.svd(M, full_matrices=False)[0][:, :k],
        "scipy": lambda: scipy.linalg.svd(M, full_matrices=False, check_finite=False)[0][:, :k],
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    bases: dict[str, np.ndarray] = {}
    for rep in range(repetitions + 1):  # the first round is the warm-up
        for name, fn in contenders.items():
            seconds, bases[name] = timed(fn)
            if rep:
                times[name].append(seconds)
        progress(f"   merge repetition {rep}/{repetitions}: "
                 + ", ".join(f"{n} {t[-1]:.2f}s" for n, t in times.items() if t))
    medians = {name: median(t) for name, t in times.items()}
    return {
        "kind": "merge", "sites": sites, "dim": dim, "k": k, "r": r,
        "stacked_shape": list(M.shape), "stacked_bytes": M.nbytes,
        "repetitions": repetitions, "times_s": times,
        "median_s": medians, "min_s": {name: min(t) for name, t in times.items()},
        "ratio_to_numpy": medians["fedpca"] / medians["numpy"],
        "ratio_to_scipy": medians["fedpca"] / medians["scipy"],
        "distance_to_numpy": subspace_distance(bases["fedpca"], bases["numpy"]),
    }


def admm_row(setting: dict[str, Any], repetitions: int) -> dict[str, Any]:
    """Fantope ADMM on the real private ``S~`` of paper 004's sparse setting."""
    n, p = setting["samples"], setting["dim"]
    model = LDPSpikedModel(dim=p, k=setting["k"], sparsity=setting["sparsity"])
    policy = LDPPolicy(setting["epsilon"], setting["delta"])
    S = LDPCovarianceSite(model.sample(n), policy, seed=0).release_covariance() / n
    lam = default_lambda(policy.record_sigma, p, n)
    runs = [timed(lambda: fantope_admm(S, setting["k"], lam)) for _ in range(repetitions)]
    solved = runs[-1][1]
    eigh = median([timed(lambda: scipy.linalg.eigh(S, check_finite=False))[0]
                   for _ in range(5)])
    seconds = median([t for t, _ in runs])
    return {
        "kind": "admm", **setting, "lam": lam, "repetitions": repetitions,
        "median_s": seconds, "min_s": min(t for t, _ in runs),
        "iterations": solved.iterations, "converged": solved.converged,
        "per_iteration_s": seconds / solved.iterations, "eigh_s": eigh,
        "per_iteration_over_eigh": seconds / solved.iterations / eigh,
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    rows = bytes_rows(cfg["bytes_dims"], cfg["k"], cfg["bytes_sites"])
    progress(f"   merge: S={cfg['merge_sites']}, d={cfg['merge_dim']}, K={cfg['k']}")
    rows.append(merge_row(cfg["merge_sites"], cfg["merge_dim"], cfg["k"],
                          cfg["merge_repetitions"]))
    progress(f"   Fantope ADMM: {cfg['admm']}")
    rows.append(admm_row(cfg["admm"], cfg["admm_repetitions"]))
    return rows


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    return [target("DPdisPCA merge / numpy SVD of the same stack (median)",
                   row["ratio_to_numpy"], MERGE_RATIO_LIMIT, measured=not quick)
            for row in rows if row["kind"] == "merge"]


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    by_kind = {kind: [r for r in rows if r["kind"] == kind] for kind in ("bytes", "merge", "admm")}
    mib = 2.0**20
    parts = [
        "**Bytes per site** (float64; `message_bytes`):",
        md_table(["d", "K", "R", "P_s bytes", "A^_s bytes", "A^_s / P_s",
                  "A^_s upper triangle bytes", "triangle / P_s", "S", "P_s total MiB",
                  "A^_s total MiB"],
                 [[r["dim"], r["k"], r["r"], r["factor_bytes"], r["full_bytes"],
                   r["full_over_factor"], r["triangle_bytes"], r["triangle_over_factor"],
                   r["sites"], r["factor_total_bytes"] / mib, r["full_total_bytes"] / mib]
                  for r in by_kind["bytes"]]),
    ]
    for r in by_kind["merge"]:
        parts += [
            f"**Server merge**: S={r['sites']}, d={r['dim']}, K={r['k']}, R={r['r']}; stacked "
            f"M is {r['stacked_shape'][0]} x {r['stacked_shape'][1]} "
            f"({r['stacked_bytes'] / mib:.0f} MiB); median of {r['repetitions']} interleaved "
            f"repetitions after a warm-up. Subspace distance fedpca vs numpy: "
            f"{r['distance_to_numpy']:.1e}.",
            md_table(["contender", "median s", "min s", "fedpca / contender (medians)"],
                     [["fedpca merged_factor_basis (stack + eigh of M M^T)",
                       r["median_s"]["fedpca"], r["min_s"]["fedpca"], 1.0],
                      ["np.linalg.svd(M, full_matrices=False)", r["median_s"]["numpy"],
                       r["min_s"]["numpy"], r["ratio_to_numpy"]],
                      ["scipy.linalg.svd(M, full_matrices=False)", r["median_s"]["scipy"],
                       r["min_s"]["scipy"], r["ratio_to_scipy"]]]),
        ]
    for r in by_kind["admm"]:
        parts += [
            f"**Fantope ADMM** on the private S~ (p={r['dim']}, n={r['samples']}, k={r['k']}, "
            f"s={r['sparsity']}, eps={r['epsilon']:g}, delta={r['delta']:g}, "
            f"lam={r['lam']:.3g}); median of {r['repetitions']}.",
            md_table(["median s", "min s", "iterations", "converged", "ms / iteration",
                      "bare eigh ms", "iteration / eigh"],
                     [[r["median_s"], r["min_s"], r["iterations"], r["converged"],
                       r["per_iteration_s"] * 1e3, r["eigh_s"] * 1e3,
                       r["per_iteration_over_eigh"]]]),
        ]
    return "\n\n".join(parts)

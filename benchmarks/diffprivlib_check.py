"""(g) External check: IBM diffprivlib's private PCA beside fedpca's central methods.

diffprivlib is an OPTIONAL tool of this benchmark only, never a fedpca dependency: it is
imported inside :func:`run`; when it is missing (or fails to import, as diffprivlib 0.6.6
does with scikit-learn 1.9) the benchmark says why and measures nothing.

Same data, same eps, same seeds for every method; each basis is scored against the
non-private top-k of the matrix the method targets, by ``||sin Theta||_F``
(:func:`fedpca.linalg.subspace.subspace_distance`) and ``q / q_o`` (:func:`fedpca.linalg.subspace.energy_ratio`).

* fedpca (:mod:`fedpca.experiments.central_methods`): Analyze Gauss and MOD-SuLQ at
  (eps, delta = 1e-5), PPCA (pure eps, 100 Gibbs sweeps); uncentred second moment
  ``X^T X / n`` of rows clipped to norm 1.
* ``diffprivlib.models.PCA(centered=True, data_norm=1)``: the same uncentred target with the
  whole eps on ``covariance_eig`` (Amin et al. 2019: Laplace eigenvalues, then one Bingham
  draw per eigenvector, eps split over k + 1 parts; pure eps-DP by diffprivlib's own
  accounting), rows clipped to its ``data_norm``.
* ``diffprivlib.models.PCA(centered=False)``, its default: half of eps buys a private mean
  (public feature bounds ``(-1, 1)``, valid for rows of norm <= 1), the data are centred
  and clipped to ``data_norm = 2`` (a public bound on ``||x - mean||``) and the other half
  runs ``covariance_eig``; scored against the non-private top-k of the *centred* covariance.

**Bingham law check.** diffprivlib 0.6.6's ``Bingham.randomise`` (Kent et al.'s rejection
sampler with an ACG envelope) accepts a proposal ``u`` with probability
``exp(-u^T A u) / (M (u^T Omega u)^(q/2))`` where the sampler needs
``exp(-u^T A u) (u^T Omega u)^(q/2) / M``: its draws follow ``exp(-u^T A u) (u^T Omega u)^(-q)``,
not the Bingham law, and almost every proposal is rejected once the distribution is
concentrated. The check compares ``E[u_1^2]`` of ``exp(u^T B u)``, ``B = diag(8, 2, 0)``,
from diffprivlib, from :func:`fedpca.linalg.bingham.sample_vector_bingham` and from importance
sampling. Because of the rejection rate, the PCA comparison uses paper 001's d = 10 set
only: on digits (d = 64, k = 2..10, eps = 1) no proposal of the first vector was accepted
in 36,000 tries (20 s), and breast-cancer (d = 30, k = 2) did not finish a fit in 120 s.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from common import md_table, progress

from fedpca.experiments.central_methods import CENTRAL_LABELS, central_bases
from fedpca.experiments.paper001 import FIG2
from fedpca.linalg.bingham import sample_vector_bingham
from fedpca.linalg.subspace import energy_ratio, subspace_distance, top_eigenvectors

DELTA = 1e-5
BURN_IN = 100
#: Public bounds of every feature of a row of norm <= 1, and of ``||x - mean||``.
FEATURE_BOUNDS = (-1.0, 1.0)
CENTRED_NORM = 2.0
LABELS = {
    **CENTRAL_LABELS,
    "diffprivlib": "diffprivlib PCA, centered=True (uncentred, all eps)",
    "diffprivlib_centred": "diffprivlib PCA, default (private mean, centred)",
}
#: ``name -> (k, loader)``; each loader returns rows of norm <= 1.
DATASETS: dict[str, tuple[int, Callable[[], np.ndarray]]] = {
    "paper 001 Fig. 2 (n=5000, d=10)": (FIG2.k, lambda: FIG2.data(0)),
}
FULL = dict(epsilons=(0.5, 1.0, 2.0, 5.0), repeats=3, law_draws=3000)
QUICK = dict(epsilons=(1.0,), repeats=1, law_draws=300)
#: The law check's ``exp(u^T B u)`` and the importance sample behind its exact moment.
LAW_B = np.diag([8.0, 2.0, 0.0])
LAW_EXACT_SAMPLES = 2_000_000


def load_diffprivlib_pca() -> tuple[type | None, str]:
    """``(diffprivlib.models.PCA, version)``, or ``(None, why it is unavailable)``."""
    try:
        import diffprivlib
        from diffprivlib.models import PCA
    except ImportError as error:
        return None, (f"diffprivlib is not usable in this environment ({error}). It is an "
                      "optional tool of this benchmark, not a fedpca dependency: "
                      "`pip install diffprivlib` (0.6.6 needs scikit-learn < 1.9).")
    return PCA, diffprivlib.__version__


def diffprivlib_bases(pca: type, X: np.ndarray, k: int, epsilon: float,
                      seed: int) -> dict[str, np.ndarray]:
    """diffprivlib's two variants (see the module docstring), as ``d x k`` bases."""
    uncentred = pca(n_components=k, epsilon=epsilon, data_norm=1.0, centered=True,
                    random_state=seed).fit(X)
    centred = pca(n_components=k, epsilon=epsilon, data_norm=CENTRED_NORM,
                  bounds=FEATURE_BOUNDS, random_state=seed).fit(X)
    return {"diffprivlib": uncentred.components_.T, "diffprivlib_centred": centred.components_.T}


def dataset_rows(pca: type, name: str, epsilons: tuple[float, ...],
                 repeats: int) -> list[dict[str, Any]]:
    """Distance and ``q / q_o`` of every method at every eps, over ``repeats`` seeds."""
    k, loader = DATASETS[name]
    X = loader()
    n, d = X.shape
    centred = X - X.mean(axis=0)
    targets = {"uncentred": X.T @ X / n, "centred": centred.T @ centred / n}
    rows = []
    for epsilon in epsilons:
        scores: dict[str, dict[str, list[float]]] = {
            key: {"distance": [], "ratio": []} for key in LABELS}
        seconds = {"fedpca (3 methods)": [], "diffprivlib (2 variants)": []}
        for seed in range(repeats):
            start = time.perf_counter()
            bases = central_bases(X, k, epsilon, DELTA, seed, BURN_IN)
            seconds["fedpca (3 methods)"].append(time.perf_counter() - start)
            start = time.perf_counter()
            bases |= diffprivlib_bases(pca, X, k, epsilon, seed)
            seconds["diffprivlib (2 variants)"].append(time.perf_counter() - start)
            for key, V in bases.items():
                A = targets["centred" if key == "diffprivlib_centred" else "uncentred"]
                scores[key]["distance"].append(subspace_distance(V, top_eigenvectors(A, k)))
                scores[key]["ratio"].append(energy_ratio(V, A))
        rows.append({
            "kind": "comparison", "data": name, "samples": n, "dim": d, "k": k,
            "epsilon": epsilon, "delta": DELTA, "repeats": repeats,
            "methods": {key: {metric: {"mean": statistics.fmean(values),
                                       "std": statistics.pstdev(values)}
                              for metric, values in by_metric.items()}
                        for key, by_metric in scores.items()},
            "seconds": {key: statistics.fmean(values) for key, values in seconds.items()},
        })
    return rows


def bingham_law_row(draws: int) -> dict[str, Any]:
    """``E[u_1^2]`` under ``exp(u^T B u)``: importance sampling, diffprivlib, fedpca."""
    from diffprivlib.mechanisms import Bingham

    U = np.random.default_rng(0).standard_normal((LAW_EXACT_SAMPLES, 3))
    U /= np.linalg.norm(U, axis=1)[:, None]
    weights = np.exp(np.einsum("ij,jk,ik->i", U, LAW_B, U))
    exact = float(weights @ U[:, 0] ** 2 / weights.sum())
    # randomise(value) samples exp(eps / (4 sensitivity) u^T value u): eps = 4 gives exp(u^T B u)
    mechanism = Bingham(epsilon=4.0, sensitivity=1.0, random_state=1)
    ours = sample_vector_bingham(LAW_B, size=draws, rng=np.random.default_rng(2))
    moments = {"diffprivlib": np.array([mechanism.randomise(LAW_B)[0] ** 2
                                        for _ in range(draws)]),
               "fedpca": ours[:, 0] ** 2}
    return {"kind": "law", "B": np.diag(LAW_B).tolist(), "draws": draws, "exact": exact,
            **{key: {"mean": float(v.mean()), "stderr": float(v.std() / np.sqrt(draws))}
               for key, v in moments.items()}}


def run(quick: bool = False) -> list[dict[str, Any]]:
    pca, version = load_diffprivlib_pca()
    if pca is None:
        progress(f"diffprivlib_check: skipped: {version}")
        return [{"kind": "unavailable", "reason": version}]
    cfg = QUICK if quick else FULL
    rows: list[dict[str, Any]] = [{"kind": "version", "diffprivlib": version}]
    progress("diffprivlib_check: Bingham law")
    rows.append(bingham_law_row(cfg["law_draws"]))
    for name in DATASETS:
        progress(f"diffprivlib_check: {name}")
        rows += dataset_rows(pca, name, cfg["epsilons"], cfg["repeats"])
    return rows


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    return []


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    if rows[0]["kind"] == "unavailable":
        return f"Not measured: {rows[0]['reason']}"
    parts = [f"diffprivlib {rows[0]['diffprivlib']}. Cells: `||sin Theta||_F` to the "
             "non-private top-k of the method's target (0 is perfect) / `q / q_o`, mean over "
             "the seeds. fedpca's (eps, delta) methods use delta = "
             f"{DELTA:g}; PPCA and diffprivlib are pure eps-DP. diffprivlib's default centres "
             "the data with a private mean and is scored against the centred covariance."]
    for r in (r for r in rows if r["kind"] == "law"):
        parts += [
            f"**Bingham law check**: E[u_1^2] under exp(u^T B u), B = diag{tuple(r['B'])}, "
            f"{r['draws']} draws each (see the module docstring).",
            md_table(["exact (importance sampling)", "diffprivlib", "fedpca"],
                     [[r["exact"]] + [f"{r[key]['mean']:.4f} ± {r[key]['stderr']:.4f}"
                                      for key in ("diffprivlib", "fedpca")]]),
        ]
    comparisons = [r for r in rows if r["kind"] == "comparison"]
    for name in dict.fromkeys(r["data"] for r in comparisons):
        block = [r for r in comparisons if r["data"] == name]
        parts += [
            f"**{name}**, k={block[0]['k']}, {block[0]['repeats']} seed(s); mean wall seconds "
            "per fit: " + ", ".join(
                f"{key} {statistics.fmean(r['seconds'][key] for r in block):.3f}"
                for key in block[0]["seconds"]),
            md_table(["eps", *LABELS.values()], [
                [r["epsilon"]] + [f"{m['distance']['mean']:.3f} / {m['ratio']['mean']:.3f}"
                                  for m in (r["methods"][key] for key in LABELS)]
                for r in block]),
        ]
    return "\n\n".join(parts)

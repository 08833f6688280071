"""Which algorithm for which data (issue 23, item 6): fedpca's Flower-free reference
implementations side by side, at the same epsilon, on a dense low-dimensional real table
and on sparse high-dimensional synthetic data.

    OPENBLAS_NUM_THREADS=1 python benchmarks/which_algorithm.py [--quick]

Methods (:data:`METHODS`), every one the reference run of :mod:`fedpca.algorithms` (the
formulas the Flower apps call), 4 sites, (eps, delta = 1e-5), eps 1 and 4, 5 noise seeds:
DPS-PCA (per-site noise and in secure sums of ``M = 4`` sites; ``T = 10`` power rounds,
the default, and ``T = 3``), DPdisPCA (factor, full and secure-sum variants), LDP-PCA
(dense, and ``--sparse``: the Fantope ADMM), and Analyze Gauss on the pooled rows (one
trusted curator: the anchor). Each method's message per site is counted in floats, with
its rounds.

**(a) Dense, low-dimensional real tables**: R's ``survival::rotterdam`` (2,982 x 16 after
its shipped contract) and ``survival::flchain`` (7,874 x 11), read through the contracts
fedpca ships (as ``benchmarks/tables.py``), split over 4 sites (public random split, seed
0), k = 2. Per seed, the sites release their column moments *once*
(:class:`fedpca.algorithms.centring.CentringSite`, per-site noise, standardised: moments
share 0.3 of the run's budget) and every method runs on the same centred, standardised rows
clipped to ``C = sqrt(d)``: the comparison is of the algorithms, not of their centring.
Each method gets the part of the budget left after the moments
(:func:`fedpca.dp.budget_split.split_budget` for its own number of releases ``T_m``):
it is run at the epsilon its ``T_m`` releases have alone, which calibrates them to the
split's multiplier ``z_a`` (recorded). The moments release uses the split of a one-release
run; a method with more releases would give the moments a multiplier larger by the
accountant's discretisation only (recorded as ``moments_multiplier_spread``). Score:
``||Xc V||_F^2 / ||Xc V_opt||_F^2`` with ``Xc`` the pooled table centred with its true mean
and divided by its true standard deviations, ``V_opt`` its non-private top-k.

**(b) Sparse, high-dimensional synthetic data**: the spiked model DPS-PCA's paper uses
(:class:`fedpca.data.synthetic.SparseSpikedModel`: ``d = 1000``, ``k = 2``, sparsity
``s = 10``, 20,000 records, rows scaled by the model's public bound, ``C = 1``), uncentred
as in the papers, the whole budget to the algorithm. DPS-PCA keeps ``s_hat = 20`` rows.
Scores: the captured variance of the pooled rows (``V_opt`` their top-k of ``X^T X``) and
support recovery: the share of the ``s`` true rows among the ``s`` rows of ``V`` of largest
norm. LDP-PCA's ADMM is capped at :data:`ADMM_ITERATIONS` iterations there (each one an
eigendecomposition of a ``d x d`` matrix); the runs report whether it converged.

Writes ``benchmarks/results/which_algorithm.{json,md}`` (``--quick``: 2 seeds, d = 200,
``which_algorithm.quick.*``).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    machine_info,
    md_table,
    mean,
    progress,
    quick_option,
    std,
    write_results,
)
from tables import captured, load, target_table  # noqa: E402

from fedpca.algorithms.central import run_analyze_gauss  # noqa: E402
from fedpca.algorithms.centring import (  # noqa: E402
    CentredPolicy,
    CentringSite,
    MomentsServer,
    moments_noise,
)
from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, run_dpdis_pca  # noqa: E402
from fedpca.algorithms.dps_pca import DPSPCAPolicy, run_dps_pca  # noqa: E402
from fedpca.algorithms.ldp_pca import LDPPolicy, run_ldp_pca  # noqa: E402
from fedpca.data.partition import partition_iid  # noqa: E402
from fedpca.data.synthetic import SparseSpikedModel, site_data  # noqa: E402
from fedpca.errors import FedPCAError  # noqa: E402
from fedpca.linalg.fantope import ADMMSettings  # noqa: E402
from fedpca.dp.budget_split import ALGORITHM, split_budget  # noqa: E402
from fedpca.results import PCAResult  # noqa: E402

EPSILONS = (1.0, 4.0)
DELTA, SITES = 1e-5, 4
TABLES = ("rotterdam", "flchain")
TABLE_K = 2
SPARSE = {"dim": 1000, "k": 2, "sparsity": 10, "samples": 20_000, "s_hat": 20}
QUICK_SPARSE = {**SPARSE, "dim": 200, "samples": 8_000}
#: LDP-PCA's Fantope ADMM iterations at most on the sparse data (``d x d`` eigh each).
ADMM_ITERATIONS = 30


@dataclass(frozen=True)
class Setting:
    """What a method's run needs besides its sites: ``k``, the clip norm, DPS-PCA's
    ``s_hat``, LDP-PCA's ADMM settings."""

    k: int
    clip_norm: float
    s_hat: int
    admm: ADMMSettings


Runner = Callable[[list[np.ndarray], float, int, Setting], PCAResult]


@dataclass(frozen=True)
class Method:
    """One reference run: its label, releases per site ``T_m``, rounds, trust model, how it
    runs at an epsilon, and its message per site in floats (``d``, ``k``, records per
    site, the run's result)."""

    label: str
    releases: int
    rounds: int
    trust: str
    run: Runner
    floats: Callable[[int, int, int, PCAResult], int]


def dps(rounds: int, secure: bool) -> Method:
    """DPS-PCA with ``rounds`` power rounds, per-site noise or inside secure sums."""

    def run(sites: list[np.ndarray], eps: float, seed: int, s: Setting) -> PCAResult:
        policy = DPSPCAPolicy(epsilon=eps, delta=DELTA, rounds=rounds, clip_norm=s.clip_norm,
                            secure_min_sites=SITES if secure else None, discrete=secure)
        return run_dps_pca(sites, s.k, min(s.s_hat, sites[0].shape[1]), policy, seed=seed)

    return Method(f"DPS-PCA, T = {rounds}" + (", secure sums" if secure else ""),
                  rounds + 1, rounds + 1,
                  f"secure sums of {SITES}" if secure else "per-site noise", run,
                  lambda d, k, n, r: d + rounds * d * k)


def dpdis(variant: str) -> Method:
    """DPdisPCA's ``variant``: factor, full or secure-sum."""
    secure = variant == "secure-sum"

    def run(sites: list[np.ndarray], eps: float, seed: int, s: Setting) -> PCAResult:
        policy = DPdisPCAPolicy(epsilon=eps, delta=DELTA, clip_norm=s.clip_norm,
                                secure_min_sites=SITES if secure else None)
        return run_dpdis_pca(sites, s.k, policy=policy, seed=seed, variant=variant)

    return Method(f"DPdisPCA {variant}", 1, 1,
                  f"secure sums of {SITES}" if secure else "per-site noise", run,
                  lambda d, k, n, r: r.config["bytes_per_site"] // 8)


def ldp(sparse: bool) -> Method:
    """LDP-PCA, dense or with the Fantope ADMM."""

    def run(sites: list[np.ndarray], eps: float, seed: int, s: Setting) -> PCAResult:
        policy = LDPPolicy(epsilon=eps, delta=DELTA, clip_norm=s.clip_norm)
        return run_ldp_pca(sites, s.k, policy, seed=seed, sparse=sparse,
                           admm=s.admm if sparse else None)

    return Method("LDP-PCA" + (" --sparse" if sparse else ""), 1, 1, "local (per record)",
                  run, lambda d, k, n, r: d * d)


def central(sites: list[np.ndarray], eps: float, seed: int, s: Setting) -> PCAResult:
    """Analyze Gauss on the pooled rows."""
    return run_analyze_gauss(np.vstack(sites), s.k, eps, DELTA, s.clip_norm, seed=seed)


METHODS = {
    "central": Method("Analyze Gauss (central)", 1, 1, "trusted curator", central,
                      lambda d, k, n, r: n * d),
    "dps-10": dps(10, secure=False),
    "dps-10-secure": dps(10, secure=True),
    "dps-3": dps(3, secure=False),
    "dpdis-factor": dpdis("factor"),
    "dpdis-full": dpdis("full"),
    "dpdis-secure": dpdis("secure-sum"),
    "ldp": ldp(sparse=False),
    "ldp-sparse": ldp(sparse=True),
}


def algorithm_epsilon(releases: int, eps: float, share: float) -> float:
    """The epsilon of a method's ``releases`` releases alone, at the multiplier ``z_a``
    the run's split leaves them after the moments (share ``share``)."""
    return split_budget(releases, eps, DELTA, share).part(ALGORITHM).epsilon


def centred_sites(sites: Sequence[np.ndarray], contract: Any, policy: CentredPolicy,
                  seed: int) -> list[np.ndarray]:
    """Every site's rows centred and scaled with one moments release (per-site noise),
    clipped to the policy's ``C``."""
    centring = [CentringSite(X, contract.bounds, policy, site=str(i), seed=seed)
                for i, X in enumerate(sites)]
    server = MomentsServer(contract.bounds, policy.standardize,
                           noise_sigma=moments_noise(policy, contract.bounds, len(sites)))
    moments = server.receive([s.answer(s.release_moments()) for s in centring])
    return [s.centre(moments.mean, moments.scale).X for s in centring]


def support_recovery(basis: np.ndarray, truth: np.ndarray) -> float:
    """The share of ``truth``'s non-zero rows among as many rows of ``basis`` of largest
    norm (a row of norm 0 is never counted, so ties among zero rows recover nothing)."""
    true_rows = set(np.flatnonzero(np.linalg.norm(truth, axis=1) > 0).tolist())
    norms = np.linalg.norm(basis, axis=1)
    top = np.argsort(-norms)[:len(true_rows)]
    return len(true_rows & set(top[norms[top] > 0].tolist())) / len(true_rows)


def summary(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Mean and standard deviation of ``key`` over runs."""
    values = [r[key] for r in runs]
    return {"mean": mean(values), "sd": std(values)}


def method_runs(name: str, method: Method, sites_for: Callable[[int], list[np.ndarray]],
                eps: float, seeds: range, setting: Setting,
                score: Callable[[np.ndarray], dict[str, float]],
                share: float | None) -> dict[str, Any]:
    """One method at one epsilon over ``seeds``: its scores, message size and what it
    spent (``share``: the moments' share of the run, ``None`` when there are none), or
    why it refused to run."""
    eps_alg = eps if share is None else algorithm_epsilon(method.releases, eps, share)
    out: dict[str, Any] = {"label": method.label, "trust": method.trust,
                           "rounds": method.rounds, "releases": method.releases,
                           "epsilon_algorithm": eps_alg}
    if share is not None:
        out["split_multiplier"] = split_budget(method.releases, eps, DELTA,
                                               share).algorithm_multiplier
    runs = []
    for seed in seeds:
        sites = sites_for(seed)
        start = time.perf_counter()
        try:
            result = method.run(sites, eps_alg, seed, setting)
        except FedPCAError as exc:
            progress(f"    {name}: refused: {exc}")
            return {**out, "refused": str(exc)}
        runs.append({"seconds": time.perf_counter() - start, **score(result.basis),
                     "admm_converged": (result.history[-1].get("admm_converged")
                                        if result.history else None)})
    d, n = sites[0].shape[1], max(len(X) for X in sites)
    keys = [key for key in runs[0] if key not in ("seconds", "admm_converged")]
    out.update({"floats_per_site": method.floats(d, setting.k, n, result),
                "noise_multiplier": result.privacy.get("noise_multiplier"), "runs": runs,
                **{key: summary(runs, key) for key in keys},
                "seconds": mean([r["seconds"] for r in runs])})
    line = ", ".join(f"{key} {out[key]['mean']:.3f} +- {out[key]['sd']:.3f}" for key in keys)
    progress(f"    {name}: {line} ({out['seconds']:.2f} s per run)")
    return out


def tables_part(seeds: range) -> list[dict[str, Any]]:
    """(a): every method on each clinical table, centred and standardised once per seed."""
    cells = []
    for table in TABLES:
        contract, X, _ = load(table)
        parts = partition_iid(len(X), SITES, 0)
        Xc, best = target_table(X, True)
        progress(f"(a) {table}: {X.shape[0]} x {X.shape[1]}")
        for eps in EPSILONS:
            policy = CentredPolicy(epsilon=eps, delta=DELTA, standardize=True)
            setting = Setting(TABLE_K, policy.clip_norm_for(contract.bounds), X.shape[1],
                              ADMMSettings())
            cache: dict[int, list[np.ndarray]] = {}

            def sites_for(seed: int) -> list[np.ndarray]:
                if seed not in cache:
                    cache[seed] = centred_sites([X[p] for p in parts], contract, policy, seed)
                return cache[seed]

            progress(f"  eps {eps:g}")
            spread = max(split_budget(m.releases, eps, DELTA, policy.share).moments_multiplier
                         for m in METHODS.values()) / policy.split().moments_multiplier
            methods = {name: method_runs(
                name, method, sites_for, eps, seeds, setting,
                lambda V: {"captured": captured(Xc, best, V)}, policy.share)
                for name, method in METHODS.items()}
            cells.append({"data": table, "shape": list(X.shape), "epsilon": eps,
                          "moments_share": policy.share, "clip_norm": setting.clip_norm,
                          "moments_multiplier_spread": spread, "methods": methods})
    return cells


def sparse_part(seeds: range, sizes: dict[str, int]) -> list[dict[str, Any]]:
    """(b): every method on the sparse spiked model, uncentred, the whole budget each."""
    model = SparseSpikedModel(dim=sizes["dim"], k=sizes["k"], sparsity=sizes["sparsity"])
    sites = [site_data(model, sizes["samples"], SITES, i) for i in range(SITES)]
    pooled = np.vstack(sites)
    best = float(np.linalg.eigvalsh(pooled.T @ pooled)[::-1][:sizes["k"]].sum())
    truth = model.truth
    setting = Setting(sizes["k"], 1.0, sizes["s_hat"], ADMMSettings(max_iter=ADMM_ITERATIONS))
    label = f"sparse spiked d={sizes['dim']} s={sizes['sparsity']}"
    progress(f"(b) {label}: {sizes['samples']} x {sizes['dim']}, k = {sizes['k']}")

    def score(V: np.ndarray) -> dict[str, float]:
        return {"captured": captured(pooled, best, V), "support": support_recovery(V, truth)}

    cells = []
    for eps in EPSILONS:
        progress(f"  eps {eps:g}")
        methods = {name: method_runs(name, method, lambda seed: sites, eps, seeds, setting,
                                     score, None)
                   for name, method in METHODS.items()}
        cells.append({"data": label, "shape": [sizes["samples"], sizes["dim"]], **sizes,
                      "epsilon": eps, "clip_norm": 1.0, "methods": methods})
    return cells


def run(quick: bool) -> dict[str, Any]:
    seeds = range(2 if quick else 5)
    start = time.perf_counter()
    cells = tables_part(seeds) + sparse_part(seeds, QUICK_SPARSE if quick else SPARSE)
    return {"machine": machine_info(), "quick": quick, "seeds": list(seeds), "sites": SITES,
            "delta": DELTA, "cells": cells, "seconds": time.perf_counter() - start}


def cell_value(method: dict[str, Any], key: str) -> str:
    """``mean ± sd`` of ``key``, or that the method refused."""
    if "refused" in method:
        return "refused"
    return f"{method[key]['mean']:.3f} ± {method[key]['sd']:.3f}"


def markdown(doc: dict[str, Any]) -> str:
    machine = doc["machine"]
    lines = [
        "# Which algorithm: fedpca's methods side by side", "",
        f"`python benchmarks/which_algorithm.py{' --quick' if doc['quick'] else ''}` on "
        f"{machine['cores']} cores ({machine['cpu']}), {machine['date']}; numpy "
        f"{machine['numpy']}; {doc['seconds'] / 60:.1f} min. {doc['sites']} sites, (eps, "
        f"delta = {doc['delta']:g}), mean ± sd over {len(doc['seeds'])} noise seeds; every "
        "method is fedpca's Flower-free reference run. Captured variance "
        "`||Xc V||_F^2 / ||Xc V_opt||_F^2`; support: the share of the true rows among "
        "the rows of `V` of largest norm. Floats: one site's message(s) over the whole run "
        "(the central anchor: its raw rows). See the benchmark's docstring for every "
        "setting.", ""]
    for data in dict.fromkeys(c["data"] for c in doc["cells"]):
        cells = [c for c in doc["cells"] if c["data"] == data]
        first = cells[0]
        sparse = "support" in next(iter(first["methods"].values()))
        lines += [f"## {data} ({first['shape'][0]} x {first['shape'][1]})", ""]
        if sparse:
            lines += ["Uncentred, clip norm 1, the whole budget to the algorithm.", ""]
        else:
            lines += [f"Standardised with one moments release per seed shared by every "
                      f"method (share {first['moments_share']}), rows clipped to C = "
                      f"{first['clip_norm']:.3g}; each method gets the rest of the budget.",
                      ""]
        headers = ["method", "trust", "rounds", "floats per site"]
        for cell in cells:
            headers.append(f"captured, eps {cell['epsilon']:g}")
            if sparse:
                headers.append(f"support, eps {cell['epsilon']:g}")
        rows, refusals = [], []
        for name, method in first["methods"].items():
            ran = [c["methods"][name] for c in cells if "refused" not in c["methods"][name]]
            row = [method["label"], method["trust"], method["rounds"],
                   ran[0]["floats_per_site"] if ran else None]
            for cell in cells:
                row.append(cell_value(cell["methods"][name], "captured"))
                if sparse:
                    row.append(cell_value(cell["methods"][name], "support"))
                if "refused" in cell["methods"][name]:
                    refusals.append(f"* {method['label']}, eps {cell['epsilon']:g}: "
                                    f"{cell['methods'][name]['refused']}")
            rows.append(row)
        lines += [md_table(headers, rows), "", *refusals, *([""] if refusals else [])]
    return "\n".join(lines)


def main() -> int:
    quick = quick_option(__doc__)
    write_results(HERE / "results", "which_algorithm", quick, run(quick), markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

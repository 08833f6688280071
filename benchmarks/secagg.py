"""(e) Secure aggregation (Flower SecAgg+): accuracy gain, quantisation error, round time.

Three parts, all on :class:`fedpca.scenarios.dps_pca.DPSPCAScenario` (the synthetic model and site
split ``benchmarks/accuracy.py`` uses):

1. **accuracy** at the paper setting (d=1000, n=1e5, k=5, s=10, s_hat=50, T=10, eps=2,
   delta=0.01, PLD): the Flower-free reference :func:`run_dps_pca` for several noise seeds
   with 1 site, 100 sites with per-site noise, and 100 sites with the secure policy
   (``secure_min_sites=100``: each site adds ``sigma / sqrt(100)``, the reference sums
   exactly). Plus one real Flower SecAgg+ simulation of the secure scenario (seed 0), also
   compared with its reference. Target: secure 100 sites <= 1.3 x one site (means).
2. **quantisation**: a Flower SecAgg+ run against the reference with the same seed and data
   (20 sites, d=200). End to end: ``max |Q_secagg - Q_reference|`` and both distances. Per
   round: the aggregate the strategy received (``K``, or the initial diagonal sum) against
   the exact aggregate of the same sites' releases for the basis the Flower server actually
   sent (a replay with the same noise streams), so each round's error is SecAgg+'s alone.
3. **round_time**: the scenario of ``benchmarks/flower_round.py`` (d=200, k=3, 200 records
   per site, 2 power rounds) at 100 and 300 sites, plain (per-site noise) and SecAgg+, in
   the same run. Round time = configure_fit entry to aggregate_fit exit inside the ServerApp
   (``flower_round.RoundClock``); SecAgg+'s four stages are timed by wrapping
   ``SecAggPlusWorkflow``'s stage methods. ``num_shares`` / threshold are fedpca's defaults
   (:meth:`SecAggSettings.for_sites`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from unittest import mock

import numpy as np
from common import fmt, md_table, mean, median, progress, std, target, timed
from flower_round import _scenario, stamped_simulation
from flwr.server.workflow import SecAggPlusWorkflow

from fedpca.algorithms.dps_pca import DPSPCASite, run_dps_pca
from fedpca.algorithms.server import weighted_sum
from fedpca.algorithms.site import SiteAnswer
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower.workflow import SecAggSettings

PAPER = DPSPCAScenario(sites=100, dim=1000, samples=100_000, k=5, sparsity=10, s_hat=50,
                       rounds=10, epsilon=2.0, delta=0.01, seed=0, secure_min_sites=100)
QUANT = DPSPCAScenario(sites=20, dim=200, samples=20 * 500, k=3, sparsity=10, s_hat=20,
                       rounds=5, epsilon=1.0, delta=1e-5, seed=0, secure_min_sites=20)
FULL = dict(paper=PAPER, seeds=(0, 1, 2, 3, 4), quant=QUANT, quant_seeds=(0, 1, 2),
            round_sites=(100, 300), round_dim=200, round_k=3, power_rounds=2,
            rows_per_site=200)
QUICK = dict(FULL, paper=replace(PAPER, sites=10, dim=200, samples=20_000, s_hat=20,
                                 rounds=3, secure_min_sites=10),
             seeds=(0,), quant=replace(QUANT, sites=5, secure_min_sites=5, rounds=2),
             quant_seeds=(0,), round_sites=(20,), power_rounds=1)
RATIO_LIMIT = 1.3
STAGES = ("setup_stage", "share_keys_stage", "collect_masked_vectors_stage", "unmask_stage")


class Recording:
    """Strategy mixin: keeps, for every round, the basis it sent (None for the
    initialisation) and the aggregate it received, before handing the answers on
    unchanged."""

    def combine(self, server_round: int, answers: list[SiteAnswer]):
        if not hasattr(self, "seen"):
            self.seen: list[tuple[np.ndarray | None, np.ndarray]] = []
        self.seen.append((self.server.basis, aggregate(answers)))
        return super().combine(server_round, answers)


def aggregate(answers: list[SiteAnswer]) -> np.ndarray:
    """``sum_i n_i value_i / n``: ``K`` in a power round, ``sum_i g_i / n`` at init."""
    ordered = sorted(answers, key=lambda a: a.site)
    return weighted_sum(ordered, weighted=True) / sum(a.n for a in ordered)


def exact_aggregates(scenario: DPSPCAScenario,
                     sent: list[np.ndarray | None]) -> list[np.ndarray]:
    """Replay the sites' releases (same data, same noise streams) for the bases the Flower
    server sent, and aggregate them exactly: what SecAgg+ should have returned."""
    policy = scenario.policy()
    sites = [DPSPCASite(X, policy, site=str(i), seed=scenario.seed)
             for i, X in enumerate(scenario.all_site_data())]
    out = []
    for Q in sent:
        out.append(aggregate([
            s.answer(s.release_diagonal() if Q is None else s.release_power(Q))
            for s in sites]))
    return out


def reference(scenario: DPSPCAScenario, data: list[np.ndarray]):
    """The Flower-free run of ``scenario`` on ``data`` (its sites' records)."""
    return run_dps_pca(data, scenario.k, scenario.s_hat, scenario.policy(),
                       seed=scenario.seed, evaluate=scenario.distance_to_truth)


@contextlib.contextmanager
def stage_clock() -> Iterator[list[tuple[str, float]]]:
    """Time every SecAgg+ stage call while the block runs: ``[(stage, seconds), ...]``."""
    stamps: list[tuple[str, float]] = []

    def wrap(name: str, stage):
        def timed_stage(self, *args, **kwargs):
            start = time.perf_counter()
            ok = stage(self, *args, **kwargs)
            stamps.append((name, time.perf_counter() - start))
            return ok
        return timed_stage

    with contextlib.ExitStack() as stack:
        for name in STAGES:
            stack.enter_context(mock.patch.object(
                SecAggPlusWorkflow, name, wrap(name, getattr(SecAggPlusWorkflow, name))))
        yield stamps


def stages_per_round(stamps: list[tuple[str, float]]) -> list[dict[str, float]]:
    """Group stage timings into rounds (each round starts with the setup stage)."""
    rounds: list[dict[str, float]] = []
    for name, seconds in stamps:
        if name == STAGES[0]:
            rounds.append({})
        rounds[-1][name.removesuffix("_stage")] = seconds
    return rounds


def flower_run(scenario: DPSPCAScenario, *mixins: type) -> dict:
    """One simulation (its strategy with ``mixins``, e.g. :class:`Recording`): wall, round
    times, SecAgg+ stages, the strategy and the result."""
    with stage_clock() as stamps:
        wall, strategy, result = stamped_simulation(scenario, *mixins)
    secure = scenario.secure_min_sites is not None
    settings = (SecAggSettings.for_sites(scenario.sites, scenario.largest_site(),
                                         scenario.secure_min_sites)
                if secure else None)
    return {"wall_s": wall, "rounds": strategy.round_times(),
            "stages": stages_per_round(stamps), "strategy": strategy, "result": result,
            "num_shares": settings.num_shares if settings else None,
            "reconstruction_threshold": (settings.reconstruction_threshold
                                         if settings else None)}


def part_accuracy(cfg: dict) -> list[dict[str, Any]]:
    """Reference runs (1 site, 100 per-site, 100 secure) and one Flower SecAgg+ run."""
    secure = cfg["paper"]
    variants = [("1 site", replace(secure, sites=1, secure_min_sites=None)),
                (f"{secure.sites} sites, per-site noise",
                 replace(secure, secure_min_sites=None)),
                (f"{secure.sites} sites, secure sum (m={secure.secure_min_sites})", secure)]
    rows = []
    data: dict[int, list[np.ndarray]] = {}
    for label, scen in variants:
        if scen.sites not in data:
            data.clear()
            gen_s, data[scen.sites] = timed(scen.all_site_data)
            progress(f"secagg accuracy: {scen.sites} site(s): data in {gen_s:.1f}s")
        finals, secs = [], []
        for seed in cfg["seeds"]:
            wall, res = timed(lambda: reference(  # noqa: B023 - called at once
                replace(scen, seed=seed), data[scen.sites]))
            finals.append(res.history[-1]["distance"])
            secs.append(wall)
        sigma = res.privacy["sigma"]
        rows.append(_accuracy_row(scen, label, "reference (run_dps_pca)", cfg["seeds"],
                                  finals, secs, sigma))
        progress(f"secagg accuracy: {label}: {mean(finals):.3f} +- {std(finals):.3f}")
    one_site = rows[0]["distance_mean"]
    ref_seed0 = rows[-1]["distances"][0]
    data.clear()
    progress(f"secagg accuracy: Flower SecAgg+ simulation, {secure.sites} sites, "
             f"{secure.rounds + 1} rounds")
    run = flower_run(secure)
    distance = run["result"].history[-1]["distance"]
    flower = _accuracy_row(secure, rows[-1]["variant"], "Flower SecAgg+ simulation",
                           [secure.seed], [distance], [run["wall_s"]], rows[-1]["sigma"])
    flower.update(num_shares=run["num_shares"],
                  reference_distance_same_seed=ref_seed0,
                  round_s_median=median([r["seconds"] for r in run["rounds"][1:]]),
                  rounds_timed=run["rounds"])
    rows.append(flower)
    progress(f"secagg accuracy: Flower SecAgg+ {distance:.4f} (reference {ref_seed0:.4f}), "
             f"{run['wall_s']:.0f}s")
    for r in rows:
        r["ratio_to_one_site"] = r["distance_mean"] / one_site
    return rows


def _accuracy_row(scen: DPSPCAScenario, variant: str, method: str, seeds: list[int],
                  finals: list[float], secs: list[float], sigma: float) -> dict[str, Any]:
    m = scen.secure_min_sites
    return {"part": "accuracy", "variant": variant, "method": method, "sites": scen.sites,
            "dim": scen.dim, "samples": scen.samples, "k": scen.k, "sparsity": scen.sparsity,
            "s_hat": scen.s_hat, "rounds": scen.rounds, "epsilon": scen.epsilon,
            "delta": scen.delta, "secure_min_sites": m, "sigma": sigma,
            "sigma_per_site": sigma / np.sqrt(m) if m else sigma,
            "seeds": list(seeds), "distances": finals, "distance_mean": mean(finals),
            "distance_std": std(finals), "seconds_mean": mean(secs)}


def part_quantisation(cfg: dict) -> list[dict[str, Any]]:
    """Flower SecAgg+ against the exact secure sum, seed by seed."""
    rows = []
    for seed in cfg["quant_seeds"]:
        scen = replace(cfg["quant"], seed=seed)
        progress(f"secagg quantisation: seed {seed}, {scen.sites} sites, d={scen.dim}")
        run = flower_run(scen, Recording)
        sent, received = zip(*run["strategy"].seen)
        exact = exact_aggregates(scen, list(sent))
        ref = reference(scen, scen.all_site_data())
        errors = [_error(got, want) for got, want in zip(received, exact)]
        rows.append({
            "part": "quantisation", "seed": seed, "sites": scen.sites, "dim": scen.dim,
            "samples": scen.samples, "k": scen.k, "s_hat": scen.s_hat, "rounds": scen.rounds,
            "epsilon": scen.epsilon, "delta": scen.delta, "num_shares": run["num_shares"],
            "basis_max_abs_diff": float(np.abs(run["result"].basis - ref.basis).max()),
            "distance_secagg": run["result"].history[-1]["distance"],
            "distance_reference": ref.history[-1]["distance"],
            "init_rel_error": errors[0]["rel"], "init_max_abs_error": errors[0]["max_abs"],
            "K_rel_error_max": max(e["rel"] for e in errors[1:]),
            "K_max_abs_error": max(e["max_abs"] for e in errors[1:]),
            "K_rms_error": float(np.sqrt(np.mean([e["rms"] ** 2 for e in errors[1:]]))),
            "K_abs_max": max(float(np.abs(w).max()) for w in exact[1:]),
            # The secure sum carries sigma, so K's DP noise has std sigma / n per entry.
            "K_dp_noise_std": ref.privacy["sigma"] / scen.samples,
            "per_round": errors,
        })
        r = rows[-1]
        progress(f"secagg quantisation: seed {seed}: max|dQ| {r['basis_max_abs_diff']:.2e}, "
                 f"K rel {r['K_rel_error_max']:.2e}")
    return rows


def _error(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    diff = got - want
    return {"rel": float(np.linalg.norm(diff) / np.linalg.norm(want)),
            "max_abs": float(np.abs(diff).max()), "rms": float(np.sqrt(np.mean(diff**2)))}


def part_round_time(cfg: dict) -> list[dict[str, Any]]:
    """Plain and SecAgg+ simulations of the flower_round scenario at each site count."""
    rows = []
    for sites in cfg["round_sites"]:
        plain = _scenario(sites, cfg["round_dim"], cfg["round_k"], cfg["power_rounds"],
                          cfg["rows_per_site"])
        secure = replace(plain, secure_min_sites=sites)
        for mode, scen in (("plain", plain), ("SecAgg+", secure)):
            progress(f"secagg round_time: {mode}, {sites} sites")
            run = flower_run(scen)
            power = [r["seconds"] for r in run["rounds"][1:]]
            stage_medians = {name: median([s[name] for s in run["stages"][1:]])
                             for name in (run["stages"][0] if run["stages"] else {})}
            rows.append({
                "part": "round_time", "mode": mode, "sites": sites, "dim": scen.dim,
                "k": scen.k, "rows_per_site": cfg["rows_per_site"],
                "power_rounds": scen.rounds, "num_shares": run["num_shares"],
                "reconstruction_threshold": run["reconstruction_threshold"],
                "wall_s": run["wall_s"], "round1_s": run["rounds"][0]["seconds"],
                "power_round_s": power, "median_power_round_s": median(power),
                "stages_median_s": stage_medians, "rounds": run["rounds"],
                "stages": run["stages"],
                "final_distance": run["result"].history[-1]["distance"],
            })
            progress(f"secagg round_time: {mode}, {sites} sites: rounds "
                     f"{[round(r['seconds'], 2) for r in run['rounds']]}")
        plain_s = rows[-2]["median_power_round_s"]
        rows[-1]["ratio_to_plain"] = rows[-1]["median_power_round_s"] / plain_s
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    return part_accuracy(cfg) + part_quantisation(cfg) + part_round_time(cfg)


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    secure = next((r for r in rows if r["part"] == "accuracy" and r["secure_min_sites"]
                   and r["method"].startswith("reference")), None)
    name = (f"SecAgg {secure['sites']} sites / 1 site distance (reference, "
            f"{len(secure['distances'])} seeds)" if secure else "SecAgg / 1 site distance")
    return [target(name, secure["ratio_to_one_site"] if secure else None, RATIO_LIMIT,
                   measured=not quick)]


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    acc = [r for r in rows if r["part"] == "accuracy"]
    quant = [r for r in rows if r["part"] == "quantisation"]
    times = [r for r in rows if r["part"] == "round_time"]
    a0, q0 = acc[0], quant[0]
    parts = [
        f"**Accuracy** at d={a0['dim']}, n={a0['samples']}, k={a0['k']}, s={a0['sparsity']}, "
        f"s_hat={a0['s_hat']}, T={a0['rounds']}, eps={a0['epsilon']}, delta={a0['delta']} "
        "(PLD), data seed 0. Final ||sin Theta||_F to the truth; the reference rows average "
        f"noise seeds {a0['seeds']}; the Flower row is one run (seed {acc[-1]['seeds'][0]}; "
        "the same seed's reference beside it).",
        "",
        md_table(["variant", "method", "distance", "per seed", "ratio to 1 site",
                  "sigma per site", "s/run"],
                 [[r["variant"], r["method"],
                   f"{fmt(r['distance_mean'])} +- {fmt(r['distance_std'])}",
                   ", ".join(fmt(d) for d in r["distances"])
                   + (f" (reference {fmt(r['reference_distance_same_seed'])})"
                      if "reference_distance_same_seed" in r else ""),
                   r["ratio_to_one_site"], r["sigma_per_site"], r["seconds_mean"]]
                  for r in acc]),
        "",
        f"**Quantisation** (SecAgg+ defaults: clipping 8, quantization_range 2^24, modulus "
        f"2^40, max_weight = largest n_i): {q0['sites']} sites, d={q0['dim']}, "
        f"n={q0['samples']}, k={q0['k']}, T={q0['rounds']}, eps={q0['epsilon']}, "
        f"num_shares={q0['num_shares']}. Basis and distances: Flower SecAgg+ vs run_dps_pca "
        "(same seed, data). Aggregate errors: the aggregate Flower delivered vs the exact "
        "sum of the same releases for the basis actually sent (init: the diagonal sum; K: "
        f"max over the {q0['rounds']} power rounds; largest |K| entry "
        f"{fmt(max(r['K_abs_max'] for r in quant))}).",
        "",
        md_table(["seed", "max abs Q diff", "distance SecAgg+", "distance reference",
                  "init rel error", "K rel error (max)", "K max abs error", "K rms error",
                  "K DP noise std"],
                 [[r["seed"], r["basis_max_abs_diff"], r["distance_secagg"],
                   r["distance_reference"], r["init_rel_error"], r["K_rel_error_max"],
                   r["K_max_abs_error"], r["K_rms_error"], f"{r['K_dp_noise_std']:.3g}"]
                  for r in quant]),
        "",
        f"**Round time**, d={times[0]['dim']}, k={times[0]['k']}, "
        f"{times[0]['rows_per_site']} records per site, 1 init + "
        f"{times[0]['power_rounds']} power rounds, one run each, in the order listed; "
        "configure_fit entry to aggregate_fit exit. Round 1 includes Ray actor start-up. "
        "Stage columns: SecAgg+ stage medians over the power rounds.",
        "",
        md_table(["sites", "mode", "num_shares", "threshold", "round 1 s", "power rounds s",
                  "ratio to plain", "setup", "share keys", "masked vectors", "unmask",
                  "run wall s"],
                 [[r["sites"], r["mode"], r["num_shares"], r["reconstruction_threshold"],
                   r["round1_s"], ", ".join(f"{s:.2f}" for s in r["power_round_s"]),
                   r.get("ratio_to_plain")]
                  + [r["stages_median_s"].get(s.removesuffix("_stage")) for s in STAGES]
                  + [r["wall_s"]] for r in times]),
    ]
    return "\n".join(parts)

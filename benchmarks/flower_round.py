"""(c) A Flower round of DPS-PCA against Flower's own FedAvg, same payload, same launcher.

Both runs go through :func:`fedpca.flower.federation.launch` (Ray backend, one CPU per
virtual site) and :func:`fedpca.flower.workflow.run_strategy` (Flower's DefaultWorkflow), with
500 virtual sites exchanging one ``d x k`` float64 array each way per round (d=200, k=3).

* DPS-PCA: the real ``simulate_dps_pca(DPSPCAScenario(sites=500, samples=500*200, ...))``.
  Round 1 is the initialisation (sites send a d-vector, the server sends nothing); rounds
  2..R+1 are power rounds (Q down, H_i up: the d x k payload).
* FedAvg: ``flwr.server.strategy.FedAvg`` (``fraction_evaluate=0``: DPS-PCA has no evaluate
  round either) with a trivial NumPyClient whose ``fit`` returns one d x k array.

Per-round wall time is taken inside the ServerApp: each strategy is wrapped by a subclass
that stamps ``configure_fit`` entry and ``aggregate_fit`` exit (Ray start-up and shutdown are
therefore excluded). For DPS-PCA the wrapper replaces ``DPSPCAStrategy`` in
``fedpca.simulations.dps_pca`` for the duration of the run only. The comparison uses the
median over rounds 2..R+1 of each run (DPS-PCA power rounds vs FedAvg rounds 2..R+1, so
neither side's first-round Ray actor warm-up is included); round 1 is reported too.
"""

from __future__ import annotations

import time
from typing import Any
from unittest import mock

import numpy as np
from common import md_table, median, progress, target, timed
from flwr.client import Client, ClientApp, NumPyClient
from flwr.common import Context, FitIns, RecordDict, ndarrays_to_parameters
from flwr.server import Grid, LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow

import fedpca.simulations.dps_pca as sim_module
from fedpca.blas import single_thread_blas
from fedpca.flower.site_client import client_factory
from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.linalg.subspace import thin_qr
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower.federation import launch
from fedpca.flower.strategies import DPSPCAStrategy

#: The algorithm's client factory (the one client of every algorithm, over its site).
client_for_site = client_factory(DPSPCASite)

FULL = dict(sites=500, dim=200, k=3, rounds=5, rows_per_site=200, repeats=3)
QUICK = dict(FULL, sites=50, rounds=2, repeats=1)
RATIO_LIMIT = 1.1


class RoundClock:
    """Mixin: stamps configure_fit entry and aggregate_fit exit for every round."""

    def _clock(self) -> dict[int, dict[str, float]]:
        if not hasattr(self, "_stamps"):
            self._stamps: dict[int, dict[str, float]] = {}
        return self._stamps

    def configure_fit(self, server_round, parameters, client_manager):
        self._clock().setdefault(server_round, {})["configure"] = time.perf_counter()
        out = super().configure_fit(server_round, parameters, client_manager)
        self._clock()[server_round]["dispatch"] = time.perf_counter()
        self._clock()[server_round]["clients"] = len(out)
        return out

    def aggregate_fit(self, server_round, results, failures):
        self._clock()[server_round]["replies"] = time.perf_counter()
        out = super().aggregate_fit(server_round, results, failures)
        self._clock()[server_round]["aggregated"] = time.perf_counter()
        self._clock()[server_round]["results"] = len(results)
        self._clock()[server_round]["failures"] = len(failures)
        return out

    def round_times(self) -> list[dict[str, float]]:
        rounds = []
        for r in sorted(self._clock()):
            s = self._clock()[r]
            rounds.append({
                "round": r,
                "seconds": s["aggregated"] - s["configure"],
                "configure_s": s["dispatch"] - s["configure"],
                "aggregate_s": s["aggregated"] - s["replies"],
                "clients": s.get("clients"), "results": s.get("results"),
                "failures": s.get("failures"),
            })
        return rounds


class TimedDPSPCAStrategy(RoundClock, DPSPCAStrategy):
    instances: list[TimedDPSPCAStrategy] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        TimedDPSPCAStrategy.instances.append(self)


class TimedFedAvg(RoundClock, FedAvg):
    pass


class PayloadClient(NumPyClient):
    """FedAvg's site: returns one d x k array (the DPS-PCA power-round payload shape)."""

    def __init__(self, dim: int, k: int, rows: int) -> None:
        self.dim, self.k, self.rows = dim, k, rows

    def fit(self, parameters, config):
        return [np.full((self.dim, self.k), 0.5)], self.rows, {}


def _fedavg_client_fn(dim: int, k: int, rows: int):
    def client_fn(context: Context) -> Client:
        return PayloadClient(dim, k, rows).to_client()
    return client_fn


def run_fedavg(sites: int, dim: int, k: int, rounds: int, rows: int) -> tuple[float, list]:
    strategy = TimedFedAvg(
        fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=sites,
        min_evaluate_clients=0, min_available_clients=sites,
        initial_parameters=ndarrays_to_parameters([np.zeros((dim, k))]),
    )
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        # Flower's own workflow, as a FedAvg user runs it (run_strategy drives fedpca's
        # strategies only)
        single_thread_blas()
        legacy = LegacyContext(context=context, strategy=strategy,
                               config=ServerConfig(num_rounds=rounds))
        DefaultWorkflow()(grid, legacy)

    client_app = ClientApp(client_fn=_fedavg_client_fn(dim, k, rows))
    wall, _ = timed(lambda: launch(server_app, client_app, sites))
    return wall, strategy.round_times()


def run_timed(
    scenario: DPSPCAScenario, strategy_cls: type = TimedDPSPCAStrategy
) -> tuple[float, Any, Any]:
    """``simulate_dps_pca(scenario)`` with ``strategy_cls`` (a TimedDPSPCAStrategy) in place
    of DPSPCAStrategy: ``(wall seconds, the strategy instance, the result)``."""
    TimedDPSPCAStrategy.instances.clear()
    # the legacy API for every run (the clock stamps its hooks): plain runs would otherwise
    # take the Message-API twin DPSPCA
    with mock.patch.object(sim_module, "DPSPCAStrategy", strategy_cls), \
            mock.patch.object(sim_module, "DPSPCA", strategy_cls):
        wall, result = timed(lambda: sim_module.simulate_dps_pca(scenario))
    (strategy,) = TimedDPSPCAStrategy.instances
    return wall, strategy, result


def run_dps(sites: int, dim: int, k: int, rounds: int, rows: int) -> tuple[float, list, Any]:
    wall, strategy, result = run_timed(_scenario(sites, dim, k, rounds, rows))
    return wall, strategy.round_times(), result


def client_cost_in_process(sites: int, dim: int, k: int, rows: int) -> dict[str, float]:
    """Seconds per client message without Ray: build the client as the ClientApp does, fit.

    DPS-PCA: ``client_for_site`` (site rebuilt per message: validate, clip, ledger restored
    from ``context.state``) then an init message and two power messages per site; FedAvg:
    ``PayloadClient`` fit on a d x k array. Explains the gap in the Ray timings.
    """
    scenario = _scenario(sites, dim, k, 3, rows)
    policy = scenario.policy()
    data = scenario.all_site_data()
    contexts = [Context(run_id=1, node_id=i, node_config={"partition-id": i},
                        state=RecordDict(), run_config={}) for i in range(sites)]
    Q = thin_qr(np.random.default_rng(0).standard_normal((dim, k)))

    def dps_round(phase: str, arrays: list) -> float:
        ins = FitIns(ndarrays_to_parameters(arrays), {"phase": phase, "round": 1})
        start = time.perf_counter()
        for i, ctx in enumerate(contexts):
            client_for_site(ctx, data[i], policy, str(i), seed=0).fit(ins)
        return (time.perf_counter() - start) / sites

    init = dps_round("init", [])
    power_first = dps_round("power", [Q])  # pays one uncached PLD composition in total
    power_next = dps_round("power", [Q])   # same again for the next ledger length
    ins = FitIns(ndarrays_to_parameters([np.zeros((dim, k))]), {})
    start = time.perf_counter()
    for _ in range(3):
        for _ in range(sites):
            PayloadClient(dim, k, rows).to_client().fit(ins)
    fedavg = (time.perf_counter() - start) / (3 * sites)
    return {"dps_init_s": init, "dps_power_s": min(power_first, power_next),
            "dps_power_max_s": max(power_first, power_next), "fedavg_s": fedavg}


def _scenario(sites: int, dim: int, k: int, rounds: int, rows: int) -> DPSPCAScenario:
    return DPSPCAScenario(sites=sites, dim=dim, samples=sites * rows, k=k, sparsity=10,
                          s_hat=20, rounds=rounds, epsilon=1.0, delta=1e-5, seed=0)


def run(quick: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    sites, dim, k, R, rows_per = (cfg[x] for x in ("sites", "dim", "k", "rounds",
                                                   "rows_per_site"))
    runs: dict[str, list[tuple[float, list]]] = {"DPS-PCA": [], "FedAvg": []}
    final_distance = None
    # Alternate (DPS, FedAvg, FedAvg, DPS, ...) so neither side always runs first.
    order = []
    for rep in range(cfg["repeats"]):
        order += ["DPS-PCA", "FedAvg"] if rep % 2 == 0 else ["FedAvg", "DPS-PCA"]
    for name in order:
        progress(f"flower_round: {name}, {sites} sites, {R + 1} Flower rounds")
        if name == "DPS-PCA":
            wall, rounds, result = run_dps(sites, dim, k, R, rows_per)
            final_distance = result.history[-1]["distance"]
        else:
            wall, rounds = run_fedavg(sites, dim, k, R + 1, rows_per)
        runs[name].append((wall, rounds))
        progress(f"flower_round: {name} done in {wall:.1f}s; rounds "
                 f"{[round(r['seconds'], 2) for r in rounds]}")
    progress("flower_round: client cost per message, in-process (no Ray)")
    cost = client_cost_in_process(sites, dim, k, rows_per)

    def row(name: str) -> dict[str, Any]:
        all_rounds = [rounds for _, rounds in runs[name]]
        steady = [r["seconds"] for rounds in all_rounds for r in rounds[1:]]
        walls = [wall for wall, _ in runs[name]]
        return {
            "strategy": name, "sites": sites, "dim": dim, "k": k,
            "flower_rounds": len(all_rounds[0]), "runs": len(all_rounds),
            "run_wall_s": walls,
            "first_round_s": median([rounds[0]["seconds"] for rounds in all_rounds]),
            "median_round_s": median(steady), "min_round_s": min(steady),
            "max_round_s": max(steady), "rounds": all_rounds,
            "startup_and_shutdown_s": median([
                wall - sum(r["seconds"] for r in rounds) for wall, rounds in runs[name]]),
            "client_s_per_message_in_process": (
                cost["dps_power_s"] if name == "DPS-PCA" else cost["fedavg_s"]),
        }

    dps, fa = row("DPS-PCA"), row("FedAvg")
    dps["final_distance"] = final_distance
    dps["client_cost_in_process"] = cost
    dps["ratio_to_fedavg"] = dps["median_round_s"] / fa["median_round_s"]
    dps["first_round_ratio_to_fedavg"] = dps["first_round_s"] / fa["first_round_s"]
    return [dps, fa]


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    dps = next((r for r in rows if r["strategy"] == "DPS-PCA"), None)
    return [target("DPS-PCA / FedAvg median round time (rounds 2..R+1)",
                   dps["ratio_to_fedavg"] if dps else None, RATIO_LIMIT)]


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    r0 = rows[0]
    head = (f"{r0['sites']} virtual sites, payload {r0['dim']} x {r0['k']} float64 per site, "
            f"{r0['runs']} run(s) per strategy in alternating order, Ray backend via "
            "fedpca.flower.federation.launch; round time = configure_fit entry to "
            "aggregate_fit exit, inside the ServerApp. Round 1 includes Ray actor start-up "
            "(and, for DPS-PCA, the initialisation release); the ratio uses rounds 2.. "
            "(DPS-PCA power rounds).")
    table = [[r["strategy"], r["flower_rounds"], r["first_round_s"], r["median_round_s"],
              r["min_round_s"], r["max_round_s"], r.get("ratio_to_fedavg"),
              r["startup_and_shutdown_s"], r["client_s_per_message_in_process"] * 1e3]
             for r in rows]
    per_round = []
    for r in rows:
        for run_index, rounds in enumerate(r["rounds"], start=1):
            per_round.append([r["strategy"], run_index,
                              ", ".join(f"{rr['seconds']:.2f}" for rr in rounds),
                              max(rr["aggregate_s"] for rr in rounds),
                              sum(rr["failures"] for rr in rounds)])
    return "\n\n".join([
        head,
        md_table(["strategy", "Flower rounds", "round 1 s (median)", "median round 2.. s",
                  "min", "max", "ratio to FedAvg", "start-up + shutdown s",
                  "client ms/message in-process (no Ray)"], table),
        md_table(["strategy", "run", "round times s", "max aggregate_fit s", "failures"],
                 per_round),
    ])

"""(c) A Flower round of DPS-PCA against Flower's own FedAvg whose client does the same work.

Both sides run through :func:`fedpca.flower.federation.launch` (the same engine: Ray, one CPU
per virtual site, one BLAS thread) on Flower's Message API, with 1,000 virtual sites of 200
records each (d = 200, k = 3):

* DPS-PCA: the real :func:`fedpca.flower.simulations.simulate` of a ``DPSPCAScenario``: its
  strategy, its sites' ClientApp (:func:`~fedpca.flower.site.clientapp.service_client_app` over
  each partition's :class:`~fedpca.site.service.SiteService`, with every privacy check, the
  charge to the run's ledger and the answer's public numbers). Round 1 is the
  initialisation (a d-vector up); rounds 2.. are power rounds (``Q`` down, ``H_i`` up).
* FedAvg: ``flwr.serverapp.strategy.FedAvg`` (no evaluation round: DPS-PCA has none) with a
  module-level ClientApp (:data:`fedavg_app`) that does a power round's work on its own 200
  records, kept per process as fedpca keeps its sites: ``X^T (X Q)`` plus Gaussian noise,
  divided by the record count, sent back as the d x k array with ``num-examples``.

Round time is stamped inside the ServerApp: ``configure_train`` entry to ``aggregate_train``
exit of each round (Ray start-up, DPS-PCA's readiness round and result delivery are outside).
The ratio is the median of the steady rounds (rounds 2.., so neither side's first-round
actor warm-up counts; DPS-PCA's are its power rounds), pooled over ``repeats`` runs of each
side in alternating order (DPS, FedAvg, FedAvg, DPS, ...). Also, without Ray: each side's
ClientApp cost per message in this process, and the size and time of pickling each
ClientApp (Flower's Ray backend pickles the app with every job).
"""

from __future__ import annotations

import functools
import pickle
import time
from typing import Any
from unittest import mock

import numpy as np
from common import md_table, median, progress, quick_option, target, timed
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.server import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.supercore.task_identity import TaskIdentity

import fedpca.flower.simulations as simulations
from fedpca.blas import single_thread_blas
from fedpca.flower.site.clientapp import SERVICES, cached_service, service_client_app
from fedpca.flower.federation import launch
from fedpca.flower.wire import request_content
from fedpca.linalg.subspace import thin_qr
from fedpca.scenarios.dps_pca import DPSPCAScenario

FULL = dict(sites=1000, dim=200, k=3, rounds=5, rows_per_site=200, repeats=3)
QUICK = dict(FULL, sites=50, rounds=2, repeats=1)
RATIO_LIMIT = 1.05
#: FedAvg's client noise (any value: the work, a Gaussian draw per entry, is what counts).
FEDAVG_SIGMA = 1.0


class RoundClock:
    """Mixin: stamps ``configure_train`` entry and ``aggregate_train`` exit of every round
    (Message API)."""

    def _clock(self) -> dict[int, dict[str, float]]:
        if not hasattr(self, "_stamps"):
            self._stamps: dict[int, dict[str, float]] = {}
        return self._stamps

    def _configured(self, server_round: int, configure) -> list:
        self._clock().setdefault(server_round, {})["configure"] = time.perf_counter()
        out = list(configure())
        self._clock()[server_round]["dispatch"] = time.perf_counter()
        self._clock()[server_round]["messages"] = len(out)
        return out

    def _aggregated(self, server_round: int, answers: int, errors: int, aggregate):
        self._clock()[server_round]["replies"] = time.perf_counter()
        out = aggregate()
        stamps = self._clock()[server_round]
        stamps["aggregated"] = time.perf_counter()
        stamps["answers"], stamps["errors"] = answers, errors
        return out

    def configure_train(self, server_round, arrays, config, grid):
        return self._configured(server_round, lambda: super(RoundClock, self).configure_train(
            server_round, arrays, config, grid))

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        return self._aggregated(
            server_round, len(replies), sum(msg.has_error() for msg in replies),
            lambda: super(RoundClock, self).aggregate_train(server_round, replies))

    def round_times(self) -> list[dict[str, float]]:
        rounds = []
        for r in sorted(self._clock()):
            s = self._clock()[r]
            rounds.append({
                "round": r, "seconds": s["aggregated"] - s["configure"],
                "configure_s": s["dispatch"] - s["configure"],
                "aggregate_s": s["aggregated"] - s["replies"],
                "messages": s["messages"], "answers": s["answers"], "errors": s["errors"],
            })
        return rounds


def timed_class(cls: type, *mixins: type) -> type:
    """``cls`` (a Message-API strategy) with its rounds stamped (:class:`RoundClock`), after
    ``mixins``."""
    return type(f"Timed{cls.__name__}", (*mixins, RoundClock, cls), {})


# --- FedAvg's side: a module-level ClientApp doing a power round's work ------------------

#: Each partition's records, generated once per process (fedpca's sites are kept likewise).
_RECORDS: dict[tuple[int, int, int], np.ndarray] = {}

fedavg_app = ClientApp()


def fedavg_records(partition: int, rows: int, dim: int) -> np.ndarray:
    """Partition ``partition``'s ``rows x dim`` records (row norms at most 1, as clipped)."""
    key = (partition, rows, dim)
    if key not in _RECORDS:
        X = np.random.default_rng(partition).standard_normal((rows, dim))
        _RECORDS[key] = X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    return _RECORDS[key]


@fedavg_app.train()
def fedavg_train(msg: Message, context: Context) -> Message:
    """``(X^T (X Q) + N(0, sigma^2)) / n`` for the message's ``Q``: the d x k array and the
    record count, as FedAvg expects."""
    (Q,) = msg.content.array_records["arrays"].to_numpy_ndarrays()
    rows = int(msg.content.config_records["config"]["rows"])
    X = fedavg_records(int(context.node_config["partition-id"]), rows, Q.shape[0])
    H = X.T @ (X @ Q)
    H += FEDAVG_SIGMA * np.random.default_rng().standard_normal(H.shape)
    content = RecordDict({"arrays": ArrayRecord([H / rows]),
                          "metrics": MetricRecord({"num-examples": rows})})
    return Message(content=content, reply_to=msg)


def run_fedavg(sites: int, dim: int, k: int, rounds: int, rows: int) -> tuple[float, list]:
    strategy = timed_class(FedAvg)(fraction_evaluate=0.0, min_train_nodes=sites,
                                   min_available_nodes=sites)
    server_app = ServerApp()
    start_basis = thin_qr(np.random.default_rng(0).standard_normal((dim, k)))

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        single_thread_blas()
        strategy.start(grid=grid, initial_arrays=ArrayRecord([start_basis]),
                       num_rounds=rounds, train_config=ConfigRecord({"rows": rows}))

    wall, _ = timed(lambda: launch(server_app, fedavg_app, sites))
    return wall, strategy.round_times()


# --- DPS-PCA's side: the real simulation, its strategy's rounds stamped -------------------

def stamped_simulation(scenario: Any, *mixins: type) -> tuple[float, Any, Any]:
    """``simulate(scenario)`` with its strategy's rounds stamped (:func:`timed_class`, after
    ``mixins``): ``(wall seconds, the strategy, whose round_times() they are, the
    result)``."""
    made = []

    def stamped_strategy_for(*args, **kwargs):
        strategy = strategy_for(*args, **kwargs)
        strategy.__class__ = timed_class(type(strategy), *mixins)
        made.append(strategy)
        return strategy

    strategy_for = simulations.strategy_for
    with mock.patch.object(simulations, "strategy_for", stamped_strategy_for):
        wall, result = timed(lambda: simulations.simulate(scenario))
    return wall, made[0], result


def run_dps(sites: int, dim: int, k: int, rounds: int, rows: int) -> tuple[float, list, Any]:
    """A stamped simulation of DPS-PCA: ``(wall seconds, round times, result)``."""
    wall, strategy, result = stamped_simulation(_scenario(sites, dim, k, rounds, rows))
    return wall, strategy.round_times(), result


def _scenario(sites: int, dim: int, k: int, rounds: int, rows: int) -> DPSPCAScenario:
    return DPSPCAScenario(sites=sites, dim=dim, samples=sites * rows, k=k, sparsity=10,
                          s_hat=20, rounds=rounds, epsilon=1.0, delta=1e-5, seed=0)


# --- Without Ray: the ClientApps' cost per message and per pickle -------------------------

def dps_app(scenario: DPSPCAScenario) -> ClientApp:
    """The simulation's ClientApp for ``scenario`` (as :func:`simulate` builds it)."""
    source = functools.partial(simulations.partition_source, scenario)
    return service_client_app(functools.partial(cached_service, source))


def pickle_cost(app: ClientApp, repeats: int = 200) -> dict[str, float]:
    """Bytes and seconds of pickling ``app`` as Ray does (cloudpickle)."""
    import cloudpickle

    data = cloudpickle.dumps(app)
    start = time.perf_counter()
    for _ in range(repeats):
        pickle.loads(cloudpickle.dumps(app))
    return {"bytes": len(data), "seconds": (time.perf_counter() - start) / repeats}


def client_cost_in_process(sites: int, dim: int, k: int, rows: int) -> dict[str, Any]:
    """Seconds per message of each ClientApp called in this process (no Ray): DPS-PCA's
    init round then two power rounds over ``sites`` contexts (its services opened in the
    first), FedAvg's two rounds; and each app's pickle (:func:`pickle_cost`)."""
    for attribute in ("_task_id", "_run_id", "_node_id"):
        setattr(TaskIdentity, attribute, 1)
    scenario = _scenario(sites, dim, k, 3, rows)
    contexts = [Context(run_id=1, node_id=i + 1,
                        node_config={"partition-id": i, "num-partitions": sites},
                        state=RecordDict(), run_config={}) for i in range(sites)]
    Q = thin_qr(np.random.default_rng(0).standard_normal((dim, k)))
    app = dps_app(scenario)
    SERVICES.clear()

    def per_message(client: ClientApp, content: RecordDict) -> float:
        start = time.perf_counter()
        for context in contexts:
            message = Message(content=content, dst_node_id=context.node_id,
                              message_type=MessageType.TRAIN)
            reply = client(message, context)
            if reply.has_error():
                raise RuntimeError(reply.error.reason)
        return (time.perf_counter() - start) / sites

    init = per_message(app, request_content([], {"phase": "init", "round": 1}))
    power = [per_message(app, request_content([Q], {"phase": "power", "round": r}))
             for r in (1, 2)]
    fedavg_content = RecordDict({"arrays": ArrayRecord([Q]),
                                 "config": ConfigRecord({"rows": rows})})
    fedavg = [per_message(fedavg_app, fedavg_content) for _ in range(2)]
    SERVICES.clear()
    return {"dps_init_s": init, "dps_power_s": min(power), "fedavg_s": min(fedavg),
            "dps_pickle": pickle_cost(app), "fedavg_pickle": pickle_cost(fedavg_app)}


def run(quick: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    sites, dim, k, R, rows = (cfg[x] for x in ("sites", "dim", "k", "rounds", "rows_per_site"))
    runs: dict[str, list[tuple[float, list]]] = {"DPS-PCA": [], "FedAvg": []}
    final_distance = None
    order = []
    for rep in range(cfg["repeats"]):
        order += ["DPS-PCA", "FedAvg"] if rep % 2 == 0 else ["FedAvg", "DPS-PCA"]
    for name in order:
        progress(f"flower_round: {name}, {sites} sites, {R + 1} Flower rounds")
        if name == "DPS-PCA":
            wall, rounds, result = run_dps(sites, dim, k, R, rows)
            final_distance = result.history[-1]["distance"]
        else:
            wall, rounds = run_fedavg(sites, dim, k, R + 1, rows)
        runs[name].append((wall, rounds))
        progress(f"flower_round: {name} done in {wall:.1f}s; rounds "
                 f"{[round(r['seconds'], 2) for r in rounds]}")
    progress("flower_round: client cost per message, in-process (no Ray)")
    cost = client_cost_in_process(min(sites, 200), dim, k, rows)

    def row(name: str) -> dict[str, Any]:
        all_rounds = [rounds for _, rounds in runs[name]]
        steady = [r["seconds"] for rounds in all_rounds for r in rounds[1:]]
        return {
            "strategy": name, "sites": sites, "dim": dim, "k": k, "rows_per_site": rows,
            "flower_rounds": len(all_rounds[0]), "runs": len(all_rounds),
            "run_wall_s": [wall for wall, _ in runs[name]],
            "first_round_s": median([rounds[0]["seconds"] for rounds in all_rounds]),
            "median_round_s": median(steady), "min_round_s": min(steady),
            "max_round_s": max(steady), "rounds": all_rounds,
            "errors": sum(r["errors"] for rounds in all_rounds for r in rounds),
            "client_s_per_message_in_process": (
                cost["dps_power_s"] if name == "DPS-PCA" else cost["fedavg_s"]),
            "pickled_app_bytes": cost["dps_pickle" if name == "DPS-PCA"
                                      else "fedavg_pickle"]["bytes"],
            "pickle_app_s": cost["dps_pickle" if name == "DPS-PCA"
                                 else "fedavg_pickle"]["seconds"],
        }

    dps, fa = row("DPS-PCA"), row("FedAvg")
    dps["final_distance"] = final_distance
    dps["client_cost_in_process"] = cost
    dps["ratio_to_fedavg"] = dps["median_round_s"] / fa["median_round_s"]
    dps["first_round_ratio_to_fedavg"] = dps["first_round_s"] / fa["first_round_s"]
    return [dps, fa]


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    dps = next((r for r in rows if r["strategy"] == "DPS-PCA"), None)
    return [target("DPS-PCA / same-work FedAvg, median steady round (pooled, alternated)",
                   dps["ratio_to_fedavg"] if dps else None, RATIO_LIMIT)]


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    r0 = rows[0]
    head = (f"{r0['sites']} virtual sites of {r0['rows_per_site']} records, d = {r0['dim']}, "
            f"k = {r0['k']}; {r0['runs']} run(s) per side in alternating order, Message API, "
            "Ray through fedpca.flower.federation.launch (one CPU per site). FedAvg's client "
            "does a power round's work (X^T (X Q) plus Gaussian noise, over n). Round time = "
            "configure_train entry to aggregate_train exit, inside the ServerApp; the ratio "
            "is the median of rounds 2.. pooled over the runs (DPS-PCA's power rounds).")
    table = [[r["strategy"], r["flower_rounds"], r["first_round_s"], r["median_round_s"],
              r["min_round_s"], r["max_round_s"], r.get("ratio_to_fedavg"), r["errors"],
              r["client_s_per_message_in_process"] * 1e3, r["pickled_app_bytes"],
              r["pickle_app_s"] * 1e6] for r in rows]
    per_round = [[r["strategy"], i, ", ".join(f"{rr['seconds']:.2f}" for rr in rounds),
                  max(rr["aggregate_s"] for rr in rounds)]
                 for r in rows for i, rounds in enumerate(r["rounds"], start=1)]
    return "\n\n".join([
        head,
        md_table(["strategy", "Flower rounds", "round 1 s (median)", "median round 2.. s",
                  "min", "max", "ratio to FedAvg", "errors",
                  "client ms/message in-process", "pickled ClientApp bytes",
                  "pickle+unpickle us"], table),
        md_table(["strategy", "run", "round times s", "max aggregate_train s"], per_round),
    ])


if __name__ == "__main__":
    import json

    # run from the importable module (as run.py does), so that the ClientApps pickle by
    # reference like any installed App's, not by value as __main__'s would
    import flower_round

    result_rows = flower_round.run(quick_option(__doc__))
    print(flower_round.markdown(result_rows))
    print(json.dumps(flower_round.targets(result_rows), indent=2))

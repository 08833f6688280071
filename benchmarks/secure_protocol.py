"""What fedpca's verifiable secure aggregation costs (issue 22): a secure DPS-PCA round beside
a plain one, side by side in one run, in simulation and on a loopback deployment.

    OPENBLAS_NUM_THREADS=1 python benchmarks/secure_protocol.py [--quick] [--no-deployment]

Writes ``benchmarks/results/secure_protocol.{json,md}`` (``--quick``: ``*.quick.*``).

* **Simulation rounds**: the ``benchmarks/flower_round.py`` scenario (d=200, k=3, 200 records
  per site, the initialisation + 4 power rounds) at 100 and 300 virtual sites: plain
  (per-site noise) and secure (distributed discrete Gaussian residues through the verifiable
  protocol, ``M`` = half the sites, no colluders assumed), one after the other. Round time =
  the strategy's ``configure_train`` entry to ``aggregate_train`` exit (ServerApp side: the
  secure round includes its consistency and unmask exchanges), median over the steady rounds
  (after the initialisation and the first power round, in which every virtual site builds
  its data and, in the secure run, calibrates its discrete noise: reported apart, as is the
  run's one key agreement, which includes starting the sites' Ray actors).
* **Protocol work per site**, in this process on the protocol's own state machines, at the
  same site counts and message length: setup (verify every advertisement, agree keys, split
  and encrypt the seeds), masking, endorsing, revealing, and the server's decoding.
* **Loopback deployment** (TLS, node authentication, pinned ClientApps, 3 sites): DPS-PCA
  with 2 power rounds, plain sites beside secure ones (their policies set ``min-sites``),
  ServerApp time per Flower round.
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
from common import machine_info, md_table, median, progress  # noqa: E402
from flower_round import _scenario, stamped_simulation  # noqa: E402

from fedpca.algorithms.secure_sum import SecureSum, SumDescription  # noqa: E402
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS  # noqa: E402
from fedpca.secure.conditions import smallest_threshold  # noqa: E402
from fedpca.secure.identity import simulation_key, simulation_roster  # noqa: E402
from fedpca.secure.server_session import ServerSession  # noqa: E402
from fedpca.secure.site_session import SiteSession  # noqa: E402
from fedpca.flower.server.secure_server import VerifiedSecureAggregation  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FULL = {"sites": (100, 300), "dim": 200, "k": 3, "power_rounds": 4, "rows": 200}
QUICK = {**FULL, "sites": (20,), "power_rounds": 3}
#: Rounds before the steady state: the initialisation and the first power round, where each
#: virtual site first builds its data and calibrates its discrete noise (once per process).
WARM_UP = 2
#: The target: a secure DPS-PCA round within this factor of the plain one (100 and 300 sites).
RATIO_LIMIT = 3.0


def simulated_run(scenario) -> dict[str, Any]:
    """One simulation with round stamps (:func:`flower_round.stamped_simulation`) and the
    secure setup's time."""
    setups: list[float] = []
    original = VerifiedSecureAggregation.setup

    def timed_setup(self, grid, nodes, rounds):
        start = time.perf_counter()
        original(self, grid, nodes, rounds)
        setups.append(time.perf_counter() - start)

    with mock.patch.object(VerifiedSecureAggregation, "setup", timed_setup):
        wall, strategy, result = stamped_simulation(scenario)
    rounds = [r["seconds"] for r in strategy.round_times()]
    return {"wall_s": wall, "rounds_s": rounds,
            "round_s": median(rounds[WARM_UP:]), "warm_up_s": sum(rounds[:WARM_UP]),
            "setup_s": setups[0] if setups else None,
            "distance": result.history[-1]["distance"]}


def simulation_rows(cfg: dict) -> list[dict[str, Any]]:
    """Plain and secure rounds per site count, alternating (plain first, then secure)."""
    rows = []
    for sites in cfg["sites"]:
        plain = _scenario(sites, cfg["dim"], cfg["k"], cfg["power_rounds"], cfg["rows"])
        secure = replace(plain, secure_min_sites=max(2, sites // 2), discrete=True)
        pair = {}
        for mode, scenario in (("plain", plain), ("secure", secure)):
            progress(f"secure_protocol: {mode}, {sites} sites")
            run = simulated_run(scenario)
            pair[mode] = run
            rows.append({"sites": sites, "mode": mode, **run})
            progress(f"secure_protocol: {mode}: round {run['round_s']:.2f} s, setup "
                     f"{run['setup_s']}")
        rows[-1]["ratio_to_plain"] = pair["secure"]["round_s"] / pair["plain"]["round_s"]
        rows[-2]["ratio_to_plain"] = 1.0
    return rows


def protocol_costs(sites: int, length: int, rounds: int) -> dict[str, float]:
    """Milliseconds per site (and the server's per round) of the protocol's own work."""
    members = min(sites, 300)
    roster = simulation_roster(members)
    threshold = smallest_threshold(members, 0, max(2, members // 2))
    sessions = {str(p): SiteSession(str(p), simulation_key(p), roster,
                                    min_sites=max(2, members // 2), colluders=0,
                                    max_rounds=rounds, vouched=roster.names)
                for p in range(members)}
    # the run's description every member signs (one sum of the message's length per round)
    public = SecureSum(sensitivity=1.0, max_records=200, norm_per_record=1.0, dimension=length,
                       sites_in_sum=members, rotation_seed=1)
    described = SumDescription(max(2, members // 2), 0, (public,) * rounds).to_text()
    server = ServerSession("bench", rounds, threshold, DEFAULT_MODULUS, described)
    for session in sessions.values():
        server.receive_advertisement(session.advertise(server.setup_request()))
    key_list = server.key_list()
    clock: dict[str, list[float]] = {"setup": [], "mask": [], "endorse": [], "reveal": []}

    def timed(name, fn):
        start = time.perf_counter()
        out = fn()
        clock[name].append(time.perf_counter() - start)
        return out

    for session in sessions.values():
        server.receive_bundle(timed("setup", lambda s=session: s.share(key_list)))
    rng = np.random.default_rng(0)
    for round_number in (1, 2):
        for name, request in server.input_requests(round_number, length).items():
            value = rng.integers(0, DEFAULT_MODULUS, length)
            server.receive_masked_input(timed(
                "mask", lambda s=sessions[name], r=request, v=value: s.masked_input(r, v)))
        consistency = server.consistency_request(round_number)
        for name in server.endorsers(round_number):
            server.receive_endorsement(timed(
                "endorse", lambda s=sessions[name]: s.endorse(consistency)))
        for name, request in server.unmask_requests(round_number).items():
            server.receive_reveal(timed(
                "reveal", lambda s=sessions[name], r=request: s.unmask(r)))
        start = time.perf_counter()
        server.decode(round_number)
        clock.setdefault("server decode", []).append(time.perf_counter() - start)
    return {name: 1000 * median(values[len(values) // 2:] if name == "mask" else values)
            for name, values in clock.items()}


def deployment_rows(cfg: dict) -> list[dict[str, Any]]:
    """ServerApp seconds per Flower round on a loopback deployment of 3 sites, plain and
    secure (each its own deployment; same data, same run_config but the secure keys)."""
    from fedpca.deployment.consortium import write_consortium
    from fedpca.deployment.local import LocalDeployment, Site

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        data = []
        rng = np.random.default_rng(0)
        for i in range(3):
            X = rng.standard_normal((300, 20))
            data.append(base / f"site{i}.npy")
            np.save(data[-1], X / np.linalg.norm(X, axis=1, keepdims=True))
        run_config = {"dim": 20, "samples": 900, "k": 2, "sparsity": 5, "s-hat": 8,
                      "rounds": cfg["power_rounds"], "min-sites": 3, "dataset": "files"}
        for mode in ("plain", "secure"):
            workdir = base / mode
            sites = [Site(f"hospital-{i}", path) for i, path in enumerate(data)]
            extra: dict[str, Any] = {}
            if mode == "secure":
                policies = write_consortium(base / "consortium", [s.name for s in sites], data,
                                            min_sites=3)
                sites = [replace(s, policy=p) for s, p in zip(sites, policies)]
                extra = {"secure-min-sites": 3, "discrete": True, "secagg-max-weight": 300}
            progress(f"secure_protocol: loopback deployment, {mode}")
            with LocalDeployment(workdir, sites) as deployment:
                start = time.perf_counter()
                result = deployment.run({**run_config, **extra})
                wall = time.perf_counter() - start
            flower_rounds = len(result.history)
            rows.append({"mode": mode, "flower_rounds": flower_rounds, "flwr_run_s": wall,
                         "server_s": result.config.get("wall_seconds"),
                         "per_round_s": result.config.get("wall_seconds", wall) / flower_rounds})
            progress(f"secure_protocol: deployment {mode}: {rows[-1]['per_round_s']:.1f} s/round")
    return rows


def markdown(report: dict[str, Any]) -> str:
    """The report's tables and verdict."""
    cfg, rows = report["config"], report["simulation"]
    secure = [r for r in rows if r["mode"] == "secure"]
    verdict = all(r["ratio_to_plain"] <= RATIO_LIMIT for r in secure)
    lines = [
        "# What the verifiable secure aggregation costs", "",
        f"Generated {report['machine']['date']} by `{report['command']}` in "
        f"{report['seconds']:.0f} s on {report['machine']['cores']} cores; flwr "
        f"{report['machine']['flwr']}.", "",
        f"DPS-PCA, d={cfg['dim']}, k={cfg['k']}, {cfg['rows']} records per site, the "
        f"initialisation + {cfg['power_rounds']} power rounds; round = configure_train entry "
        f"to aggregate_train exit, median over the rounds after the first {WARM_UP} (in which "
        "each virtual site builds its data and calibrates its discrete noise: the warm-up "
        "column); secure: discrete residues through the verifiable protocol, M = half the "
        "sites, c = 0; setup: the run's one key agreement, with the sites' Ray actors "
        "starting.", "",
        f"**Target: secure round <= {RATIO_LIMIT:g} x plain at every site count. Measured: "
        + ", ".join(f"{r['ratio_to_plain']:.2f} x at {r['sites']} sites" for r in secure)
        + f": {'PASS' if verdict else 'FAIL'}.**", "",
        md_table(["sites", "mode", "round s", "ratio to plain", "warm-up s (2 rounds)",
                  "setup s (once per run)", "final distance"],
                 [[r["sites"], r["mode"], f"{r['round_s']:.3f}", f"{r['ratio_to_plain']:.2f}",
                   f"{r['warm_up_s']:.2f}",
                   "-" if r["setup_s"] is None else f"{r['setup_s']:.2f}",
                   f"{r['distance']:.3f}"] for r in rows]), "",
        "## The protocol's own work (ms, this process, one core)", "",
        md_table(["sites", "setup per site", "mask per site", "endorse per site",
                  "reveal per site", "server decode per round"],
                 [[s, *(f"{c[k]:.2f}" for k in ("setup", "mask", "endorse", "reveal",
                                                 "server decode"))]
                  for s, c in report["costs"].items()]),
    ]
    if report.get("deployment"):
        lines += ["", "## Loopback deployment (3 sites, TLS, node authentication, pinned "
                      "ClientApps)", "",
                  md_table(["mode", "Flower rounds", "ServerApp s", "s per round",
                            "flwr run s"],
                           [[r["mode"], r["flower_rounds"], f"{r['server_s']:.1f}",
                             f"{r['per_round_s']:.1f}", f"{r['flwr_run_s']:.1f}"]
                            for r in report["deployment"]])]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, separate files")
    parser.add_argument("--no-deployment", action="store_true",
                        help="skip the loopback deployment part")
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    start = time.perf_counter()
    report: dict[str, Any] = {"config": cfg, "machine": machine_info(),
                              "command": "OPENBLAS_NUM_THREADS=1 python "
                                         "benchmarks/secure_protocol.py"
                                         + (" --quick" if args.quick else "")}
    report["simulation"] = simulation_rows(cfg)
    length = 1 << (cfg["dim"] * cfg["k"] - 1).bit_length()
    report["costs"] = {sites: protocol_costs(sites, length, cfg["power_rounds"] + 1)
                       for sites in cfg["sites"]}
    if not args.no_deployment:
        report["deployment"] = deployment_rows(cfg)
    report["seconds"] = time.perf_counter() - start
    stem = "secure_protocol.quick" if args.quick else "secure_protocol"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=2, default=str))
    (RESULTS / f"{stem}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()

"""Thousands of virtual sites (issue 14): DPS-PCA wall time, round time and peak memory of all
processes at 100 / 500 / 1,000 / 2,000 sites, and FedAvg with the same payload at 1,000.

    OPENBLAS_NUM_THREADS=1 python benchmarks/sites_scale.py [--quick]

DPS-PCA: ``simulate_dps_pca`` of ``DPSPCAScenario(sites=N, samples=2000 N, dim=200, k=3,
rounds=10)`` (the initialisation + 10 power rounds, per-site noise, Message API timed through
the legacy hooks as in ``benchmarks/flower_round.py``). FedAvg: Flower's own strategy with a
client whose ``fit`` returns one ``d x k`` array, 11 rounds, 1,000 sites. Round time =
configure_fit entry to aggregate_fit exit; the ratio compares the median of rounds 2.. of
each (no Ray warm-up). Memory: every 0.5 s the sum of ``Pss`` (``/proc/PID/smaps_rollup``)
over this process and all its descendants (Ray's processes and workers), peak over the run.
Each worker keeps at most ``FEDPCA_SITE_CACHE_MB`` (default 1024) MB of prepared site data
(``fedpca.data.site_cache``) and reads the other sites back from the run's store on local
disk when asked (``fedpca.data.site_store``; the first worker to prepare a site, from its
seed, wrote it there); "site store MiB" is that directory's size at the end of the run
(disk and page cache, not in the Pss column). At 1,000 sites the same run also goes without
the store (``FEDPCA_SITE_STORE=0``: evicted sites rebuilt from their seeds) and with every
site in every worker's cache (``FEDPCA_SITE_CACHE_MB=4096``), side by side with FedAvg.

Writes ``benchmarks/results/sites_scale.json`` and the "sites" section of
``benchmarks/results/scale.md`` (``--quick``: ``sites_scale.quick.json`` and
``scale.quick.md``).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import contextlib  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402
from unittest import mock  # noqa: E402

from common import machine_info, md_table, median, progress, quick_option  # noqa: E402
from flower_round import run_dps, run_fedavg  # noqa: E402
from supernodes import _proc_kib, replace_section  # noqa: E402

from fedpca.data.site_cache import BUDGET_VARIABLE  # noqa: E402
from fedpca.data.site_store import STORE_VARIABLE, temporary_store  # noqa: E402
from fedpca.deployment.processes import descendants, process_table  # noqa: E402
from fedpca.flower import federation as launcher  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FULL = {"sites": (100, 500, 1000, 2000), "fedavg_sites": 1000, "dim": 200, "k": 3,
        "rounds": 10, "rows": 2000, "large_cache_mb": 4096}
QUICK = {**FULL, "sites": (20, 40), "fedavg_sites": 40, "rounds": 2, "rows": 200}
RATIO_LIMIT = 1.05
BEGIN, END = "<!-- BEGIN sites (benchmarks/sites_scale.py) -->", "<!-- END sites -->"


class MemoryWatch:
    """Peak of the summed Pss of this process and its descendants, sampled in a thread."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval, self.peak_mib = interval, 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            pids = descendants({os.getpid()}, process_table()) | {os.getpid()}
            pss = sum(_proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in pids) / 1024
            self.peak_mib = max(self.peak_mib, pss)
            self.stop.wait(self.interval)

    def __enter__(self) -> MemoryWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@contextlib.contextmanager
def measured_store(sizes: list[float]) -> Iterator[str]:
    """The run's site store, its size (MiB) at the end of the run appended to ``sizes``."""
    with temporary_store() as directory:
        yield directory
        sizes.append(sum(f.stat().st_size for f in Path(directory).iterdir()) / 2**20)


def watched(label: str, fn: Callable[[], tuple]) -> dict[str, Any]:
    progress(f"sites_scale: {label}")
    sizes: list[float] = []
    with MemoryWatch() as memory, mock.patch.object(
            launcher, "temporary_store", lambda: measured_store(sizes)):
        wall, rounds, *_ = fn()
    seconds = [r["seconds"] for r in rounds]
    row = {"run": label, "wall_s": wall, "rounds_s": seconds, "round1_s": seconds[0],
           "round_s": median(seconds[1:]), "peak_pss_mib": memory.peak_mib,
           "store_mib": sizes[0] if sizes else None}
    progress(f"sites_scale: {label}: wall {wall:.1f} s, round {row['round_s']:.2f} s, "
             f"peak {memory.peak_mib:.0f} MiB")
    return row


def run(cfg: dict) -> list[dict[str, Any]]:
    d, k, rounds, rows_per = cfg["dim"], cfg["k"], cfg["rounds"], cfg["rows"]
    rows = []
    for sites in cfg["sites"]:
        row = watched(f"DPS-PCA {sites} sites", lambda s=sites: run_dps(s, d, k, rounds, rows_per))
        rows.append({"sites": sites, "strategy": "DPS-PCA", **row})
        if sites == cfg["fedavg_sites"]:
            variants = {  # the same run without the store, and with every site cached
                "DPS-PCA (no site store)": {STORE_VARIABLE: "0"},
                "DPS-PCA (every site cached)": {BUDGET_VARIABLE: str(cfg["large_cache_mb"])},
            }
            for name, env in variants.items():
                with mock.patch.dict(os.environ, env):
                    row = watched(f"{name}, {sites} sites",
                                  lambda s=sites: run_dps(s, d, k, rounds, rows_per))
                rows.append({"sites": sites, "strategy": name, **row})
            fed = watched(f"FedAvg {sites} sites",
                          lambda s=sites: run_fedavg(s, d, k, rounds + 1, rows_per))
            rows.append({"sites": sites, "strategy": "FedAvg", **fed})
            for row in rows[-4:-1]:
                row["ratio_to_fedavg"] = row["round_s"] / fed["round_s"]
    return rows


def section(rows: list[dict], cfg: dict, seconds: float, machine: dict) -> str:
    dps = min((r for r in rows if "ratio_to_fedavg" in r), key=lambda r: r["ratio_to_fedavg"])
    verdict = "PASS" if dps["ratio_to_fedavg"] <= RATIO_LIMIT else "FAIL"
    return "\n".join([
        BEGIN,
        "## Thousands of virtual sites (issue 14)",
        "",
        f"Generated {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} by "
        f"`OPENBLAS_NUM_THREADS=1 python benchmarks/sites_scale.py` in {seconds:.0f} s on "
        f"{machine.get('cores', os.cpu_count())} cores (see the script's docstring). DPS-PCA, "
        f"d={cfg['dim']}, k={cfg['k']}, {cfg['rows']} records per site, the initialisation + "
        f"{cfg['rounds']} power rounds; round = median of rounds 2..; peak memory = the summed "
        "Pss of all the run's processes (driver, Ray, workers).",
        "",
        f"**Round at {dps['sites']} sites: {dps['strategy']} / FedAvg with the same payload = "
        f"{dps['ratio_to_fedavg']:.3f} (target <= {RATIO_LIMIT}): {verdict}.**",
        "",
        md_table(["sites", "strategy", "wall s", "round 1 s", "round s (median 2..)",
                  "peak memory MiB (all processes)", "site store MiB", "ratio to FedAvg"],
                 [[r["sites"], r["strategy"], r["wall_s"], r["round1_s"], r["round_s"],
                   r["peak_pss_mib"], r["store_mib"] if r["store_mib"] is not None else "-",
                   r.get("ratio_to_fedavg", "-")] for r in rows]),
        END,
    ])


def main() -> None:
    quick = quick_option(__doc__)
    cfg = QUICK if quick else FULL
    start = time.perf_counter()
    rows = run(cfg)
    machine = machine_info()
    seconds = time.perf_counter() - start
    suffix = ".quick" if quick else ""
    (RESULTS / f"sites_scale{suffix}.json").write_text(
        json.dumps({"config": cfg, "machine": machine, "runs": rows}, indent=1, default=str))
    md = RESULTS / f"scale{suffix}.md"
    replace_section(md, section(rows, cfg, seconds, machine), BEGIN, END)
    progress(f"wrote {md}")


if __name__ == "__main__":
    main()

"""An honest secure run on loopback, many times in a row: does every site stay in every sum?

On a busy 2-core machine an honest secure DPdisPCA run over three real sites once went on
with two of them (``sites_answered`` was ``['hospital-b', 'hospital-c']``). The cause, read
off the SuperLink's and the sites' logs: the run started while the third site's SuperNode was
still connecting (it was activated 10 s after the others), and a run asks the sites connected
when it starts; with ``min-sites = 2`` it went on without it. ``LocalDeployment.start`` now
returns once every SuperNode is connected, and every later wait of the ServerApp lasts the
longest answer deadline a ready site states (its policy's ``[limits] answer-seconds``), not a
constant.

This script starts one loopback deployment (TLS, node authentication, each site's pinned
ClientApp) of three real sites with secure policies (``min-sites = 2``), optionally loads the
machine with the test suite's non-Flower tests on two workers, and runs the honest secure
DPdisPCA run ``--runs`` times in a row (a fresh deployment every ``--fresh`` runs, since the
race was at start-up), counting the runs in which a site was left out of the sum::

    OPENBLAS_NUM_THREADS=1 python benchmarks/secure_loopback.py --runs 10 --fresh 1 --load

It writes ``results/secure_loopback.{json,md}``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import machine_info, md_table, progress, write_results  # type: ignore[import-not-found]

from fedpca.deployment.consortium import write_consortium
from fedpca.deployment.local import LocalDeployment, Site

SITES = ("hospital-a", "hospital-b", "hospital-c")
RUN_CONFIG = {"algorithm": "dpdis-pca", "dim": 8, "k": 2, "variant": "secure-sum",
              "min-sites": 2, "dataset": "files"}
RESULTS = Path(__file__).resolve().parent / "results"


def records(seed: int, rows: int = 400, dim: int = 8) -> np.ndarray:
    """Unit-norm rows."""
    X = np.random.default_rng(seed).standard_normal((rows, dim))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def deployment(work: Path) -> LocalDeployment:
    """Three secure sites (M = 2) in ``work``."""
    data = []
    for i, name in enumerate(SITES):
        data.append(work / f"{name}.npy")
        np.save(data[-1], records(i))
    policies = write_consortium(work / "sites", SITES, data, min_sites=2)
    return LocalDeployment(work / "run", [Site(n, d, p) for n, d, p in zip(SITES, data, policies)])


def load() -> subprocess.Popen:
    """The suite's other workers: the non-Flower tests on two workers, again and again."""
    loop = ("while true; do python -m pytest -q -n 2 -m 'not federation and not slow' "
            "-p no:cacheprovider >/dev/null 2>&1; done")
    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen(["bash", "-c", loop], cwd=root, start_new_session=True)


def markdown(summary: dict) -> str:
    """The results as a page."""
    table = md_table(["run", "deployment up (s)", "run (s)", "sites answered"],
                     [[r["run"], r["up_seconds"], r["run_seconds"],
                       ", ".join(r["sites_answered"])] for r in summary["rows"]])
    load = "with" if summary["load"] else "without"
    return (f"# Honest secure runs on loopback: every site in every sum\n\n"
            f"{summary['runs_with_every_site']} of {summary['runs']} runs kept all three "
            f"sites ({load} the test suite's other workers running; a fresh deployment every "
            f"{summary['fresh']} run(s)); {summary['machine']['cores']} cores, "
            f"{summary['machine']['date']}.\n\n{table}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--fresh", type=int, default=1,
                        help="start a fresh deployment every this many runs")
    parser.add_argument("--load", action="store_true",
                        help="run the test suite's non-Flower tests beside it")
    args = parser.parse_args()
    loader = load() if args.load else None
    rows = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            done = 0
            while done < args.runs:
                work = Path(folder) / f"deployment-{done}"
                work.mkdir()
                started = time.perf_counter()
                with deployment(work) as local:
                    up = time.perf_counter() - started
                    for _ in range(min(args.fresh, args.runs - done)):
                        begun = time.perf_counter()
                        result = local.run(dict(RUN_CONFIG), timeout=900)
                        rows.append({"run": done + 1, "up_seconds": round(up, 1),
                                     "run_seconds": round(time.perf_counter() - begun, 1),
                                     "sites_answered": result.sites_answered[0],
                                     "all_sites": result.sites_answered[0] == list(SITES)})
                        progress(f"run {done + 1}: {rows[-1]}")
                        done += 1
    finally:
        if loader is not None:
            subprocess.run(["pkill", "-TERM", "-s", str(loader.pid)], check=False)
    summary = {"runs": len(rows), "runs_with_every_site": sum(r["all_sites"] for r in rows),
               "load": args.load, "fresh": args.fresh, "machine": machine_info(),
               "rows": rows}
    write_results(RESULTS, "secure_loopback", False, summary, markdown)
    return 0 if summary["runs_with_every_site"] == summary["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())

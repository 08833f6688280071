"""(h) The CLI's start-up: ``fedpca --help`` and ``fedpca simulate dps-pca --help`` as whole
processes (Python's own start-up included), beside ``python -c pass`` as the floor, in
alternating order so a drifting machine affects every command alike.

Target (issue 12): under 0.5 s each, median of the runs.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

from common import md_table, progress, target

LIMIT_S = 0.5
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "fedpca --help": [shutil.which("fedpca") or "fedpca", "--help"],
    "fedpca simulate dps-pca --help": [shutil.which("fedpca") or "fedpca", "simulate",
                                       "dps-pca", "--help"],
}


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Each command's wall times over ``runs`` alternating rounds (one warm-up round)."""
    runs = 5 if quick else 21
    for command in COMMANDS.values():
        _wall(command)  # warm the file cache
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for i in range(runs):
        for name, command in COMMANDS.items():
            times[name].append(_wall(command))
        if i % 5 == 4:
            progress(f"cli start-up: {i + 1}/{runs} rounds")
    return [{"command": name, "runs": runs, "median_s": statistics.median(t),
             "min_s": min(t), "max_s": max(t)} for name, t in times.items()]


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    return [target(f"`{r['command']}` wall time (s, median)", r["median_s"], LIMIT_S,
                   measured=not quick)
            for r in rows if r["command"].startswith("fedpca")]


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    return md_table(["command", "runs", "median s", "min s", "max s"],
                    [[r["command"], r["runs"], r["median_s"], r["min_s"], r["max_s"]]
                     for r in rows])

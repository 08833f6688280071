"""Helpers shared by the benchmarks: machine description, timing, small formatting."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def machine_info() -> dict[str, Any]:
    """Cores, library versions, BLAS threads and the date: what the figures depend on."""
    import dp_accounting  # noqa: F401 - version only
    import flwr
    import numpy
    import scipy

    try:
        from importlib.metadata import version

        dp_version = version("dp-accounting")
    except Exception:  # noqa: BLE001 - informational only
        dp_version = "unknown"
    try:
        from threadpoolctl import threadpool_info

        blas = [
            f"{i.get('internal_api')} {i.get('version')} threads={i.get('num_threads')}"
            for i in threadpool_info()
            if i.get("user_api") == "blas"
        ]
    except Exception:  # noqa: BLE001 - informational only
        blas = []
    try:
        with open("/proc/meminfo") as fh:
            mem_kb = int(fh.readline().split()[1])
        memory_gib = round(mem_kb / 2**20, 1)
    except Exception:  # noqa: BLE001 - informational only
        memory_gib = None
    return {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "cpu": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "flwr": flwr.__version__,
        "dp_accounting": dp_version,
        "blas": blas,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except Exception:  # noqa: BLE001 - informational only
        pass
    return platform.processor() or "unknown"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``(seconds, result)`` of one call of ``fn``."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values))


def std(values: Sequence[float]) -> float:
    return float(statistics.stdev(values)) if len(values) > 1 else 0.0


def target(name: str, value: float | None, limit: float, measured: bool = True) -> dict:
    """A pass/fail record ``value <= limit`` (``passed`` is None if not measured)."""
    ok = None if (value is None or not measured) else bool(value <= limit)
    return {"target": name, "value": value, "limit": limit, "passed": ok}


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e4 or abs(value) < 10 ** (-digits)):
            return f"{value:.{digits}g}"
        return f"{value:.{digits}f}"
    return str(value)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def write_results(folder: Path, name: str, quick: bool, doc: dict[str, Any],
                  markdown: Callable[[dict[str, Any]], str]) -> None:
    """Write ``doc`` to ``folder/NAME.json`` and ``markdown(doc)`` to ``folder/NAME.md``
    (``NAME.quick.*`` for a ``quick`` run, so a smoke test never overwrites the figures)."""
    stem = f"{name}.quick" if quick else name
    (folder / f"{stem}.json").write_text(json.dumps(doc, indent=2))
    (folder / f"{stem}.md").write_text(markdown(doc))
    progress(f"wrote {folder / stem}.json and {folder / stem}.md")


def quick_option(doc: str) -> bool:
    """Parse a benchmark's only option, ``--quick`` (small sizes, a smoke test); the help
    text is the first paragraph of ``doc``."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    return parser.parse_args().quick

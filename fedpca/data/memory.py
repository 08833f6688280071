"""Whether a simulation's synthetic data fit in this machine's memory, asked before any of
it is generated.

A simulation generates every virtual site's records on this machine (``samples x dim``
float64 values; SuLQ k-plane's model samples them all at once in every process), and its
synthetic models hold ``d x d`` matrices (the spiked models' eigenbases). Asked for
more than the memory available, it would stop with a ``MemoryError`` deep inside the data
generation, or push the machine into swap; :func:`require_simulation_memory` refuses such a
run first, naming the parameters that set its size and the limit.
"""

from __future__ import annotations

import os
from pathlib import Path

from fedpca.errors import ParameterError

#: Bytes per record value (float64).
VALUE_BYTES = 8
#: Where Linux reports the memory available to new allocations without swapping.
MEMINFO = Path("/proc/meminfo")


def available_memory() -> int | None:
    """Bytes of memory available to new allocations without swapping: Linux's
    ``MemAvailable``, else the free physical pages (``SC_AVPHYS_PAGES``), else ``None``
    (unknown: nothing is refused)."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def require_simulation_memory(samples: int, dim: int, sites: int) -> None:
    """Refuse (ParameterError naming ``samples``, ``dim`` and ``sites``) a simulation whose
    ``samples x dim`` synthetic records and a ``dim x dim`` model matrix would not fit in
    the memory available now (``sites <= samples`` is checked with the scenario)."""
    needed = VALUE_BYTES * int(dim) * (int(samples) + int(dim))
    available = available_memory()
    if available is None or needed <= available:
        return
    raise ParameterError(
        f"the simulation's records ({{samples}} x {{dim}}) and model ({{dim}} x {{dim}}) over "
        f"{{sites}} sites need {_gb(needed)} on this machine, above the {_gb(available)} of "
        "memory available now",
        {"samples": samples, "dim": dim, "sites": sites},
        hint="lower {samples} or {dim}, or free memory",
    )


def _gb(size: int) -> str:
    return f"{size / 2**30:.3g} GB"

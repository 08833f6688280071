"""Per-step progress of a long sweep on stderr (no dependency).

On a terminal: ``label [#####.....] i/n, 12 s elapsed, ~30 s left``, redrawn after every
step. Elsewhere (CI, a log file): a plain line at about every tenth of the steps and at the
end, so a log shows the sweep advancing without one line per step. ``fedpca experiment
--quiet`` silences it (:func:`silenced`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: Plain (non-terminal) mode prints a line at about every 1/PLAIN_LINES of the steps.
PLAIN_LINES = 10
_state = {"quiet": False}


@contextlib.contextmanager
def silenced(quiet: bool = True) -> Iterator[None]:
    """Within this block, :func:`progress` draws nothing (``--quiet``)."""
    previous, _state["quiet"] = _state["quiet"], quiet
    try:
        yield
    finally:
        _state["quiet"] = previous


def step_status(label: str, done: int, total: int, elapsed: float) -> str:
    """``label [####......] 3/10, 4 s elapsed, ~9 s left``."""
    filled = int(30 * done / max(total, 1))
    left = f", ~{elapsed / done * (total - done):.0f} s left" if 0 < done < total else ""
    return (f"{label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}, "
            f"{elapsed:.0f} s elapsed{left}")


def progress(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """Yield ``items`` while reporting ``label``'s steps done of ``total`` on stderr."""
    items = list(items) if total is None else items
    total = len(items) if total is None else total
    start = time.perf_counter()
    stream = sys.stderr
    tty = stream.isatty()
    every = max(1, total // PLAIN_LINES)
    for done, item in enumerate(items, start=1):
        yield item
        if _state["quiet"]:
            continue
        status = step_status(label, done, total, time.perf_counter() - start)
        if tty:
            stream.write("\r" + status + ("\n" if done == total else ""))
        elif done % every == 0 or done == total:
            stream.write(status + "\n")
        stream.flush()

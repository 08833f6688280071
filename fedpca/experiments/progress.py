"""A plain progress bar on stderr for long sweeps (no dependency, quiet when not a TTY)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """Yield ``items`` while drawing ``label [#####.....] i/n elapsed`` on stderr."""
    items = list(items) if total is None else items
    total = len(items) if total is None else total
    start = time.perf_counter()
    stream = sys.stderr
    for done, item in enumerate(items, start=1):
        yield item
        filled = int(30 * done / max(total, 1))
        line = (f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total} "
                f"{time.perf_counter() - start:.0f}s")
        if stream.isatty():
            stream.write(line)
            stream.flush()
    if stream.isatty():
        stream.write("\n")
    else:
        stream.write(f"{label}: {total} steps in {time.perf_counter() - start:.0f}s\n")

"""Find and stop processes by PID through ``/proc`` (Linux), descendants included.

Flower's daemons start processes of their own (the SuperLink and every SuperNode start a
``flower-superexec``, which starts a ServerApp or ClientApp process per run or message),
some in a new session, so a process group does not hold them all. A process is named here
by its PID *and* its start time, so a PID the kernel has reused for an unrelated process is
never signalled. A zombie counts as gone: it holds no resources but its table entry.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

PROC = Path("/proc")
#: Seconds a process gets to exit after SIGTERM before it is sent SIGKILL.
DEFAULT_GRACE = 10.0
_POLL = 0.1


@dataclass(frozen=True)
class ProcessInfo:
    """One live process: ``pid``, parent ``ppid``, ``start`` (clock ticks since boot), and
    its command line with arguments separated by spaces."""

    pid: int
    ppid: int
    start: int
    cmdline: str


def process_table() -> dict[int, ProcessInfo]:
    """Every visible, non-zombie process, by PID."""
    infos = (_read_process(entry) for entry in PROC.iterdir() if entry.name.isdigit())
    return {info.pid: info for info in infos if info is not None}


def _read_process(entry: Path) -> ProcessInfo | None:
    try:
        stat = (entry / "stat").read_text()
        cmdline = (entry / "cmdline").read_bytes()
    except OSError:  # it exited meanwhile, or is not ours to read
        return None
    # stat is "pid (comm) state ppid ... starttime ...": comm may hold spaces and ")".
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return ProcessInfo(
        pid=int(entry.name), ppid=int(fields[1]), start=int(fields[19]),
        cmdline=cmdline.replace(b"\0", b" ").decode(errors="replace").strip(),
    )


def descendants(roots: Iterable[int], table: dict[int, ProcessInfo]) -> set[int]:
    """``roots`` that are alive in ``table`` and every process below them."""
    found = {pid for pid in roots if pid in table}
    frontier = set(found)
    while frontier:
        frontier = {p.pid for p in table.values() if p.ppid in frontier} - found
        found |= frontier
    return found


def processes_with_env(name: str, value: str) -> set[int]:
    """PIDs of the live processes whose environment holds ``name=value`` (readable ones)."""
    wanted = f"{name}={value}".encode()
    return {pid for pid in process_table() if wanted in _environ(pid)}


def _environ(pid: int) -> list[bytes]:
    """The process's environment entries (none when it is not ours to read, or exited)."""
    try:
        return (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return []


def processes_naming(text: str) -> set[int]:
    """PIDs of the live processes (other than this one) whose command line contains ``text``."""
    return {
        p.pid for p in process_table().values() if text in p.cmdline and p.pid != os.getpid()
    }


def stop_processes(pids: Iterable[int], grace: float = DEFAULT_GRACE) -> list[int]:
    """SIGTERM ``pids`` and all their descendants, SIGKILL whichever is left after ``grace``
    seconds; return the PIDs found. Descendants are listed before any signal is sent
    (an orphan's parent becomes init) and again after, for processes started meanwhile."""
    table = process_table()
    doomed = {pid: table[pid].start for pid in descendants(pids, table)}
    _signal(doomed, signal.SIGTERM)
    _wait_gone(doomed, grace)
    table = process_table()
    late = descendants(doomed, table) - set(doomed)
    doomed.update({pid: table[pid].start for pid in late})
    survivors = _alive(doomed)
    if survivors:
        logger.warning("SIGKILL for processes that ignored SIGTERM: %s", sorted(survivors))
        _signal(survivors, signal.SIGKILL)
        _wait_gone(survivors, grace)
    return sorted(doomed)


def signal_processes(pids: Iterable[int], sig: signal.Signals) -> list[int]:
    """Send ``sig`` to the live processes among ``pids`` (not to their descendants), e.g.
    SIGKILL to make one fail abruptly; return the PIDs signalled."""
    table = process_table()
    targets = {pid: table[pid].start for pid in pids if pid in table}
    _signal(targets, sig)
    return sorted(targets)


def _alive(processes: dict[int, int]) -> dict[int, int]:
    """The entries of ``{pid: start}`` that are still the same live process."""
    table = process_table()
    return {
        pid: start for pid, start in processes.items()
        if pid in table and table[pid].start == start
    }


def _wait_gone(processes: dict[int, int], grace: float) -> None:
    """Wait until none of ``{pid: start}`` is alive, or ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while _alive(processes) and time.monotonic() < deadline:
        time.sleep(_POLL)


def _signal(processes: dict[int, int], sig: signal.Signals) -> None:
    for pid in _alive(processes):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

"""Live progress of a run, driven by the server's own round events (no Flower import).

Every fedpca strategy calls its observers after it has aggregated a round
(:meth:`fedpca.flower.server.rounds.SiteRoundStrategy.add_observer`) with a :class:`RoundEvent`:
the round's history entry, how many sites were asked and answered, and how many rounds the
run has. Under Ray the strategy runs in the driver process, so an observer here sees every
round as it completes.

:class:`RoundProgress` prints one line per round (the same columns as the per-round table,
plus the elapsed time). On a terminal it also keeps a progress bar (rounds done, elapsed,
estimated time left) on the last line, redrawn twice a second so a slow run never looks
hung; on anything else (CI, a log file) it prints the plain lines only.
:func:`log_round` is the observer of the Flower App, which writes to the server log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from fedpca.report import dropped_lines, round_line, table_header

logger = logging.getLogger(__name__)

#: Seconds between redraws of the terminal progress bar.
REFRESH_SECONDS = 0.5
#: Characters of the progress bar.
BAR_WIDTH = 24
#: ANSI: carriage return, then erase the line.
CLEAR_LINE = "\r\x1b[K"


@dataclass(frozen=True)
class RoundEvent:
    """One aggregated round, as the strategy reports it.

    Attributes:
        algorithm: the result's algorithm name (``dps-pca``, ``sulq-kplane``, ...).
        entry: the round's history entry (``round``, ``sites``, ``epsilon_spent``, metrics).
        asked: how many sites the server asked this round.
        done: rounds aggregated so far (1 after the first).
        total: Flower rounds the run will have.
    """

    algorithm: str
    entry: dict[str, Any]
    asked: int
    done: int
    total: int


#: What a strategy calls after every aggregated round.
RoundObserver = Callable[[RoundEvent], None]


def log_round(event: RoundEvent) -> None:
    """Observer for a server log (the Flower App): one INFO line per round."""
    logger.info(
        "round %d/%d: %s", event.done, event.total,
        round_line(event.algorithm, event.entry, asked=event.asked).strip(),
    )


class RoundProgress:
    """Prints each round's line as it completes; on a terminal, also a live progress bar.

    Use it as a context manager around the run and pass it as the run's observer::

        with RoundProgress("dps-pca", total=11, stream=sys.stdout) as progress:
            result = simulate_dps_pca(scenario, observer=progress)

    Args:
        algorithm: the result's algorithm name: it picks the table's columns.
        total: the run's Flower rounds (the events correct it if it differs).
        stream: where lines go (a terminal or not is read from ``stream.isatty()``).
        tty: force terminal mode on or off (default: ``stream.isatty()``).
    """

    def __init__(
        self, algorithm: str, total: int, stream: TextIO, tty: bool | None = None
    ) -> None:
        self.algorithm = algorithm
        self.total = total
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.done = 0
        self.started = time.perf_counter()
        self.first_round: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> RoundProgress:
        self.started = time.perf_counter()
        self._write(table_header(self.algorithm, elapsed=True) + "\n")
        if self.tty:
            self._ticker = threading.Thread(target=self._tick, name="fedpca-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            if self.done < self.total:  # the run stopped early: leave no half-drawn bar
                self._write(CLEAR_LINE)

    def __call__(self, event: RoundEvent) -> None:
        """Print ``event``'s round line and what the round dropped (above the bar on a
        terminal)."""
        now = time.perf_counter()
        self.done, self.total = event.done, event.total
        if self.first_round is None:
            self.first_round = now
        line = "\n".join([round_line(event.algorithm, event.entry, asked=event.asked,
                                     elapsed=now - self.started), *dropped_lines(event.entry)])
        if not self.tty:
            self._write(line + "\n")
        elif self.done < self.total:
            self._write(CLEAR_LINE + line + "\n" + self.bar(now))
        else:  # the last round: the bar stops, so the federation's shutdown logs stay clear
            self._stop.set()
            self._write(CLEAR_LINE + line + "\n")

    def bar(self, now: float) -> str:
        """``[#####.....] 3/11 rounds, 5.2 s elapsed, ~12 s left`` (no newline)."""
        elapsed = now - self.started
        if self.done == 0:
            return f"waiting for round 1 of {self.total} (sites starting) {elapsed:.0f} s elapsed"
        filled = BAR_WIDTH * self.done // max(self.total, 1)
        left = self.seconds_left(now)
        eta = "" if left is None else f", ~{left:.0f} s left"
        return (f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total} "
                f"rounds, {elapsed:.0f} s elapsed{eta}")

    def seconds_left(self, now: float) -> float | None:
        """The remaining rounds at the mean pace since the first round (start-up excluded);
        None until two rounds have completed."""
        if self.first_round is None or self.done < 2:
            return None
        pace = (now - self.first_round) / (self.done - 1)
        return max(0.0, pace * (self.total - self.done))

    def _tick(self) -> None:
        while not self._stop.wait(REFRESH_SECONDS):
            with self._lock:  # the last round may have stopped the bar meanwhile
                if not self._stop.is_set():
                    self.stream.write(CLEAR_LINE + self.bar(time.perf_counter()))
                    self.stream.flush()

    def _write(self, text: str) -> None:
        with self._lock:
            self.stream.write(text)
            self.stream.flush()

"""Flower's polling loops on loopback: short waits while a run is under way, longer ones when
idle.

A site's SuperNode asks the SuperLink for its next message, and a SuperExec asks for its next
task, in loops that sleep between asks (Flower 1.41-1.42: 3 s and 1 s). On one machine
(``fedpca deploy local``) those waits are most of a round's latency, and asking every 0.2 s
instead costs CPU the whole time the processes run, idle or not. With :data:`POLL_ENV` set,
a loop waits that many seconds while a run is under way (a message or task came within the
last :data:`HOT_SECONDS`) and :data:`IDLE_SECONDS` otherwise: a run's first message waits
about a second longer per hop, and an idle consortium polls five times less. Unset: Flower's
own waits. Only when the process asks: nothing here changes what a site answers.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from fedpca.errors import ConfigurationError

#: Environment variable: the seconds a site's SuperNode and the SuperExecs of ``fedpca deploy
#: local`` wait between asks while a run is under way (``fedpca deploy local`` sets 0.2).
POLL_ENV = "FEDPCA_SUPERNODE_POLL_SECONDS"
#: Flower's own SuperExec task poll interval (environment variable, seconds), which ``fedpca
#: deploy local`` sets for the SuperLink's and each site's SuperExec.
SUPEREXEC_POLL_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"
#: Seconds after the last message or task during which a loop waits its short wait.
HOT_SECONDS = 10.0
#: A loop's wait when no message or task came for :data:`HOT_SECONDS`.
IDLE_SECONDS = 1.0

T = TypeVar("T")


class PollWaits:
    """The ``time`` module a Flower polling loop uses (every other function is the module's
    own), whose ``sleep`` waits at most ``busy`` seconds for :data:`HOT_SECONDS` after
    :meth:`touch`, and :data:`IDLE_SECONDS` (or ``busy`` if longer) otherwise."""

    def __init__(self, busy: float) -> None:
        if not (math.isfinite(busy) and 0 < busy <= 3):
            raise ConfigurationError(f"{POLL_ENV}={busy:g} must be in (0, 3] seconds")
        self.busy = busy
        self._touched = -math.inf

    def touch(self) -> None:
        """A message or task came: wait short for a while."""
        self._touched = time.monotonic()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        if time.monotonic() - self._touched < HOT_SECONDS:
            time.sleep(min(seconds, self.busy))
        else:
            time.sleep(max(IDLE_SECONDS, self.busy))


def touching(waits: PollWaits, function: Callable[..., T],
             news: Callable[[T], bool] = lambda _: True) -> Callable[..., T]:
    """``function``, touching ``waits`` whenever what it returns is news (default: always)."""

    def touched(*args: Any, **kwargs: Any) -> T:
        result = function(*args, **kwargs)
        if news(result):
            waits.touch()
        return result

    return touched


def busy_seconds(environ: dict[str, str] | Any) -> float | None:
    """:data:`POLL_ENV`'s value in ``environ`` (``None``: unset, Flower's own waits)."""
    value = environ.get(POLL_ENV)
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigurationError(f"{POLL_ENV}={value!r} must be a number of seconds in "
                                 "(0, 3]") from None


def adapt_superexec(superexec: Any) -> None:
    """Flower's SuperExec loop (the module ``superexec``) waiting :data:`POLL_ENV` seconds
    between asks while tasks come, :data:`IDLE_SECONDS` when none came for a while
    (unchanged when :data:`POLL_ENV` is unset)."""
    busy = busy_seconds(os.environ)
    if busy is None:
        return
    waits = PollWaits(busy)
    superexec.time = waits
    superexec._handle_launch_result = touching(waits, superexec._handle_launch_result)


def adapt_supernode(start_client_internal: Any) -> None:
    """Flower's SuperNode loop (the module ``start_client_internal``) waiting
    :data:`POLL_ENV` seconds between asks while messages come, :data:`IDLE_SECONDS` when none
    came for a while (unchanged when :data:`POLL_ENV` is unset)."""
    busy = busy_seconds(os.environ)
    if busy is None:
        return
    waits = PollWaits(busy)
    start_client_internal.time = waits
    start_client_internal._pull_and_store_message = touching(
        waits, start_client_internal._pull_and_store_message, lambda run_id: run_id is not None)

"""The suite's Flower polling loops on loopback: short waits while a run is under way, longer
ones when idle (test speed only: the product runs Flower's own waits).

A site's SuperNode asks the SuperLink for its next message, and a SuperExec asks for its next
task, in loops that sleep between asks (Flower 1.41-1.43: 3 s and 1 s). On one machine those
waits are most of a loopback round's latency, and asking every 0.2 s instead costs CPU the
whole time the processes run, idle or not. With :data:`POLL_ENV` set, a loop waits that many
seconds while a run is under way (a message or task came within the last
:data:`HOT_SECONDS`) and :data:`IDLE_SECONDS` otherwise. :func:`install` (called by this
folder's ``sitecustomize`` in every process the suite starts) patches the two loops'
modules as they are imported; :data:`PATCHED` names every Flower attribute replaced, and
``tests/test_flower_internals.py`` fails naming one a Flower release removed. Nothing here
changes what a site answers.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

#: Environment variable: the seconds the suite's SuperNodes and SuperExecs wait between asks
#: while a run is under way (``tests/conftest.py`` sets it).
POLL_ENV = "FEDPCA_SUPERNODE_POLL_SECONDS"
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
            from fedpca.errors import ConfigurationError

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
        from fedpca.errors import ConfigurationError

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


#: The Flower modules patched, each with its patch and the attributes that patch replaces.
PATCHED = {
    "flwr.supercore.superexec.run_superexec": (adapt_superexec,
                                               ("time", "_handle_launch_result")),
    "flwr.supernode.start_client_internal": (adapt_supernode,
                                             ("time", "_pull_and_store_message")),
}


class _PatchingLoader(importlib.abc.Loader):
    """``loader``, with ``patch(module)`` once the module has run."""

    def __init__(self, loader: importlib.abc.Loader, patch: Callable[[Any], None]) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.patch(module)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`PATCHED` as the other finders do, patched once run."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in PATCHED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, PATCHED[name][0])
        return spec


def install() -> None:
    """Patch the modules of :data:`PATCHED` when this process imports them."""
    sys.meta_path.insert(0, _PatchOnImport())

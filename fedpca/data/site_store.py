"""Prepared virtual sites on local disk, shared by the processes of one simulation.

Each simulation worker keeps a byte-bounded cache of the sites it served
(:mod:`fedpca.data.site_cache`); a site that fell out of it was rebuilt from its seed or
file, which dominates a round once a federation's data outgrows the workers' budgets (a
2,000 x 200 synthetic site takes about 11 ms to sample, validate and clip). With a store the
first process that prepares a site writes it once, and every process that needs it again
reads it back (about 1 ms for those 3.2 MB, from the page cache): the machine keeps one copy
of the federation on disk instead of one per worker in memory, and the cache's budget still
bounds each worker's memory.

A store belongs to one simulation run: :func:`temporary_store` creates its directory under
the system's temporary directory (mode 0700) and removes it when the run ends; the sites'
client function is wrapped in :class:`StoreBound`, which names the directory to whichever
process answers (Ray workers outlive runs). It never writes past a reserve of free disk
space (:data:`FREE_RESERVE_FRACTION`); ``FEDPCA_SITE_STORE=0`` turns it off. Simulation
only: the files are validated, clipped copies of the virtual sites' records; a real site (a
SuperNode) never uses a store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import pickle
import shutil
import tempfile
import threading
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path

import numpy as np

from fedpca.errors import ConfigurationError
from fedpca.dp.clipping import ClipReport
from fedpca.dp.site_data import SiteData

logger = logging.getLogger(__name__)

#: The store writes nothing that would leave less than this fraction of its disk free.
FREE_RESERVE_FRACTION = 0.1
#: The environment variable that turns the store off (``0``; default ``1``, on), e.g. to
#: keep copies of real records off the disk in a simulation.
STORE_VARIABLE = "FEDPCA_SITE_STORE"

_current: SiteStore | None = None


class SiteStore:
    """Prepared sites as ``.npz`` files in ``directory``, named by a hash of their key."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, key: Hashable) -> Path:
        """The file of the site built from ``key`` (its builder's name and arguments)."""
        identity = pickle.dumps(_identity(key), protocol=pickle.HIGHEST_PROTOCOL)
        return self.directory / f"{hashlib.sha256(identity).hexdigest()}.npz"

    def load(self, key: Hashable) -> SiteData | None:
        """The stored site, or ``None`` when no process has stored it (or the run ended)."""
        try:
            with np.load(self.path(key), allow_pickle=False) as stored:
                report = ClipReport(int(stored["rows"]), int(stored["clipped_rows"]),
                                    float(stored["clip_norm"]), float(stored["max_norm"]))
                return SiteData(stored["X"], report, str(stored["site"]))
        except FileNotFoundError:
            return None

    def save(self, key: Hashable, data: SiteData) -> bool:
        """Store ``data`` (atomically: readers see the whole file or none); ``False`` when the
        directory is gone, the disk would keep less than its reserve free or the write
        failed (the site answers all the same: it only is not shared)."""
        try:
            usage = shutil.disk_usage(self.directory)
        except FileNotFoundError:
            return False
        if usage.free - data.X.nbytes < FREE_RESERVE_FRACTION * usage.total:
            logger.debug("site store: %s not written, the disk is nearly full", data.site)
            return False
        path = self.path(key)
        partial = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.partial")
        try:
            with partial.open("wb") as handle:
                np.savez(handle, X=data.X, rows=data.clip.rows,
                         clipped_rows=data.clip.clipped_rows, clip_norm=data.clip.clip_norm,
                         max_norm=data.clip.max_norm_before, site=data.site)
            os.replace(partial, path)
        except FileNotFoundError:  # the run ended meanwhile and removed the directory
            return False
        except OSError as error:  # e.g. the disk filled up meanwhile
            logger.warning("site store: %s not written (%s)", data.site, error)
            partial.unlink(missing_ok=True)
            return False
        return True


def _identity(value: object) -> object:
    """``value`` with every dataclass replaced by its type and fields (not attributes a
    cached property may have added), so that equal keys hash alike in every process."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__module__, type(value).__qualname__,
                tuple(_identity(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, tuple):
        return tuple(_identity(item) for item in value)
    return value


def store_enabled() -> bool:
    """Whether simulation runs keep a store (:data:`STORE_VARIABLE`, read on every call)."""
    raw = os.environ.get(STORE_VARIABLE, "1").strip()
    if raw not in ("0", "1"):
        raise ConfigurationError(
            f"{STORE_VARIABLE}={raw!r} must be 1 (the default: a run shares its prepared sites "
            "through a temporary directory) or 0 (no store: workers rebuild evicted sites)"
        )
    return raw == "1"


def current_store() -> SiteStore | None:
    """The store of the run this process is answering for, if any."""
    return _current


def use_store(directory: str | None) -> None:
    """Make ``directory`` (``None``: no store) this process's site store."""
    global _current
    if directory is None:
        _current = None
    elif _current is None or str(_current.directory) != directory:
        _current = SiteStore(directory)


@dataclasses.dataclass(frozen=True)
class StoreBound:
    """``client_fn(context)``, called with ``directory`` as the answering process's site
    store (one parameter, as Flower's ``ClientApp`` requires of a ``client_fn``).

    Attributes:
        client_fn: a simulation's ``context -> Client``.
        directory: the run's store (``None``: none).
    """

    client_fn: Callable[[object], object]
    directory: str | None

    def __call__(self, context: object) -> object:
        use_store(self.directory)
        return self.client_fn(context)


@contextlib.contextmanager
def temporary_store() -> Iterator[str]:
    """A new store directory for one run, removed (with every site in it) afterwards."""
    directory = tempfile.mkdtemp(prefix="fedpca-sites-")
    try:
        yield directory
    finally:
        use_store(None)
        shutil.rmtree(directory, ignore_errors=True)

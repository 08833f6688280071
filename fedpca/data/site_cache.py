"""A byte-bounded cache of virtual sites' prepared data, one per process.

A simulation worker answers many virtual sites, one message at a time, and each site is
asked once per round. Keeping every site it ever served would make a worker's memory grow
with the federation (2,000 sites of 2,000 x 784 records are 25 GB); keeping none would
rebuild a site's data for every message. :func:`bounded_site_cache` keeps the most recently
used sites within a byte budget (``FEDPCA_SITE_CACHE_MB``, default
:data:`DEFAULT_BUDGET_MB` per process) and rebuilds the others when asked: from their seed
(synthetic data) or their file, so a rebuilt site is identical to the first build; within a
simulation run they are read back from the run's store instead
(:mod:`fedpca.data.site_store`), where the first process that built them left them.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from fedpca.data.site_store import current_store
from fedpca.errors import ConfigurationError
from fedpca.dp.site_data import SiteData

logger = logging.getLogger(__name__)

#: Default budget (MB of prepared records) of the cache in each process.
DEFAULT_BUDGET_MB = 1024
#: The environment variable that sets the budget, in MB (0 keeps nothing).
BUDGET_VARIABLE = "FEDPCA_SITE_CACHE_MB"


def budget_bytes() -> int:
    """The cache budget in bytes, from :data:`BUDGET_VARIABLE` (read on every call)."""
    raw = os.environ.get(BUDGET_VARIABLE, str(DEFAULT_BUDGET_MB))
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if not megabytes >= 0:
        raise ConfigurationError(
            f"{BUDGET_VARIABLE}={raw!r} must be a number of MB >= 0 (the prepared site data "
            "each process keeps)"
        )
    return int(megabytes * 2**20)


class SiteCache:
    """Least-recently-used prepared sites whose records total at most the budget."""

    def __init__(self, build: Callable[..., SiteData]) -> None:
        self.build = build
        self.entries: OrderedDict[Hashable, SiteData] = OrderedDict()
        self.lock = threading.Lock()
        self.builds = 0
        #: Sites read back from the run's store instead of built.
        self.loads = 0
        #: Bytes of records held now.
        self.bytes = 0

    def __call__(self, *key: Hashable) -> SiteData:
        with self.lock:
            if key in self.entries:
                self.entries.move_to_end(key)
                return self.entries[key]
        data = self.prepare(key)
        with self.lock:
            if key not in self.entries:  # another thread may have built it meanwhile
                self.bytes += data.X.nbytes
            self.entries[key] = data
            budget = budget_bytes()
            while self.entries and self.bytes > budget:
                evicted, dropped = self.entries.popitem(last=False)
                self.bytes -= dropped.X.nbytes
                logger.debug("site cache: evicted %s (budget %d bytes)", evicted[-2:], budget)
        return data

    def prepare(self, key: tuple) -> SiteData:
        """The site built from ``key``: read from this run's store when a process stored it
        (:mod:`fedpca.data.site_store`), else built (and stored)."""
        store = current_store()
        stored_key = (self.build.__module__, self.build.__qualname__, *key)
        data = store.load(stored_key) if store is not None else None
        if data is not None:
            with self.lock:
                self.loads += 1
            return data
        data = self.build(*key)
        with self.lock:
            self.builds += 1
        if store is not None:
            store.save(stored_key, data)
        return data

    def clear(self) -> None:
        """Forget every site (and the build and load counts)."""
        with self.lock:
            self.entries.clear()
            self.builds = self.loads = 0
            self.bytes = 0


def bounded_site_cache(build: Callable[..., SiteData]) -> SiteCache:
    """Decorator: ``build(*hashable args) -> SiteData`` behind a :class:`SiteCache`."""
    cache = SiteCache(build)
    functools.update_wrapper(cache, build)
    return cache

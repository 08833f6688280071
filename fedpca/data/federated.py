"""A real data set split over simulated sites: what one virtual site (Flower client) holds.

Everything is cached per process: a data set is read once, a partition drawn once, and each
virtual site validates and clips its records once, however many rounds ask for them. Cached
arrays are read-only.
"""

from __future__ import annotations

import functools

import numpy as np

from fedpca.data.datasets import DATASET_NAMES, Dataset, load_dataset
from fedpca.data.partition import partition_dirichlet, partition_iid
from fedpca.errors import ConfigurationError
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_finite_positive, require_positive_int


def dataset_site(
    name: str,
    sites: int,
    site: int,
    seed: int = 0,
    clip_norm: float = 1.0,
    alpha: float | None = None,
) -> SiteData:
    """Site ``site`` (0-based) of data set ``name`` split over ``sites`` sites.

    The split is IID (:func:`partition_iid`) unless ``alpha`` is given, then non-IID by label
    (:func:`partition_dirichlet`); ``seed`` fixes it. Rows are clipped to the public
    ``clip_norm`` by :meth:`SiteData.prepare` (the data set's rows already have norm <= 1).
    The same arguments return the same SiteData object.
    """
    sites = require_positive_int(sites, "sites")
    site = require_positive_int(site, "site", minimum=0)
    if site >= sites:
        raise ConfigurationError(f"site must be in 0..{sites - 1}, got {site}")
    alpha = None if alpha is None else require_finite_positive(alpha, "alpha")
    return _site(name, sites, site, require_positive_int(seed, "seed", minimum=0),
                 require_finite_positive(clip_norm, "clip_norm"), alpha)


def dataset_pooled(name: str) -> np.ndarray:
    """All of ``name``'s scaled records (read-only ``n x d``): for evaluation only."""
    return _dataset(name).X


@functools.lru_cache(maxsize=len(DATASET_NAMES))
def _dataset(name: str) -> Dataset:
    return load_dataset(name)


@functools.lru_cache(maxsize=16)
def _partition(name: str, sites: int, seed: int, alpha: float | None) -> list[np.ndarray]:
    dataset = _dataset(name)
    if alpha is None:
        return partition_iid(dataset.shape[0], sites, seed)
    return partition_dirichlet(dataset.y, sites, alpha, seed)


@functools.lru_cache(maxsize=1024)
def _site(name: str, sites: int, site: int, seed: int, clip_norm: float,
          alpha: float | None) -> SiteData:
    rows = _partition(name, sites, seed, alpha)[site]
    return SiteData.prepare(_dataset(name).X[rows], clip_norm, site=f"{name} site {site}")

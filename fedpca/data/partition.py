"""Split one data set's records over simulated sites: IID, or non-IID by label.

Both return one sorted index array per site; together they are disjoint and cover every
record once, and no site is empty. The split is public (it only simulates which site holds
which record) and reproducible from ``seed``.

* :func:`partition_iid`: a uniform random permutation cut into sizes that differ by <= 1.
* :func:`partition_dirichlet`: the usual label-skew benchmark (Hsu, Qi and Brown 2019,
  https://arxiv.org/abs/1909.06335): for each label ``c`` draw site proportions
  ``p_c ~ Dirichlet(alpha, ..., alpha)`` and deal that label's records out in those
  proportions. Small ``alpha`` gives each site few labels; large ``alpha`` approaches IID.
"""

from __future__ import annotations

import numpy as np

from fedpca.data.synthetic import split_sizes
from fedpca.errors import ConfigurationError
from fedpca.dp.validation import require_finite_positive, require_positive_int

#: Stream key that keeps the partition's randomness apart from noise drawn with the same seed.
PARTITION_STREAM = 0x9A27


def partition_iid(n: int, sites: int, seed: int = 0) -> list[np.ndarray]:
    """``sites`` disjoint index arrays covering ``range(n)``, sizes differing by at most 1."""
    sizes = split_sizes(n, sites)
    order = _rng(seed).permutation(n)
    return [np.sort(part) for part in np.split(order, np.cumsum(sizes)[:-1])]


def partition_dirichlet(
    labels: np.ndarray, sites: int, alpha: float, seed: int = 0
) -> list[np.ndarray]:
    """``sites`` disjoint, covering, non-empty index arrays, skewed by label (Dirichlet(alpha)).

    A site the draw leaves empty (likely when ``alpha`` is small and ``sites`` large) gets one
    record taken at random from the largest site. Raises ConfigurationError when there are
    fewer records than sites, or the labels are not a 1-D integer array.
    """
    labels = _integer_labels(labels)
    sites = require_positive_int(sites, "sites")
    alpha = require_finite_positive(alpha, "alpha")
    if labels.size < sites:
        raise ConfigurationError(
            f"{labels.size} records cannot give each of {sites} sites at least one record; "
            "use fewer sites"
        )
    rng = _rng(seed)
    owner = np.empty(labels.size, dtype=np.int64)
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        counts = rng.multinomial(members.size, rng.dirichlet(np.full(sites, alpha)))
        owner[members] = np.repeat(np.arange(sites), counts)
    for site in np.flatnonzero(np.bincount(owner, minlength=sites) == 0):
        largest = np.argmax(np.bincount(owner, minlength=sites))
        owner[rng.choice(np.flatnonzero(owner == largest))] = site
    return [np.flatnonzero(owner == site) for site in range(sites)]


def _rng(seed: int) -> np.random.Generator:
    """The partition's generator for ``seed`` (a non-negative integer)."""
    return np.random.default_rng([require_positive_int(seed, "seed", minimum=0), PARTITION_STREAM])


def _integer_labels(labels: object) -> np.ndarray:
    """``labels`` as a 1-D int64 array, or a ConfigurationError saying what is wrong."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0:
        raise ConfigurationError(f"labels must be a non-empty 1-D array, got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.integer) or (
        np.issubdtype(arr.dtype, np.floating) and np.array_equal(arr, np.round(arr))
    )):
        raise ConfigurationError(
            f"labels must be integers (class ids), got dtype {arr.dtype}; map classes to 0..K-1"
        )
    return arr.astype(np.int64)

"""Splitting records over simulated sites, and the cached per-site view of a data set."""

from __future__ import annotations

import numpy as np
import pytest

from fedpca.data.partition import partition_dirichlet, partition_iid
from fedpca.errors import ConfigurationError


def assert_disjoint_cover(parts: list[np.ndarray], n: int) -> None:
    """Every index in ``range(n)`` appears in exactly one part; no part is empty."""
    assert all(part.size > 0 for part in parts)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))


def label_skew(parts: list[np.ndarray], labels: np.ndarray) -> float:
    """Mean total-variation distance between each site's label mix and the global one."""
    classes = np.unique(labels)
    overall = np.array([np.mean(labels == c) for c in classes])
    return float(np.mean([
        0.5 * np.abs(np.array([np.mean(labels[p] == c) for c in classes]) - overall).sum()
        for p in parts
    ]))


@pytest.mark.parametrize(("n", "sites"), [(10, 3), (1000, 7), (5, 5), (1, 1)])
def test_iid_disjoint_covering_balanced(n, sites):
    parts = partition_iid(n, sites, seed=3)
    assert len(parts) == sites
    assert_disjoint_cover(parts, n)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_iid_reproducible_and_random():
    a, b, c = (partition_iid(100, 4, seed) for seed in (1, 1, 2))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, z) for x, z in zip(a, c))
    assert not np.array_equal(a[0], np.arange(25))  # shuffled, not a contiguous block


def test_iid_refuses_more_sites_than_records():
    with pytest.raises(ConfigurationError, match="3 samples cannot give each of 4 sites"):
        partition_iid(3, 4, seed=0)
    with pytest.raises(ConfigurationError, match="seed must be >= 0"):
        partition_iid(3, 2, seed=-1)


LABELS = np.repeat(np.arange(10), 300)  # 3,000 records, 10 balanced classes


def test_dirichlet_disjoint_covering_non_empty():
    for alpha in (0.01, 0.5, 100.0):
        parts = partition_dirichlet(LABELS, sites=20, alpha=alpha, seed=4)
        assert len(parts) == 20
        assert_disjoint_cover(parts, LABELS.size)


def test_dirichlet_small_alpha_skewed_large_alpha_near_uniform():
    labels = np.repeat(np.arange(10), 3000)  # 3,000 records per site: sampling noise ~0.02
    skewed = label_skew(partition_dirichlet(labels, 10, alpha=0.05, seed=5), labels)
    uniform = label_skew(partition_dirichlet(labels, 10, alpha=1000.0, seed=5), labels)
    iid = label_skew(partition_iid(labels.size, 10, seed=5), labels)
    assert skewed > 0.6  # most of each site's records come from one or two labels
    assert uniform < 0.04 and iid < 0.04  # as close to the global mix as an IID split
    assert skewed > 15 * uniform


def test_dirichlet_extreme_alpha_still_fills_every_site():
    labels = np.zeros(12, dtype=int)  # one label, so all but one site would start empty
    parts = partition_dirichlet(labels, sites=12, alpha=1e-3, seed=0)
    assert_disjoint_cover(parts, 12)
    assert [p.size for p in parts] == [1] * 12


def test_dirichlet_reproducible():
    a = partition_dirichlet(LABELS, 6, alpha=0.3, seed=9)
    b = partition_dirichlet(LABELS, 6, alpha=0.3, seed=9)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_dirichlet_refuses_impossible_or_bad_input():
    with pytest.raises(ConfigurationError, match="3 records cannot give each of 5 sites"):
        partition_dirichlet(np.array([0, 1, 1]), sites=5, alpha=1.0, seed=0)
    with pytest.raises(ConfigurationError, match="labels must be integers"):
        partition_dirichlet(np.array([0.5, 1.0]), sites=2, alpha=1.0, seed=0)
    with pytest.raises(ConfigurationError, match="1-D"):
        partition_dirichlet(np.zeros((3, 2), dtype=int), sites=2, alpha=1.0, seed=0)
    with pytest.raises(ConfigurationError, match="alpha must be finite and > 0"):
        partition_dirichlet(LABELS, sites=2, alpha=0.0, seed=0)


# --- the cached per-site view (scikit-learn's digits) ---------------------------------------

def test_dataset_site_is_cached_and_covers_pooled_data():
    pytest.importorskip("sklearn.datasets")
    from fedpca.data.federated import dataset_pooled, dataset_site

    first = dataset_site("digits", 4, 1, seed=7)
    assert dataset_site("digits", 4, site=1, seed=7, clip_norm=1, alpha=None) is first
    pooled = dataset_pooled("digits")
    assert pooled.shape == (1797, 64) and not pooled.flags.writeable
    sites = [dataset_site("digits", 4, s, seed=7) for s in range(4)]
    assert sum(s.X.shape[0] for s in sites) == 1797
    parts = partition_iid(1797, 4, seed=7)
    for site, rows in zip(sites, parts):
        np.testing.assert_array_equal(site.X, pooled[rows])
        assert site.clip.clipped_rows == 0  # public scaling already bounds rows by 1


def test_dataset_site_clips_rows_and_splits_by_label():
    pytest.importorskip("sklearn.datasets")
    from fedpca.data.federated import dataset_site

    site = dataset_site("digits", 3, 0, clip_norm=0.3)
    assert np.linalg.norm(site.X, axis=1).max() <= 0.3 + 1e-12
    assert site.clip.clipped_rows > 0 and site.clip.clip_norm == 0.3
    skewed = dataset_site("digits", 5, 2, seed=1, alpha=0.05)
    assert skewed is dataset_site("digits", 5, 2, seed=1, alpha=0.05)
    assert skewed.X.shape[0] >= 1


def test_dataset_site_refuses_bad_site_index():
    from fedpca.data.federated import dataset_site

    with pytest.raises(ConfigurationError, match="site must be in 0..2, got 3"):
        dataset_site("digits", 3, 3)
    with pytest.raises(ConfigurationError, match="unknown data set 'nope'"):
        dataset_site("nope", 3, 0)

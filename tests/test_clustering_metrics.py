"""Paper 003's utility measures, its synthetic union of subspaces and the clustering result."""

import itertools

import numpy as np
import pytest

from fedpca.clustering.metrics import kmeans_subspace_cost, wasserstein_subspace_distance
from fedpca.data.subspaces import UnionOfSubspaces
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import (
    assign_to_subspaces,
    random_subspaces,
    squared_distances,
    subspace_distance,
)
from fedpca.report import clustering_round_table as round_table
from fedpca.results import ClusteringResult


def bases(seed: int, dim: int = 6, count: int = 3, q: int = 2) -> list[np.ndarray]:
    return random_subspaces(np.random.default_rng(seed), dim, count, q)


def rotated(basis: np.ndarray, seed: int) -> np.ndarray:
    """Another orthonormal basis of the same subspace."""
    R, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((basis.shape[1],) * 2))
    return basis @ R


def test_wasserstein_is_zero_for_the_same_subspaces_in_any_order_and_basis():
    a = bases(0)
    for perm in itertools.permutations(range(3)):
        b = [rotated(a[j], j) for j in perm]
        assert wasserstein_subspace_distance(a, b) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_wasserstein_is_symmetric_positive_and_the_best_matching(seed):
    a, b = bases(2 * seed), bases(2 * seed + 1)
    d_ab = wasserstein_subspace_distance(a, b)
    assert d_ab == pytest.approx(wasserstein_subspace_distance(b, a), abs=1e-12)
    assert 0 < d_ab <= 3 * 2  # at most k q
    brute = min(
        sum(subspace_distance(a[i], b[p[i]]) ** 2 for i in range(3))
        for p in itertools.permutations(range(3))
    )
    assert d_ab == pytest.approx(brute, abs=1e-12)
    # invariant to the order of either set
    assert wasserstein_subspace_distance(a[::-1], b[1:] + b[:1]) == pytest.approx(d_ab)


def test_wasserstein_of_orthogonal_subspaces_is_k_q():
    E = np.eye(4)
    assert wasserstein_subspace_distance([E[:, :2]], [E[:, 2:]]) == pytest.approx(2.0)


def test_wasserstein_refuses_sets_of_different_sizes():
    with pytest.raises(ConfigurationError, match="equally sized"):
        wasserstein_subspace_distance(bases(0), bases(1)[:2])


def test_cost_and_assignment_follow_the_definition():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 6))
    B = bases(4)
    brute = np.array([[np.sum((x - U @ (U.T @ x)) ** 2) for U in B] for x in X])
    np.testing.assert_allclose(squared_distances(X, B), brute, atol=1e-12)
    np.testing.assert_array_equal(assign_to_subspaces(X, B), brute.argmin(axis=1))
    assert kmeans_subspace_cost(X, B) == pytest.approx(brute.min(axis=1).mean())


def test_true_bases_have_zero_cost_and_recover_the_labels_on_noiseless_data():
    model = UnionOfSubspaces(n=600, dim=8, clusters=3, subspace_dim=2, noise=0.0, seed=2)
    X, labels = model.sample()
    assert kmeans_subspace_cost(X, model.bases) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_array_equal(assign_to_subspaces(X, model.bases), labels)
    assert kmeans_subspace_cost(X, bases(9, dim=8)) > 0.05


def test_metrics_refuse_mismatched_shapes():
    with pytest.raises(ConfigurationError, match=r"basis 1 has shape \(5, 2\)"):
        kmeans_subspace_cost(np.ones((3, 6)), [np.eye(6)[:, :2], np.eye(5)[:, :2]])
    with pytest.raises(ConfigurationError, match="2-D"):
        assign_to_subspaces(np.ones(6), bases(0))


def test_union_of_subspaces_follows_the_paper_and_is_reproducible():
    model = UnionOfSubspaces(n=3000, dim=10, clusters=3, subspace_dim=3, noise=0.1, seed=5)
    X, labels = model.sample()
    assert X.shape == (3000, 10) and labels.shape == (3000,)
    assert np.linalg.norm(X, axis=1).max() <= 1 + 1e-12
    assert np.bincount(labels).min() > 900  # uniform assignment
    for U in model.bases:
        assert U.shape == (10, 3)
        np.testing.assert_allclose(U.T @ U, np.eye(3), atol=1e-12)
    # scaled by the public constant: the noise left orthogonal to the planted subspaces is
    # (d - q) sigma^2 / scale^2 per point
    expected = 7 * 0.1**2 / model.scale**2
    assert kmeans_subspace_cost(X, model.bases) == pytest.approx(expected, rel=0.1)
    again, _ = UnionOfSubspaces(3000, 10, 3, 3, 0.1, seed=5).sample()
    np.testing.assert_array_equal(X, again)
    other = UnionOfSubspaces(n=100, dim=10, clusters=3, subspace_dim=3, noise=0.0, seed=5)
    for U, V in zip(model.bases, other.bases):
        np.testing.assert_array_equal(U, V)  # subspaces do not depend on n or noise
    assert not X.flags.writeable  # the cached sample cannot be altered


@pytest.mark.parametrize("kwargs,match", [
    ({"subspace_dim": 7}, "subspace_dim <= dim"),
    ({"noise": -0.1}, "noise"),
    ({"noise": float("nan")}, "noise"),
    ({"clusters": 0}, "clusters"),
    ({"n": 2.5}, "n must be an integer"),
])
def test_union_of_subspaces_refuses_bad_parameters(kwargs, match):
    params = {"n": 10, "dim": 6, "clusters": 2, "subspace_dim": 2, "noise": 0.01, **kwargs}
    with pytest.raises(ConfigurationError, match=match):
        UnionOfSubspaces(**params)


def test_result_round_trips_through_json_and_prints_its_table(tmp_path):
    result = ClusteringResult(
        algorithm="sulq-kplane", bases=bases(1), assignments=np.array([0, 2, 1]),
        privacy={"epsilon": 1.0},
        history=[{"round": 1, "sites": 2, "epsilon_spent": 0.5, "cost": 0.1},
                 {"round": 2, "sites": 2, "epsilon_spent": 1.0, "cost": 0.05,
                  "wasserstein_distance": 0.2}],
        config={"clusters": 3},
    )
    path = tmp_path / "r.json"
    result.save(path)
    loaded = ClusteringResult.load(path)
    for U, V in zip(result.bases, loaded.bases):
        np.testing.assert_array_equal(U, V)
    np.testing.assert_array_equal(loaded.assignments, result.assignments)
    assert loaded.history == result.history and loaded.clusters == 3
    X = np.random.default_rng(0).standard_normal((5, 6))
    np.testing.assert_array_equal(loaded.predict(X), assign_to_subspaces(X, result.bases))
    table = round_table(result).splitlines()
    assert table[0].split() == ["round", "sites", "cost", "W", "dist", "eps", "spent"]
    assert table[2].split() == ["1", "2", "0.1000", "-", "0.5000"]
    assert table[3].split() == ["2", "2", "0.0500", "0.2000", "1.0000"]

"""Sample-aggregate with smooth sensitivity (paper 003 Sec. 3, Alg. 1) and TSC, its solver."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import linear_sum_assignment

from fedpca.clustering.sample_aggregate import (
    GaussianSmoothNoise,
    aggregate_outputs,
    attention_rank,
    center_of_attention,
    decode_embedding,
    neighbour_radii,
    output_diameter,
    paper_wasserstein_distance,
    projection_embedding,
    run_sample_aggregate,
    smooth_sensitivity,
)
from fedpca.clustering.tsc import run_tsc, threshold_graph
from fedpca.data.subspaces import UnionOfSubspaces, random_subspaces
from fedpca.errors import ConfigurationError, InvalidDataError

#: Per-test false-alarm probability of the statistical checks.
ALPHA = 1e-4
#: Three 3-dimensional subspaces of R^20 without noise: TSC's easy case.
CLEAN = UnionOfSubspaces(n=300, dim=20, clusters=3, subspace_dim=3, noise=0.0, seed=1)
#: Two planes in R^8, little noise, enough records for 10 blocks.
EASY = UnionOfSubspaces(n=2000, dim=8, clusters=2, subspace_dim=2, noise=0.01, seed=2)


def clustering_accuracy(found: np.ndarray, truth: np.ndarray, k: int) -> float:
    """Fraction of records in agreement under the best matching of labels."""
    table = np.zeros((k, k))
    np.add.at(table, (found, truth), 1)
    rows, cols = linear_sum_assignment(-table)
    return table[rows, cols].sum() / found.size


def test_tsc_recovers_clusters_on_a_clean_union():
    X, labels = CLEAN.sample()
    result = run_tsc(X, 3, 3, seed=0)
    assert clustering_accuracy(result.assignments, labels, 3) == 1.0
    assert paper_wasserstein_distance(result.bases, CLEAN.bases) < 1e-6
    assert result.privacy["epsilon"] is None


def test_threshold_graph_has_no_false_edges_on_a_clean_union():
    X, labels = CLEAN.sample()
    W = threshold_graph(X, 8)
    np.testing.assert_array_equal(W, W.T)
    rows, cols = np.nonzero(W)
    assert np.all(labels[rows] == labels[cols])
    assert np.all((W > 0).sum(axis=1) >= 8) and np.all(np.diag(W) == 0)


def test_embedding_is_an_isometry_and_decodes_back():
    rng = np.random.default_rng(0)
    a, b = random_subspaces(rng, 6, 3, 2), random_subspaces(rng, 6, 3, 2)
    Ea, Eb = projection_embedding(a), projection_embedding(b)
    assert Ea.shape == (3, 21)
    for i in range(3):
        direct = np.linalg.norm(a[i] @ a[i].T - b[i] @ b[i].T)
        assert np.linalg.norm(Ea[i] - Eb[i]) == pytest.approx(direct)
    best = min(np.linalg.norm(Ea - Eb[list(p)]) for p in itertools.permutations(range(3)))
    assert paper_wasserstein_distance(a, b) == pytest.approx(best)
    assert paper_wasserstein_distance(decode_embedding(Ea, 2), a) < 1e-7


def test_output_diameter_bounds_every_pair():
    rng = np.random.default_rng(1)
    for d, q in ((5, 3), (10, 3), (4, 2)):
        diameter = output_diameter(2, d, q)
        worst = max(paper_wasserstein_distance(random_subspaces(rng, d, 2, q),
                                               random_subspaces(rng, d, 2, q))
                    for _ in range(200))
        assert worst <= diameter + 1e-12
    first, second = np.eye(4)[:, :2], np.eye(4)[:, 2:]  # d >= 2q: orthogonal planes reach it
    assert paper_wasserstein_distance([first, first], [second, second]) == (
        pytest.approx(output_diameter(2, 4, 2)))


def test_smooth_sensitivity_by_hand():
    """m = 5 points on a line: t0 = 4; k = 0 uses r_i(5)'s 2nd smallest, k = 1 reaches t > m."""
    points = np.array([0.0, 0.1, 0.2, 0.3, 5.0])
    radii = neighbour_radii(np.abs(points[:, None] - points[None, :]))
    assert attention_rank(5) == 4 and center_of_attention(radii) == 1  # r(4): .3 .2 .2 .3 4.9
    # r_i(5) = 5.0, 4.9, 4.8, 4.7, 5.0 -> 2nd smallest 4.8; Lambda = 6 caps 2 * 4.8
    beta = 0.3
    assert smooth_sensitivity(radii, beta, diameter=6.0) == pytest.approx(6.0)
    assert smooth_sensitivity(radii, beta, diameter=20.0) == pytest.approx(
        max(2 * 4.8, 20.0 * math.exp(-beta)))


def test_smooth_sensitivity_is_a_smooth_upper_bound():
    """Property test on the line [-1, 1] (diameter 2), every entry replaced by every point of
    a fine grid: S(B) bounds how far the center of attention moves (its local sensitivity)
    and S(B) <= e^beta S(B') for every such neighbour B'."""
    rng = np.random.default_rng(5)
    grid, beta, diameter = np.linspace(-1, 1, 81), 0.2, 2.0

    def radii(p):
        return neighbour_radii(np.abs(p[:, None] - p[None, :]))

    for trial in range(24):
        m = int(rng.integers(4, 9))
        spread = (0.02, 0.2, 0.6)[trial % 3]
        points = rng.normal(scale=spread, size=m) + rng.choice([-0.5, 0.5], m) * (trial % 2)
        points = points.clip(-1, 1)
        scale = smooth_sensitivity(radii(points), beta, diameter)
        center = points[center_of_attention(radii(points))]
        for i, value in itertools.product(range(m), grid):
            neighbour = points.copy()
            neighbour[i] = value
            moved = abs(neighbour[center_of_attention(radii(neighbour))] - center)
            assert moved <= scale + 1e-12
            assert scale <= math.exp(beta) * smooth_sensitivity(radii(neighbour), beta,
                                                                diameter) + 1e-12


def test_gaussian_constants_are_alg_1s():
    noise = GaussianSmoothNoise(epsilon=2.0, delta=1e-4, dimension=45)
    assert noise.alpha == pytest.approx(2.0 / (5 * math.sqrt(2 * math.log(2e4))))
    assert noise.beta == pytest.approx(2.0 / (4 * (45 + math.log(2e4))))


def test_noise_scale_follows_the_smooth_sensitivity_formula():
    """m identical block outputs: every r_i(t) is 0 up to t = m, so S(B) = Lambda e^(-beta K)
    with K = m - t0 (the first k with t0 + k + 1 > m), and the release is the common output
    plus N(0, (S / alpha)^2) per coordinate."""
    truth = EASY.bases
    m = 9
    noise = GaussianSmoothNoise(epsilon=5.0, delta=1e-5, dimension=2 * 36)
    diameter = output_diameter(2, 8, 2)
    expected = diameter * math.exp(-noise.beta * (m - attention_rank(m)))
    rng = np.random.default_rng(3)
    draws = [aggregate_outputs([truth] * m, noise, rng) for _ in range(200)]
    assert all(a.smooth_sensitivity == pytest.approx(expected) for a in draws)
    assert draws[0].sigma == pytest.approx(expected / noise.alpha)
    residual = np.concatenate([(a.released - projection_embedding(truth)).ravel()
                               for a in draws]) / draws[0].sigma
    assert stats.kstest(residual, "norm").pvalue > ALPHA


def test_sample_aggregate_recovers_planted_subspaces_at_large_eps():
    X, _ = EASY.sample()
    result = run_sample_aggregate(X, 2, 2, epsilon=1e4, delta=1e-5, blocks=10, seed=0)
    assert paper_wasserstein_distance(result.bases, EASY.bases) < 0.1
    assert result.assignments is None
    entry = result.history[0]
    assert entry["sigma"] == pytest.approx(entry["smooth_sensitivity"] / result.privacy["alpha"])
    assert entry["smooth_sensitivity"] <= entry["diameter"]
    assert result.privacy["dimension"] == 2 * 36 and result.privacy["blocks_per_record"] == 1


def test_sample_aggregate_is_useless_at_small_eps():
    X, _ = EASY.sample()
    result = run_sample_aggregate(X, 2, 2, epsilon=0.5, delta=1e-5, blocks=10, seed=0)
    assert result.history[0]["sigma"] > 1.0
    assert paper_wasserstein_distance(result.bases, EASY.bases) > 0.5


@pytest.mark.parametrize("kwargs, error, match", [
    ({"epsilon": 0.0}, ConfigurationError, "epsilon"),
    ({"epsilon": -2.0}, ConfigurationError, "epsilon"),
    ({"delta": 0.0}, ConfigurationError, "delta"),
    ({"delta": 1.0}, ConfigurationError, "delta"),
    ({"blocks": 1}, ConfigurationError, "blocks"),
    ({"blocks": 1000}, ConfigurationError, "too small"),
    ({"clusters": 0}, ConfigurationError, "clusters"),
    ({"subspace_dim": 8}, ConfigurationError, "subspace_dim"),
])
def test_bad_arguments_are_refused(kwargs, error, match):
    X, _ = EASY.sample()
    args = {"clusters": 2, "subspace_dim": 2, "epsilon": 1.0, "delta": 1e-5, "blocks": 10,
            **kwargs}
    with pytest.raises(error, match=match):
        run_sample_aggregate(X, **args)


def test_nan_data_is_refused():
    X = np.array(CLEAN.sample()[0])
    X[0, 0] = np.nan
    with pytest.raises(InvalidDataError, match="NaN"):
        run_sample_aggregate(X, 3, 3, 1.0, 1e-5, blocks=3)
    with pytest.raises(InvalidDataError, match="NaN"):
        run_tsc(X, 3, 3)
    with pytest.raises(ConfigurationError, match="subspace_dim"):
        run_tsc(CLEAN.sample()[0], 3, 20)

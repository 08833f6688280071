"""The exponential-mechanism Gibbs sampler (paper 003 Sec. 4) and the non-private k-plane.

Statistical checks have a stated false-alarm probability (ALPHA) and fixed seeds.
"""

import math

import numpy as np
import pytest
from scipy import stats

from fedpca.clustering.gibbs import (
    APPROXIMATE_SAMPLING,
    DATA_DEPENDENT_START,
    draw_assignments,
    run_gibbs_clustering,
    subspace_log_marginal,
)
from fedpca.clustering.metrics import kmeans_subspace_cost
from fedpca.clustering.nonprivate import run_kplane
from fedpca.clustering.sample_aggregate import paper_wasserstein_distance
from fedpca.data.subspaces import UnionOfSubspaces, random_subspaces
from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.linalg.subspace import squared_distances

#: Per-test false-alarm probability of the statistical checks.
ALPHA = 1e-4
#: An easy union of subspaces: two planes in R^6, little noise.
EASY = UnionOfSubspaces(n=600, dim=6, clusters=2, subspace_dim=2, noise=0.01, seed=3)


def test_kplane_recovers_planted_subspaces():
    X, labels = EASY.sample()
    result = run_kplane(X, 2, 2, restarts=3, seed=0)
    assert paper_wasserstein_distance(result.bases, EASY.bases) < 0.05
    assert result.config["cost"] <= kmeans_subspace_cost(X, EASY.bases) + 1e-9
    agreement = max(np.mean(result.assignments == labels), np.mean(result.assignments != labels))
    assert agreement > 0.97
    assert result.privacy["epsilon"] is None and len(result.history) == 3


@pytest.mark.parametrize("init", ["random", "kplane"])
def test_gibbs_recovers_planted_subspaces_at_large_eps(init):
    X, labels = EASY.sample()
    truth = EASY.bases
    result = run_gibbs_clustering(
        X, 2, 2, epsilon=1000.0, sweeps=40, seed=1, init=init,
        evaluate=lambda bases: {"d_w": paper_wasserstein_distance(bases, truth)})
    assert paper_wasserstein_distance(result.bases, truth) < 0.1
    assert result.history[-1]["cost"] < 2 * kmeans_subspace_cost(X, truth)
    assert len(result.history) == 40 and result.history[-1]["d_w"] < 0.1
    agreement = max(np.mean(result.assignments == labels), np.mean(result.assignments != labels))
    assert agreement > 0.95
    for U in result.bases:
        np.testing.assert_allclose(U.T @ U, np.eye(2), atol=1e-10)


def test_gibbs_is_noisy_at_small_eps():
    """At eps = 0.01 the mechanism is close to uniform: far from the planted subspaces."""
    X, _ = EASY.sample()
    result = run_gibbs_clustering(X, 2, 2, epsilon=0.01, sweeps=20, seed=2)
    assert paper_wasserstein_distance(result.bases, EASY.bases) > 0.5


def test_subspace_log_marginal_sums_out_the_assignments():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((4, 3)) / 2
    bases = random_subspaces(rng, 3, 2, 1)
    eps = 5.0
    sq = squared_distances(X, bases)
    direct = sum(math.log(sum(math.exp(-eps / 2 * sq[i, l]) for l in range(2)))
                 for i in range(4))
    assert subspace_log_marginal(X, bases, eps) == pytest.approx(direct)


@pytest.mark.parametrize("epsilon", [0.5, 4.0, 40.0])
def test_assignment_draws_follow_eq_11(epsilon):
    """Many draws of one point's z: chi-square against exp(-eps/2 d^2(x, S_l)), normalised."""
    rng = np.random.default_rng(7)
    bases = random_subspaces(rng, 5, 4, 2)
    x = rng.standard_normal(5)
    x /= np.linalg.norm(x)
    sq = squared_distances(x[None, :], bases)
    draws = 40_000
    z = draw_assignments(np.repeat(sq, draws, axis=0), epsilon / 2, rng)
    counts = np.bincount(z, minlength=4)
    expected = np.exp(-epsilon / 2 * sq[0])
    expected = draws * expected / expected.sum()
    keep = expected > 5  # chi-square needs populated cells; the rest must be near-empty
    assert counts[~keep].sum() <= 5 * max(1.0, expected[~keep].sum())
    _, p_value = stats.chisquare(counts[keep], expected[keep] * counts[keep].sum()
                                 / expected[keep].sum())
    assert p_value > ALPHA


def test_privacy_record_states_the_guarantee():
    X, _ = EASY.sample()
    result = run_gibbs_clustering(X, 2, 2, epsilon=2.0, sweeps=3, seed=0, clip_norm=0.5)
    privacy = result.privacy
    assert privacy["epsilon"] == 2.0 and privacy["delta"] == 0.0
    assert privacy["sensitivity"] == pytest.approx(0.25)  # C^2 with C = 0.5
    assert privacy["scale"] == pytest.approx(2.0 / (2 * 0.25))
    assert privacy["exact_sampling"] is False
    assert privacy["caveats"] == [APPROXIMATE_SAMPLING]
    assert "replace-one" in privacy["unit"]
    kplane_start = run_gibbs_clustering(X, 2, 2, epsilon=2.0, sweeps=1, seed=0, init="kplane")
    assert DATA_DEPENDENT_START in kplane_start.privacy["caveats"]


def test_history_is_the_mixing_diagnostic_and_runs_are_reproducible():
    X, _ = EASY.sample()
    a = run_gibbs_clustering(X, 2, 2, epsilon=50.0, sweeps=15, seed=4)
    b = run_gibbs_clustering(X, 2, 2, epsilon=50.0, sweeps=15, seed=4)
    assert [h["round"] for h in a.history] == list(range(1, 16))
    assert [h["cost"] for h in a.history] == [h["cost"] for h in b.history]
    for U, V in zip(a.bases, b.bases, strict=True):
        np.testing.assert_array_equal(U, V)
    assert a.history[-1]["cost"] == pytest.approx(kmeans_subspace_cost(X, a.bases))
    assert all(0 <= h["test_statistic"] <= 1 + 1e-12 for h in a.history)
    assert all(sum(h["cluster_sizes"]) == X.shape[0] for h in a.history)


def test_given_start_is_used():
    X, _ = EASY.sample()
    result = run_gibbs_clustering(X, 2, 2, epsilon=1e4, sweeps=1, seed=0, init=EASY.bases)
    assert result.config["init"] == "given"
    assert paper_wasserstein_distance(result.bases, EASY.bases) < 0.1


@pytest.mark.parametrize("kwargs, error, match", [
    ({"epsilon": 0.0}, ConfigurationError, "epsilon"),
    ({"epsilon": -1.0}, ConfigurationError, "epsilon"),
    ({"epsilon": math.inf}, ConfigurationError, "epsilon"),
    ({"clusters": 0}, ConfigurationError, "clusters"),
    ({"subspace_dim": 6}, ConfigurationError, "subspace_dim"),
    ({"subspace_dim": 0}, ConfigurationError, "subspace_dim"),
    ({"sweeps": 0}, ConfigurationError, "sweeps"),
    ({"init": "ssc"}, ConfigurationError, "init"),
    ({"init": [np.eye(6, 2)]}, ValueError, "expected 2"),
])
def test_bad_arguments_are_refused(kwargs, error, match):
    X, _ = EASY.sample()
    args = {"clusters": 2, "subspace_dim": 2, "epsilon": 1.0, "sweeps": 2, **kwargs}
    with pytest.raises(error, match=match):
        run_gibbs_clustering(X, **args)


def test_nan_data_is_refused():
    X = np.array(EASY.sample()[0])
    X[5, 1] = np.nan
    with pytest.raises(InvalidDataError, match="NaN"):
        run_gibbs_clustering(X, 2, 2, 1.0, sweeps=1)
    with pytest.raises(InvalidDataError, match="NaN"):
        run_kplane(X, 2, 2)


def test_chain_targets_eq_10_on_a_tiny_problem():
    """Two records in R^2, two lines (k=2, q=1): P(z_1 = z_2) under eq. (10), integrated
    numerically over the lines' angles, against the chain's long-run frequency (batch means)."""
    X = np.array([[0.9, 0.1], [0.2, -0.7]])
    epsilon, sweeps, batches = 6.0, 4000, 40
    angles = np.linspace(0.0, np.pi, 4001)[:-1]
    lines = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    sq = (X**2).sum(axis=1)[None, :] - (lines @ X.T) ** 2  # (angles, records)
    weight = np.exp(-epsilon / 2 * sq)
    same = weight.prod(axis=1).mean()  # both records on one line, the other line free
    apart = weight[:, 0].mean() * weight[:, 1].mean()
    exact = same / (same + apart)
    result = run_gibbs_clustering(X, 2, 1, epsilon, sweeps=sweeps, seed=11)
    together = np.array([max(h["cluster_sizes"]) == 2 for h in result.history], dtype=float)
    means = together.reshape(batches, -1).mean(axis=1)
    z = (means.mean() - exact) / (means.std(ddof=1) / math.sqrt(batches))
    assert abs(z) < stats.norm.isf(ALPHA / 2), (means.mean(), exact)

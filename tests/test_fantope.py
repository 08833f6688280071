"""Fantope projection is the nearest Fantope point; the FPS ADMM solves and recovers sparsity."""

import logging

import numpy as np
import pytest
from scipy.optimize import minimize

from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.linalg.fantope import (
    ADMMSettings,
    fantope_admm,
    fantope_eigenvalues,
    fantope_projection,
)
from fedpca.linalg.subspace import subspace_distance, thin_qr, top_eigenvectors


def symmetric(rng, d, scale=1.0):
    A = rng.standard_normal((d, d)) * scale
    return (A + A.T) / 2


def random_fantope_point(rng, d, k):
    """``U diag(gamma) U^T`` with ``gamma`` in [0, 1]^d summing to k (rejection sampling)."""
    while True:
        gamma = rng.dirichlet(np.full(d, rng.uniform(0.2, 3.0))) * k
        if gamma.max() <= 1:
            U = thin_qr(rng.standard_normal((d, d)))
            return (U * gamma) @ U.T


def planted(rng, p, s, k):
    V = np.zeros((p, k))
    support = np.sort(rng.permutation(p)[:s])
    V[support] = thin_qr(rng.standard_normal((s, k)))
    return V, support


@pytest.mark.parametrize("d,k,scale", [(5, 1, 1.0), (8, 3, 0.1), (12, 6, 10.0), (6, 6, 1.0)])
def test_projection_has_eigenvalues_in_unit_interval_summing_to_k_and_is_idempotent(d, k, scale):
    rng = np.random.default_rng(d * 100 + k)
    for _ in range(5):
        P = fantope_projection(symmetric(rng, d, scale), k)
        values = np.linalg.eigvalsh(P)
        assert values.min() >= -1e-12 and values.max() <= 1 + 1e-12
        assert values.sum() == pytest.approx(k, abs=1e-10)
        np.testing.assert_allclose(P, P.T, atol=0)
        np.testing.assert_allclose(fantope_projection(P, k), P, atol=1e-10)


@pytest.mark.parametrize("d,k", [(4, 1), (6, 2), (9, 4)])
def test_projection_is_the_nearest_fantope_point(d, k):
    rng = np.random.default_rng(7 * d + k)
    for _ in range(5):
        A = symmetric(rng, d, scale=rng.uniform(0.2, 3.0))
        P = fantope_projection(A, k)
        best = np.linalg.norm(A - P)
        for _ in range(200):
            F = random_fantope_point(rng, d, k)
            # Projection onto a convex set: <A - P, F - P> <= 0 for every feasible F ...
            assert np.sum((A - P) * (F - P)) <= 1e-10
            # ... so no feasible point, nor any point between P and F, is closer to A.
            assert np.linalg.norm(A - F) >= best - 1e-12
            t = rng.uniform(0, 0.1)
            assert np.linalg.norm(A - (P + t * (F - P))) >= best - 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_eigenvalue_map_matches_a_brute_force_capped_simplex_projection(seed):
    # P_F acts on the eigenvalues as the Euclidean projection onto
    # {gamma : 0 <= gamma <= 1, sum gamma = k}; solve that by SLSQP and compare.
    rng = np.random.default_rng(seed)
    d, k = 7, 3
    g = rng.normal(0, 1.5, d)
    brute = minimize(
        lambda v: np.sum((v - g) ** 2), np.full(d, k / d), method="SLSQP",
        bounds=[(0, 1)] * d, constraints=[{"type": "eq", "fun": lambda v: v.sum() - k}],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    np.testing.assert_allclose(fantope_eigenvalues(g, k), brute.x, atol=1e-6)


def test_eigenvalue_map_handles_ties_and_the_full_rank_case():
    np.testing.assert_allclose(fantope_eigenvalues(np.full(5, 3.7), 2), np.full(5, 0.4))
    np.testing.assert_allclose(fantope_eigenvalues(np.array([5.0, -2.0, 0.3]), 3), np.ones(3))
    np.testing.assert_allclose(
        fantope_eigenvalues(np.array([10.0, 9.0, 0.0, -1.0]), 2), [1.0, 1.0, 0.0, 0.0]
    )


def test_zero_penalty_gives_the_top_k_eigenprojector():
    rng = np.random.default_rng(3)
    d, k = 15, 3
    U = thin_qr(rng.standard_normal((d, d)))
    S = (U * np.r_[5.0, 4.0, 3.0, rng.uniform(0, 1, d - 3)]) @ U.T
    result = fantope_admm(S, k, 0.0)
    assert result.converged
    P = U[:, :3] @ U[:, :3].T
    np.testing.assert_allclose(result.solution, P, atol=1e-3)


def test_admm_recovers_a_planted_sparse_subspace():
    rng = np.random.default_rng(11)
    p, s, k = 80, 6, 2
    V, support = planted(rng, p, s, k)
    S = V @ V.T + 0.2 * np.eye(p) + symmetric(rng, p, 0.02)
    result = fantope_admm(S, k, lam=0.03)
    assert result.converged and result.iterations < 500
    estimated = np.flatnonzero(np.diag(result.solution) > 1e-4)
    np.testing.assert_array_equal(estimated, support)
    fps = subspace_distance(top_eigenvectors(result.solution, k), V)
    # Plain PCA of the same noisy matrix spreads over every row and is further off.
    pca = top_eigenvectors(S, k)
    assert (np.abs(pca).sum(axis=1) > 1e-4).sum() > 2 * s
    assert fps < 0.1 < subspace_distance(pca, V)


def test_admm_solution_is_at_least_as_good_as_feasible_points():
    rng = np.random.default_rng(5)
    p, k, lam = 12, 2, 0.05
    V, _ = planted(rng, p, 4, k)
    S = V @ V.T + symmetric(rng, p, 0.1)
    X = fantope_admm(S, k, lam, ADMMSettings(tol=1e-7, max_iter=5000)).solution

    def objective(F):
        return np.sum(S * F) - lam * np.abs(F).sum()

    best = objective(X)
    for F in [V @ V.T] + [random_fantope_point(rng, p, k) for _ in range(200)]:
        assert objective(F) <= best + 1e-5


def test_solution_does_not_depend_on_the_scale_of_the_input():
    rng = np.random.default_rng(2)
    V, _ = planted(rng, 30, 5, 2)
    S = V @ V.T + symmetric(rng, 30, 0.05)
    small = fantope_admm(S * 1e-4, 2, 0.05 * 1e-4).solution
    large = fantope_admm(S * 1e3, 2, 0.05 * 1e3).solution
    np.testing.assert_allclose(small, large, atol=1e-8)


def test_iteration_cap_is_reported_never_silent(caplog):
    rng = np.random.default_rng(4)
    S = symmetric(rng, 20)
    with caplog.at_level(logging.WARNING, logger="fedpca.linalg.fantope"):
        result = fantope_admm(S, 3, 0.3, ADMMSettings(max_iter=2))
    assert result.iterations == 2 and not result.converged
    assert "iteration cap max_iter=2" in caplog.text and "raise max_iter" in caplog.text


@pytest.mark.parametrize(
    "matrix,k,lam,error,match",
    [
        (np.full((3, 3), np.nan), 1, 0.1, InvalidDataError, "NaN"),
        (np.ones((3, 4)), 1, 0.1, InvalidDataError, "square"),
        (np.ones(3), 1, 0.1, InvalidDataError, "square"),
        (np.array([[1.0, 2.0], [0.0, 1.0]]), 1, 0.1, InvalidDataError, "not symmetric"),
        (np.array([["a"]]), 1, 0.1, InvalidDataError, "dtype"),
        (np.eye(3), 4, 0.1, ConfigurationError, "k <= dim"),
        (np.eye(3), 0, 0.1, ConfigurationError, "k must be >= 1"),
        (np.eye(3), 1.5, 0.1, ConfigurationError, "k must be an integer"),
        (np.eye(3), 1, -0.1, ConfigurationError, "lam must be a finite number >= 0"),
        (np.eye(3), 1, float("nan"), ConfigurationError, "lam must be"),
    ],
)
def test_bad_inputs_get_clear_errors(matrix, k, lam, error, match):
    with pytest.raises(error, match=match):
        fantope_admm(matrix, k, lam)


def test_projection_refuses_bad_inputs_too():
    with pytest.raises(ConfigurationError, match="k <= dim"):
        fantope_projection(np.eye(2), 3)
    with pytest.raises(InvalidDataError, match="inf"):
        fantope_projection(np.array([[np.inf]]), 1)


@pytest.mark.parametrize(
    "kwargs,match",
    [({"rho": 0.0}, "rho"), ({"tol": -1.0}, "tol"), ({"max_iter": 0}, "max_iter")],
)
def test_bad_solver_settings_get_clear_errors(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        ADMMSettings(**kwargs)

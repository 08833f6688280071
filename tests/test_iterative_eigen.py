"""Top eigenpairs without d^3 work (issue 14): blocked noise, Lanczos vs dense, the rule.

The iterative and dense solvers must give the same top eigenvectors of the *same* noisy
matrix (the law of every release is unchanged; only how its eigenvectors are found).
"""

import logging
import math
import tracemalloc

import numpy as np
import pytest

from fedpca.algorithms.central import (
    analyze_gauss_release,
    mod_sulq_release,
    run_analyze_gauss,
    run_local_pca,
    run_mod_sulq,
    run_pooled_pca,
)
from fedpca.algorithms.dpdis_factors import partial_square_root
from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, DPdisPCASite, run_dpdis_pca
from fedpca.estimators import AnalyzeGaussPCA, NonPrivatePCA
from fedpca.linalg.subspace import (
    DENSE,
    LANCZOS,
    THIN_SVD,
    EigensolverNotConverged,
    GramPlusSymmetric,
    eigensolver_for,
    gram_product,
    gram_top_eigenpairs,
    lanczos_top_eigenpairs,
    subspace_distance,
    top_eigenpairs,
)
from fedpca.dp.mechanisms import NoiseSource, symmetric_gaussian, symmetric_gaussian_in_blocks

#: Subspace distance the iterative and dense paths must agree to (the brief's 1e-8).
AGREE = 1e-8
#: Above LANCZOS_MIN_DIM so that "auto" picks Lanczos for small k.
WIDE = 1200


def wide_rows(n: int, d: int, seed: int, rank: int = 6) -> np.ndarray:
    """Low rank plus noise, rows of norm 0.9 (clipping changes nothing)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, rank)) * np.linspace(3, 1, rank) @ rng.standard_normal(
        (rank, d)
    ) + 0.3 * rng.standard_normal((n, d))
    return 0.9 * X / np.linalg.norm(X, axis=1, keepdims=True)


def noisy(n: int, d: int, sigma: float, divisor: float = 1.0, seed: int = 0):
    X = wide_rows(n, d, seed)
    E = symmetric_gaussian(np.random.default_rng(seed + 100), d, sigma)
    return GramPlusSymmetric(X, divisor, E)


def relative_projector_gap(P: np.ndarray, Q: np.ndarray) -> float:
    """``||P P^T - Q Q^T||_F / ||Q Q^T||_F`` (P_s carries the eigenvalues too)."""
    A, B = P @ P.T, Q @ Q.T
    return float(np.linalg.norm(A - B) / np.linalg.norm(B))


# --- the noise matrix drawn in blocks: the same matrix, bit for bit -------------------------


@pytest.mark.parametrize("dim, block_bytes", [(1, 8), (2, 8), (7, 56), (50, 1200),
                                              (333, 8 * 333 * 17), (400, 1 << 30)])
def test_blocked_noise_is_the_dense_draw_bit_for_bit(dim, block_bytes):
    dense_rng, blocked_rng = np.random.default_rng([4, dim]), np.random.default_rng([4, dim])
    dense = symmetric_gaussian(dense_rng, dim, 2.5)
    blocked = symmetric_gaussian_in_blocks(blocked_rng, dim, 2.5, block_bytes)
    np.testing.assert_array_equal(blocked, dense)
    np.testing.assert_array_equal(blocked, blocked.T)  # lower triangle mirrored exactly
    assert blocked_rng.random() == dense_rng.random()  # the generator is left where it was


def test_noise_source_draws_in_blocks_the_seeded_dense_matrix():
    for index in (0, 3):
        np.testing.assert_array_equal(
            NoiseSource(7, "site-a").symmetric(index, 0.4, 90),
            symmetric_gaussian(NoiseSource(7, "site-a").generator(index), 90, 0.4),
        )


def test_blocked_noise_holds_one_matrix_not_four():
    dim = 1000
    rng = np.random.default_rng(0)
    tracemalloc.start()
    symmetric_gaussian_in_blocks(rng, dim, 1.0, block_bytes=1 << 20)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1.1 * 8 * dim**2


# --- Lanczos against dense eigh on the same matrix ------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("divisor", [1.0, 64.0])
def test_lanczos_and_dense_agree_on_the_same_noisy_matrix(k, divisor):
    M = noisy(64, WIDE, sigma=0.3 / divisor, divisor=divisor)
    assert eigensolver_for(64, WIDE, k, has_symmetric=True) == LANCZOS
    values, vectors = gram_top_eigenpairs(M, k)  # auto: Lanczos
    dense_values, dense_vectors = gram_top_eigenpairs(M, k, DENSE)
    assert subspace_distance(vectors, dense_vectors) < AGREE
    for j in range(k):  # each eigenvector, not only the span (the top ones are separated)
        assert abs(abs(vectors[:, j] @ dense_vectors[:, j]) - 1) < AGREE
    np.testing.assert_allclose(values, dense_values, rtol=1e-10)
    assert np.all(np.diff(values) <= 0)  # descending
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(k), atol=1e-12)


def test_the_krylov_basis_in_small_chunks_gives_the_same_pairs(monkeypatch):
    M = noisy(64, WIDE, sigma=0.3)
    one_chunk = gram_top_eigenpairs(M, 4, LANCZOS)
    monkeypatch.setattr("fedpca.linalg.subspace.LANCZOS_CHUNK_BYTES", 8 * WIDE * 16)  # 16 rows
    chunked = gram_top_eigenpairs(M, 4, LANCZOS)
    np.testing.assert_allclose(chunked[0], one_chunk[0], rtol=1e-12)
    assert subspace_distance(chunked[1], one_chunk[1]) < AGREE


def test_lanczos_takes_the_largest_algebraic_eigenvalues_negative_ones_included():
    # -c I + noise: every eigenvalue negative, the smallest ones far larger in magnitude.
    d, k = WIDE, 4
    rng = np.random.default_rng(5)
    S = symmetric_gaussian(rng, d, 0.01) - 3.0 * np.eye(d)  # spectrum within -3 +- 0.7
    S[0, 0] -= 50.0  # the eigenvalue of largest magnitude is the most negative
    M = GramPlusSymmetric(wide_rows(10, d, 1) * 0.2, 1.0, S)
    values, vectors = gram_top_eigenpairs(M, k, LANCZOS)
    dense_values, dense_vectors = gram_top_eigenpairs(M, k, DENSE)
    assert np.all(values < 0)
    np.testing.assert_allclose(values, dense_values, rtol=1e-10)
    assert subspace_distance(vectors, dense_vectors) < AGREE
    P = partial_square_root(M, k)  # DPdisPCA clips negative eigenvalues to 0
    np.testing.assert_array_equal(P, np.zeros_like(P))


def test_near_tied_pair_is_found_as_a_pair():
    # Two equal data eigenvalues split only by the noise: each vector is ill-conditioned,
    # the pair's span is not (its gap to the third eigenvalue is large).
    d = WIDE
    rng = np.random.default_rng(2)
    axes = np.linalg.qr(rng.standard_normal((d, 2)))[0]
    X = np.vstack([5 * axes.T, 0.1 * rng.standard_normal((30, d)) / math.sqrt(d)])
    M = GramPlusSymmetric(X, 1.0, symmetric_gaussian(rng, d, 1e-4))
    values, vectors = gram_top_eigenpairs(M, 2, LANCZOS)
    dense_values, dense_vectors = gram_top_eigenpairs(M, 2, DENSE)
    assert values[0] - values[1] < 1e-2 * values[0]
    assert subspace_distance(vectors, dense_vectors) < AGREE
    assert subspace_distance(vectors, axes) < 1e-3
    np.testing.assert_allclose(values, dense_values, rtol=1e-10)


def test_no_convergence_falls_back_to_dense_with_a_warning(monkeypatch, caplog):
    M = noisy(64, WIDE, sigma=0.3)
    monkeypatch.setattr("fedpca.linalg.subspace.LANCZOS_BASIS_BYTES", 8 * WIDE * 12)  # 12 steps
    with caplog.at_level(logging.WARNING, logger="fedpca.linalg.subspace"):
        values, vectors = gram_top_eigenpairs(M, 3, LANCZOS)
    assert "did not reach relative residual" in caplog.text
    assert "dense eigendecomposition instead" in caplog.text
    dense_values, dense_vectors = top_eigenpairs(M.dense(), 3)
    np.testing.assert_array_equal(values, dense_values)
    np.testing.assert_array_equal(vectors, dense_vectors)


def test_lanczos_refuses_an_invariant_subspace_instead_of_guessing():
    # A rank-2 matrix without noise: the Krylov space closes after 2 steps.
    d = 300
    U = np.linalg.qr(np.random.default_rng(0).standard_normal((d, 2)))[0]
    with pytest.raises(EigensolverNotConverged, match="breakdown"):
        lanczos_top_eigenpairs(lambda v: U @ (np.array([3.0, 1.0]) * (U.T @ v)), d, 3)


def test_lanczos_is_deterministic_for_the_same_matrix():
    M = noisy(64, WIDE, sigma=0.3)
    first = gram_top_eigenpairs(M, 3, LANCZOS)
    second = gram_top_eigenpairs(M, 3, LANCZOS)
    np.testing.assert_array_equal(first[1], second[1])


# --- the rule ------------------------------------------------------------------------------


def test_the_rule():
    assert eigensolver_for(64, 6830, 3, has_symmetric=False) == THIN_SVD
    assert eigensolver_for(64, 6830, 65, has_symmetric=False) == DENSE  # k > n
    assert eigensolver_for(7000, 6830, 3, has_symmetric=False) == DENSE  # n >= d
    assert eigensolver_for(64, 6830, 3, has_symmetric=True) == LANCZOS
    assert eigensolver_for(64, 999, 1, has_symmetric=True) == DENSE  # small d
    assert eigensolver_for(64, 1000, 5, has_symmetric=True) == LANCZOS
    assert eigensolver_for(64, 1000, 6, has_symmetric=True) == DENSE  # k > 5 (d/1000)^2
    assert eigensolver_for(64, 2000, 20, has_symmetric=True) == LANCZOS
    assert eigensolver_for(64, 2000, 21, has_symmetric=True) == DENSE


def test_thin_svd_is_refused_with_noise_and_for_k_beyond_n():
    with pytest.raises(ValueError, match="method='dense' or 'lanczos'"):
        gram_top_eigenpairs(noisy(20, 50, 0.1), 2, THIN_SVD)
    with pytest.raises(ValueError, match="k <= min"):
        gram_top_eigenpairs(GramPlusSymmetric(wide_rows(3, 50, 0)), 4, THIN_SVD)


# --- the estimators and the site: same results as the dense path ---------------------------


def test_nonprivate_uses_the_thin_svd_and_matches_eigh():
    X = wide_rows(40, 500, 3)
    result = run_pooled_pca(X, 4)
    values, vectors = top_eigenpairs(X.T @ X / 40, 4)
    assert subspace_distance(result.basis, vectors) < AGREE
    np.testing.assert_allclose(result.history[0]["eigenvalues"], values, rtol=1e-10)
    fitted = NonPrivatePCA(4).fit(X)
    np.testing.assert_allclose(fitted.explained_variance_, values, rtol=1e-10)
    # k beyond n (no SVD can give it): the dense path, zero eigenvalues included
    wide_k = run_local_pca([X[:3]], 5)
    np.testing.assert_allclose(wide_k.history[0]["eigenvalues"][3:], 0.0, atol=1e-12)


def test_analyze_gauss_iterative_release_matches_the_dense_matrix():
    X = wide_rows(64, WIDE, 4)
    result = run_analyze_gauss(X, 3, 1.0, 1e-5, seed=11)
    release = analyze_gauss_release(X, 1.0, 1e-5, seed=11)  # the same noise, formed densely
    values, vectors = top_eigenpairs(release.matrix, 3)
    assert subspace_distance(result.basis, vectors) < AGREE
    np.testing.assert_allclose(result.history[0]["eigenvalues"], values / 64, rtol=1e-10)
    fitted = AnalyzeGaussPCA(3, random_state=11).fit(X)
    np.testing.assert_allclose(fitted.explained_variance_, values / 64, rtol=1e-10)
    # the formed matrix is exactly X^T X + E, E the dense draw of the same seed
    sigma = release.privacy["sigma"]
    E = NoiseSource(11, "analyze-gauss").symmetric(0, sigma, WIDE)
    np.testing.assert_array_equal(release.matrix, X.T @ X + E)


def test_mod_sulq_iterative_release_matches_the_dense_matrix():
    X = wide_rows(2000, WIDE, 6)
    result = run_mod_sulq(X, 2, 5.0, 1e-5, seed=3)
    values, vectors = top_eigenpairs(mod_sulq_release(X, 5.0, 1e-5, seed=3).matrix, 2)
    assert subspace_distance(result.basis, vectors) < AGREE
    np.testing.assert_allclose(result.history[0]["eigenvalues"], values, rtol=1e-10)


def test_dpdis_site_factor_matches_the_dense_eigendecomposition_of_its_full_release():
    X = wide_rows(80, WIDE, 8)
    policy = DPdisPCAPolicy(epsilon=2.0)
    factor = DPdisPCASite(X, policy, site="s", seed=5).release("factor", 6)  # Lanczos
    full = DPdisPCASite(X, policy, site="s", seed=5).release("full")  # same noise, dense
    dense = partial_square_root(full, 6)
    assert relative_projector_gap(factor, dense) < AGREE
    assert subspace_distance(np.linalg.qr(factor)[0], np.linalg.qr(dense)[0]) < AGREE
    np.testing.assert_allclose(np.linalg.norm(factor, axis=0), np.linalg.norm(dense, axis=0),
                               rtol=1e-10)


def test_dpdis_run_is_reproducible_with_a_seed_on_wide_data():
    sites = [wide_rows(60, WIDE, s) for s in range(3)]
    first = run_dpdis_pca(sites, 2, seed=9)
    second = run_dpdis_pca(sites, 2, seed=9)
    np.testing.assert_array_equal(first.basis, second.basis)


@pytest.mark.parametrize("shape", [(10, 7), (5000, 40), (300, 3000)])
def test_the_one_pass_gram_product_is_the_two_pass_one(shape):
    rng = np.random.default_rng(shape[0])
    X = rng.standard_normal(shape)
    for Q in (rng.standard_normal((shape[1], 3)), rng.standard_normal(shape[1])):
        expected = X.T @ (X @ Q)
        np.testing.assert_allclose(gram_product(X, Q), expected, rtol=0,
                                   atol=1e-12 * np.abs(expected).max())

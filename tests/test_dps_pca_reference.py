"""The Flower-free reference: recovers a planted sparse subspace; never forms d x d."""

import tracemalloc

import numpy as np
import pytest

from fedpca.algorithms.dps_pca import (
    DPSPCAServer,
    DPSPCAPolicy,
    run_dps_pca,
)
from fedpca.data.synthetic import SparseSpikedModel, site_data, split_sizes
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import leading_components
from fedpca.linalg.subspace import subspace_distance, thin_qr, threshold_rows


def test_recovers_the_planted_subspace_with_a_generous_budget():
    model = SparseSpikedModel(dim=100, k=3, sparsity=8, seed=4)
    sites = [site_data(model, 30_000, 3, i) for i in range(3)]
    result = run_dps_pca(
        sites, k=3, s_hat=12, policy=DPSPCAPolicy(epsilon=50.0, delta=1e-5, rounds=8),
        seed=1, evaluate=lambda Q: {"distance": subspace_distance(Q, model.truth)},
    )
    distances = [h["distance"] for h in result.history]
    assert distances[-1] < 0.1
    assert distances[-1] < distances[0]
    assert len(result.history) == 9 and result.history[0]["phase"] == "init"
    assert result.history[-1]["epsilon_spent"] <= 50.0 * (1 + 1e-6)
    np.testing.assert_allclose(result.basis.T @ result.basis, np.eye(3), atol=1e-10)
    # Thresholding: at most s_hat rows are non-zero.
    assert (np.linalg.norm(result.basis, axis=1) > 0).sum() <= 12


def test_more_privacy_means_more_error_on_average():
    model = SparseSpikedModel(dim=60, k=2, sparsity=6, seed=2)
    sites = [site_data(model, 4000, 2, i) for i in range(2)]

    def final(eps, seed):
        r = run_dps_pca(sites, 2, 10, DPSPCAPolicy(epsilon=eps, delta=1e-5, rounds=5), seed=seed,
                        evaluate=lambda Q: {"distance": subspace_distance(Q, model.truth)})
        return r.history[-1]["distance"]

    loose = np.mean([final(20.0, s) for s in range(4)])
    tight = np.mean([final(0.05, s) for s in range(4)])
    assert loose < tight


def test_never_forms_a_d_by_d_matrix():
    d, n, k = 3000, 40, 2
    X = np.random.default_rng(0).standard_normal((n, d)) / np.sqrt(d)
    policy = DPSPCAPolicy(epsilon=1.0, rounds=2)
    # Warm the privacy-accounting caches first: the PLD accountant's own grids are not the
    # algorithm's memory.
    run_dps_pca([X[:, :10]], k=k, s_hat=5, policy=policy, seed=0)
    tracemalloc.start()
    run_dps_pca([X, X], k=k, s_hat=20, policy=policy, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < d * d * 8 / 4, f"peak {peak / 1e6:.1f} MB suggests a d x d matrix"


def test_initial_basis_skips_the_private_initialisation():
    model = SparseSpikedModel(dim=30, k=2, sparsity=5, seed=0)
    sites = [site_data(model, 1000, 2, i) for i in range(2)]
    Q0 = thin_qr(np.random.default_rng(0).standard_normal((30, 2)))
    result = run_dps_pca(sites, 2, 8, DPSPCAPolicy(rounds=3), seed=0, initial_basis=Q0)
    assert [h["phase"] for h in result.history] == ["power"] * 3


def test_server_checks_its_parameters_and_answers():
    with pytest.raises(ConfigurationError, match="s_hat"):
        DPSPCAServer(dim=10, k=4, s_hat=3, rounds=2)
    with pytest.raises(ConfigurationError, match="same number of features"):
        run_dps_pca([np.zeros((3, 4)), np.zeros((3, 5))], 1, 2, DPSPCAPolicy(rounds=1))
    with pytest.raises(ConfigurationError, match="at least one site"):
        run_dps_pca([], 1, 2, DPSPCAPolicy(rounds=1))


def test_linear_algebra_helpers():
    A = np.random.default_rng(0).standard_normal((10, 3))
    Q = thin_qr(A)
    R = Q.T @ A
    assert (np.diag(R) > 0).all()
    np.testing.assert_allclose(Q @ R, A, atol=1e-12)
    V = np.arange(20.0).reshape(10, 2)
    kept = threshold_rows(V, 3)
    assert (np.linalg.norm(kept, axis=1) > 0).sum() == 3 and kept[-1].any()
    assert subspace_distance(Q, Q) == pytest.approx(0.0, abs=1e-7)
    E = np.eye(6)
    assert subspace_distance(E[:, :2], E[:, 2:4]) == pytest.approx(np.sqrt(2))


def test_synthetic_model_matches_the_paper():
    model = SparseSpikedModel(dim=50, k=3, sparsity=7, seed=3)
    truth = model.truth
    np.testing.assert_allclose(truth.T @ truth, np.eye(3), atol=1e-12)
    assert (np.abs(truth[7:]) == 0).all() and (np.linalg.norm(truth[:7], axis=1) > 0).all()
    assert (model.eigenvalues[:3] == 100).all() and model.eigenvalues[3:].max() <= 10
    X = model.sample(20_000)
    assert np.mean(np.linalg.norm(X, axis=1) > 1) < 1e-3  # public scale bounds the rows
    top = np.linalg.eigh(X.T @ X)[1][:, -3:]
    assert subspace_distance(top, truth) < 0.1
    assert split_sizes(10, 3) == [4, 3, 3]
    with pytest.raises(ConfigurationError):
        split_sizes(2, 3)


def test_result_exposes_estimator_attributes_and_round_trips(tmp_path):
    from fedpca.results import PCAResult

    model = SparseSpikedModel(dim=20, k=2, sparsity=4, seed=1)
    sites = [site_data(model, 2000, 2, i) for i in range(2)]
    result = run_dps_pca(sites, 2, 6, DPSPCAPolicy(epsilon=3.0, delta=1e-6, rounds=2), seed=0)
    assert result.epsilon == 3.0 and result.delta == 1e-6 and result.data_norm == 1.0
    assert result.n_components == 2 and result.components_.shape == (2, 20)
    with pytest.raises(AttributeError, match="releases only the subspace"):
        result.explained_variance_
    path = tmp_path / "r.json"
    result.save(path)
    loaded = PCAResult.load(path)
    np.testing.assert_array_equal(loaded.basis, result.basis)
    assert loaded.privacy == result.privacy and loaded.history == result.history
    X = sites[0][:5]
    np.testing.assert_allclose(loaded.transform(X), X @ result.basis)


def test_an_oversampled_step_gives_its_leading_components_in_the_final_span():
    rng = np.random.default_rng(3)
    eigenvectors = thin_qr(rng.standard_normal((60, 60)))
    values = np.r_[50.0, 30.0, 4.0, np.linspace(1.0, 0.1, 57)]
    covariance = (eigenvectors * values) @ eigenvectors.T
    # a power step whose basis holds the top two directions behind three weak ones
    basis = eigenvectors[:, [5, 6, 0, 1, 2]]
    product = covariance @ basis + 0.05 * rng.standard_normal((60, 5))
    final = thin_qr(product)
    top = leading_components(product, 2)
    assert np.allclose(top.T @ top, np.eye(2), atol=1e-12)
    assert np.allclose(final @ (final.T @ top), top, atol=1e-10)  # in thinQR(K)'s span
    assert subspace_distance(top, eigenvectors[:, :2]) < 0.05
    assert subspace_distance(final[:, :2], eigenvectors[:, :2]) > 1.0  # unordered columns
    assert (top[np.abs(top).argmax(axis=0), [0, 1]] > 0).all()
    with pytest.raises(ConfigurationError, match="1 <= k <= k'"):
        leading_components(product, 6)

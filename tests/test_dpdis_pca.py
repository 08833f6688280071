"""DPdisPCA without Flower: noise, sensitivity, the merge, edge cases, errors and utility."""

import math
import tracemalloc

import numpy as np
import pytest
from test_noise_statistics import variance_interval
from test_sensitivity import C, adversarial_max, project

from fedpca.algorithms.dpdis_factors import (
    merged_factor_basis,
    partial_square_root,
    stacked_factors,
)
from fedpca.algorithms.dpdis_pca import (
    DPdisPCAPolicy,
    DPdisPCAServer,
    DPdisPCASite,
    merge_weights,
    message_bytes,
    pooled_second_moment,
    run_dpdis_pca,
    second_moment_sensitivity,
)
from fedpca.algorithms.site import SiteAnswer
from fedpca.data.dpdis_model import DecayingSpectrumModel
from fedpca.errors import (
    BudgetExceededError,
    ConfigurationError,
    InvalidDataError,
    InvalidRequestError,
)
from fedpca.linalg.subspace import energy_ratio, top_eigenvectors
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario

POLICY = DPdisPCAPolicy(epsilon=1.0, delta=1e-5)
MODEL = DecayingSpectrumModel()


def projector(V: np.ndarray) -> np.ndarray:
    return V @ V.T


def model_sites(sites: int, n: int, model: DecayingSpectrumModel = MODEL) -> list[np.ndarray]:
    return [model.sample(n, stream=i) for i in range(sites)]


# --- the release: calibration, noise, sensitivity ------------------------------------------


def test_noise_is_symmetric_with_the_calibrated_variance_on_the_upper_triangle():
    d, n = 90, 40
    tau = POLICY.calibration().noise_multiplier * math.sqrt(2) / n
    diagonal, off_diagonal = [], []
    for s in range(6):  # one release per site
        site = DPdisPCASite(model_sites(1, n, DecayingSpectrumModel(dim=d, seed=s))[0], POLICY,
                            site=f"s{s}")
        E = site.release("full") - site.X.T @ site.X / n
        np.testing.assert_array_equal(E, E.T)  # mirrored exactly
        diagonal.append(np.diag(E))
        off_diagonal.append(E[np.triu_indices(d, 1)])
        assert site.ledger.releases[0].sigma == pytest.approx(tau, rel=1e-12)
    for noise in (np.concatenate(diagonal), np.concatenate(off_diagonal)):
        lo, hi = variance_interval(noise.var(ddof=0), noise.size)
        assert lo <= tau**2 <= hi
        assert abs(noise.mean()) < 5 * tau / np.sqrt(noise.size)


def test_upper_triangle_entries_are_uncorrelated():
    site = DPdisPCASite(np.eye(120) * 0.5, POLICY, site="s")
    E = site.release("full") - site.X.T @ site.X / site.n
    upper = E[np.triu_indices(120)]
    assert abs(np.corrcoef(upper[:-1], upper[1:])[0, 1]) < 5 / np.sqrt(upper.size)


def upper_triangle_gap(xy: np.ndarray, d: int) -> float:
    x, y = project(xy[:d]), project(xy[d:])
    return float(np.linalg.norm((np.outer(x, x) - np.outer(y, y))[np.triu_indices(d)]))


@pytest.mark.parametrize("d", [2, 3, 5])
def test_adversarial_search_never_exceeds_the_replace_one_sensitivity(d):
    rng = np.random.default_rng(d)
    bound = second_moment_sensitivity(C, 1)
    worst = adversarial_max(lambda v: upper_triangle_gap(v, d), 2 * d, rng, starts=30)
    assert worst <= bound * (1 + 1e-9)
    assert worst >= 0.98 * bound  # x = C e1, y = C e2 attains it: the bound is tight
    assert bound == pytest.approx(math.sqrt(2) * C**2)  # not the slides' add/remove C^2


def test_replacing_a_record_moves_A_s_by_at_most_sqrt2_C2_over_N():
    rng = np.random.default_rng(3)
    d, n = 6, 25
    bound = second_moment_sensitivity(C, n)
    for _ in range(200):
        X = np.array([project(r) for r in rng.standard_normal((n, d)) * 2])
        Y = X.copy()
        Y[rng.integers(n)] = project(rng.standard_normal(d) * 5)
        gap = (X.T @ X - Y.T @ Y) / n
        assert np.linalg.norm(gap[np.triu_indices(d)]) <= bound * (1 + 1e-9)


def test_the_release_is_charged_once_with_its_sensitivity():
    X = model_sites(1, 50)[0]
    site = DPdisPCASite(X, POLICY, site="s", seed=1)
    P = site.release("factor", 7)
    assert P.shape == (200, 7)
    (release,) = site.ledger.releases
    assert release.sensitivity == pytest.approx(math.sqrt(2) / 50)
    assert release.noise_multiplier == pytest.approx(POLICY.calibration().noise_multiplier)
    assert site.ledger.epsilon_spent() == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(BudgetExceededError, match="allows 1 releases"):
        site.release("factor", 7)
    assert site.ledger.count == 1


def test_paper_accounting_is_the_classic_formula_and_refuses_eps_at_least_1():
    policy = DPdisPCAPolicy(epsilon=0.5, delta=1e-5, accounting="paper")
    assert policy.calibration().noise_multiplier == pytest.approx(
        math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    )
    assert policy.calibration().noise_multiplier > DPdisPCAPolicy(epsilon=0.5).calibration(
    ).noise_multiplier  # the analytic Gaussian (default) needs less noise
    with pytest.raises(ConfigurationError, match="epsilon < 1"):
        DPdisPCAPolicy(epsilon=1.0, accounting="paper")


def test_server_can_only_raise_the_noise():
    X = model_sites(1, 30)[0]
    own = POLICY.calibration().noise_multiplier
    for factor in (0.5, 2.0):
        site = DPdisPCASite(X, POLICY, site="s")
        site.release("factor", 3, min_noise_multiplier=own * factor)
        assert site.ledger.releases[0].noise_multiplier == pytest.approx(own * max(1, factor))


# --- the merge -------------------------------------------------------------------------------


def test_partial_square_root_keeps_the_largest_eigenpairs_and_clips_negatives():
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))[0]
    A = (Q * [3.0, 1.0, -2.0, 0.5]) @ Q.T
    P = partial_square_root(A, 3)
    np.testing.assert_allclose(np.linalg.norm(P, axis=0), [np.sqrt(3), 1, np.sqrt(0.5)])
    np.testing.assert_allclose(P @ P.T, (Q[:, [0, 1, 3]] * [3, 1, 0.5]) @ Q[:, [0, 1, 3]].T,
                               atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(partial_square_root(A, 4), axis=0)[-1], 0.0)


@pytest.mark.parametrize("weighting", ["uniform", "samples"])
def test_thin_svd_merge_equals_the_d_by_d_eigh_merge(weighting):
    rng = np.random.default_rng(1)
    d, r, k = 40, 5, 4
    factors = [partial_square_root(np.cov(rng.standard_normal((d, 60))), r) for _ in range(3)]
    weights = merge_weights([10, 30, 60], weighting)
    A_c = sum(w * P @ P.T for w, P in zip(weights, factors))
    svd = merged_factor_basis(factors, weights, k)  # 3 r = 15 < d: thin SVD
    np.testing.assert_allclose(projector(svd), projector(top_eigenvectors(A_c, k)), atol=1e-10)
    np.testing.assert_allclose(svd.T @ svd, np.eye(k), atol=1e-12)
    M = stacked_factors(factors, weights)
    np.testing.assert_allclose(M @ M.T, A_c, atol=1e-14)
    # With S R >= d the same function takes the eigh route and agrees.
    wide = merged_factor_basis(factors * 3, np.concatenate([weights] * 3) / 3, k)
    np.testing.assert_allclose(projector(wide), projector(svd), atol=1e-10)


def test_the_svd_merge_never_forms_a_d_by_d_matrix():
    d, r = 3000, 4
    rng = np.random.default_rng(2)
    factors = [rng.standard_normal((d, r)) for _ in range(2)]
    weights = merge_weights([1, 1], "uniform")
    merged_factor_basis(factors, weights, 3)  # warm scipy's LAPACK wrappers
    tracemalloc.start()
    merged_factor_basis(factors, weights, 3)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < d * d * 8 / 4, f"peak {peak / 1e6:.1f} MB suggests a d x d matrix"


def test_merge_refuses_a_rank_below_k():
    factors = [np.ones((10, 1)), np.ones((10, 1))]
    with pytest.raises(ConfigurationError, match=r"rank at most S\*R = 2 < k = 3.*r >= 2"):
        merged_factor_basis(factors, merge_weights([1, 1], "uniform"), 3)


def test_equal_site_sizes_make_both_weightings_identical_and_unequal_ones_differ():
    sites = model_sites(3, 100)
    same = [run_dpdis_pca(sites, 5, policy=POLICY, seed=2, weighting=w).basis
            for w in ("uniform", "samples")]
    np.testing.assert_allclose(same[0], same[1], atol=1e-12)
    uneven = [sites[0][:10], sites[1], sites[2]]
    bases = [run_dpdis_pca(uneven, 5, policy=POLICY, seed=2, weighting=w).basis
             for w in ("uniform", "samples")]
    assert not np.allclose(projector(bases[0]), projector(bases[1]))


# --- one site: edge cases ---------------------------------------------------------------------


def test_r_equal_to_d_on_one_site_gives_the_full_matrix_answer():
    X = model_sites(1, 500, DecayingSpectrumModel(dim=12))[0]
    policy = DPdisPCAPolicy(epsilon=50.0)
    factor = run_dpdis_pca([X], 3, r=12, policy=policy, seed=4)
    full = run_dpdis_pca([X], 3, policy=policy, seed=4, variant="full")
    np.testing.assert_allclose(projector(factor.basis), projector(full.basis), atol=1e-8)
    assert factor.config["r"] == 12 and full.config["r"] is None
    assert factor.config["bytes_per_site"] == full.config["bytes_per_site"] == 12 * 12 * 8
    # The default R = 2K is capped at d.
    assert run_dpdis_pca([X], 10, policy=policy, seed=4).config["r"] == 12


def test_a_site_with_one_record_uses_the_full_sensitivity():
    x = np.array([[0.6, 0.0, 0.8, 0.0]])
    result = run_dpdis_pca([x], 2, policy=POLICY, seed=0)
    np.testing.assert_allclose(result.basis.T @ result.basis, np.eye(2), atol=1e-12)
    assert result.privacy["sensitivity"] == pytest.approx(math.sqrt(2))
    assert result.privacy["smallest_site"] == 1


def test_constant_and_zero_columns_are_handled():
    rng = np.random.default_rng(5)
    X = np.column_stack([np.full(400, 0.5), np.zeros(400), rng.uniform(-0.3, 0.3, (400, 4))])
    result = run_dpdis_pca([X], 2, policy=DPdisPCAPolicy(epsilon=1e4), seed=1,
                           evaluation=pooled_second_moment([X]))
    assert result.history[0]["energy_ratio"] > 0.999
    assert abs(result.basis[0, 0]) > 0.99  # the constant column dominates x x^T
    assert np.all(np.isfinite(result.basis))


# --- clear errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant,r,match",
    [
        ("factor", 0, r"r \(the columns of P_s\) must be an integer in 1..8 .*got 0"),
        ("factor", 2.5, "integer in 1..8 .*got 2.5"),
        ("factor", 3.0, "integer in 1..8 .*got 3.0"),
        ("factor", "3", "integer in 1..8 .*got '3'"),
        ("factor", True, "integer in 1..8 .*got True"),
        ("factor", None, "integer in 1..8 .*got None"),
        ("factor", 9, "integer in 1..8 \\(this site's d\\), got 9"),
        ("full", 3, "takes no r"),
        ("svd", 3, "unknown variant"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_released(variant, r, match):
    site = DPdisPCASite(np.eye(8) * 0.3, POLICY, site="clinic")
    with pytest.raises(InvalidRequestError, match=f"clinic: refused: .*{match}"):
        site.release(variant, r)
    assert site.ledger.count == 0


def test_bad_data_and_mismatched_sites_get_clear_errors():
    with pytest.raises(InvalidDataError, match="clinic: data has 1 NaN"):
        DPdisPCASite(np.array([[0.1, np.nan], [0.2, 0.3]]), POLICY, site="clinic")
    with pytest.raises(ConfigurationError, match="same number of features"):
        run_dpdis_pca([np.eye(3), np.eye(4)], 1, policy=POLICY)
    with pytest.raises(ConfigurationError, match="at least one site"):
        run_dpdis_pca([], 1, policy=POLICY)


def test_server_checks_its_parameters_and_the_answers():
    with pytest.raises(ConfigurationError, match="k <= dim"):
        DPdisPCAServer(5, 6)
    with pytest.raises(ConfigurationError, match="r <= dim"):
        DPdisPCAServer(5, 2, r=6)
    with pytest.raises(ConfigurationError, match="weighting must be one of"):
        DPdisPCAServer(5, 2, weighting="by-size")
    with pytest.raises(ConfigurationError, match="variant must be one of"):
        DPdisPCAServer(5, 2, variant="sketch")
    with pytest.raises(ConfigurationError, match="5 x 5 matrix"):
        DPdisPCAServer(5, 2, evaluation=np.eye(4))
    server = DPdisPCAServer(5, 2, r=3)
    assert server.request() == {"variant": "factor", "dim": 5, "r": 3}
    with pytest.raises(ConfigurationError, match="incomplete"):
        server.result({}, {})
    wrong_d = SiteAnswer("7", 10, np.zeros((6, 3)), 1.0)
    with pytest.raises(InvalidRequestError, match=r"site 7 .*shape \(6, 3\).*\(5, 3\)"):
        server.receive([wrong_d])
    nan = SiteAnswer("8", 10, np.full((5, 3), np.nan), 1.0)
    with pytest.raises(InvalidRequestError, match="finite"):
        server.receive([nan])


def test_scenario_checks_and_round_trips_through_run_config():
    with pytest.raises(ConfigurationError, match="alpha"):
        DPdisPCAScenario(alpha=0.5)
    with pytest.raises(ConfigurationError, match="dataset must be one of"):
        DPdisPCAScenario(dataset="cifar")
    with pytest.raises(ConfigurationError, match="r >= 3"):
        DPdisPCAScenario(sites=2, dim=10, samples=100, k=5, r=2)
    scenario = DPdisPCAScenario(sites=3, dim=30, samples=300, k=4, weighting="samples", seed=9)
    assert scenario.resolved_r == 8
    config = scenario.to_run_config()
    assert config["r"] == 0 and config["alpha"] == 0.0 and config["seed"] == 9
    assert DPdisPCAScenario.from_run_config(config) == scenario
    unseeded = DPdisPCAScenario.from_run_config({**config, "seed": -1, "r": 5})
    assert unseeded.seed is None and unseeded.r == 5
    privacy = scenario.privacy()
    assert privacy["sensitivity"] == pytest.approx(math.sqrt(2) / 100)
    assert privacy["sigma"] == pytest.approx(privacy["noise_multiplier"] * math.sqrt(2) / 100)
    assert privacy["releases_per_site"] == 1
    assert message_bytes(30, 8) == 30 * 8 * 8 and message_bytes(30, None) == 30 * 30 * 8


# --- the synthetic model and utility ----------------------------------------------------------


def test_synthetic_model_is_public_decaying_and_bounded():
    model = DecayingSpectrumModel(dim=50, decay_length=8.0, seed=3)
    lam = model.eigenvalues
    assert lam[0] == 1.0 and np.all(np.diff(lam) < 0)
    U = model.eigenvectors
    np.testing.assert_allclose(U.T @ U, np.eye(50), atol=1e-12)
    X = model.sample(20_000, stream=1)
    assert np.mean(np.linalg.norm(X, axis=1) > 1) < 1e-3  # public scale bounds the rows
    np.testing.assert_array_equal(X, model.sample(20_000, stream=1))
    empirical = X.T @ X / len(X)
    truth = model.second_moment
    assert np.linalg.norm(empirical - truth) < 0.05 * np.linalg.norm(truth)
    assert energy_ratio(top_eigenvectors(empirical, 5), truth) > 0.99


def test_large_epsilon_recovers_the_pooled_subspace():
    sites = model_sites(4, 1000)
    A = pooled_second_moment(sites)
    result = run_dpdis_pca(sites, 50, policy=DPdisPCAPolicy(epsilon=1e4), seed=3, evaluation=A)
    assert result.history[0]["energy_ratio"] > 0.995
    assert result.history[0]["epsilon_spent"] <= 1e4 * (1 + 1e-6)


def test_distributed_beats_local_only_and_more_privacy_costs_energy():
    sites = model_sites(10, 2000)
    A = pooled_second_moment(sites)

    def ratio(site_list, eps, variant="factor", seed=0):
        result = run_dpdis_pca(site_list, 50, policy=DPdisPCAPolicy(epsilon=eps), seed=seed,
                               variant=variant, evaluation=A)
        return result.history[0]["energy_ratio"]

    distributed = ratio(sites, 1.0)
    local_only = ratio(sites[:1], 1.0, variant="full")
    assert distributed > local_only + 0.1
    assert ratio(sites, 0.5) < distributed < ratio(sites, 2.0)
    # Sending the full matrix is at least about as good as the factors (the slides' cost).
    assert ratio(sites, 1.0, variant="full") > distributed - 0.02


def test_a_data_set_scenario_reads_its_shape_from_the_data_and_runs():
    scenario = DPdisPCAScenario.for_dataset("digits", sites=3, k=5, epsilon=1e4, seed=1,
                                            alpha=0.5)
    assert (scenario.dim, scenario.samples, scenario.resolved_r) == (64, 1797, 10)
    sites = scenario.all_prepared_sites()
    sizes = [s.X.shape[0] for s in sites]
    assert sum(sizes) == 1797 and len(set(sizes)) > 1  # Dirichlet label skew: unequal sites
    result = run_dpdis_pca(sites, 5, policy=scenario.policy(), seed=1, weighting="samples",
                           evaluation=scenario.evaluation())
    assert result.history[0]["energy_ratio"] > 0.99
    assert scenario.privacy()["smallest_site"] == min(sizes)
    with pytest.raises(InvalidDataError, match="for_dataset"):
        DPdisPCAScenario(dataset="digits", sites=2, dim=20, samples=100, k=2).prepared_site(0)


def test_policy_and_calibration_agree():
    assert POLICY.calibration() == calibrate_gaussian(1, 1.0, 1e-5)
    with pytest.raises(ConfigurationError, match="clip_norm"):
        DPdisPCAPolicy(clip_norm=0.0)
    with pytest.raises(ConfigurationError, match="accounting must be one of"):
        DPdisPCAPolicy(accounting="moments")

"""The central estimators on centred (standardised) rows (issue 23 item 3): MOD-SuLQ and
PPCA after the curator's moments release recover the non-private centred PCA at a huge
epsilon; their budget split composes to the target by basic composition, and the ledger
holds what it can account for; refusals come before anything is charged. The estimators'
``centring``: ``transform`` centres and scales with the released ``mean_`` and ``scale_``;
clear refusals."""

import numpy as np
import pytest

from fedpca.algorithms.centred_run import run_centred_pca
from fedpca.algorithms.centring import CentredPolicy
from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.estimators import PPCA, AnalyzeGaussPCA, ModSulqPCA, NonPrivatePCA
from fedpca.linalg.subspace import subspace_distance
from fedpca.dp.budget_split import gaussian_epsilon
from fedpca.dp.calibration import pld_epsilon
from test_centring import BOUNDS, COLUMNS, ROWS, centred_reference, contract_rows

HUGE_ROWS = contract_rows(4000, seed=1)[0]


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("method", ["mod-sulq", "ppca"])
def test_at_a_huge_epsilon_the_central_run_recovers_the_centred_pca(standardize, method):
    mean, scale, basis, spectrum = centred_reference(HUGE_ROWS, standardize, 1)
    clip = 1.5 * np.linalg.norm((HUGE_ROWS - mean) / scale, axis=1).max()  # clips nothing
    policy = CentredPolicy(epsilon=1e4, standardize=standardize, clip_norm=clip)
    result = run_centred_pca(np.array_split(HUGE_ROWS, 3), BOUNDS, 1, policy, method,
                             columns=COLUMNS, seed=3)
    assert result.algorithm == method and result.columns == list(COLUMNS)
    assert result.mean == pytest.approx(mean, abs=1e-3 * max(BOUNDS.widths))
    assert result.scale == pytest.approx(scale, rel=1e-2)
    assert subspace_distance(result.basis, basis) < 1e-2
    assert result.config["clipped_rows"] == 0
    if method == "mod-sulq":  # its noisy matrix explains the variance; PPCA's frame does not
        assert result.explained_variance == pytest.approx(spectrum[:1], rel=1e-2)
    else:
        assert result.explained_variance is None
    scores = result.transform(HUGE_ROWS[:5])
    assert scores == pytest.approx((HUGE_ROWS[:5] - result.mean) / result.scale @ result.basis)


@pytest.mark.parametrize("method, moments_delta", [("ppca", 1e-6), ("mod-sulq", 5e-7)])
@pytest.mark.parametrize("standardize", [False, True])
def test_the_basic_split_composes_to_the_target(method, moments_delta, standardize):
    policy = CentredPolicy(epsilon=2.0, delta=1e-6, standardize=standardize)
    result = run_centred_pca(np.array_split(ROWS, 2), BOUNDS, 2, policy, method, seed=5)
    record = result.privacy
    assert record["moments_epsilon"] + record["algorithm_epsilon"] == pytest.approx(2.0)
    assert record["moments_delta"] + record["algorithm_delta"] == pytest.approx(1e-6)
    assert record["moments_delta"] == pytest.approx(moments_delta)
    assert result.config["epsilon_spent"] == pytest.approx(2.0)
    # the moments keep the Gaussian split's multiplier, and it meets its part alone
    z_m = policy.split().moments_multiplier
    assert record["moments_noise_multiplier"] == z_m
    assert gaussian_epsilon(z_m, 1, moments_delta) == pytest.approx(record["moments_epsilon"])
    assert pld_epsilon((z_m,), moments_delta) <= record["moments_epsilon"] * 1.01
    assert 0 < record["algorithm_epsilon"] < 2.0


def test_the_curators_ledger_holds_its_gaussian_releases_within_the_budget():
    """MOD-SuLQ's release is a Gaussian at sensitivity sqrt(2) C^2 / n: the ledger composes
    it with the moments exactly, below the basic composition's epsilon (the paper's beta is
    conservative). PPCA's pure part is not a Gaussian: the ledger holds the moments only."""
    policy = CentredPolicy(epsilon=1.0)
    z_m = policy.split().moments_multiplier
    mod_sulq = run_centred_pca([ROWS], BOUNDS, 2, policy, "mod-sulq", seed=5)
    ppca = run_centred_pca([ROWS], BOUNDS, 2, policy, "ppca", seed=5)
    record = mod_sulq.privacy
    z_a = record["algorithm"]["noise_multiplier"]
    assert mod_sulq.config["epsilon_ledger"] == pytest.approx(pld_epsilon((z_m, z_a), 1e-5))
    assert mod_sulq.config["epsilon_ledger"] < 1.0
    assert ppca.config["epsilon_ledger"] == pytest.approx(pld_epsilon((z_m,), 1e-5))
    assert ppca.privacy["algorithm"]["delta"] == 0.0


def test_a_share_that_leaves_the_algorithm_nothing_is_refused():
    policy = CentredPolicy(epsilon=1.0, moments_share=0.99)
    with pytest.raises(ConfigurationError, match="leaves the algorithm nothing"):
        run_centred_pca([ROWS], BOUNDS, 1, policy, "mod-sulq")


def test_ppca_chooses_no_k_from_variance_and_its_arguments_are_checked_first():
    with pytest.raises(ConfigurationError, match="PPCA releases only the subspace"):
        run_centred_pca([ROWS], BOUNDS, 2, CentredPolicy(), "ppca", variance=0.9)
    with pytest.raises(ConfigurationError, match="burn_in"):
        run_centred_pca([ROWS], BOUNDS, 2, CentredPolicy(), "ppca", burn_in=-1)
    with pytest.raises(ConfigurationError, match="exceed"):
        run_centred_pca([ROWS], BOUNDS, BOUNDS.dim + 1, CentredPolicy(), "mod-sulq")


ESTIMATORS = [AnalyzeGaussPCA, ModSulqPCA, PPCA]


@pytest.mark.parametrize("centring, standardize", [("centre", False), ("standardize", True)])
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_centred_estimator_transforms_with_its_released_mean_and_scale(
        estimator, centring, standardize):
    mean, scale, basis, _ = centred_reference(HUGE_ROWS, standardize, 1)
    clip = 1.5 * np.linalg.norm((HUGE_ROWS - mean) / scale, axis=1).max()
    est = estimator(1, epsilon=1e4, data_norm=clip, random_state=2, centring=centring,
                    bounds=BOUNDS).fit(HUGE_ROWS)
    assert est.mean_ == pytest.approx(mean, abs=1e-3 * max(BOUNDS.widths))
    assert est.scale_ == pytest.approx(scale, rel=1e-2)
    assert subspace_distance(est.components_.T, basis) < 1e-2
    assert est.result_.privacy["epsilon"] == 1e4
    expected = (ROWS[:7] - est.mean_) / est.scale_ @ est.components_.T
    np.testing.assert_allclose(est.transform(ROWS[:7]), expected, rtol=1e-12, atol=1e-12)
    refit = est.set_params(centring=None, bounds=None, data_norm=None).fit(ROWS)
    with pytest.raises(AttributeError, match="fitted without centring"):
        refit.mean_  # noqa: B018 - the attribute access is the test


@pytest.mark.parametrize("standardize", [False, True])
def test_the_non_private_estimator_centres_with_the_exact_mean_and_scale(standardize):
    mean, scale, basis, spectrum = centred_reference(ROWS, standardize, 2)
    est = NonPrivatePCA(2, centring="standardize" if standardize else "centre").fit(ROWS)
    np.testing.assert_allclose(est.mean_, mean)
    np.testing.assert_allclose(est.scale_, scale)
    assert subspace_distance(est.components_.T, basis) < 1e-9
    np.testing.assert_allclose(est.explained_variance_, spectrum[:2])
    np.testing.assert_allclose(est.transform(ROWS[:7]),
                               (ROWS[:7] - mean) / scale @ est.components_.T, atol=1e-12)


def test_a_centred_ppca_is_pure_but_for_its_moments_delta():
    est = PPCA(1, epsilon=2.0, centring="centre", bounds=BOUNDS, moments_delta=1e-7,
               random_state=1).fit(ROWS)
    assert est.delta == 1e-7 and PPCA(1).delta == 0.0
    record = est.result_.privacy
    assert (record["delta"], record["moments_delta"], record["algorithm_delta"]) == (1e-7, 1e-7, 0)
    assert record["moments_epsilon"] + record["algorithm_epsilon"] == pytest.approx(2.0)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_centring_refusals_say_what_to_pass(estimator):
    with pytest.raises(ConfigurationError, match="needs bounds=.*Contract.bounds"):
        estimator(1, centring="centre").fit(ROWS)
    with pytest.raises(InvalidDataError, match=f"X has 3 columns but the bounds describe "
                                               f"{BOUNDS.dim}"):
        estimator(1, centring="standardize", bounds=BOUNDS).fit(ROWS[:, :3])
    with pytest.raises(ConfigurationError, match=r"centring must be None \(second-moment "):
        estimator(1, centring="center", bounds=BOUNDS).fit(ROWS)
    with pytest.raises(ConfigurationError, match="bounds are used only when centring"):
        estimator(1, bounds=BOUNDS).fit(ROWS)
    with pytest.raises(InvalidDataError, match="not within the contract's bounds"):
        estimator(1, centring="centre", bounds=BOUNDS).fit(ROWS - 1.0)

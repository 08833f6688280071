"""Private centring and scaling (issue 23 item 3): the budget split meets (epsilon, delta)
with its share; the moments release has its calibrated noise; a coordinator's mean and
scale, whatever they are, leave every later release's sensitivity intact or are refused
before anything is spent; the reference run recovers the non-private centred PCA at a huge
epsilon and its explained variance is a proper ratio."""

import dataclasses
import math
import tomllib

import numpy as np
import pytest
from scipy import stats

from fedpca.algorithms.centred_run import explained_variance, run_centred_pca
from fedpca.algorithms.centring import (
    MAX_REACH,
    CentredPolicy,
    CentringSite,
    MomentsServer,
    default_clip_norm,
    moments_sum,
)
from fedpca.algorithms.dpdis_pca import DPdisPCASite, second_moment_sensitivity
from fedpca.data.contract import parse_contract
from fedpca.errors import BudgetExceededError, ConfigurationError, InvalidRequestError
from fedpca.linalg.subspace import subspace_distance
from fedpca.dp.budget_split import ALGORITHM, MOMENTS, split_budget
from fedpca.dp.calibration import pld_epsilon
from fedpca.dp.ledger import PrivacyLedger
from fedpca.dp.mechanisms import upper_triangle_sensitivity
from fedpca.dp.moments import moment_statistic
from fedpca.results import CentredPCAResult
from chi_square import ALPHA
from liver_contract import ALL_SCALED, CONTRACT, SCALED


def contract_rows(count: int, seed: int = 0) -> tuple[np.ndarray, object, tuple[str, ...]]:
    """``count`` preprocessed rows of the liver contract (bili, age, sex one-hot with its
    blank, alb and its indicator, smoker): correlated numeric columns, within its bounds."""
    contract = parse_contract(tomllib.loads(CONTRACT), "liver.toml")
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=count)
    age = np.clip(55 + 15 * latent + 5 * rng.normal(size=count), 0, 110)
    table = {
        "bili": np.exp(np.clip(0.5 * latent + rng.normal(size=count), -2, 3)),
        "age": age,
        "sex": np.array([("f", "m", None)[i] for i in rng.integers(0, 3, count)], dtype=object),
        "alb": np.where(rng.random(count) < 0.1, np.nan, np.clip(3.5 - 0.6 * latent, 1, 6)),
        "smoker": (rng.random(count) < 0.3).astype(float),
    }
    pre = contract.preprocess(table)
    return pre.matrix, contract.bounds, pre.columns


ROWS, BOUNDS, COLUMNS = contract_rows(400)


@pytest.mark.parametrize("releases, epsilon, share", [(1, 1.0, 0.1), (1, 4.0, 0.3), (3, 1.0, 0.5)])
def test_the_split_meets_epsilon_with_its_share(releases, epsilon, share):
    split = split_budget(releases, epsilon, 1e-5, share)
    z_m, z_a = split.moments_multiplier, split.algorithm_multiplier
    assert split.multipliers == (z_m,) + (z_a,) * releases
    achieved = pld_epsilon(split.multipliers, 1e-5)  # the ledger's accountant
    assert achieved == split.epsilon_achieved
    assert epsilon * (1 - 1e-3) <= achieved <= epsilon
    loss = z_m**-2 + releases * z_a**-2
    assert z_m**-2 / loss == pytest.approx(share, rel=1e-12)
    for part, z in ((MOMENTS, z_m), (ALGORITHM, z_a)):
        cal = split.part(part)
        assert cal.noise_multiplier == z and cal.epsilon < epsilon


def test_a_split_the_accountant_cannot_compose_is_refused():
    with pytest.raises(ConfigurationError, match="'pld' or 'rdp'"):
        split_budget(1, 1.0, 1e-5, 0.1, "paper")
    for share in (0.0, 1.0, 1.5):
        with pytest.raises(ConfigurationError, match="strictly between 0 and 1"):
            split_budget(1, 1.0, 1e-5, share)


def test_the_default_share_and_clip_norm_follow_the_scaling():
    centred, standard = CentredPolicy(), CentredPolicy(standardize=True)
    assert (centred.share, standard.share) == (0.1, 0.3)
    assert default_clip_norm(BOUNDS, True) == pytest.approx(math.sqrt(BOUNDS.dim))
    assert default_clip_norm(BOUNDS, False) == pytest.approx(math.sqrt(BOUNDS.variance_bound()))
    assert CentredPolicy(clip_norm=2.5).clip_norm_for(BOUNDS) == 2.5


def test_the_moments_release_has_its_calibrated_noise():
    """Chi-square on the variance of (released - statistic) / sigma over many sites' single
    releases, sigma the split's moments multiplier times the width-unit sensitivity; the
    ledger charges that sigma."""
    policy = CentredPolicy(epsilon=1.0, standardize=True)
    rows = ROWS[:30]
    statistic = moment_statistic(rows / np.asarray(BOUNDS.widths), True)
    sigma = policy.split().moments_multiplier * BOUNDS.unit().moments_sensitivity(True)
    trials, errors = 250, []
    for seed in range(trials):
        site = CentringSite(rows, BOUNDS, policy, site="a", seed=seed)
        errors.append((site.release_moments() - statistic) / sigma)
        assert site.ledger.releases[-1].sigma == pytest.approx(sigma, rel=1e-12)
    errors = np.asarray(errors)
    assert errors.shape == (trials, 2 * BOUNDS.dim)
    statistic_value, dof = float(np.sum(errors**2)), errors.size
    p = 2 * min(stats.chi2.cdf(statistic_value, dof), stats.chi2.sf(statistic_value, dof))
    assert p > ALPHA
    assert abs(errors.mean()) < 5 / math.sqrt(errors.size)


def released_site(policy: CentredPolicy, rows: np.ndarray = ROWS) -> CentringSite:
    """A site that has made its moments release."""
    site = CentringSite(rows, BOUNDS, policy, site="a", seed=1)
    MomentsServer(BOUNDS, policy.standardize).receive([site.answer(site.release_moments())])
    return site


D = BOUNDS.dim
HOSTILE = {
    "far mean": (np.full(D, 1e6), np.ones(D)),
    "tiny scale": (np.zeros(D), np.full(D, 1e-9)),
    "one record singled out": (ROWS[7], np.full(D, 1e-3)),
    "negative mean, mixed scales": (-np.arange(D, dtype=float), np.geomspace(1e-6, 1e6, D)),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_mean_and_scale_leave_later_sensitivities_intact(name):
    mean, scale = HOSTILE[name]
    policy = CentredPolicy(epsilon=1.0, standardize=True, clip_norm=2.0)
    site = released_site(policy)
    data = site.centre(mean, scale)
    norms = np.linalg.norm(data.X, axis=1)
    assert norms.max() <= 2.0 * (1 + 1e-12)
    # replace-one: a neighbour's extreme record, centred the same way, moves the upper
    # triangle of X^T X / n by at most sqrt(2) C^2 / n
    neighbour = site.bounds.widths * (np.arange(D) % 2)
    neighbour[[2, 3, 4]] = (0.0, 0.0, 1.0)  # the sex group: its blank level
    other = CentringSite(np.vstack([neighbour, ROWS[1:]]), BOUNDS, policy, site="b").centre(
        mean, scale).X
    upper = np.triu_indices(D)
    moved = (data.X.T @ data.X - other.T @ other)[upper] / len(ROWS)
    assert np.linalg.norm(moved) <= second_moment_sensitivity(2.0, len(ROWS)) * (1 + 1e-9)
    # the algorithm's release is charged at the policy's sensitivity and multiplier
    dpdis = site.algorithm_site(DPdisPCASite, mean, scale)
    dpdis.release("full")
    charged = site.ledger.releases[-1]
    assert charged.sensitivity == pytest.approx(upper_triangle_sensitivity(2.0) / len(ROWS))
    assert charged.noise_multiplier == pytest.approx(policy.split().algorithm_multiplier)
    assert site.ledger.epsilon_spent() <= policy.epsilon


@pytest.mark.parametrize("mean, scale, says", [
    (np.full(D, np.nan), np.ones(D), "finite"),
    (np.zeros(D), np.full(D, np.inf), "finite"),
    (np.zeros(D), np.zeros(D), "> 0"),
    (np.zeros(D), -np.ones(D), "> 0"),
    (np.zeros(D + 1), np.ones(D + 1), "shape"),
    (np.zeros((D, 1)), np.ones(D), "shape"),
    (["a"] * D, np.ones(D), "numbers"),
    (np.full(D, 1e200), np.ones(D), "beyond"),
    (np.zeros(D), np.full(D, 1e-160), "beyond"),
])
def test_a_mean_and_scale_a_site_cannot_use_are_refused_before_anything_is_spent(
        mean, scale, says):
    site = released_site(CentredPolicy(epsilon=1.0, standardize=True))
    with pytest.raises(InvalidRequestError, match=says):
        site.algorithm_site(DPdisPCASite, mean, scale)
    assert site.ledger.count == 1  # the moments only
    assert MAX_REACH < 1e154  # its squares stay finite in float64


def test_exact_noise_releases_grid_points_and_the_run_stays_within_its_budget():
    policy = CentredPolicy(epsilon=1.0, standardize=True, noise_sampler="exact")
    site = released_site(policy)
    moments = site.ledger.releases[0]
    assert moments.discrete and moments.summands == 1  # a discrete Gaussian, charged so
    dpdis = site.algorithm_site(DPdisPCASite, ROWS.mean(axis=0), ROWS.std(axis=0))
    dpdis.release("full")
    assert site.ledger.count == 2 and site.ledger.epsilon_spent() <= 1.0


def test_a_run_the_site_cannot_finish_is_refused_before_its_moments():
    policy = CentredPolicy(epsilon=1.0)
    small = PrivacyLedger(0.5, 1e-5, site="a")
    site = CentringSite(ROWS, BOUNDS, policy, site="a", ledger=small)
    with pytest.raises(BudgetExceededError):
        site.release_moments()
    assert small.count == 0


def test_rows_outside_the_contract_bounds_are_refused():
    bad = ROWS.copy()
    bad[0, 1] = BOUNDS.widths[1] * 2
    with pytest.raises(ValueError, match="within the contract's bounds"):
        CentringSite(bad, BOUNDS, CentredPolicy())


def centred_reference(rows: np.ndarray, standardize: bool, k: int) -> tuple[np.ndarray, ...]:
    """The non-private centred (standardised) PCA of ``rows``: mean, scale, basis, variances
    per record (the spectrum of ``Xc^T Xc / n``)."""
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0) if standardize else np.ones(rows.shape[1])
    centred = (rows - mean) / scale
    values, vectors = np.linalg.eigh(centred.T @ centred / len(rows))
    return mean, scale, vectors[:, ::-1][:, :k], values[::-1]


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("method, variant", [("analyze-gauss", "factor"), ("dpdis-pca", "full")])
def test_at_a_huge_epsilon_the_run_recovers_the_centred_pca(standardize, method, variant):
    """k = 1: the table's second and third variances are too close to tell apart."""
    rows = contract_rows(4000, seed=1)[0]
    mean, scale, basis, spectrum = centred_reference(rows, standardize, 1)
    clip = 1.5 * np.linalg.norm((rows - mean) / scale, axis=1).max()  # clips nothing
    policy = CentredPolicy(epsilon=1e4, standardize=standardize, clip_norm=clip)
    result = run_centred_pca(np.array_split(rows, 4), BOUNDS, 1, policy, method, variant,
                             COLUMNS, seed=3)
    assert result.columns == list(COLUMNS)
    assert result.mean == pytest.approx(mean, abs=1e-3 * max(BOUNDS.widths))
    assert result.scale == pytest.approx(scale, rel=1e-2)
    assert subspace_distance(result.basis, basis) < 1e-2
    assert result.config["clipped_rows"] == 0
    assert result.config["epsilon_spent"] <= 1e4
    ratio = spectrum[:1] / spectrum.sum()  # both have the whole noisy matrix
    assert result.explained_variance == pytest.approx(spectrum[:1], rel=1e-2)
    assert result.explained_variance_ratio == pytest.approx(ratio, rel=1e-2)
    scores = result.transform(rows[:5])
    assert scores == pytest.approx((rows[:5] - result.mean) / result.scale @ result.basis)


def test_the_secure_sum_run_spends_within_its_budget_and_explains_variance():
    policy = CentredPolicy(epsilon=2.0, standardize=True, secure_min_sites=4, discrete=True)
    result = run_centred_pca(np.array_split(ROWS, 4), BOUNDS, 3, policy, "dpdis-pca",
                             "secure-sum", COLUMNS, seed=5)
    assert result.config["epsilon_spent"] <= 2.0
    assert result.privacy["epsilon_worst_case"] > 2.0  # a site's own share alone
    ratio = result.explained_variance_ratio
    assert np.all((ratio >= 0) & (ratio <= 1)) and ratio.sum() <= 1
    assert np.all(np.diff(result.explained_variance) <= 0)


def test_the_factor_variant_has_no_ratio_and_says_so(tmp_path):
    result = run_centred_pca(np.array_split(ROWS, 2), BOUNDS, 2, CentredPolicy(), seed=1)
    assert result.explained_variance_ratio is None
    with pytest.raises(AttributeError, match="no whole noisy matrix"):
        result.explained_variance_ratio_
    result.save(tmp_path / "r.json")
    loaded = CentredPCAResult.load(tmp_path / "r.json")
    assert loaded.mean == pytest.approx(result.mean) and loaded.columns is None
    assert loaded.transform(ROWS[:3]) == pytest.approx(result.transform(ROWS[:3]))


def test_explained_variance_clamps_negative_eigenvalues_and_sums_to_at_most_one():
    values, ratio = explained_variance(np.array([3.0, 1.0, -0.5, -2.0]), 3, whole=True)
    assert values.tolist() == [3.0, 1.0, 0.0]
    assert ratio.tolist() == [0.75, 0.25, 0.0]
    assert explained_variance(np.array([-1.0, -2.0]), 1, whole=True)[1] is None
    assert explained_variance(np.array([2.0, 1.0]), 1, whole=False)[1] is None


# --- public scales (issue 32) ----------------------------------------------------------------

def scaled_rows(text: str, count: int = 400) -> tuple[np.ndarray, object]:
    """:func:`contract_rows`' table preprocessed by the contract ``text`` (public scales)."""
    contract = parse_contract(tomllib.loads(text), "liver.toml")
    rng = np.random.default_rng(0)
    table = {"bili": np.exp(rng.normal(0, 1, count)), "age": rng.uniform(20, 90, count),
             "sex": np.array([("f", "m", None)[i] for i in rng.integers(0, 3, count)],
                             dtype=object),
             "alb": np.where(rng.random(count) < 0.1, np.nan, rng.uniform(2, 5, count)),
             "smoker": (rng.random(count) < 0.3).astype(float)}
    return contract.preprocess(table).matrix, contract.bounds


SCALED_ROWS, SCALED_BOUNDS = scaled_rows(SCALED)
ALL_ROWS, ALL_BOUNDS = scaled_rows(ALL_SCALED)


def test_with_every_scale_public_standardising_takes_the_centring_share_and_statistic():
    policy = CentredPolicy(epsilon=1.0, standardize=True, public_scales=True)
    assert policy.share == CentredPolicy().share == 0.1
    assert CentredPolicy(standardize=True, public_scales=True, moments_share=0.4).share == 0.4
    site = CentringSite(ALL_ROWS, ALL_BOUNDS, policy, site="a", seed=2)
    released = site.release_moments()
    assert released.shape == (ALL_BOUNDS.dim,)  # the sums only: no variance is released
    charged = site.ledger.releases[0]
    assert charged.sensitivity == pytest.approx(ALL_BOUNDS.unit().sum_sensitivity())
    moments = MomentsServer(ALL_BOUNDS, True).receive([site.answer(released)])
    assert moments.scale.tolist() == [0.9, 27.5, 0.5, 0.5, 0.2, 0.6, 0.45]  # as stated
    assert moments.floored_variances == ()


def test_a_policy_whose_public_scales_are_not_the_contracts_is_refused():
    for bounds, public in ((ALL_BOUNDS, False), (SCALED_BOUNDS, True), (BOUNDS, True)):
        policy = CentredPolicy(standardize=True, public_scales=public)
        with pytest.raises(ConfigurationError, match="public_scales=bounds.all_public"):
            CentringSite(ALL_ROWS if bounds is ALL_BOUNDS else ROWS[:, :bounds.dim], bounds,
                         policy)
    CentringSite(ALL_ROWS, ALL_BOUNDS, CentredPolicy(public_scales=False))  # centring only


def test_the_moments_release_with_some_public_scales_has_its_calibrated_noise():
    """As above, for a contract whose squares are released for alb and its indicator only:
    the statistic has d + 2 entries and the noise the sensitivity of what is released."""
    policy = CentredPolicy(epsilon=1.0, standardize=True)
    rows = SCALED_ROWS[:30]
    unit = SCALED_BOUNDS.unit()
    statistic = moment_statistic(rows / np.asarray(SCALED_BOUNDS.widths), True, unit.squared())
    assert statistic.shape == (SCALED_BOUNDS.dim + 2,)
    sigma = policy.split().moments_multiplier * unit.moments_sensitivity(True)
    assert unit.moments_sensitivity(True) < BOUNDS.unit().moments_sensitivity(True)
    errors = []
    for seed in range(250):
        site = CentringSite(rows, SCALED_BOUNDS, policy, site="a", seed=seed)
        errors.append((site.release_moments() - statistic) / sigma)
        assert site.ledger.releases[-1].sigma == pytest.approx(sigma, rel=1e-12)
    errors = np.asarray(errors)
    value, dof = float(np.sum(errors**2)), errors.size
    assert 2 * min(stats.chi2.cdf(value, dof), stats.chi2.sf(value, dof)) > ALPHA


@pytest.mark.parametrize("rows, bounds, public", [(SCALED_ROWS, SCALED_BOUNDS, False),
                                                  (ALL_ROWS, ALL_BOUNDS, True)])
def test_the_secure_sum_has_the_released_statistics_dimension_at_site_and_server(
        rows, bounds, public):
    policy = CentredPolicy(epsilon=2.0, standardize=True, secure_min_sites=4, discrete=True,
                           public_scales=public)
    secure, _ = moments_sum(policy, bounds, 200, 4, rotation_seed=3)
    assert secure.dimension == bounds.statistic_dim(True) == bounds.dim + len(bounds.squared())
    result = run_centred_pca(np.array_split(rows, 4), bounds, 2, policy, "dpdis-pca",
                             "secure-sum", seed=5)
    for j in bounds.public:
        assert result.scale[j] == bounds.scales[j]
    assert set(result.config["floored_variances"]) <= set(bounds.squared())
    assert result.config["epsilon_spent"] <= 2.0
    assert result.privacy["public_scales"] == list(bounds.public)
    # a coordinator that describes the sum of a statistic of another length is refused
    wrong = dataclasses.replace(secure, dimension=2 * bounds.dim)
    site = CentringSite(rows[:100], bounds, policy, site="a", seed=1)
    with pytest.raises(InvalidRequestError):
        site.release_moments(wrong)
    assert site.ledger.count == 0


def test_a_ratio_over_floored_scales_is_flagged():
    """At eps 0.05 on 400 rows the private variances of several columns sit at the floor:
    the ratio over their total is flagged; public scales are never floored."""
    private = run_centred_pca(np.array_split(ROWS, 2), BOUNDS, 2,
                              CentredPolicy(epsilon=0.05, standardize=True), "analyze-gauss",
                              seed=4)
    assert private.floored_scales and private.explained_variance_ratio_floored
    public = run_centred_pca(np.array_split(ALL_ROWS, 2), ALL_BOUNDS, 2,
                             CentredPolicy(epsilon=0.05, standardize=True, public_scales=True),
                             "analyze-gauss", seed=4)
    assert public.floored_scales == [] and not public.explained_variance_ratio_floored
    assert public.explained_variance_ratio is not None
    centred = run_centred_pca(np.array_split(ROWS, 2), BOUNDS, 2, CentredPolicy(epsilon=0.05),
                              "analyze-gauss", seed=4)
    assert not centred.explained_variance_ratio_floored


def test_an_estimator_standardises_with_the_contracts_public_scales():
    from fedpca.estimators import AnalyzeGaussPCA

    est = AnalyzeGaussPCA(n_components=2, epsilon=1.0, centring="standardize",
                          bounds=ALL_BOUNDS, random_state=3).fit(ALL_ROWS)
    assert est.scale_.tolist() == [s for s in ALL_BOUNDS.scales]
    assert est.result_.privacy["moments_share"] == 0.1  # no squares: the centring share

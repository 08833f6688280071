"""Private column means and scales (fedpca.dp.moments): the sensitivities hold against
an adversarial search and are attained; the post-processing clamps what noise pushes out of
the public bounds and says so; a federation's noisy means have the calibrated variance."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from fedpca.errors import ConfigurationError
from fedpca.dp.moments import (
    ColumnBounds,
    column_moments,
    extreme_pair,
    moment_statistic,
)
from chi_square import ALPHA

#: Three free columns of unequal widths and two one-hot groups (3 and 2 levels).
BOUNDS = ColumnBounds(widths=(4.0, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0),
                      groups=((3, 4, 5), (6, 7)))


def random_records(bounds: ColumnBounds, count: int, rng: np.random.Generator,
                   corners: bool) -> np.ndarray:
    """Records within ``bounds``: free columns uniform in ``[0, w_j]`` (or at its ends with
    ``corners``), one random level per group."""
    widths = np.asarray(bounds.widths)
    rows = rng.uniform(0.0, 1.0, (count, bounds.dim))
    rows = (rows > 0.5) * widths if corners else rows * widths
    for group in bounds.groups:
        rows[:, list(group)] = 0.0
        rows[np.arange(count), rng.choice(group, count)] = 1.0
    return rows


def every_corner(bounds: ColumnBounds) -> np.ndarray:
    """Every record at a corner of ``bounds``: each free column at 0 or ``w_j``, one level
    per one-hot group."""
    grouped = {j for group in bounds.groups for j in group}
    free = [j for j in range(bounds.dim) if j not in grouped]
    rows = []
    for ends in itertools.product((0.0, 1.0), repeat=len(free)):
        for levels in itertools.product(*bounds.groups):
            row = np.zeros(bounds.dim)
            row[free] = np.asarray(ends) * np.asarray(bounds.widths)[free]
            row[list(levels)] = 1.0
            rows.append(row)
    return np.array(rows)


def worst_move(bounds: ColumnBounds, standardize: bool, seed: int) -> float:
    """The largest move of the released statistic (its squares of the squared columns only)
    an adversarial search finds: random and corner records, then every pair of corner
    records, where the largest move lies (each coordinate of ``x - y`` and ``x^2 - y^2``
    moves furthest with ``x`` and ``y`` at its ends)."""
    rng, squared = np.random.default_rng(seed), bounds.squared()

    def moved(x: np.ndarray, y: np.ndarray) -> float:
        assert bounds.contains(x) and bounds.contains(y)
        change = (moment_statistic(x[:, None, :], standardize, squared)
                  - moment_statistic(y[:, None, :], standardize, squared))
        assert change.shape == (len(x), bounds.statistic_dim(standardize))
        return float(np.max(np.linalg.norm(change, axis=1)))

    searched = [moved(random_records(bounds, 20_000, rng, corners),
                      random_records(bounds, 20_000, rng, corners)) for corners in (False, True)]
    corners = every_corner(bounds)
    i, j = (index.ravel() for index in np.meshgrid(*[np.arange(len(corners))] * 2))
    return max(*searched, moved(corners[i], corners[j]))


def attained(bounds: ColumnBounds, standardize: bool) -> float:
    """How far :func:`extreme_pair` moves the released statistic."""
    x, y = extreme_pair(bounds)
    assert bounds.contains(x) and bounds.contains(y)
    squared = bounds.squared()
    return float(np.linalg.norm(moment_statistic(x[None], standardize, squared)
                                - moment_statistic(y[None], standardize, squared)))


@pytest.mark.parametrize("standardize", [False, True])
def test_the_sensitivity_holds_against_a_search_and_is_attained(standardize):
    bound = BOUNDS.moments_sensitivity(standardize)
    assert worst_move(BOUNDS, standardize, seed=5) == pytest.approx(bound, rel=1e-12)
    assert attained(BOUNDS, standardize) == pytest.approx(bound, rel=1e-12)


def test_a_one_hot_group_counts_sqrt_2_once_whatever_its_levels():
    few = ColumnBounds(widths=(1.0, 1.0), groups=((0, 1),))
    many = ColumnBounds(widths=(1.0,) * 40, groups=(tuple(range(40)),))
    assert few.sum_sensitivity() == many.sum_sensitivity() == pytest.approx(math.sqrt(2))
    free = ColumnBounds(widths=(3.0, 4.0))
    assert free.sum_sensitivity() == pytest.approx(5.0)
    assert free.square_sum_sensitivity() == pytest.approx(math.hypot(9.0, 16.0))


def test_the_federations_noisy_means_have_the_calibrated_variance():
    """Sites add N(0, sigma^2) to their sums; the released mean's error is the sum of the
    sites' noise over N: variance sites * sigma^2 / N^2 per column (chi-square on the
    variance, many independent federations)."""
    rng = np.random.default_rng(11)
    sites, per_site, trials = 4, 50, 4000
    sigma = 3.0 * BOUNDS.sum_sensitivity()
    records = random_records(BOUNDS, sites * per_site, rng, corners=False)
    true_mean = records.mean(axis=0)
    shares = np.array_split(records, sites)
    errors = np.empty((trials, BOUNDS.dim))
    for t in range(trials):
        total = sum(moment_statistic(s, False) + rng.normal(0.0, sigma, BOUNDS.dim)
                    for s in shares)
        errors[t] = total / records.shape[0] - true_mean
    expected = sites * sigma**2 / records.shape[0] ** 2
    statistic = np.sum(errors**2) / expected
    dof = errors.size
    p = 2 * min(stats.chi2.cdf(statistic, dof), stats.chi2.sf(statistic, dof))
    assert p > ALPHA


def test_noise_outside_the_public_bounds_is_clamped_and_reported():
    bounds = ColumnBounds(widths=(2.0, 10.0, 1.0))
    records = 100
    sums = np.array([-5.0, 400.0, 150.0])  # means -0.05, 4.0, 1.5
    squares = np.array([0.5, 1700.0, 50.0])  # variances (clamped means): 0.005, 1.0, -0.5
    moments = column_moments(np.concatenate([sums, squares]), records, bounds, True, floor=0.01)
    assert moments.mean.tolist() == [0.0, 4.0, 1.0]
    assert moments.clamped_means == (0, 2)
    assert moments.floored_variances == (0, 2)
    assert moments.scale == pytest.approx([0.1, 1.0, 0.1])
    assert np.all(moments.scale <= np.asarray(bounds.widths) / 2)
    centred = column_moments(sums, records, bounds, False)
    assert centred.scale.tolist() == [1.0, 1.0, 1.0]
    assert centred.transform(np.array([1.0, 4.0, 1.0])) == pytest.approx([1.0, 0.0, 0.0])


def test_the_box_norm_bounds_every_transformed_record():
    rng = np.random.default_rng(2)
    records = random_records(BOUNDS, 5000, rng, corners=True)
    noisy = moment_statistic(records, True) + rng.normal(0, 20.0, 2 * BOUNDS.dim)
    moments = column_moments(noisy, records.shape[0], BOUNDS, True)
    norms = np.linalg.norm(moments.transform(records), axis=1)
    assert norms.max() <= moments.box_norm(BOUNDS) * (1 + 1e-12)


@pytest.mark.parametrize("widths, groups, says", [
    ((1.0, 0.0), (), "finite and > 0"),
    ((1.0, math.inf), (), "finite and > 0"),
    ((1.0, 1.0, 1.0), ((0, 1), (1, 2)), "in two one-hot groups"),
    ((1.0, 1.0), ((0, 5),), "at least 2 of the 2"),
    ((2.0, 1.0), ((0, 1),), "width 1"),
])
def test_bad_bounds_are_refused(widths, groups, says):
    with pytest.raises(ConfigurationError, match=says):
        ColumnBounds(widths=widths, groups=groups)


def test_bad_released_moments_are_refused():
    with pytest.raises(ConfigurationError, match="6 finite values"):
        column_moments(np.zeros(3), 10, ColumnBounds((1.0, 1.0, 1.0)), True)
    with pytest.raises(ConfigurationError, match="finite"):
        column_moments(np.array([np.nan, 1.0]), 10, ColumnBounds((1.0, 1.0)), False)
    with pytest.raises(ConfigurationError, match="at least one record"):
        column_moments(np.zeros(2), 0, ColumnBounds((1.0, 1.0)), False)


# --- public scales ---------------------------------------------------------------------------

#: :data:`BOUNDS` with public scales for free columns 0 and 2 and the 3-level group: the
#: squares of columns 1 and the 2-level group only are released.
PUBLIC = ColumnBounds(widths=BOUNDS.widths, groups=BOUNDS.groups,
                      scales=(1.0, None, 0.4, 0.3, 0.5, 0.2, None, None))
#: Every scale public: the standardised release is the centring one.
ALL_PUBLIC = ColumnBounds(widths=BOUNDS.widths, groups=BOUNDS.groups,
                          scales=(1.0, 0.1, 0.4, 0.3, 0.5, 0.2, 0.5, 0.5))


@pytest.mark.parametrize("bounds", [PUBLIC, ALL_PUBLIC], ids=["some public", "all public"])
def test_with_public_scales_the_sensitivity_of_what_is_released_holds_and_is_attained(bounds):
    """Only the squares of the columns without a public scale are released: an adversarial
    search (random and corner records, then every pair of corner records) never moves the
    statistic further than the bound, and the extreme pair reaches it."""
    assert bounds.squared() == ((1, 6, 7) if bounds is PUBLIC else ())
    bound = bounds.moments_sensitivity(True)
    assert bound < BOUNDS.moments_sensitivity(True)
    assert worst_move(bounds, True, seed=8) == pytest.approx(bound, rel=1e-12)
    assert attained(bounds, True) == pytest.approx(bound, rel=1e-12)
    # column 1 (width 0.5) is the only free squared column, plus one squared group
    expected = math.sqrt(0.5**4 + 2) if bounds is PUBLIC else 0.0
    assert bounds.square_sum_sensitivity() == pytest.approx(expected)
    if bounds is ALL_PUBLIC:  # no squares: the centring statistic and its sensitivity
        assert bound == bounds.sum_sensitivity() == BOUNDS.sum_sensitivity()
        assert bounds.statistic_dim(True) == bounds.dim
        assert bounds.record_norm(True) == bounds.row_norm()


def test_public_scales_are_used_as_stated_and_never_floored():
    records = 100
    sums = np.array([150.0, 30.0, 40.0, 20.0, 30.0, 50.0, 60.0, 40.0])
    squares = np.array([0.05 * records, 50.0, 40.0])  # columns 1, 6, 7
    moments = column_moments(np.concatenate([sums, squares]), records, PUBLIC, True,
                             floor=0.01)
    assert moments.public_scales == (0, 2, 3, 4, 5)
    np.testing.assert_array_equal(moments.scale[[0, 2, 3, 4, 5]], [1.0, 0.4, 0.3, 0.5, 0.2])
    # column 1: 0.05 - 0.3^2 < 0, floored; the 2-level group: 0.5 - 0.6^2, 0.4 - 0.4^2
    assert moments.floored_variances == (1,)
    assert moments.scale[[1, 6, 7]] == pytest.approx([0.1, math.sqrt(0.14), math.sqrt(0.24)])
    with pytest.raises(ConfigurationError, match="11 finite values"):
        column_moments(np.zeros(2 * PUBLIC.dim), records, PUBLIC, True)
    assert column_moments(sums, records, ALL_PUBLIC, True).floored_variances == ()


def test_public_scales_travel_through_width_units_exactly():
    widths = (3.7, 0.3, 1.0)
    bounds = ColumnBounds(widths=widths, scales=(0.9, None, 0.5))
    unit = bounds.unit()
    assert unit.widths == (1.0, 1.0, 1.0) and unit.scales[0] == pytest.approx(0.9 / 3.7)
    noisy = np.array([1.0, 0.5, 0.5, 0.5])  # sums in width units, the square of column 1
    moments = column_moments(noisy, 2, unit, True).rescaled(bounds)
    assert moments.scale[0] == 0.9 and moments.scale[2] == 0.5  # exactly as stated
    assert moments.scale[1] == pytest.approx(math.sqrt(0.5 / 2 - 0.25**2) * 0.3)
    assert moments.mean == pytest.approx(np.array([0.5, 0.25, 0.25]) * widths)


@pytest.mark.parametrize("scales, says", [
    ((1.0, None), "2 public scales for 3 columns"),
    ((3.0, None, None), r"must lie in \[1e-06 w, w / 2\]"),
    ((0.0, None, None), r"must lie in"),
    ((math.nan, None, None), r"must lie in"),
    ((None, 0.5, None), "give every level a public scale, or none"),
])
def test_bad_public_scales_are_refused(scales, says):
    with pytest.raises(ConfigurationError, match=says):
        ColumnBounds(widths=(4.0, 1.0, 1.0), groups=((1, 2),), scales=scales)

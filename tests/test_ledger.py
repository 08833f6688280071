"""The per-site privacy ledger refuses overspending and records nothing it refused."""

import pytest

from fedpca.errors import BudgetExceededError, ConfigurationError
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.dp.ledger import PrivacyLedger
from fedpca.dp.events import Release


def release(sigma: float) -> Release:
    return Release("test/gauss", sensitivity=2**0.5, sigma=sigma, shape=(3, 2))


def test_calibrated_releases_fit_and_one_more_is_refused():
    cal = calibrate_gaussian(5, 1.0, 1e-5)
    ledger = PrivacyLedger(1.0, 1e-5, site="a")
    sigma = cal.sigma(2**0.5)
    for _ in range(5):
        ledger.charge(release(sigma))
    assert ledger.count == 5
    assert ledger.epsilon_spent() == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(BudgetExceededError,
                       match=r"the site's budget epsilon=1 \(delta=1e-05\) would be exceeded"):
        ledger.charge(release(sigma))
    assert ledger.count == 5  # nothing recorded


def test_release_cap_is_enforced_even_with_budget_left():
    ledger = PrivacyLedger(10.0, 1e-5, max_releases=2, site="b")
    ledger.charge(release(100.0))
    ledger.charge(release(100.0))
    with pytest.raises(BudgetExceededError, match="allows 2 releases"):
        ledger.charge(release(100.0))
    assert ledger.count == 2


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
def test_non_positive_or_non_finite_sigma_is_refused(sigma):
    ledger = PrivacyLedger(1.0, 1e-5)
    with pytest.raises(BudgetExceededError, match="sigma"):
        ledger.charge(release(sigma))
    assert ledger.count == 0


def test_more_noise_spends_less():
    low, high = PrivacyLedger(5.0, 1e-5), PrivacyLedger(5.0, 1e-5)
    low.charge(release(2.0))
    high.charge(release(8.0))
    assert high.epsilon_spent() < low.epsilon_spent()


def test_round_trip_through_storage():
    ledger = PrivacyLedger(3.0, 1e-5, site="c")
    ledger.charge(release(4.0))
    ledger.charge(Release("other", 1.0, 3.0, (7,)))
    copy = PrivacyLedger(3.0, 1e-5, site="c")
    copy.restore(ledger.to_dict())
    assert copy.releases == ledger.releases
    assert copy.epsilon_spent() == ledger.epsilon_spent()
    summary = copy.summary()
    assert summary["releases"] == 2 and summary["epsilon_budget"] == 3.0


def test_bad_budget_is_refused():
    with pytest.raises(ConfigurationError):
        PrivacyLedger(-1.0, 1e-5)
    with pytest.raises(ConfigurationError):
        PrivacyLedger(1.0, 0.0)
    with pytest.raises(ConfigurationError):
        PrivacyLedger(1.0, 1e-5, max_releases=0)

"""Secure releases carry two guarantees: the sum's noise (conditional on >= M honest shares
in every sum) and the site's own share alone (what a coordinator that bypasses the secure sum
sees). The ledgers record and bound both; these tests compose them by hand."""

import math
import sqlite3

import dp_accounting
import pytest
from dp_accounting import pld

from fedpca.algorithms.dps_pca import DPSPCAPolicy, privacy_record, secure_sums
from fedpca.algorithms.site import RoundsPolicy
from fedpca.errors import BudgetExceededError
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.dp.ddg_accounting import RDP_ORDERS, ddg_pld_epsilon, rdp_to_epsilon
from fedpca.dp.distributed_gaussian import calibrate_ddg
from fedpca.dp.accountant import composed_epsilon, gaussian_view, release_rdp
from fedpca.dp.ledger import PrivacyLedger
from fedpca.dp.events import Release
from fedpca.site.ledger_report import format_ledger, summarize
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.ledger_store import create_ledger
from fedpca.site.policy_template import worst_cases

DELTA = 1e-7
SENSITIVITY = math.sqrt(2.0)


def by_hand(multipliers, delta=DELTA):
    """Epsilon of composed Gaussian releases with dp-accounting's PLD accountant, directly
    (a fine grid; no fedpca code)."""
    accountant = pld.PLDAccountant(value_discretization_interval=1e-4)
    for z in multipliers:
        accountant.compose(dp_accounting.GaussianDpEvent(z))
    return accountant.get_epsilon(delta)


def secure(z, m, mechanism="dps-pca/power"):
    return Release(f"{mechanism}+secagg(m={m})", SENSITIVITY, z * SENSITIVITY, (4, 2),
                   sites_in_sum=m)


@pytest.fixture
def ledger_path(tmp_path):
    """A new, empty ledger's file."""
    create_ledger(tmp_path / "l.sqlite")
    return tmp_path / "l.sqlite"


def charge(path, releases, worst_case=100.0, run="run-1", epsilon=50.0):
    ledger = SiteLedger(path, "hospital", epsilon, DELTA, site="h",
                        worst_case_epsilon=worst_case)
    run_ledger = ledger.for_run(RunCharge(run, "dps-pca", "f" * 64, 1000))
    for release in releases:
        run_ledger.charge(release)
    return ledger


def test_own_share_is_the_sites_part_of_the_noise():
    continuous = secure(10.0, 4)
    assert continuous.own_share().sigma == pytest.approx(continuous.sigma / 2)
    assert continuous.own_share().noise_multiplier == pytest.approx(5.0)
    discrete = Release("x+ddg(m=3)", 50.0, math.sqrt(3 * 2 * 400.0), (64,), 6, 64, 3)
    share = discrete.own_share()
    assert (share.summands, share.padded, share.sites_in_sum) == (2, 64, 0)
    assert share.sigma**2 == pytest.approx(2 * 400.0)
    plain = Release("x", 1.0, 3.0, (2,))
    assert plain.own_share() is plain
    with pytest.raises(ValueError, match="not shared by 4 sites"):
        Release("x", 1.0, 3.0, (2,), 6, 8, 4)


def test_the_lifetime_ledger_composes_both_guarantees_as_by_hand(ledger_path):
    # Two runs of continuous secure releases (M=3 and M=10) and per-site ones in between.
    releases = [secure(6.0, 3)] * 4 + [Release("ldp", SENSITIVITY, 9 * SENSITIVITY, (3, 3))]
    ledger = charge(ledger_path, releases)
    charge(ledger_path, [secure(8.0, 10)] * 3, run="run-2")
    conditional = by_hand([6.0] * 4 + [9.0] + [8.0] * 3)
    unconditional = by_hand([6.0 / math.sqrt(3)] * 4 + [9.0] + [8.0 / math.sqrt(10)] * 3)
    assert ledger.epsilon_spent() == pytest.approx(conditional, rel=2e-3)
    assert ledger.worst_case_spent() == pytest.approx(unconditional, rel=2e-3)
    assert unconditional > 1.5 * conditional
    summary = summarize(ledger)
    assert summary["worst_case_epsilon_spent"] == pytest.approx(unconditional, rel=2e-3)
    assert summary["worst_case_epsilon_remaining"] == pytest.approx(100 - unconditional, rel=1e-3)
    runs = {r["run_id"]: r for r in summary["runs"]}
    assert runs["run-2"]["epsilon_worst_case"] == pytest.approx(
        by_hand([8.0 / math.sqrt(10)] * 3), rel=2e-3)
    text = format_ledger(summary)
    assert "worst case (secure sums bypassed): budget 100" in text
    assert "bypasses the secure sum and sees this site's own share" in text


def test_a_discrete_releases_worst_case_is_one_sites_draws(ledger_path):
    cal = calibrate_ddg(1.0, 1e-5, releases=2, sensitivity=2.0, dimension=50, sites=4,
                        gamma=0.05, norm_bound=100.0)
    release = cal.release("dpdis-pca/secure-sum+ddg(m=4)")
    ledger = charge(ledger_path, [release] * 2)
    share = release.own_share()
    # by hand: the KLS Renyi bound of one site's draws, and the PLD-plus-slack bound
    rdp = rdp_to_epsilon(2 * release_rdp(share, RDP_ORDERS), DELTA)
    own = min(rdp, ddg_pld_epsilon([gaussian_view(share)] * 2, DELTA))
    assert ledger.worst_case_spent() == pytest.approx(own, rel=0.05)
    assert ledger.worst_case_spent() == pytest.approx(composed_epsilon([share] * 2, DELTA))
    assert ledger.worst_case_spent() > 1.5 * ledger.epsilon_spent()
    assert cal.worst_case_epsilon() == pytest.approx(
        composed_epsilon([share] * 2, cal.delta), rel=1e-9)


def test_the_issues_numbers_for_the_template_policy():
    # run-epsilon 1 over 11 releases (DPS-PCA, 10 rounds), lifetime 4, delta 1e-7
    cases = {c.min_sites: c for c in worst_cases(4.0, 1.0, DELTA, 11)}
    assert cases[3].runs == 12 and cases[3].recorded_lifetime == pytest.approx(3.83, abs=0.01)
    expected = {3: (1.80, 7.09), 10: (3.46, 14.39), 100: (12.89, 65.15)}
    for m, (one, lifetime) in expected.items():
        assert cases[m].run_epsilon == pytest.approx(one, abs=0.01)
        assert cases[m].lifetime_epsilon == pytest.approx(lifetime, abs=0.01)
    z = calibrate_gaussian(11, 1.0, DELTA).noise_multiplier
    assert cases[10].run_epsilon == pytest.approx(by_hand([z / math.sqrt(10)] * 11), rel=2e-3)


def test_a_release_past_the_worst_case_budget_is_refused_and_not_recorded(tmp_path,
                                                                          ledger_path):
    path = ledger_path
    one = by_hand([6.0 / math.sqrt(3)])
    ledger = charge(path, [secure(6.0, 3)], worst_case=1.2 * one)
    with pytest.raises(BudgetExceededError, match="worst-case lifetime budget"):
        charge(path, [secure(6.0, 3)], worst_case=1.2 * one)
    assert len(ledger.rows()) == 1
    # per-site releases are unaffected by the bound only through the lifetime budget
    create_ledger(tmp_path / "other.sqlite")
    with pytest.raises(BudgetExceededError, match="sets no budget.worst-case-epsilon"):
        charge(tmp_path / "other.sqlite", [secure(6.0, 3)], worst_case=None)
    assert SiteLedger(tmp_path / "other.sqlite", "hospital", 50.0, DELTA).rows() == []


def test_an_older_ledgers_secure_rows_get_their_m_from_the_mechanism(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
        "population TEXT NOT NULL, run_id TEXT NOT NULL, algorithm TEXT NOT NULL, mechanism "
        "TEXT NOT NULL, sensitivity REAL NOT NULL, sigma REAL NOT NULL, shape TEXT NOT NULL, "
        "data_fingerprint TEXT NOT NULL, summands INTEGER NOT NULL DEFAULT 0, padded INTEGER "
        "NOT NULL DEFAULT 0);"
    )
    for mechanism in ("dps-pca/power+secagg(m=4)", "ldp-pca"):
        conn.execute(
            "INSERT INTO releases (time, population, run_id, algorithm, mechanism, "
            "sensitivity, sigma, shape, data_fingerprint) VALUES (0, 'hospital', 'r', "
            f"'dps-pca', '{mechanism}', 1.0, 6.0, '[]', 'f')")
    conn.commit()
    conn.close()
    ledger = SiteLedger(path, "hospital", 50.0, DELTA, worst_case_epsilon=100.0)
    assert [r["sites_in_sum"] for r in ledger.rows()] == [4, 0]
    assert ledger.worst_case_spent() == pytest.approx(by_hand([3.0, 6.0]), rel=2e-3)


def test_the_in_memory_ledger_bounds_the_worst_case_when_asked():
    ledger = PrivacyLedger(50.0, DELTA, worst_case_epsilon=by_hand([3.0]) * 1.1)
    ledger.charge(secure(6.0, 4))
    assert ledger.summary()["epsilon_worst_case"] == pytest.approx(by_hand([3.0]), rel=2e-3)
    with pytest.raises(BudgetExceededError, match="worst-case budget"):
        ledger.charge(secure(6.0, 4))
    assert ledger.count == 1
    restored = PrivacyLedger(50.0, DELTA)
    restored.restore(ledger.to_dict())
    assert restored.releases == ledger.releases


@pytest.mark.parametrize("discrete", [False, True])
def test_a_secure_runs_record_states_both_guarantees(discrete):
    policy = RoundsPolicy(epsilon=1.0, delta=1e-5, rounds=3, secure_min_sites=4)
    if discrete:
        policy = DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=3, secure_min_sites=4,
                            discrete=True)
        record = privacy_record(policy, secure_sums(policy, 20, 2, 100, 4, 0))
    else:
        record = privacy_record(policy)
    assert record["epsilon_achieved"] <= 1.0 * (1 + 1e-6)
    assert record["epsilon_worst_case"] > 1.5 * record["epsilon_achieved"]
    plain = privacy_record(RoundsPolicy(epsilon=1.0, delta=1e-5, rounds=3))
    assert plain["epsilon_worst_case"] == pytest.approx(plain["epsilon_achieved"])

"""A real site's durable lifetime ledger with distributed discrete Gaussian releases: they are
recorded with what their accounting needs, survive reopening, compose exactly as the
in-memory ledger composes them, are refused before anything is written when the budget is
spent, and a ledger written before these columns existed still loads and means the same."""

import sqlite3

import pytest

from fedpca.errors import BudgetExceededError
from fedpca.privacy.distributed_gaussian import calibrate_ddg
from fedpca.privacy.ledger import PrivacyLedger
from fedpca.privacy.mechanisms import Release
from fedpca.privacy.site_ledger import RunCharge, SiteLedger

DELTA = 1e-6
CAL = calibrate_ddg(1.0, DELTA, releases=3, sensitivity=1.0, dimension=40, sites=4,
                    gamma=0.01, norm_bound=100.0)
DISCRETE = Release("dps-pca/power+ddg(m=4)", CAL.grid_sensitivity,
                   (4 * CAL.draws * CAL.sigma_sq) ** 0.5, (CAL.padded,), 4 * CAL.draws,
                   CAL.padded)
GAUSSIAN = Release("dpdis-pca/full", 0.01, 0.05, (8, 8))


def run(run_id: str, max_releases: int = 5, run_epsilon: float = 2.0) -> RunCharge:
    return RunCharge(run_id, "dps-pca", "sha-of-the-file", run_epsilon, max_releases)


def test_discrete_releases_survive_reopening_and_compose_like_the_in_memory_ledger(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = SiteLedger(path, "patients", 3.0, DELTA).for_run(run("a"))
    memory = PrivacyLedger(3.0, DELTA)
    for release in (DISCRETE, GAUSSIAN, DISCRETE):
        ledger.charge(release)
        memory.charge(release)
    reopened = SiteLedger(path, "patients", 3.0, DELTA)
    rows = reopened.rows()
    assert [(r["summands"], r["padded"]) for r in rows] == [
        (DISCRETE.summands, DISCRETE.padded), (0, 0), (DISCRETE.summands, DISCRETE.padded)]
    assert reopened.epsilon_spent() == pytest.approx(memory.epsilon_spent(), rel=1e-9)
    assert reopened.for_run(run("a")).epsilon_spent() == pytest.approx(memory.epsilon_spent())
    # the calibration's three discrete releases spend what it promised, not more
    only = SiteLedger(tmp_path / "only.sqlite", "patients", 1.0, DELTA).for_run(run("b"))
    for _ in range(3):
        only.charge(DISCRETE)
    assert only.epsilon_spent() <= 1.0 + 1e-6


def test_a_discrete_release_beyond_the_budget_is_refused_before_anything_is_written(tmp_path):
    ledger = SiteLedger(tmp_path / "ledger.sqlite", "patients", 1.0, DELTA)
    first = ledger.for_run(run("a"))
    for _ in range(3):
        first.charge(DISCRETE)
    with pytest.raises(BudgetExceededError, match="lifetime budget epsilon=1"):
        ledger.for_run(run("b")).charge(DISCRETE)
    assert len(ledger.rows()) == 3


def test_a_ledger_written_before_the_discrete_columns_still_loads(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
            "population TEXT NOT NULL, run_id TEXT NOT NULL, algorithm TEXT NOT NULL, "
            "mechanism TEXT NOT NULL, sensitivity REAL NOT NULL, sigma REAL NOT NULL, "
            "shape TEXT NOT NULL, data_fingerprint TEXT NOT NULL);"
            "INSERT INTO releases (time, population, run_id, algorithm, mechanism, "
            "sensitivity, sigma, shape, data_fingerprint) VALUES "
            "(1.0, 'patients', 'old', 'dpdis-pca', 'dpdis-pca/full', 0.01, 0.05, '[8, 8]', 'x');"
        )
    ledger = SiteLedger(path, "patients", 3.0, DELTA)
    assert [(r["summands"], r["padded"]) for r in ledger.rows()] == [(0, 0)]
    assert ledger.epsilon_spent() == pytest.approx(PrivacyLedger(3.0, DELTA, releases=[
        GAUSSIAN]).epsilon_spent())
    ledger.for_run(run("new")).charge(DISCRETE)  # and takes discrete releases from now on
    assert [r["summands"] for r in ledger.rows()] == [0, DISCRETE.summands]

"""A real site's durable lifetime ledger. Distributed discrete Gaussian releases are
recorded with what their accounting needs, survive reopening, compose exactly as the
in-memory ledger composes them, are refused before anything is written when the budget is
spent, and a ledger written before these columns existed still loads and means the same.
A run whose releases, all of them, would pass the lifetime budget, the worst-case bound or a
ceiling is refused before its first release, with nothing written.
Spending per UTC calendar day and per rolling week is bounded on the site's clock (injected
here), whatever run ids the coordinator picks. The runs a ledger says remain are the runs it
then accepts, and a backup taken while the ledger is open holds the same rows."""

import sqlite3
import stat
from contextlib import closing

import pytest

from fedpca.errors import BudgetExceededError, ConfigurationError
from fedpca.privacy.distributed_gaussian import calibrate_ddg
from fedpca.privacy.ledger import PrivacyLedger
from fedpca.privacy.mechanisms import Release
from fedpca.privacy.site_ledger import RunCharge, SiteLedger, format_ledger

DELTA = 1e-6
CAL = calibrate_ddg(1.0, DELTA, releases=3, sensitivity=1.0, dimension=40, sites=4,
                    gamma=0.01, norm_bound=100.0)
DISCRETE = Release("dps-pca/power+ddg(m=4)", CAL.grid_sensitivity,
                   (4 * CAL.draws * CAL.sigma_sq) ** 0.5, (CAL.padded,), 4 * CAL.draws,
                   CAL.padded)
GAUSSIAN = Release("dpdis-pca/full", 0.01, 0.05, (8, 8))


def run(run_id: str, max_releases: int = 5) -> RunCharge:
    return RunCharge(run_id, "dps-pca", "sha-of-the-file", max_releases)


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


class Clock:
    """The site's clock, set by the test (Unix seconds, UTC)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


#: Monday 3 March 2025, 00:00:00 UTC.
MONDAY = 1_740_960_000.0
HOUR = 3600.0


def windowed(path, clock, daily=None, weekly=None, epsilon=50.0):
    return SiteLedger(path, "patients", epsilon, DELTA, daily_epsilon=daily,
                      weekly_epsilon=weekly, clock=clock)


def test_the_daily_ceiling_holds_per_utc_calendar_day_whatever_the_run_ids(tmp_path):
    one = PrivacyLedger(50.0, DELTA, releases=[GAUSSIAN]).epsilon_spent()
    two = PrivacyLedger(50.0, DELTA, releases=[GAUSSIAN] * 2).epsilon_spent()
    clock = Clock(MONDAY + 23 * HOUR)
    ledger = windowed(tmp_path / "l.sqlite", clock, daily=(one + two) / 2)
    ledger.for_run(run("a")).charge(GAUSSIAN)
    clock.now = MONDAY + 24 * HOUR - 1  # 23:59:59, a fresh run id: the same day
    with pytest.raises(BudgetExceededError, match=r"daily ceiling epsilon=\S+ \(delta=1e-06\) "
                                                  r"over the calendar day in UTC would be "
                                                  r"exceeded .* the day ends at 2025-03-04 "
                                                  r"00:00:00 UTC; nothing was released"):
        ledger.for_run(run("b")).charge(GAUSSIAN)
    assert len(ledger.rows()) == 1
    clock.now = MONDAY + 24 * HOUR  # Tuesday 00:00:00: a new window
    ledger.for_run(run("b")).charge(GAUSSIAN)
    assert [r["time"] for r in ledger.rows()] == [MONDAY + 23 * HOUR, MONDAY + 24 * HOUR]


def test_the_weekly_ceiling_rolls_release_by_release(tmp_path):
    two = PrivacyLedger(50.0, DELTA, releases=[GAUSSIAN] * 2).epsilon_spent()
    clock = Clock(MONDAY)
    ledger = windowed(tmp_path / "l.sqlite", clock, weekly=two)
    for day in (0, 3):  # Monday and Thursday
        clock.now = MONDAY + day * 24 * HOUR
        ledger.for_run(run(f"day-{day}")).charge(GAUSSIAN)
    clock.now = MONDAY + 7 * 24 * HOUR  # next Monday 00:00:00: Monday's release is 7 days old
    with pytest.raises(BudgetExceededError, match="weekly ceiling .* over the last 7 x 24 hours "
                                                  ".* a release leaves it 7 days after it was made"):
        ledger.for_run(run("next")).charge(GAUSSIAN)
    clock.now += 1  # one second later it has left the window
    ledger.for_run(run("next")).charge(GAUSSIAN)
    windows = {w["window"]: w for w in ledger.summary()["windows"]}
    assert windows["weekly"]["releases"] == 2 and windows["daily"]["releases"] == 1
    assert windows["weekly"]["epsilon_remaining"] == pytest.approx(0.0, abs=1e-6)
    assert windows["daily"]["epsilon_ceiling"] is None


def test_a_release_dated_after_the_clock_still_counts(tmp_path):
    one = PrivacyLedger(50.0, DELTA, releases=[GAUSSIAN]).epsilon_spent()
    clock = Clock(MONDAY + 30 * 24 * HOUR)
    ledger = windowed(tmp_path / "l.sqlite", clock, daily=one * 1.1, weekly=one * 1.1)
    ledger.for_run(run("a")).charge(GAUSSIAN)
    clock.now = MONDAY  # the clock went back a month: the later release is still inside
    with pytest.raises(BudgetExceededError, match="weekly ceiling"):
        ledger.for_run(run("b")).charge(GAUSSIAN)


def test_the_ledger_report_shows_each_window(tmp_path):
    clock = Clock(MONDAY + 10 * HOUR)
    ledger = windowed(tmp_path / "l.sqlite", clock, daily=1.0, weekly=2.0)
    ledger.for_run(run("a")).charge(GAUSSIAN)
    text = format_ledger(ledger.summary())
    assert "daily ceiling 1 over the calendar day in UTC, from 2025-03-03 00:00:00: spent" in text
    assert "weekly ceiling 2 over the last 7 x 24 hours, from 2025-02-24 10:00:00: spent" in text
    assert text.count("in 1 releases") == 3  # lifetime, daily, weekly


#: A release inside secure sums of 4 sites (its own share's multiplier is half of 5).
SECURE = Release("dps-pca/power+secagg(m=4)", 0.01, 0.05, (8, 8), sites_in_sum=4)
FIVE = PrivacyLedger(50.0, DELTA, releases=[GAUSSIAN] * 5).epsilon_spent()
FIVE_WORST = PrivacyLedger(50.0, DELTA, releases=[SECURE] * 5).worst_case_spent()
#: Per bound: the ledger's settings holding five releases, the release, how long before the
#: check the run "a" made two of them, and the refusal of a run of four more.
WHOLE_RUN = {
    "lifetime": ({"epsilon": FIVE}, GAUSSIAN, 0.0,
                 r"lifetime budget epsilon=\S+ \(delta=1e-06\) would be exceeded \(\S+ after "
                 r"this run\)"),
    "worst case": ({"worst_case_epsilon": FIVE_WORST}, SECURE, 0.0,
                   r"worst-case lifetime budget epsilon=\S+ .* after this run\)"),
    "daily": ({"daily_epsilon": FIVE}, GAUSSIAN, HOUR,
              r"daily ceiling epsilon=\S+ .* after this run\); the day ends at 2025-03-04 "),
    "weekly": ({"weekly_epsilon": FIVE}, GAUSSIAN, 3 * 24 * HOUR,
               r"weekly ceiling epsilon=\S+ \(delta=1e-06\) over the last 7 x 24 hours would "
               r"be exceeded \(\S+ after this run\)"),
}


@pytest.mark.parametrize("bound", WHOLE_RUN)
def test_a_run_that_cannot_finish_is_refused_before_its_first_release(tmp_path, bound):
    limits, release, age, refusal = WHOLE_RUN[bound]
    settings = {"epsilon": 50.0, **limits}
    clock = Clock(MONDAY + 10 * HOUR - age)
    ledger = SiteLedger(tmp_path / "l.sqlite", "patients", settings.pop("epsilon"), DELTA,
                        site="clinic", clock=clock, **settings)
    earlier = ledger.for_run(run("a"))
    earlier.charge(release)
    earlier.charge(release)
    clock.now = MONDAY + 10 * HOUR
    rows = ledger.rows()
    assert ledger.run_refusal([release] * 3) is None  # three more fit: five in all
    with pytest.raises(BudgetExceededError, match="clinic: refused this run of dps-pca: the 4 "
                       "releases left of it, as this site calibrates them, do not fit: .*"
                       + refusal):
        ledger.require_run([release] * 4, "dps-pca")
    assert ledger.rows() == rows  # nothing written
    ledger.for_run(run("b")).charge(release)  # its first release alone would have passed


def test_the_runs_remaining_are_the_runs_the_ledger_then_accepts(tmp_path):
    ledger = SiteLedger(tmp_path / "l.sqlite", "patients", 3.0, DELTA)
    ledger.for_run(run("spent")).charge(DISCRETE)  # a release already charged counts
    planned = [GAUSSIAN, GAUSSIAN]
    left = ledger.runs_remaining(planned)
    assert 1 < left < 20
    for number in range(left):
        charged = ledger.for_run(run(f"run-{number}", max_releases=2))
        for release in planned:
            charged.charge(release)
    assert ledger.runs_remaining(planned) == 0
    with pytest.raises(BudgetExceededError, match="lifetime budget"):
        ledger.for_run(run("one-more", max_releases=2)).charge(GAUSSIAN)
        ledger.for_run(run("one-more", max_releases=2)).charge(GAUSSIAN)
    assert ledger.runs_remaining(planned, most=3) == 0
    assert SiteLedger(tmp_path / "new.sqlite", "patients", 1e3, DELTA).runs_remaining(
        planned, most=3) == 3  # counted up to most


def test_a_backup_taken_while_the_ledger_is_open_holds_the_same_rows(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = SiteLedger(path, "patients", 3.0, DELTA)
    for release in (DISCRETE, GAUSSIAN):
        ledger.for_run(run("a")).charge(release)
    with closing(sqlite3.connect(path)) as holder:  # a run holds it open, mid-read
        holder.execute("BEGIN")
        holder.execute("SELECT COUNT(*) FROM releases").fetchone()
        assert ledger.backup(tmp_path / "copy.sqlite") == 2
    assert stat.S_IMODE((tmp_path / "copy.sqlite").stat().st_mode) == 0o600
    copy = SiteLedger(tmp_path / "copy.sqlite", "patients", 3.0, DELTA)
    assert copy.rows() == ledger.rows()
    with pytest.raises(ConfigurationError, match="copy.sqlite exists; a ledger backup never "
                                                 "overwrites a file"):
        ledger.backup(tmp_path / "copy.sqlite")
    assert copy.rows() == ledger.rows()


def test_site_ledger_backup_from_the_command_line(tmp_path, capsys):
    import numpy as np

    from fedpca.cli import main as cli_main
    from fedpca.privacy.site_policy import load_site_policy, write_policy_template

    np.save(tmp_path / "records.npy", np.eye(4))
    policy = load_site_policy(write_policy_template(tmp_path / "site.toml", "h", "records.npy"))
    policy.open_ledger().for_run(run("a")).charge(GAUSSIAN)
    backup = tmp_path / "backups" / "ledger-copy.sqlite"
    assert cli_main(["site", "ledger", "--policy", str(policy.path), "--backup",
                     str(backup)]) == 0
    assert f"({1} releases) to {backup} (0600)" in capsys.readouterr().out
    assert [r["sigma"] for r in SiteLedger(backup, "h", 4.0, 1e-7).rows()] == [GAUSSIAN.sigma]
    assert cli_main(["site", "ledger", "--policy", str(policy.path), "--backup",
                     str(backup)]) == 2
    assert "exists; a ledger backup never overwrites" in capsys.readouterr().err


def test_the_ledger_reads_run_by_run_for_a_privacy_officer(tmp_path):
    ledger = SiteLedger(tmp_path / "ledger.sqlite", "clinic", 50.0, DELTA)
    release = Release("dps-pca/power", 1.0, 4.0, (8, 2))
    for run_id, made in (("run-1", 3), ("run-2", 3), ("run-3", 1)):  # run-3 stopped early
        charges = ledger.for_run(run(run_id, max_releases=3))
        for _ in range(made):
            charges.charge(release)
    summary = ledger.summary()
    runs = {r["run_id"]: r for r in summary["runs"]}
    assert [runs[r]["status"] for r in ("run-1", "run-2", "run-3")] == [
        "complete", "complete", "incomplete"]
    after = [runs[r]["lifetime_epsilon_after"] for r in ("run-1", "run-2", "run-3")]
    # each run's own epsilon is its three releases composed; the lifetime after run 2 is
    # the six composed, less than twice run 1 (PLD composition), and the last is the total
    assert after[0] == pytest.approx(runs["run-1"]["epsilon"])
    assert runs["run-1"]["epsilon"] < after[1] < 2 * runs["run-1"]["epsilon"]
    assert after[1] < after[2]
    assert after[2] == pytest.approx(summary["epsilon_spent"])
    table = format_ledger(summary)
    assert "3/3" in table and "1/3" in table and "incomplete" in table
    assert "less than the sum of the runs' epsilons" in table

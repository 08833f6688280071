"""A real site's durable lifetime ledger. Distributed discrete Gaussian releases are
recorded with what their accounting needs, survive reopening, compose exactly as the
in-memory ledger composes them, are refused before anything is written when the budget is
spent, and a ledger written before these columns existed still loads and means the same.
A run whose releases, all of them, would pass the lifetime budget, the worst-case bound or a
ceiling is refused before its first release, with nothing written.
Spending per UTC calendar day and per rolling week is bounded on the site's clock (injected
here), whatever run ids the coordinator picks. The runs a ledger says remain are the runs it
then accepts, and a backup taken while the ledger is open holds the same rows.

A ledger is never created by opening it: a deleted, emptied, truncated, replaced or older
ledger, or one whose identity file is lost, is refused by the check, by a run (with a fixed
reason for the coordinator) and at a charge; a backup restored is the same ledger, an older
one only with a reason, recorded with the releases lost; a new ledger and the adoption of an
older fedpca's ledger are explicit and recorded.

For the privacy officer, a run's first charge records the run (when, what it planned) in the
same transaction; a run's end is recorded only for a run that released here, once, with a
short printable reason, and changes no budget; every change of the site's own policy
(its contract's hash included) is one dated row."""

import re
import shutil
import sqlite3
import stat
from contextlib import closing

import numpy as np
import pytest
from flwr.common import Context, RecordDict

from fedpca.site.real_site import RealSiteSource
from liver_contract import CONTRACT, liver_table
from fedpca.cli import main as cli_main
from fedpca.errors import BudgetExceededError, ConfigurationError
from fedpca.dp.distributed_gaussian import calibrate_ddg
from fedpca.dp.ledger import PrivacyLedger
from fedpca.site.ledger_identity import RUN_REFUSAL, LedgerIdentityError, LedgerState, Mark
from fedpca.site import ledger as site_ledger
from fedpca.dp.events import Release
from fedpca.site.ledger_report import format_ledger, summarize
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.ledger_store import create_ledger
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template

DELTA = 1e-6
CAL = calibrate_ddg(1.0, DELTA, releases=3, sensitivity=1.0, dimension=40, sites=4,
                    gamma=0.01, norm_bound=100.0)
DISCRETE = Release("dps-pca/power+ddg(m=4)", CAL.grid_sensitivity,
                   (4 * CAL.draws * CAL.sigma_sq) ** 0.5, (CAL.padded,), 4 * CAL.draws,
                   CAL.padded)
GAUSSIAN = Release("dpdis-pca/full", 0.01, 0.05, (8, 8))
#: A release a site policy's daily ceiling takes many of (noise multiplier 50).
QUIET = Release("dpdis-pca/full", 0.01, 0.5, (8, 8))


def new_ledger(path, *args, **kwargs) -> SiteLedger:
    """A ledger created on purpose, then opened (opening alone never creates one)."""
    create_ledger(path)
    return SiteLedger(path, *args, **kwargs)


def run(run_id: str, max_releases: int = 5) -> RunCharge:
    return RunCharge(run_id, "dps-pca", "sha-of-the-file", max_releases)


def test_discrete_releases_survive_reopening_and_compose_like_the_in_memory_ledger(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = new_ledger(path, "patients", 3.0, DELTA).for_run(run("a"))
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
    only = new_ledger(tmp_path / "only.sqlite", "patients", 1.0, DELTA).for_run(run("b"))
    for _ in range(3):
        only.charge(DISCRETE)
    assert only.epsilon_spent() <= 1.0 + 1e-6


def test_a_discrete_release_beyond_the_budget_is_refused_before_anything_is_written(tmp_path):
    ledger = new_ledger(tmp_path / "ledger.sqlite", "patients", 1.0, DELTA)
    first = ledger.for_run(run("a"))
    for _ in range(3):
        first.charge(DISCRETE)
    with pytest.raises(BudgetExceededError, match="lifetime budget epsilon=1"):
        ledger.for_run(run("b")).charge(DISCRETE)
    assert len(ledger.rows()) == 3


def test_one_run_is_one_algorithm_and_centring_at_a_site(tmp_path):
    # a coordinator that asks for the moments of a standardised run, then the algorithm's
    # releases of a run only centred (another budget split), is refused: nothing charged
    ledger = new_ledger(tmp_path / "ledger.sqlite", "patients", 10.0, DELTA)
    ledger.for_run(RunCharge("r", "dpdis-pca+standardize", "sha", 2)).charge(GAUSSIAN)
    with pytest.raises(BudgetExceededError, match=r"earlier releases here were of "
                       r"dpdis-pca\+standardize.*asks for dpdis-pca\+centre"):
        ledger.for_run(RunCharge("r", "dpdis-pca+centre", "sha", 2)).charge(GAUSSIAN)
    assert len(ledger.rows()) == 1
    ledger.for_run(RunCharge("s", "dpdis-pca+centre", "sha", 2)).charge(GAUSSIAN)  # new run
    assert [r["algorithm"] for r in ledger.rows()] == ["dpdis-pca+standardize",
                                                       "dpdis-pca+centre"]


def write_old_ledger(path, population="patients") -> None:
    """A ledger as the first versions wrote it: no discrete columns, no identity; one row."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(
            "CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
            "population TEXT NOT NULL, run_id TEXT NOT NULL, algorithm TEXT NOT NULL, "
            "mechanism TEXT NOT NULL, sensitivity REAL NOT NULL, sigma REAL NOT NULL, "
            "shape TEXT NOT NULL, data_fingerprint TEXT NOT NULL);"
            "INSERT INTO releases (time, population, run_id, algorithm, mechanism, "
            "sensitivity, sigma, shape, data_fingerprint) VALUES "
            f"(1.0, '{population}', 'old', 'dpdis-pca', 'dpdis-pca/full', 0.01, 0.05, "
            "'[8, 8]', 'x');"
        )


def test_a_ledger_written_before_the_discrete_columns_still_loads(tmp_path):
    path = tmp_path / "old.sqlite"
    write_old_ledger(path)
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
    return new_ledger(path, "patients", epsilon, DELTA, daily_epsilon=daily,
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
    windows = {w["window"]: w for w in summarize(ledger)["windows"]}
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
    text = format_ledger(summarize(ledger))
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
    ledger = new_ledger(tmp_path / "l.sqlite", "patients", settings.pop("epsilon"), DELTA,
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


def test_the_runs_now_count_the_daily_ceiling_the_lifetime_count_ignores(tmp_path):
    clock = Clock(MONDAY + HOUR)
    ledger = windowed(tmp_path / "l.sqlite", clock, daily=2.0, epsilon=8.0)
    planned = [GAUSSIAN, GAUSSIAN]
    lifetime, now = ledger.runs_remaining(planned), ledger.runs_now(planned)
    assert lifetime > now >= 1  # the daily ceiling allows fewer runs today
    for number in range(now):  # the runs it counts are the runs the ledger accepts today
        charged = ledger.for_run(run(f"run-{number}", max_releases=2))
        for release in planned:
            charged.charge(release)
    assert ledger.runs_now(planned) == 0 < ledger.runs_remaining(planned)
    clock.now += 86_400  # the next day: room again
    assert ledger.runs_now(planned) >= 1


def test_the_runs_remaining_are_the_runs_the_ledger_then_accepts(tmp_path):
    ledger = new_ledger(tmp_path / "l.sqlite", "patients", 3.0, DELTA)
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
    assert new_ledger(tmp_path / "new.sqlite", "patients", 1e3, DELTA).runs_remaining(
        planned, most=3) == 3  # counted up to most


def test_a_backup_taken_while_the_ledger_is_open_holds_the_same_rows(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = new_ledger(path, "patients", 3.0, DELTA)
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
    policy = site(tmp_path, releases=1)
    backup = tmp_path / "backups" / "ledger-copy.sqlite"
    assert cli_main(["site", "ledger", "--policy", str(policy.path), "--backup",
                     str(backup)]) == 0
    assert f"({1} releases) to {backup} (0600)" in capsys.readouterr().out
    assert [r["sigma"] for r in SiteLedger(backup, "h", 4.0, 1e-7).rows()] == [QUIET.sigma]
    assert cli_main(["site", "ledger", "--policy", str(policy.path), "--backup",
                     str(backup)]) == 2
    assert "exists; a ledger backup never overwrites" in capsys.readouterr().err


def test_the_ledger_reads_run_by_run_for_a_privacy_officer(tmp_path):
    ledger = new_ledger(tmp_path / "ledger.sqlite", "clinic", 50.0, DELTA)
    release = Release("dps-pca/power", 1.0, 4.0, (8, 2))
    for run_id, made in (("run-1", 3), ("run-2", 3), ("run-3", 1)):  # run-3 stopped early
        charges = ledger.for_run(run(run_id, max_releases=3))
        for _ in range(made):
            charges.charge(release)
    summary = summarize(ledger)
    runs = {r["run_id"]: r for r in summary["runs"]}
    assert [runs[r]["status"] for r in ("run-1", "run-2", "run-3")] == [
        "complete", "complete", "stopped"]
    after = [runs[r]["lifetime_epsilon_after"] for r in ("run-1", "run-2", "run-3")]
    # each run's own epsilon is its three releases composed; the lifetime after run 2 is
    # the six composed, less than twice run 1 (PLD composition), and the last is the total
    assert after[0] == pytest.approx(runs["run-1"]["epsilon"])
    assert runs["run-1"]["epsilon"] < after[1] < 2 * runs["run-1"]["epsilon"]
    assert after[1] < after[2]
    assert after[2] == pytest.approx(summary["epsilon_spent"])
    table = format_ledger(summary)
    assert "3/3" in table and "1/3" in table and "stopped" in table
    assert "less than the sum of the runs' epsilons" in table


# --- the ledger's identity: it fails closed, and a backup is put back on purpose -------------
def site(tmp_path, releases=2):
    """A site as ``fedpca site init`` leaves it, with ``releases`` charged through its
    checked ledger."""
    np.save(tmp_path / "records.npy", np.eye(4))
    policy = load_site_policy(write_policy_template(tmp_path / "site.toml", "h", "records.npy"))
    charge(policy, releases)
    return policy


def charge(policy, releases, run_id="a"):
    charges = policy.open_ledger().for_run(run(run_id))
    for _ in range(releases):
        charges.charge(QUIET)


def ledger_command(policy, *args):
    return cli_main(["site", "ledger", "--policy", str(policy.path), *map(str, args)])


def rows(policy):
    return SiteLedger(policy.ledger, policy.population, policy.epsilon, policy.delta).rows()


def put_back(copy, policy):
    """Replace the ledger by the file ``copy`` (as ``cp`` would)."""
    policy.ledger.unlink()
    shutil.copy(copy, policy.ledger)


def another_ledger(tmp_path, policy):
    create_ledger(tmp_path / "other.sqlite")
    put_back(tmp_path / "other.sqlite", policy)


def emptied(_tmp_path, policy):
    with closing(sqlite3.connect(policy.ledger)) as conn, conn:
        conn.execute("DELETE FROM releases")


@pytest.mark.parametrize("damage,problem", [
    (lambda tmp_path, policy: policy.ledger.unlink(),
     r"ledger .*ledger.sqlite named by .*site.toml does not exist, though .*site.ledger-id.json "
     r"records it .* never created again silently; .* --restore FILE; .* --new --reason TEXT"),
    (emptied, r"is behind this site's last recorded release .*: it holds 0 releases, without "
              r"release 2 of .*, and the ledger held 2 up to that one; .* --restore FILE"),
    (lambda tmp_path, policy: policy.ledger.write_bytes(b""),
     r"ledger.sqlite is not a fedpca ledger \(it has no releases table\)"),
    (lambda tmp_path, policy: put_back(tmp_path / "early.sqlite", policy),
     r"it holds 1 releases, without release 2 of"),
    (another_ledger, r"ledger.sqlite is not the one this site created: its identity \w+ is not"),
    (lambda tmp_path, policy: policy.witness().path.unlink(),
     r"identity file .*site.ledger-id.json does not exist, though the ledger .* does: .* "
     r"--adopt --reason TEXT"),
])
def test_a_lost_emptied_or_replaced_ledger_is_refused_and_never_created(
        tmp_path, capsys, caplog, damage, problem):
    policy = site(tmp_path, releases=1)
    policy.open_ledger().backup(tmp_path / "early.sqlite")
    charge(policy, 1, "b")
    damage(tmp_path, policy)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(LedgerIdentityError, match=problem):
        policy.open_ledger()
    assert cli_main(["site", "check", "--policy", str(policy.path)]) == 1
    assert re.search(f"PROBLEM: .*{problem}", capsys.readouterr().out)
    # a run is refused before anything is charged; the coordinator reads a fixed reason
    context = Context(run_id=1, node_id=7, node_config={"policy": str(policy.path)},
                      state=RecordDict(), run_config={})
    with pytest.raises(LedgerIdentityError) as refusal:
        RealSiteSource(context, "dpdis-pca").opened
    assert str(refusal.value) == RUN_REFUSAL.format(site="h")
    assert re.search(problem, caplog.text)  # the detail is in the site's log
    assert sorted(tmp_path.iterdir()) == before  # nothing was created, nothing repaired


def test_a_ledger_put_back_during_a_run_refuses_the_next_charge(tmp_path, caplog):
    policy = site(tmp_path, releases=1)
    policy.open_ledger().backup(tmp_path / "early.sqlite")
    running = policy.open_ledger().for_run(run("b"))
    running.charge(QUIET)
    put_back(tmp_path / "early.sqlite", policy)  # an older copy, while the run goes on
    with pytest.raises(LedgerIdentityError) as refusal:
        running.charge(QUIET)
    assert str(refusal.value) == RUN_REFUSAL.format(site="h")
    assert "it holds 1 releases, without release 2 of" in caplog.text
    assert len(rows(policy)) == 1  # nothing was recorded


def test_the_high_water_mark_follows_every_charge(tmp_path):
    policy = site(tmp_path, releases=3)
    newest = rows(policy)[-1]
    assert policy.witness().read().mark == Mark(3, newest["id"], newest["time"])
    ledger = SiteLedger(policy.ledger, "h", 4.0, 1e-7)  # no identity file: no mark moves
    ledger.for_run(run("unchecked")).charge(QUIET)
    assert policy.witness().read().mark.releases == 3
    charge(policy, 1, "c")
    mark = policy.witness().read().mark
    assert mark.releases == 5
    # a charge that read the ledger before another's commit never moves the mark back
    policy.witness().advance(LedgerState(None, 4, Mark(4, mark.id - 1, mark.time - 1)))
    assert policy.witness().read().mark == mark


def test_a_backup_restored_is_the_same_ledger(tmp_path, capsys):
    policy = site(tmp_path, releases=2)
    backup = tmp_path / "backups" / "ledger.sqlite"
    assert ledger_command(policy, "--backup", backup) == 0
    before = rows(policy)
    assert ledger_command(policy, "--restore", backup) == 2  # never over a ledger
    assert "ledger.sqlite exists: a restore never replaces a ledger; stop the SuperNode, " \
           "move the ledger" in capsys.readouterr().err
    policy.ledger.rename(tmp_path / "ledger.sqlite.old")
    assert ledger_command(policy, "--restore", backup) == 0
    assert rows(policy) == before
    assert stat.S_IMODE(policy.ledger.stat().st_mode) == 0o600
    record = policy.witness().read()
    assert f"restored ledger {record.identity} from {backup} (2 releases)" in record.history[-1]
    assert record.mark.releases == 2
    charge(policy, 1, "b")  # the restored ledger takes charges and moves the mark
    assert policy.witness().read().mark.releases == 3


def test_restoring_an_older_copy_needs_a_reason_and_records_what_is_lost(
        tmp_path, capsys, caplog):
    policy = site(tmp_path, releases=1)
    backup = tmp_path / "backup.sqlite"
    policy.open_ledger().backup(backup)
    charge(policy, 2, "b")
    policy.ledger.unlink()  # lost: only the older backup is left
    assert ledger_command(policy, "--restore", backup) == 2
    assert re.search(r"backup .* is older than this site's last recorded release: it holds 1 "
                     r"releases, without release 3 of .*, and the ledger held 3 up to that one; "
                     r"restoring it would give back the budget spent since",
                     capsys.readouterr().err)
    assert not policy.ledger.exists()
    assert ledger_command(policy, "--restore", backup, "--reason", "disk failure") == 0
    line = policy.witness().read().history[-1]
    assert "releases lost: 2, their budget given back; reason: disk failure" in line
    assert line in caplog.text  # and in the site's log
    assert len(policy.open_ledger().rows()) == 1  # the check passes from now on
    # a backup of another ledger is refused, whatever the reason
    create_ledger(tmp_path / "other.sqlite")
    policy.ledger.unlink()
    assert ledger_command(policy, "--restore", tmp_path / "other.sqlite", "--reason", "x") == 2
    assert "is a copy of another ledger" in capsys.readouterr().err
    assert not policy.ledger.exists()


def test_a_new_ledger_is_started_on_purpose_and_recorded(tmp_path, capsys):
    policy = site(tmp_path, releases=2)
    old = policy.witness().read().identity
    assert ledger_command(policy, "--new") == 2
    assert "--new needs --reason TEXT" in capsys.readouterr().err
    assert ledger_command(policy, "--new", "--reason", "new cohort") == 2
    assert "a new ledger never replaces a ledger" in capsys.readouterr().err
    assert ledger_command(policy, "--reason", "why") == 2
    assert "--reason goes with --restore, --new or --adopt" in capsys.readouterr().err
    policy.ledger.rename(tmp_path / "ledger-2025.sqlite")
    assert ledger_command(policy, "--new", "--reason", "new cohort") == 0
    record = policy.witness().read()
    assert record.identity != old and record.mark is None
    assert "created ledger" in record.history[0]
    assert (f"started a new, empty ledger {record.identity}, replacing ledger {old} (2 releases "
            "at its last charge); the population's budget starts again; reason: new cohort"
            ) in record.history[-1]
    assert policy.open_ledger().rows() == []
    assert ledger_command(policy) == 0
    assert record.history[-1] in capsys.readouterr().out  # site ledger shows the history


def test_a_ledger_an_older_fedpca_wrote_is_adopted_on_purpose(tmp_path, capsys):
    policy = site(tmp_path, releases=0)
    policy.ledger.unlink()
    policy.witness().path.unlink()
    write_old_ledger(policy.ledger, population="h")
    policy.ledger.chmod(0o600)
    with pytest.raises(LedgerIdentityError, match="written by an older fedpca, before ledgers "
                                                  "had identities.* --adopt --reason TEXT"):
        policy.open_ledger()
    assert ledger_command(policy, "--adopt") == 2
    assert ledger_command(policy, "--adopt", "--reason", "upgrade") == 0
    record = policy.witness().read()
    assert "(1 releases, given an identity) as this site's; reason: upgrade" in record.history[-1]
    assert [r["run_id"] for r in policy.open_ledger().rows()] == ["old"]
    assert ledger_command(policy, "--adopt", "--reason", "again") == 2
    assert "already has an identity file" in capsys.readouterr().err


# --- what the ledger keeps for its privacy officer: runs, their ends, the policy's changes ----
DESCRIBED = {"algorithm": "dpdis-pca", "k": 2, "contract": "c0" * 32, "centring": "centre",
             "releases": 2}


def described(run_id: str, max_releases: int = 2, description=DESCRIBED) -> RunCharge:
    return RunCharge(run_id, "dpdis-pca", "sha-of-the-file", max_releases, description)


def test_a_runs_first_charge_records_the_run_in_the_same_transaction(tmp_path):
    clock = Clock(MONDAY)
    ledger = windowed(tmp_path / "l.sqlite", clock, epsilon=FIVE)
    charges = ledger.for_run(described("r"))
    charges.charge(GAUSSIAN)
    clock.now += HOUR
    charges.charge(GAUSSIAN)  # a later charge leaves the run's row as it was
    assert ledger.run_records() == {"r": {
        "population": "patients", "run_id": "r", "started": MONDAY, "planned": 2,
        "description": DESCRIBED, "status": None, "reason": None, "ended": None,
        "key_list": None}}  # no secure sums in this run
    # a refused charge writes no run either
    for _ in range(3):  # five releases in all: the lifetime budget
        ledger.for_run(described("s", 5)).charge(GAUSSIAN)
    with pytest.raises(BudgetExceededError, match="lifetime budget"):
        ledger.for_run(described("refused")).charge(GAUSSIAN)
    assert set(ledger.run_records()) == {"r", "s"}
    # the run's row and its first release are one transaction: when the row cannot be
    # written, the release is not recorded either
    roomy = new_ledger(tmp_path / "roomy.sqlite", "patients", 50.0, DELTA)
    with closing(sqlite3.connect(roomy.path)) as conn, conn:
        conn.execute("CREATE TRIGGER no_run BEFORE INSERT ON runs "
                     "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(sqlite3.DatabaseError, match="disk full"):
        roomy.for_run(described("t")).charge(GAUSSIAN)
    assert roomy.rows() == []


def test_a_runs_description_is_kept_as_short_printable_json_scalars(tmp_path):
    ledger = new_ledger(tmp_path / "l.sqlite", "patients", 10.0, DELTA)
    hostile = {"k": 3, "note": "x\x1b[2J" + "y" * 500, "shape": (8, 2), "bad": float("nan"),
               **{f"key-{i}": i for i in range(40)}}
    ledger.for_run(described("r", description=hostile)).charge(GAUSSIAN)
    kept = ledger.run_records()["r"]["description"]
    assert len(kept) == 32 and kept["k"] == 3
    assert kept["note"] == "x?[2J" + "y" * 195
    assert kept["shape"] == "(8, 2)" and kept["bad"] == "nan"


def test_a_run_ends_once_only_if_it_released_here_and_no_budget_changes(tmp_path):
    clock = Clock(MONDAY)
    ledger = windowed(tmp_path / "l.sqlite", clock)
    ledger.for_run(described("r")).charge(GAUSSIAN)
    other = new_ledger(tmp_path / "o.sqlite", "patients", 50.0, DELTA)
    spent, left = ledger.epsilon_spent(), ledger.runs_remaining([GAUSSIAN] * 2)
    before = ledger.run_records()
    # a run that made no release of this population here: nothing is written
    assert not ledger.end_run("never-here", "failed", "x" * 10_000)
    assert not other.end_run("r", "complete")
    assert ledger.run_records() == before and other.run_records() == {}
    clock.now += HOUR
    assert ledger.end_run("r", "failed", "hospital-b:\x00 no file\n" + "z" * 500)
    recorded = ledger.run_records()["r"]
    assert recorded["status"] == "failed" and recorded["ended"] == MONDAY + HOUR
    assert recorded["reason"] == "hospital-b:? no file?" + "z" * 179  # 200 printable
    assert not ledger.end_run("r", "complete")  # the first end stands
    assert ledger.run_records()["r"] == recorded
    assert ledger.epsilon_spent() == spent and ledger.runs_remaining([GAUSSIAN] * 2) == left
    with pytest.raises(ConfigurationError, match="a run ends complete or failed, not 'done'"):
        ledger.end_run("r", "done")


def test_an_older_ledgers_runs_are_reported_from_their_releases_and_can_end(tmp_path):
    path = tmp_path / "old.sqlite"
    write_old_ledger(path)
    ledger = SiteLedger(path, "patients", 3.0, DELTA)
    assert ledger.run_records() == {} and ledger.policy_events() == []  # tables added
    assert [r["grid_step"] for r in ledger.rows()] == [0.0]
    [old] = summarize(ledger)["runs"]
    assert (old["run_id"], old["status"], old["description"]) == ("old", "unknown", {})
    assert ledger.end_run("old", "complete")
    assert ledger.run_records()["old"]["started"] == 1.0  # its first release
    assert summarize(ledger)["runs"][0]["status"] == "complete"


def test_a_policy_change_is_recorded_once_with_its_date(tmp_path, monkeypatch):
    now = [MONDAY]
    monkeypatch.setattr(site_ledger, "utc_now", lambda: now[0])
    np.save(tmp_path / "records.npy", np.eye(4))
    path = write_policy_template(tmp_path / "site.toml", "h", "records.npy")
    policy = load_site_policy(path)
    policy.open_ledger()
    now[0] += HOUR
    policy.open_ledger()  # the same policy again: no row
    load_site_policy(path).open_ledger()
    [first] = policy.open_ledger().policy_events()
    assert first["time"] == MONDAY and first["changes"] == []
    assert first["policy"]["budget.daily-epsilon"] == 1.0
    assert first["policy"]["algorithms.dps-pca"] == "allowed (rounds=10)"
    assert first["policy"]["site.contract"] is None
    # the site's officer raises the daily ceiling: one dated row, old -> new
    path.write_text(path.read_text().replace("daily-epsilon = 1.0", "daily-epsilon = 1.5"))
    now[0] += HOUR
    edited = load_site_policy(path)
    ledger = edited.open_ledger()
    edited.open_ledger()
    events = ledger.policy_events()
    assert len(events) == 2
    assert events[1]["time"] == MONDAY + 2 * HOUR
    assert events[1]["changes"] == [["budget.daily-epsilon", "1", "1.5"]]
    assert ledger.note_policy(edited.ledger_settings()) == []
    # the sentences note_policy returns, and its first recording's
    lowered = {**edited.ledger_settings(), "budget.epsilon": 3.0}
    assert ledger.note_policy(lowered) == ["budget.epsilon 4 -> 3"]
    fresh = new_ledger(tmp_path / "fresh.sqlite", "h", 4.0, DELTA)
    [recorded] = fresh.note_policy({"budget.epsilon": 4.0, "secure-aggregation.discrete": False})
    assert recorded == "policy recorded: budget.epsilon 4; secure-aggregation.discrete false"


def test_a_replaced_contract_is_a_policy_change_and_an_unreadable_one_is_not_guessed(
        tmp_path, caplog):
    (tmp_path / "table.csv").write_text(liver_table(20))
    (tmp_path / "contract.toml").write_text(CONTRACT)
    path = write_policy_template(tmp_path / "site.toml", "clinic", "table.csv",
                                 contract="contract.toml", delta=1e-7)
    policy = load_site_policy(path)
    first = policy.contract_hash()
    assert policy.open_ledger().policy_events()[0]["policy"]["site.contract"] == first
    (tmp_path / "contract.toml").write_text(CONTRACT.replace("[0, 110]", "[0, 120]"))
    [_, replaced] = policy.open_ledger().policy_events()
    assert replaced["changes"] == [["site.contract", first, policy.contract_hash()]]
    # a contract that cannot be read: the ledger still opens (the run and site check say
    # what is wrong) and records nothing until it can be read again
    (tmp_path / "contract.toml").write_text("not a contract")
    assert len(policy.open_ledger().policy_events()) == 2
    assert "the policy's settings are not recorded in the ledger this time" in caplog.text

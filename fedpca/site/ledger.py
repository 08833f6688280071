"""A site's lifetime privacy ledger on its own disk: every release of every run, in SQLite.

Privacy guarantee enforced (unit: one record of the site's population, replace-one): the
composition of *all* releases ever charged to a population (PLD; with distributed discrete
Gaussian releases among them, the smaller of their two valid bounds,
:func:`fedpca.dp.accountant.composed_epsilon`) stays within the lifetime
``(epsilon, delta)`` of the site's policy; the composition, by the same accountant at the
same delta, of the releases charged in the current calendar day (UTC) stays within
``daily_epsilon``, and of those charged in the last 7 x 24 hours within ``weekly_epsilon``.
Those windows are the site's own clock's, so a coordinator cannot reset them: a new run id
for every request changes nothing (a run only caps its releases at ``max_releases``, what
its calibration assumed). A release that would break any of them is refused before it is
sent, and nothing is recorded. Before a run's first release, the site also asks
:meth:`SiteLedger.require_run` whether the *whole* run, as it calibrates it, fits all of these
at once (every one of its releases assumed to land now), and refuses the run when it does not:
no site spends on a run it cannot finish. (Two runs that start at one site at the same moment
are each tested against what the other has charged so far; the per-release check still holds
whichever of them runs out.)

A release inside a secure sum of at least ``M`` sites has two guarantees, both composed over
the lifetime with the same accountant (:class:`~fedpca.dp.events.Release`): the
*conditional* one (the sum's noise; it holds when every sum holds at least ``M`` honest
sites' shares and the protocol is followed) is bounded by the lifetime ``epsilon``; the
*unconditional* one (the site's own share alone: what a coordinator that bypasses the
protocol sees) by the policy's ``worst_case_epsilon``. A ledger without a worst-case bound
refuses every secure release.

Durability and races. A charge is one ``BEGIN IMMEDIATE`` transaction (check, then insert)
committed with ``synchronous=FULL`` *before* the caller draws noise or answers: a crash
after the charge leaves the budget spent, never unspent, and two processes of one site
(two ClientApps, two runs) cannot both spend the last of it, because SQLite serialises the
writers. The database is in WAL mode, so ``fedpca site ledger`` can read it during a run.

Each row records the mechanism, sensitivity, sigma, shape, run id, time, algorithm and the
fingerprint (SHA-256) of the data file, for the site's auditors, for a distributed
discrete Gaussian release its summands and padded dimension (columns added to older ledgers
with 0, "continuous Gaussian", which every older row is), for a release on a grid (those,
and a site's exact noise) its grid step (0 in older rows: their grid is not known), and for
a release inside secure sums their minimum ``M`` (added to older ledgers from the
``+secagg(m=M)`` / ``+ddg(m=M)`` its mechanism name carries). The coordinator never reads
this file.

Beside the releases, for the site's privacy officer (:mod:`fedpca.site.ledger_report`
reads them; the budget rules never do):

* ``runs``: one row per run, written by the run's first charge in the same transaction (so
  a refused charge writes none): when it started, the releases it planned and what the site
  planned to release (:attr:`RunCharge.description`), and, once :meth:`SiteLedger.end_run`
  records it, how it ended (complete, or failed with a reason). A coordinator can send an
  end only for a run that released here, once, and at most :data:`MAX_REASON` printable
  characters of reason; an end never changes a budget (what a failed run released stays
  spent).
* ``policy_events``: every change of the site's own policy, dated by the site's clock when
  the ledger is opened under it (:meth:`SiteLedger.note_policy`): the settings before and
  after. Only the site writes them (its policy file); a coordinator cannot.

Older ledgers get both tables when opened; their runs without a ``runs`` row are reported
from their releases.

A ledger is created only on purpose (:func:`create_ledger`: ``fedpca site init``, ``fedpca
site ledger --new``, a restore), with a random identity it keeps in its
``ledger_identity`` table; opening one never creates a file, and a ledger opened with its
site's identity file (:class:`~fedpca.site.ledger_identity.LedgerWitness`) is checked
against it when it is opened and at every charge, which then moves the file's high-water
mark (why, and what this stops: :mod:`fedpca.site.ledger_identity`).
"""

from __future__ import annotations

import json
import math
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpca.errors import BudgetExceededError, ConfigurationError
from fedpca.site import policy_changes
from fedpca.dp.calibration import check_privacy_parameters
from fedpca.site.file_modes import create_owner_only
from fedpca.dp.accountant import EPSILON_SLACK, composed_epsilon, worst_case_epsilon
from fedpca.site.ledger_identity import (
    LedgerIdentityError,
    LedgerState,
    LedgerWitness,
    Mark,
    refused_run,
)
from fedpca.dp.events import Release

#: Seconds a charge waits for another process's charge to commit.
LOCK_TIMEOUT = 60.0
#: Seconds of a calendar day (UTC: Unix time counts no leap seconds) and of a rolling week.
DAY_SECONDS, WEEK_SECONDS = 86_400.0, 7 * 86_400.0
#: What each spending window holds, for refusals and the ledger's report.
WINDOWS = {"daily": "the calendar day in UTC", "weekly": "the last 7 x 24 hours"}
#: The most runs :meth:`SiteLedger.runs_remaining` counts (a larger count says "at least").
MAX_RUNS_COUNTED = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    population TEXT NOT NULL,
    run_id TEXT NOT NULL,
    algorithm TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    sensitivity REAL NOT NULL,
    sigma REAL NOT NULL,
    shape TEXT NOT NULL,
    data_fingerprint TEXT NOT NULL,
    summands INTEGER NOT NULL DEFAULT 0,
    padded INTEGER NOT NULL DEFAULT 0,
    sites_in_sum INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS releases_population ON releases (population, run_id);
"""
#: Columns later versions added, with the value every older row has (continuous Gaussian;
#: ``planned`` and ``grid_step`` 0: not recorded).
_ADDED_COLUMNS = ("summands INTEGER NOT NULL DEFAULT 0", "padded INTEGER NOT NULL DEFAULT 0",
                  "sites_in_sum INTEGER NOT NULL DEFAULT 0", "planned INTEGER NOT NULL DEFAULT 0",
                  "grid_step REAL NOT NULL DEFAULT 0")
#: Tables later versions added (created in older ledgers when they are opened).
_ADDED_TABLES = {
    "runs": "CREATE TABLE IF NOT EXISTS runs (population TEXT NOT NULL, run_id TEXT NOT NULL, "
            "started REAL NOT NULL, planned INTEGER NOT NULL, description TEXT NOT NULL, "
            "status TEXT, reason TEXT, ended REAL, PRIMARY KEY (population, run_id))",
    "policy_events": "CREATE TABLE IF NOT EXISTS policy_events (id INTEGER PRIMARY KEY "
                     "AUTOINCREMENT, time REAL NOT NULL, policy TEXT NOT NULL, "
                     "changes TEXT NOT NULL)",
}
#: How a run ended (:meth:`SiteLedger.end_run`).
RUN_ENDS = ("complete", "failed")
#: The most characters of a run's end reason (untrusted: possibly the coordinator's) kept.
MAX_REASON = 200
#: The most keys of a run's description kept, and characters of each key and text value.
MAX_DESCRIPTION_KEYS, MAX_DESCRIPTION_TEXT = 32, 200
#: The columns the accounting reads, in :class:`Release`'s order.
_ACCOUNTED = "sensitivity, sigma, summands, padded, sites_in_sum"
#: How older versions named a release inside secure sums of at least ``M`` sites.
_SECURE_MECHANISM = re.compile(r"\+(?:secagg|ddg)\(m=(\d+)\)")


#: The one row saying which ledger this is: a random identity and when it was created.
_IDENTITY_SCHEMA = "CREATE TABLE ledger_identity (identity TEXT NOT NULL, created REAL NOT NULL)"
#: The files SQLite keeps beside a ledger in WAL mode.
WAL_FILES = ("-wal", "-shm")


def _connection(path: Path) -> sqlite3.Connection:
    """A connection to the existing file ``path`` (SQLite never creates it: ``mode=rw``)
    in autocommit mode: transactions are explicit."""
    uri = f"{path.resolve().as_uri()}?mode=rw"
    return sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT, isolation_level=None)


def _open(path: Path, upgrade: bool = True) -> sqlite3.Connection:
    """The existing ledger ``path``, WAL, full sync, brought to the current columns unless
    ``upgrade`` is false (a backup read as it is); refuses a missing file or one that is not
    a fedpca ledger (never creates one)."""
    if not path.is_file():
        raise LedgerIdentityError(
            f"the ledger {path} does not exist; a ledger is created only on purpose "
            "(fedpca site init, or fedpca site ledger --new)"
        )
    conn = _connection(path)
    try:
        if "releases" not in _tables(conn):
            raise sqlite3.DatabaseError("it has no releases table")
        if upgrade:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            _add_columns(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise LedgerIdentityError(
            f"{path} is not a fedpca ledger ({exc}); point the policy's [site] ledger at the "
            "site's ledger, or restore its newest backup (fedpca site ledger --restore FILE)"
        ) from None
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def _new_file(path: Path, exists: str) -> Iterator[None]:
    """A new, empty file ``path`` (0600, its folder 0700 if new) for the block to fill,
    removed if filling it fails; an existing file is refused with the message ``exists``."""
    try:
        create_owner_only(path, b"")
    except FileExistsError:
        raise LedgerIdentityError(exists) from None
    try:
        yield
    except BaseException:  # no half-made ledger is left behind
        path.unlink()
        raise


def create_ledger(path: Path, clock: Callable[[], float] | None = None) -> LedgerState:
    """Create an empty ledger ``path`` (0600, its folder 0700 if new) with a random identity
    (128 bits from the OS) dated by ``clock``; refuses an existing file. Its state."""
    refusal = f"{path} exists: a ledger is never created over a file; move it away first"
    with _new_file(path, refusal), closing(_connection(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
        conn.execute(_IDENTITY_SCHEMA)
        _add_columns(conn)
        _set_identity(conn, (clock or utc_now)())
        return _state(conn)


def _set_identity(conn: sqlite3.Connection, created: float) -> None:
    """Give the ledger behind ``conn`` (without one) a random identity dated ``created``."""
    conn.execute("INSERT INTO ledger_identity VALUES (?, ?)", (secrets.token_hex(16), created))


def give_identity(path: Path) -> LedgerState:
    """Give the ledger ``path``, written before ledgers had identities, a random one (its
    state); a ledger that has one keeps it."""
    with closing(_open(path)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        if "ledger_identity" not in _tables(conn):
            conn.execute(_IDENTITY_SCHEMA)
            _set_identity(conn, utc_now())
        conn.execute("COMMIT")
        return _state(conn)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _state(conn: sqlite3.Connection, mark: Mark | None = None) -> LedgerState:
    """The identity and releases of the ledger behind ``conn``, and whether it holds the
    release ``mark`` names (that row id, at that time)."""
    identity = None
    if "ledger_identity" in _tables(conn):
        row = conn.execute("SELECT identity FROM ledger_identity").fetchone()
        identity = row and row[0]
    releases, newest = conn.execute("SELECT COUNT(*), MAX(id) FROM releases").fetchone()

    def time_of(row_id: int) -> float | None:
        row = conn.execute("SELECT time FROM releases WHERE id = ?", (row_id,)).fetchone()
        return row and row[0]

    return LedgerState(
        identity, releases,
        None if newest is None else Mark(releases, newest, time_of(newest)),
        mark is None or time_of(mark.id) == mark.time,
    )


def ledger_state(path: Path, mark: Mark | None = None,
                 upgrade: bool = True) -> LedgerState | None:
    """The state of the ledger ``path`` (``None`` if there is no such file), against
    ``mark``; ``upgrade=False`` reads a backup without changing it."""
    if not path.exists():
        return None
    with closing(_open(path, upgrade)) as conn:
        return _state(conn, mark)


def copy_ledger(source: Path, target: Path, mark: Mark | None = None) -> LedgerState:
    """Copy the ledger ``source`` to a new file ``target`` (0600, its folder 0700 if new; an
    existing file is refused) with SQLite's online backup, consistent while a run charges
    the source (WAL); the copy's state against ``mark``."""
    refusal = f"{target} exists; a ledger backup never overwrites a file: name a new one"
    with closing(_open(source, upgrade=False)) as conn, _new_file(target, refusal):
        with closing(_connection(target)) as copy:
            conn.backup(copy)
        return ledger_state(target, mark)


def _add_columns(conn: sqlite3.Connection) -> None:
    """Bring a ledger written by an older version to the current columns and tables
    (writing nothing to a current one)."""
    present_tables = _tables(conn)
    for table, create in _ADDED_TABLES.items():
        if table not in present_tables:
            conn.execute(create)  # IF NOT EXISTS: another process may have added it first
    present = {row[1] for row in conn.execute("PRAGMA table_info(releases)")}
    for column in _ADDED_COLUMNS:
        if column.split()[0] not in present:
            try:
                conn.execute(f"ALTER TABLE releases ADD COLUMN {column}")
            except sqlite3.OperationalError as exc:  # another process added it first
                if "duplicate column" not in str(exc):
                    raise
    if "sites_in_sum" not in present:
        _fill_sites_in_sum(conn)


def _fill_sites_in_sum(conn: sqlite3.Connection) -> None:
    """Give an older ledger's secure releases their ``M`` from their mechanism names, so
    their unconditional guarantee is accounted for (idempotent)."""
    rows = conn.execute(
        "SELECT id, mechanism FROM releases WHERE sites_in_sum = 0 AND "
        "(mechanism LIKE '%+secagg(m=%' OR mechanism LIKE '%+ddg(m=%')"
    ).fetchall()
    for row_id, mechanism in rows:
        conn.execute("UPDATE releases SET sites_in_sum = ? WHERE id = ?",
                     (int(_SECURE_MECHANISM.search(mechanism).group(1)), row_id))


#: An accounted row: ``(sensitivity, sigma, summands, padded, sites_in_sum)``.
Accounted = tuple[float, float, int, int, int]


def _releases(rows: list[Accounted]) -> list[Release]:
    """The releases of accounted rows (sorted so equal histories share the caches)."""
    return [Release("", *row[:2], (), *row[2:]) for row in sorted(rows)]


def _epsilon(rows: list[Accounted], delta: float) -> float:
    """The conditional epsilon at ``delta`` of the releases of accounted ``rows``."""
    return composed_epsilon(_releases(rows), delta)


def _worst_case(rows: list[Accounted], delta: float) -> float:
    """The unconditional epsilon at ``delta`` of the releases of accounted ``rows``."""
    return worst_case_epsilon(_releases(rows), delta)


def _accounted(row: dict[str, Any]) -> Accounted:
    return (row["sensitivity"], row["sigma"], row["summands"], row["padded"],
            row["sites_in_sum"])


def _accounted_release(release: Release) -> Accounted:
    """What the ledger accounts of ``release`` (the row it would write)."""
    return (release.sensitivity, release.sigma, release.summands, release.padded,
            release.sites_in_sum)


def utc_now() -> float:
    """The site's clock: seconds since the Unix epoch (UTC)."""
    return time.time()


def window_starts(now: float) -> dict[str, float]:
    """When each spending window holding ``now`` began (Unix seconds): ``daily`` at the
    start of its UTC calendar day, ``weekly`` 7 x 24 hours earlier."""
    return {"daily": now - now % DAY_SECONDS, "weekly": now - WEEK_SECONDS}


@dataclass(frozen=True)
class RunCharge:
    """One run's releases: its id (the coordinator's), algorithm, data fingerprint, the
    releases its calibration assumed (``max_releases``: a cap per run, not a privacy bound,
    since the coordinator picks run ids; the site's spending windows and lifetime are), and
    ``description``: public facts about the run as the site planned it, for the site's
    privacy officer (e.g. ``{"algorithm": "dpdis-pca", "k": 2, "contract": "<sha256>",
    "centring": "standardize", "releases": 3}``), recorded at the run's first charge
    (:func:`clean_description`: JSON scalars, text cut to printable characters); the budget
    rules never read it."""

    run_id: str
    algorithm: str
    fingerprint: str
    max_releases: int
    description: Mapping[str, Any] = field(default_factory=dict, hash=False)


def clean_text(text: Any, most: int = MAX_REASON) -> str:
    """``text`` as at most ``most`` printable characters (others become ``?``): what the
    ledger keeps of a text that may come from the coordinator."""
    return "".join(c if c.isprintable() else "?" for c in str(text)[:most])


def clean_description(description: Mapping[str, Any]) -> str:
    """A run's ``description`` as the JSON the ledger stores: at most
    :data:`MAX_DESCRIPTION_KEYS` keys, each value a number, a boolean, null or
    :func:`clean_text` (anything else as its text), so that storing it never fails."""
    kept: dict[str, Any] = {}
    for key, value in list(description.items())[:MAX_DESCRIPTION_KEYS]:
        finite = isinstance(value, (int, float)) and math.isfinite(value)
        kept[clean_text(key, MAX_DESCRIPTION_TEXT)] = (
            value if value is None or isinstance(value, bool) or finite
            else clean_text(value, MAX_DESCRIPTION_TEXT))
    return json.dumps(kept, sort_keys=True)


class SiteLedger:
    """The lifetime ledger of one population of a site, stored in SQLite at ``path``.

    Args:
        path: the database file (an existing ledger: :func:`create_ledger` makes one).
        population: whose budget this is.
        epsilon, delta: the lifetime budget (conditional guarantee of secure releases).
        site: the site's name, for messages.
        worst_case_epsilon: the lifetime bound, at ``delta``, on the unconditional guarantee
            of all releases (secure ones at their own share); ``None`` refuses every release
            inside a secure sum.
        daily_epsilon, weekly_epsilon: ceilings, at ``delta``, on the releases charged in
            the current UTC calendar day and in the last 7 x 24 hours (conditional
            guarantee); ``None``: no ceiling.
        clock: the site's clock (Unix seconds; default :func:`utc_now`), which dates every
            release and places it in the windows.
        witness: the site's identity file of this ledger: the ledger is checked against it
            now and at every charge, which moves its high-water mark; ``None``: no check
            (a ledger read by tools and tests; a real site always has one).
    """

    def __init__(
        self, path: str | Path, population: str, epsilon: float, delta: float,
        site: str = "site", worst_case_epsilon: float | None = None,
        daily_epsilon: float | None = None, weekly_epsilon: float | None = None,
        clock: Callable[[], float] | None = None, witness: LedgerWitness | None = None,
    ) -> None:
        check_privacy_parameters(epsilon, delta)
        for bound in (worst_case_epsilon, daily_epsilon, weekly_epsilon):
            if bound is not None:
                check_privacy_parameters(bound, delta)
        self.path = Path(path)
        self.population = population
        self.epsilon = epsilon
        self.delta = delta
        self.site = site
        self.worst_case_epsilon = worst_case_epsilon
        self.ceilings = {"daily": daily_epsilon, "weekly": weekly_epsilon}
        self.clock = clock or utc_now
        self.witness = witness
        if witness is None:
            with closing(_open(self.path)):
                pass
        else:
            self.verify()

    def verify(self) -> LedgerState:
        """Refuse this ledger (opened with its ``witness``) unless it is the one its identity
        file names, holding every release up to the file's high-water mark; its state."""
        record = self.witness.read()
        found = ledger_state(self.path, record and record.mark)
        self.witness.verify(record, found)
        return found

    def for_run(self, charge: RunCharge, plan: Sequence[Release] | None = None) -> RunLedger:
        """The ledger a site charges during one run (``plan``: the run's releases as the
        site planned them, which every later check reads)."""
        return RunLedger(self, charge, plan)

    def rows(self) -> list[dict[str, Any]]:
        """Every release of this population, oldest first (as stored: ``time`` in Unix
        seconds, ``sensitivity`` and ``sigma`` in grid units when ``summands`` > 0)."""
        with closing(_open(self.path)) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(
                "SELECT * FROM releases WHERE population = ? ORDER BY id", (self.population,)
            ).fetchall()
        return [dict(row) for row in rows]

    def epsilon_spent(self) -> float:
        """Lifetime epsilon spent at the lifetime delta (PLD; conditional guarantee)."""
        return _epsilon([_accounted(r) for r in self.rows()], self.delta)

    def worst_case_spent(self) -> float:
        """Lifetime unconditional epsilon spent at the lifetime delta."""
        return _worst_case([_accounted(r) for r in self.rows()], self.delta)

    def runs_remaining(self, run: list[Release], most: int = MAX_RUNS_COUNTED) -> int:
        """How many more runs of ``run``'s releases fit the lifetime budget (and, for
        releases inside secure sums, the worst-case bound) after every release charged so
        far, composed by the accountant that charges them; counted up to ``most``."""
        spent = [_accounted(r) for r in self.rows()]
        planned = [_accounted_release(release) for release in run]
        secure = any(release.sites_in_sum for release in run)
        return _most_runs(lambda runs: self._lifetime_refusal(
            spent + planned * runs, secure, "them") is None, most)

    def runs_now(self, run: list[Release], most: int = MAX_RUNS_COUNTED) -> int:
        """How many more runs of ``run``'s releases fit if they all landed now: the lifetime
        budget and every spending window's ceiling (:meth:`run_refusal`); counted up to
        ``most``. At most :meth:`runs_remaining`; fewer while a window is nearly spent."""
        return _most_runs(lambda runs: self.run_refusal(list(run) * runs) is None, most)

    def run_refusal(self, planned: Sequence[Release]) -> str | None:
        """Why the ``planned`` releases (what is left of a run as the site calibrates it,
        e.g. :meth:`~fedpca.site.policy.SitePolicyFile.planned_run`) would not all
        fit after every release charged so far, all of them assumed to land now: the
        lifetime budget, the worst-case bound (when they are inside secure sums) or a
        spending window's ceiling they would pass; ``None`` when they fit. Public numbers
        only (budgets, and epsilons of the ledger's releases); writes nothing."""
        now = self.clock()
        dated = [(_accounted(r), r["time"]) for r in self.rows()]
        dated += [(_accounted_release(release), now) for release in planned]
        secure = any(release.sites_in_sum for release in planned)
        return next(self._refusals(dated, now, secure, "this run"), None)

    def require_run(self, planned: Sequence[Release], algorithm: str) -> None:
        """Refuse (:class:`~fedpca.errors.BudgetExceededError`, nothing charged) a run of
        ``algorithm`` whose ``planned`` releases do not all fit (:meth:`run_refusal`): a
        site asks this before the run's first release, so that no site spends on a run
        that it cannot finish."""
        reason = self.run_refusal(planned)
        if reason is not None:
            raise BudgetExceededError(
                f"{self.site}: refused this run of {algorithm}: the {len(planned)} releases "
                f"left of it, as this site calibrates them, do not fit: {reason}; nothing "
                "was released"
            )

    def run_releases(self, run_id: str) -> int:
        """How many releases run ``run_id`` has made at this site."""
        with closing(_open(self.path)) as conn:
            return conn.execute(
                "SELECT COUNT(*) FROM releases WHERE population = ? AND run_id = ?",
                (self.population, run_id),
            ).fetchone()[0]

    def backup(self, target: str | Path) -> int:
        """Copy the ledger to a new file ``target`` (created 0600; an existing file is
        refused) with SQLite's online backup, consistent while a run charges it (WAL);
        returns the copy's releases of every population."""
        return copy_ledger(self.path, Path(target)).releases

    def epsilon_of(self, rows: Sequence[Mapping[str, Any]]) -> float:
        """The conditional epsilon at the ledger's delta of the releases of ``rows`` (rows of
        :meth:`rows`), composed as a charge composes them."""
        return _epsilon([_accounted(r) for r in rows], self.delta)

    def worst_case_of(self, rows: Sequence[Mapping[str, Any]]) -> float:
        """The unconditional epsilon at the ledger's delta of the releases of ``rows``."""
        return _worst_case([_accounted(r) for r in rows], self.delta)

    def windows(self, rows: Sequence[Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
        """Each spending window holding ``now``: its start, ceiling, and the epsilon spent and
        releases of ``rows`` inside it."""
        windows = []
        for window, since in window_starts(now).items():
            inside = [r for r in rows if r["time"] >= since]
            spent, ceiling = self.epsilon_of(inside), self.ceilings[window]
            windows.append({
                "window": window, "since": since, "releases": len(inside),
                "epsilon_ceiling": ceiling, "epsilon_spent": spent,
                "epsilon_remaining": None if ceiling is None else max(0.0, ceiling - spent),
            })
        return windows

    def run_records(self) -> dict[str, dict[str, Any]]:
        """The ``runs`` rows of this population by run id: ``started``, ``planned``,
        ``description`` (a dict), ``status``, ``reason``, ``ended`` (``None`` until
        :meth:`end_run`). Runs of older ledgers may have none."""
        with closing(_open(self.path)) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute("SELECT * FROM runs WHERE population = ?",
                                (self.population,)).fetchall()
        return {row["run_id"]: {**dict(row), "description": json.loads(row["description"])}
                for row in rows}

    def end_run(self, run_id: str, status: str, reason: str = "") -> bool:
        """Record how run ``run_id`` ended (``"complete"`` or ``"failed"``, with ``reason``),
        dated by the site's clock, in one ``BEGIN IMMEDIATE`` transaction; whether it was
        recorded. Changes no budget: what a failed run released stays spent.

        Untrusted input: ``run_id`` and ``reason`` may come from the coordinator. Only a run
        that made a release of this population here, and only its first end, is recorded
        (``False``, nothing written, otherwise): a coordinator cannot fill the ledger with
        runs the site never took part in, nor rewrite an end; ``reason`` is kept as at most
        :data:`MAX_REASON` printable characters (:func:`clean_text`). What a hostile
        coordinator can still do: end one of its own runs here first, as failed with a
        reason of its choosing, which the report shows as that run's status, with the
        budget it spent; it cannot change a number."""
        if status not in RUN_ENDS:
            raise ConfigurationError(f"a run ends {' or '.join(RUN_ENDS)}, not {status!r}")
        kept = clean_text(reason)
        with closing(_open(self.path)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                started, planned = conn.execute(
                    "SELECT MIN(time), MAX(planned) FROM releases WHERE population = ? AND "
                    "run_id = ?", (self.population, run_id)).fetchone()
                if started is None:  # no release of this run here
                    conn.execute("ROLLBACK")
                    return False
                conn.execute(  # a run an older ledger started has no row yet
                    "INSERT OR IGNORE INTO runs (population, run_id, started, planned, "
                    "description) VALUES (?,?,?,?,'{}')", (self.population, run_id, started,
                                                           planned))
                ended = conn.execute(
                    "UPDATE runs SET status = ?, reason = ?, ended = ? WHERE population = ? "
                    "AND run_id = ? AND ended IS NULL",
                    (status, kept, self.clock(), self.population, run_id)).rowcount
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return bool(ended)

    def note_policy(self, snapshot: Mapping[str, Any]) -> list[str]:
        """Record the site's policy settings ``snapshot`` (plain JSON values by their keys in
        the policy file) when they differ from the latest recorded, or none is: a row dated
        by the site's clock with the settings and each change. The changes as sentences
        (:func:`fedpca.site.policy_changes.sentences`: ``policy recorded: ...`` the first
        time, ``KEY OLD -> NEW`` after); ``[]``, writing nothing, when nothing changed.
        Only the site calls this (its own policy file); the budget rules never read it."""
        settings = json.loads(json.dumps(dict(snapshot), sort_keys=True))
        if self._latest_policy() == settings:  # the common case: no write lock taken
            return []
        with closing(_open(self.path)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                before = self._latest_policy(conn)
                if before == settings:  # another process recorded it meanwhile
                    conn.execute("ROLLBACK")
                    return []
                conn.execute(
                    "INSERT INTO policy_events (time, policy, changes) VALUES (?,?,?)",
                    (self.clock(), json.dumps(settings, sort_keys=True),
                     json.dumps(policy_changes.changes(before, settings))))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return policy_changes.sentences(before, settings)

    def policy_events(self) -> list[dict[str, Any]]:
        """Every recorded change of the site's policy, oldest first: ``time``, ``policy``
        (the settings) and ``changes`` (``[key, old, new]``; empty for the first)."""
        with closing(_open(self.path)) as conn:
            rows = conn.execute(
                "SELECT time, policy, changes FROM policy_events ORDER BY id").fetchall()
        return [{"time": time_, "policy": json.loads(policy), "changes": json.loads(changes)}
                for time_, policy, changes in rows]

    def _latest_policy(self, conn: sqlite3.Connection | None = None) -> dict[str, Any] | None:
        """The settings last recorded (``None``: none yet), through ``conn`` if given."""
        if conn is None:
            with closing(_open(self.path)) as own:
                return self._latest_policy(own)
        row = conn.execute(
            "SELECT policy FROM policy_events ORDER BY id DESC LIMIT 1").fetchone()
        return None if row is None else json.loads(row[0])

    def _charge(self, charge: RunCharge, release: Release) -> int:
        """Check and record ``release`` in one transaction; the run's release count after it."""
        if not (math.isfinite(release.sigma) and release.sigma > 0
                and math.isfinite(release.sensitivity) and release.sensitivity > 0):
            raise BudgetExceededError(
                f"{self.site}: refused {release.mechanism}: sigma and sensitivity must be "
                "finite and > 0"
            )
        new = _accounted_release(release)
        described = clean_description(charge.description)  # never fails in the transaction
        with closing(_open(self.path)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._verify_for_run(conn)
                now = self.clock()
                rows = conn.execute(
                    f"SELECT {_ACCOUNTED}, run_id, time, algorithm FROM releases "
                    "WHERE population = ?",
                    (self.population,),
                ).fetchall()
                earlier = {r[7] for r in rows if r[5] == charge.run_id}
                run = sum(r[5] == charge.run_id for r in rows) + 1
                self._check(charge, release, run, [(r[:5], r[6]) for r in rows] + [(new, now)],
                            now, earlier)
                conn.execute(
                    "INSERT INTO releases (time, population, run_id, algorithm, mechanism, "
                    "sensitivity, sigma, shape, data_fingerprint, summands, padded, "
                    "sites_in_sum, planned, grid_step) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (now, self.population, charge.run_id, charge.algorithm,
                     release.mechanism, release.sensitivity, release.sigma,
                     json.dumps(list(release.shape)), charge.fingerprint, release.summands,
                     release.padded, release.sites_in_sum, charge.max_releases,
                     release.grid_step),
                )
                if run == 1:
                    conn.execute(
                        "INSERT OR IGNORE INTO runs (population, run_id, started, planned, "
                        "description) VALUES (?,?,?,?,?)",
                        (self.population, charge.run_id, now, charge.max_releases, described),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._advance(conn)
        return run

    def _verify_for_run(self, conn: sqlite3.Connection) -> None:
        """In a charge's transaction: refuse the ledger behind ``conn`` unless it passes
        :meth:`verify` (the run's coordinator is told a fixed reason, the site's log why)."""
        if self.witness is None:
            return
        try:
            record = self.witness.read()
            self.witness.verify(record, _state(conn, record and record.mark))
        except LedgerIdentityError as error:
            raise refused_run(self.site, error) from None

    def _advance(self, conn: sqlite3.Connection) -> None:
        """After a charge is committed: move the identity file's high-water mark to the
        ledger's newest release, holding the write lock so that no other charge interleaves."""
        if self.witness is None:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            self.witness.advance(_state(conn))
        finally:
            conn.execute("COMMIT")

    def _check(self, charge: RunCharge, release: Release, run: int,
               dated: list[tuple[Accounted, float]], now: float, earlier: set[str]) -> None:
        """Refuse ``release`` (the last of the ``dated`` releases, the run's ``run``-th)
        in a run whose ``earlier`` releases here were of another algorithm (its calibration
        assumed one plan per run), past the run's release cap or any bound of
        :meth:`_refusals`."""
        refused = f"{self.site}: refused {release.mechanism}"
        if earlier - {charge.algorithm}:
            raise BudgetExceededError(
                f"{refused}: this run's earlier releases here were of "
                f"{', '.join(sorted(earlier))}, and one run is one algorithm (its releases "
                f"are calibrated together); this request asks for {charge.algorithm}; "
                "nothing was released"
            )
        if run > charge.max_releases:
            raise BudgetExceededError(
                f"{refused}: this site's policy allows {charge.max_releases} releases per run "
                f"of {charge.algorithm} and this run has made {run - 1}; nothing was released"
            )
        reason = next(self._refusals(dated, now, bool(release.sites_in_sum), "this release"),
                      None)
        if reason is not None:
            raise BudgetExceededError(f"{refused}: {reason}; nothing was released")

    def _refusals(self, dated: list[tuple[Accounted, float]], now: float, secure: bool,
                  after: str) -> Iterator[str]:
        """Each bound the ``dated`` releases (the last of them new, charged at ``now``) would
        pass, the longest-lasting first: the lifetime budget and the worst-case bound
        (checked when the new ones are ``secure``), then the weekly and daily ceilings;
        each reason quotes the epsilon ``after`` (e.g. "this release") they would reach."""
        lifetime = self._lifetime_refusal([r for r, _ in dated], secure, after)
        if lifetime is not None:
            yield lifetime
        for window, since in reversed(window_starts(now).items()):
            reason = self._window_refusal(window, [r for r, t in dated if t >= since], now,
                                          after)
            if reason is not None:
                yield reason

    def _lifetime_refusal(self, rows: list[Accounted], secure: bool, after: str) -> str | None:
        """Why ``rows`` do not compose within the lifetime budget or, when the new ones are
        ``secure`` (inside secure sums), within the worst-case bound; ``None`` if they do."""
        spent = _epsilon(rows, self.delta)
        if spent > self.epsilon * (1 + EPSILON_SLACK):
            return (f"the site's lifetime budget epsilon={self.epsilon:g} (delta={self.delta:g}) "
                    f"would be exceeded ({spent:.4g} after {after})")
        if not secure:
            return None
        if self.worst_case_epsilon is None:
            return ("it is revealed only inside secure sums, and this site's policy sets no "
                    "budget.worst-case-epsilon for what a coordinator that bypasses the secure "
                    "sum would see; set one (fedpca site init suggests values)")
        worst = _worst_case(rows, self.delta)
        if worst > self.worst_case_epsilon * (1 + EPSILON_SLACK):
            return (f"against a coordinator that bypasses the secure sum, the site's "
                    f"worst-case lifetime budget epsilon={self.worst_case_epsilon:g} "
                    f"(delta={self.delta:g}) would be exceeded ({worst:.4g} after {after})")
        return None

    def _window_refusal(self, window: str, inside: list[Accounted], now: float,
                        after: str) -> str | None:
        """Why the releases ``inside`` a spending window would pass its ceiling (and when
        it reopens); ``None`` if they do not."""
        ceiling = self.ceilings[window]
        if ceiling is None:
            return None
        spent = _epsilon(inside, self.delta)
        if spent <= ceiling * (1 + EPSILON_SLACK):
            return None
        reopens = (f"the day ends at {_utc(now - now % DAY_SECONDS + DAY_SECONDS)} UTC"
                   if window == "daily" else "a release leaves it 7 days after it was made")
        return (f"the site's {window} ceiling epsilon={ceiling:g} (delta={self.delta:g}) over "
                f"{WINDOWS[window]} would be exceeded ({spent:.4g} after {after}); {reopens}")


class RunLedger:
    """One run's view of a :class:`SiteLedger`: what a site charges while answering it.

    It offers what :class:`~fedpca.algorithms.site.PrivateSite` needs of a ledger
    (``charge``, ``count``, ``epsilon_spent``) and writes through to the database at once.
    """

    def __init__(self, ledger: SiteLedger, charge: RunCharge,
                 plan: Sequence[Release] | None = None) -> None:
        self.ledger = ledger
        self.run = charge
        self.plan = None if plan is None else tuple(plan)
        self._count = ledger.run_releases(charge.run_id)

    @property
    def count(self) -> int:
        """Releases this run has made at this site."""
        return self._count

    def charge(self, release: Release) -> None:
        """Durably record ``release`` (or raise, recording nothing)."""
        self._count = self.ledger._charge(self.run, release)

    def require_run(self, planned: Sequence[Release]) -> None:
        """Refuse the run unless the ``planned`` releases left of it fit
        (:meth:`SiteLedger.require_run`); nothing is recorded. With the site's plan of the
        run (:class:`~fedpca.site.plan.RunPlan`), ``planned`` (the answering algorithm's own
        count) must be the rest of that plan: two counts of one run that disagree are a
        fault, refused before anything is charged."""
        if self.plan is not None and not _same_releases(planned, self.plan[self._count:]):
            raise ConfigurationError(
                f"{self.ledger.site}: refused: the algorithm plans {len(planned)} more "
                f"releases for run {self.run.run_id!r}, the site's plan of the run "
                f"{len(self.plan) - self._count}, or at another calibration; nothing was "
                "released (a fault in fedpca: report it)")
        self.ledger.require_run(planned, self.run.algorithm)

    def epsilon_spent(self) -> float:
        """Epsilon this run has spent at the ledger's delta (conditional guarantee)."""
        return _epsilon([_accounted(r) for r in self._run_rows()], self.ledger.delta)

    def worst_case_spent(self) -> float:
        """The unconditional epsilon this run has spent at the ledger's delta."""
        return _worst_case([_accounted(r) for r in self._run_rows()], self.ledger.delta)

    def _run_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.ledger.rows() if r["run_id"] == self.run.run_id]


def _same_releases(one: Sequence[Release], other: Sequence[Release]) -> bool:
    """Whether two lists of releases are accounted alike (their labels aside)."""
    return len(one) == len(other) and all(
        math.isclose(a, b, rel_tol=1e-12)
        for x, y in zip(one, other)
        for a, b in zip(_accounted_release(x), _accounted_release(y)))


def _most_runs(fits: Callable[[int], bool], most: int) -> int:
    """The most runs ``r <= most`` with ``fits(r)`` (``fits`` monotone: more runs never
    spend less), by doubling then bisection."""
    fitting, failing = 0, 1  # fits(fitting); fits(failing) unknown until the search
    while failing <= most and fits(failing):
        fitting, failing = failing, 2 * failing
    failing = min(failing, most + 1)
    while failing - fitting > 1:
        middle = (fitting + failing) // 2
        fitting, failing = (middle, failing) if fits(middle) else (fitting, middle)
    return fitting


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))

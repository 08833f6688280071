"""The SQLite file of a site's lifetime ledger: its schema, connections, creation, copies and
the upgrade of a ledger an older fedpca wrote.

The budget rules that read and charge it are :class:`~fedpca.site.ledger.SiteLedger`'s; the
records it keeps beside the releases for the site's privacy officer are
:mod:`fedpca.site.ledger_records`'. What the file holds (the ``releases`` table, and the
``runs``, ``policy_events`` and ``ledger_identity`` tables), its durability (WAL,
``synchronous=FULL``, one ``BEGIN IMMEDIATE`` transaction per charge) and why a ledger is
created only on purpose are in :mod:`fedpca.site.ledger`. Opening a ledger
(:func:`connect_ledger`) never creates a file; :func:`create_ledger` creates one only where
no file is, and :func:`copy_ledger` copies one only to a new file.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from fedpca.file_modes import create_owner_only
from fedpca.site.ledger_identity import LedgerIdentityError, LedgerState, Mark

__all__ = [
    "LOCK_TIMEOUT",
    "WAL_FILES",
    "connect_ledger",
    "copy_ledger",
    "create_ledger",
    "give_identity",
    "immediate",
    "ledger_state",
    "state_of",
    "utc_now",
]

#: Seconds a charge waits for another process's charge to commit.
LOCK_TIMEOUT = 60.0

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
    "protocol_steps": "CREATE TABLE IF NOT EXISTS protocol_steps (population TEXT NOT NULL, "
                      "run_id TEXT NOT NULL, round INTEGER NOT NULL, stage TEXT NOT NULL, "
                      "time REAL NOT NULL, note TEXT NOT NULL, "
                      "PRIMARY KEY (population, run_id, round, stage))",
    "replies": "CREATE TABLE IF NOT EXISTS replies (population TEXT NOT NULL, run_id TEXT "
               "NOT NULL, digest TEXT NOT NULL, reply BLOB NOT NULL, "
               "PRIMARY KEY (population, run_id, digest))",
    "run_state": "CREATE TABLE IF NOT EXISTS run_state (population TEXT NOT NULL, run_id TEXT "
                 "NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, "
                 "PRIMARY KEY (population, run_id, key))",
}
#: The tables a backup leaves empty: a run's secrets (:mod:`fedpca.site.reply_journal`).
SECRET_TABLES = ("run_state",)
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


def connect_ledger(path: Path, upgrade: bool = True) -> sqlite3.Connection:
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
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` transaction on ``conn`` (the write lock held from its start):
    committed when the block ends, rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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
        return state_of(conn)


def _set_identity(conn: sqlite3.Connection, created: float) -> None:
    """Give the ledger behind ``conn`` (without one) a random identity dated ``created``."""
    conn.execute("INSERT INTO ledger_identity VALUES (?, ?)", (secrets.token_hex(16), created))


def give_identity(path: Path) -> LedgerState:
    """Give the ledger ``path``, written before ledgers had identities, a random one (its
    state); a ledger that has one keeps it."""
    with closing(connect_ledger(path)) as conn:
        with immediate(conn):
            if "ledger_identity" not in _tables(conn):
                conn.execute(_IDENTITY_SCHEMA)
                _set_identity(conn, utc_now())
        return state_of(conn)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def state_of(conn: sqlite3.Connection, mark: Mark | None = None) -> LedgerState:
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
    with closing(connect_ledger(path, upgrade)) as conn:
        return state_of(conn, mark)


def copy_ledger(source: Path, target: Path, mark: Mark | None = None) -> LedgerState:
    """Copy the ledger ``source`` to a new file ``target`` (0600, its folder 0700 if new; an
    existing file is refused) with SQLite's online backup, consistent while a run charges
    the source (WAL); the copy's state against ``mark``."""
    refusal = f"{target} exists; a ledger backup never overwrites a file: name a new one"
    with closing(connect_ledger(source, upgrade=False)) as conn, _new_file(target, refusal):
        with closing(_connection(target)) as copy:
            conn.backup(copy)
            for table in set(SECRET_TABLES) & _tables(copy):
                copy.execute(f"DELETE FROM {table}")
            copy.execute("VACUUM")  # no page of the secrets stays in the file
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


def utc_now() -> float:
    """The site's clock: seconds since the Unix epoch (UTC)."""
    return time.time()

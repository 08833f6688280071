"""A site's lifetime privacy ledger on its own disk: every release of every run, in SQLite.

Privacy guarantee enforced (unit: one record of the site's population, replace-one): the
composition of *all* releases ever charged to a population (PLD; with distributed discrete
Gaussian releases among them, the smaller of their two valid bounds,
:func:`fedpca.privacy.ledger.composed_epsilon`) stays within the lifetime
``(epsilon, delta)`` of the site's policy, and the releases of one run stay within the
run's ceiling (``run_epsilon`` at the same delta, at most ``max_releases``). A release that
would break either is refused before anything is computed or sent, and nothing is recorded.

Durability and races. A charge is one ``BEGIN IMMEDIATE`` transaction (check, then insert)
committed with ``synchronous=FULL`` *before* the caller draws noise or answers: a crash
after the charge leaves the budget spent, never unspent, and two processes of one site
(two ClientApps, two runs) cannot both spend the last of it, because SQLite serialises the
writers. The database is in WAL mode, so ``fedpca site ledger`` can read it during a run.

Each row records the mechanism, sensitivity, sigma, shape, run id, time, algorithm and the
fingerprint (SHA-256) of the data file, for the site's auditors, and for a distributed
discrete Gaussian release its summands and padded dimension (columns added to older ledgers
with 0, "continuous Gaussian", which every older row is). The coordinator never reads this
file.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedpca.errors import BudgetExceededError
from fedpca.privacy.calibration import check_privacy_parameters
from fedpca.privacy.ledger import EPSILON_SLACK, composed_epsilon
from fedpca.privacy.mechanisms import Release

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
    padded INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS releases_population ON releases (population, run_id);
"""
#: Columns later versions added, with the value every older row has (continuous Gaussian).
_ADDED_COLUMNS = ("summands INTEGER NOT NULL DEFAULT 0", "padded INTEGER NOT NULL DEFAULT 0")
#: The columns the accounting reads, in :class:`Release`'s order.
_ACCOUNTED = "sensitivity, sigma, summands, padded"


def _connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, full sync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=LOCK_TIMEOUT, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(_SCHEMA)
    _add_columns(conn)
    return conn


def _add_columns(conn: sqlite3.Connection) -> None:
    """Bring a ledger written by an older version to the current columns."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(releases)")}
    for column in _ADDED_COLUMNS:
        if column.split()[0] not in present:
            try:
                conn.execute(f"ALTER TABLE releases ADD COLUMN {column}")
            except sqlite3.OperationalError as exc:  # another process added it first
                if "duplicate column" not in str(exc):
                    raise


def _epsilon(rows: list[tuple[float, float, int, int]], delta: float) -> float:
    """Epsilon at ``delta`` of releases given as ``(sensitivity, sigma, summands, padded)``
    rows (sorted so equal histories share the accountants' caches)."""
    return composed_epsilon([Release("", *row[:2], (), *row[2:]) for row in sorted(rows)], delta)


def _accounted(row: dict[str, Any]) -> tuple[float, float, int, int]:
    return row["sensitivity"], row["sigma"], row["summands"], row["padded"]


@dataclass(frozen=True)
class RunCharge:
    """What one run may spend: its id, algorithm, data fingerprint and ceilings."""

    run_id: str
    algorithm: str
    fingerprint: str
    run_epsilon: float
    max_releases: int


class SiteLedger:
    """The lifetime ledger of one population of a site, stored in SQLite at ``path``.

    Args:
        path: the database file (created if absent).
        population: whose budget this is.
        epsilon, delta: the lifetime budget.
        site: the site's name, for messages.
    """

    def __init__(
        self, path: str | Path, population: str, epsilon: float, delta: float, site: str = "site"
    ) -> None:
        check_privacy_parameters(epsilon, delta)
        self.path = Path(path)
        self.population = population
        self.epsilon = epsilon
        self.delta = delta
        self.site = site
        with closing(_connect(self.path)):
            pass

    def for_run(self, charge: RunCharge) -> RunLedger:
        """The ledger a site charges during one run."""
        return RunLedger(self, charge)

    def rows(self) -> list[dict[str, Any]]:
        """Every release of this population, oldest first."""
        with closing(_connect(self.path)) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(
                "SELECT * FROM releases WHERE population = ? ORDER BY id", (self.population,)
            ).fetchall()
        return [dict(row) for row in rows]

    def epsilon_spent(self) -> float:
        """Lifetime epsilon spent at the lifetime delta (PLD)."""
        return _epsilon([_accounted(r) for r in self.rows()], self.delta)

    def summary(self) -> dict[str, Any]:
        """Spending per run, per data set and in total, with what remains (for auditors)."""
        rows = self.rows()
        spent = _epsilon([_accounted(r) for r in rows], self.delta)
        return {
            "site": self.site,
            "population": self.population,
            "ledger": str(self.path),
            "epsilon_budget": self.epsilon,
            "delta": self.delta,
            "epsilon_spent": spent,
            "epsilon_remaining": max(0.0, self.epsilon - spent),
            "releases": len(rows),
            "runs": _grouped(rows, "run_id", self.delta),
            "datasets": _grouped(rows, "data_fingerprint", self.delta),
            "rows": rows,
        }

    def _charge(self, charge: RunCharge, release: Release) -> int:
        """Check and record ``release`` in one transaction; the run's release count after it."""
        if not (math.isfinite(release.sigma) and release.sigma > 0
                and math.isfinite(release.sensitivity) and release.sensitivity > 0):
            raise BudgetExceededError(
                f"{self.site}: refused {release.mechanism}: sigma and sensitivity must be "
                "finite and > 0"
            )
        new = (release.sensitivity, release.sigma, release.summands, release.padded)
        with closing(_connect(self.path)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                lifetime = conn.execute(
                    f"SELECT {_ACCOUNTED}, run_id FROM releases WHERE population = ?",
                    (self.population,),
                ).fetchall()
                run = [tuple(r[:4]) for r in lifetime if r[4] == charge.run_id]
                self._check(charge, release, run + [new],
                            [tuple(r[:4]) for r in lifetime] + [new])
                conn.execute(
                    "INSERT INTO releases (time, population, run_id, algorithm, mechanism, "
                    "sensitivity, sigma, shape, data_fingerprint, summands, padded) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (time.time(), self.population, charge.run_id, charge.algorithm,
                     release.mechanism, release.sensitivity, release.sigma,
                     json.dumps(list(release.shape)), charge.fingerprint, release.summands,
                     release.padded),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return len(run) + 1

    def _check(self, charge: RunCharge, release: Release, run: list, lifetime: list) -> None:
        refused = f"{self.site}: refused {release.mechanism}"
        if len(run) > charge.max_releases:
            raise BudgetExceededError(
                f"{refused}: this site's policy allows {charge.max_releases} releases per run "
                f"of {charge.algorithm} and this run has made {len(run) - 1}; nothing was released"
            )
        run_epsilon = _epsilon(run, self.delta)
        if run_epsilon > charge.run_epsilon * (1 + EPSILON_SLACK):
            raise BudgetExceededError(
                f"{refused}: this run would spend epsilon {run_epsilon:.4g}, above the site's "
                f"per-run ceiling {charge.run_epsilon:g}; nothing was released"
            )
        after = _epsilon(lifetime, self.delta)
        if after > self.epsilon * (1 + EPSILON_SLACK):
            raise BudgetExceededError(
                f"{refused}: the site's lifetime budget epsilon={self.epsilon:g} "
                f"(delta={self.delta:g}) would be exceeded ({after:.4g} after this release); "
                "the budget is spent and nothing was released"
            )


class RunLedger:
    """One run's view of a :class:`SiteLedger`: what a site charges while answering it.

    It offers what :class:`~fedpca.algorithms.site.PrivateSite` needs of a ledger
    (``charge``, ``count``, ``epsilon_spent``) and writes through to the database at once.
    """

    def __init__(self, ledger: SiteLedger, charge: RunCharge) -> None:
        self.ledger = ledger
        self.run = charge
        self._count = len(self._run_rows())

    @property
    def count(self) -> int:
        """Releases this run has made at this site."""
        return self._count

    def charge(self, release: Release) -> None:
        """Durably record ``release`` (or raise, recording nothing)."""
        self._count = self.ledger._charge(self.run, release)

    def epsilon_spent(self) -> float:
        """Epsilon this run has spent at the ledger's delta."""
        return _epsilon([_accounted(r) for r in self._run_rows()], self.ledger.delta)

    def _run_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.ledger.rows() if r["run_id"] == self.run.run_id]


def _grouped(rows: list[dict[str, Any]], key: str, delta: float) -> list[dict[str, Any]]:
    """Releases, epsilon (at ``delta``) and time span per value of ``key``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    return [
        {
            key: value,
            "algorithms": sorted({r["algorithm"] for r in members}),
            "releases": len(members),
            "epsilon": _epsilon([_accounted(r) for r in members], delta),
            "first": min(r["time"] for r in members),
            "last": max(r["time"] for r in members),
        }
        for value, members in groups.items()
    ]


def format_ledger(summary: dict[str, Any]) -> str:
    """The ledger summary as tables a privacy officer can read."""
    lines = [
        f"site {summary['site']}, population {summary['population']} ({summary['ledger']})",
        f"lifetime budget epsilon {summary['epsilon_budget']:g} at delta {summary['delta']:g}: "
        f"spent {summary['epsilon_spent']:.4f}, remaining {summary['epsilon_remaining']:.4f} "
        f"in {summary['releases']} releases",
        "",
        f"{'run':<24} {'algorithms':<20} {'releases':>8} {'epsilon':>9}  {'last release (UTC)'}",
    ]
    for run in summary["runs"]:
        lines.append(
            f"{run['run_id']:<24} {','.join(run['algorithms']):<20} {run['releases']:>8} "
            f"{run['epsilon']:>9.4f}  {_utc(run['last'])}"
        )
    lines += ["", f"{'data file (SHA-256)':<24} {'releases':>8} {'epsilon':>9}"]
    for data in summary["datasets"]:
        lines.append(
            f"{data['data_fingerprint'][:24]:<24} {data['releases']:>8} {data['epsilon']:>9.4f}"
        )
    return "\n".join(lines)


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))

"""A site's lifetime privacy ledger on its own disk: every release of every run, in SQLite.

Privacy guarantee enforced (unit: one record of the site's population, replace-one): the
rules of :class:`fedpca.dp.ledger.BudgetRules` over *all* releases ever charged to a
population: their composition stays within the lifetime ``(epsilon, delta)`` of the site's
policy, what a coordinator that bypasses the secure sums sees within its
``worst_case_epsilon`` (a ledger without one refuses every secure release), the releases
charged in the current UTC calendar day within ``daily_epsilon`` and in the last 7 x 24 hours
within ``weekly_epsilon``. Those windows are the site's own clock's, so a coordinator cannot
reset them: a new run id for every request changes nothing (a run only caps its releases at
``max_releases``, what its calibration assumed). A release that would break any of them is
refused before it is sent, and nothing is recorded. Before a run's first release, the site
also asks :meth:`SiteLedger.require_run` whether the *whole* run, as it calibrates it, fits
all of these at once (every one of its releases assumed to land now), and refuses the run
when it does not: no site spends on a run it cannot finish. (Two runs that start at one site
at the same moment are each tested against what the other has charged so far; the
per-release check still holds whichever of them runs out.)

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

Beside the releases the ledger keeps, for the site's privacy officer, its runs (when each
started, what it planned, how it ended: an end never changes a budget), its policy's changes
and its secure-aggregation steps (:mod:`fedpca.site.ledger_records` writes them, with what a
coordinator can and cannot do with them; :mod:`fedpca.site.ledger_report` reads them; the
budget rules never do). Older ledgers get those tables when opened; their runs without a
``runs`` row are reported from their releases.

A ledger is created only on purpose (:func:`~fedpca.site.ledger_store.create_ledger`:
``fedpca site init``, ``fedpca site ledger --new``, a restore), with a random identity it
keeps in its ``ledger_identity`` table; opening one never creates a file, and a ledger opened
with its site's identity file (:class:`~fedpca.site.ledger_identity.LedgerWitness`) is
checked against it when it is opened and at every charge, which then moves the file's
high-water mark (why, and what this stops: :mod:`fedpca.site.ledger_identity`).

The budget rules are :class:`fedpca.dp.ledger.BudgetRules`, the very rules a simulated site's
in-memory ledger decides by; this module keeps them over the site's SQLite releases
(:class:`SiteLedger`, a run's view :class:`RunLedger`); the SQLite file itself (schema,
connections, creation, copies, upgrades of older ledgers) is
:mod:`fedpca.site.ledger_store`'s.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpca.dp.accountant import accounted, composed_epsilon, worst_case_epsilon
from fedpca.dp.events import Release
from fedpca.dp.ledger import BudgetRules, Dated, window_starts
from fedpca.errors import BudgetExceededError, ConfigurationError
from fedpca.site.ledger_identity import (
    LedgerIdentityError,
    LedgerState,
    LedgerWitness,
    refused_run,
)
from fedpca.site.ledger_records import LedgerRecords, clean_description
from fedpca.site.ledger_store import (
    connect_ledger,
    copy_ledger,
    immediate,
    ledger_state,
    state_of,
    utc_now,
)

#: The most runs :meth:`SiteLedger.runs_remaining` counts (a larger count says "at least").
MAX_RUNS_COUNTED = 1000
#: The columns the accounting reads, in :class:`Release`'s order.
_ACCOUNTED = "sensitivity, sigma, summands, padded, sites_in_sum"


def _release(row: Mapping[str, Any] | Sequence[Any]) -> Release:
    """The release of a stored row (a ``releases`` row, or its :data:`_ACCOUNTED` columns
    first), as the accountant reads it."""
    if isinstance(row, Mapping):
        row = [row[column] for column in _ACCOUNTED.split(", ")]
    return Release("", row[0], row[1], (), *row[2:5])


@dataclass(frozen=True)
class RunCharge:
    """One run's releases: its id (the coordinator's), algorithm, data fingerprint, the
    releases its calibration assumed (``max_releases``: a cap per run, not a privacy bound,
    since the coordinator picks run ids; the site's spending windows and lifetime are), and
    ``description``: public facts about the run as the site planned it, for the site's
    privacy officer (e.g. ``{"algorithm": "dpdis-pca", "k": 2, "contract": "<sha256>",
    "centring": "standardize", "releases": 3}``), recorded at the run's first charge
    (:func:`~fedpca.site.ledger_records.clean_description`: JSON scalars, text cut to
    printable characters); the budget rules never read it."""

    run_id: str
    algorithm: str
    fingerprint: str
    max_releases: int
    description: Mapping[str, Any] = field(default_factory=dict, hash=False)


class SiteLedger(LedgerRecords):
    """The lifetime ledger of one population of a site, stored in SQLite at ``path``.

    Args:
        path: the database file (an existing ledger:
            :func:`~fedpca.site.ledger_store.create_ledger` makes one).
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
        self.rules = BudgetRules(epsilon, delta, worst_case_epsilon, daily_epsilon,
                                 weekly_epsilon, site=site)
        self.path = Path(path)
        self.population = population
        self.epsilon = epsilon
        self.delta = delta
        self.site = site
        self.worst_case_epsilon = worst_case_epsilon
        self.ceilings = self.rules.ceilings
        self.clock = clock or utc_now
        self.witness = witness
        if witness is None:
            with closing(connect_ledger(self.path)):
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
        with closing(connect_ledger(self.path)) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(
                "SELECT * FROM releases WHERE population = ? ORDER BY id", (self.population,)
            ).fetchall()
        return [dict(row) for row in rows]

    def epsilon_spent(self) -> float:
        """Lifetime epsilon spent at the lifetime delta (PLD; conditional guarantee)."""
        return self.epsilon_of(self.rows())

    def worst_case_spent(self) -> float:
        """Lifetime unconditional epsilon spent at the lifetime delta."""
        return self.worst_case_of(self.rows())

    def runs_remaining(self, run: list[Release], most: int = MAX_RUNS_COUNTED) -> int:
        """How many more runs of ``run``'s releases fit the lifetime budget (and, for
        releases inside secure sums, the worst-case bound) after every release charged so
        far, composed by the accountant that charges them; counted up to ``most``."""
        lifetime = dataclasses.replace(self.rules, daily_epsilon=None, weekly_epsilon=None)
        spent, now = self._dated(), self.clock()
        return _most_runs(lambda runs: lifetime.refusal(spent, list(run) * runs, now) is None,
                          most)

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
        return self.rules.refusal(self._dated(), planned, self.clock(), after="this run")

    def require_run(self, planned: Sequence[Release], algorithm: str, *,
                    cap: int | None = None, made: int = 0) -> None:
        """Refuse (:class:`~fedpca.errors.BudgetExceededError`, nothing charged) a run of
        ``algorithm`` whose ``planned`` releases do not all fit (:meth:`run_refusal`; with
        ``cap``, the run's release cap after the ``made`` it has made): a site asks this
        before the run's first release, so that no site spends on a run that it cannot
        finish (:meth:`fedpca.dp.ledger.BudgetRules.require_run`)."""
        self.rules.require_run(self._dated(), planned, self.clock(), cap=cap, made=made,
                               algorithm=algorithm)

    def run_releases(self, run_id: str) -> int:
        """How many releases run ``run_id`` has made at this site."""
        with closing(connect_ledger(self.path)) as conn:
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
        return composed_epsilon([_release(r) for r in rows], self.delta)

    def worst_case_of(self, rows: Sequence[Mapping[str, Any]]) -> float:
        """The unconditional epsilon at the ledger's delta of the releases of ``rows``."""
        return worst_case_epsilon([_release(r) for r in rows], self.delta)

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

    def _charge(self, charge: RunCharge, release: Release) -> int:
        """Check and record ``release`` in one transaction; the run's release count after it."""
        described = clean_description(charge.description)  # never fails in the transaction
        with closing(connect_ledger(self.path)) as conn:
            with immediate(conn):
                self._verify_for_run(conn)
                now = self.clock()
                rows = conn.execute(
                    f"SELECT {_ACCOUNTED}, run_id, time, algorithm FROM releases "
                    "WHERE population = ?",
                    (self.population,),
                ).fetchall()
                earlier = {r[7] for r in rows if r[5] == charge.run_id}
                run = sum(r[5] == charge.run_id for r in rows) + 1
                self._check(charge, release, run, [(_release(r), r[6]) for r in rows], now,
                            earlier)
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
            self._advance(conn)
        return run

    def _verify_for_run(self, conn: sqlite3.Connection) -> None:
        """In a charge's transaction: refuse the ledger behind ``conn`` unless it passes
        :meth:`verify` (the run's coordinator is told a fixed reason, the site's log why)."""
        if self.witness is None:
            return
        try:
            record = self.witness.read()
            self.witness.verify(record, state_of(conn, record and record.mark))
        except LedgerIdentityError as error:
            raise refused_run(self.site, error) from None

    def _advance(self, conn: sqlite3.Connection) -> None:
        """After a charge is committed: move the identity file's high-water mark to the
        ledger's newest release, holding the write lock so that no other charge interleaves."""
        if self.witness is not None:
            with immediate(conn):
                self.witness.advance(state_of(conn))

    def _check(self, charge: RunCharge, release: Release, run: int, spent: list[Dated],
               now: float, earlier: set[str]) -> None:
        """Refuse ``release`` (the run's ``run``-th, after the ``spent`` releases) in a run
        whose ``earlier`` releases here were of another algorithm (its calibration assumed
        one plan per run), or that breaks a budget rule (the run's release cap included:
        :meth:`fedpca.dp.ledger.BudgetRules.refusal`)."""
        if earlier - {charge.algorithm}:
            raise BudgetExceededError(
                f"{self.site}: refused {release.mechanism}: this run's earlier releases here "
                f"were of {', '.join(sorted(earlier))}, and one run is one algorithm (its "
                f"releases are calibrated together); this request asks for "
                f"{charge.algorithm}; nothing was released"
            )
        self.rules.require_release(spent, release, now, cap=charge.max_releases,
                                   made=run - 1, algorithm=charge.algorithm)

    def _dated(self) -> list[Dated]:
        """Every release of this population with the time it was charged."""
        return [(_release(r), r["time"]) for r in self.rows()]


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
        self.ledger.require_run(planned, self.run.algorithm, cap=self.run.max_releases,
                                made=self._count)

    def epsilon_spent(self) -> float:
        """Epsilon this run has spent at the ledger's delta (conditional guarantee)."""
        return self.ledger.epsilon_of(self._run_rows())

    def worst_case_spent(self) -> float:
        """The unconditional epsilon this run has spent at the ledger's delta."""
        return self.ledger.worst_case_of(self._run_rows())

    def _run_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.ledger.rows() if r["run_id"] == self.run.run_id]


def _same_releases(one: Sequence[Release], other: Sequence[Release]) -> bool:
    """Whether two lists of releases are accounted alike (their labels aside)."""
    return len(one) == len(other) and all(
        math.isclose(a, b, rel_tol=1e-12)
        for x, y in zip(one, other)
        for a, b in zip(accounted(x), accounted(y)))


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


"""What a site's ledger records beside its releases, for the site's privacy officer.

Two tables of the ledger's SQLite file (:mod:`fedpca.site.ledger_store`), which
:mod:`fedpca.site.ledger_report` reads and the budget rules never do:

* ``runs``: one row per run, written by the run's first charge in the same transaction (so a
  refused charge writes none, :meth:`~fedpca.site.ledger.SiteLedger.for_run`): when it
  started, the releases it planned and what the site planned to release
  (:func:`clean_description` of :attr:`~fedpca.site.ledger.RunCharge.description`), and,
  once :meth:`LedgerRecords.end_run` records it, how it ended (complete, or failed with a
  reason);
* ``policy_events``: every change of the site's own policy, dated by the site's clock when
  the ledger is opened under it (:meth:`LedgerRecords.note_policy`): the settings before and
  after;
* ``protocol_steps``: the secure-aggregation steps the site took once per run and round (its
  key list's acceptance, each masked input, each endorsement, each reveal), written under the
  ledger's write lock before the reply leaves (:meth:`LedgerRecords.record_step`): a second
  request for the same step is refused across processes and restarts, whatever the
  SuperNode's memory holds.

Untrusted input: a run's id and end reason may come from the coordinator. It can end only a
run that released here, once, and at most :data:`MAX_REASON` printable characters of reason
are kept (:func:`clean_text`); an end never changes a budget (what a failed run released
stays spent). Only the site writes ``policy_events`` (its policy file); a coordinator cannot.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.site import policy_changes
from fedpca.site.ledger_store import connect_ledger, immediate

__all__ = [
    "MAX_DESCRIPTION_KEYS",
    "MAX_DESCRIPTION_TEXT",
    "MAX_REASON",
    "RUN_ENDS",
    "LedgerRecords",
    "clean_description",
    "clean_text",
]

#: How a run ended (:meth:`LedgerRecords.end_run`): its released result reached the site, or the
#: coordinator said it failed.
COMPLETE, FAILED = "complete", "failed"
RUN_ENDS = (COMPLETE, FAILED)
#: The secure-aggregation steps a site records once per run and round (round 0: the setup).
KEY_LIST, INPUT, ENDORSE, REVEAL = "key-list", "masked-input", "endorsement", "reveal"
#: The most characters of a run's end reason (untrusted: possibly the coordinator's) kept.
MAX_REASON = 200
#: The most keys of a run's description kept, and characters of each key and text value.
MAX_DESCRIPTION_KEYS, MAX_DESCRIPTION_TEXT = 32, 200


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


class LedgerRecords:
    """The records a :class:`~fedpca.site.ledger.SiteLedger` keeps beside its releases (the
    module docstring), in its SQLite file ``path``, for its ``population``, dated by its
    ``clock``."""

    path: Path
    population: str
    clock: Callable[[], float]

    def run_records(self) -> dict[str, dict[str, Any]]:
        """The ``runs`` rows of the population by run id: ``started``, ``planned``,
        ``description`` (a dict), ``status``, ``reason``, ``ended`` (``None`` until
        :meth:`end_run`), ``key_list`` (its note). Runs of older ledgers may have none."""
        with closing(connect_ledger(self.path)) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute("SELECT * FROM runs WHERE population = ?",
                                (self.population,)).fetchall()
            key_lists = dict(conn.execute(
                "SELECT run_id, note FROM protocol_steps WHERE population = ? AND stage = ?",
                (self.population, KEY_LIST)).fetchall())
        return {row["run_id"]: {**dict(row), "description": json.loads(row["description"]),
                                "key_list": key_lists.get(row["run_id"])}
                for row in rows}

    def record_step(self, run_id: str, round_number: int, stage: str, note: str = "") -> None:
        """Record that the site took secure-aggregation ``stage`` for ``round_number`` of run
        ``run_id`` (with ``note``, the site's own words), in one ``BEGIN IMMEDIATE``
        transaction, before the step's reply leaves; refuses a second record of the same
        step. Changes no budget.

        Untrusted input: ``run_id`` and ``round_number`` come from the coordinator, which
        can only make the site refuse a step it already took (the point) or add a row per
        step it gets the site to take; ``note`` is the site's own text (at most
        :data:`MAX_REASON` characters kept)."""
        try:
            with closing(connect_ledger(self.path)) as conn, immediate(conn):
                conn.execute(
                    "INSERT INTO protocol_steps (population, run_id, round, stage, time, note) "
                    "VALUES (?,?,?,?,?,?)", (self.population, clean_text(run_id), round_number,
                                             stage, self.clock(), clean_text(note)))
        except sqlite3.IntegrityError:
            raise InvalidRequestError(
                f"refused: this site already recorded its {stage} for round {round_number} "
                "of this run in its ledger; a second one is refused") from None

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
        kept, population = clean_text(reason), self.population
        with closing(connect_ledger(self.path)) as conn, immediate(conn):
            for table in ("replies", "run_state"):  # the run's journal ends with it
                conn.execute(f"DELETE FROM {table} WHERE population = ? AND run_id = ?",
                             (population, run_id))
            started, planned = conn.execute(
                "SELECT MIN(time), MAX(planned) FROM releases WHERE population = ? AND "
                "run_id = ?", (population, run_id)).fetchone()
            if started is None:  # no release of this run here: nothing written
                return False
            conn.execute(  # a run an older ledger started has no row yet
                "INSERT OR IGNORE INTO runs (population, run_id, started, planned, "
                "description) VALUES (?,?,?,?,'{}')", (population, run_id, started, planned))
            return bool(conn.execute(
                "UPDATE runs SET status = ?, reason = ?, ended = ? WHERE population = ? "
                "AND run_id = ? AND ended IS NULL",
                (status, kept, self.clock(), population, run_id)).rowcount)

    def note_policy(self, snapshot: Mapping[str, Any]) -> list[str]:
        """Record the site's policy settings ``snapshot`` (plain JSON values by their keys in
        the policy file) when they differ from the latest recorded, or none is: a row dated
        by the site's clock with the settings and each change. The changes as sentences
        (:func:`fedpca.site.policy_changes.sentences`: ``policy recorded: ...`` the first
        time, ``KEY OLD -> NEW`` after); ``[]``, writing nothing, when nothing changed. Only
        the site calls this (its own policy file); the budget rules never read it."""
        settings = json.loads(json.dumps(dict(snapshot), sort_keys=True))
        if _latest_policy(self.path) == settings:  # the common case: no write lock taken
            return []
        with closing(connect_ledger(self.path)) as conn, immediate(conn):
            before = _latest_policy(self.path, conn)
            if before == settings:  # another process recorded it meanwhile: nothing written
                return []
            conn.execute(
                "INSERT INTO policy_events (time, policy, changes) VALUES (?,?,?)",
                (self.clock(), json.dumps(settings, sort_keys=True),
                 json.dumps(policy_changes.changes(before, settings))))
        return policy_changes.sentences(before, settings)

    def policy_events(self) -> list[dict[str, Any]]:
        """Every recorded change of the site's policy, oldest first: ``time``, ``policy``
        (the settings) and ``changes`` (``[key, old, new]``; empty for the first)."""
        with closing(connect_ledger(self.path)) as conn:
            rows = conn.execute(
                "SELECT time, policy, changes FROM policy_events ORDER BY id").fetchall()
        return [{"time": time_, "policy": json.loads(policy), "changes": json.loads(changes)}
                for time_, policy, changes in rows]


def _latest_policy(path: Path, conn: sqlite3.Connection | None = None
                   ) -> dict[str, Any] | None:
    """The settings last recorded (``None``: none yet), through ``conn`` if given."""
    if conn is None:
        with closing(connect_ledger(path)) as own:
            return _latest_policy(path, own)
    row = conn.execute(
        "SELECT policy FROM policy_events ORDER BY id DESC LIMIT 1").fetchone()
    return None if row is None else json.loads(row[0])

"""A data contract: the table every site of a consortium agrees to hold, as a TOML file each
site keeps a copy of and no coordinator can change.

A contract fixes, column by column, how a site's table becomes the rows the algorithms read
(:meth:`Contract.preprocess`, the same pure function at every site):

1. a blank cell (or, with ``unknown = "missing"``, a value that is not one of the column's
   public levels) is imputed with a public value and, by default (``missing =
   "indicator"``), flagged in a 0/1 indicator column ``NAME:missing`` (a categorical
   column's blank is its own one-hot column instead);
2. a numeric value is clipped into the column's public ``range = [lo, hi]`` (in the file's
   units), transformed (``none``, ``log``, ``log1p``: ``T``) and shifted so that the column
   lies in ``[0, w]``, ``w = T(hi) - T(lo)``;
3. a binary column becomes one 0/1 column, a categorical column one 0/1 column ``NAME=LEVEL``
   per public level (one-hot);
4. an ``id`` column (at most one: the site's own record ids) becomes no column at all: it
   is never preprocessed, released or part of any sensitivity; the rows keep their order,
   so ``fedpca site project`` writes each record's scores beside its id
   (:func:`fedpca.site.results.site_scores`). A blank or repeated id is a problem of the
   table (counted, never quoted: an id is for the site's own scores file only). The id is a
   role, not a name: a site whose export calls it otherwise names its own column in its
   policy (``[data] id-column``, :meth:`Contract.site_table`), and a site that has no ids
   leaves the column out (its scores are then keyed by row number, from 1).

**Public scales** (``scale``, optional): a consortium that knows a column's spread from
public knowledge (a reference interval, a population's published standard deviation, a
study's design) states it, and a standardised run then spends no budget on that column's
variance (:mod:`fedpca.dp.moments`): the released sums of squares skip it and its scale
is the stated one, never noisy, never floored. A numeric column takes ``scale = NUMBER``, a
reference standard deviation in the units the column is shifted in: the file's units for
``transform = "none"``, the natural log of the value for ``"log"`` (a reference interval
``[a, b]`` holding 95% of a log-normal value gives ``(ln b - ln a) / 3.92``), of the value
plus one for ``"log1p"``; or ``scale = "range"``: a quarter of the transformed width ``w``
(:data:`~fedpca.data.column_rules.RANGE_RULE`; the range rule of thumb: a bell-shaped
variable holds about 95% of its values within two standard deviations of its mean, so a range
meant to hold nearly every value spans about four; a uniform variable's is ``w / 3.46``, one
at both ends ``w / 2``). A binary column takes ``scale = NUMBER`` (``sqrt(p (1 - p))`` for a
public prevalence ``p``; at most 0.5), a categorical column ``scale = [NUMBER, ...]``, one per
output column (its levels, then its blank's column with ``missing = "indicator"``); an
indicator column ``NAME:missing`` has none. Every scale lies in ``[1e-6 w, w / 2]`` (no
variable in ``[0, w]`` spreads more than ``w / 2``: a larger value is a unit error, e.g. a
log column's scale in file units).

Privacy (unit: one record, replace-one). After preprocessing, output column ``j`` lies in
``[0, w_j]`` (:attr:`Contract.widths`) whatever the records, and the output columns fall in
one-hot groups (a categorical column's levels, its blank included: exactly one 1 per row;
:attr:`Contract.bounds`). Two records' rows differ by at most ``w_j`` in a numeric column, 1
in a binary or indicator column and ``sqrt(2)`` in a one-hot group (two of its columns),
counted once per group, not per level: the replace-one L2 sensitivities of a site's column
sums and sums of squares (:class:`fedpca.dp.moments.ColumnBounds`) come from the
contract alone. A range read off
the data would disclose the records' extremes: ranges come from public knowledge. So do
public scales: a scale read off the data would disclose the records' spread.

Rows are never dropped: ``missing = "drop"`` would make a site's record count depend on the
records (a replaced record can turn a complete row into a dropped one) while record counts
travel in plaintext; it is refused until the noisy count it needs is built.

:attr:`Contract.hash` is the SHA-256 of a canonical serialisation of the parsed contract (not
of the file's bytes: comments, layout, key order and spelled-out defaults do not change it;
the column order does, since it is the output order). Every request names the contract it is
made under, and a real site refuses any other (:mod:`fedpca.site.real_site`): the coordinator
cannot change a range, a column, a level or a public scale, which would change the
sensitivity or the released statistic. A contract without ``scale`` keys hashes as it did
before they existed.

A *table* here is a mapping from column name to a 1-D numpy array: float64 with NaN for a
blank (numbers), or object holding ``str`` and ``None`` for a blank (text);
:mod:`fedpca.data.tables` reads CSV and Parquet files into one.

One column's rule (how it inspects and encodes a table's column, and how a ``[[column]]``
table is parsed into one) is in :mod:`fedpca.data.column_rules`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from fedpca.data.column_rules import (
    ID,
    RANGE_FILL,
    UNFILLED,
    ColumnRule,
    parse_column,
    unknown_keys,
)
from fedpca.dp.moments import ColumnBounds
from fedpca.errors import ConfigurationError, InvalidDataError

logger = logging.getLogger(__name__)

#: The canonical serialisation's version: part of every hash.
FORMAT = "fedpca-contract/1"
#: Whether a table may hold columns the contract does not list (they are never read).
EXTRA_COLUMN_RULES = ("refuse", "ignore")
#: The keys the ``[contract]`` table may hold.
CONTRACT_KEYS = ("name", "extra-columns")


class ContractError(ConfigurationError):
    """A contract file is missing, unreadable or makes no sense (what, where, how to fix)."""


class Preprocessed(NamedTuple):
    """A site's table after the contract: the ``n x d`` rows and their column names."""

    matrix: np.ndarray
    columns: tuple[str, ...]


@dataclass(frozen=True)
class TableReport:
    """What a contract finds in one site's table: ``problems`` make it unusable, ``notes``
    say what preprocessing does to it. Both hold counts from the records (never a value):
    they are for the site's own log and terminal, never for the coordinator."""

    rows: int
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the table can be preprocessed."""
        return not self.problems

    def describe(self) -> str:
        """Every problem, on one line."""
        return f"{len(self.problems)} problem(s): " + "; ".join(self.problems)


@dataclass(frozen=True)
class Contract:
    """A parsed data contract (:func:`load_contract`, :func:`parse_contract`).

    Attributes:
        name: the consortium's name for it (e.g. ``liver-cohort-v1``).
        columns: the column rules, in output order.
        extra_columns: ``refuse`` (default) or ``ignore`` columns the contract does not list.
        source: the file it was read from (not part of the hash).
    """

    name: str
    columns: tuple[ColumnRule, ...]
    extra_columns: str = "refuse"
    source: str = field(default="<contract>", compare=False)

    @property
    def output_columns(self) -> tuple[str, ...]:
        """The preprocessed matrix's column names, in order."""
        return tuple(name for rule in self.columns for name in rule.outputs)

    @property
    def widths(self) -> np.ndarray:
        """Each output column's public width ``w_j``: its values lie in ``[0, w_j]``."""
        return np.array([w for rule in self.columns for w in rule.widths])

    @property
    def id_column(self) -> str | None:
        """The name of the column holding the site's own record ids, if the contract has
        one (never an output column)."""
        return next((rule.name for rule in self.columns if rule.kind == ID), None)

    @cached_property
    def bounds(self) -> ColumnBounds:
        """The preprocessed columns' public bounds: widths, one-hot groups and public scales
        (the sensitivities of a site's column sums and sums of squares, and which squares a
        standardised run releases: :mod:`fedpca.dp.moments`)."""
        groups, start = [], 0
        for rule in self.columns:
            if rule.kind == "categorical":
                groups.append(tuple(range(start, start + len(rule.outputs))))
            start += len(rule.outputs)
        scales = tuple(s for rule in self.columns for s in rule.scales)
        return ColumnBounds(widths=tuple(float(w) for w in self.widths), groups=tuple(groups),
                            scales=scales if any(s is not None for s in scales) else ())

    def canonical(self) -> str:
        """The serialisation the hash is taken of: sorted-key JSON of the normalised rules."""
        body = {"format": FORMAT, "name": self.name, "extra-columns": self.extra_columns,
                "columns": [rule.canonical() for rule in self.columns]}
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @cached_property
    def hash(self) -> str:
        """SHA-256 (hex) of :meth:`canonical`: the contract every request names."""
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()

    def check(self, table: Mapping[str, np.ndarray]) -> TableReport:
        """What is wrong with ``table`` (missing or extra columns, text where numbers are
        due, levels outside the contract, blanks where ``missing = "refuse"``, infinite
        values) and what preprocessing will do (values clipped, blanks imputed)."""
        rows = len(next(iter(table.values()))) if table else 0
        problems = [] if rows else ["the table has no rows"]
        listed = {rule.name for rule in self.columns}
        problems += [f"column {rule.name!r} is missing from the table: the contract needs it "
                     "(columns are matched by name in the header)"
                     for rule in self.columns if rule.name not in table and rule.kind != ID]
        if self.extra_columns == "refuse":
            problems += [f"column {name!r} is not in the contract: leave it out of the export, "
                         "or add it to the contract (every site must then agree)"
                         for name in table if name not in listed]
        notes = []
        for rule in self.columns:
            if rule.name in table and rows:
                found, noted = rule.inspect(np.asarray(table[rule.name]))
                problems += found
                notes += noted
        return TableReport(rows, tuple(problems), tuple(notes))

    def preprocess(self, table: Mapping[str, np.ndarray], site: str = "site") -> Preprocessed:
        """The table's rows as every algorithm reads them (see the module docstring).

        Raises InvalidDataError naming ``site`` and every problem :meth:`check` finds (with
        counts from the records: for the site's log only); logs its notes.
        """
        report = self.check(table)
        if not report.ok:
            raise InvalidDataError(
                f"{site}: the table does not meet contract {self.name!r}: {report.describe()}")
        for note in report.notes:
            logger.info("%s: %s", site, note)
        blocks = [rule.encode(np.asarray(table[rule.name])) for rule in self.columns
                  if rule.outputs]
        return Preprocessed(np.ascontiguousarray(np.hstack(blocks)), self.output_columns)

    def ids(self, table: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """The id column of ``table`` (a table :meth:`check` finds no problem in), in row
        order; the row numbers (from 1) of a table without one; ``None`` without an id
        column in the contract. For the site's own scores file only."""
        name = self.id_column
        if name is None:
            return None
        if name not in table:
            return np.arange(1, len(next(iter(table.values()), ())) + 1)
        return np.asarray(table[name])

    def site_table(self, table: dict[str, np.ndarray], id_column: str | None
                   ) -> dict[str, np.ndarray]:
        """``table`` with the site's own id column ``id_column`` (its policy's ``[data]
        id-column``; ``None``: the contract's name) under the contract's id column's name, or
        left out when the contract has none (the ids never leave the site). Raises
        InvalidDataError when the table has no column ``id_column``."""
        if id_column is None or id_column == self.id_column:
            return table
        if id_column not in table:
            raise InvalidDataError(
                f"the policy's [data] id-column {id_column!r} is not a column of the table: "
                "name the export's id column, or remove the setting")
        renamed = {name: values for name, values in table.items() if name != id_column}
        if self.id_column is not None:
            renamed[self.id_column] = table[id_column]
        return renamed


def load_contract(path: str | Path) -> Contract:
    """Read and check a contract file; every problem is a :class:`ContractError`."""
    path = Path(path).expanduser()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ContractError(f"contract {path} does not exist; write one with fedpca contract "
                            "init --from TABLE, or point to the consortium's file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ContractError(f"contract {path} cannot be read: {exc}") from None
    return parse_contract(raw, str(path))


def parse_contract(raw: Mapping[str, Any], source: str = "<contract>") -> Contract:
    """The contract in ``raw`` (a parsed TOML document); a :class:`ContractError` lists
    every problem, naming the column and how to fix it."""
    problems: list[str] = []
    head = raw.get("contract", {})
    if not isinstance(head, dict):
        head = {}
        problems.append("contract must be a table: write [contract]")
    problems += unknown_keys(head, CONTRACT_KEYS, "[contract]")
    problems += unknown_keys(raw, ("contract", "column"), "the file")
    name = head.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(f'[contract] name must be a non-empty string, got {name!r}: write '
                        '[contract] name = "NAME-v1"')
    extra = head.get("extra-columns", "refuse")
    if extra not in EXTRA_COLUMN_RULES:
        problems.append(f"[contract] extra-columns = {extra!r} must be one of "
                        f"{list(EXTRA_COLUMN_RULES)}")
    columns = raw.get("column")
    if not isinstance(columns, list) or not columns:
        problems.append('no [[column]] tables: list every column, e.g. [[column]] name = "age" '
                        'kind = "numeric" range = [0, 110]')
        columns = []
    rules, unfilled = [], []
    for index, table in enumerate(columns, start=1):
        rule, found = parse_column(table, index)
        if found == [UNFILLED]:
            unfilled.append(table["name"])
            continue
        problems += found
        if rule is not None:
            rules.append(rule)
    if unfilled:
        problems.append(f"range is not filled in for {len(unfilled)} numeric column(s) "
                        f"{unfilled}: {RANGE_FILL}")
    problems += _name_clashes(rules) + _id_columns(rules)
    if problems:
        raise ContractError(f"contract {source}: " + "; ".join(problems))
    return Contract(str(name), tuple(rules), str(extra), source)


def _id_columns(rules: list[ColumnRule]) -> list[str]:
    """More than one id column, or nothing but an id."""
    ids = [rule.name for rule in rules if rule.kind == ID]
    problems = []
    if len(ids) > 1:
        problems.append(f"columns {ids} are all kind = \"id\": a contract has at most one id "
                        "column (the site's own record ids); leave the others out")
    if ids and len(ids) == len(rules):
        problems.append("the contract has no column but its id: list the columns a run reads")
    return problems


def _name_clashes(rules: list[ColumnRule]) -> list[str]:
    """Two columns of one name, or an output column named like another's."""
    problems, seen = [], set()
    for rule in rules:
        if rule.name in seen:
            problems.append(f"column {rule.name!r} is listed twice")
        seen.add(rule.name)
    outputs = [name for rule in rules for name in rule.outputs]
    clashes = sorted({name for name in outputs if outputs.count(name) > 1} - seen)
    if clashes:
        problems.append(f"output columns {clashes} would appear twice: rename a column")
    return problems

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
   table (counted, never quoted: an id is for the site's own scores file only).

**Public scales** (``scale``, optional): a consortium that knows a column's spread from
public knowledge (a reference interval, a population's published standard deviation, a
study's design) states it, and a standardised run then spends no budget on that column's
variance (:mod:`fedpca.dp.moments`): the released sums of squares skip it and its scale
is the stated one, never noisy, never floored. A numeric column takes ``scale = NUMBER``, a
reference standard deviation in the units the column is shifted in: the file's units for
``transform = "none"``, the natural log of the value for ``"log"`` (a reference interval
``[a, b]`` holding 95% of a log-normal value gives ``(ln b - ln a) / 3.92``), of the value
plus one for ``"log1p"``; or ``scale = "range"``: a quarter of the transformed width ``w``
(:data:`RANGE_RULE`; the range rule of thumb: a bell-shaped variable holds about 95% of its
values within two standard deviations of its mean, so a range meant to hold nearly every
value spans about four; a uniform variable's is ``w / 3.46``, one at both ends ``w / 2``). A
binary column takes ``scale = NUMBER`` (``sqrt(p (1 - p))`` for a public prevalence ``p``;
at most 0.5), a categorical column ``scale = [NUMBER, ...]``, one per output column (its
levels, then its blank's column with ``missing = "indicator"``); an indicator column
``NAME:missing`` has none. Every scale lies in ``[1e-6 w, w / 2]`` (no variable in ``[0, w]``
spreads more than ``w / 2``: a larger value is a unit error, e.g. a log column's scale in
file units).

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
made under, and a real site refuses any other (:mod:`fedpca.flower.real_site`): the coordinator
cannot change a range, a column, a level or a public scale, which would change the
sensitivity or the released statistic. A contract without ``scale`` keys hashes as it did
before they existed.

A *table* here is a mapping from column name to a 1-D numpy array: float64 with NaN for a
blank (numbers), or object holding ``str`` and ``None`` for a blank (text);
:mod:`fedpca.data.tables` reads CSV and Parquet files into one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.dp.moments import MIN_SCALE, ColumnBounds

logger = logging.getLogger(__name__)

#: The canonical serialisation's version: part of every hash.
FORMAT = "fedpca-contract/1"
KINDS = ("numeric", "binary", "categorical", "id")
#: The kind of the column holding the site's own record ids (never an output column).
ID = "id"
#: A numeric column's transform ``T``, applied to the value clipped into its range.
TRANSFORMS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "none": np.asarray, "log": np.log, "log1p": np.log1p}
#: The value each transform's range must start above.
TRANSFORM_FLOOR = {"none": -math.inf, "log": 0.0, "log1p": -1.0}
#: What a blank cell becomes: imputed and flagged, imputed, refused (the table is refused).
MISSING_RULES = ("indicator", "impute", "refuse")
DEFAULT_MISSING = "indicator"
#: What a value outside a binary or categorical column's levels is: refused, or a blank.
UNKNOWN_RULES = ("refuse", "missing")
#: Whether a table may hold columns the contract does not list (they are never read).
EXTRA_COLUMN_RULES = ("refuse", "ignore")
#: The suffix of an indicator column's name, and of a categorical column's blank level.
MISSING_SUFFIX = ":missing"
#: The keys a ``[[column]]`` table and the ``[contract]`` table may hold.
COLUMN_KEYS = ("name", "kind", "range", "transform", "missing", "impute", "levels", "unknown",
               "scale")
#: ``scale = "range"``: a quarter of the transformed width (the range rule of thumb).
RANGE_SCALE, RANGE_RULE = "range", 4.0
CONTRACT_KEYS = ("name", "extra-columns")
#: Why ``missing = "drop"`` is refused (ALGORITHMS: dropping rows makes the count private).
DROP_REFUSED = (
    'missing = "drop" is not supported yet: dropping a row makes the site\'s record count '
    "depend on the records (a replaced record can turn a complete row into a dropped one), "
    "and record counts travel in plaintext; it needs a noisy count of the kept rows, not "
    'built yet. Use missing = "indicator" (the default: a public value and a 0/1 column '
    'flagging the blank) or missing = "impute" with impute = VALUE'
)
#: Which levels a binary column without ``levels`` holds.
BINARY_VALUES = ("0", "1")
#: Why a range must be filled in (said once for every column that lacks one).
RANGE_FILL = ("write range = [low, high] from public knowledge (a reference range, an "
              "instrument's limits, the study's design), never from the data")


class ContractError(ConfigurationError):
    """A contract file is missing, unreadable or makes no sense (what, where, how to fix)."""


@dataclass(frozen=True)
class ColumnRule:
    """One ``[[column]]`` of a contract, parsed and checked (see :func:`parse_contract`).

    Attributes:
        name: the column's name in every site's table header.
        kind: ``numeric``, ``binary`` or ``categorical``.
        missing: ``indicator``, ``impute`` or ``refuse``.
        impute: what a blank becomes: a number in the range (numeric, file units), 0 or 1
            (binary), a level (categorical); ``None``: the middle of the output interval
            ``[0, w]`` (numeric, binary with ``indicator``) or the blank's own one-hot column.
        range: ``(lo, hi)`` in the file's units (numeric; binary: ``(0, 1)``).
        transform: a numeric column's transform (others: ``none``).
        levels: a categorical column's public levels (one-hot, in this order), or a binary
            column's ``(level of 0, level of 1)`` (``("0", "1")`` when it holds numbers).
        unknown: what a value outside ``levels`` is (binary, categorical).
        scale: the column's public scale (module docstring): ``"range"`` or a number
            (numeric), a number (binary), one number per output column (categorical);
            ``None``: released privately when a run standardises.
    """

    name: str
    kind: str
    missing: str = DEFAULT_MISSING
    impute: float | str | None = None
    range: tuple[float, float] = (0.0, 1.0)
    transform: str = "none"
    levels: tuple[str, ...] = ()
    unknown: str = "refuse"
    scale: float | str | tuple[float, ...] | None = None

    @property
    def indicator(self) -> str:
        """The name of the column flagging a blank (with ``missing = "indicator"``)."""
        return f"{self.name}{MISSING_SUFFIX}"

    @property
    def width(self) -> float:
        """``w = T(hi) - T(lo)``: the public width of the column after preprocessing."""
        transform = TRANSFORMS[self.transform]
        return float(transform(self.range[1]) - transform(self.range[0]))

    @property
    def outputs(self) -> tuple[str, ...]:
        """The output columns, in order (none for the id column)."""
        if self.kind == ID:
            return ()
        flag = (self.indicator,) if self.missing == "indicator" else ()
        if self.kind == "categorical":
            return (*(f"{self.name}={level}" for level in self.levels), *flag)
        return (self.name, *flag)

    @property
    def widths(self) -> tuple[float, ...]:
        """Each output column's public width ``w_j`` (0/1 columns: 1)."""
        if self.kind == "numeric":
            return (self.width, *(1.0,) * (len(self.outputs) - 1))
        return (1.0,) * len(self.outputs)

    @property
    def scales(self) -> tuple[float | None, ...]:
        """Each output column's public scale in its ``[0, w]`` units (``None``: released
        privately; an indicator column's always)."""
        if self.scale is None or self.kind == "categorical":
            return self.scale or (None,) * len(self.outputs)
        value = self.width / RANGE_RULE if self.scale == RANGE_SCALE else float(self.scale)
        return (value, *(None,) * (len(self.outputs) - 1))

    def canonical(self) -> dict[str, Any]:
        """The rule as the hash sees it: every value normalised, defaults spelled out (a
        ``scale`` only when given, so contracts without one hash as before)."""
        if self.kind == ID:
            return {"name": self.name, "kind": self.kind}
        rule: dict[str, Any] = {"name": self.name, "kind": self.kind, "missing": self.missing,
                                "impute": self.impute}
        if self.kind == "numeric":
            rule.update(range=list(self.range), transform=self.transform)
        else:
            rule.update(levels=list(self.levels), unknown=self.unknown)
        if self.scale is not None:
            rule["scale"] = list(self.scale) if isinstance(self.scale, tuple) else self.scale
        return rule

    def inspect(self, values: np.ndarray) -> tuple[list[str], list[str]]:
        """``(problems, notes)`` about this column of a site's table: what makes it unusable,
        and what preprocessing will do to it (counts, never a value)."""
        if self.kind == ID:
            return self._inspect_ids(values), []
        if self.kind != "numeric":
            return self._inspect_levels(values)
        if values.dtype.kind != "f":
            return [f"column {self.name!r} holds text where the contract says numeric (a "
                    "cell is not a number): fix the export"], []
        problems, notes = self._blanks(int(np.isnan(values).sum()))
        infinite = int(np.isinf(values).sum())
        if infinite:
            problems.append(f"column {self.name!r} has {infinite} infinite cells: fix the "
                            "export")
        lo, hi = self.range
        outside = int(((values < lo) | (values > hi)).sum())
        if outside:
            notes.append(f"column {self.name!r}: {outside} values outside the range "
                         f"[{lo:g}, {hi:g}] are clipped into it")
        return problems, notes

    def _inspect_ids(self, values: np.ndarray) -> list[str]:
        """Blank and repeated ids (counts only: an id is never quoted)."""
        blank = _blank(values)
        present = values[~blank].tolist()
        repeated = len(present) - len(set(present))
        problems = []
        if blank.any():
            problems.append(f"id column {self.name!r} has {int(blank.sum())} blank cells: "
                            "every record needs its own id (its scores are written by it); "
                            "fix the export")
        if repeated:
            problems.append(f"id column {self.name!r} has {repeated} cells repeating an id "
                            "of another row: every record needs its own id; fix the export")
        return problems

    def _inspect_levels(self, values: np.ndarray) -> tuple[list[str], list[str]]:
        codes = self.codes(values)
        unknown = int((codes == UNKNOWN).sum())
        if unknown and self.unknown == "refuse":
            return [f"column {self.name!r} has {unknown} cells that are not one of its levels "
                    f"{list(self.levels)}: fix the export, add the level to the contract "
                    '(every site must then agree), or set unknown = "missing"'], []
        problems, notes = self._blanks(int((codes == BLANK).sum()) + unknown)
        if unknown:
            notes.insert(0, f"column {self.name!r}: {unknown} cells outside its levels are "
                            "taken as blanks")
        return problems, notes

    def _blanks(self, blanks: int) -> tuple[list[str], list[str]]:
        """What the column's ``missing`` rule makes of ``blanks`` blank cells."""
        if not blanks:
            return [], []
        if self.missing == "refuse":
            return [f"column {self.name!r} has {blanks} blank cells but the contract says "
                    'missing = "refuse": fix the export, or agree on missing = "indicator" '
                    "with the consortium"], []
        done = (f"flagged in {self.indicator}" if self.missing == "indicator" else "imputed")
        return [], [f"column {self.name!r}: {blanks} blank cells are {done}"]

    def codes(self, values: np.ndarray) -> np.ndarray:
        """Each cell's level index (binary, categorical), :data:`BLANK` for a blank and
        :data:`UNKNOWN` for a value outside the levels."""
        blank = _blank(values)
        codes = np.full(len(values), BLANK, dtype=np.int64)
        present, inverse = np.unique(values[~blank], return_inverse=True)
        index = {level: i for i, level in enumerate(self.levels)}
        lookup = np.array([index.get(cell_text(v), UNKNOWN) for v in present], dtype=np.int64)
        codes[~blank] = lookup[inverse]
        return codes

    def encode(self, values: np.ndarray) -> np.ndarray:
        """The ``n x len(outputs)`` block of this column (a table that passed
        :meth:`inspect` without problems)."""
        if self.kind == "numeric":
            blank = np.isnan(values)
            value = self._shifted(np.where(blank, self.range[0], values))
        else:
            codes = self.codes(values)
            blank = (codes == BLANK) | (codes == UNKNOWN)
            if self.kind == "categorical":
                return self._one_hot(codes, blank)
            value = codes.astype(np.float64)
        value[blank] = self._imputed()
        if self.missing != "indicator":
            return value[:, None]
        return np.column_stack([value, blank.astype(np.float64)])

    def _shifted(self, raw: np.ndarray | float) -> np.ndarray:
        """A numeric value clipped into the range, transformed, shifted to ``[0, w]``."""
        transform = TRANSFORMS[self.transform]
        lo, hi = self.range
        return np.asarray(transform(np.clip(raw, lo, hi)) - transform(lo), dtype=np.float64)

    def _imputed(self) -> float:
        """What a blank becomes in the value column (numeric, binary)."""
        if self.impute is None:
            return self.width / 2
        if self.kind == "numeric":
            return float(self._shifted(float(self.impute)))
        return float(self.impute)

    def _one_hot(self, codes: np.ndarray, blank: np.ndarray) -> np.ndarray:
        block = np.zeros((len(codes), len(self.outputs)))
        if self.impute is not None:
            codes = np.where(blank, self.levels.index(str(self.impute)), codes)
        else:
            codes = np.where(blank, len(self.levels), codes)  # the blank's own column
        block[np.arange(len(codes)), codes] = 1.0
        return block


#: :meth:`ColumnRule.codes` of a blank cell and of a value outside the levels.
BLANK, UNKNOWN = -1, -2


def _blank(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "f":
        return np.isnan(values)
    return np.array([v is None for v in values], dtype=bool)


def cell_text(value: object) -> str:
    """A cell's level as text: integral numbers without a decimal point (``2.0`` -> ``2``)."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


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
                     for rule in self.columns if rule.name not in table]
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
        order, or ``None`` without an id column. For the site's own scores file only."""
        name = self.id_column
        return None if name is None else np.asarray(table[name])


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
    problems += _unknown_keys(head, CONTRACT_KEYS, "[contract]")
    problems += _unknown_keys(raw, ("contract", "column"), "the file")
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
        rule, found = _column(table, index)
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


#: :func:`_column`'s only problem for a numeric column whose range is blank (the template's):
#: :func:`parse_contract` names all such columns in one sentence.
UNFILLED = "range is not filled in"


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


def _unknown_keys(table: Mapping[str, Any], known: tuple[str, ...], where: str) -> list[str]:
    unknown = sorted(set(table) - set(known))
    return [f"unknown keys {unknown} in {where} (known: {list(known)}): a misspelt key "
            "would silently take its default"] if unknown else []


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


def _column(table: object, index: int) -> tuple[ColumnRule | None, list[str]]:
    """One ``[[column]]`` table as a rule, or the problems that stop it."""
    if not isinstance(table, dict):
        return None, [f"column #{index} is not a table: write it as [[column]]"]
    name = table.get("name")
    if not isinstance(name, str) or not name:
        return None, [f"column #{index} has no name: add name = \"...\" as in the table's "
                      "header"]
    where = f"column {name!r}"
    problems = _unknown_keys(table, COLUMN_KEYS, where)
    kind = table.get("kind")
    if kind not in KINDS:
        return None, [*problems, f"{where}: kind = {kind!r} must be one of {list(KINDS)}"]
    missing = table.get("missing", DEFAULT_MISSING)
    if missing == "drop":
        problems.append(f"{where}: {DROP_REFUSED}")
    elif missing not in MISSING_RULES:
        problems.append(f"{where}: missing = {missing!r} must be one of {list(MISSING_RULES)}")
    not_for_kind = {"numeric": ("levels", "unknown"), "binary": ("range", "transform"),
                    "categorical": ("range", "transform"),
                    ID: tuple(key for key in COLUMN_KEYS if key not in ("name", "kind"))}[kind]
    problems += [f"{where}: {key} does not apply to {'an' if kind == ID else 'a'} {kind} "
                 "column; remove it" for key in not_for_kind if key in table]
    if problems:
        return None, problems
    if kind == ID:
        return ColumnRule(name, kind), []
    fields: dict[str, Any] = {"name": name, "kind": kind, "missing": missing}
    if kind == "numeric":
        if table.get("range") in (None, []):
            return None, [UNFILLED]
        problems += _numeric(table, where, fields)
    else:
        problems += _levels(table, where, kind, fields)
    if not problems:
        problems += _impute(table, where, fields) + _scale(table, where, fields)
    return (None, problems) if problems else (ColumnRule(**fields), [])


def _numeric(table: dict, where: str, fields: dict[str, Any]) -> list[str]:
    """``range`` and ``transform`` of a numeric column."""
    transform = table.get("transform", "none")
    if transform not in TRANSFORMS:
        return [f"{where}: transform = {transform!r} must be one of {list(TRANSFORMS)}"]
    bounds = table.get("range")
    if (not isinstance(bounds, list) or len(bounds) != 2
            or not all(_is_number(b) and math.isfinite(b) for b in bounds)):
        return [f"{where}: range = {bounds!r} must be [low, high], two finite numbers; "
                f"{RANGE_FILL}"]
    lo, hi = float(bounds[0]), float(bounds[1])
    if not lo < hi:
        return [f"{where}: range = [{lo:g}, {hi:g}] must have low < high"]
    if lo <= TRANSFORM_FLOOR[transform]:
        return [f"{where}: transform = {transform!r} needs a range above "
                f"{TRANSFORM_FLOOR[transform]:g}, got low = {lo:g}; raise low (values below "
                "it are clipped to it) or use another transform"]
    fields.update(range=(lo, hi), transform=transform)
    return []


def _levels(table: dict, where: str, kind: str, fields: dict[str, Any]) -> list[str]:
    """``levels`` and ``unknown`` of a binary or categorical column."""
    unknown = table.get("unknown", "refuse")
    if unknown not in UNKNOWN_RULES:
        return [f"{where}: unknown = {unknown!r} must be one of {list(UNKNOWN_RULES)}"]
    if unknown == "missing" and fields["missing"] == "refuse":
        return [f'{where}: unknown = "missing" takes a value outside the levels as a blank, '
                'which missing = "refuse" refuses: choose one']
    levels = table.get("levels")
    if levels is None and kind == "binary":
        levels = list(BINARY_VALUES)
    wanted = "exactly 2 (the level of 0, then of 1)" if kind == "binary" else "at least 2"
    if (not isinstance(levels, list)
            or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in levels)):
        return [f"{where}: levels = {levels!r} must be a list of strings or integers, "
                f"{wanted}"]
    levels = [str(v) for v in levels]
    if len(set(levels)) != len(levels) or (len(levels) != 2 if kind == "binary"
                                           else len(levels) < 2):
        return [f"{where}: levels = {levels} must be {wanted} distinct levels"]
    fields.update(levels=tuple(levels), unknown=unknown)
    return []


def _impute(table: dict, where: str, fields: dict[str, Any]) -> list[str]:
    """``impute``: required with ``missing = "impute"``, optional with ``indicator``
    (numeric and binary), refused otherwise; a value in the range or one of the levels."""
    missing, kind, value = fields["missing"], fields["kind"], table.get("impute")
    if value is None:
        if missing == "impute":
            return [f'{where}: missing = "impute" needs impute = VALUE, a public value (a '
                    "number in the range, or a level)"]
        return []
    if missing == "refuse" or (missing == "indicator" and kind == "categorical"):
        reason = ("a blank is refused" if missing == "refuse"
                  else "a blank gets its own one-hot column")
        return [f"{where}: impute does not apply: {reason}; remove it"]
    if kind == "numeric":
        lo, hi = fields["range"]
        if not _is_number(value) or not lo <= value <= hi:
            return [f"{where}: impute = {value!r} must be a number in the range "
                    f"[{lo:g}, {hi:g}]"]
        fields["impute"] = float(value)
        return []
    levels = fields["levels"]
    level = cell_text(value) if not isinstance(value, bool) else None
    if level not in levels:
        return [f"{where}: impute = {value!r} must be one of its levels {list(levels)}"]
    fields["impute"] = level if kind == "categorical" else float(levels.index(level))
    return []


def _scale(table: dict, where: str, fields: dict[str, Any]) -> list[str]:
    """``scale``: a public scale (module docstring) within ``[MIN_SCALE w, w / 2]`` of each
    output column's width ``w``; optional."""
    value, kind = table.get("scale"), fields["kind"]
    if value is None:
        return []
    rule = ColumnRule(**fields)
    if kind == "categorical":
        outputs = rule.outputs
        if (not isinstance(value, list) or len(value) != len(outputs)
                or not all(_is_number(v) for v in value)):
            return [f"{where}: scale = {value!r} must be a list of {len(outputs)} numbers, one "
                    f"standard deviation per output column {list(outputs)}"]
        scales = tuple(float(v) for v in value)
    elif value == RANGE_SCALE and kind == "numeric":
        scales = (rule.width / RANGE_RULE,)
    elif _is_number(value):
        scales = (float(value),)
    else:
        allowed = 'a number or "range"' if kind == "numeric" else "a number"
        return [f"{where}: scale = {value!r} must be {allowed}: the column's public standard "
                "deviation"]
    width, units = rule.width, _SCALE_UNITS[rule.transform if kind == "numeric" else kind]
    if not all(math.isfinite(s) and MIN_SCALE * width <= s <= width / 2 for s in scales):
        return [f"{where}: scale = {value!r} must lie in [{MIN_SCALE:g} w, w / 2] = "
                f"[{MIN_SCALE * width:.3g}, {width / 2:.4g}] for its width w = {width:.4g}; "
                f"it is a standard deviation {units}"]
    fields["scale"] = (tuple(scales) if kind == "categorical"
                       else RANGE_SCALE if value == RANGE_SCALE else scales[0])
    return []


#: The units a public scale is stated in, by transform (numeric) or kind.
_SCALE_UNITS = {
    "none": "in the file's units",
    "log": "of the natural log of the value (not in the file's units)",
    "log1p": "of the natural log of the value plus one (not in the file's units)",
    "binary": "of a 0/1 column: sqrt(p (1 - p)) for a public prevalence p",
    "categorical": "of each 0/1 column: sqrt(p (1 - p)) for each level's public prevalence p",
}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

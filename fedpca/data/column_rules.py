"""One column of a data contract: its rule, what it finds in a site's column and how it
encodes it, and how a ``[[column]]`` table is parsed into one.

A :class:`ColumnRule` is one ``[[column]]`` of a contract (:mod:`fedpca.data.contract`, whose
docstring states what preprocessing does and what it guarantees): :meth:`ColumnRule.inspect`
finds a table column's problems (counts from the records, never a value: for the site's own
log), :meth:`ColumnRule.encode` is the pure function from a column's cells to its output
columns in ``[0, w]``. :func:`parse_column` reads one ``[[column]]`` table into a rule, or
lists what stops it, naming the column and how to fix it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpca.dp.moments import MIN_SCALE

__all__ = [
    "BINARY_VALUES",
    "BLANK",
    "COLUMN_KEYS",
    "DEFAULT_MISSING",
    "DROP_REFUSED",
    "ID",
    "KINDS",
    "MISSING_RULES",
    "MISSING_SUFFIX",
    "RANGE_FILL",
    "RANGE_RULE",
    "RANGE_SCALE",
    "TRANSFORMS",
    "TRANSFORM_FLOOR",
    "UNFILLED",
    "UNKNOWN",
    "UNKNOWN_RULES",
    "ColumnRule",
    "cell_text",
    "parse_column",
    "unknown_keys",
]

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
#: The suffix of an indicator column's name, and of a categorical column's blank level.
MISSING_SUFFIX = ":missing"
#: The keys a ``[[column]]`` table may hold.
COLUMN_KEYS = ("name", "kind", "range", "transform", "missing", "impute", "levels", "unknown",
               "scale")
#: ``scale = "range"``: a quarter of the transformed width (the range rule of thumb).
RANGE_SCALE, RANGE_RULE = "range", 4.0
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


@dataclass(frozen=True)
class ColumnRule:
    """One ``[[column]]`` of a contract, parsed and checked (see
    :func:`~fedpca.data.contract.parse_contract`).

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
        scale: the column's public scale (:mod:`fedpca.data.contract`): ``"range"`` or a number
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
            return [f"column {self.name!r} holds text where the contract says numeric: "
                    f"{_not_numbers(values)} of its {len(values)} cells are not numbers: fix "
                    "the export"], []
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


def _not_numbers(values: np.ndarray) -> int:
    """How many cells of a text column are neither blank nor a number (a count: the cells
    themselves are data and are never quoted)."""
    return sum(1 for cell in values[~_blank(values)] if not _reads_as_number(cell))


def _reads_as_number(cell: object) -> bool:
    try:
        float(str(cell))
    except ValueError:
        return False
    return True


def cell_text(value: object) -> str:
    """A cell's level as text: integral numbers without a decimal point (``2.0`` -> ``2``)."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


#: :func:`parse_column`'s only problem for a numeric column whose range is blank (the
#: template's): :func:`~fedpca.data.contract.parse_contract` names all such columns in one
#: sentence.
UNFILLED = "range is not filled in"


def unknown_keys(table: Mapping[str, Any], known: tuple[str, ...], where: str) -> list[str]:
    """A problem naming the keys of ``table`` (at ``where``) that are not ``known``."""
    unknown = sorted(set(table) - set(known))
    return [f"unknown keys {unknown} in {where} (known: {list(known)}): a misspelt key "
            "would silently take its default"] if unknown else []


def parse_column(table: object, index: int) -> tuple[ColumnRule | None, list[str]]:
    """One ``[[column]]`` table as a rule, or the problems that stop it."""
    if not isinstance(table, dict):
        return None, [f"column #{index} is not a table: write it as [[column]]"]
    name = table.get("name")
    if not isinstance(name, str) or not name:
        return None, [f"column #{index} has no name: add name = \"...\" as in the table's "
                      "header"]
    where = f"column {name!r}"
    problems = unknown_keys(table, COLUMN_KEYS, where)
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
    """``scale``: a public scale (:mod:`fedpca.data.contract`) within
    ``[MIN_SCALE w, w / 2]`` of each output column's width ``w``; optional."""
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

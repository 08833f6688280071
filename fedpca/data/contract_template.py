"""The commented contract ``fedpca contract init --from TABLE`` writes: every column of one
site's table with a guessed kind, numeric ranges left for people to fill in from public
knowledge.

What the template takes from the table: the column names, a guessed kind (a different
value in every row, whole numbers or text: ``id``, the site's own record ids; numbers that
are all 0 or 1: binary; other numbers: numeric; text: categorical with the levels seen), and
whether the column has blanks (``missing = "indicator"``; else ``"refuse"``). It never writes
a range, a scale or an id: a range read off the records discloses their extremes, and an id
column's values are the site's alone. The observed minimum and maximum of each numeric
column are returned apart (:attr:`ContractTemplate.observed`), for the operator's own
terminal only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

#: More distinct texts than this in a column: free text or an identifier, probably.
MANY_LEVELS = 20
#: Fewer rows than this and a column of all-distinct integers is not flagged as an identifier.
IDENTIFIER_MIN_ROWS = 20

HEADER = """\
# fedpca data contract, written by `fedpca contract init` from {source}.
# The consortium agrees on this file and every site keeps the same copy: its hash names it in
# every run, and a site refuses a run made under any other contract. Before sharing it:
# * range: fill in PUBLIC bounds for every numeric column from public knowledge (reference
#   ranges, an instrument's limits, the study's design), never from the data: bounds read
#   off a site's records disclose their extremes. Values outside are clipped into them, and
#   the bounds set the noise: the narrower, the less noise. A blank range is refused.
# * transform: "log" or "log1p" for skewed positive values (lab values, counts); the range
#   stays in the file's units.
# * levels: each categorical column's public levels; those below were seen in this file:
#   remove any that is not public knowledge (a rare code seen only here reveals a record).
# * missing: "indicator" (a public value and a 0/1 column flagging the blank), "impute" (with
#   impute = VALUE) or "refuse" (a site whose file has a blank refuses the run).
# * scale (optional): a column's PUBLIC standard deviation, so that a standardised run spends
#   no budget on its variance: "range" (a quarter of the range) or a reference value from
#   public knowledge (docs/tables.md), never from the data.
# * kind = "id": the site's own record ids (at most one column): never sent nor preprocessed;
#   `fedpca site project` writes them beside the scores.
# Columns are matched by name in each site's header; their order here is the order of the
# preprocessed columns.

[contract]
name = {name}
extra-columns = "refuse"       # or "ignore": columns not listed here are then never read
"""


@dataclass(frozen=True)
class ContractTemplate:
    """``text``: the template to write; ``observed``: each numeric column's observed range,
    and ``warnings``: columns that look like identifiers or free text, both for the
    operator's terminal only (data-derived: never to be copied into the contract unless a
    public source gives the same)."""

    text: str
    observed: tuple[str, ...]
    warnings: tuple[str, ...]


def contract_template(table: Mapping[str, np.ndarray], name: str, source: str) -> ContractTemplate:
    """The template for ``table`` (read from ``source``) under contract name ``name``."""
    blocks, observed, warnings = [HEADER.format(source=source, name=_toml(name))], [], []
    for column, values in table.items():
        values = np.asarray(values)
        text = values.dtype.kind != "f"
        blank = np.array([v is None for v in values], bool) if text else np.isnan(values)
        present = values[~blank]
        lines = [f"name = {_toml(column)}"]
        if _identifier(present, text):
            warnings.append(f"column {column!r} has a different value in every row: an "
                            'identifier? proposed as kind = "id" (never sent; `fedpca site '
                            "project` writes it beside the scores); a contract keeps at most "
                            "one: leave any other out of the contract and the export")
            blocks.append("[[column]]\n" + "\n".join([*lines, ID_LINE]) + "\n")
            continue
        if text:
            levels = sorted(set(present))
            lines += ['kind = "categorical"',
                      f"levels = [{', '.join(map(_toml, levels))}]  # seen in the file: "
                      "keep only public levels"]
            if len(levels) > MANY_LEVELS:
                warnings.append(f"column {column!r} has {len(levels)} distinct texts: free text "
                                "or an identifier? leave it out of the contract and the export")
        elif present.size and np.isin(present, (0.0, 1.0)).all():
            lines.append('kind = "binary"             # 0/1')
        else:
            lines += ['kind = "numeric"',
                      "range = []                  # FILL IN: [low, high] from public knowledge",
                      'transform = "none"          # none | log | log1p']
            if present.size:
                observed.append(f"{column}: {present.min():g} .. {present.max():g}")
        lines.append('missing = "indicator"       # blanks in this file' if blank.any() else
                     'missing = "refuse"          # no blanks in this file; "indicator" if a '
                     "site may have some")
        blocks.append("[[column]]\n" + "\n".join(lines) + "\n")
    return ContractTemplate("\n".join(blocks), tuple(observed), tuple(warnings))


#: The template's lines for an identifier column, after its name.
ID_LINE = ('kind = "id"                 # the site\'s own record ids: never sent nor '
           "preprocessed")


def _identifier(present: np.ndarray, text: bool) -> bool:
    """A different value in every row (whole numbers, or text), over enough rows."""
    whole = text or bool(np.all(present == np.round(present)))
    return (present.size >= IDENTIFIER_MIN_ROWS and whole
            and len(set(present.tolist())) == present.size)


def _toml(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(str(text), ensure_ascii=False)

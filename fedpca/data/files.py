"""Load one site's own records from a ``.npy``, ``.csv`` or ``.csv.gz`` file (one record a row)."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import numpy as np

from fedpca.errors import InvalidDataError
from fedpca.privacy.validation import validate_site_data


def load_site_file(path: str | Path, site: str = "site") -> np.ndarray:
    """Read a ``.npy`` (memory-mapped) or a comma-separated ``.csv``/``.csv.gz`` file.

    A CSV file may start with one header line. Returns a validated float64 ``n x d`` array;
    raises InvalidDataError naming the site and the file when it is missing, of another
    format, or not a finite numeric table.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidDataError(f"{site}: data file {path} does not exist")
    name = path.name.lower()
    if name.endswith(".npy"):
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    elif name.endswith((".csv", ".csv.gz")):
        data = _read_csv(path, site)
    else:
        raise InvalidDataError(
            f"{site}: {path} has suffix {''.join(path.suffixes)!r}; give a .npy, .csv or "
            ".csv.gz file"
        )
    return validate_site_data(data, site=f"{site} ({path.name})")


def file_fingerprint(path: str | Path, chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes (hex): which data set a release was computed from."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def split_label_column(
    table: np.ndarray, column: int, site: str = "site"
) -> tuple[np.ndarray, np.ndarray]:
    """``(features, labels)``: column ``column`` (negative counts from the end) as int labels.

    Raises InvalidDataError when the column does not exist, is the only one, or holds
    non-integer values.
    """
    d = table.shape[1]
    if not -d <= column < d or d < 2:
        raise InvalidDataError(
            f"{site}: label column {column} does not exist or leaves no features in a table "
            f"of {d} columns"
        )
    labels = table[:, column]
    if not np.array_equal(labels, np.round(labels)):
        raise InvalidDataError(
            f"{site}: label column {column} holds non-integer values; labels must be integers"
        )
    return np.delete(table, column % d, axis=1), labels.astype(np.int64)


def _read_csv(path: Path, site: str) -> np.ndarray:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt") as handle:
            first = handle.readline()
        skip = 0 if _is_numeric_row(first) else 1  # 1: a header line
        return np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
    except (ValueError, OSError, EOFError) as exc:
        raise InvalidDataError(
            f"{site}: {path} is not a numeric CSV table: {_csv_problem(exc, skip)}"
        ) from None


#: numpy's words for a cell that is not a number (they quote the cell: a record's value).
_NOT_A_NUMBER = re.compile(r"could not convert string .* at row (\d+), column (\d+)", re.S)


def _csv_problem(exc: Exception, skip: int) -> str:
    """What numpy found wrong with a CSV file, without quoting any cell (cells are records'
    values): the line and column of a cell that is not a number, or numpy's own words."""
    found = _NOT_A_NUMBER.search(str(exc))
    if found:
        line, column = int(found[1]) + skip + 1, int(found[2])
        return (f"line {line}, column {column} is not a number; remove text columns or "
                "encode them as numbers before the run")
    if "could not convert" in str(exc):
        return "a cell is not a number; remove text columns or encode them as numbers"
    return str(exc)


def _is_numeric_row(line: str) -> bool:
    try:
        [float(v) for v in line.strip().split(",")]
    except ValueError:
        return False
    return True

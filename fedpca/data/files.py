"""Load one site's own records as a matrix from a ``.npy``, ``.csv``, ``.csv.gz`` or
``.parquet`` file (one record a row; read by :mod:`fedpca.data.tables`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from fedpca.data.tables import read_matrix
from fedpca.errors import InvalidDataError
from fedpca.dp.validation import validate_site_data


def load_site_file(path: str | Path, site: str = "site") -> np.ndarray:
    """Read a ``.npy`` (memory-mapped), a comma-separated ``.csv``/``.csv.gz`` (a header
    line is optional) or a ``.parquet`` file of numbers.

    Returns a validated float64 ``n x d`` array; raises InvalidDataError naming the site and
    the file when it is missing, of another format, or not a finite numeric table.
    """
    path = Path(path)
    return validate_site_data(read_matrix(path, site), site=f"{site} ({path.name})")


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

"""Load one site's own records from a ``.npy`` or ``.csv`` file (numeric, one record a row)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedpca.errors import InvalidDataError
from fedpca.validation import validate_site_data


def load_site_file(path: str | Path, site: str = "site") -> np.ndarray:
    """Read a ``.npy`` (memory-mapped) or ``.csv`` (comma-separated, optional header) file.

    Returns a validated float64 ``n x d`` array; raises InvalidDataError naming the site and
    the file when it is missing, of another format, or not a finite numeric table.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidDataError(f"{site}: data file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    elif suffix == ".csv":
        data = _read_csv(path, site)
    else:
        raise InvalidDataError(
            f"{site}: {path} has suffix {suffix!r}; give a .npy or .csv file"
        )
    return validate_site_data(data, site=f"{site} ({path.name})")


def _read_csv(path: Path, site: str) -> np.ndarray:
    with path.open() as handle:
        first = handle.readline()
    try:
        [float(v) for v in first.strip().split(",")]
        skip = 0
    except ValueError:
        skip = 1  # a header line
    try:
        return np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
    except ValueError as exc:
        raise InvalidDataError(f"{site}: {path} is not a numeric CSV table: {exc}") from exc

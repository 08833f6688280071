"""A site's table from a file, read by pyarrow: CSV with a header (``.csv``, ``.csv.gz``),
Parquet (``.parquet``), and NumPy's ``.npy`` for a plain numeric matrix.

* :func:`read_table`: the named columns of a CSV or Parquet file, as a data contract reads
  them (:mod:`fedpca.data.contract`): a mapping from each header name to a float64 array
  (numbers, NaN for a blank) or an object array (text, ``None`` for a blank). In a CSV file
  an empty cell and the usual null markers (``NA``, ``NaN``, ``null``, ``N/A``...) are blanks.
* :func:`read_matrix`: an ``n x d`` float64 matrix without a contract: a ``.npy`` file
  (memory-mapped), or a CSV (with or without a header line) or Parquet file whose every
  column holds numbers.
* :func:`matrix_width`: the columns :func:`read_matrix` would read, from the file's head.
* :func:`write_table`: a pyarrow table to ``.csv`` or ``.parquet``.

Errors name the file and the column, never a cell's value: pyarrow's own messages quote rows,
and a row is a record. pyarrow is imported on first use (:func:`_arrow`): a ``.npy`` file
needs none of it. A CSV file must be comma-separated: one whose header reads as a single
column holding another usual delimiter (``;`` as a European spreadsheet or R's
``write.csv2`` writes, a tab, ``|``) is refused with a hint naming that delimiter
(:func:`delimiter_hint`), where it would otherwise read as one column of text.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from fedpca.errors import InvalidDataError

if TYPE_CHECKING:
    import pyarrow as pa

#: The suffixes each reader takes.
CSV_SUFFIXES, PARQUET_SUFFIXES, NPY_SUFFIXES = (".csv", ".csv.gz"), (".parquet",), (".npy",)
TABLE_SUFFIXES = (*CSV_SUFFIXES, *PARQUET_SUFFIXES)
#: pyarrow's words for a row with the wrong number of cells (the row's text follows them).
_FIELD_COUNT = re.compile(r"Expected (\d+) columns, got (\d+)")
#: Delimiters other than the comma a CSV export may use, by name.
OTHER_DELIMITERS = {";": "semicolon", "\t": "tab", "|": "vertical bar"}


def read_table(path: str | Path, site: str = "site") -> dict[str, np.ndarray]:
    """The columns of a CSV (with a header) or Parquet file by name, in the file's order.

    Raises InvalidDataError naming ``site`` and the file when it is missing, of another
    format, unreadable, or has two columns of one name."""
    path = Path(path)
    arrow = _read_arrow(path, site, header=True, suffixes=TABLE_SUFFIXES)
    names = arrow.column_names
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise InvalidDataError(f"{site}: {path} has columns {doubled} more than once in its "
                               "header; give every column one name")
    return {name: _column_array(arrow.column(i), site, path, name)
            for i, name in enumerate(names)}


def read_matrix(path: str | Path, site: str = "site") -> np.ndarray:
    """An all-numeric ``.npy`` (memory-mapped), CSV (a header line is optional) or Parquet
    file as an ``n x d`` array (blanks are NaN: validation refuses them)."""
    path = Path(path)
    _require_file(path, site, (*TABLE_SUFFIXES, *NPY_SUFFIXES))
    if path.name.lower().endswith(NPY_SUFFIXES):
        return np.load(path, mmap_mode="r", allow_pickle=False)
    arrow = _read_arrow(path, site, header=True, suffixes=TABLE_SUFFIXES)
    if _is_csv(path) and all(_is_number(name) for name in arrow.column_names):
        arrow = _read_arrow(path, site, header=False, suffixes=CSV_SUFFIXES)  # no header
    columns = []
    for i, column in enumerate(arrow.columns, start=1):
        if not _numeric(column.type):
            raise InvalidDataError(
                f"{site}: {path} column {i} holds text, not numbers; remove text columns or "
                "encode them as numbers before the run, or read the table through a data "
                "contract (policy [site] contract; docs/tables.md)")
        columns.append(_column_array(column, site, path, str(i)))
    if not columns:
        raise InvalidDataError(f"{site}: {path} has no columns")
    return np.column_stack(columns)


def matrix_width(path: str | Path, site: str = "site") -> int:
    """The number of columns :func:`read_matrix` reads from ``path``, from the file's head
    alone (a ``.npy`` header, a Parquet schema, a CSV file's first line), no value read;
    raises InvalidDataError naming ``site`` and the file when it is missing, of another
    format or holds no columns."""
    path = Path(path)
    _require_file(path, site, (*TABLE_SUFFIXES, *NPY_SUFFIXES))
    if path.name.lower().endswith(NPY_SUFFIXES):
        shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
        width = shape[1] if len(shape) == 2 else 0
    elif _is_csv(path):
        width = len(_first_line(path))
    else:
        try:
            width = len(_arrow().parquet.read_schema(path).names)
        except (_arrow().ArrowException, OSError):
            width = 0
    if not width:
        raise InvalidDataError(f"{site}: {path} is not a matrix with columns")
    return width


def write_table(table: pa.Table, path: str | Path) -> Path:
    """Write ``table`` to ``path`` as CSV (blanks as empty cells) or Parquet, by suffix."""
    path = Path(path)
    if _is_csv(path):
        _arrow().csv.write_csv(table, path)
    elif path.name.lower().endswith(PARQUET_SUFFIXES):
        _arrow().parquet.write_table(table, path)
    else:
        raise InvalidDataError(f"{path}: give a file name ending in {TABLE_SUFFIXES}")
    return path


def _read_arrow(path: Path, site: str, header: bool, suffixes: tuple[str, ...]) -> pa.Table:
    """The file as a pyarrow table (one thread: this runs inside a site's processes)."""
    _require_file(path, site, suffixes)
    pa = _arrow()
    pa_csv = pa.csv
    try:
        if not _is_csv(path):
            return pa.parquet.read_table(path, use_threads=False)
        arrow = pa_csv.read_csv(
            path, read_options=pa_csv.ReadOptions(use_threads=False,
                                                  autogenerate_column_names=not header),
            convert_options=pa_csv.ConvertOptions(strings_can_be_null=True))
    except (pa.ArrowException, OSError) as exc:
        hint = delimiter_hint(_first_line(path))  # e.g. decimal commas after a ';' header
        raise InvalidDataError(f"{site}: {path} {hint}" if hint is not None else
                               f"{site}: {path} cannot be read: {_arrow_problem(exc)}") from None
    hint = delimiter_hint(arrow.column_names) if header else None
    if hint is not None:
        raise InvalidDataError(f"{site}: {path} {hint}")
    return arrow


#: Bytes read to find a CSV file's first line (its header) when pyarrow cannot read it.
HEADER_BYTES = 1 << 16


def _first_line(path: Path) -> list[str]:
    """A CSV file's first line as pyarrow would split it at commas (empty when unreadable):
    the header's names, never a record."""
    pa = _arrow()
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            head = stream.read(HEADER_BYTES).decode("utf-8", errors="replace")
    except (pa.ArrowException, OSError):
        return []
    return head.splitlines()[0].split(",") if head else []


def delimiter_hint(header: list[str]) -> str | None:
    """What is wrong with a CSV file whose header ``header`` reads as one column holding
    another delimiter than the comma (the delimiter named and counted, no name quoted), or
    ``None``."""
    if len(header) != 1:
        return None
    found = [(header[0].count(mark), mark) for mark in OTHER_DELIMITERS if mark in header[0]]
    if not found:
        return None
    count, mark = max(found)
    return (f"reads as one column: its header holds {count} {OTHER_DELIMITERS[mark]}(s) "
            f"({mark!r}) and no comma, so the file seems separated by {mark!r}; fedpca reads "
            "comma-separated CSV: export it with commas (R: write.csv, not write.csv2; a "
            "spreadsheet: \"CSV (comma delimited)\") or as Parquet")


def _require_file(path: Path, site: str, suffixes: tuple[str, ...]) -> None:
    if not path.is_file():
        raise InvalidDataError(f"{site}: data file {path} does not exist")
    if not path.name.lower().endswith(suffixes):
        raise InvalidDataError(f"{site}: {path} has suffix {''.join(path.suffixes)!r}; give a "
                               f"{' or '.join(suffixes)} file")


def _arrow_problem(exc: Exception) -> str:
    """What pyarrow found wrong, without the row it quotes."""
    found = _FIELD_COUNT.search(str(exc))
    if found:
        return (f"a row has {found[2]} cells where the header has {found[1]}; every row needs "
                "one cell per column (an empty cell for a blank)")
    if "Parquet magic bytes not found" in str(exc):
        return "it is not a Parquet file"
    return f"pyarrow raised {type(exc).__name__}"


def _column_array(column: pa.ChunkedArray, site: str, path: Path, name: str) -> np.ndarray:
    """float64 with NaN for blanks (numbers, booleans, all-blank columns) or object with
    ``None`` for blanks (everything else, as text)."""
    pa = _arrow()
    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    try:
        if _numeric(kind):
            return np.asarray(column.cast(pa.float64(), safe=False).to_numpy(),
                              dtype=np.float64)
        # to_pylist, not to_numpy: pyarrow's to_numpy of text imports pandas where it is
        # installed (a second or so in every process that reads a table)
        return np.array(column.cast(pa.string()).to_pylist(), dtype=object)
    except pa.ArrowException:
        raise InvalidDataError(f"{site}: {path} column {name!r} has type {kind}, which cannot "
                               "be read as numbers or text") from None


def _numeric(kind: pa.DataType) -> bool:
    pa = _arrow()
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
            or pa.types.is_decimal(kind) or pa.types.is_null(kind))


def load_reader() -> None:
    """Import what reading a table imports on first use: pyarrow with its ``csv``,
    ``parquet``, ``dataset`` (a Parquet file's reader) and ``compute`` modules, and what
    pyarrow's first conversion imports (pandas, where it is installed: about 0.3 s of CPU),
    by converting a column of numbers and one of text as :func:`read_table` does. A
    process that forks a table site's tasks calls it once, so that no task pays it. The
    first conversion also reserves the address space of pyarrow's memory pool (about 1 GB),
    as every task that reads a table does."""
    pa = _arrow()
    import pyarrow.dataset  # noqa: F401 (what pyarrow.parquet.read_table imports)

    for values in ([1.0], ["text"]):
        _column_array(pa.chunked_array([pa.array(values)]), "site", Path("load_reader"),
                      "load_reader")


def _arrow() -> ModuleType:
    """pyarrow with its ``csv`` and ``parquet`` modules, imported on first use, not with this
    module: a site whose records are a ``.npy`` file never loads them (a real site starts a
    fresh ClientApp process for every message)."""
    import pyarrow
    import pyarrow.csv
    import pyarrow.parquet  # noqa: F401 (pyarrow.parquet, read through the package)

    return pyarrow


def is_table_file(path: str | Path) -> bool:
    """Whether ``path`` names a CSV or Parquet file (by its suffix)."""
    return Path(path).name.lower().endswith(TABLE_SUFFIXES)


def _is_csv(path: Path) -> bool:
    return path.name.lower().endswith(CSV_SUFFIXES)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True

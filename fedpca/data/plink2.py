"""A site's genotypes as a PLINK 2 fileset (``PREFIX.pgen``, ``.pvar``, ``.psam``), the
``.pgen`` read with pgenlib (the ``genomics`` extra) a block of SNPs at a time.

:meth:`Plink2Fileset.read_block` returns the calls as counts of each variant's ``ALT`` allele
(what plink2's ``--export A`` counts by default; ``alleles = (ALT, REF)``): 0, 1 or 2, and
:data:`~fedpca.data.genotype_fileset.MISSING` for a missing call, in ``int8``
(``n x len(columns)`` bytes per block; pgenlib reads only those variants, through the
``.pgen``'s own index). A multi-allelic variant (``ALT`` holding a comma) is refused by id
when read.

The ``.pvar`` (SNP ids and alleles) and the ``.psam`` (sample ids) are text, read when the
fileset is opened: a ``.pvar`` with a ``#CHROM`` header line naming its columns (``ID``,
``REF`` and ``ALT`` are read; ``##`` lines before it skipped), or without one in ``.bim`` order
(``CHROM ID [CM] POS ALT REF``); a ``.psam`` with a ``#FID`` or ``#IID`` header line, or
without one in ``.fam`` order (``FID IID PAT MAT SEX [PHENO]``). A ``.psam`` without an ``FID``
column (plink2's default when it imports a VCF) gives every sample the FID
:data:`~fedpca.data.genotype_fileset.NO_FAMILY` (``0``: what PLINK 2 assumes of such a file, so
its ``--covar`` matches the covariate file). The ``.pgen``'s own sample and variant counts are
checked against the two tables then, so a file from another fileset is refused before any
genotype is read. A compressed ``.pvar.zst`` is not read: decompress it first.

What a hostile coordinator could do with it: nothing directly, since it reads the site's own
files at paths the site's operator gives. A site's genotypes and sample ids never leave it:
every error here names a file, counts, line numbers and SNP ids, never a genotype value nor a
sample id (as every format's, :mod:`fedpca.data.genotype_fileset`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from fedpca.data.genotype_fileset import MISSING, NO_FAMILY, GenotypeFileset, prefixed_files
from fedpca.errors import InvalidDataError
from fedpca.extras import PLINK2, import_extra

logger = logging.getLogger(__name__)

#: The parts of a fileset, in the order they are checked.
SUFFIXES = (".pgen", ".pvar", ".psam")
#: pgenlib's value of a missing call.
PGEN_MISSING = -9
#: The first field of a ``.psam`` header line.
PSAM_HEADERS = ("#FID", "#IID", "FID", "IID")
#: How a fileset is written, for refusals.
WRITE = "plink2 --make-pgen --out PREFIX"


def pgenlib() -> ModuleType:
    """The pgenlib module, imported on first use; without it, the error naming the
    ``genomics`` extra."""
    return import_extra(PLINK2, "reading PLINK 2 genotype files")


def text_table(path: Path, header_starts: tuple[str, ...]) -> tuple[list[str] | None,
                                                                    list[list[str]]]:
    """The header (``None``: none) and the rows of a whitespace-separated text table whose
    header line starts with one of ``header_starts`` (``##`` lines before it skipped); a row
    of another width than the first is refused naming the file and line number only (its
    fields may hold sample ids)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidDataError(f"could not read {path} ({type(error).__name__}): write the "
                               f"fileset again ({WRITE})") from None
    first = 0
    while first < len(lines) and lines[first].startswith("##"):
        first += 1
    fields = lines[first].split() if first < len(lines) else []
    header = None
    if fields and fields[0] in header_starts:
        header, first = [name.lstrip("#") for name in fields], first + 1
    rows = [line.split() for line in lines[first:] if line.strip()]
    width = len(header) if header is not None else len(rows[0]) if rows else 0
    for number, row in enumerate(rows, start=first + 1):
        if len(row) != width:
            raise InvalidDataError(
                f"{path} line {number} has {len(row)} fields, not {width} like "
                f"{'its header' if header else 'its first line'}; write the fileset again "
                f"({WRITE})")
    return header, rows


def column(path: Path, header: list[str] | None, rows: list[list[str]], name: str,
           position: int) -> np.ndarray:
    """Column ``name`` of a table with a ``header``, or at ``position`` (from the end when
    negative) of one without (``str`` array); a header without it is refused naming it."""
    if header is not None:
        if name not in header:
            raise InvalidDataError(f"{path} has no {name} column in its header line; write "
                                   f"the fileset again ({WRITE})")
        position = header.index(name)
    return np.array([row[position] for row in rows], dtype=str)


class Plink2Fileset(GenotypeFileset):
    """One PLINK 2 fileset, its ``.psam`` and ``.pvar`` read, its ``.pgen`` read on demand (a
    :class:`~fedpca.data.genotype_fileset.GenotypeFileset`; module docstring).

    Args:
        prefix: the path without suffix: ``PREFIX.pgen``, ``PREFIX.pvar`` and
            ``PREFIX.psam`` must exist (``plink2 --make-pgen --out PREFIX`` writes them); a
            path ending in one of the suffixes is taken without it.

    Attributes:
        prefix: the path without suffix.
        data_file, variant_file: the ``.pgen`` and the ``.pvar``.
        snps, fid, iid, samples: as every fileset's (FID ``0`` without an ``FID`` column).
        alleles: ``(ALT, REF)``: :meth:`read_block` counts ``ALT``.
    """

    FORMAT = "PLINK 2"
    COUNTED = "ALT"
    OTHER = "REF"

    def __init__(self, prefix: str | Path) -> None:
        self.prefix = prefixed_files(prefix, SUFFIXES, "PLINK 2 fileset", WRITE)
        self.data_file, self.variant_file = self.path(".pgen"), self.path(".pvar")
        header, rows = text_table(self.path(".psam"), PSAM_HEADERS)
        self.iid = column(self.path(".psam"), header, rows, "IID", 1)
        self.fid = (np.full(self.iid.shape, NO_FAMILY) if header is not None and "FID" not in
                    header else column(self.path(".psam"), header, rows, "FID", 0))
        header, rows = text_table(self.variant_file, ("#CHROM",))
        self.snps = column(self.variant_file, header, rows, "ID", 1)
        self.alleles = (column(self.variant_file, header, rows, "ALT", -2),
                        column(self.variant_file, header, rows, "REF", -1))
        self.samples = int(len(self.iid))
        self._reader = self._open_pgen()

    def path(self, suffix: str) -> Path:
        """The fileset's file with ``suffix`` (``".pgen"``, ``".pvar"`` or ``".psam"``)."""
        return self.prefix.with_name(self.prefix.name + suffix)

    def align_command(self, table: Path) -> str:
        """``plink2 --ref-allele force``: REF set to the panel's ``a2`` (so ALT is its
        ``a1``), a new fileset."""
        return (f"plink2 --pfile {self.prefix} --ref-allele force {table} 3 1 --make-pgen "
                f"--out FIXED")

    def _open_pgen(self) -> Any:
        """pgenlib's reader of the ``.pgen``, once its counts match the two tables'."""
        pgen = self.data_file
        try:
            reader = pgenlib().PgenReader(bytes(pgen))
        except RuntimeError as error:
            raise InvalidDataError(f"{pgen} is not a .pgen pgenlib reads "
                                   f"({type(error).__name__}); write it again ({WRITE})"
                                   ) from None
        counts = (reader.get_raw_sample_ct(), reader.get_variant_ct())
        if counts != (self.samples, self.snp_count):
            reader.close()
            raise InvalidDataError(
                f"{pgen} holds {counts[0]} samples x {counts[1]} variants but its .psam lists "
                f"{self.samples} and its .pvar {self.snp_count}: it belongs to another "
                f"fileset; write all three files again ({WRITE})")
        logger.debug("opened %s: %d samples, %d SNPs", self.prefix, self.samples,
                     self.snp_count)
        return reader

    def _read(self, index: np.ndarray) -> np.ndarray:
        """ALT counts of the ``.pgen`` variants ``index``; only those variants are read."""
        calls = np.empty((index.size, self.samples), dtype=np.int8)
        if index.size:
            try:
                self._reader.read_list(index.astype(np.uint32), calls)
            except RuntimeError as error:
                raise InvalidDataError(
                    f"could not read {self.data_file} ({type(error).__name__}): it changed or "
                    f"is damaged since it was opened; write it again ({WRITE})") from None
        calls[calls == PGEN_MISSING] = MISSING
        return calls.T

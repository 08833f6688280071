"""A site's genotypes as a PLINK 1 binary fileset (``PREFIX.bed``, ``.bim``, ``.fam``), read
with bed-reader (the ``genomics`` extra) a block of SNPs at a time.

PLINK 1's ``.bed`` stores, SNP by SNP, two bits per sample: a genotype call or a missing call.
:meth:`PlinkFileset.read_block` returns them as counts of the ``.bim``'s allele 1 (column 5,
``A1``: PLINK's convention, bed-reader's ``count_A1=True``): 0, 1 or 2, and :data:`MISSING`
for a missing call, in ``int8`` (a byte per call: ``n x len(columns)`` bytes per block).

The ``.fam`` (sample ids, FID and IID) and the ``.bim`` (SNP ids and alleles) are read when
the fileset is opened; the ``.bed``'s size is checked against their counts then, so a
truncated file or one from another fileset is refused before any genotype is read.

What a hostile coordinator could do with it: nothing directly, since it reads the site's own
files at paths the site's operator gives. A site's genotypes and sample ids never leave it:
every error here names a file, counts and SNP ids (public, the consortium's panel names them),
never a genotype value nor a sample id, so a refusal that reaches the coordinator holds
nothing of the site's people (as every format's, :mod:`fedpca.data.genotype_fileset`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import numpy as np

from fedpca.data.genotype_fileset import MISSING, GenotypeFileset, prefixed_files
from fedpca.errors import InvalidDataError
from fedpca.extras import GENOMICS, import_extra

logger = logging.getLogger(__name__)

__all__ = ["MISSING", "PlinkFileset", "bed_reader", "bed_size"]

#: The three bytes every SNP-major PLINK 1 ``.bed`` starts with.
BED_MAGIC = bytes((0x6C, 0x1B, 0x01))
#: The parts of a fileset, in the order they are checked.
SUFFIXES = (".bed", ".bim", ".fam")


def bed_reader() -> ModuleType:
    """The bed_reader module, imported on first use; without it, the error naming the
    ``genomics`` extra."""
    return import_extra(GENOMICS, "reading PLINK genotype files")


def bed_size(samples: int, snps: int) -> int:
    """The bytes of a SNP-major ``.bed`` of ``samples`` x ``snps``: the 3-byte header, then
    per SNP a quarter byte per sample, rounded up to whole bytes."""
    return len(BED_MAGIC) + snps * ((samples + 3) // 4)


class PlinkFileset(GenotypeFileset):
    """One PLINK 1 binary fileset, its ``.fam`` and ``.bim`` read, its ``.bed`` read on demand
    (a :class:`~fedpca.data.genotype_fileset.GenotypeFileset`).

    Args:
        prefix: the path without suffix: ``PREFIX.bed``, ``PREFIX.bim`` and ``PREFIX.fam``
            must exist (``plink --make-bed --out PREFIX`` writes them); a path ending in
            one of the suffixes is taken without it.
        num_threads: bed-reader's threads per read (``None``: its default, every core).

    Attributes:
        prefix: the path without suffix.
        data_file, variant_file: the ``.bed`` and the ``.bim``.
        snps: the ``.bim``'s SNP ids, in file order (``str`` array of length ``d``).
        alleles: ``(a1, a2)``, the ``.bim``'s allele 1 (what :meth:`read_block` counts) and
            allele 2, each a ``str`` array of length ``d``.
        fid, iid: the ``.fam``'s family and individual ids (``str`` arrays of length ``n``):
            for the site's own covariate file only, never sent, logged or quoted.
        samples: the number of samples ``n``.
    """

    FORMAT = "PLINK 1"
    COUNTED = "allele 1 (A1)"
    OTHER = "allele 2 (A2)"

    def __init__(self, prefix: str | Path, num_threads: int | None = None) -> None:
        self.prefix = prefixed_files(prefix, SUFFIXES, "PLINK 1 binary fileset",
                                     "plink --make-bed --out PREFIX")
        self.data_file, self.variant_file = self.path(".bed"), self.path(".bim")
        self._num_threads = num_threads
        self._bed = bed_reader().open_bed(self.path(".bed"), num_threads=num_threads,
                                            skip_format_check=True)
        self.fid = self._property("fid", ".fam")
        self.iid = self._property("iid", ".fam")
        self.snps = self._property("sid", ".bim")
        self.alleles = (self._property("allele_1", ".bim"), self._property("allele_2", ".bim"))
        self.samples = int(len(self.iid))
        self._check_bed()

    def path(self, suffix: str) -> Path:
        """The fileset's file with ``suffix`` (``".bed"``, ``".bim"`` or ``".fam"``)."""
        return self.prefix.with_name(self.prefix.name + suffix)

    def align_command(self, table: Path) -> str:
        """``plink --a1-allele``: allele 1 set to the panel's ``a1``, a new fileset."""
        return f"plink --bfile {self.prefix} --a1-allele {table} 2 1 --make-bed --out FIXED"

    def _read(self, index: np.ndarray) -> np.ndarray:
        """Allele-1 counts of the ``.bed`` columns ``index``; only those SNPs are read."""
        try:
            return self._bed.read(index=np.s_[:, index], dtype="int8", order="F",
                                  num_threads=self._num_threads)
        except (ValueError, OSError) as error:
            raise InvalidDataError(
                f"could not read {self.path('.bed')} ({type(error).__name__}): it changed "
                f"or is damaged since it was opened; rewrite it with plink --make-bed"
            ) from None

    def _property(self, name: str, suffix: str) -> np.ndarray:
        """One column of the ``.fam`` or ``.bim``, read by bed-reader; a malformed file is
        refused naming the file only (its lines may hold sample ids)."""
        try:
            values = getattr(self._bed, name)
        except (ValueError, OSError, IndexError) as error:
            raise InvalidDataError(
                f"could not read {self.path(suffix)} ({type(error).__name__}): a .fam has 6 "
                f"and a .bim 6 whitespace-separated fields a line; rewrite the fileset with "
                f"plink --make-bed") from None
        return np.asarray(values, dtype=str)

    def _check_bed(self) -> None:
        """Refuse a ``.bed`` that is not SNP-major PLINK 1 or whose size does not match the
        ``.fam``'s and ``.bim``'s counts."""
        bed = self.path(".bed")
        with bed.open("rb") as handle:
            magic = handle.read(len(BED_MAGIC))
        if magic != BED_MAGIC:
            raise InvalidDataError(
                f"{bed} is not a SNP-major PLINK 1 .bed (it does not start with the bytes "
                f"6c 1b 01); convert it with plink --bfile {self.prefix} --make-bed")
        size, expected = bed.stat().st_size, bed_size(self.samples, self.snp_count)
        if size != expected:
            raise InvalidDataError(
                f"{bed} has {size} bytes but its .fam's {self.samples} samples and .bim's "
                f"{self.snp_count} SNPs need {expected}: it is truncated or belongs to "
                f"another fileset; write all three files again (plink --make-bed)")
        logger.debug("opened %s: %d samples, %d SNPs", self.prefix, self.samples,
                     self.snp_count)

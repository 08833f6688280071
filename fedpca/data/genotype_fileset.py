"""What every format of a site's genotype files gives fedpca: SNP ids, the alleles, the sample
ids and blocks of calls, whichever file holds them (PLINK 1 :mod:`fedpca.data.plink`, PLINK 2
:mod:`fedpca.data.plink2`, VCF/BCF :mod:`fedpca.data.vcf`; :mod:`fedpca.data.genotype_formats`
opens a path as the right one).

A fileset lists ``d`` SNPs, each with the allele its calls count (``alleles[0]``: PLINK 1's
``A1``, a ``.pgen``'s or VCF's ``ALT``) and the other one (``alleles[1]``), and ``n`` samples;
:meth:`GenotypeFileset.read_block` returns the calls of some SNPs for every sample as counts of
the counted allele, 0, 1 or 2, with :data:`MISSING` for a missing call, in ``int8``
(``n x len(columns)`` bytes per block). A multi-allelic variant lists its alternative alleles
joined by commas in ``alleles[0]``; its calls cannot be counted as one allele's and reading
them is refused by id (:func:`~fedpca.data.snp_panel.check_fileset` refuses a panel SNP that
is one, before any run).

What a hostile coordinator could do with it: nothing directly, since a site reads its own files
at paths its operator gives. A site's genotypes and sample ids never leave it: every error of
a fileset names files, counts and SNP ids (public, the consortium's panel names them), never a
genotype value nor a sample id, so a refusal that reaches the coordinator holds nothing of the
site's people.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property
from pathlib import Path

import numpy as np

from fedpca.errors import InvalidDataError

#: The value of a missing call in :meth:`GenotypeFileset.read_block` (bed-reader's int8 marker).
MISSING = -127
#: The FID of a sample whose file names no family (a VCF, a ``.psam`` without ``FID``):
#: ``0``, what PLINK 2 assumes of them.
NO_FAMILY = "0"
#: What splits or drops a multi-allelic variant, for its refusals.
MULTIALLELIC_FIX = ("split it into biallelic records with ids of their own (bcftools norm -m- "
                    "then bcftools annotate --set-id '%CHROM:%POS:%REF:%FIRST_ALT') or drop "
                    "it (plink2 --max-alleles 2)")


class GenotypeFileset(ABC):
    """A site's genotype files, their SNPs and samples read when opened, their calls on demand.

    Attributes (set by each format when it opens its files):
        data_file: the file holding the calls (the site's data file: the ledger records its
            hash).
        variant_file: the file listing the SNPs and their alleles.
        snps: the SNP ids, in file order (``str`` array of length ``d``).
        alleles: ``(counted, other)``, the allele :meth:`read_block` counts and the other one,
            each a ``str`` array of length ``d``.
        fid, iid: the samples' family and individual ids (``str`` arrays of length ``n``): for
            the site's own covariate file only, never sent, logged or quoted.
        samples: the number of samples ``n``.
    """

    #: The format's name, for messages (e.g. ``"PLINK 1"``).
    FORMAT = ""
    #: The allele its calls count and the other one, for messages (e.g. ``"allele 1 (A1)"``
    #: and ``"allele 2 (A2)"``).
    COUNTED = OTHER = ""

    data_file: Path
    variant_file: Path
    snps: np.ndarray
    alleles: tuple[np.ndarray, np.ndarray]
    fid: np.ndarray
    iid: np.ndarray
    samples: int

    @property
    def snp_count(self) -> int:
        """The number of SNPs ``d``."""
        return int(len(self.snps))

    @cached_property
    def multiallelic(self) -> np.ndarray:
        """Per SNP, whether it lists more than one alternative allele (bool, ``d``)."""
        return np.char.find(self.alleles[0], ",") >= 0

    @abstractmethod
    def align_command(self, table: Path) -> str:
        """The command that recodes these files so that the counted allele of every SNP is
        column 2 (``a1``) of the panel's ``table``."""

    def read_block(self, columns: np.ndarray | list[int]) -> np.ndarray:
        """The calls of SNPs ``columns`` (column indices in file order, any order) for every
        sample: an ``n x len(columns)`` int8 array of counts of the counted allele (0, 1, 2)
        with :data:`MISSING` for a missing call. A multi-allelic SNP is refused by id."""
        index = np.asarray(columns, dtype=np.intp)
        if index.ndim != 1 or (index.size and not
                               (0 <= index.min() and index.max() < self.snp_count)):
            raise InvalidDataError(
                f"{self.variant_file} has {self.snp_count} SNPs: read_block takes a 1-D list "
                f"of column indices in [0, {self.snp_count})")
        multi = self.multiallelic[index]
        if multi.any():
            raise InvalidDataError(
                f"{self.variant_file}: {self.snps[index[multi][0]]} is multi-allelic, its calls "
                f"count no one allele: {MULTIALLELIC_FIX}")
        return self._read(index)

    @abstractmethod
    def _read(self, index: np.ndarray) -> np.ndarray:
        """:meth:`read_block` of checked, biallelic column indices."""


def prefixed_files(path: str | Path, suffixes: tuple[str, ...], kind: str, how: str) -> Path:
    """The prefix of a ``kind`` of fileset, files ``suffixes``, named by ``path`` (the prefix
    itself or any of its files), once every file exists; otherwise the error naming the
    missing one and ``how`` the fileset is written."""
    path = Path(path)
    prefix = path.with_suffix("") if path.suffix in suffixes else path
    for suffix in suffixes:
        part = prefix.with_name(prefix.name + suffix)
        if not part.is_file():
            raise InvalidDataError(
                f"{part} does not exist: a {kind} is PREFIX{'/'.join(suffixes)} side by side "
                f"({how} writes them); give the prefix {prefix} of all {len(suffixes)}")
    return prefix

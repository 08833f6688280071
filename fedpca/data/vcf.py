"""A site's genotypes as one VCF or BCF file (``.vcf``, ``.vcf.gz``, ``.bcf``), read with
cyvcf2 (the ``genomics`` extra).

:meth:`VcfFile.read_block` returns each sample's ``GT`` call as its count of the variant's
``ALT`` allele (``alleles = (ALT, REF)``, as a ``.pgen``'s): 0, 1 or 2, and
:data:`~fedpca.data.genotype_fileset.MISSING` for a missing call, in ``int8``. A call missing
either allele (``./.``, ``.``, and a half call ``./1``: plink2's ``--vcf-half-call missing``)
is missing; a haploid call counts as homozygous (0 or 2, as plink2 imports it); phased and
unphased calls count alike. A multi-allelic record (``ALT`` holding a comma) is refused by id
when read, a record without ``GT`` or with more than two alleles a call when read.

The samples and every record's ``ID``, ``REF`` and ``ALT`` are read when the file is opened
(one pass over the file). A VCF has sample ids only: every sample's IID is its id and its FID
is :data:`~fedpca.data.genotype_fileset.NO_FAMILY` (``0``), as ``plink2 --vcf FILE`` names them, for
the covariate file.

Memory and time: a VCF is variant-major and fedpca reads it without an index, so
:meth:`VcfFile.read_block` scans the file from its start to the block's last variant, one
record at a time, and keeps only the block's calls: ``n x len(columns)`` int8 bytes and one
record, whatever the file's size. A pass over a site's rows (:mod:`fedpca.data.genotypes`)
reads ``d / block`` blocks, so it parses the file up to that many times: for large files,
convert once to a ``.pgen`` (``plink2 --vcf FILE --make-pgen --out PREFIX``), whose reader
seeks to each variant.

What a hostile coordinator could do with it: nothing directly, since it reads the site's own
file at the path the site's operator gives. A site's genotypes and sample ids never leave it:
every error here names the file, counts and SNP ids, never a genotype value nor a sample id
(as every format's, :mod:`fedpca.data.genotype_fileset`); htslib's own warnings go to the
site's stderr only.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from fedpca.data.genotype_fileset import MISSING, NO_FAMILY, GenotypeFileset
from fedpca.errors import InvalidDataError
from fedpca.extras import VCF, import_extra

logger = logging.getLogger(__name__)

#: The file names a VCF or BCF file ends with.
SUFFIXES = (".vcf", ".vcf.gz", ".vcf.bgz", ".bcf")
#: cyvcf2's allele index of a missing allele and of the end of a shorter (haploid) call.
MISSING_ALLELE, CALL_END = -1, -2
#: What turns a VCF into a PLINK 2 fileset, for refusals.
CONVERT = "plink2 --vcf FILE --make-pgen --out PREFIX"


def cyvcf2() -> ModuleType:
    """The cyvcf2 module, imported on first use; without it, the error naming the
    ``genomics`` extra."""
    return import_extra(VCF, "reading VCF/BCF genotype files")


def alt_counts(alleles: np.ndarray) -> np.ndarray:
    """Each sample's count of allele 1 (``ALT``) in its call, from cyvcf2's allele indices
    (``n x ploidy``, :data:`MISSING_ALLELE` and :data:`CALL_END` as cyvcf2 marks them): a
    call missing either allele is :data:`MISSING`, a haploid call counts twice (int8, ``n``)."""
    first = alleles[:, 0]
    second = alleles[:, 1] if alleles.shape[1] > 1 else np.full_like(first, CALL_END)
    counts = (first == 1).astype(np.int8) + (second == 1)
    counts = np.where(second == CALL_END, 2 * (first == 1), counts).astype(np.int8)
    counts[(first < 0) | (second == MISSING_ALLELE)] = MISSING
    return counts


class VcfFile(GenotypeFileset):
    """One VCF or BCF file, its samples and records' ids and alleles read, its calls read on
    demand (a :class:`~fedpca.data.genotype_fileset.GenotypeFileset`; module docstring).

    Args:
        path: the ``.vcf``, ``.vcf.gz`` (bgzip or gzip) or ``.bcf`` file.

    Attributes:
        data_file, variant_file: the file.
        snps: the records' ``ID`` (``.`` for none), in file order.
        alleles: ``(ALT, REF)`` (``ALT`` ``.`` for none, multi-allelic ones comma-joined):
            :meth:`read_block` counts ``ALT``.
        fid, iid: ``0`` and each sample's id (as plink2 reads a VCF).
        samples: the number of samples ``n``.
    """

    FORMAT = "VCF"
    COUNTED = "ALT"
    OTHER = "REF"

    def __init__(self, path: str | Path) -> None:
        self.data_file = self.variant_file = Path(path)
        if not self.data_file.is_file():
            raise InvalidDataError(f"{self.data_file} does not exist: give the site's VCF or "
                                   f"BCF file ({', '.join(SUFFIXES)})")
        reader = self._open()
        try:
            self.iid = np.array(reader.samples, dtype=str)
            ids, alts, refs = [], [], []
            for record in reader:
                ids.append(record.ID or ".")
                alts.append(",".join(record.ALT) or ".")
                refs.append(record.REF)
        except Exception as error:  # cyvcf2 raises bare exceptions for damaged records
            raise self._damaged(error) from None
        finally:
            reader.close()
        if not self.iid.size:
            raise InvalidDataError(f"{self.data_file} holds no sample (no column after FORMAT): "
                                   f"a site's VCF holds its samples' GT calls")
        self.fid = np.full(self.iid.shape, NO_FAMILY)
        self.snps = np.array(ids, dtype=str)
        self.alleles = (np.array(alts, dtype=str), np.array(refs, dtype=str))
        self.samples = int(len(self.iid))
        logger.debug("opened %s: %d samples, %d SNPs", self.data_file, self.samples,
                     self.snp_count)

    def align_command(self, table: Path) -> str:
        """``plink2 --ref-allele force`` on import: REF set to the panel's ``a2`` (so ALT is
        its ``a1``), a PLINK 2 fileset."""
        return (f"plink2 --vcf {self.data_file} --ref-allele force {table} 3 1 --make-pgen "
                f"--out FIXED, and give FIXED.pgen")

    def _open(self) -> Any:
        """A cyvcf2 reader at the file's first record (not ``lazy``: cyvcf2 0.35 crashes
        reading a lazy record's FORMAT keys)."""
        try:
            return cyvcf2().VCF(str(self.data_file))
        except OSError as error:
            raise self._damaged(error) from None

    def _damaged(self, error: Exception) -> InvalidDataError:
        """The refusal of a file cyvcf2 cannot read (the error's type only: its message may
        quote a record)."""
        return InvalidDataError(f"could not read {self.data_file} as a VCF or BCF file "
                                f"({type(error).__name__}); check it with bcftools view, or "
                                f"write it again")

    def _read(self, index: np.ndarray) -> np.ndarray:
        """ALT counts of records ``index``, from one scan up to the last of them."""
        wanted: dict[int, list[int]] = {}
        for position, variant in enumerate(index.tolist()):
            wanted.setdefault(variant, []).append(position)
        calls = np.empty((self.samples, index.size), dtype=np.int8, order="F")
        found, last = 0, max(wanted, default=-1)
        reader = self._open()
        try:
            for number, record in enumerate(reader):
                if number > last:
                    break
                if number in wanted:
                    calls[:, wanted[number]] = self._calls(record, number)[:, None]
                    found += 1
        except InvalidDataError:
            raise
        except Exception as error:  # cyvcf2 raises bare exceptions for damaged records
            raise self._damaged(error) from None
        finally:
            reader.close()
        if found != len(wanted):
            raise self._changed()
        return calls

    def _calls(self, record: Any, number: int) -> np.ndarray:
        """Record ``number``'s ALT counts (int8, ``n``), refused when it is not the record
        opened or holds no diploid or haploid ``GT`` calls."""
        snp = self.snps[number]
        if (record.ID or ".") != snp:
            raise self._changed()
        if "GT" not in record.FORMAT:
            raise InvalidDataError(f"{self.data_file}: record {snp} has no GT field: fedpca "
                                   f"counts GT calls (hard calls, not dosages)")
        alleles = record.genotype.array()[:, :-1]
        if alleles.shape[1] > 2:
            raise InvalidDataError(f"{self.data_file}: record {snp} has calls of ploidy "
                                   f"{alleles.shape[1]}: fedpca counts diploid (or haploid) "
                                   f"calls only")
        return alt_counts(alleles)

    def _changed(self) -> InvalidDataError:
        """The refusal of a file whose records are not those read when it was opened."""
        return InvalidDataError(f"{self.data_file} changed since it was opened (its records "
                                f"are not the {self.snp_count} read then); open it again")

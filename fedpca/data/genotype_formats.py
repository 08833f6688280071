"""The formats a site's genotypes may come in, and the path that names one opened as it.

* PLINK 1 (:class:`~fedpca.data.plink.PlinkFileset`): ``PREFIX`` or ``PREFIX.bed`` (with
  ``.bim`` and ``.fam``); the calls count the ``.bim``'s allele 1 (``A1``).
* PLINK 2 (:class:`~fedpca.data.plink2.Plink2Fileset`): ``PREFIX.pgen`` (with ``.pvar`` and
  ``.psam``; or either of those); the calls count ``ALT``.
* VCF / BCF (:class:`~fedpca.data.vcf.VcfFile`): ``FILE.vcf``, ``FILE.vcf.gz`` or
  ``FILE.bcf``; the calls count ``ALT``, every sample's FID is its IID.

:func:`open_genotypes` chooses by the path's suffix; a path without one of them is a PLINK 1
prefix (as a site's ``genotypes`` and ``--plink`` always named one), refused naming every
format when ``PREFIX.bed`` does not exist. Every one of them is a
:class:`~fedpca.data.genotype_fileset.GenotypeFileset`: the same panel check, rows and
covariate file follow, and their errors name files, counts and SNP ids, never a genotype
value nor a sample id.
"""

from __future__ import annotations

from pathlib import Path

from fedpca.data import plink, plink2, vcf
from fedpca.data.genotype_fileset import GenotypeFileset
from fedpca.errors import InvalidDataError

#: What :func:`open_genotypes` reads, for messages.
FORMATS = ("a PLINK 1 fileset (PREFIX or PREFIX.bed, with .bim and .fam), a PLINK 2 fileset "
           "(PREFIX.pgen, with .pvar and .psam) or a VCF/BCF file (.vcf, .vcf.gz, .bcf)")


def genotype_format(path: Path) -> type[GenotypeFileset]:
    """The format of the genotype files ``path`` names, by its suffix (module docstring)."""
    if path.suffix in plink2.SUFFIXES:
        return plink2.Plink2Fileset
    if path.name.lower().endswith(vcf.SUFFIXES):
        return vcf.VcfFile
    return plink.PlinkFileset


def data_file(path: str | Path) -> Path:
    """The file holding the calls of the genotype files ``path`` names (a site's data file,
    whose hash its ledger records), found without opening them: the ``.bed``, the ``.pgen``
    or the VCF/BCF file itself."""
    path = Path(path)
    kind = genotype_format(path)
    if kind is vcf.VcfFile:
        return path
    suffixes = plink2.SUFFIXES if kind is plink2.Plink2Fileset else plink.SUFFIXES
    prefix = path.with_suffix("") if path.suffix in suffixes else path
    return prefix.with_name(prefix.name + suffixes[0])


def open_genotypes(path: str | Path) -> GenotypeFileset:
    """The genotype files ``path`` names, opened as their format (:func:`genotype_format`);
    a path naming no PLINK 2 or VCF/BCF file and no ``.bed`` is refused naming the formats
    read."""
    path = Path(path)
    kind = genotype_format(path)
    if kind is plink.PlinkFileset and not data_file(path).is_file():
        raise InvalidDataError(f"{path} names no genotype files fedpca reads: give "
                               f"{FORMATS}")
    return kind(path)

"""A SNP panel: the contract for genotypes a consortium agrees on, as a TOML file and a TSV
file each site keeps a copy of and no coordinator can change.

The TOML file::

    [panel]
    name = "ancestry-v1"
    snps = "panel.tsv"        # the SNP table, relative to this file's folder
    standardise = "public"    # "public": the table's frequencies; "private": released ones
    missing = "mean"          # a missing call becomes the SNP's mean (0 once standardised)
    row-norm = 150.0          # the public bound on a standardised row's L2 norm
    frequencies = "sum"       # with "private": one release of the union's allele counts
                              # (inside the run's secure sum, if any), or "per-site"
    reference-size = 1000     # optional: the public genomes the start was computed from
    reference-variances = [31.2, 17.8]  # and its top k eigenvalues (below)

The TSV file, tab-separated, header ``snp a1 a2 freq``, one line per SNP in the panel's order
(the order of the columns every site's rows have): the SNP id, its allele 1 (the allele
counted, PLINK's ``A1``), its allele 2, and ``freq``: the public frequency of ``a1`` in
``(0, 1)`` (from public genomes), required for ``standardise = "public"`` and optional
for ``"private"``, where the frequencies come from a private release of the sites' allele
counts (:mod:`fedpca.algorithms.genotype_centring`) and ``freq`` is the reference's, read
only to shift a public start (:mod:`fedpca.algorithms.shifted_start`). ``frequencies =
"per-site"`` (with ``"private"`` only) makes every site release its own allele counts with
the full noise of the release, outside any secure sum: the coordinator then sees each
site's noisy frequencies (a site's population mix, not any individual's genotype: the
release's guarantee is the same), and the start gains the directions in which the sites
differ (:mod:`fedpca.algorithms.shifted_start`). Being in the panel, the choice is one every
member agreed to and reads from its own copy; no coordinator can make a site answer so.
``reference-size`` and ``reference-variances`` (both or neither) describe the public start:
how many reference genomes it was computed from, and the top eigenvalues of their
standardised rows' covariance (variance per individual along each start column, largest
first; 1 is one SNP's worth): a run's plan compares its noise with them and says, before
anything is spent, when the panel's PCs alone are likely closer to the union's than the run
would be (:mod:`fedpca.algorithms.panel_advice`).

Privacy (unit: one individual's genotype row, replace-one). Everything here is public: the
panel names SNPs, alleles, public frequencies and the row-norm bound, and every standardised
row is clipped to that bound (:mod:`fedpca.data.genotypes`), so the sensitivity of any sum of
rows comes from the panel alone. A bound or a frequency read off a site's genotypes would
disclose them: both come from public knowledge.

What a hostile coordinator could do with it: nothing, since the site reads its own copy.
:attr:`SnpPanel.digest` (SHA-256 of the SHA-256 of the TOML bytes and of the TSV bytes) is
what a run's requests will name, so a site can refuse a run made under another panel (a
changed SNP, frequency or bound would change the sensitivity or the released statistic).
:func:`check_fileset` refuses, before any run, a site's fileset (PLINK 1, PLINK 2 or VCF/BCF:
:mod:`fedpca.data.genotype_formats`) that misses a panel SNP, holds it as a multi-allelic
variant or codes its alleles otherwise; its errors name SNP ids and counts, never a genotype
or sample.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedpca.data.genotype_fileset import MULTIALLELIC_FIX, GenotypeFileset
from fedpca.errors import ConfigurationError, InvalidDataError

#: How a panel's SNPs are standardised: with its table's frequencies, or released ones.
STANDARDISE = ("public", "private")
#: How a private panel's frequencies are released: the union's sum, or every site's own.
FREQUENCIES = ("sum", "per-site")
#: What a missing call becomes.
MISSING_RULES = ("mean",)
#: The keys of ``[panel]``.
PANEL_KEYS = frozenset({"name", "snps", "standardise", "missing", "row-norm",
                        "frequencies", "reference-size", "reference-variances"})
#: The TSV's header, with and without the frequency column.
HEADER = ("snp", "a1", "a2", "freq")
#: How many SNP ids an error names before it says how many there are in all.
NAMED = 5


@dataclass(frozen=True, eq=False)
class SnpPanel:
    """A loaded, checked SNP panel (:func:`load_panel`).

    Attributes:
        path: its TOML file.
        table: its TSV file.
        name: the panel's name.
        snps, a1, a2: the SNP ids and their alleles, in the panel's order.
        freq: the public frequencies of ``a1`` (``None``: the table has none).
        standardise: ``"public"`` or ``"private"``.
        missing: what a missing call becomes (``"mean"``).
        row_norm: the public bound on a standardised row's L2 norm.
        digest: SHA-256 hex of the SHA-256 of the TOML bytes and of the TSV bytes.
        frequencies: ``"sum"`` or ``"per-site"`` (module docstring).
        reference: the start's reference genomes and their top eigenvalues (``None``: the
            panel does not state them; module docstring).
    """

    path: Path
    table: Path
    name: str
    snps: tuple[str, ...]
    a1: tuple[str, ...]
    a2: tuple[str, ...]
    freq: np.ndarray | None
    standardise: str
    missing: str
    row_norm: float
    digest: str
    frequencies: str = "sum"
    reference: ReferenceSpectrum | None = None

    @property
    def per_site_frequencies(self) -> bool:
        """Whether every site releases its own allele counts (module docstring)."""
        return self.frequencies == "per-site"

    @property
    def d(self) -> int:
        """The number of SNPs (the width of every site's rows)."""
        return len(self.snps)


@dataclass(frozen=True)
class ReferenceSpectrum:
    """The public genomes a panel's start was computed from: their number and the top
    eigenvalues of their standardised rows' covariance (module docstring).

    Attributes:
        size: the reference genomes.
        variances: the eigenvalues, largest first (variance per individual; the noise bulk
            of standardised SNPs is about 1).
    """

    size: int
    variances: tuple[float, ...]


def panel_error(path: Path, problem: str) -> ConfigurationError:
    """The error of a panel file ``path`` that says ``problem`` (what to fix)."""
    return ConfigurationError(f"SNP panel {path}: {problem}")


def named(ids: list[str]) -> str:
    """The first :data:`NAMED` of ``ids`` and how many there are in all."""
    shown = ", ".join(ids[:NAMED])
    return shown + (f" and {len(ids) - NAMED} more ({len(ids)} in all)"
                    if len(ids) > NAMED else "")


def load_panel(path: str | Path) -> SnpPanel:
    """The panel of TOML file ``path`` and its TSV table, every field checked; a
    ConfigurationError names the file and what to fix."""
    path = Path(path)
    try:
        toml_bytes = path.read_bytes()
        settings = tomllib.loads(toml_bytes.decode())["panel"]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError,
            TypeError) as error:
        raise panel_error(path, f"cannot be read as a TOML file with a [panel] table "
                                f"({type(error).__name__}: {error})") from None
    if not isinstance(settings, dict) or set(settings) - PANEL_KEYS:
        raise panel_error(path, f"[panel] takes only the keys {sorted(PANEL_KEYS)}")
    name, table = settings.get("name"), settings.get("snps")
    if not isinstance(name, str) or not name.strip():
        raise panel_error(path, "set name = \"...\" (the panel's name) under [panel]")
    if not isinstance(table, str) or not table:
        raise panel_error(path, "set snps = \"FILE.tsv\" (the SNP table, relative to the "
                                "panel file's folder) under [panel]")
    standardise = settings.get("standardise", "public")
    if standardise not in STANDARDISE:
        raise panel_error(path, f"standardise must be one of {STANDARDISE}, "
                                f"got {standardise!r}")
    frequencies = settings.get("frequencies", "sum")
    if frequencies not in FREQUENCIES or (frequencies != "sum" and standardise != "private"):
        raise panel_error(path, f"frequencies must be one of {FREQUENCIES}, \"per-site\" "
                                f"with standardise = \"private\" only; got {frequencies!r}")
    missing = settings.get("missing", "mean")
    if missing not in MISSING_RULES:
        raise panel_error(path, f"missing must be one of {MISSING_RULES}, got {missing!r}")
    row_norm = settings.get("row-norm")
    if (isinstance(row_norm, bool) or not isinstance(row_norm, int | float)
            or not math.isfinite(row_norm) or row_norm <= 0):
        raise panel_error(path, f"row-norm must be a positive number (the public bound on a "
                                f"standardised row's L2 norm), got {row_norm!r}")
    tsv = path.parent / table
    try:
        tsv_bytes = tsv.read_bytes()
    except OSError as error:
        raise panel_error(path, f"its SNP table {tsv} cannot be read "
                                f"({type(error).__name__}): fix snps = ...") from None
    snps, a1, a2, freq = _read_table(tsv, tsv_bytes)
    if freq is None and standardise == "public":
        raise panel_error(path, f"standardise = \"public\" needs the column freq (the public "
                                f"frequency of a1) in {tsv}")
    digest = hashlib.sha256(hashlib.sha256(toml_bytes).digest()
                            + hashlib.sha256(tsv_bytes).digest()).hexdigest()
    return SnpPanel(path, tsv, name, snps, a1, a2, freq, standardise, missing, float(row_norm),
                    digest, frequencies, reference_spectrum(path, settings))


def reference_spectrum(path: Path, settings: dict) -> ReferenceSpectrum | None:
    """The panel's ``reference-size`` and ``reference-variances`` (both or neither), checked."""
    size, variances = settings.get("reference-size"), settings.get("reference-variances")
    if size is None and variances is None:
        return None
    if (isinstance(size, bool) or not isinstance(size, int) or size < 2
            or not isinstance(variances, list) or not variances
            or not all(isinstance(v, int | float) and not isinstance(v, bool)
                       and math.isfinite(v) and v > 0 for v in variances)
            or any(a < b for a, b in zip(variances, variances[1:]))):
        raise panel_error(path, "set reference-size = N (the reference genomes, at least 2) "
                                "and reference-variances = [...] (the top eigenvalues of "
                                "their standardised covariance, positive, largest first) "
                                "together, or neither")
    return ReferenceSpectrum(size, tuple(float(v) for v in variances))


def _read_table(tsv: Path, data: bytes) -> tuple[tuple[str, ...], tuple[str, ...],
                                                 tuple[str, ...], np.ndarray | None]:
    """The SNP ids, alleles and frequencies (``None`` without the column) of a panel's TSV."""
    try:
        lines = list(csv.reader(data.decode().splitlines(), delimiter="\t"))
    except (UnicodeDecodeError, csv.Error) as error:
        raise panel_error(tsv, f"is not a tab-separated text file ({error})") from None
    if not lines or tuple(lines[0]) not in (HEADER, HEADER[:3]):
        raise panel_error(tsv, f"its header must be {' '.join(HEADER)} (tab-separated; freq "
                               f"optional with standardise = \"private\")")
    width, rows = len(lines[0]), lines[1:]
    if not rows:
        raise panel_error(tsv, "holds no SNP: one line per SNP after the header")
    for number, row in enumerate(rows, start=2):
        if len(row) != width or not all(cell.strip() == cell != "" for cell in row):
            raise panel_error(tsv, f"line {number} must hold {width} non-empty tab-separated "
                                   f"fields without spaces")
        if row[1].upper() == row[2].upper():
            raise panel_error(tsv, f"line {number}: SNP {row[0]} has a1 = a2 = {row[1]}")
    snps = tuple(row[0] for row in rows)
    repeated = [snp for snp, count in Counter(snps).items() if count > 1]
    if repeated:
        raise panel_error(tsv, f"SNP ids must be unique: {named(repeated)} repeat")
    a1, a2 = tuple(row[1] for row in rows), tuple(row[2] for row in rows)
    if width == 3:
        return snps, a1, a2, None
    try:
        freq = np.array([float(row[3]) for row in rows])
    except ValueError:
        raise panel_error(tsv, "freq must be a number on every line") from None
    outside = [s for s, f in zip(snps, freq) if not 0 < f < 1]
    if outside:
        raise panel_error(tsv, f"freq must lie in (0, 1) (a public frequency of a1; clip a "
                               f"monomorphic SNP's or drop it): {named(outside)}")
    return snps, a1, a2, freq


def check_fileset(panel: SnpPanel, fileset: GenotypeFileset, site: str) -> np.ndarray:
    """The fileset's column of each panel SNP, in the panel's order (int array of length
    ``panel.d``), after checking that ``fileset`` (any format,
    :mod:`fedpca.data.genotype_formats`) holds every panel SNP once, biallelic, with the
    panel's alleles (its counted allele = the panel's ``a1``). SNPs outside the panel are
    ignored. Refusals (InvalidDataError) name the site, the file and the SNP ids."""
    listed = fileset.variant_file
    position: dict[str, int] = {}
    repeated: list[str] = []
    for column, snp in enumerate(fileset.snps.tolist()):
        if snp in position:
            repeated.append(snp)
        position[snp] = column
    wanted = set(panel.snps)
    repeated = [snp for snp in dict.fromkeys(repeated) if snp in wanted]
    if repeated:
        raise InvalidDataError(
            f"site {site}: {listed} lists panel SNPs more than once: {named(repeated)}; keep "
            f"one line each (plink --rm-dup)")
    absent = [snp for snp in panel.snps if snp not in position]
    if absent:
        raise InvalidDataError(
            f"site {site}: {len(absent)} of the {panel.d} SNPs of panel {panel.name!r} are not "
            f"in {listed}: {named(absent)}; every site needs every panel SNP (genotype or "
            f"impute them, or agree on a panel without them)")
    columns = np.array([position[snp] for snp in panel.snps], dtype=np.intp)
    snps = np.array(panel.snps)
    multi = fileset.multiallelic[columns]
    if multi.any():
        raise InvalidDataError(
            f"site {site}: {listed} holds panel SNPs as multi-allelic variants: "
            f"{named(snps[multi].tolist())}; for each, {MULTIALLELIC_FIX}")
    site_a1 = np.char.upper(fileset.alleles[0][columns])
    site_a2 = np.char.upper(fileset.alleles[1][columns])
    a1, a2 = np.char.upper(np.array(panel.a1)), np.char.upper(np.array(panel.a2))
    same = (site_a1 == a1) & (site_a2 == a2)
    flipped = (site_a1 == a2) & (site_a2 == a1)
    if flipped.any():
        raise InvalidDataError(
            f"site {site}: {listed} has {fileset.COUNTED} and {fileset.OTHER} swapped "
            f"relative to panel {panel.name!r} for {named(snps[flipped].tolist())}; recode them "
            f"so that {fileset.COUNTED} is the panel's a1 with "
            f"{fileset.align_command(panel.table)} (column 2 of the panel's table is a1, "
            f"column 3 a2, column 1 the id)")
    other = ~same & ~flipped
    if other.any():
        raise InvalidDataError(
            f"site {site}: {listed} codes other alleles than panel {panel.name!r} for "
            f"{named(snps[other].tolist())} (a strand or build difference?): align them to "
            f"the panel's a1/a2 or leave those SNPs out of the panel")
    return columns


def write_panel(path: str | Path, name: str, snps: list[str], a1: list[str], a2: list[str],
                freq: np.ndarray | None, row_norm: float,
                standardise: str = "public", frequencies: str = "sum",
                reference: ReferenceSpectrum | None = None) -> SnpPanel:
    """Write a panel's TOML file ``path`` and its TSV beside it (``PATH.tsv`` for
    ``PATH.toml``), frequencies written at full precision, and load it back (``frequencies``
    and ``reference`` written only when not the default)."""
    path = Path(path)
    tsv = path.with_suffix(".tsv")
    header = HEADER if freq is not None else HEADER[:3]
    rows = [[snp, a1[j], a2[j]] + ([] if freq is None else [repr(float(freq[j]))])
            for j, snp in enumerate(snps)]
    tsv.write_text("".join("\t".join(cells) + "\n" for cells in [list(header), *rows]))
    path.write_text(f"[panel]\nname = {json.dumps(name)}\nsnps = {json.dumps(tsv.name)}\n"
                    f"standardise = \"{standardise}\"\nmissing = \"mean\"\n"
                    f"row-norm = {float(row_norm)!r}\n"
                    + ("" if frequencies == "sum" else f"frequencies = \"{frequencies}\"\n")
                    + ("" if reference is None else
                       f"reference-size = {reference.size}\nreference-variances = "
                       f"{json.dumps([float(v) for v in reference.variances])}\n"))
    return load_panel(path)

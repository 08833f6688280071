"""A real site whose records are genotypes: its genotype files (PLINK 1, PLINK 2 or VCF/BCF)
read against the consortium's SNP panel, named by the site's own policy instead of a data file.

The policy's ``[site]`` table names the genotype files and the panel (paths relative to the
policy's folder)::

    [site]
    name = "biobank-a"
    genotypes = "genotypes/biobank-a"   # PREFIX.bed, PREFIX.bim, PREFIX.fam
    panel = "panel/ancestry-v1.toml"    # the consortium's SNP panel (its TSV beside it)
    ledger = "ledger.sqlite"

``genotypes`` names a PLINK 1 prefix (or its ``.bed``), a PLINK 2 ``PREFIX.pgen`` or a
``.vcf``, ``.vcf.gz`` or ``.bcf`` file (:mod:`fedpca.data.genotype_formats`); the ledger
records the hash of the file holding the calls (the ``.bed``, the ``.pgen``, the VCF/BCF).

Such a site's records are its individuals' genotype rows over the panel's SNPs, standardised
with the panel's public frequencies (or, for a panel with ``standardise = "private"``, with
the frequencies each run releases first from the sites' allele counts,
:mod:`fedpca.algorithms.genotype_centring`, planned and charged with the run by
:func:`~fedpca.site.plan.plan_run`) and clipped to its ``row-norm``
(:class:`~fedpca.data.genotypes.GenotypeRows`), streamed from its files in blocks of SNPs:
the site never holds its ``n x d`` matrix in float. Its clip norm is the panel's ``row-norm``
(a ``[data] clip-norm`` is refused: two bounds would disagree); its contract is the panel,
named in a run by the panel's digest (:attr:`~fedpca.data.snp_panel.SnpPanel.digest`), so a
run, or a released result, made under another panel (another SNP, allele, frequency or bound)
is refused before anything is read or charged. It answers DPS-PCA only
(:data:`GENOTYPE_ALGORITHMS`: the algorithm that reads rows only through ``X^T X Q``); its
policy may allow no other, and a centred run is refused (the panel's frequencies centre the
genotypes already).

Privacy (unit: one individual's genotype row, replace-one): every row has norm at most the
panel's ``row-norm`` whatever the genotypes, and the frequencies are the panel's (public) or
a private run's released ones (the allele counts' release, charged with the run; what the
coordinator sends back is checked and only moves utility): no bound or frequency is read
off the site's genotypes unreleased; so every sensitivity follows from the panel alone. The
checks of the fileset against the panel (:func:`~fedpca.data.snp_panel.check_fileset`) name
files and SNP ids, never a genotype or a sample. ``fedpca site project`` writes the site's
own samples' scores beside their FID/IID as a PLINK covariate file (0600,
:func:`genotype_scores`; a VCF's samples, which have one id, with FID 0): computed at the
site, never sent.

What a hostile coordinator could do: name another panel's digest (refused, naming the
site's), ask for another algorithm or a centred run (refused), send a released result of
another width or panel (refused, nothing stored). It cannot choose the fileset, the panel,
the frequencies or the bound: the site's policy names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedpca.algorithms.specs import SPECS
from fedpca.data.covariates import write_covariates
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.genotype_formats import data_file, open_genotypes
from fedpca.data.snp_panel import SnpPanel, check_fileset, load_panel
from fedpca.errors import FedPCAError

#: The ``[site]`` keys of a genotype site.
GENOTYPES_KEY, PANEL_KEY = "genotypes", "panel"
#: The algorithms a genotype site answers (they read rows only through their products:
#: :attr:`~fedpca.algorithms.specs.AlgorithmSpec.genotype_rows`).
GENOTYPE_ALGORITHMS = tuple(spec.name for spec in SPECS.values() if spec.genotype_rows)


@dataclass(frozen=True)
class GenotypeFiles:
    """A genotype site's genotype files (``path``: a PLINK prefix or file, a VCF/BCF) and its
    loaded SNP panel."""

    path: Path
    panel: SnpPanel

    @property
    def data(self) -> Path:
        """The file holding the calls (the site's data file: the ledger records its hash)."""
        return data_file(self.path)

    def rows(self, site: str) -> GenotypeRows:
        """The site's standardised, clipped rows, after its fileset passed the panel's check
        (refusals name files and SNP ids, never a genotype)."""
        fileset = open_genotypes(self.path)
        return GenotypeRows(fileset, self.panel, check_fileset(self.panel, fileset, site))


def genotype_files(error: Callable[[str], FedPCAError], folder: Path,
                   site: dict[str, Any], data: dict[str, Any],
                   algorithms: dict[str, Any]) -> GenotypeFiles | None:
    """The fileset and panel a policy's ``[site]`` table names (``None``: it names neither),
    paths relative to ``folder``; raises ``error(reason)`` for a policy that also names a
    data file or a contract, sets a clip norm, names only one of the two, allows an
    algorithm other than :data:`GENOTYPE_ALGORITHMS`, or a panel that cannot be read."""
    named = [key for key in (GENOTYPES_KEY, PANEL_KEY) if key in site]
    if not named:
        return None
    if len(named) == 1:
        raise error(f"site.{named[0]} needs site.{({GENOTYPES_KEY, PANEL_KEY} - set(named)).pop()}"
                    ": a genotype site names its genotype files (genotypes = \"PREFIX\", a "
                    "PLINK 1 prefix, or a .pgen, .vcf, .vcf.gz or .bcf file) and the "
                    "consortium's SNP panel (panel = \"panel.toml\")")
    for key, why in (("data", "the fileset is its data"),
                     ("contract", "the panel is its contract")):
        if key in site:
            raise error(f"site.{key} with site.genotypes: remove {key} ({why})")
    if "clip-norm" in data:
        raise error("[data] clip-norm with site.genotypes: remove it; the panel's row-norm "
                    "bounds every genotype row")
    others = sorted(set(algorithms) - set(GENOTYPE_ALGORITHMS))
    if others:
        raise error(f"a genotype site answers only {list(GENOTYPE_ALGORITHMS)} (it streams "
                    f"its rows from its genotype files); remove [algorithms.{others[0]}]")
    values = [site[key] for key in (GENOTYPES_KEY, PANEL_KEY)]
    if not all(isinstance(value, str) and value.strip() for value in values):
        raise error("site.genotypes and site.panel must be non-empty paths")
    try:
        panel = load_panel((folder / values[1]).resolve())
    except FedPCAError as exc:
        raise error(f"site.panel: {exc}") from None
    return GenotypeFiles((folder / values[0]).resolve(), panel)


@dataclass(frozen=True)
class GenotypeScores:
    """A genotype site's own samples' scores (``values``, ``n x k``, in its files' sample
    order) beside their ids (FID 0 for a VCF's): for the site's own covariate file only,
    never sent nor logged."""

    fid: np.ndarray
    iid: np.ndarray
    values: np.ndarray

    def write(self, path: Path) -> None:
        """Write them as a PLINK ``--covar`` file (``FID IID PC1 ... PCk``), 0600."""
        write_covariates(path, self.fid, self.iid, self.values)


def genotype_scores(files: GenotypeFiles, site: str, basis: np.ndarray,
                    frequencies: np.ndarray | None = None) -> GenotypeScores:
    """The scores of the site's own samples on the released ``basis`` (``d x k``): the
    standardised, clipped rows times the basis (the rows every release was computed from;
    standardised with the released ``frequencies`` of a private panel's run), streamed
    from its genotype files, beside each sample's FID and IID. Computed at the site; nothing is
    sent."""
    rows = files.rows(site)
    if frequencies is not None:
        rows = rows.with_frequencies(frequencies)
    return GenotypeScores(rows.fileset.fid, rows.fileset.iid, rows.times(basis))

"""A simulated multi-population cohort as PLINK files: sites with different population mixes,
a public reference sample, the panel it yields and the public start basis.

The Balding-Nichols model ("A method for quantifying differentiation between populations at
multi-allelic loci and its implications for investigating identity and paternity"): every SNP
has an ancestral frequency ``p ~ U(0.05, 0.95)``; population ``k``'s frequency is drawn from
``Beta(p (1 - F) / F, (1 - p) (1 - F) / F)`` (mean ``p``, variance ``F p (1 - p)``, ``F`` the
differentiation Fst), and an individual's genotype at the SNP is ``Binomial(2, freq)``, the
count of allele 1. Two populations' Hudson Fst is then ``F`` in expectation.

Sites hold different mixes of the populations (:func:`default_mixes`, or ``mixes``). The
**public reference**, ``reference_size`` individuals drawn in equal proportions from every
population but ``absent``, stands for public genomes: the panel's frequencies are its allele-1
frequencies clipped into ``[0.01, 0.99]``, its default row-norm bound its largest
standardised row norm (rounded up), and the **public start basis** (``start.npy``, ``d x k``
orthonormal) its standardised genotypes' top ``k`` right singular vectors. A population
``absent`` from the reference appears only at some sites: the case a public panel does not
cover. Drawn around the ancestral frequencies like the others, it lies between the reference's
populations on the panel's PCs, which then still separate it; ``isolate_of`` makes it an
isolate drifted from one reference population instead (its frequencies drawn around that
population's, with the same ``F``), which the panel's PCs place on top of its parent.

Files written in ``out``: per site ``j`` (from 0) ``site{j}.bed/.bim/.fam`` and ``site{j}.pop``
(each sample's true population, one index a line in ``.fam`` order: for benchmarks and tests
only, a real site has none), ``panel.toml`` + ``panel.tsv``, ``start.npy``. Seeds make every
file reproducible. Memory: a site's genotypes in int8 (``n d`` bytes) and one block of SNPs in
float (``n x block``); the reference's ``m x d`` int8 and its ``m x m`` Gram matrix.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedpca.data.genotypes import standardise
from fedpca.data.plink import MISSING, bed_reader
from fedpca.data.snp_panel import ReferenceSpectrum, write_panel
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import top_eigenpairs

logger = logging.getLogger(__name__)

#: The share of its own population at a site by default (the rest shared equally).
MAIN_SHARE = 0.6
#: The range of the ancestral frequencies.
ANCESTRAL = (0.05, 0.95)
#: The interval the reference's frequencies are clipped into.
FREQUENCY_CLIP = (0.01, 0.99)
#: SNPs simulated at a time.
BLOCK = 512
#: The allele pairs the SNPs cycle through (allele 1, allele 2).
ALLELES = (("A", "G"), ("C", "T"), ("A", "C"), ("G", "T"))


@dataclass(frozen=True)
class CohortFiles:
    """What :func:`write_cohort` wrote.

    Attributes:
        folder: the folder.
        sites: each site's PLINK prefix (``folder/site{j}``).
        populations: each site's ``site{j}.pop``.
        panel: ``panel.toml`` (its table ``panel.tsv`` beside it).
        start: ``start.npy``.
    """

    folder: Path
    sites: tuple[Path, ...]
    populations: tuple[Path, ...]
    panel: Path
    start: Path


def balding_nichols(rng: np.random.Generator, snps: int, populations: int,
                    fst: float) -> tuple[np.ndarray, np.ndarray]:
    """Ancestral frequencies (``snps``) and each population's (``populations x snps``)."""
    ancestral = rng.uniform(*ANCESTRAL, size=snps)
    return ancestral, drifted(rng, ancestral, fst, (populations, snps))


def drifted(rng: np.random.Generator, parent: np.ndarray, fst: float,
            size: tuple[int, ...] | None = None) -> np.ndarray:
    """Frequencies drifted from ``parent``'s by ``F`` = ``fst``: ``Beta(p (1 - F) / F,
    (1 - p) (1 - F) / F)`` for each ``p`` of ``parent`` (mean ``p``, variance
    ``F p (1 - p)``)."""
    shape = (1.0 - fst) / fst
    return rng.beta(parent * shape, (1.0 - parent) * shape, size=size)


def absent_set(absent: int | Sequence[int] | None) -> tuple[int, ...]:
    """``absent`` (one population, several or ``None``) as a tuple of populations."""
    if absent is None:
        return ()
    return (int(absent),) if isinstance(absent, (int, np.integer)) else tuple(
        int(a) for a in absent)


def default_mixes(sites: int, populations: int,
                  absent: int | Sequence[int] | None = None) -> np.ndarray:
    """Each site's population shares (``sites x populations``, rows summing to 1): site ``j``
    holds ``MAIN_SHARE`` = 60% of population ``j mod populations`` and the rest in equal
    shares; an ``absent`` population (one or several) appears only at the sites where it is
    the main one."""
    missing = absent_set(absent)
    mixes = np.zeros((sites, populations))
    for site in range(sites):
        main = site % populations
        others = [k for k in range(populations) if k != main and k not in missing]
        mixes[site, main] = MAIN_SHARE if others else 1.0
        mixes[site, others] = (1.0 - mixes[site, main]) / max(len(others), 1)
    return mixes


def draw_genotypes(rng: np.random.Generator, freqs: np.ndarray, labels: np.ndarray,
                   missing: float = 0.0, mask: np.random.Generator | None = None,
                   admixture: Admixture | None = None) -> np.ndarray:
    """Genotypes (allele-1 counts, int8, ``len(labels) x snps``, column-major) of individuals
    of populations ``labels`` under frequencies ``freqs`` (``populations x snps``), a share
    ``missing`` of calls set to :data:`~fedpca.data.plink.MISSING` (drawn from ``mask``, so
    that the calls are those of the same cohort without missing calls; default ``rng``),
    drawn ``BLOCK`` SNPs at a time: each allele is 1 when a float32 uniform falls below its
    frequency (exact to 2^-24). With ``admixture`` its admixed individuals' frequencies are
    ``q p_target + (1 - q) p_source`` instead of their label's."""
    mask = rng if mask is None else mask
    genotypes = np.empty((len(labels), freqs.shape[1]), dtype=np.int8, order="F")
    single = freqs.astype(np.float32)
    for start in range(0, freqs.shape[1], BLOCK):
        p = single[:, start:start + BLOCK][labels]
        if admixture is not None:
            p = admixture.frequencies(p, single[:, start:start + BLOCK])
        block = (rng.random(p.shape, dtype=np.float32) < p).astype(np.int8)
        block += rng.random(p.shape, dtype=np.float32) < p
        if missing:
            block[mask.random(p.shape, dtype=np.float32) < missing] = MISSING
        genotypes[:, start:start + BLOCK] = block
    return genotypes


@dataclass(frozen=True)
class Admixture:
    """An admixture cline's individuals (module docstring): ``admixed`` marks them (those
    labelled ``target``); ``proportions`` holds every individual's share ``q`` of
    ``target``'s ancestry (0 for ``source``'s own members, ``nan`` for other populations')."""

    source: int
    target: int
    admixed: np.ndarray
    proportions: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, labels: np.ndarray, source: int, target: int
             ) -> Admixture:
        """Every ``target`` individual's ``q ~ U(0, 1)``."""
        admixed = labels == target
        q = np.full(len(labels), np.nan)
        q[labels == source] = 0.0
        q[admixed] = rng.random(int(admixed.sum()))
        return cls(source, target, admixed, q)

    def frequencies(self, p: np.ndarray, block: np.ndarray) -> np.ndarray:
        """``p`` (the individuals' frequencies by label, ``n x b``) with the admixed rows'
        replaced by ``q p_target + (1 - q) p_source`` of ``block`` (``populations x b``)."""
        q = self.proportions[self.admixed, None].astype(np.float32)
        p = p.copy()
        p[self.admixed] = q * block[self.target] + (1.0 - q) * block[self.source]
        return p


def start_basis(calls: np.ndarray, freq: np.ndarray, k: int
                ) -> tuple[np.ndarray, float, ReferenceSpectrum]:
    """The top ``k`` right singular vectors (``d x k`` orthonormal) of the standardised
    ``calls`` (``m x d``), their largest row norm and their spectrum (``m`` and the top ``k``
    eigenvalues of the rows' covariance, per individual), via the ``m x m`` Gram matrix, in
    blocks."""
    gram = np.zeros((calls.shape[0],) * 2)
    for start in range(0, calls.shape[1], BLOCK):
        rows = standardise(calls[:, start:start + BLOCK], freq[start:start + BLOCK])
        gram += rows @ rows.T
    values, vectors = top_eigenpairs(gram, k)
    top = vectors / np.sqrt(np.maximum(values, np.finfo(float).tiny))
    basis = np.empty((calls.shape[1], k))
    for start in range(0, calls.shape[1], BLOCK):
        rows = standardise(calls[:, start:start + BLOCK], freq[start:start + BLOCK])
        basis[start:start + BLOCK] = rows.T @ top
    spectrum = ReferenceSpectrum(len(calls), tuple(float(v) / len(calls) for v in values))
    return np.linalg.qr(basis)[0], float(np.sqrt(np.diag(gram).max())), spectrum


def isolate_parents(absent: tuple[int, ...], isolate_of: int | Sequence[int | None] | None
                    ) -> tuple[int | None, ...]:
    """Each ``absent`` population's parent (``None``: drawn around the ancestral
    frequencies): one ``isolate_of`` for all of them, or one entry each."""
    if isolate_of is not None and not absent:
        raise ConfigurationError("--isolate-of names the population an absent one drifted "
                                 "from: it needs --absent")
    if isolate_of is None or isinstance(isolate_of, (int, np.integer)):
        return (isolate_of,) * len(absent)
    parents = tuple(isolate_of)
    if len(parents) != len(absent):
        raise ConfigurationError(f"--isolate-of gives one parent per --absent population: "
                                 f"{len(absent)} expected, got {len(parents)}")
    return parents


def _check(sites: int, samples_per_site: int, snps: int, populations: int, fst: float,
           absent: tuple[int, ...], reference_size: int, k: int, mixes: np.ndarray,
           parents: tuple[int | None, ...] = (), cline: tuple[int, int] | None = None
           ) -> None:
    """Refuse parameters the simulation cannot honour, naming the fix."""
    for name, value, least in (("sites", sites, 1), ("samples-per-site", samples_per_site, 1),
                               ("snps", snps, 2), ("populations", populations, 1),
                               ("reference-size", reference_size, 2), ("k", k, 1)):
        if value < least:
            raise ConfigurationError(f"--{name} must be at least {least}, got {value}")
    if not 0 < fst < 1:
        raise ConfigurationError(f"--fst must lie in (0, 1), got {fst}")
    if (len(set(absent)) != len(absent) or len(absent) >= populations
            or not all(0 <= a < populations for a in absent)):
        raise ConfigurationError(f"--absent names distinct populations 0..{populations - 1} "
                                 f"(and another must remain for the reference), got "
                                 f"{list(absent)}")
    for population, parent in zip(absent, parents):
        if parent is not None and (parent in absent or not 0 <= parent < populations):
            raise ConfigurationError(
                f"--isolate-of names the population (0..{populations - 1}, one of the "
                f"reference's, not an --absent one) absent population {population} drifted "
                f"from; got {parent}")
    if cline is not None and (len(cline) != 2 or cline[0] == cline[1] or not all(
            0 <= c < populations for c in cline)):
        raise ConfigurationError(f"--cline names two populations 0..{populations - 1}: the "
                                 f"source and the target of the admixture; got {cline}")
    if k > min(snps, reference_size):
        raise ConfigurationError(f"--k {k} exceeds the reference's rank: at most "
                                 f"min(--snps, --reference-size)")
    if mixes.shape != (sites, populations) or (mixes < 0).any() or not np.allclose(
            mixes.sum(axis=1), 1.0):
        raise ConfigurationError(f"mixes must be {sites} x {populations} shares >= 0, each "
                                 f"row summing to 1")


def write_cohort(out: str | Path, sites: int = 10, samples_per_site: int = 1000,
                 snps: int = 5000, populations: int = 3, fst: float = 0.01,
                 absent: int | Sequence[int] | None = None, reference_size: int = 1000,
                 k: int = 2, seed: int = 0, mixes: np.ndarray | None = None,
                 missing: float = 0.0, row_norm: float | None = None,
                 isolate_of: int | Sequence[int | None] | None = None,
                 standardise: str = "public", cline: tuple[int, int] | None = None
                 ) -> CohortFiles:
    """Simulate and write a cohort (module docstring) into folder ``out``.

    Args:
        out: the folder (created if absent; existing files of the same names replaced).
        sites, samples_per_site, snps, populations: the sizes.
        fst: the Balding-Nichols differentiation ``F`` in (0, 1).
        absent: a population (0..populations-1) left out of the reference, several, or
            ``None``.
        reference_size: the public reference's individuals.
        k: the start basis's columns.
        seed: the seed of everything.
        mixes: each site's population shares (``sites x populations``; default
            :func:`default_mixes`).
        missing: the share of missing calls at the sites (the reference has none).
        row_norm: the panel's bound (default: the reference's largest standardised row
            norm, rounded up).
        isolate_of: make every ``absent`` population an isolate drifted (by ``fst``) from
            this population of the reference instead of from the ancestral frequencies, or
            one such parent per absent population (``None`` entries: ancestral), or
            ``None``.
        standardise: the panel's ``standardise``: ``"public"`` (its reference frequencies
            standardise the rows) or ``"private"`` (a run releases the frequencies; the
            reference's stay in the panel's TSV for the shifted start,
            :mod:`fedpca.algorithms.shifted_start`).
        cline: ``(source, target)``: every ``target`` individual at the sites is admixed
            with ``source`` (module docstring; ``site{j}.ancestry`` written), or ``None``.
    """
    missing_populations = absent_set(absent)
    mixes = (default_mixes(sites, populations, missing_populations) if mixes is None
             else np.asarray(mixes, dtype=np.float64))
    parents = isolate_parents(missing_populations, isolate_of)
    _check(sites, samples_per_site, snps, populations, fst, missing_populations,
           reference_size, k, mixes, parents, cline)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    # the reference's, then each site's calls, then each site's missing calls
    streams = [np.random.default_rng(s)
               for s in np.random.SeedSequence(seed).spawn(2 * sites + 2)]
    _, freqs = balding_nichols(streams[0], snps, populations, fst)
    for population, parent in zip(missing_populations, parents):
        if parent is not None:
            freqs[population] = drifted(streams[0], freqs[parent], fst)
    public = [p for p in range(populations) if p not in missing_populations]
    reference = draw_genotypes(streams[1], freqs, streams[1].choice(public, reference_size))
    freq = np.clip(reference.mean(axis=0) / 2.0, *FREQUENCY_CLIP)
    basis, largest, spectrum = start_basis(reference, freq, k)
    del reference
    ids = [f"snp{j}" for j in range(snps)]
    a1, a2 = zip(*(ALLELES[j % len(ALLELES)] for j in range(snps)))
    bound = math.ceil(largest) if row_norm is None else row_norm
    panel = write_panel(folder / "panel.toml", f"cohort-seed{seed}", ids, list(a1), list(a2),
                        freq, bound, standardise, reference=spectrum)
    start = folder / "start.npy"
    np.save(start, basis)
    prefixes, pops = [], []
    for site in range(sites):
        rng = streams[site + 2]
        labels = rng.choice(populations, samples_per_site, p=mixes[site])
        admixture = None if cline is None else Admixture.draw(rng, labels, *cline)
        prefix = folder / f"site{site}"
        samples = [f"site{site}-{i}" for i in range(samples_per_site)]
        calls = draw_genotypes(rng, freqs, labels, missing, streams[sites + 2 + site],
                               admixture)
        bed_reader().to_bed(prefix.with_suffix(".bed"), calls,
                            properties={"fid": samples, "iid": samples, "sid": ids,
                                        "allele_1": list(a1), "allele_2": list(a2),
                                        "chromosome": ["1"] * snps,
                                        "bp_position": list(range(1, snps + 1))})
        prefix.with_suffix(".pop").write_text("".join(f"{label}\n" for label in labels))
        if admixture is not None:
            prefix.with_suffix(".ancestry").write_text(
                "".join(f"{q:.6f}\n" for q in admixture.proportions))
        prefixes.append(prefix)
        pops.append(prefix.with_suffix(".pop"))
        logger.info("wrote %s.bed/.bim/.fam: %d samples x %d SNPs", prefix,
                    samples_per_site, snps)
    return CohortFiles(folder, tuple(prefixes), tuple(pops), panel.path, start)


def read_populations(path: str | Path) -> np.ndarray:
    """The population indices of a ``site{j}.pop`` file."""
    return np.loadtxt(path, dtype=np.int64, ndmin=1)


def read_ancestry(path: str | Path) -> np.ndarray:
    """The ancestry shares ``q`` of a ``site{j}.ancestry`` file (``nan``: not on the
    cline)."""
    return np.loadtxt(path, dtype=np.float64, ndmin=1)

"""The genomics benchmark's data: simulated cohorts cached as PLINK files, the union of their
sites' standardised, clipped genotype rows as one operator, and population accuracy.

A cohort (``fedpca.data.cohort.write_cohort``) is written once per parameter set under a cache
folder outside the repository (``$FEDPCA_GENOMICS_CACHE``, default
``$TMPDIR/fedpca-genomics``) and reused by later invocations (a ``complete.json`` beside the
files marks a finished write).

:class:`UnionRows` is what every method of one cohort shares: each site is opened and checked
against the panel as a real site would (``PlinkFileset``, ``check_fileset``), its rows' clipping
factors come from ``GenotypeRows.row_scales``, and its int8 calls are kept in memory (``n d``
bytes: 2 GB for 100,000 x 20,000). Products with the union's ``X`` (rows standardised with the
panel's public frequencies and clipped to its row norm, exactly ``GenotypeRows``' rows) are
formed a chunk of rows at a time in float32 and summed in float64, so every run and seed of a
cohort shares one pass over the data per power round (their bases side by side). float32 is
exact for the calls and adds relative errors near 1e-6 to the products, far below the noise of
any private release here; ``tests/test_genomics_benchmark.py`` checks the products against
``GenotypeRows``.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.cluster.vq import kmeans2
from scipy.optimize import linear_sum_assignment

from fedpca.data.cohort import CohortFiles, read_ancestry, read_populations, write_cohort
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.plink import MISSING, PlinkFileset
from fedpca.data.snp_panel import check_fileset, load_panel

logger = logging.getLogger("genomics")

#: Rows standardised at a time (float32: ``4 d`` bytes a row, 160 MB at d = 20,000).
CHUNK_ROWS = 2048
#: k-means restarts per clustering (the one of least distortion is kept).
KMEANS_RESTARTS = 5


@dataclass(frozen=True)
class CohortSpec:
    """One simulated cohort's parameters (``write_cohort``'s), its cache key."""

    sites: int
    samples_per_site: int
    snps: int
    fst: float
    absent: int | tuple[int, ...] | None
    populations: int = 3
    reference_size: int = 1000
    k: int = 2
    seed: int = 0
    isolate_of: int | tuple[int, ...] | None = None
    missing: float = 0.0
    #: ``(source, target)`` of an admixture cline (``write_cohort``'s ``cline``).
    cline: tuple[int, int] | None = None
    #: Each site's population shares (default: ``default_mixes``).
    mixes: tuple[tuple[float, ...], ...] | None = None
    #: A name for the mixes in the label (required with ``mixes``).
    mixes_name: str = ""

    @property
    def label(self) -> str:
        """The cohort's folder name."""
        def listed(value):
            return "-".join(map(str, value)) if isinstance(value, tuple) else str(value)

        return (f"s{self.sites}x{self.samples_per_site}-d{self.snps}-fst{self.fst:g}-"
                f"p{self.populations}-"
                f"{'all' if self.absent is None else f'absent{listed(self.absent)}'}"
                f"{'' if self.isolate_of is None else f'-isolate{listed(self.isolate_of)}'}"
                f"{'' if self.cline is None else f'-cline{listed(self.cline)}'}"
                f"{f'-{self.mixes_name}' if self.mixes is not None else ''}-k{self.k}"
                f"-ref{self.reference_size}-seed{self.seed}"
                f"{f'-missing{self.missing:g}' if self.missing else ''}")


def cache_folder() -> Path:
    """Where cohorts are kept across invocations (outside the repository)."""
    default = Path(tempfile.gettempdir()) / "fedpca-genomics"
    return Path(os.environ.get("FEDPCA_GENOMICS_CACHE", default))


#: The cached cohorts' layout (a cohort written under another is written again): 2, the
#: panel states its reference (``reference-size``, ``reference-variances``).
COHORT_FORMAT = 2


def cohort(spec: CohortSpec, cache: Path | None = None) -> CohortFiles:
    """The cohort of ``spec``, written into the cache unless a complete copy is there."""
    folder = (cache or cache_folder()) / spec.label
    marker = folder / "complete.json"
    prefixes = tuple(folder / f"site{j}" for j in range(spec.sites))
    files = CohortFiles(folder, prefixes, tuple(p.with_suffix(".pop") for p in prefixes),
                        folder / "panel.toml", folder / "start.npy")
    stamp = {**asdict(spec), "format": COHORT_FORMAT}
    if marker.exists() and json.loads(marker.read_text()) == json.loads(json.dumps(stamp)):
        logger.info("cohort %s: cached in %s", spec.label, folder)
        return files
    logger.info("cohort %s: writing %d sites of %d x %d into %s", spec.label, spec.sites,
                spec.samples_per_site, spec.snps, folder)
    written = write_cohort(folder, sites=spec.sites, samples_per_site=spec.samples_per_site,
                           snps=spec.snps, populations=spec.populations, fst=spec.fst,
                           absent=spec.absent, reference_size=spec.reference_size, k=spec.k,
                           seed=spec.seed, isolate_of=spec.isolate_of, missing=spec.missing,
                           cline=spec.cline, mixes=None if spec.mixes is None else np.array(
                               spec.mixes))
    marker.write_text(json.dumps(stamp))
    return written


class UnionRows:
    """Every site's standardised, clipped genotype rows of one cohort, stacked (module
    docstring): ``X`` is ``n x d`` with ``n`` the sum of the sites' individuals.

    Args:
        files: the cohort.
    """

    def __init__(self, files: CohortFiles) -> None:
        self.panel = load_panel(files.panel)
        freq = self.panel.freq
        self.shift = (2.0 * freq).astype(np.float32)
        self.inverse = (1.0 / np.sqrt(2.0 * freq * (1.0 - freq))).astype(np.float32)
        self.calls, self.scales, labels, ancestry = [], [], [], []
        for site, (prefix, pops) in enumerate(zip(files.sites, files.populations)):
            cline = prefix.with_suffix(".ancestry")
            if cline.exists():
                ancestry.append(read_ancestry(cline))
            fileset = PlinkFileset(prefix)
            columns = check_fileset(self.panel, fileset, str(site))
            rows = GenotypeRows(fileset, self.panel, columns)
            self.calls.append(np.ascontiguousarray(fileset.read_block(columns)))
            self.scales.append(rows.row_scales().astype(np.float32))
            labels.append(read_populations(pops))
        self.labels = np.concatenate(labels)
        #: Every individual's true share of the cline's target ancestry (``nan`` off the
        #: cline), or ``None`` without a cline.
        self.ancestry = np.concatenate(ancestry) if ancestry else None
        self.site_sizes = [len(c) for c in self.calls]

    @property
    def n(self) -> int:
        """The union's individuals."""
        return int(sum(self.site_sizes))

    @property
    def d(self) -> int:
        """The panel's SNPs."""
        return self.panel.d

    def chunks(self):
        """The union's rows ``X`` a chunk at a time (float32, at most ``CHUNK_ROWS`` rows),
        sites in order."""
        for calls, scales in zip(self.calls, self.scales):
            for start in range(0, len(calls), CHUNK_ROWS):
                raw = calls[start:start + CHUNK_ROWS]
                block = raw.astype(np.float32)
                block -= self.shift
                block *= self.inverse
                block[raw == MISSING] = 0.0  # a missing call: the SNP's mean
                block *= scales[start:start + CHUNK_ROWS, None]
                yield block

    def gram_times(self, basis: np.ndarray) -> np.ndarray:
        """``X^T X M`` for ``M`` = ``basis`` (``d x m``): ``d x m`` float64, one pass."""
        single = np.asarray(basis, dtype=np.float32)
        product = np.zeros((self.d, single.shape[1]))
        for block in self.chunks():
            product += block.T @ (block @ single)
        return product

    def times(self, basis: np.ndarray) -> np.ndarray:
        """``X M`` (``n x m`` float64): every individual's scores on ``basis``, one pass."""
        single = np.asarray(basis, dtype=np.float32)
        return np.vstack([block @ single for block in self.chunks()]).astype(np.float64)

    def covariance(self) -> np.ndarray:
        """``X^T X`` (``d x d`` float64: ``8 d^2`` bytes), one pass."""
        total = np.zeros((self.d, self.d))
        for block in self.chunks():
            total += block.T @ block
        return total

    def diagonal(self) -> np.ndarray:
        """``diag(X^T X)`` (``d``), one pass."""
        total = np.zeros(self.d)
        for block in self.chunks():
            total += np.einsum("ij,ij->j", block, block, dtype=np.float64)
        return total

    def allele_counts(self) -> np.ndarray:
        """The sum of every SNP's raw calls (0/1/2, missing calls 0) over the union (``d``,
        integers): what the sites' allele counts' release sums before its noise."""
        return self.site_allele_counts().sum(axis=0)

    def called_counts(self) -> np.ndarray:
        """Every SNP's number of called individuals over the union (``d``, integers): the
        release's called counts before its noise."""
        return self.site_called_counts().sum(axis=0)

    def site_allele_counts(self) -> np.ndarray:
        """:meth:`allele_counts` of each site (``sites x d``)."""
        return np.stack([np.where(calls == MISSING, 0, calls).sum(axis=0, dtype=np.int64)
                         for calls in self.calls])

    def site_called_counts(self) -> np.ndarray:
        """:meth:`called_counts` of each site (``sites x d``)."""
        return np.stack([(calls != MISSING).sum(axis=0, dtype=np.int64)
                         for calls in self.calls])


def cluster_labels(scores: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    """Each row's cluster among ``clusters`` found in ``scores`` alone: k-means (Lloyd's
    algorithm from k-means++ seeds, scipy's ``kmeans2``), ``KMEANS_RESTARTS`` restarts from
    the stream ``seed``, the one of least within-cluster sum of squares kept; every row is
    then in the cluster of its nearest centroid."""
    best, best_cost = None, np.inf
    for restart in range(KMEANS_RESTARTS):
        centroids, labels = kmeans2(scores, clusters, minit="++", seed=seed * 1000 + restart)
        cost = float(((scores - centroids[labels]) ** 2).sum())
        if cost < best_cost:
            best, best_cost = labels, cost
    return best


def matched_accuracy(found: np.ndarray, truth: np.ndarray, clusters: int) -> float:
    """The share of rows whose cluster is their true population, under the best one-to-one
    relabelling of the clusters (Hungarian algorithm on the confusion counts)."""
    confusion = np.zeros((clusters, clusters), dtype=np.int64)
    np.add.at(confusion, (found, truth), 1)
    rows, cols = linear_sum_assignment(-confusion)
    return float(confusion[rows, cols].sum() / len(truth))


def population_accuracy(scores: np.ndarray, truth: np.ndarray, clusters: int,
                        seed: int = 0) -> float:
    """Nearest-centroid population assignment from ``scores`` (centroids by
    :func:`cluster_labels`, never from ``truth``), scored against ``truth`` up to
    relabelling (:func:`matched_accuracy`)."""
    return matched_accuracy(cluster_labels(scores, clusters, seed), truth, clusters)

"""Thresholding-based subspace clustering (TSC): the solver inside sample-aggregate.

Heckel & Boelcskei, "Robust subspace clustering via thresholding", IEEE Trans. Inf. Theory
61(11), 2015 (arXiv:1307.4891), Alg. 1; paper 003 (Wang, Wang, Singh, NIPS 2015) Alg. 2 is
a simplified version for its analysis. Steps:

1. normalise every record to unit norm (a zero record stays zero);
2. thresholding: connect each record to the ``neighbours`` other records with the largest
   absolute inner products ``|<x_i, x_j>|``, with Heckel & Boelcskei's weight
   ``exp(-2 arccos |<x_i, x_j>|)``; make the graph undirected (``W = A + A^T``);
3. spectral clustering into ``k`` groups: the ``k`` leading eigenvectors of the normalised
   adjacency ``D^(-1/2) W D^(-1/2)``, rows scaled to unit norm, then k-means (k-means++
   starts, best of several; scipy's ``kmeans2``). Paper 003's Alg. 2 takes connected
   components instead, which is what spectral clustering returns when there are exactly
   ``k`` of them;
4. each group's subspace: the top-``q`` eigenvectors of its scatter ``sum x x^T`` (paper 003's
   Alg. 2 spans ``q`` random records of the group, a device of its proof; the least-squares
   fit is what Heckel & Boelcskei and the experiments use).

Paper 003's Lemma 3.5 asks for ``0.04 n_l <= neighbours <= n_l / 6`` (``n_l`` records per
cluster); the default is ``0.15 n_l`` (at least ``q``), inside that range.

The graph and its eigenvectors are dense (``O(n^2)`` memory, ``O(n^3)`` time): TSC is meant
for blocks of up to a few thousand records.

No privacy here: TSC is the non-private function ``f`` that sample-aggregate runs on each
block (:mod:`fedpca.clustering.sample_aggregate`).
"""

from __future__ import annotations

import logging
import time

import numpy as np
from scipy.cluster.vq import ClusterError, kmeans2

from fedpca.clustering.nonprivate import NO_PRIVACY, check_problem, fit_subspaces
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import top_eigenvectors
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_positive_int
from fedpca.results import ClusteringResult

logger = logging.getLogger(__name__)

ALGORITHM = "tsc"
#: Default ``neighbours`` as a fraction of the expected cluster size ``n / k``.
NEIGHBOUR_FRACTION = 0.15
#: k-means starts on the spectral embedding; the lowest within-group sum of squares wins.
KMEANS_STARTS = 10
#: Lloyd iterations per k-means start.
KMEANS_ITERATIONS = 50
#: Stream key of the k-means starts.
KMEANS_STREAM = 0x75C


def default_neighbours(n: int, clusters: int, subspace_dim: int) -> int:
    """``0.15 n / k`` (of the expected cluster size), at least ``q``, below ``n``."""
    return max(1, min(n - 1, max(subspace_dim, round(NEIGHBOUR_FRACTION * n / clusters))))


def threshold_graph(X: np.ndarray, neighbours: int) -> np.ndarray:
    """TSC's symmetric ``n x n`` weights: each record's ``neighbours`` most correlated others,
    weighted ``exp(-2 arccos |<x_i, x_j>|)`` on unit-normalised records, then ``A + A^T``."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    unit = X / np.where(norms > 0, norms, 1.0)
    similarity = np.abs(unit @ unit.T)
    np.fill_diagonal(similarity, -1.0)  # never one's own neighbour
    nearest = np.argpartition(-similarity, neighbours - 1, axis=1)[:, :neighbours]
    rows = np.repeat(np.arange(X.shape[0]), neighbours)
    cols = nearest.ravel()
    A = np.zeros_like(similarity)
    A[rows, cols] = np.exp(-2.0 * np.arccos(np.clip(similarity[rows, cols], 0.0, 1.0)))
    return A + A.T


def spectral_clustering(
    W: np.ndarray, clusters: int, rng: np.random.Generator, starts: int = KMEANS_STARTS
) -> np.ndarray:
    """Labels ``0..k-1`` from normalised spectral clustering of the weights ``W``."""
    n = W.shape[0]
    if clusters == 1:
        return np.zeros(n, dtype=np.int64)
    degree = W.sum(axis=1)
    inv_sqrt = 1.0 / np.sqrt(np.where(degree > 0, degree, 1.0))
    embedding = top_eigenvectors(inv_sqrt[:, None] * W * inv_sqrt[None, :], clusters)
    lengths = np.linalg.norm(embedding, axis=1, keepdims=True)
    embedding = embedding / np.where(lengths > 0, lengths, 1.0)
    best_labels, best_inertia = None, np.inf
    for _ in range(starts):
        try:
            centroids, labels = kmeans2(embedding, clusters, iter=KMEANS_ITERATIONS,
                                        minit="++", missing="raise", rng=rng)
        except ClusterError:  # a start that emptied a group is discarded
            continue
        inertia = float(((embedding - centroids[labels]) ** 2).sum())
        if inertia < best_inertia:
            best_labels, best_inertia = labels, inertia
    if best_labels is None:
        raise ConfigurationError(
            f"spectral clustering found no {clusters} non-empty groups among {n} records in "
            f"{starts} k-means starts; use fewer clusters or more records per block"
        )
    return best_labels.astype(np.int64)


def tsc_subspaces(
    X: np.ndarray, clusters: int, subspace_dim: int, neighbours: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray]:
    """TSC on validated records: ``k`` orthonormal ``d x q`` bases and the labels."""
    if X.shape[0] <= clusters:
        raise ConfigurationError(
            f"TSC needs more records than clusters, got {X.shape[0]} records for "
            f"{clusters} clusters"
        )
    labels = spectral_clustering(threshold_graph(X, neighbours), clusters, rng)
    return fit_subspaces(X, labels, clusters, subspace_dim), labels


def run_tsc(
    X: np.ndarray | SiteData,
    clusters: int,
    subspace_dim: int,
    neighbours: int | None = None,
    seed: int | None = None,
    clip_norm: float = 1.0,
) -> ClusteringResult:
    """Thresholding-based subspace clustering (NOT private).

    Args:
        X: the ``n x d`` records.
        clusters: number of subspaces ``k >= 1`` (``k < n``).
        subspace_dim: their dimension ``q``, ``1 <= q < d``.
        neighbours: edges per record (``1 <= neighbours < n``); default
            :func:`default_neighbours`.
        seed: seed of the k-means starts (``None``: OS randomness).
        clip_norm: row-norm bound ``C`` (clipping does not change TSC's graph).

    Returns:
        A :class:`ClusteringResult` with the bases and every record's group.
    """
    start = time.perf_counter()
    data, k, q = check_problem(X, clusters, subspace_dim, clip_norm)
    n = data.X.shape[0]
    neighbours = default_neighbours(n, k, q) if neighbours is None else neighbours
    neighbours = require_positive_int(neighbours, "neighbours")
    if neighbours >= n:
        raise ConfigurationError(f"neighbours={neighbours} must be below the {n} records")
    rng = np.random.default_rng(None if seed is None else [seed, KMEANS_STREAM])
    bases, labels = tsc_subspaces(data.X, k, q, neighbours, rng)
    logger.info("TSC: n=%d, k=%d, q=%d, %d neighbours", n, k, q, neighbours)
    config = {
        "clusters": k, "subspace_dim": q, "samples": n, "dim": data.X.shape[1],
        "neighbours": neighbours, "seed": seed, "clip_norm": clip_norm,
        "clipped_rows": data.clip.clipped_rows, "wall_seconds": time.perf_counter() - start,
    }
    return ClusteringResult(ALGORITHM, bases, labels, dict(NO_PRIVACY), [], config)

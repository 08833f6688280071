"""Non-private k-plane clustering: the upper bound of paper 003's Fig. 2, and its primitives.

Bradley & Mangasarian, "k-Plane clustering", J. Global Optimization 16(1), 2000
(https://doi.org/10.1023/A:1008324625522), for linear subspaces of dimension ``q``: alternate

1. assign every point to its nearest subspace (``d(x, S) = ||x - U U^T x||``);
2. replace each subspace by the top-``q`` eigenvectors of its cluster's scatter
   ``A_l = sum_{z_i = l} x_i x_i^T``, the ``q``-dimensional subspace with the smallest sum of
   squared distances to the cluster;

until the assignment stops changing (each step lowers the k-means subspace cost, eq. 3 of
paper 003, so it terminates). A cluster left empty restarts from a random subspace. The run
is repeated from ``restarts`` independent random starts and the lowest cost is kept.

The helpers (:func:`check_problem`, :func:`fit_subspaces`, over
:func:`fedpca.linalg.subspace.cluster_scatter`) are what the private algorithms of this
package share with it.

No privacy at all: every output depends on every record. The result's privacy record says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedpca.algorithms.central import prepare_central
from fedpca.clustering.metrics import kmeans_subspace_cost
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import (
    cluster_scatter,
    random_subspaces,
    squared_distances,
    top_eigenvectors,
)
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_positive_int
from fedpca.results import ClusteringResult

logger = logging.getLogger(__name__)

ALGORITHM = "kplane"
#: Independent random starts; the run with the lowest k-means cost is returned.
DEFAULT_RESTARTS = 10
#: Most assignment/refit steps per start (k-plane usually stops after a few).
DEFAULT_ITERATIONS = 100
#: Stream key of the random starts.
START_STREAM = 0x6B91A4E
NO_PRIVACY = {"mechanism": "none (non-private upper bound)", "epsilon": None, "delta": None}


def check_problem(
    X: np.ndarray | SiteData, clusters: object, subspace_dim: object, clip_norm: float = 1.0
) -> tuple[SiteData, int, int]:
    """Validate a subspace clustering problem; returns the clipped records, ``k`` and ``q``.

    Raises InvalidDataError for unusable data (NaN, wrong shape, ...) and ConfigurationError
    unless ``clusters >= 1`` and ``1 <= subspace_dim < dim`` (``q = d`` would make every
    point lie on every subspace).
    """
    data = prepare_central(X, clip_norm)
    k = require_positive_int(clusters, "clusters")
    q = require_positive_int(subspace_dim, "subspace_dim")
    d = data.X.shape[1]
    if q >= d:
        raise ConfigurationError(
            f"subspace_dim={q} must be below the {d} features of the data: a {d}-dimensional "
            "subspace contains every point; choose subspace_dim < dim"
        )
    return data, k, q


def fit_subspaces(
    X: np.ndarray, labels: np.ndarray, clusters: int, subspace_dim: int
) -> list[np.ndarray]:
    """Each cluster's best ``q``-dimensional subspace: top-``q`` eigenvectors of its scatter.

    An empty cluster gets the eigenvectors of the zero matrix (some coordinate subspace).
    """
    return [top_eigenvectors(A, subspace_dim) for A in cluster_scatter(X, labels, clusters)]


def kplane_from(
    X: np.ndarray, bases: Sequence[np.ndarray], iterations: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """k-plane from ``bases``: returns the final bases, assignment and steps taken."""
    k, q = len(bases), bases[0].shape[1]
    bases = list(bases)
    labels = np.full(X.shape[0], -1)
    for step in range(1, iterations + 1):
        new = np.argmin(squared_distances(X, bases), axis=1)
        if np.array_equal(new, labels):
            return bases, labels, step
        labels = new
        bases = fit_subspaces(X, labels, k, q)
        for empty in np.setdiff1d(np.arange(k), labels):
            bases[empty] = random_subspaces(rng, X.shape[1], 1, q)[0]
    return bases, labels, iterations


def run_kplane(
    X: np.ndarray | SiteData,
    clusters: int,
    subspace_dim: int,
    restarts: int = DEFAULT_RESTARTS,
    iterations: int = DEFAULT_ITERATIONS,
    seed: int | None = None,
    clip_norm: float = 1.0,
) -> ClusteringResult:
    """Non-private k-plane clustering, best of ``restarts`` random starts (NOT private).

    Args:
        X: the ``n x d`` records (rows clipped to ``clip_norm`` like the private methods').
        clusters: number of subspaces ``k >= 1``.
        subspace_dim: their dimension ``q``, ``1 <= q < d``.
        restarts: independent starts from uniformly random subspaces.
        iterations: most assignment/refit steps per start.
        seed: seed of the random starts (``None``: OS randomness).
        clip_norm: row-norm bound ``C``.

    Returns:
        A :class:`ClusteringResult` with the bases, every record's nearest subspace and one
        history entry per start (its cost and steps).
    """
    start = time.perf_counter()
    data, k, q = check_problem(X, clusters, subspace_dim, clip_norm)
    restarts = require_positive_int(restarts, "restarts")
    iterations = require_positive_int(iterations, "iterations")
    rng = np.random.default_rng(None if seed is None else [seed, START_STREAM])
    runs = []
    for _ in range(restarts):
        initial = random_subspaces(rng, data.X.shape[1], k, q)
        bases, labels, steps = kplane_from(data.X, initial, iterations, rng)
        cost = kmeans_subspace_cost(data.X, bases)
        runs.append((cost, steps, bases, labels))
    history: list[dict[str, Any]] = [
        {"round": run, "sites": 1, "cost": cost, "steps": steps}
        for run, (cost, steps, _, _) in enumerate(runs, start=1)
    ]
    cost, _, bases, labels = min(runs, key=lambda r: r[0])
    logger.info("k-plane: k=%d, q=%d, best cost %.4g over %d starts", k, q, cost, restarts)
    config = {
        "clusters": k, "subspace_dim": q, "samples": data.X.shape[0], "dim": data.X.shape[1],
        "restarts": restarts, "iterations": iterations, "seed": seed, "clip_norm": clip_norm,
        "clipped_rows": data.clip.clipped_rows, "cost": cost,
        "wall_seconds": time.perf_counter() - start,
    }
    return ClusteringResult(ALGORITHM, bases, labels, dict(NO_PRIVACY), history, config)

"""The result every fedpca subspace clustering algorithm returns, and its per-round table."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedpca.clustering.metrics import assign_to_subspaces
from fedpca.results import SavedResult, float_array


@dataclass
class ClusteringResult(SavedResult):
    """Private subspaces (one per cluster) and how they were obtained.

    Attributes:
        algorithm: e.g. ``"sulq-kplane"``.
        bases: one ``d x q`` orthonormal basis per cluster.
        assignments: each record's cluster when the algorithm releases them, else ``None``
            (federated algorithms keep every record's cluster at its site).
        privacy: the guarantee actually given (epsilon, delta, accounting, noise multiplier,
            sensitivity, sigma, unit of privacy, trust model).
        history: one dict per round (round, sites, epsilon_spent, and any metrics).
        config: the parameters of the run.
    """

    algorithm: str
    bases: list[np.ndarray]
    assignments: np.ndarray | None
    privacy: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "bases": lambda bases: [float_array(basis) for basis in bases],
        "assignments": lambda labels: np.asarray(labels, dtype=np.int64),
    }

    @property
    def clusters(self) -> int:
        """Number of clusters ``k``."""
        return len(self.bases)

    @property
    def k(self) -> int:
        """Number of clusters (the same as :attr:`clusters`)."""
        return self.clusters

    @property
    def dim(self) -> int:
        """Number of features ``d``."""
        return int(self.bases[0].shape[0])

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Each row of ``X``'s nearest subspace (post-processing: no privacy cost)."""
        return assign_to_subspaces(X, self.bases)


@dataclass
class CentredClusteringResult(ClusteringResult):
    """Private subspaces of centred (and possibly standardised) rows
    (:func:`fedpca.algorithms.centred_run.run_centred_kplane`): the bases live in the
    transformed space, so a row is centred and scaled with the released mean and scale
    before it is assigned (post-processing).

    Attributes (beyond :class:`ClusteringResult`'s; every one released or public):
        columns: the contract's output column names (the bases' rows).
        mean: the released column means (contract units).
        scale: the released column standard deviations (ones when only centred).
    """

    columns: list[str] | None = None
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        **ClusteringResult.READERS, "mean": float_array, "scale": float_array,
    }

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Each row of ``X`` (preprocessed by the contract), centred and scaled with the
        released mean and scale, to its nearest subspace (post-processing)."""
        return super().predict((np.asarray(X, dtype=np.float64) - self.mean) / self.scale)


def round_table(result: ClusteringResult) -> str:
    """One line per round: round, sites, k-means cost, Wasserstein distance, epsilon spent
    (``-`` where a metric was not evaluated)."""
    columns = (("cost", "cost"), ("wasserstein_distance", "W dist"), ("epsilon_spent", "eps spent"))
    header = f"{'round':>5}  {'sites':>5}" + "".join(f"  {title:>9}" for _, title in columns)
    lines = [header, "-" * len(header)]
    for entry in result.history:
        values = [entry.get(key, math.nan) for key, _ in columns]
        lines.append(
            f"{entry['round']:>5}  {entry['sites']:>5}"
            + "".join("  " + ("        -" if math.isnan(v) else f"{v:>9.4f}") for v in values)
        )
    return "\n".join(lines)

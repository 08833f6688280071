"""Differentially private subspace clustering (Wang, Wang, Singh, "Differentially Private Subspace
Clustering", NIPS 2015).

:mod:`~fedpca.clustering.metrics` holds the utility measures (k-means subspace cost,
Wasserstein subspace distance), :class:`~fedpca.results.ClusteringResult` is the result
every algorithm returns, :mod:`~fedpca.algorithms.kplane` the federated SuLQ k-plane. No
Flower import here.
"""

from fedpca.clustering.metrics import kmeans_subspace_cost, wasserstein_subspace_distance
from fedpca.linalg.subspace import assign_to_subspaces
from fedpca.results import ClusteringResult

__all__ = [
    "ClusteringResult",
    "assign_to_subspaces",
    "kmeans_subspace_cost",
    "wasserstein_subspace_distance",
]

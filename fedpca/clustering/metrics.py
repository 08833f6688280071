"""Subspace clustering utility measures of paper 003 (Wang, Wang, Singh, NIPS 2015).

* point-to-subspace distance ``d(x, S) = ||x - U U^T x||`` (Sec. 2.1) for an orthonormal
  basis ``U`` of ``S`` and the nearest-subspace assignment: linear algebra
  (:func:`fedpca.linalg.subspace.squared_distances`,
  :func:`~fedpca.linalg.subspace.assign_to_subspaces`), which the federated k-plane's sites
  use too;
* k-means subspace cost, eq. (3): ``cost(C; X) = 1/n sum_i min_j d^2(x_i, S_j)``;
* Wasserstein subspace distance, eq. (2): ``d_W^2(C, C*) = min_pi sum_i d^2(S_i, S*_pi(i))``
  over matchings ``pi``, with ``d(S, S') = ||sin Theta(S, S')||_F``
  (:func:`fedpca.linalg.subspace.subspace_distance`). It lies in ``[0, k q]``; Fig. 2 plots it.

No privacy here: these are evaluations (in simulation they see the pooled data) and the
assignment rule a site applies to its own records.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import squared_distances, subspace_distance


def kmeans_subspace_cost(X: np.ndarray, bases: Sequence[np.ndarray]) -> float:
    """Eq. (3): the mean over points of the squared distance to the nearest subspace."""
    return float(squared_distances(X, bases).min(axis=1).mean())


def wasserstein_subspace_distance(
    bases_a: Sequence[np.ndarray], bases_b: Sequence[np.ndarray]
) -> float:
    """Eq. (2): ``min_pi sum_i ||sin Theta(S_i, S'_pi(i))||_F^2`` over matchings ``pi``.

    0 for the same set of subspaces in any order; symmetric; ``k q`` at most for ``k``
    subspaces of dimension ``q``. Both sets must hold the same number of subspaces.
    """
    if len(bases_a) != len(bases_b) or len(bases_a) == 0:
        raise ConfigurationError(
            f"the Wasserstein distance compares two equally sized, non-empty sets of "
            f"subspaces, got {len(bases_a)} and {len(bases_b)}"
        )
    costs = np.array([[subspace_distance(a, b) ** 2 for b in bases_b] for a in bases_a])
    rows, cols = linear_sum_assignment(costs)
    return float(costs[rows, cols].sum())

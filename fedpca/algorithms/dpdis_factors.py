"""DPdisPCA's linear algebra, no privacy in it (post-processing of each site's one release):
a site's partial square root ``P_s`` of its noisy second moment, and the server's merge of
the sites' ``P_s`` (or of their full matrices ``A^_s``) into the top eigenvectors of
``A_c = sum_s w_s P_s P_s^T``. The protocol, its sites and its server are
:mod:`fedpca.algorithms.dpdis_pca`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import GramPlusSymmetric, top_eigenpairs, top_eigenvectors


def partial_square_root(A_hat: np.ndarray | GramPlusSymmetric, r: int) -> np.ndarray:
    """``P = U_R diag(sqrt(max(lambda_R, 0)))`` from the ``r`` largest (algebraic) eigenpairs
    of the symmetric ``A_hat`` (columns in descending eigenvalue order; a negative eigenvalue
    among them gives a zero column).

    ``A_hat`` is a ``d x d`` array (dense ``eigh``) or a site's noisy matrix kept factored,
    ``X^T X / N_s + E`` (:func:`fedpca.linalg.subspace.gram_top_eigenpairs`: Lanczos for large
    ``d`` and small ``r``, dense ``eigh`` otherwise).
    """
    if isinstance(A_hat, GramPlusSymmetric):
        values, vectors = A_hat.top_eigenpairs(r)
    else:
        values, vectors = top_eigenpairs(np.asarray(A_hat, dtype=np.float64), r)
    return vectors * np.sqrt(np.clip(values, 0.0, None))


def stacked_factors(factors: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """``M = [sqrt(w_1) P_1 ... sqrt(w_S) P_S]`` (``d x sum R_s``), so ``M M^T = A_c``."""
    return np.hstack([np.sqrt(w) * P for w, P in zip(weights, factors, strict=True)])


def top_left_singular_vectors(M: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` leading left singular vectors of ``M`` (= top eigenvectors of ``M M^T``)."""
    import scipy.linalg  # here, not above: a site's ClientApp process needs none of it

    U, _, _ = scipy.linalg.svd(M, full_matrices=False, check_finite=False)
    return U[:, :k]


def merged_factor_basis(
    factors: Sequence[np.ndarray], weights: np.ndarray, k: int
) -> np.ndarray:
    """Top-``k`` eigenvectors of ``A_c = sum_s w_s P_s P_s^T``; ``d x d`` only if needed.

    With ``m = sum R_s < d`` columns the thin SVD of the stacked factors costs ``O(d m^2)``
    and never forms ``A_c``; otherwise ``eigh`` of the ``d x d`` ``A_c`` is cheaper.
    """
    M = stacked_factors(factors, weights)
    d, m = M.shape
    if m < k:
        raise ConfigurationError(
            f"A_c has rank at most S*R = {m} < k = {k}: its top-{k} eigenvectors are not "
            f"determined; ask each site for r >= {-(-k // len(factors))} = ceil(k / S)"
        )
    if m < d:
        return top_left_singular_vectors(M, k)
    return top_eigenvectors(M @ M.T, k)


def merged_full_matrix(matrices: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """``sum_s w_s A^_s`` (the "send the full matrix" variant's merged matrix)."""
    total = np.zeros_like(matrices[0], dtype=np.float64)
    for w, A in zip(weights, matrices, strict=True):
        total += w * A
    return total

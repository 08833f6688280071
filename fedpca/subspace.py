"""Linear algebra on subspaces: thin QR, row thresholding, distances. No privacy here."""

from __future__ import annotations

import numpy as np
import scipy.linalg


def thin_qr(A: np.ndarray) -> np.ndarray:
    """Orthonormal ``Q`` of the thin QR ``A = QR`` with ``R``'s diagonal made positive.

    The sign convention makes the factor unique for full-column-rank ``A`` (paper 000
    Alg. 3), so the same input gives the same basis everywhere.
    """
    Q, R = scipy.linalg.qr(A, mode="economic", check_finite=False)
    signs = np.sign(np.diag(R))
    signs[signs == 0] = 1.0
    return Q * signs


def threshold_rows(V: np.ndarray, keep: int) -> np.ndarray:
    """Keep the ``keep`` rows of largest L2 norm and zero the rest (paper 000 Alg. 2).

    Ties are broken by the lower row index, so the result is deterministic.
    """
    if keep >= V.shape[0]:
        return V.copy()
    norms = np.einsum("ij,ij->i", V, V)
    kept = np.argsort(-norms, kind="stable")[:keep]
    out = np.zeros_like(V)
    out[kept] = V[kept]
    return out


def top_coordinates(scores: np.ndarray, keep: int) -> np.ndarray:
    """Indices of the ``keep`` largest entries of ``scores`` (stable, sorted ascending)."""
    return np.sort(np.argsort(-scores, kind="stable")[:keep])


def subspace_distance(Q: np.ndarray, Q_true: np.ndarray) -> float:
    """``||sin Theta(Q, Q_true)||_F = ||Q Q^T - Q* Q*^T||_F / sqrt(2)`` for orthonormal bases.

    0 means the same subspace; ``sqrt(k)`` means orthogonal subspaces (equal ``k``). Computed
    from the ``k x k`` overlap only: ``||P - P*||_F^2 = k + k* - 2 ||Q^T Q*||_F^2``.
    """
    overlap = np.linalg.norm(Q.T @ Q_true) ** 2
    squared = (Q.shape[1] + Q_true.shape[1] - 2.0 * overlap) / 2.0
    return float(np.sqrt(max(squared, 0.0)))


def top_eigenpairs(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues of a symmetric ``A`` (descending) and their vectors."""
    d = A.shape[0]
    values, vectors = scipy.linalg.eigh(A, subset_by_index=(d - k, d - 1), check_finite=False)
    return values[::-1], vectors[:, ::-1]


def top_eigenvectors(A: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` leading eigenvectors of a symmetric ``A`` (columns, descending order)."""
    return top_eigenpairs(A, k)[1]


def captured_energy(V: np.ndarray, A: np.ndarray) -> float:
    """``q_F(V) = tr(V^T A V)``: the energy of the symmetric ``A`` captured by the basis ``V``."""
    return float(np.einsum("ij,ij->", V, A @ V))


def energy_ratio(V: np.ndarray, A: np.ndarray) -> float:
    """``q_F(V) / q_F(V_k(A))`` with ``k`` the number of columns of ``V`` (1 is optimal)."""
    best = captured_energy(top_eigenvectors(A, V.shape[1]), A)
    return captured_energy(V, A) / best if best > 0 else float("nan")

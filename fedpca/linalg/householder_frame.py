"""An orthonormal basis of ``R^d`` adapted to a few orthonormal columns and a pole, and the
compression of a diagonal matrix to its trailing coordinates, with the square root of its
inverse: the linear algebra of one exact conditional Bingham draw
(:mod:`fedpca.linalg.bingham`), in ``O(d m^2)`` work and no ``d x d`` matrix.

:class:`HouseholderFrame` is the Householder factor ``Q = I - Y T Y^T`` of ``[W, p]``
(``W``: ``d x m`` orthonormal, ``p`` a pole) in compact WY form: ``Q[:, m]`` is the pole's
part orthogonal to ``W``, and ``Q[:, m:]``, ``Q[:, m + 1:]`` span the complements of ``W``
and ``[W, p]``. The compression of a diagonal matrix to either complement is that diagonal
on the trailing coordinates plus a rank ``2m + 2`` term
(:meth:`HouseholderFrame.root`), whose square-root inverse (:class:`CompressionRoot`) maps
``N(0, I)`` to the Gaussian the sampler's envelopes propose from; its positive definiteness
is checked before every draw.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.linalg import lapack

__all__ = ["PD_TOLERANCE", "CompressionRoot", "HouseholderFrame"]

#: Smallest eigenvalue of the normalised ``N^T Omega N`` accepted as positive definite.
PD_TOLERANCE = 1e-12


class CompressionRoot:
    """``M = D^(1/2) (I + U diag(phi) U^T) D^(1/2)`` (``D`` diagonal, ``U`` orthonormal, ``q``
    rows) and the square root of its inverse: ``apply(xi) = D^(-1/2) (I + U diag(coef) U^T) xi``
    with ``coef = (1 + phi)^(-1/2) - 1`` maps ``N(0, I)`` to ``N(0, M^-1)``, and
    ``apply(xi)^T M apply(xi) = ||xi||^2``."""

    def __init__(
        self, inv_sqrt_diag: np.ndarray, basis: np.ndarray, phi: np.ndarray, diag_min: float
    ) -> None:
        self.inv_sqrt_diag = inv_sqrt_diag
        self.basis = basis
        self.phi = phi
        self.coef = 1.0 / np.sqrt(1.0 + phi) - 1.0
        #: ``min(1, 1 + min phi)``: the smallest eigenvalue of ``I + U diag(phi) U^T``
        self.low = min(1.0, 1.0 + float(phi[0]))
        #: a lower bound on the smallest eigenvalue of ``M``
        self.min_eig_bound = diag_min * self.low

    @property
    def dim(self) -> int:
        return int(self.inv_sqrt_diag.size)

    def apply(
        self, xi: np.ndarray, inv_sqrt_diag: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """``M^(-1/2) xi`` for the columns of ``xi`` (with ``inv_sqrt_diag`` in place of
        ``D^(-1/2)`` if given, e.g. scaled), into ``out`` if given."""
        scale = self.inv_sqrt_diag if inv_sqrt_diag is None else inv_sqrt_diag
        return np.multiply(xi + self.basis @ (self.coef[:, None] * (self.basis.T @ xi)),
                           scale[:, None], out=out)

    def inverse_trace_bound(self) -> float:
        """An upper bound on ``tr(M^-1)``: ``tr(D^-1) / min(1, 1 + min phi)``."""
        return float(self.inv_sqrt_diag @ self.inv_sqrt_diag) / self.low

    def log_det(self) -> float:
        """``log det M``."""
        return float(np.log1p(self.phi).sum() - 2.0 * np.log(self.inv_sqrt_diag).sum())


class HouseholderFrame:
    """An orthonormal basis of ``R^d`` adapted to ``W`` (``d x m``) and a pole ``p``:
    ``Q = I - Y T Y^T``, the Householder factor of ``[W, p]`` in compact WY form. ``Q[:, :m]``
    spans ``W``, ``Q[:, m]`` is (up to sign) ``p``'s normalised part orthogonal to ``W``,
    ``Q[:, m:]`` spans ``W``'s orthogonal complement and ``Q[:, m + 1:]`` that of ``[W, p]``."""

    def __init__(self, W: np.ndarray, pole: np.ndarray) -> None:
        self.w = W
        self.m = m = W.shape[1]
        M = np.empty((W.shape[0], m + 1), order="F")
        M[:, :m] = W
        M[:, m] = pole
        self.Y, self.T, _ = lapack.dgeqrt(m + 1, M, overwrite_a=1)
        # Above the diagonal dgeqrt leaves R, and Y's unit diagonal is implicit.
        head = self.Y[: m + 1]
        head[_upper_mask(m + 1)] = 0.0
        np.fill_diagonal(head, 1.0)
        #: ``Q[:, m]``: the unit pole, orthogonal to ``W``
        self.pole = -(self.Y @ (self.T @ self.Y[m]))
        self.pole[m] += 1.0

    def embed(self, z: np.ndarray, start: int) -> np.ndarray:
        """``Q[:, start:] z`` for the columns of ``z`` (``(d - start) x count``)."""
        x = -(self.Y @ (self.T @ (self.Y[start:].T @ z)))
        x[start:] += z
        return x

    def root(self, diag: np.ndarray, start: int) -> CompressionRoot | None:
        """The trailing block ``(Q^T diag(diag) Q)[start:, start:]`` as a
        :class:`CompressionRoot`, or None when it is not (numerically) positive definite.

        The block is ``diag[start:] + [Y_s, (diag Y)_s] S [Y_s, (diag Y)_s]^T`` (``Y_s`` the
        rows from ``start``) with ``S = [[T^T Y^T diag(diag) Y T, -T^T], [-T, 0]]``: a diagonal
        plus a rank ``2 (m + 1)`` term, factored in ``O(d m^2)``.
        """
        tail = diag[start:]
        diag_min = float(tail.min()) if tail.size else 0.0
        if not diag_min > 0:
            return None
        root = np.sqrt(tail)
        Y, T = self.Y, self.T
        n = T.shape[0]
        S = np.zeros((2 * n, 2 * n))
        S[:n, :n] = T.T @ ((Y.T * diag) @ Y) @ T
        S[:n, n:] = -T.T
        S[n:, :n] = -T
        rows = np.empty((2 * n, tail.size))  # K^T, so that K is Fortran-ordered for LAPACK
        np.divide(Y[start:].T, root, out=rows[:n])
        np.multiply(Y[start:].T, root, out=rows[n:])
        K = rows.T
        rank = min(K.shape)
        packed, tau, _, _ = lapack.dgeqrf(K)
        basis, _, _ = lapack.dorgqr(packed[:, :rank], tau[:rank])
        R = basis.T @ K
        phi, E, _ = lapack.dsyev(R @ S @ R.T)
        if not 1.0 + phi[0] > PD_TOLERANCE:
            return None
        return CompressionRoot(1.0 / root, basis @ E, phi, diag_min)


@lru_cache(maxsize=None)
def _upper_mask(n: int) -> np.ndarray:
    """Boolean ``n x n`` mask of the diagonal and everything above it."""
    return np.triu(np.ones((n, n), dtype=bool))

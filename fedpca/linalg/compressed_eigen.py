"""The top eigenpair of a diagonal matrix compressed to the orthogonal complement of a few
orthonormal columns, without forming the compression.

For ``Lambda = diag(lam)`` and ``W`` (``d x m``, orthonormal), ``theta_1`` is the top
eigenvalue of ``Lambda`` compressed to ``W``'s complement. Two lower bounds with an
approximate eigenvector: :func:`ritz_pair` (Rayleigh-Ritz on a ``2m + 2`` dimensional
subspace: shift-and-invert directions, the leading coordinates and the current vector) and
:func:`lanczos_pair` (one Lanczos step from a start vector); both values are Rayleigh
quotients. An upper bound: :func:`bracket_top` bisects with the eigenvalue count
:func:`count_above`, ``#{lambda_i > t} + n_+(W^T (t - Lambda)^-1 W) - m`` (the inertia of
``[[Lambda - t, W], [W^T, 0]]``). The Bingham sampler (:mod:`fedpca.linalg.bingham`) takes
its pole and its shift from them.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import lapack

__all__ = [
    "MIN_START_IN_COMPLEMENT",
    "RITZ_RANK_TOLERANCE",
    "SEARCH_POINTS",
    "bracket_top",
    "count_above",
    "lanczos_pair",
    "ritz_pair",
]

#: Points at which the eigenvalue count is evaluated in one vectorised bracketing pass.
SEARCH_POINTS = 24
#: Directions of the Ritz subspace whose Gram eigenvalue is below this fraction of the
#: largest are dropped (they are numerically inside ``W``).
RITZ_RANK_TOLERANCE = 1e-8
#: Smallest part of a column's previous pole that must lie outside the new ``W`` for the
#: Lanczos refinement to start from it.
MIN_START_IN_COMPLEMENT = 0.5


def count_above(lam: np.ndarray, W: np.ndarray, points: np.ndarray) -> np.ndarray:
    """How many eigenvalues of ``diag(lam)`` compressed to ``W``'s complement exceed each point:
    ``#{lambda_i > t} + n_+(W^T (t - Lambda)^-1 W) - m``; -1 where a point is an eigenvalue."""
    m = W.shape[1]
    diff = points[:, None] - lam[None, :]
    hit = (diff == 0.0).any(axis=1)
    diff[hit] = 1.0
    weighted = W / diff[:, :, None]  # (points, d, m): (t - Lambda)^-1 W for every t
    H = np.swapaxes(weighted, 1, 2) @ W
    positive = np.array([(lapack.dsyev(h, compute_v=0)[0] > 0).sum() for h in H])
    counts = (diff < 0).sum(axis=1) + positive - m
    counts[hit] = -1
    return counts


def bracket_top(lam: np.ndarray, W: np.ndarray, lo: float, hi: float, tol: float) -> float:
    """An upper bound within ``tol`` of ``theta_1``, the top eigenvalue of ``diag(lam)``
    compressed to ``W``'s complement, given ``lo <= theta_1 <= hi``."""
    while hi - lo > tol:
        points = np.linspace(lo, hi, SEARCH_POINTS + 2)[1:-1]
        counts = count_above(lam, W, points)
        above = points[counts >= 1]
        below = points[counts == 0]
        if not (above.size or below.size):  # every point hit an eigenvalue of B
            break
        if above.size:
            lo = float(above.max())
        if below.size:
            hi = float(below.min())
    return hi


def ritz_pair(
    lam: np.ndarray, W: np.ndarray, current: np.ndarray, mu: float, leading: np.ndarray,
    guard: float,
) -> tuple[float, np.ndarray]:
    """Rayleigh-Ritz estimate of the top eigenpair of ``diag(lam)`` compressed to ``W``'s
    complement, from ``(Lambda - mu)^-1 W`` (``guard`` in place of a zero ``lambda_i - mu``),
    ``leading`` (``d x (m + 1)``, the leading coordinate vectors) and the current column, all
    projected onto the complement. The value is a lower bound on ``theta_1``."""
    m = W.shape[1]
    shifted = lam - mu
    shifted[shifted == 0.0] = guard
    Z = np.empty((lam.size, 2 * m + 2))
    np.divide(W, shifted[:, None], out=Z[:, :m])
    Z[:, m:-1] = leading
    Z[:, -1] = current
    Z -= W @ (W.T @ Z)
    gram = Z.T @ Z
    norms = np.sqrt(np.diag(gram))
    scale = 1.0 / np.where(norms > 0, norms, 1.0)
    g, F, _ = lapack.dsyev(gram * scale * scale[:, None])
    keep = g > RITZ_RANK_TOLERANCE * g[-1]
    basis = Z @ (F[:, keep] * (scale[:, None] / np.sqrt(g[keep])))
    ritz, E, _ = lapack.dsyev(basis.T @ (lam[:, None] * basis))
    return float(ritz[-1]), basis @ E[:, -1]


def lanczos_pair(
    lam: np.ndarray, W: np.ndarray, start: np.ndarray
) -> tuple[float, np.ndarray] | None:
    """One Lanczos step in ``W``'s complement from the unit vector ``start`` projected onto it
    (``p``): the top Ritz pair of ``diag(lam)`` on ``span{p, P Lambda p}`` (``P`` the
    projector onto the complement). The value is a lower bound on ``theta_1`` (the Rayleigh
    quotient of the vector). None when less than ``MIN_START_IN_COMPLEMENT`` of ``start``'s
    length lies in the complement."""
    p = start - W @ (W.T @ start)
    norm = math.sqrt(float(p @ p))
    if norm < MIN_START_IN_COMPLEMENT:
        return None
    p /= norm
    r = lam * p
    r -= W @ (W.T @ r)
    alpha = float(p @ r)
    r -= alpha * p
    beta = math.sqrt(float(r @ r))
    if beta == 0.0:
        return alpha, p
    r /= beta
    gamma = float(r @ (lam * r))
    top = (alpha + gamma) / 2 + math.hypot((gamma - alpha) / 2, beta)
    lift = top - alpha
    return top, (beta * p + lift * r) / math.hypot(beta, lift)

"""What a PCA user reads beside the components: the variance along each one, its share of
the total variance, and the number of components that explains a target share. No Flower.

**From a whole noisy matrix** (post-processing, no budget): DPdisPCA's full and secure-sum
variants (the merged noisy second moment), LDP-PCA (the aggregated noisy covariance),
Analyze Gauss and MOD-SuLQ (the curator's noisy matrix). The explained variance is the
top-``k`` eigenvalues of that matrix per record, negative ones clamped at 0; the total
variance is its **trace** (an unbiased estimate of the true total: the noise has mean 0;
the sum of the eigenvalues clamped at 0 would add the noise's spread to it), raised to the
sum of the clamped top values when the noise made it smaller, so the ratios lie in
``[0, 1]`` and sum to at most 1.

**From DPS-PCA's final basis** (one more charged release; DPS-PCA never forms a matrix):
each site releases, for the final orthonormal basis ``V`` (``d x k``), the statistic
:func:`rayleigh_statistics` ``(||X_s v_1||^2, ..., ||X_s v_k||^2, ||X_s||_F^2)``: the ``k``
Rayleigh quotients ``diag(V^T X_s^T X_s V)`` and the trace of ``X_s^T X_s``, with Gaussian
noise of the site's own multiplier. Its replace-one L2 sensitivity is ``sqrt(2) C^2``
(:func:`rayleigh_sensitivity`, derived there). The server sums them over the sites and
divides by ``N``: the explained variance per component and the total variance, with the
same clamping as above.

**The choice of k** (:func:`choose_k`): the smallest ``k`` whose cumulative ratio of the
noisy eigenvalues reaches a target share: post-processing of a whole noisy matrix, so it
costs nothing, and only where one exists (DPS-PCA needs ``k`` before its first round).
"""

from __future__ import annotations

import numpy as np

from fedpca.algorithms.site_rows import SiteRows
from fedpca.errors import ConfigurationError
from fedpca.dp.mechanisms import SQRT2


def explained_variance(spectrum: np.ndarray, k: int,
                       whole: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The top-``k`` of a noisy matrix's eigenvalues (``spectrum``: all ``d`` of them,
    descending, per record) clamped at 0 and, when the matrix is the ``whole`` noisy
    second moment, each one's share of the total variance (:func:`variance_ratio` of the
    matrix's trace, the sum of ``spectrum``); ``None`` when the matrix is not whole."""
    spectrum = np.asarray(spectrum, dtype=np.float64)
    values = np.clip(spectrum[:k], 0.0, None)
    return values, variance_ratio(values, float(spectrum.sum())) if whole else None


def along_basis(V: np.ndarray, MV: np.ndarray,
                trace: float | None) -> tuple[np.ndarray, np.ndarray | None]:
    """The variance along each column of the released basis ``V`` (``d x k``) of a noisy
    matrix ``M`` given as ``MV = M V``: ``diag(V^T M V)`` clamped at 0 (the top-``k``
    eigenvalues when ``V`` holds ``M``'s top eigenvectors, the released basis's own
    variances when it does not, e.g. LDP-PCA's sparse solution), and their
    :func:`variance_ratio` over ``trace`` (``M``'s trace; ``None``: no ratio)."""
    values = np.clip(np.einsum("ij,ij->j", V, MV), 0.0, None)
    return values, None if trace is None else variance_ratio(values, trace)


def variance_ratio(values: np.ndarray, total: float) -> np.ndarray | None:
    """Each of ``values`` (clamped at 0) over the total variance ``total`` (a noisy
    trace), raised to ``values.sum()`` when smaller, so the ratios sum to at most 1;
    ``None`` when that total is 0 (nothing to divide by)."""
    values = np.clip(np.asarray(values, dtype=np.float64), 0.0, None)
    total = max(float(total), float(values.sum()))
    return values / total if total > 0 else None


def choose_k(spectrum: np.ndarray, target: float) -> int:
    """The smallest ``k`` whose cumulative explained-variance ratio, as a run keeping ``k``
    components reports it (:func:`explained_variance` of the noisy ``spectrum``: the top
    ``k`` clamped eigenvalues over the matrix's trace, raised to their sum when smaller),
    reaches ``target`` (in ``(0, 1]``); ``d`` when none does. Post-processing of the noisy
    eigenvalues: no budget.

    Raises ConfigurationError for a target outside ``(0, 1]`` or a spectrum with no
    positive eigenvalue (no variance to explain)."""
    if not 0.0 < target <= 1.0:
        raise ConfigurationError(
            f"the target share of variance must be in (0, 1], got {target}: e.g. 0.9")
    spectrum = np.asarray(spectrum, dtype=np.float64)
    explained = np.cumsum(np.clip(spectrum, 0.0, None))
    if explained[-1] <= 0:
        raise ConfigurationError(
            "the noisy matrix has no positive eigenvalue: no k explains any variance; "
            "give k explicitly (or a larger epsilon)")
    total = np.maximum(float(spectrum.sum()), explained)  # each k's own total
    cumulative = np.divide(explained, total, out=np.zeros_like(explained), where=total > 0)
    reached = np.flatnonzero(cumulative >= target * (1.0 - 1e-12))
    return int(reached[0]) + 1 if reached.size else int(spectrum.size)


def rayleigh_sensitivity(clip_norm: float) -> float:
    """Replace-one L2 sensitivity of :func:`rayleigh_statistics` for rows of norm
    ``<= C``: ``sqrt(2) C^2``, for any ``k``.

    Derivation: replacing row ``x`` by ``x'`` changes the quotients by ``a - b`` with
    ``a_j = (v_j^T x')^2 >= 0``, ``b_j = (v_j^T x)^2 >= 0`` and the trace by ``P - Q``,
    ``P = |x'|^2``, ``Q = |x|^2``. As ``a . b >= 0``, ``|a - b|^2 <= |a|^2 + |b|^2``, and
    ``|a|_2 <= |a|_1 = |V^T x'|^2 <= P`` (``V`` orthonormal), likewise ``|b|_2 <= Q``. So the
    change's squared norm is at most ``P^2 + Q^2 + (P - Q)^2 = 2 (P^2 + Q^2 - PQ)``, whose
    largest value over ``0 <= P, Q <= C^2`` is ``2 C^4`` (a convex function's maximum over
    the square is at a corner). Attained by ``x' = C v_1``, ``x = 0``: ``(C^2, 0, ..., C^2)``.
    """
    return SQRT2 * clip_norm**2


def rayleigh_statistics(X: np.ndarray | SiteRows, V: np.ndarray) -> np.ndarray:
    """``(||X v_1||^2, ..., ||X v_k||^2, ||X||_F^2)`` for rows ``X`` (``n x d``, in memory or
    read through their products) and an orthonormal basis ``V`` (``d x k``): the ``k``
    Rayleigh quotients ``diag(V^T X^T X V)`` and the trace of ``X^T X`` (unnormalised;
    ``k + 1`` numbers)."""
    if not isinstance(X, np.ndarray) and isinstance(X, SiteRows):
        projected, trace = X.times(V), float(X.squared_column_norms().sum())
    else:
        projected, trace = X @ V, np.einsum("ij,ij->", X, X)
    return np.append(np.einsum("ij,ij->j", projected, projected), trace)


def rayleigh_explained_variance(summed: np.ndarray,
                                samples: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The explained variance per component and its ratio from the sites' summed noisy
    :func:`rayleigh_statistics` (``k + 1`` numbers) over ``samples`` records:
    post-processing, the quotients clamped at 0, the noisy trace the total variance."""
    per_record = np.asarray(summed, dtype=np.float64) / samples
    values = np.clip(per_record[:-1], 0.0, None)
    return values, variance_ratio(values, float(per_record[-1]))

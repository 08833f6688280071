"""Fantope projection and the ADMM solver of Fantope projection and selection (FPS).

Paper: Vu, Cho, Lei, Rohe, "Fantope projection and selection: a near-optimal convex
relaxation of sparse PCA", NIPS 2013, used by Wang & Xu (paper 004, Alg. 2) on a noisy
covariance. No privacy here: the input is already private, everything below is
post-processing.

* The Fantope ``F^k = {X : 0 <= X <= I, tr X = k}`` is the convex hull of the rank-``k``
  projectors. The Frobenius-nearest point of ``F^k`` to a symmetric ``A = sum g_i u_i u_i^T``
  is ``P_F(A) = sum min(max(g_i - theta, 0), 1) u_i u_i^T`` with ``theta`` such that the new
  eigenvalues sum to ``k`` (Vu et al., Lemma 4.1); ``theta`` is found by bisection.
* FPS solves ``max <S, X> - lam ||X||_{1,1}`` over ``F^k`` by ADMM (scaled form):
  ``X <- P_F(Y - U + S/rho)``, ``Y <- soft(X + U, lam/rho)``, ``U <- U + X - Y``, until the
  primal residual ``||X - Y||_F`` and the dual residual ``rho ||Y - Y_prev||_F`` are both
  below ``tol``. ``S`` and ``lam`` are first divided by ``||S||_2`` (the solution does not
  change), so ``rho`` and ``tol`` mean the same thing whatever the scale of the data.
  ``rho`` is adapted by residual balancing (Boyd et al. 2011, Sec. 3.4.1). A run that hits
  ``max_iter`` says so in its result and in a warning; it is never silent.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.dp.validation import require_finite_positive, require_positive_int

logger = logging.getLogger(__name__)

#: How far from symmetric (max |A - A^T|, relative to max |A|) an input may be.
SYMMETRY_TOLERANCE = 1e-10
#: Bisection steps for ``theta``: 200 halvings reach the float64 resolution of any bracket.
BISECTION_STEPS = 200
#: Residual balancing: ``rho`` is multiplied or divided by ``RHO_FACTOR`` when one residual
#: exceeds ``RHO_IMBALANCE`` times the other.
RHO_IMBALANCE = 10.0
RHO_FACTOR = 2.0

WARNING_NOT_CONVERGED = (
    "Fantope ADMM stopped at the iteration cap max_iter=%d before converging (primal "
    "residual %.3g, dual residual %.3g, tolerance %.3g); the returned solution is approximate: "
    "raise max_iter or tol"
)


@dataclass(frozen=True)
class ADMMSettings:
    """Parameters of the FPS ADMM (on ``S / ||S||_2``).

    Attributes:
        rho: initial ADMM penalty (adapted by residual balancing when ``adaptive``).
        tol: the run stops once both residuals are below ``tol``.
        max_iter: iteration cap; reaching it is reported (``converged=False``).
        adaptive: adapt ``rho`` by residual balancing.
    """

    rho: float = 1.0
    tol: float = 1e-4
    max_iter: int = 500
    adaptive: bool = True

    def __post_init__(self) -> None:
        require_finite_positive(self.rho, "rho")
        require_finite_positive(self.tol, "tol")
        require_positive_int(self.max_iter, "max_iter")


@dataclass(frozen=True)
class ADMMResult:
    """What the FPS ADMM returns.

    Attributes:
        solution: ``Y``, the sparse iterate (symmetric, in ``F^k`` up to the residual).
        iterations: iterations run.
        converged: whether both residuals fell below ``tol`` before ``max_iter``.
        primal_residual: final ``||X - Y||_F`` (normalised problem).
        dual_residual: final ``rho ||Y - Y_prev||_F`` (normalised problem).
    """

    solution: np.ndarray
    iterations: int
    converged: bool
    primal_residual: float
    dual_residual: float


def validate_symmetric(A: object, name: str = "matrix") -> np.ndarray:
    """Return ``A`` as a finite float64 symmetric square array or raise InvalidDataError."""
    arr = np.asarray(A)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise InvalidDataError(f"{name} has dtype {arr.dtype}; give a float array")
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise InvalidDataError(f"{name} must be a non-empty square matrix, got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        raise InvalidDataError(f"{name} contains NaN or inf entries")
    asymmetry = float(np.abs(arr - arr.T).max())
    if asymmetry > SYMMETRY_TOLERANCE * max(float(np.abs(arr).max()), 1e-300):
        raise InvalidDataError(
            f"{name} is not symmetric (max |A - A^T| = {asymmetry:.3g}); pass (A + A.T) / 2 if "
            "the asymmetry is rounding"
        )
    return arr


def require_rank(k: object, dim: int) -> int:
    """Return ``k`` if it is an integer in ``1..dim``, else raise ConfigurationError."""
    k = require_positive_int(k, "k")
    if k > dim:
        raise ConfigurationError(f"need k <= dim, got k={k}, dim={dim}")
    return k


def require_penalty(lam: object) -> float:
    """Return ``lam`` as float if it is a finite number ``>= 0``, else raise ConfigurationError."""
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.number)) or not (
        math.isfinite(float(lam)) and lam >= 0
    ):
        raise ConfigurationError(
            f"lam must be a finite number >= 0, got {lam!r}; 0 means no sparsity penalty"
        )
    return float(lam)


def fantope_eigenvalues(g: np.ndarray, k: int) -> np.ndarray:
    """``min(max(g - theta, 0), 1)`` with ``theta`` such that the result sums to ``k``.

    ``theta`` is bracketed by ``[min g - 1, max g]`` (sums ``d >= k`` and ``0``) and found by
    bisection; the sum is piecewise linear in ``theta``, so ``theta`` is then solved exactly
    on the piece the bisection ended in.
    """
    lo, hi = float(g.min()) - 1.0, float(g.max())
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if np.clip(g - mid, 0.0, 1.0).sum() > k:
            lo = mid
        else:
            hi = mid
    theta = 0.5 * (lo + hi)
    shifted = g - theta
    partial = (shifted > 0) & (shifted < 1)
    if partial.any():
        theta = (g[partial].sum() + (shifted >= 1).sum() - k) / partial.sum()
    return np.clip(g - theta, 0.0, 1.0)


def fantope_projection(A: object, k: int) -> np.ndarray:
    """``P_F(A)``: the Frobenius-nearest point of the Fantope ``F^k`` to a symmetric ``A``."""
    A = validate_symmetric(A, "the matrix to project")
    return _project(A, require_rank(k, A.shape[0]))


def _project(A: np.ndarray, k: int) -> np.ndarray:
    """``U diag(g') U^T``, made exactly symmetric: a product of that form is symmetric only up
    to rounding, which differs between BLAS builds, and the ADMM iterates must stay in the
    symmetric matrices. The whole spectrum by LAPACK's divide and conquer (``evd``: about
    1.4x faster than scipy's default ``evr`` for ``d`` of 100 to 500)."""
    g, U = scipy.linalg.eigh(A, check_finite=False, driver="evd")
    P = (U * fantope_eigenvalues(g, k)) @ U.T
    return 0.5 * (P + P.T)


def soft_threshold(A: np.ndarray, level: float) -> np.ndarray:
    """Entry-wise ``sign(a) max(|a| - level, 0)``."""
    return np.sign(A) * np.maximum(np.abs(A) - level, 0.0)


def fantope_admm(
    S: object, k: int, lam: float, settings: ADMMSettings | None = None
) -> ADMMResult:
    """Solve ``max <S, X> - lam ||X||_{1,1}`` subject to ``X in F^k`` by ADMM (FPS).

    Args:
        S: symmetric ``d x d`` matrix (e.g. a private covariance estimate).
        k: Fantope rank, ``1 <= k <= d``.
        lam: L1 penalty, ``>= 0`` (0 gives the top-``k`` eigenprojector of ``S``).
        settings: :class:`ADMMSettings` (defaults if ``None``).
    """
    S = validate_symmetric(S, "S")
    k = require_rank(k, S.shape[0])
    lam = require_penalty(lam)
    settings = settings or ADMMSettings()
    scale = float(np.abs(scipy.linalg.eigvalsh(S, check_finite=False)).max()) or 1.0
    S, lam = S / scale, lam / scale
    rho, tol = settings.rho, settings.tol
    Y = np.zeros_like(S)
    U = np.zeros_like(S)
    primal = dual = math.inf
    iterations = 0
    while iterations < settings.max_iter and not (primal <= tol and dual <= tol):
        iterations += 1
        X = _project(Y - U + S / rho, k)
        Y_prev = Y
        Y = soft_threshold(X + U, lam / rho)
        U = U + X - Y
        primal = float(np.linalg.norm(X - Y))
        dual = rho * float(np.linalg.norm(Y - Y_prev))
        if settings.adaptive and (primal > RHO_IMBALANCE * dual or dual > RHO_IMBALANCE * primal):
            factor = RHO_FACTOR if primal > dual else 1.0 / RHO_FACTOR
            rho *= factor
            U = U / factor  # the scaled dual variable is y / rho
    converged = primal <= tol and dual <= tol
    if not converged:
        logger.warning(WARNING_NOT_CONVERGED, settings.max_iter, primal, dual, tol)
    return ADMMResult(Y, iterations, converged, primal, dual)

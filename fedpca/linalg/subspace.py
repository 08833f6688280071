"""Linear algebra on subspaces: thin QR, row thresholding, distances (between subspaces, and
from points to subspaces with the nearest-subspace assignment and each cluster's scatter,
which subspace clustering builds on), top eigenpairs. No privacy here.

Top eigenpairs of ``M = X^T X / divisor + S`` (``X`` is ``n x d``, ``S`` a symmetric
``d x d`` matrix or absent) without an ``O(d^3)`` eigendecomposition where ``k`` is small:
see :class:`GramPlusSymmetric` and :func:`eigensolver_for` for the rule that picks the
solver, :func:`lanczos_top_eigenpairs` for the iterative one and its tolerance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from fedpca.blas import one_blas_thread
from fedpca.errors import ConfigurationError

logger = logging.getLogger(__name__)


def _scipy_linalg() -> ModuleType:
    """``scipy.linalg``, imported on first use, not with this module: a real site starts a
    fresh ClientApp process for every message, and most messages need none of it."""
    import scipy.linalg

    return scipy.linalg


def thin_qr(A: np.ndarray) -> np.ndarray:
    """Orthonormal ``Q`` of the thin QR ``A = QR`` with ``R``'s diagonal made positive.

    The sign convention makes the factor unique for full-column-rank ``A`` (paper 000
    Alg. 3), so the same input gives the same basis everywhere.
    """
    Q, R = _scipy_linalg().qr(A, mode="economic", check_finite=False)
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

    0 means the same subspace; ``sqrt(k)`` means orthogonal subspaces (equal ``k``).
    ``||P - P*||_F^2 = ||(I - P*) Q||_F^2 + ||(I - P) Q*||_F^2`` is computed from the residuals
    ``Q - Q* (Q*^T Q)``, ``O(d k k*)``: unlike ``k + k* - 2 ||Q^T Q*||_F^2``, whose
    cancellation hides every distance below ``~1e-8``, it keeps full relative precision for
    nearly equal subspaces.
    """
    overlap = Q.T @ Q_true
    outside_true = np.linalg.norm(Q - Q_true @ overlap.T) ** 2
    outside = np.linalg.norm(Q_true - Q @ overlap) ** 2
    return float(np.sqrt((outside_true + outside) / 2.0))


def squared_distances(X: np.ndarray, bases: Sequence[np.ndarray]) -> np.ndarray:
    """``n x k`` matrix of ``d^2(x_i, S_j) = ||x_i||^2 - ||U_j^T x_i||^2`` (clipped at 0)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ConfigurationError(f"X must be 2-D (points x features), got shape {X.shape}")
    if len(bases) == 0:
        raise ConfigurationError("need at least one subspace basis")
    for j, U in enumerate(bases):
        if np.ndim(U) != 2 or np.shape(U)[0] != X.shape[1]:
            raise ConfigurationError(
                f"basis {j} has shape {np.shape(U)}, expected ({X.shape[1]}, q) to match X"
            )
    norms = np.einsum("ij,ij->i", X, X)
    captured = np.stack([np.einsum("ij,ij->i", X @ U, X @ U) for U in bases], axis=1)
    return np.maximum(norms[:, None] - captured, 0.0)


def assign_to_subspaces(X: np.ndarray, bases: Sequence[np.ndarray]) -> np.ndarray:
    """Index of each row's nearest subspace (ties go to the lowest index)."""
    return np.argmin(squared_distances(X, bases), axis=1)


def cluster_scatter(X: np.ndarray, labels: np.ndarray, clusters: int) -> np.ndarray:
    """``(k, d, d)``: each cluster's scatter ``A_l = sum_{labels_i = l} x_i x_i^T``."""
    out = np.empty((clusters, X.shape[1], X.shape[1]))
    for cluster in range(clusters):
        members = X[labels == cluster]
        out[cluster] = members.T @ members
    return out


#: Bytes of records :func:`gram_product` multiplies at a time (a block stays in cache) ...
GRAM_BLOCK_BYTES = 512 << 10
#: ... but never fewer rows than this (wide records: tiny blocks would cost more than
#: they save).
GRAM_BLOCK_MIN_ROWS = 16


def gram_product(X: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``X^T (X Q)`` for an ``n x d`` ``X`` and a ``d x k`` (or length-``d``) ``Q``, reading
    ``X`` from memory once: row blocks of about :data:`GRAM_BLOCK_BYTES` are multiplied
    twice while in cache (``X.T @ (X @ Q)`` streams ``X`` twice; measured 2.1x faster for a
    2,000 x 200 ``X`` not in cache). Equal to ``X.T @ (X @ Q)`` up to the order of
    floating-point additions."""
    rows = max(GRAM_BLOCK_MIN_ROWS, GRAM_BLOCK_BYTES // (8 * max(X.shape[1], 1)))
    if X.shape[0] <= rows:
        return X.T @ (X @ Q)
    out = np.zeros((X.shape[1],) + Q.shape[1:])
    for start in range(0, X.shape[0], rows):
        block = X[start : start + rows]
        out += block.T @ (block @ Q)
    return out


def top_eigenpairs(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues of a symmetric ``A`` (descending) and their vectors."""
    d = A.shape[0]
    values, vectors = _scipy_linalg().eigh(A, subset_by_index=(d - k, d - 1), check_finite=False)
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


# --- top eigenpairs of X^T X / divisor + S without d^3 work -----------------------------------

#: Solvers :func:`gram_top_eigenpairs` can use.
DENSE = "dense"
LANCZOS = "lanczos"
THIN_SVD = "thin-svd"
AUTO = "auto"
EIGENSOLVERS = (AUTO, DENSE, LANCZOS, THIN_SVD)
#: The Lanczos solver is used only from this dimension on ...
LANCZOS_MIN_DIM = 1000
#: ... and only while ``k <= LANCZOS_K_PER_MILLION * (d / 1000)^2``: 5 at d = 1000, 20 at
#: 2000, 233 at 6830. Dense ``eigh`` costs ``~d^3``; Lanczos ``~steps * d^2`` with ``steps``
#: growing with ``k`` (and its reorthogonalisation ``~steps^2 d``); measured single-threaded
#: on noise-dominated matrices (the slow case), Lanczos is faster below that line and about
#: as fast or slower above it (benchmarks/highd.py).
LANCZOS_K_PER_MILLION = 5
#: Relative residual every returned Lanczos pair meets: ``||M y - theta y|| <= tol ||M||_2``.
LANCZOS_TOL = 1e-12
#: The Krylov basis (``steps x d`` floats) may use up to this many bytes ...
LANCZOS_BASIS_BYTES = 1 << 30
#: ... allocated this many bytes at a time, as the steps need them.
LANCZOS_CHUNK_BYTES = 16 << 20
#: Ritz pairs are checked every ~5 % more steps, and every step once all residual estimates
#: are within this factor of the tolerance.
CHECK_EVERY_STEP_WITHIN = 1e4
#: Seed of the Lanczos start vector: public, fixed, never the noise stream.
LANCZOS_START_SEED = 0


class EigensolverNotConverged(ArithmeticError):
    """The Lanczos solver stopped before every wanted pair met the tolerance."""


class _KrylovBasis:
    """Orthonormal rows ``q_0, q_1, ...`` stored in chunks allocated as they fill."""

    def __init__(self, dim: int, capacity: int) -> None:
        self.dim, self.capacity = dim, capacity
        self.rows = max(16, LANCZOS_CHUNK_BYTES // (8 * dim))
        self.chunks: list[np.ndarray] = []
        self.size = 0

    def append(self, v: np.ndarray) -> np.ndarray:
        """Store ``v`` as the next row and return that row."""
        chunk, row = divmod(self.size, self.rows)
        if chunk == len(self.chunks):
            self.chunks.append(np.empty((min(self.rows, self.capacity - self.size), self.dim)))
        self.chunks[chunk][row] = v
        self.size += 1
        return self.chunks[chunk][row]

    def blocks(self) -> list[np.ndarray]:
        """The filled rows, chunk by chunk."""
        full, rest = divmod(self.size, self.rows)
        return self.chunks[:full] + ([self.chunks[full][:rest]] if rest else [])

    def project_out(self, w: np.ndarray) -> None:
        """``w -= Q^T (Q w)`` in place, one chunk after another."""
        for block in self.blocks():
            w -= block.T @ (block @ w)

    def combine(self, S: np.ndarray) -> np.ndarray:
        """``Q_m^T S`` with ``Q_m`` the first ``m = S.shape[0]`` rows: Ritz vectors as
        columns."""
        out = np.zeros((self.dim, S.shape[1]))
        start = 0
        for block in self.blocks():
            block = block[: S.shape[0] - start]
            out += block.T @ S[start : start + block.shape[0]]
            start += block.shape[0]
        return out


def _orthogonalise(
    w: np.ndarray, q: np.ndarray, previous: np.ndarray, beta_previous: float,
    basis: _KrylovBasis,
) -> tuple[float, float]:
    """The Lanczos step after the product ``w = M q``: ``w`` loses its components along
    ``q`` and ``previous`` (three-term recurrence) and along the whole basis (full
    reorthogonalisation, Gram-Schmidt by chunks, repeated while it removes much), in place;
    returns ``(alpha, ||w||)``.

    Vector-sized products, run on one BLAS thread: on two, OpenBLAS wakes its threads for
    every one of them (measured: reorthogonalisation at d = 6830 1.35 s on two threads, 0.2 s
    on one; a norm at d = 20000 4 ms), while the product with ``M`` keeps the caller's
    threads.
    """
    with one_blas_thread():
        alpha = float(q @ w)
        w -= alpha * q
        if beta_previous:
            w -= beta_previous * previous
        norm = float(np.linalg.norm(w))
        for _ in range(3):
            basis.project_out(w)
            before, norm = norm, float(np.linalg.norm(w))
            if norm > 0.5 * before:
                break
    return alpha, norm


def lanczos_top_eigenpairs(
    matvec: Callable[[np.ndarray], np.ndarray],
    dim: int,
    k: int,
    tol: float = LANCZOS_TOL,
    max_steps: int | None = None,
    matmat: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues (descending) and eigenvectors of a symmetric ``dim x dim``
    operator, by Lanczos with full reorthogonalisation (no restart).

    Each step costs one ``matvec`` and ``O(dim * steps)`` for the reorthogonalisation; the
    basis holds ``steps x dim`` floats. Every ``~5 %`` more steps (every step near the end)
    the Ritz pairs of the tridiagonal matrix are checked (LAPACK ``stemr``); when all ``k``
    residual estimates ``|beta_m s_m|`` are at most ``tol * ||M||_2`` (``||M||_2`` estimated
    by the extreme Ritz values), the residuals are recomputed explicitly (one ``matmat`` of
    ``k`` columns) and the pairs returned only if ``||M y - theta y|| <= tol * ||M||_2``
    holds for each.

    Accuracy: the eigenvalues are the largest *algebraic* ones (negative ones included, in
    order); an eigenvector with residual ``r`` is within angle ``r / gap`` of the exact one,
    and the span of the ``k`` within ``||R||_F / (theta_k - lambda_{k+1})`` in
    ``||sin Theta||_F`` (Davis-Kahan); the dense LAPACK solver has the same conditioning
    with ``tol ~ 1e-16``. The start vector is drawn from :data:`LANCZOS_START_SEED`, so the
    same matrix always gives the same pairs. Like every single-vector Krylov method it finds
    one copy of an exactly repeated eigenvalue: use it where ties have probability zero
    (matrices with continuous additive noise).

    Raises:
        EigensolverNotConverged: after ``max_steps`` (default: :data:`LANCZOS_BASIS_BYTES`
            of basis, at most ``dim - 1``) or on a breakdown (an invariant subspace found).
    """
    if not 1 <= k < dim:
        raise ConfigurationError(f"the Lanczos solver needs 1 <= k < dim, got k={k}, dim={dim}")
    if max_steps is None:
        max_steps = LANCZOS_BASIS_BYTES // (8 * dim)
    max_steps = max(k + 1, min(int(max_steps), dim - 1))
    basis = _KrylovBasis(dim, max_steps + 1)
    start = np.random.default_rng(LANCZOS_START_SEED).standard_normal(dim)
    q = basis.append(start / np.linalg.norm(start))
    previous = q
    alpha = np.empty(max_steps)
    beta = np.empty(max_steps)
    next_check = k + 1
    scale = 0.0
    for j in range(max_steps):
        w = np.asarray(matvec(q), dtype=np.float64).reshape(dim)
        beta_previous = beta[j - 1] if j else 0.0
        alpha[j], norm = _orthogonalise(w, q, previous, beta_previous, basis)
        steps = j + 1
        scale = max(scale, abs(alpha[j]) + norm + beta_previous)
        if norm <= dim * np.finfo(float).eps * scale:
            raise EigensolverNotConverged(
                f"Lanczos breakdown after {steps} steps: an invariant subspace of dimension "
                f"{steps} was found (exactly repeated or isolated eigenvalues)"
            )
        beta[j] = norm
        previous, q = q, basis.append(w / norm)
        if steps < next_check and steps < max_steps:
            continue
        next_check = steps + max(1, steps // 20)
        values, S = _scipy_linalg().eigh_tridiagonal(
            alpha[:steps], beta[: steps - 1], select="i", select_range=(steps - k, steps - 1),
            check_finite=False, lapack_driver="stemr",
        )
        lowest = _scipy_linalg().eigh_tridiagonal(
            alpha[:steps], beta[: steps - 1], eigvals_only=True, select="i",
            select_range=(0, 0), check_finite=False,
        )
        norm_estimate = max(abs(values[-1]), abs(lowest[0]), np.finfo(float).tiny)
        estimates = np.abs(beta[j] * S[-1])
        if estimates.max() > tol * norm_estimate:
            if estimates.max() <= CHECK_EVERY_STEP_WITHIN * tol * norm_estimate:
                next_check = steps + 1  # close: a check costs far less than a step
            continue
        vectors = basis.combine(S)
        product = matmat(vectors) if matmat is not None else np.column_stack(
            [matvec(v) for v in vectors.T]
        )
        residuals = np.linalg.norm(product - vectors * values, axis=0)
        if residuals.max() <= tol * norm_estimate:
            logger.debug(
                "Lanczos: top-%d of d=%d in %d steps (max relative residual %.2g)",
                k, dim, steps, residuals.max() / norm_estimate,
            )
            return values[::-1].copy(), vectors[:, ::-1].copy()
    raise EigensolverNotConverged(
        f"Lanczos did not reach relative residual {tol:g} for the top {k} eigenpairs in "
        f"{max_steps} steps (d={dim})"
    )


@dataclass(frozen=True, eq=False)
class GramPlusSymmetric:
    """The symmetric ``d x d`` matrix ``M = X^T X / divisor + S`` kept in factored form.

    ``X`` (``n x d``) is read, not copied (unless it must become float64); ``S`` (``d x d``,
    symmetric with both triangles filled) is additive noise with a continuous law (e.g. the
    Gaussian of the Analyze Gauss family), or ``None``. :meth:`dense` forms ``M``
    (``O(n d^2)``, ``2 d^2`` memory); :meth:`top_eigenpairs` finds its top-``k`` eigenpairs
    without forming it when that is faster (:func:`eigensolver_for`). With such noise the
    eigenvalues of ``M`` are simple with probability one, which the Lanczos solver relies on
    (it finds one copy of an exactly repeated eigenvalue): do not pass a structured ``S``.

    Attributes:
        X: the ``n x d`` factor.
        divisor: ``X^T X`` is divided by it (e.g. 1 or ``n``).
        symmetric: ``S`` or ``None``.
    """

    X: np.ndarray
    divisor: float = 1.0
    symmetric: np.ndarray | None = None

    def __post_init__(self) -> None:
        # float64 once, not converted again at every product (no copy if it already is)
        object.__setattr__(self, "X", np.asarray(self.X, dtype=np.float64))
        d = self.X.shape[1]
        if self.symmetric is None:
            return
        if self.symmetric.shape != (d, d):
            raise ConfigurationError(
                f"the symmetric term must be {d} x {d} like X^T X, got shape "
                f"{self.symmetric.shape}"
            )
        # C order, so that its transpose is the Fortran array dsymv reads without a copy.
        object.__setattr__(
            self, "symmetric", np.ascontiguousarray(self.symmetric, dtype=np.float64)
        )

    @property
    def dim(self) -> int:
        """``d``."""
        return int(self.X.shape[1])

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """``M v`` in ``O(n d + d^2)``; ``S v`` reads only ``S``'s upper triangle (``dsymv``)."""
        out = gram_product(self.X, v)
        if self.divisor != 1.0:
            out /= self.divisor
        if self.symmetric is not None:
            # S.T is Fortran-ordered; its lower triangle is S's upper triangle.
            out += _scipy_linalg().blas.dsymv(1.0, self.symmetric.T, v, lower=1)
        return out

    def matmat(self, V: np.ndarray) -> np.ndarray:
        """``M V`` for a ``d x m`` block."""
        out = gram_product(self.X, V)
        if self.divisor != 1.0:
            out /= self.divisor
        if self.symmetric is not None:
            out += self.symmetric @ V
        return out

    def dense(self) -> np.ndarray:
        """``M`` as a ``d x d`` array (exactly ``X.T @ X / divisor + S``)."""
        M = self.X.T @ self.X
        if self.divisor != 1.0:
            M /= self.divisor
        if self.symmetric is not None:
            M += self.symmetric
        return M

    def trace(self) -> float:
        """``trace(M)`` in ``O(n d)``, without forming ``M``."""
        total = float(np.einsum("ij,ij->", self.X, self.X)) / self.divisor
        return total + (0.0 if self.symmetric is None else float(np.trace(self.symmetric)))

    def top_eigenpairs(self, k: int, method: str = AUTO) -> tuple[np.ndarray, np.ndarray]:
        """See :func:`gram_top_eigenpairs`."""
        return gram_top_eigenpairs(self, k, method)


def eigensolver_for(samples: int, dim: int, k: int, has_symmetric: bool) -> str:
    """The solver :func:`gram_top_eigenpairs` uses for ``method="auto"`` (the rule).

    * no ``S`` and ``n < d`` (and ``k <= n``): the thin SVD of ``X`` (``O(n^2 d)``; the
      singular values squared over ``divisor`` are the eigenvalues);
    * ``S`` present, ``d >= LANCZOS_MIN_DIM = 1000`` and ``k <= 5 (d / 1000)^2``: Lanczos
      on ``v -> X^T (X v) / divisor + S v`` (``O(steps (d^2 + n d))``; ``M`` is never
      formed);
    * otherwise the dense ``eigh`` of the formed ``M`` (``O(n d^2 + d^3)``), e.g. small
      ``d``, large ``k``, or no ``S`` with ``n >= d``.
    """
    if not has_symmetric and samples < dim and k <= samples:
        return THIN_SVD
    small_k = k * 1_000_000 <= LANCZOS_K_PER_MILLION * dim**2
    if has_symmetric and dim >= LANCZOS_MIN_DIM and small_k:
        return LANCZOS
    return DENSE


def gram_top_eigenpairs(
    matrix: GramPlusSymmetric, k: int, method: str = AUTO
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues (descending, negative ones kept) and eigenvectors of
    ``M = X^T X / divisor + S``.

    ``method``: ``"auto"`` (the rule of :func:`eigensolver_for`), ``"dense"`` (LAPACK
    ``eigh`` of the formed ``M``), ``"lanczos"`` (:func:`lanczos_top_eigenpairs`, tolerance
    :data:`LANCZOS_TOL`; if it does not converge a warning is logged and the dense solver
    used) or ``"thin-svd"`` (only without ``S``). All return the same pairs up to the
    solvers' accuracy and the eigenvectors' signs.
    """
    n, d = matrix.X.shape
    if method not in EIGENSOLVERS:
        raise ConfigurationError(f"unknown eigensolver {method!r}; choose one of {EIGENSOLVERS}")
    if not 1 <= k <= d:
        raise ConfigurationError(f"need 1 <= k <= d = {d} eigenpairs, got k={k}")
    has_symmetric = matrix.symmetric is not None
    if method == AUTO:
        method = eigensolver_for(n, d, k, has_symmetric)
    if method == THIN_SVD:
        if has_symmetric or k > min(n, d):
            raise ConfigurationError(
                f"the thin SVD of X gives the top-k eigenpairs of X^T X only without a "
                f"symmetric term and for k <= min(n, d) = {min(n, d)} (got k={k}, "
                f"symmetric term: {has_symmetric}); use method='dense' or 'lanczos'"
            )
        return _thin_svd_eigenpairs(matrix.X, matrix.divisor, k)
    if method == LANCZOS and k < d:
        try:
            return lanczos_top_eigenpairs(matrix.matvec, d, k, matmat=matrix.matmat)
        except EigensolverNotConverged as err:
            logger.warning(
                "%s; using the dense eigendecomposition instead (O(d^3) time, about 3 d^2 "
                "floats of memory for d=%d)", err, d,
            )
    return top_eigenpairs(matrix.dense(), k)


def _thin_svd_eigenpairs(X: np.ndarray, divisor: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` eigenpairs of ``X^T X / divisor`` from the thin SVD of ``X``."""
    try:
        _, s, Vt = _scipy_linalg().svd(X, full_matrices=False, check_finite=False)
    except np.linalg.LinAlgError:  # gesdd rarely fails to converge; gesvd is slower, sturdier
        _, s, Vt = _scipy_linalg().svd(
            X, full_matrices=False, check_finite=False, lapack_driver="gesvd"
        )
    return s[:k] ** 2 / divisor, Vt[:k].T.copy()


def random_subspaces(
    rng: np.random.Generator, dim: int, count: int, subspace_dim: int
) -> list[np.ndarray]:
    """``count`` orthonormal ``dim x subspace_dim`` bases of independent uniformly random
    subspaces (orthonormalised Gaussian matrices)."""
    return [thin_qr(rng.standard_normal((dim, subspace_dim))) for _ in range(count)]


def triangle_size(dim: int) -> int:
    """Entries of the upper triangle (diagonal included) of a ``dim x dim`` matrix."""
    return dim * (dim + 1) // 2


def unpack_symmetric(packed: np.ndarray, dim: int) -> np.ndarray:
    """The symmetric ``dim x dim`` matrix whose upper triangle (row-major) is ``packed``."""
    rows, cols = np.triu_indices(dim)
    out = np.zeros((dim, dim))
    out[rows, cols] = packed
    out[cols, rows] = packed
    return out


def leading_components(product: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` leading components of an oversampled run (``k' > k`` columns per power
    step, ``s_hat = d``): the top ``k`` left singular vectors of its last power step's
    aggregate ``K`` (``d x k'``: the decoded ``sum_i X_i^T X_i Q`` plus noise, or it over
    ``n``), the directions of ``K``'s column space (the span of the server's final basis
    ``thinQR(K)``) the last step stretched most, each with its largest entry positive.

    Privacy: post-processing of released aggregates, no cost and no change to the run's
    guarantee (a power step of ``k'`` orthonormal columns has the same sensitivity
    ``sqrt(2) C^2`` as one of ``k``; each site's ``T`` or ``T + 1`` releases are
    calibrated as for ``k``). Extra columns only make each step's statistic longer; a
    coordinator asking for more of them gains nothing a site has not bounded (its answer
    size is capped by :class:`~fedpca.algorithms.site_limits.SiteLimits`).
    """
    product = np.asarray(product, dtype=np.float64)
    if product.ndim != 2 or not 1 <= k <= product.shape[1]:
        raise ConfigurationError(
            f"leading_components takes a d x k' power-step aggregate and 1 <= k <= k', got "
            f"shape {product.shape} and k={k}")
    return _signed(np.linalg.svd(product, full_matrices=False)[0][:, :k])


def ritz_components(basis: np.ndarray, product: np.ndarray, k: int) -> np.ndarray:
    """The top ``k`` Ritz vectors of the span of a power step's ``basis`` ``Q`` (``d x k'``
    orthonormal) from that step's aggregate ``K = A Q + E`` (``d x k'``): the eigenvectors
    of the symmetric part of ``Q^T K`` (``k' x k'``, the noisy Rayleigh quotient of ``A`` on
    the span), largest first, mapped back to ``Q W``, each with its largest entry positive.
    Unlike :func:`leading_components`, the components stay within the span the step was
    taken in: the step's ``d``-dimensional noise enters only through its ``k' x k'``
    projection. For a run whose last basis already spans the sought directions (a public
    start shifted along released frequencies, :mod:`fedpca.algorithms.shifted_start`).

    Privacy: post-processing of the released aggregate and of a basis the server sent, no
    cost and no change to the run's guarantee.
    """
    basis = np.asarray(basis, dtype=np.float64)
    product = np.asarray(product, dtype=np.float64)
    if (basis.ndim != 2 or product.shape != basis.shape
            or not 1 <= k <= basis.shape[1]):
        raise ConfigurationError(
            f"ritz_components takes a d x k' basis, the d x k' aggregate of its power step "
            f"and 1 <= k <= k', got shapes {basis.shape}, {product.shape} and k={k}")
    quotient = basis.T @ product
    return _signed(basis @ top_eigenvectors((quotient + quotient.T) / 2, k))


def _signed(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (columns), each with its largest entry positive."""
    signs = np.sign(vectors[np.abs(vectors).argmax(axis=0), np.arange(vectors.shape[1])])
    return vectors * np.where(signs == 0, 1.0, signs)

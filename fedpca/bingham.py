"""Bingham distributions on the sphere and on the Stiefel manifold, and how to sample them.

* Vector Bingham ``p(v) ~ exp(v^T B v)`` on the unit sphere of ``R^q``: exact rejection
  sampler of Kent, Ganeiber & Mardia, "A new unified approach for the simulation of a wide
  class of directional distributions", JCGS 27(2), 2018 (arXiv:1310.8110, 2013), Sec. 4,
  with an angular central Gaussian (ACG) envelope. In the eigenbasis of ``B`` write
  ``exp(v^T B v) ~ exp(-t)``, ``t = v^T A v``, ``A = s I - B`` with ``s`` the largest
  eigenvalue of ``B``. With ``Omega = I + 2 A / b``, ``exp(-t) <= M (v^T Omega v)^(-q/2)``
  for every ``t > -b/2``, ``M = exp(-(q - b)/2) (q/b)^(q/2)``; so an ACG proposal
  ``v = y / ||y||``, ``y ~ N(0, Omega^-1)``, accepted with probability
  ``exp(-t) (v^T Omega v)^(q/2) / M``, is an exact draw, for any ``b > 0``. The acceptance
  rate is best for the ``b`` solving ``sum_i 1 / (b + 2 a_i) = 1`` (``a_i`` the
  eigenvalues of ``A``). Proposals are drawn and tested in vectorised batches.
* Matrix Bingham ``p(V) ~ exp(tr(V^T B V))`` on the ``d x k`` orthonormal frames: Gibbs
  sampler of Hoff, "Simulation of the matrix Bingham-von Mises-Fisher distribution", JCGS
  18(2), 2009, Sec. 3. Column ``j`` given the others (``W``, ``d x m``, ``m = k - 1``) is a
  vector Bingham on the unit sphere of the orthogonal complement of ``W``: with ``N`` an
  orthonormal basis of it, ``v_j = N z`` and ``z ~ Bingham(N^T B N)``. Every column is drawn
  *exactly* from that conditional by the rejection sampler above, so each sweep leaves the
  matrix Bingham invariant; the chain's law converges to it and is not it after finitely
  many sweeps.

How a conditional draw stays cheap (``O(d k^2)`` work and a fixed number of small dense
factorisations per column; no ``d x d`` matrix): in the eigenbasis of ``B`` (descending
order) ``N`` is the last ``q = d - m`` columns of the Householder factor ``Q = I - Y T Y^T``
of ``W``. ``N^T Omega N`` is then the diagonal of ``Omega`` on the trailing coordinates (all
``>= 1``) plus a rank ``2m`` term, which gives the proposals' square-root covariance in
``O(q m^2)``. The shift ``s`` must be the top eigenvalue ``theta_1`` of ``N^T B N`` or a
little above (each unit above costs a factor ``e`` of acceptance): it is a Rayleigh-Ritz
estimate on a ``2m + 2`` dimensional subspace of the complement (shift-and-invert
directions ``(Lambda - mu)^-1 W`` at the column's previous ``theta_1``, the current column,
the leading coordinates), plus ``THETA_TOLERANCE / 2``, checked to lie above ``theta_1``
without forming ``N^T B N``: the number of its eigenvalues above ``t`` is
``#{lambda_i > t} + n_+(W^T (t - Lambda)^-1 W) - m`` (inertia of the bordered matrix
``[[Lambda - t, W], [W^T, 0]]``). If the check fails, ``theta_1`` is bracketed with the same
count, at many ``t`` at once. The optimal ``b`` uses the conditional spectrum approximated
by ``theta_1`` and the interlacing bounds ``lambda_{i+m}``; ``b`` affects the acceptance
rate, never the law. The envelope is checked to be positive definite before every draw.

No privacy here: :mod:`fedpca.algorithms.ppca` uses these samplers for the exponential
mechanism. The chain's diagnostics are computed from ``B``: they describe private data.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.validation import require_positive_int

logger = logging.getLogger(__name__)

#: How far above ``theta_1`` (in units of the exponent) the shift may be: at most this
#: fraction of the acceptance rate, about 10 %, is lost; the law is unaffected.
THETA_TOLERANCE = 0.1
#: Points at which the eigenvalue count is evaluated in one vectorised bracketing pass.
SEARCH_POINTS = 24
#: Proposals per batch, as a multiple of the expected number needed per accepted draw.
BATCH_FACTOR = 1.2
#: Largest batch of proposals drawn at once.
MAX_BATCH = 4096
#: Relative accuracy of the envelope parameter ``b`` (it only affects the acceptance rate).
B_TOLERANCE = 1e-4
#: Directions of the Ritz subspace whose Gram eigenvalue is below this fraction of the
#: largest are dropped (they are numerically inside ``W``).
RITZ_RANK_TOLERANCE = 1e-8
#: Smallest eigenvalue of the normalised ``N^T Omega N`` accepted as positive definite.
PD_TOLERANCE = 1e-12
#: Sweeps after burn-in below which the mixing diagnostic uses the second half of the trace.
MIN_DIAGNOSTIC_SWEEPS = 20


def envelope_parameter(gaps: np.ndarray, start: float | None = None) -> float:
    """Kent et al.'s optimal ``b``: the root of ``sum_i 1 / (b + 2 g_i) = 1``.

    ``gaps`` are the eigenvalues ``g_i >= 0`` of ``A = s I - B`` with ``min g = 0``; the root
    lies in ``[1, len(gaps)]`` (1 when one direction dominates, ``q`` for the uniform
    distribution). Safeguarded Newton from ``start`` (or 1), to ``B_TOLERANCE``.
    """
    gaps = np.asarray(gaps, dtype=np.float64)
    lo, hi = 1.0, float(gaps.size)
    b = lo if start is None else min(max(float(start), lo), hi)
    while True:
        r = 1.0 / (b + 2.0 * gaps)
        excess = r.sum() - 1.0
        if excess > 0:
            lo = b
        else:
            hi = b
        new = b + excess / (r @ r)
        if not lo <= new <= hi:
            new = 0.5 * (lo + hi)
        if abs(new - b) <= B_TOLERANCE * b or hi - lo <= B_TOLERANCE * lo:
            return new
        b = new


@dataclass(frozen=True)
class _Envelope:
    """The ACG envelope ``N(0, Omega^-1)`` of one (conditional) vector Bingham on ``R^q``.

    ``Omega = D^(1/2) (I + U diag(phi) U^T) D^(1/2)`` with ``D`` diagonal and ``U``
    orthonormal; proposals ``z = D^(-1/2) (I + U diag(coef) U^T) xi``, ``xi ~ N(0, I)``,
    ``coef = (1 + phi)^(-1/2) - 1``, have covariance ``Omega^-1`` and ``z^T Omega z = ||xi||^2``.
    """

    shift: float
    b: float
    inv_sqrt_diag: np.ndarray
    basis: np.ndarray
    coef: np.ndarray

    @property
    def dim(self) -> int:
        """``q``: the dimension the proposals live in."""
        return int(self.inv_sqrt_diag.size)

    @property
    def log_bound(self) -> float:
        """``log M = -(q - b)/2 + (q/2) log(q/b)``."""
        q = self.dim
        return -(q - self.b) / 2 + q / 2 * math.log(q / self.b)

    def propose(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` proposals ``z`` (columns of a ``q x count`` array) and their ``||xi||^2``."""
        xi = rng.standard_normal((self.dim, count))
        energy = np.einsum("ij,ij->j", xi, xi)
        if self.coef.size:
            xi += self.basis @ (self.coef[:, None] * (self.basis.T @ xi))
        return xi * self.inv_sqrt_diag[:, None], energy


class _Complement:
    """The orthogonal complement of orthonormal ``W`` (``d x m``): ``Q[:, m:]``, where
    ``Q = I - Y T Y^T`` is ``W``'s Householder factor in compact WY form (``Q^T W = [R; 0]``)."""

    def __init__(self, W: np.ndarray) -> None:
        self.m = m = W.shape[1]
        if m == 0:
            self.Y = self.T = np.zeros((W.shape[0], 0))
            return
        self.Y, self.T, _ = lapack.dgeqrt(m, W)
        # Above the diagonal dgeqrt leaves R, and Y's unit diagonal is implicit.
        self.Y[:m] = np.tril(self.Y[:m], -1) + np.eye(m)

    def embed(self, z: np.ndarray) -> np.ndarray:
        """``Q[:, m:] z`` for the columns of ``z`` (``(d - m) x count``)."""
        m = self.m
        if m == 0:
            return z
        x = -self.Y @ (self.T @ (self.Y[m:].T @ z))
        x[m:] += z
        return x

    def envelope(self, lam: np.ndarray, shift: float, b: float) -> _Envelope | None:
        """The ACG envelope for ``exp(x^T diag(lam) x)`` on the complement with shift ``s``
        and parameter ``b``, or None when ``N^T Omega N`` is not positive definite."""
        m = self.m
        omega = 1.0 + 2.0 * (shift - lam) / b
        diag = omega[m:]
        if diag.min() <= 0:
            return None
        root = np.sqrt(diag)
        if m == 0:
            return _Envelope(shift, b, 1.0 / root, np.zeros((diag.size, 0)), np.zeros(0))
        # Trailing block of Q^T diag(omega) Q: diag + [Y_H, (omega Y)_H] S [Y_H, (omega Y)_H]^T.
        Y, T = self.Y, self.T
        S = np.zeros((2 * m, 2 * m))
        S[:m, :m] = T.T @ (Y.T @ (omega[:, None] * Y)) @ T
        S[:m, m:] = -T.T
        S[m:, :m] = -T
        K = np.empty((diag.size, 2 * m))
        K[:, :m] = Y[m:] / root[:, None]
        K[:, m:] = Y[m:] * root[:, None]
        rank = min(K.shape)
        packed, tau, _, _ = lapack.dgeqrf(K)
        basis, _, _ = lapack.dorgqr(packed[:, :rank], tau[:rank])
        R = basis.T @ K
        phi, E, _ = lapack.dsyev(R @ S @ R.T)
        if 1.0 + phi[0] <= PD_TOLERANCE:
            return None
        return _Envelope(shift, b, 1.0 / root, basis @ E, 1.0 / np.sqrt(1.0 + phi) - 1.0)


def _count_above(lam: np.ndarray, W: np.ndarray, points: np.ndarray) -> np.ndarray:
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


def _bracket_top(lam: np.ndarray, W: np.ndarray, lo: float, hi: float, tol: float) -> float:
    """An upper bound within ``tol`` of ``theta_1``, the top eigenvalue of ``diag(lam)``
    compressed to ``W``'s complement, given ``lo <= theta_1 <= hi``."""
    while hi - lo > tol:
        points = np.linspace(lo, hi, SEARCH_POINTS + 2)[1:-1]
        counts = _count_above(lam, W, points)
        above = points[counts >= 1]
        below = points[counts == 0]
        if not (above.size or below.size):  # every point hit an eigenvalue of B
            break
        if above.size:
            lo = float(above.max())
        if below.size:
            hi = float(below.min())
    return hi


def _ritz_top(
    lam: np.ndarray, W: np.ndarray, current: np.ndarray, mu: float, leading: np.ndarray
) -> float:
    """Rayleigh-Ritz lower bound on ``theta_1`` from ``(Lambda - mu)^-1 W``, the current
    column and ``leading`` (``d x r``, the leading coordinate vectors), all projected onto
    ``W``'s complement."""
    shifted = lam - mu
    shifted[shifted == 0.0] = THETA_TOLERANCE
    Z = np.hstack([W / shifted[:, None], current[:, None], leading])
    Z -= W @ (W.T @ Z)
    norms = np.sqrt(np.einsum("ij,ij->j", Z, Z))
    Z /= np.where(norms > 0, norms, 1.0)
    gram, F, _ = lapack.dsyev(Z.T @ Z)
    keep = gram > RITZ_RANK_TOLERANCE * gram[-1]
    basis = Z @ (F[:, keep] / np.sqrt(gram[keep]))
    ritz, _, _ = lapack.dsyev(basis.T @ (lam[:, None] * basis), compute_v=0)
    return float(ritz[-1])


class _ConditionalSampler:
    """Exact draws from ``exp(x^T diag(lam) x)`` on the unit sphere of ``W``'s complement.

    ``lam`` is in descending order and every ``W`` has ``m`` orthonormal columns. Per-column
    warm starts (previous shift and ``b``) and the running acceptance rate only affect speed.
    """

    def __init__(self, lam: np.ndarray, m: int) -> None:
        self.lam = lam
        self.m = m
        self.tail = lam[m + 1:]
        self.leading = np.eye(lam.size, m + 1)
        self.tol = max(THETA_TOLERANCE, 1e-12 * float(np.abs(lam).max()))
        self.proposals = 0
        self.draws = 0
        self._shift: dict[int, float] = {}
        self._b: dict[int, float] = {}

    def _envelope(self, complement: _Complement, shift: float, key: int) -> _Envelope | None:
        b = envelope_parameter(np.concatenate([[0.0], shift - self.tail]), self._b.get(key))
        self._b[key] = b
        return complement.envelope(self.lam, shift, b)

    def envelope(
        self, W: np.ndarray, current: np.ndarray | None = None, key: int = 0
    ) -> tuple[_Complement, _Envelope]:
        """The complement of ``W`` and a valid envelope for the conditional draw."""
        lam, m = self.lam, self.m
        complement = _Complement(W)
        if m == 0:
            return complement, self._envelope(complement, float(lam[0]), key)
        if current is None:
            current = complement.embed(np.eye(lam.size - m, 1))[:, 0]
        floor = float(lam[m])  # theta_1 >= lambda_{m+1} by interlacing
        mu = self._shift.get(key, max(floor, float(lam @ (current * current))) + self.tol)
        lower = max(floor, _ritz_top(lam, W, current, mu, self.leading))
        shift = lower + self.tol / 2
        if _count_above(lam, W, np.array([shift]))[0] != 0:  # not above theta_1: bracket it
            logger.debug("Bingham: Ritz estimate %.8g too low; bracketing theta_1", lower)
            shift = _bracket_top(lam, W, lower, float(lam[0]), self.tol)
        envelope = self._envelope(complement, shift, key)
        if envelope is None:
            raise FloatingPointError(
                "Bingham sampler: no positive definite envelope above the conditional top "
                f"eigenvalue (shift {shift:.8g}); B is too ill-conditioned to sample"
            )
        self._shift[key] = shift
        return complement, envelope

    def draw(
        self,
        complement: _Complement,
        envelope: _Envelope,
        rng: np.random.Generator,
        count: int = 1,
    ) -> np.ndarray:
        """``count`` exact draws as the columns of a ``d x count`` array."""
        out = []
        need = count
        q = envelope.dim
        while need:
            expected = (self.proposals + 2.0) / (self.draws + 1.0)
            batch = min(MAX_BATCH, math.ceil(BATCH_FACTOR * need * expected))
            z, xi_energy = envelope.propose(rng, batch)
            x = complement.embed(z)
            norm2 = np.einsum("ij,ij->j", z, z)
            t = envelope.shift - (self.lam @ (x * x)) / norm2
            log_ratio = q / 2 * np.log(xi_energy / norm2) - t - envelope.log_bound
            hits = np.flatnonzero(np.log(rng.random(batch)) < log_ratio)[:need]
            self.proposals += int(hits[-1]) + 1 if hits.size == need else batch
            self.draws += hits.size
            out.append(x[:, hits] / np.sqrt(norm2[hits]))
            need -= hits.size
        return out[0] if len(out) == 1 else np.hstack(out)


def _eigen(B: object) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors of a finite symmetric matrix ``B``."""
    arr = np.asarray(B, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise InvalidDataError(f"B must be a square d x d matrix, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InvalidDataError("B contains NaN or inf; the Bingham density needs finite B")
    asym = float(np.abs(arr - arr.T).max())
    if asym > 1e-10 * max(1.0, float(np.abs(arr).max())):
        raise InvalidDataError(
            f"B must be symmetric (max |B - B^T| = {asym:.3g}); pass (B + B.T) / 2"
        )
    lam, vecs = np.linalg.eigh((arr + arr.T) / 2)
    return lam[::-1].copy(), vecs[:, ::-1].copy()


def _frame(matrix: object, d: int, name: str) -> np.ndarray:
    """``matrix`` as a finite ``d x m`` float array with orthonormal columns, or raise."""
    arr = np.asarray(matrix, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != d or not np.isfinite(arr).all():
        raise ConfigurationError(
            f"{name} must be a finite {d} x m matrix, got shape {arr.shape}"
        )
    if not np.allclose(arr.T @ arr, np.eye(arr.shape[1]), atol=1e-8):
        raise ConfigurationError(
            f"{name} must have orthonormal columns; orthonormalise it first (thin_qr)"
        )
    return arr


def sample_vector_bingham(
    B: np.ndarray,
    size: int | None = None,
    rng: np.random.Generator | None = None,
    orthogonal_to: np.ndarray | None = None,
) -> np.ndarray:
    """Exact draws from the vector Bingham ``p(v) ~ exp(v^T B v)`` on the unit sphere.

    Kent, Ganeiber & Mardia's rejection sampler with the optimal ACG envelope. With
    ``orthogonal_to`` (``W``), the sphere is that of ``W``'s orthogonal complement: the
    conditional a Gibbs sweep draws each column from.

    Args:
        B: symmetric ``d x d`` matrix.
        size: number of draws; ``None`` returns one vector of shape ``(d,)``.
        rng: the random generator (``None``: a fresh OS-seeded one).
        orthogonal_to: ``d x m`` orthonormal columns (``m < d``) the draws must be
            orthogonal to.

    Returns:
        ``(size, d)`` unit vectors, or ``(d,)`` when ``size`` is None; signs are uniform.
    """
    lam, vecs = _eigen(B)
    d = lam.size
    rng = np.random.default_rng() if rng is None else rng
    count = 1 if size is None else require_positive_int(size, "size")
    W = np.zeros((d, 0)) if orthogonal_to is None else _frame(orthogonal_to, d, "orthogonal_to")
    if W.shape[1] >= d:
        raise ConfigurationError(
            f"orthogonal_to has {W.shape[1]} columns: its complement in R^{d} is empty"
        )
    sampler = _ConditionalSampler(lam, W.shape[1])
    complement, envelope = sampler.envelope(vecs.T @ W)
    draws = (vecs @ sampler.draw(complement, envelope, rng, count)).T
    return draws[0] if size is None else draws


def integrated_autocorrelation_time(trace: np.ndarray) -> float:
    """Integrated autocorrelation time ``1 + 2 sum_t rho_t`` of a scalar chain.

    Geyer's initial positive sequence estimator (sums of adjacent autocorrelation pairs
    while positive). NaN for a constant trace or one shorter than 4.
    """
    x = np.asarray(trace, dtype=np.float64)
    n = x.size
    if n < 4:
        return float("nan")
    x = x - x.mean()
    spectrum = np.fft.rfft(x, 2 * n)
    acov = np.fft.irfft(spectrum * spectrum.conj())[:n]
    if acov[0] <= 1e-14 * max(1.0, float(np.abs(trace).max()) ** 2) * n:
        return float("nan")
    pairs = (acov / acov[0])[: n - n % 2].reshape(-1, 2).sum(axis=1)
    negative = np.flatnonzero(pairs <= 0)
    pairs = pairs[: negative[0] if negative.size else pairs.size]
    return float(max(1.0, -1.0 + 2.0 * pairs.sum()))


@dataclass(frozen=True)
class ChainDiagnostics:
    """How well a Gibbs run mixed. Computed from ``B``: NOT private when ``B`` is.

    Attributes:
        energy: ``tr(V^T B V)`` after every sweep, burn-in included.
        burn_in: sweeps before the first kept frame.
        thin: sweeps between kept frames.
        window_start: first sweep of the window the autocorrelation is measured on: the
            sweeps after burn-in, or the second half of the trace when fewer than
            ``MIN_DIAGNOSTIC_SWEEPS`` follow the burn-in.
        autocorrelation_time: integrated autocorrelation time of ``energy`` in that window
            (NaN if it is constant or shorter than 4 sweeps).
        effective_sample_size: window length divided by the autocorrelation time.
        proposals_per_draw: mean ACG proposals per exact column draw (1 / acceptance rate).
    """

    energy: np.ndarray
    burn_in: int
    thin: int
    window_start: int
    autocorrelation_time: float
    effective_sample_size: float
    proposals_per_draw: float


@dataclass(frozen=True)
class BinghamChain:
    """Frames from a matrix Bingham Gibbs run and their mixing diagnostics.

    Attributes:
        samples: ``(n_samples, d, k)`` orthonormal frames, one every ``thin`` sweeps after
            ``burn_in`` sweeps; ``samples[-1]`` is the state after the last sweep.
        diagnostics: see :class:`ChainDiagnostics`.
    """

    samples: np.ndarray
    diagnostics: ChainDiagnostics


def _diagnostics(
    energy: np.ndarray, burn_in: int, thin: int, sampler: _ConditionalSampler
) -> ChainDiagnostics:
    start = burn_in if energy.size - burn_in >= MIN_DIAGNOSTIC_SWEEPS else energy.size // 2
    tau = integrated_autocorrelation_time(energy[start:])
    return ChainDiagnostics(
        energy=energy,
        burn_in=burn_in,
        thin=thin,
        window_start=start,
        autocorrelation_time=tau,
        effective_sample_size=(energy.size - start) / tau,
        proposals_per_draw=sampler.proposals / max(sampler.draws, 1),
    )


def _starting_frame(
    initial: np.ndarray | None, vecs: np.ndarray, k: int, rng: np.random.Generator
) -> np.ndarray:
    """The first state in ``B``'s eigenbasis: ``initial`` or a uniform (Haar) frame."""
    d = vecs.shape[0]
    if initial is None:
        Q, R = np.linalg.qr(rng.standard_normal((d, k)))
        return Q * np.sign(np.diag(R))
    V = _frame(initial, d, "initial")
    if V.shape[1] != k:
        raise ConfigurationError(f"initial has {V.shape[1]} columns, expected k={k}")
    return vecs.T @ V


def sample_matrix_bingham(
    B: np.ndarray,
    k: int,
    n_samples: int = 1,
    burn_in: int = 100,
    thin: int = 1,
    initial: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> BinghamChain:
    """Hoff's Gibbs sampler for the matrix Bingham ``p(V) ~ exp(tr(V^T B V))``.

    Each sweep redraws every column, in order, exactly from its conditional vector Bingham
    on the orthogonal complement of the other columns. The chain starts from ``initial`` or
    from a uniformly random frame (independent of ``B``); its law approaches the matrix
    Bingham as the sweeps grow but is not exactly it. With ``k = 1`` every sweep is an
    independent exact draw.

    Args:
        B: symmetric ``d x d`` matrix.
        k: columns of ``V`` (``1 <= k <= d``).
        n_samples: frames to keep.
        burn_in: sweeps before the first kept frame (>= 0).
        thin: sweeps between kept frames (>= 1).
        initial: a ``d x k`` orthonormal starting frame.
        rng: the random generator (``None``: a fresh OS-seeded one).

    Returns:
        A :class:`BinghamChain` with the kept frames and the mixing diagnostics.
    """
    lam, vecs = _eigen(B)
    d = lam.size
    k = require_positive_int(k, "k")
    if k > d:
        raise ConfigurationError(f"k={k} exceeds the dimension d={d}; choose k <= {d}")
    n_samples = require_positive_int(n_samples, "n_samples")
    burn_in = require_positive_int(burn_in, "burn_in", minimum=0)
    thin = require_positive_int(thin, "thin")
    rng = np.random.default_rng() if rng is None else rng
    V = _starting_frame(initial, vecs, k, rng)
    sampler = _ConditionalSampler(lam, k - 1)
    others = [[i for i in range(k) if i != j] for j in range(k)]
    sweeps = burn_in + (n_samples - 1) * thin + 1
    energy = np.empty(sweeps)
    samples = np.empty((n_samples, d, k))
    for sweep in range(sweeps):
        for j in range(k):
            complement, envelope = sampler.envelope(V[:, others[j]], V[:, j], key=j)
            V[:, j] = sampler.draw(complement, envelope, rng)[:, 0]
        energy[sweep] = lam @ np.einsum("ij,ij->i", V, V)
        kept, offset = divmod(sweep - burn_in, thin)
        if sweep >= burn_in and offset == 0:
            samples[kept] = vecs @ V
    return BinghamChain(samples, _diagnostics(energy, burn_in, thin, sampler))

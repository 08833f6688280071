"""The vector Bingham distribution on the sphere, and its exact sampler.

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
  eigenvalues of ``A``). Its acceptance rate falls like ``1/sqrt(q)`` when ``B`` is
  concentrated (the ACG has Cauchy-like tails), so concentrated targets use a second exact
  envelope, the *polar chart* below. Proposals are drawn and tested in vectorised batches.
* The same on the unit sphere of the orthogonal complement of ``W`` (``d x m``,
  orthonormal; :func:`sample_vector_bingham`'s ``orthogonal_to``): with ``N`` an orthonormal
  basis of it, ``v = N z`` and ``z ~ Bingham(N^T B N)``. This is the conditional law of one
  column of a matrix Bingham given the others, which Hoff's Gibbs sampler
  (:mod:`fedpca.linalg.matrix_bingham`) draws every column from, exactly, through the
  :class:`_ConditionalSampler` here.

The polar chart (exact, for any pole). Take a unit pole ``p`` in the complement, close to
the top eigenvector of the conditional, and write ``v = v_1 p + w`` with ``w`` orthogonal
to ``[W, p]``, ``r^2 = ||w||^2 = 1 - v_1^2``. For a shift ``s``, ``v^T A v = a v_1^2 +
2 v_1 c^T w + w^T G w`` with ``a = s - p^T Lambda p``, ``c`` the part of ``-Lambda p``
orthogonal to ``[W, p]`` and ``G`` the compression of ``s I - Lambda`` to that complement.
If ``G > 0`` and ``kappa >= c^T G^-1 c``, ``kappa < a``, Young's inequality with
``eta = kappa / a`` gives ``v^T A v >= (1 - eta) w^T G w >= (1 - eta) lambda_min(G) r^2``.
The envelope has two parts: on the polar region ``r^2 <= rho`` (both hemispheres), the
density in ``w`` is ``exp(-v^T A v) / sqrt(1 - r^2) <= exp(-(1 - eta) w^T G w) /
sqrt(1 - rho)``, a Gaussian; on the rest it is at most ``exp(-(1 - eta) lambda_min rho)``
against the uniform law. Proposals come from the Gaussian (random hemisphere) or the
uniform law in proportion to the two envelope masses (``K1 = 2 pi^((q-1)/2)
det((1 - eta) G)^(-1/2) / sqrt(1 - rho)``, ``K2 = area(S^(q-1)) exp(-(1 - eta) lambda_min
rho)``, with ``lambda_min`` replaced by a lower bound) and are accepted with the ratio of the
density to that part of the envelope: every accepted draw is exact whatever ``p``, ``s``
and ``rho``, which only set the acceptance rate (about ``exp(-a) (1 - eta)^((q-1)/2)
sqrt(1 - rho)`` for a concentrated target). ``rho`` is chosen so that the cap carries about
1 % of the envelope mass. A chart whose expected acceptance rate is low is not used.

How a conditional draw stays cheap (``O(d k^2)`` work and a fixed number of small dense
factorisations per column; no ``d x d`` matrix), in the eigenbasis of ``B`` (descending):

* The pole: the column's previous pole, projected onto the new complement and refined by one
  Lanczos step (the top Ritz pair on ``span{p, P Lambda p}``); if the chart around it is
  expected to accept less than ``exp(LOG_MIN_LANCZOS_EFFICIENCY)``, a Rayleigh-Ritz estimate
  on a ``2m + 2`` dimensional subspace of the complement (shift-and-invert directions
  ``(Lambda - mu)^-1 W`` at the column's previous shift, the current column, the leading
  coordinates). Either value is a Rayleigh quotient, a lower bound on the conditional top
  eigenvalue ``theta_1`` (:mod:`fedpca.linalg.compressed_eigen`).
* The frame (:mod:`fedpca.linalg.householder_frame`): the Householder factor
  ``Q = I - Y T Y^T`` of ``[W, p]``; ``Q[:, m]`` is the pole and ``Q[:, m:]``,
  ``Q[:, m + 1:]`` span the complements of ``W`` and ``[W, p]``. The
  compression of any diagonal matrix to them is that diagonal on the trailing coordinates
  plus a rank ``2m + 2`` term, whose square-root inverse costs ``O(d m^2)``; its positive
  definiteness is checked before every draw. For the chart, ``kappa = ||c||^2 / (a lower
  bound on lambda_min(G))``, ``||c||^2`` from ``||Lambda p||^2``, ``(p^T Lambda p)^2`` and
  ``||W^T Lambda p||^2``.
* The ACG envelope (used when the chart is not valid or not worth it, e.g. in the first
  sweeps from a random frame or for a diffuse ``B``) uses the shift ``theta + tol/2`` and is
  valid whenever the compression of ``Omega`` is positive definite; if it is not, the shift
  is bracketed from ``theta_1`` with the eigenvalue count ``#{lambda_i > t} +
  n_+(W^T (t - Lambda)^-1 W) - m`` (inertia of ``[[Lambda - t, W], [W^T, 0]]``). The optimal
  ``b`` uses the interlacing bounds ``lambda_{i+m}``; ``b`` affects the acceptance rate,
  never the law. A chart that keeps rejecting hands the draw over to the ACG envelope at the
  same shift (the chart certified ``A > 0`` on the complement, so the ACG is valid there).

No privacy here: :mod:`fedpca.algorithms.ppca` uses these samplers for the exponential
mechanism.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from fedpca.dp.validation import require_positive_int
from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.linalg.compressed_eigen import bracket_top, lanczos_pair, ritz_pair
from fedpca.linalg.householder_frame import CompressionRoot, HouseholderFrame

logger = logging.getLogger(__name__)

#: How far above ``theta_1`` (in units of the exponent) the shift may be: at most this
#: fraction of the acceptance rate, about 10 %, is lost; the law is unaffected.
THETA_TOLERANCE = 0.1
#: Proposals per batch, as a multiple of the expected number needed per accepted draw.
BATCH_FACTOR = 1.2
#: Largest batch of proposals drawn at once.
MAX_BATCH = 4096
#: Relative accuracy of the envelope parameter ``b`` (it only affects the acceptance rate).
B_TOLERANCE = 1e-4
#: Relative cushion (of ``||Lambda p||^2``) added to the chart's ``||c||^2``, which is a
#: difference of nearly equal numbers: it keeps the bound above rounding.
KAPPA_CUSHION = 1e-13
#: Largest ``eta`` (the polar chart's loss from an inexact pole) for which the chart is used.
MAX_ETA = 0.5
#: Range of the chart's polar-region radius ``rho`` (a bound on ``||w||^2``).
RHO_MIN, RHO_MAX = 0.01, 0.95
#: ``rho`` is at least this multiple of (a bound on) the proposals' mean ``||w||^2`` ...
RHO_SPREAD = 2.0
#: ... and large enough that the cap's mass is about ``exp(-CAP_MARGIN)`` of the polar one.
CAP_MARGIN = math.log(100.0)
#: Largest share of the envelope mass the chart's uniform cap component may carry.
MAX_CAP_SHARE = 0.5
#: The chart is used when its expected acceptance rate (the Gaussian-limit estimate
#: ``exp(-a) (1 - eta)^(dims/2) sqrt(1 - rho) (1 - cap_share) (1 - E||w||^2 / rho)``) is at
#: least this; the ACG accepts about ``1/sqrt(q)`` in the same limit.
LOG_MIN_CHART_EFFICIENCY = math.log(0.2)
#: The chart around a pole refined by one Lanczos step from the column's previous pole is used
#: when its expected acceptance rate is at least this; otherwise the pole comes from the
#: (costlier) Rayleigh-Ritz estimate.
LOG_MIN_LANCZOS_EFFICIENCY = math.log(0.5)
#: Chart proposals per requested draw after which the ACG envelope takes over.
CHART_MAX_PROPOSALS = 64
#: Most draws of a column that skip the chart after it failed repeatedly (see envelope()).
MAX_CHART_BACKOFF = 16


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


def _no_envelope(shift: float) -> NoReturn:
    raise FloatingPointError(
        "Bingham sampler: no positive definite envelope above the conditional top eigenvalue "
        f"(shift {shift:.8g}); B is too ill-conditioned to sample"
    )


def _softplus(x: float) -> float:
    """``log(1 + e^x)`` without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


@dataclass(frozen=True)
class _ACGEnvelope:
    """Kent et al.'s angular central Gaussian envelope on the sphere of ``W``'s complement:
    ``exp(-t) <= M (v^T Omega v)^(-q/2)`` with ``t = s - v^T Lambda v``,
    ``Omega = I + 2 (s - Lambda) / b`` compressed to the complement (``root``) and
    ``log M = -(q - b)/2 + (q/2) log(q/b)``; valid whenever that compression is positive
    definite, which ``root`` certifies."""

    kind = "acg"
    frame: HouseholderFrame
    lam: np.ndarray
    shift: float
    b: float
    root: CompressionRoot

    def propose(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` unit proposals (columns, ``d x count``) and their log acceptance ratios."""
        q = self.root.dim
        xi = rng.standard_normal((q, count))
        energy = np.einsum("ij,ij->j", xi, xi)
        z = self.root.apply(xi)
        norm2 = np.einsum("ij,ij->j", z, z)
        x = self.frame.embed(z / np.sqrt(norm2), self.frame.m)
        log_bound = -(q - self.b) / 2 + q / 2 * math.log(q / self.b)
        t = self.shift - self.lam @ (x * x)
        return x, q / 2 * np.log(energy / norm2) - t - log_bound


class _ChartEnvelope:
    """The polar-chart envelope (module docstring): Gaussian tangent proposals
    ``w = (2 (1 - eta))^(-1/2) G^(-1/2) xi`` kept on the polar region ``||w||^2 <= rho``,
    mixed with probability ``cap_share`` with uniform proposals kept on the rest of the
    sphere, where the density is at most ``exp(-cap_floor)``."""

    kind = "chart"

    def __init__(self, frame: HouseholderFrame, lam: np.ndarray, shift: float,
                 root: CompressionRoot, eta: float, rho: float, cap_share: float,
                 cap_floor: float, log_efficiency: float) -> None:
        self.frame = frame
        self.lam = lam
        self.shift = shift
        self.root = root
        self.rho = rho
        self.cap_share = cap_share
        self.log_efficiency = log_efficiency
        self.scaled_inv_sqrt_diag = root.inv_sqrt_diag / math.sqrt(2.0 * (1.0 - eta))
        # the shift less the constant log sqrt(1 - rho) of the polar acceptance ratio, and
        # the cap's log ratio before -v^T A v, relative to that
        self.shifted = shift - 0.5 * math.log1p(-rho)
        self.cap_ratio = cap_floor - 0.5 * math.log1p(-rho)

    def propose(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` unit proposals (columns, ``d x count``) and their log acceptance ratios."""
        root = self.root
        xi = rng.standard_normal((root.dim + 1, count))
        tangent = xi[1:]
        z = np.empty_like(xi)
        w = z[1:]
        root.apply(tangent, self.scaled_inv_sqrt_diag, out=w)
        r2 = np.einsum("ij,ij->j", w, w)
        # proposals with r2 > rho are rejected: clipping keeps their arithmetic finite
        rest = 1.0 - np.minimum(r2, self.rho)
        np.copysign(np.sqrt(rest), xi[0], out=z[0])
        # log f - log(envelope) = -v^T A v + (1 - eta) w^T G w + log sqrt((1 - rho)/(1 - r2))
        log_ratio = 0.5 * (np.einsum("ij,ij->j", tangent, tangent) - np.log(rest))
        log_ratio[r2 > self.rho] = -np.inf
        cap = rng.random(count) < self.cap_share
        if cap.any():
            uniform = xi[:, cap] / np.sqrt(np.einsum("ij,ij->j", xi[:, cap], xi[:, cap]))
            z[:, cap] = uniform
            log_ratio[cap] = np.where(uniform[0] ** 2 < 1.0 - self.rho, self.cap_ratio, -np.inf)
        x = self.frame.embed(z, self.frame.m)
        log_ratio -= self.shifted - self.lam @ (x * x)
        return x, log_ratio


class _ConditionalSampler:
    """Exact draws from ``exp(x^T diag(lam) x)`` on the unit sphere of ``W``'s complement.

    ``lam`` is in descending order and every ``W`` has ``m`` orthonormal columns. Per-column
    warm starts (previous shift and ``b``), the choice of envelope and the running acceptance
    rates only affect speed.
    """

    def __init__(self, lam: np.ndarray, m: int) -> None:
        self.lam = lam
        self.m = m
        self.q = q = lam.size - m
        self.tail = lam[m + 1:]
        self.leading = np.eye(lam.size, m + 1)
        self.tol = max(THETA_TOLERANCE, 1e-12 * float(np.abs(lam).max()))
        # log of the sphere's area, and log 2 + log of the Gaussian normaliser without det
        self.log_area = math.log(2.0) + q / 2 * math.log(math.pi) - math.lgamma(q / 2)
        self.log_gauss = math.log(2.0) + (q - 1) / 2 * math.log(math.pi)
        self.counts = {"acg": [0, 0], "chart": [0, 0]}  # proposals, exact draws
        self._shift: dict[int, float] = {}
        self._b: dict[int, float] = {}
        self._chart_wait: dict[int, int] = {}
        self._chart_backoff: dict[int, int] = {}
        self._pole: dict[int, np.ndarray] = {}

    @property
    def proposals(self) -> int:
        return sum(c[0] for c in self.counts.values())

    @property
    def draws(self) -> int:
        return sum(c[1] for c in self.counts.values())

    def _ritz_pole(
        self, W: np.ndarray, current: np.ndarray | None, key: int
    ) -> tuple[float, np.ndarray]:
        """A lower bound on ``theta_1`` and an approximate top eigenvector of the conditional
        (Rayleigh-Ritz; exact for ``m = 0``)."""
        lam, m = self.lam, self.m
        if m == 0:
            return float(lam[0]), self.leading[:, 0]
        floor = float(lam[m])  # theta_1 >= lambda_{m+1} by interlacing
        if current is None:
            current = self.leading[:, 0]
        mu = self._shift.get(key, max(floor, float(lam @ (current * current))) + self.tol)
        theta, pole = ritz_pair(lam, W, current, mu, self.leading, THETA_TOLERANCE)
        return max(floor, theta), pole

    def _acg(self, frame: HouseholderFrame, shift: float, key: int | None) -> _ACGEnvelope | None:
        b = envelope_parameter(np.concatenate([[0.0], shift - self.tail]), self._b.get(key))
        self._b[key] = b
        root = frame.root(1.0 + 2.0 * (shift - self.lam) / b, self.m)
        return None if root is None else _ACGEnvelope(frame, self.lam, shift, b, root)

    def _chart(self, frame: HouseholderFrame, theta: float) -> _ChartEnvelope | None:
        """The polar-chart envelope around the frame's pole, or None when it is not valid or
        its expected acceptance rate is below ``exp(LOG_MIN_CHART_EFFICIENCY)``.

        ``G`` is the compression of ``s0 - Lambda`` (``s0 = theta + tol/2``) to the complement
        of ``[W, p]`` and ``kappa(s0)`` bounds ``c^T G^-1 c``; the shift ``s = p^T Lambda p +
        max(s0 - p^T Lambda p, sqrt(dims kappa / 2))`` balances the losses ``a`` and
        ``dims/2 * eta``. As ``G(s) >= G(s0)``, the bound ``v^T A v >= (1 - eta) w^T G(s0) w``
        with ``eta = kappa(s0) / a(s)`` holds at ``s``.
        """
        lam, m, dims = self.lam, self.m, self.q - 1
        low = theta + (self.tol / 2 if m else 0.0)
        root = frame.root(low - lam, m + 1)
        if root is None:
            return None
        pole = frame.pole
        weighted = lam * pole
        rayleigh = float(pole @ weighted)
        # kappa = c^T G^-1 c <= ||c||^2 / lambda_min(G) (any upper bound keeps the envelope
        # valid), with ||c||^2 = ||Lambda p||^2 - (p^T Lambda p)^2 - ||W^T Lambda p||^2 as
        # Lambda p = (p^T Lambda p) p + W W^T Lambda p + (the part c in the complement of [W, p])
        across = frame.w.T @ weighted
        norm2 = float(weighted @ weighted)
        residual2 = norm2 - rayleigh**2 - float(across @ across) + KAPPA_CUSHION * norm2
        kappa = max(residual2, 0.0) / root.min_eig_bound
        shift = max(low, rayleigh + math.sqrt(dims * kappa / 2))
        a = shift - rayleigh
        if kappa == 0.0 and a >= 0.0:
            eta = 0.0
        elif a > 0.0 and kappa < MAX_ETA * a:
            eta = kappa / a
        else:
            return None
        # The envelope masses: polar K1 = 2 Z_phi / sqrt(1 - rho), cap K2 = area e^(-gamma rho).
        log_k1 = self.log_gauss - 0.5 * (root.log_det() + dims * math.log1p(-eta))
        gamma = (1.0 - eta) * root.min_eig_bound
        spread = root.inverse_trace_bound() / (2.0 * (1.0 - eta))  # >= E ||w||^2
        rho = min(RHO_MAX, max(RHO_MIN, RHO_SPREAD * spread,
                               (self.log_area - log_k1 + CAP_MARGIN) / gamma))
        log_k1 -= 0.5 * math.log1p(-rho)
        log_k2 = self.log_area - gamma * rho
        log_polar_share = -_softplus(log_k2 - log_k1)  # log(K1 / (K1 + K2))
        share = -math.expm1(log_polar_share)
        if share > MAX_CAP_SHARE:
            return None
        inside = 1.0 - spread / rho  # Markov: a lower bound on the polar region's mass
        # Gaussian-limit estimate of the acceptance rate
        log_efficiency = (-a + dims / 2 * math.log1p(-eta) + 0.5 * math.log1p(-rho)
                          + (math.log(inside) if inside > 0 else -math.inf) + log_polar_share)
        if log_efficiency < LOG_MIN_CHART_EFFICIENCY:
            return None
        return _ChartEnvelope(frame, lam, shift, root, eta, rho, share, gamma * rho,
                              log_efficiency)

    def envelope(
        self, W: np.ndarray, current: np.ndarray | None = None, key: int = 0
    ) -> _ACGEnvelope | _ChartEnvelope:
        """A valid envelope for the draw orthogonal to ``W`` (``current``: the column's
        present value, a warm start; ``key``: which column, for per-column warm starts).

        In order: the chart around the column's previous pole refined by one Lanczos step;
        the chart around a Rayleigh-Ritz pole; the ACG envelope. After the chart was not
        usable for a column, its next draws skip it (1, 2, 4, ... up to ``MAX_CHART_BACKOFF``
        draws, doubling while it keeps failing)."""
        wait = self._chart_wait.get(key, 0)
        self._chart_wait[key] = max(wait - 1, 0)
        chart = self.q > 1 and not wait
        envelope = None
        previous = self._pole.get(key)
        refined = None if previous is None or not chart else lanczos_pair(self.lam, W, previous)
        if refined is not None:
            envelope = self._chart(HouseholderFrame(W, refined[1]), refined[0])
            if envelope is not None and envelope.log_efficiency < LOG_MIN_LANCZOS_EFFICIENCY:
                envelope = None
        if envelope is None:
            theta, pole = self._ritz_pole(W, current, key)
            frame = HouseholderFrame(W, pole)
            if chart:
                envelope = self._chart(frame, theta)
        if chart:
            self._chart_failed(key, envelope is None)
        if envelope is None:
            shift = theta if self.m == 0 else theta + self.tol / 2
            envelope = self._acg(frame, shift, key)
        if envelope is None:  # the shift is not above theta_1: bracket it
            logger.debug("Bingham: shift %.8g below the conditional top; bracketing", shift)
            shift = bracket_top(self.lam, W, theta, float(self.lam[0]), self.tol)
            envelope = self._acg(frame, shift, key)
        if envelope is None:
            _no_envelope(shift)
        self._shift[key] = envelope.shift
        self._pole[key] = envelope.frame.pole
        return envelope

    def _chart_failed(self, key: int, failed: bool) -> None:
        """Back off from the chart for this column after a failure; reset after a success."""
        backoff = self._chart_backoff.pop(key, 1)
        if failed:
            self._chart_wait[key] = backoff
            self._chart_backoff[key] = min(2 * backoff, MAX_CHART_BACKOFF)

    def draw(
        self, envelope: _ACGEnvelope | _ChartEnvelope, rng: np.random.Generator, count: int = 1
    ) -> np.ndarray:
        """``count`` exact draws as the columns of a ``d x count`` array.

        A chart that has used ``CHART_MAX_PROPOSALS`` proposals per requested draw hands the
        remaining draws to the ACG envelope at the same shift (valid, as the chart certified
        ``A > 0`` on the complement); each accepted draw is exact either way."""
        out = []
        need = count
        budget = CHART_MAX_PROPOSALS * count
        while need:
            if envelope.kind == "chart" and budget <= 0:
                logger.debug("Bingham: chart accepts too rarely; switching to the ACG envelope")
                envelope = self._acg(envelope.frame, envelope.shift, None) or _no_envelope(
                    envelope.shift)
            tally = self.counts[envelope.kind]
            expected = (tally[0] + 2.0) / (tally[1] + 1.0)
            batch = min(MAX_BATCH, math.ceil(BATCH_FACTOR * need * expected))
            x, log_ratio = envelope.propose(rng, batch)
            hits = np.flatnonzero(np.log(rng.random(batch)) < log_ratio)[:need]
            used = int(hits[-1]) + 1 if hits.size == need else batch
            tally[0] += used
            tally[1] += hits.size
            budget -= used
            out.append(x[:, hits])
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
    envelope = sampler.envelope(vecs.T @ W)
    draws = (vecs @ sampler.draw(envelope, rng, count)).T
    return draws[0] if size is None else draws

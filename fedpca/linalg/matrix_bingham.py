"""The matrix Bingham distribution on the Stiefel manifold, and Hoff's Gibbs sampler for it.

Matrix Bingham ``p(V) ~ exp(tr(V^T B V))`` on the ``d x k`` orthonormal frames: Gibbs
sampler of Hoff, "Simulation of the matrix Bingham-von Mises-Fisher distribution", JCGS
18(2), 2009, Sec. 3. Column ``j`` given the others (``W``, ``d x m``, ``m = k - 1``) is a
vector Bingham on the unit sphere of the orthogonal complement of ``W``: with ``N`` an
orthonormal basis of it, ``v_j = N z`` and ``z ~ Bingham(N^T B N)``. Every column is drawn
*exactly* from that conditional by rejection (the vector sampler's conditional sampler,
:mod:`fedpca.linalg.bingham`, whose per-column warm starts last the whole chain), so each
sweep leaves the matrix Bingham invariant; the chain's law converges to it and is not it
after finitely many sweeps. With ``k = 1`` every sweep is an independent exact draw.

No privacy here: :mod:`fedpca.algorithms.ppca` uses this sampler for the exponential
mechanism. The chain's diagnostics (:class:`ChainDiagnostics`) are computed from ``B``: they
describe private data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedpca.dp.validation import require_positive_int
from fedpca.errors import ConfigurationError
from fedpca.linalg.bingham import _ConditionalSampler, _eigen, _frame

__all__ = [
    "MIN_DIAGNOSTIC_SWEEPS",
    "BinghamChain",
    "ChainDiagnostics",
    "integrated_autocorrelation_time",
    "sample_matrix_bingham",
]

#: Sweeps after burn-in below which the mixing diagnostic uses the second half of the trace.
MIN_DIAGNOSTIC_SWEEPS = 20


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
            envelope = sampler.envelope(V[:, others[j]], V[:, j], key=j)
            V[:, j] = sampler.draw(envelope, rng)[:, 0]
        energy[sweep] = lam @ np.einsum("ij,ij->i", V, V)
        kept, offset = divmod(sweep - burn_in, thin)
        if sweep >= burn_in and offset == 0:
            samples[kept] = vecs @ V
    return BinghamChain(samples, _diagnostics(energy, burn_in, thin, sampler))

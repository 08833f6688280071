"""The DPdisPCA synthetic model (paper 002): a zero-mean Gaussian with a decaying spectrum.

The slides use "D = 200, K = 50, zero mean and a pre-determined covariance matrix" without
saying which. fedpca fixes one, public and reproducible: ``Sigma = U diag(lambda) U^T`` with
``lambda_j = exp(-(j - 1) / decay_length)`` (``j = 1..d``; with the defaults the top 50 of
200 directions carry 86% of the variance) and ``U`` a random orthogonal matrix drawn from the
model's seed. Rows are divided by a *public* constant computed from the model alone (a
high-probability bound on ``||x||``, the same rule as :mod:`fedpca.data.synthetic`) so they
have norm <= 1; the rare row above it is clipped by its site, which reports it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fedpca.data.synthetic import public_row_scale
from fedpca.linalg.subspace import thin_qr
from fedpca.dp.validation import require_finite_positive, require_positive_int

#: Stream keys that keep the model's randomness apart from every site's samples.
MODEL_STREAM = 0xD1D15
SAMPLE_STREAM = 0xD1D5A


@dataclass(frozen=True)
class DecayingSpectrumModel:
    """Parameters of the DPdisPCA synthetic model (all public).

    Attributes:
        dim: ``D`` (200 in the paper).
        decay_length: ``lambda_j = exp(-(j - 1) / decay_length)``.
        seed: seed of the eigenvectors.
        norm_sigmas: how many standard deviations of ``||x||^2`` the public scale allows.
    """

    dim: int = 200
    decay_length: float = 25.0
    seed: int = 0
    norm_sigmas: float = 6.0

    def __post_init__(self) -> None:
        require_positive_int(self.dim, "dim")
        require_finite_positive(self.decay_length, "decay_length")
        require_finite_positive(self.norm_sigmas, "norm_sigmas")

    @property
    def eigenvalues(self) -> np.ndarray:
        """The population eigenvalues (before the public scaling), largest first."""
        return np.exp(-np.arange(self.dim) / self.decay_length)

    @property
    def eigenvectors(self) -> np.ndarray:
        """``U``: the ``d x d`` orthogonal eigenvector matrix, columns in eigenvalue order."""
        return _eigenvectors(self.dim, self.seed)

    @property
    def scale(self) -> float:
        """The public constant every row is divided by (``||x|| / scale <= 1`` w.h.p.)."""
        return public_row_scale(self.eigenvalues, self.norm_sigmas)

    @property
    def second_moment(self) -> np.ndarray:
        """``E[x x^T]`` of the scaled rows: ``U diag(lambda) U^T / scale^2``."""
        U = self.eigenvectors
        return (U * (self.eigenvalues / self.scale**2)) @ U.T

    def sample(self, n: int, stream: int = 0) -> np.ndarray:
        """``n`` scaled rows, reproducible from ``(seed, stream)``."""
        require_positive_int(n, "n")
        rng = np.random.default_rng([self.seed, SAMPLE_STREAM, stream])
        coefficients = rng.standard_normal((n, self.dim)) * np.sqrt(self.eigenvalues)
        return coefficients @ (self.eigenvectors.T / self.scale)


@functools.lru_cache(maxsize=8)
def _eigenvectors(dim: int, seed: int) -> np.ndarray:
    """A random orthogonal ``dim x dim`` matrix (Haar, by QR with a positive ``R`` diagonal)."""
    rng = np.random.default_rng([seed, MODEL_STREAM])
    return thin_qr(rng.standard_normal((dim, dim)))

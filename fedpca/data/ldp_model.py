"""Paper 004's synthetic model (Sec. 6): a spiked Gaussian with a dense or row-sparse top space.

``Sigma = lambda/(5p(lambda+1)) V V^T + 1/(5p(lambda+1)) I_p`` with ``V`` a ``p x k``
orthonormal basis: dense (a random orthonormal ``p x k`` matrix, Sec. 6.1) or ``s``-row
sparse (a random orthonormal ``s x k`` block padded with zero rows and randomly permuted,
Sec. 6.2). The top ``k`` eigenvalues are ``1/(5p)``, the rest ``1/(5p(lambda+1))``; the
paper's ``lambda`` (here ``spike``) is 1.

No public rescaling is needed: ``tr Sigma = (lambda k + p) / (5p(lambda + 1)) <= 1/5``, and
paper 004 (Sec. 7) shows ``||x|| <= 1`` with probability at least ``1 - 2 exp(-p/4)``
(for ``p/4 <= k <= 3p/4``). Rows are used
as drawn; the rare row above the site's clip norm is clipped by the site, which reports it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fedpca.linalg.subspace import thin_qr
from fedpca.dp.validation import (
    require_finite_positive,
    require_ordered,
    require_positive_int,
    require_sizes,
)

#: Stream keys that keep the model's randomness apart from every site's samples.
MODEL_STREAM = 0x1D9A0
SAMPLE_STREAM = 0x1D95A


@dataclass(frozen=True)
class LDPSpikedModel:
    """Parameters of paper 004's synthetic model (all public).

    Attributes:
        dim: ``p``.
        k: dimension of the spiked subspace.
        sparsity: ``s`` non-zero rows of ``V`` (``k <= s <= p``); ``None`` for a dense ``V``.
        spike: the paper's ``lambda`` (1 in every experiment).
        seed: seed of ``V``.
    """

    dim: int = 40
    k: int = 5
    sparsity: int | None = None
    spike: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        require_sizes({"k": self.k, "dim": self.dim})
        require_finite_positive(self.spike, "spike")
        if self.sparsity is not None:
            require_positive_int(self.sparsity, "sparsity")
            require_ordered({"sparsity": self.sparsity, "dim": self.dim})
            require_ordered({"k": self.k, "sparsity": self.sparsity})

    @property
    def truth(self) -> np.ndarray:
        """``V``: the ``p x k`` orthonormal basis of the spiked subspace."""
        return _basis(self.dim, self.k, self.sparsity, self.seed)

    @property
    def support(self) -> np.ndarray:
        """Indices of the non-zero rows of ``V`` (all rows for a dense ``V``), ascending."""
        return np.flatnonzero(np.linalg.norm(self.truth, axis=1) > 0)

    @property
    def eigenvalues(self) -> np.ndarray:
        """The population eigenvalues, largest first: ``1/(5p)`` (``k`` times), then
        ``1/(5p(lambda+1))``."""
        noise = 1.0 / (5 * self.dim * (self.spike + 1))
        return np.concatenate(
            [np.full(self.k, noise * (self.spike + 1)), np.full(self.dim - self.k, noise)]
        )

    @property
    def covariance(self) -> np.ndarray:
        """``Sigma = E[x x^T]`` (``p x p``)."""
        lam = self.eigenvalues
        V = self.truth
        return (lam[0] - lam[-1]) * V @ V.T + lam[-1] * np.eye(self.dim)

    def sample(self, n: int, stream: int = 0) -> np.ndarray:
        """``n`` rows ``Sigma^{1/2} z``, ``z ~ N(0, I)``, reproducible from ``(seed, stream)``.

        ``Sigma^{1/2} = sqrt(b) I + (sqrt(a + b) - sqrt(b)) V V^T`` (``a + b``, ``b`` the two
        eigenvalues), so no ``p x p`` matrix is formed.
        """
        require_positive_int(n, "n")
        lam = self.eigenvalues
        V = self.truth
        Z = np.random.default_rng([self.seed, SAMPLE_STREAM, stream]).standard_normal(
            (n, self.dim)
        )
        return np.sqrt(lam[-1]) * Z + (np.sqrt(lam[0]) - np.sqrt(lam[-1])) * (Z @ V) @ V.T


@functools.lru_cache(maxsize=8)
def _basis(dim: int, k: int, sparsity: int | None, seed: int) -> np.ndarray:
    """``V``: dense orthonormal, or an orthonormal ``s x k`` block on ``s`` random rows."""
    rng = np.random.default_rng([seed, MODEL_STREAM])
    if sparsity is None:
        return thin_qr(rng.standard_normal((dim, k)))
    V = np.zeros((dim, k))
    V[rng.permutation(dim)[:sparsity]] = thin_qr(rng.standard_normal((sparsity, k)))
    return V

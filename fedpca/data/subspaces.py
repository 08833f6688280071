"""Paper 003's synthetic union of subspaces (Wang, Wang, Singh, NIPS 2015, Sec. 5).

``clusters`` random ``subspace_dim``-dimensional subspaces of ``R^dim``, each the column space
of a ``dim x subspace_dim`` Gaussian matrix (stored orthonormalised). Each of the ``n`` points
is assigned to a subspace uniformly at random and set to ``x = U_l y + w`` with ``y`` uniform
on the unit sphere of ``R^subspace_dim`` and ``w ~ N(0, noise^2 I_dim)``.

The paper assumes ``||x|| <= 1`` (Sec. 2.2) without saying how; here every row is divided by
a *public* constant, :attr:`UnionOfSubspaces.scale` ``= 1 + noise (sqrt(dim) + NORM_SIGMAS)``,
a bound on ``||U y|| + ||w||`` that fails with probability below ``exp(-NORM_SIGMAS^2 / 2)``
per row (Gaussian concentration of ``||w||``), and the rare row still above 1 is clipped.
Scaling or clipping a row does not change which (linear) subspace it is nearest to.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from fedpca.errors import ParameterError
from fedpca.linalg.subspace import random_subspaces
from fedpca.dp.clipping import clip_rows
from fedpca.dp.validation import require_ordered, require_positive_int

#: Standard deviations of ``||w||`` above ``sqrt(dim) noise`` the public scale allows for.
NORM_SIGMAS = 6.0
#: Stream keys that keep the planted subspaces apart from the samples.
BASES_STREAM = 0x5B5ACE
SAMPLE_STREAM = 0x5A3B1F


@dataclass(frozen=True)
class UnionOfSubspaces:
    """Parameters of the synthetic union of subspaces (all public).

    Attributes:
        n: number of points.
        dim: ambient dimension ``d``.
        clusters: number of subspaces ``k``.
        subspace_dim: dimension ``q`` of every subspace (``1 <= q <= d``).
        noise: standard deviation ``sigma`` of the Gaussian noise per coordinate (>= 0).
        seed: seed of the subspaces and the sample; the subspaces depend only on
            ``(dim, clusters, subspace_dim, seed)``, so models differing in ``n`` or
            ``noise`` share them.
    """

    n: int
    dim: int
    clusters: int
    subspace_dim: int
    noise: float
    seed: int = 0

    def __post_init__(self) -> None:
        require_positive_int(self.n, "n")
        require_positive_int(self.dim, "dim")
        require_positive_int(self.clusters, "clusters")
        require_positive_int(self.subspace_dim, "subspace_dim")
        require_positive_int(self.seed, "seed", minimum=0)
        require_ordered({"subspace_dim": self.subspace_dim, "dim": self.dim})
        if not (isinstance(self.noise, (int, float)) and math.isfinite(self.noise)
                and self.noise >= 0):
            raise ParameterError("{noise} must be a finite number >= 0", {"noise": self.noise})

    @property
    def bases(self) -> list[np.ndarray]:
        """The planted subspaces: ``clusters`` orthonormal ``dim x subspace_dim`` bases."""
        return list(_bases(self.dim, self.clusters, self.subspace_dim, self.seed))

    @property
    def scale(self) -> float:
        """The public constant every row is divided by (``||x|| / scale <= 1`` w.h.p.)."""
        return 1.0 + self.noise * (math.sqrt(self.dim) + NORM_SIGMAS)

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        """``(X, labels)``: ``n x dim`` rows of norm <= 1 and each row's subspace index.

        Reproducible from the seed and cached per process; both arrays are read-only.
        """
        return _sample(self)


@functools.lru_cache(maxsize=16)
def _bases(dim: int, clusters: int, subspace_dim: int, seed: int) -> tuple[np.ndarray, ...]:
    bases = random_subspaces(
        np.random.default_rng([seed, BASES_STREAM]), dim, clusters, subspace_dim
    )
    for basis in bases:
        basis.flags.writeable = False
    return tuple(bases)


@functools.lru_cache(maxsize=16)
def _sample(model: UnionOfSubspaces) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([model.seed, SAMPLE_STREAM])
    labels = rng.integers(model.clusters, size=model.n)
    Y = rng.standard_normal((model.n, model.subspace_dim))
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    X = np.empty((model.n, model.dim))
    for cluster, basis in enumerate(model.bases):
        members = labels == cluster
        X[members] = Y[members] @ basis.T
    X += model.noise * rng.standard_normal(X.shape)
    X, _ = clip_rows(X / model.scale, 1.0)
    X.flags.writeable = False
    labels.flags.writeable = False
    return X, labels

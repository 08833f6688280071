"""Paper 000's synthetic model (Sec. 5.1): a Gaussian with an ``s``-row-sparse top eigenspace.

``Sigma = U diag(lambda) U^T`` with ``lambda_1..k = 100`` and the rest ``Uniform[0, 10]``;
``U = [Q*, Q*_perp]`` where ``Q*`` is an orthonormalised ``s x k`` Gaussian block padded with
zeros (so the leading eigenspace is ``s``-row-sparse) and ``Q*_perp`` an orthonormal basis of
its complement. Rows are divided by a *public* constant (a high-probability bound on
``||x||`` computed from the model, not from the data) so they have norm <= 1; the rare row
above it is clipped by the site, which reports it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fedpca.data.site_cache import bounded_site_cache
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_positive_int, require_sizes
from fedpca.errors import ParameterError
from fedpca.linalg.subspace import thin_qr

#: Stream keys that keep the model's randomness apart from every site's samples.
MODEL_STREAM = 0x30DE1
SAMPLE_STREAM = 0x5A3B1E


def public_row_scale(eigenvalues: np.ndarray, norm_sigmas: float) -> float:
    """``sqrt(tr Sigma + norm_sigmas * sd(||x||^2))`` for ``x ~ N(0, Sigma)``: a bound on
    ``||x||`` that depends on the model only, never on the data."""
    return float(np.sqrt(eigenvalues.sum() + norm_sigmas * np.sqrt(2 * (eigenvalues**2).sum())))


@dataclass(frozen=True)
class SparseSpikedModel:
    """Parameters of the synthetic model (all public).

    Attributes:
        dim: ``d``.
        k: dimension of the leading eigenspace.
        sparsity: ``s``, rows of ``Q*`` that are non-zero.
        seed: seed of the model (eigenvectors and tail eigenvalues).
        spike: the ``k`` leading eigenvalues.
        tail: tail eigenvalues are drawn from ``Uniform[0, tail]``.
        norm_sigmas: the public scale is ``sqrt(tr Sigma + norm_sigmas * sd(||x||^2))``.
    """

    dim: int = 200
    k: int = 3
    sparsity: int = 10
    seed: int = 0
    spike: float = 100.0
    tail: float = 10.0
    norm_sigmas: float = 6.0

    def __post_init__(self) -> None:
        require_sizes({"k": self.k, "sparsity": self.sparsity, "dim": self.dim})

    @property
    def truth(self) -> np.ndarray:
        """``Q*``: the ``d x k`` sparse leading eigenspace."""
        return _factors(self)[0]

    @property
    def eigenvalues(self) -> np.ndarray:
        """The population eigenvalues (before the public scaling), leading ones first."""
        return _factors(self)[1]

    @property
    def scale(self) -> float:
        """The public constant every row is divided by (``||x|| / scale <= 1`` w.h.p.)."""
        return public_row_scale(self.eigenvalues, self.norm_sigmas)

    def sample(self, n: int, stream: int = 0) -> np.ndarray:
        """``n`` scaled rows, reproducible from ``(seed, stream)``."""
        require_positive_int(n, "n")
        _, lam, basis = _factors(self)
        rng = np.random.default_rng([self.seed, SAMPLE_STREAM, stream])
        Z = rng.standard_normal((n, self.dim)) * np.sqrt(lam)
        return (Z @ basis.T) / self.scale


@functools.lru_cache(maxsize=8)
def _factors(model: SparseSpikedModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Q*, eigenvalues, U)``, built once per process for each model."""
    rng = np.random.default_rng([model.seed, MODEL_STREAM])
    d, k, s = model.dim, model.k, model.sparsity
    truth = np.zeros((d, k))
    truth[:s] = thin_qr(rng.standard_normal((s, k)))
    rest = rng.standard_normal((d, d - k))
    rest -= truth @ (truth.T @ rest)
    complement = thin_qr(rest) if d > k else np.zeros((d, 0))
    lam = np.concatenate([np.full(k, model.spike), rng.uniform(0.0, model.tail, d - k)])
    return truth, lam, np.hstack([truth, complement])


def require_split(samples: int, sites: int) -> tuple[int, int]:
    """``(samples, sites)`` as integers when ``samples`` records can give each of ``sites``
    sites at least one, else ParameterError; allocates nothing (``sites`` may come from a
    coordinator's run_config)."""
    samples = require_positive_int(samples, "samples")
    sites = require_positive_int(sites, "sites")
    if samples < sites:
        raise ParameterError(
            f"{samples} samples cannot give each of {sites} sites at least one record; "
            "need {samples} >= {sites}",
            {"samples": samples, "sites": sites},
        )
    return samples, sites


def site_size(samples: int, sites: int, site: int) -> int:
    """Site ``site``'s record count when ``samples`` records are split over ``sites`` sites
    as evenly as possible (the lower sites get one more; site 0 is a largest)."""
    samples, sites = require_split(samples, sites)
    base, extra = divmod(samples, sites)
    return base + (1 if site < extra else 0)


def split_sizes(samples: int, sites: int) -> list[int]:
    """Every site's :func:`site_size`, in site order."""
    return [site_size(samples, sites, i) for i in range(require_split(samples, sites)[1])]


class SampledModel(Protocol):
    """A synthetic model of this package (:class:`SparseSpikedModel`, paper 002's and paper
    004's): ``n`` rows, reproducible from the model's seed and a ``stream``."""

    def sample(self, n: int, stream: int = 0) -> np.ndarray: ...


def site_data(model: SampledModel, samples: int, sites: int, site: int) -> np.ndarray:
    """The records of site ``site`` when ``samples`` records are split over ``sites``."""
    return model.sample(site_size(samples, sites, site), stream=site)


@bounded_site_cache
def prepared_site(
    model: SampledModel, samples: int, sites: int, site: int, clip_norm: float
) -> SiteData:
    """Site ``site``'s records (:func:`site_data`) validated and clipped to ``clip_norm``,
    cached per process: a virtual site creates its data once, not once per round."""
    return SiteData.prepare(site_data(model, samples, sites, site), clip_norm, str(site))

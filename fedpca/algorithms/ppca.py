"""PPCA: private PCA by the exponential mechanism over subspaces (a matrix Bingham draw).

Paper: Chaudhuri, Sarwate, Sinha, "Near-optimal differentially private principal
components", NIPS 2012 (https://papers.nips.cc/paper/4565), Alg. 2, read as
follows: with ``A = X^T X / n`` and rows of norm ``<= 1``, release one ``d x k``
orthonormal ``V`` drawn with density ``~ exp(tr(V^T (n alpha / 2) A V))`` (uniform base
measure on the frames). For rows clipped to a public norm ``C`` fedpca uses
``B = (n alpha / 2) A / C^2 = alpha / (2 C^2) X^T X`` (the paper's ``B`` for ``X / C``).

Sampling (:mod:`fedpca.linalg.matrix_bingham`): ``k = 1`` is one exact draw (Kent, Ganeiber &
Mardia rejection with an ACG envelope, or a polar-chart envelope when the draw is
concentrated: :mod:`fedpca.linalg.bingham`); ``k > 1`` is the state of Hoff's column-wise
Gibbs sampler
after ``burn_in`` sweeps from a uniformly random frame (chosen independently of the data).
Unlike the noisy-matrix methods (:mod:`fedpca.algorithms.central`), PPCA stays dense,
``O(n d^2 + d^3)``: the sampler works in the eigenbasis of ``B`` and needs all ``d`` of its
eigenpairs, not the top ``k``.

Privacy guarantee (unit: one record of the pooled data, replace-one, ``n`` public; central
trust model: a trusted curator holds every record). The score ``u(V) = tr(V^T X^T X V)``
changes by at most ``C^2`` when one record is replaced (``||V^T x||^2`` lies in
``[0, C^2]``), so the exponential mechanism ``exp(alpha u(V) / (2 C^2))`` is alpha-DP:
pure, ``delta = 0``. That holds for the *exact* distribution: for ``k = 1`` the draw is
exact; for ``k > 1`` the released frame comes from a Markov chain that only approaches the
matrix Bingham, and the guarantee holds only in the limit of exact sampling (infinitely many
sweeps). The chain's diagnostics are computed from the data and are not private: they stay
with the curator.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpca.algorithms.central import (
    CURATOR,
    TRUST_CENTRAL,
    UNIT,
    check_components,
    prepare_central,
)
from fedpca.linalg.matrix_bingham import ChainDiagnostics, sample_matrix_bingham
from fedpca.dp.mechanisms import NoiseSource
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_finite_positive, require_positive_int
from fedpca.results import PCAResult

logger = logging.getLogger(__name__)

ALGORITHM = "ppca"
#: Gibbs sweeps before the released frame (k > 1); paper 000 times PPCA with 100.
DEFAULT_BURN_IN = 100
#: The caveat every k > 1 result carries.
APPROXIMATE_SAMPLING = (
    "alpha-DP holds only in the limit of exact sampling: for k > 1 the frame is the state of "
    "a Gibbs chain after a finite burn-in, whose law only approaches the matrix Bingham"
)


@dataclass(frozen=True)
class PPCARun:
    """A PPCA release and, for the curator only, how its chain mixed (what the deprecated
    ``run_ppca_chain`` returns).

    Attributes:
        result: what is released (the frame and its privacy record).
        diagnostics: the Gibbs chain's diagnostics (its ``energy`` is ``tr(V^T B V)``, i.e.
            ``n alpha / (2 C^2)`` times the captured energy ``tr(V^T A V)``); computed from
            the data, NOT private.
    """

    result: PCAResult
    diagnostics: ChainDiagnostics


def bingham_scale(epsilon: float, clip_norm: float) -> float:
    """``alpha / (2 C^2)``: PPCA samples ``exp(tr(V^T (scale X^T X) V))``."""
    return epsilon / (2.0 * clip_norm**2)


def privacy_record(epsilon: float, clip_norm: float, k: int, burn_in: int) -> dict[str, Any]:
    """The guarantee of a PPCA release (see the module docstring)."""
    exact = k == 1
    record: dict[str, Any] = {
        "mechanism": "exponential mechanism over k-frames: matrix Bingham "
        "exp(tr(V^T (alpha / (2 C^2)) X^T X V))",
        "unit": UNIT,
        "epsilon": epsilon,
        "delta": 0.0,
        "sensitivity": clip_norm**2,
        "score": "tr(V^T X^T X V)",
        "bingham_scale": bingham_scale(epsilon, clip_norm),
        "exact_sampling": exact,
        "sampler": "Kent-Ganeiber-Mardia rejection (exact)" if exact
        else f"Hoff Gibbs: the state after {burn_in + 1} sweeps from a uniform frame",
        "clip_norm": clip_norm,
        "trust_model": TRUST_CENTRAL,
    }
    if not exact:
        record["caveat"] = APPROXIMATE_SAMPLING
    return record


def run_ppca(
    data: np.ndarray | SiteData,
    k: int,
    epsilon: float,
    clip_norm: float = 1.0,
    burn_in: int = DEFAULT_BURN_IN,
    seed: int | None = None,
    diagnostics: Callable[[ChainDiagnostics], None] | None = None,
) -> PCAResult:
    """PPCA (paper 001, Alg. 2): one frame from ``exp(tr(V^T (n alpha / 2) A V))``.

    Privacy guarantee: epsilon-DP (pure) per record of the pooled data (replace-one),
    central trust model; exact for ``k = 1``, for ``k > 1`` only in the limit of exact
    sampling (the privacy record says so).

    Args:
        data: the pooled ``n x d`` records (or a :class:`SiteData` clipped to ``clip_norm``).
        k: number of components.
        epsilon: the privacy parameter (the paper's ``alpha``), finite and > 0.
        clip_norm: public row-norm bound ``C``.
        burn_in: Gibbs sweeps discarded before the one whose state is released (ignored
            for ``k = 1``: one exact draw).
        seed: seed for reproducible simulation only (``None``: OS randomness).
        diagnostics: called once with the chain's diagnostics (its ``energy`` is
            ``tr(V^T B V)``, i.e. ``n alpha / (2 C^2)`` times the captured energy
            ``tr(V^T A V)``); computed from the data, NOT private: for the curator only,
            never part of the result.
    """
    start = time.perf_counter()
    epsilon = require_finite_positive(epsilon, "epsilon")
    burn_in = require_positive_int(burn_in, "burn_in", minimum=0)
    data = prepare_central(data, clip_norm)
    k = check_components(k, data.X.shape[1])
    n, d = data.X.shape
    sweeps = 0 if k == 1 else burn_in
    B = bingham_scale(epsilon, clip_norm) * (data.X.T @ data.X)
    rng = NoiseSource(seed, ALGORITHM).generator(0)
    chain = sample_matrix_bingham(B, k, burn_in=sweeps, rng=rng)
    config = {
        "k": k, "samples": n, "dim": d, "epsilon": epsilon, "clip_norm": clip_norm,
        "burn_in": sweeps, "seed": seed, "clipped_rows": data.clip.clipped_rows,
        "wall_seconds": time.perf_counter() - start,
    }
    history = [{"round": 1, "phase": "sample", "sweeps": sweeps + 1}]
    logger.info("PPCA: k=%d, n=%d, d=%d, %d sweeps", k, n, d, sweeps + 1)
    if diagnostics is not None:
        diagnostics(chain.diagnostics)
    return PCAResult(
        ALGORITHM, chain.samples[-1], privacy_record(epsilon, clip_norm, k, sweeps),
        history, config, [[CURATOR]],
    )


def _run_ppca_chain(*args: Any, **kwargs: Any) -> PPCARun:
    """The deprecated ``run_ppca_chain``: :func:`run_ppca`'s result and its diagnostics."""
    found: list[ChainDiagnostics] = []
    result = run_ppca(*args, diagnostics=found.append, **kwargs)
    return PPCARun(result, found[0])


def __getattr__(name: str) -> Any:
    """``run_ppca_chain``, deprecated: ``run_ppca(..., diagnostics=...)`` (docs/api.md)."""
    if name == "run_ppca_chain":
        warnings.warn("fedpca.algorithms.ppca.run_ppca_chain is deprecated: call run_ppca with "
                      "diagnostics=, a function it calls with the chain's diagnostics "
                      "(docs/api.md, Migration)", DeprecationWarning, stacklevel=2)
        return _run_ppca_chain
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

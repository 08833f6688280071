"""Private subspace clustering by the exponential mechanism, sampled by a Gibbs chain.

Paper: Wang, Wang, Singh, "Differentially Private Subspace Clustering", NIPS 2015
(https://papers.nips.cc/paper/5991), Sec. 4. The mechanism releases one draw of
``theta = (S_1..S_k, z_1..z_n)`` (``k`` subspaces of dimension ``q`` and every record's
cluster) from eq. (10)::

    p(theta; X) ~ exp(-eps / (2 C^2) * sum_i d^2(x_i, S_{z_i})),   d(x, S) = ||x - U U^T x||,

with respect to the uniform measure on the subspaces and the counting measure on ``z``.

Privacy guarantee (paper 003 Prop. 4.1; central trust model: a trusted curator holds every
record). Unit: one record of the pooled data; neighbouring datasets differ by *replacing* one
record, so ``n`` is public and ``z`` keeps its length. The score
``u(theta; X) = -sum_i d^2(x_i, S_{z_i})`` has sensitivity ``C^2``: each term lies in
``[0, ||x_i||^2] subset [0, C^2]`` for rows clipped to norm ``C`` (the paper takes ``C = 1``,
``||x|| <= 1``, Sec. 2.2), and replacing one record changes one term. Eq. (10) is
``exp(eps u / (2 C^2))``, the exponential mechanism, so one *exact* draw is eps-DP (pure,
``delta = 0``). The released state comes from a Markov chain and is *not* an exact draw: the
guarantee holds only in the limit of infinitely many sweeps (paper Sec. 4.2 says so too), and
a start computed from the data (``init="kplane"``, as the paper's SSC/LRR starts) makes a
finite chain's output depend on the data beyond the mechanism. The per-sweep diagnostics
(cost, test statistic, ``evaluate``'s metrics) are computed from the raw data: they are for
the curator and are NOT private.

One sweep (every conditional is exact, so each sweep leaves eq. (10) invariant):

1. assignments, eq. (11): each ``z_i`` independently from
   ``P(z_i = l) ~ exp(-eps / (2 C^2) d^2(x_i, S_l))`` (Gumbel-max, vectorised over records);
2. subspaces, eq. (12): ``S_l`` given ``z`` is the matrix Bingham
   ``exp(tr(U_l^T (eps / (2 C^2)) A_l U_l))``, ``A_l = sum_{z_i = l} x_i x_i^T``; one sweep of
   Hoff's column-wise sampler (:func:`fedpca.linalg.matrix_bingham.sample_matrix_bingham`)
   from the current ``U_l``: each column is an exact draw from its conditional, itself a
   conditional of eq. (10). (The paper's own tweak of that sampler, its App. D.2, is not in
   the project's copy of the paper.) An empty cluster's ``A_l = 0`` gives a uniformly random
   subspace.

Mixing diagnostic (paper Fig. 3): after every sweep the k-means subspace cost (eq. 3) of the
current subspaces and the paper's test statistic
``(sum_l ||mean_t U_l^(t)||_F^2 / (k q))^(1/2)``, whose expectation under eq. (10) is zero
(column signs are uniform); it falls like ``1/sqrt(T)`` as soon as the columns' signs mix,
so it says little about the subspaces themselves: the cost trace of several chains from
independent starts is the informative diagnostic.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.special import logsumexp

from fedpca.algorithms.central import TRUST_CENTRAL, UNIT
from fedpca.algorithms.kplane import validate_bases
from fedpca.algorithms.ppca import bingham_scale
from fedpca.clustering.nonprivate import check_problem, run_kplane
from fedpca.errors import ConfigurationError
from fedpca.linalg.matrix_bingham import sample_matrix_bingham
from fedpca.linalg.subspace import cluster_scatter, random_subspaces, squared_distances
from fedpca.dp.mechanisms import NoiseSource
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_finite_positive, require_positive_int
from fedpca.results import ClusteringResult

logger = logging.getLogger(__name__)

ALGORITHM = "gibbs-exp-mechanism"
#: Default number of Gibbs sweeps (the paper runs 10,000; see the experiment for timings).
DEFAULT_SWEEPS = 1000
#: Stream key of the public random start (apart from the chain's own randomness).
INIT_STREAM = 0x61BB5
INITS = ("random", "kplane")
APPROXIMATE_SAMPLING = (
    "eps-DP holds only for an exact draw from eq. (10): the released state is that of a Gibbs "
    "chain after finitely many sweeps, whose law only approaches it"
)
DATA_DEPENDENT_START = (
    "the chain starts from a non-private k-plane solution (as the paper's SSC/LRR starts): "
    "after finitely many sweeps the output also depends on the data through the start"
)

#: ``bases -> metrics`` evaluated after every sweep (e.g. the distance to a planted truth).
Evaluate = Callable[[list[np.ndarray]], dict[str, float]]


def subspace_log_marginal(
    X: np.ndarray, bases: Sequence[np.ndarray], epsilon: float, clip_norm: float = 1.0
) -> float:
    """``log sum_z p(S, z; X)`` up to a constant: eq. (10) with ``z`` summed out,
    ``sum_i log sum_l exp(-eps / (2 C^2) d^2(x_i, S_l))``. Differences between two sets of
    subspaces say which one the mechanism prefers (computed from the data: NOT private)."""
    logits = -bingham_scale(epsilon, clip_norm) * squared_distances(X, bases)
    return float(logsumexp(logits, axis=1).sum())


def draw_assignments(
    sq_distances: np.ndarray, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """One exact draw of every ``z_i`` from eq. (11), ``P(z_i = l) ~ exp(-scale d^2(x_i, S_l))``
    for the ``n x k`` squared distances (Gumbel-max: the argmax of logit + Gumbel noise)."""
    return np.argmax(-scale * sq_distances + rng.gumbel(size=sq_distances.shape), axis=1)


def draw_subspaces(
    X: np.ndarray,
    labels: np.ndarray,
    bases: Sequence[np.ndarray],
    scale: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Eq. (12): one Hoff sweep per cluster of ``exp(tr(U^T (scale A_l) U))`` from ``bases``."""
    scatter = cluster_scatter(X, labels, len(bases))
    return [
        sample_matrix_bingham(scale * (A + A.T) / 2, U.shape[1], burn_in=0, initial=U,
                              rng=rng).samples[0]
        for A, U in zip(scatter, bases, strict=True)
    ]


def starting_bases(
    data: SiteData, clusters: int, subspace_dim: int, init: str | Sequence[np.ndarray],
    seed: int | None,
) -> list[np.ndarray]:
    """The chain's first subspaces: public random ones, the non-private k-plane solution, or
    the given bases (which the caller vouches are public)."""
    d = data.X.shape[1]
    if isinstance(init, str):
        if init not in INITS:
            raise ConfigurationError(f"init must be one of {INITS} or a list of bases, got "
                                     f"{init!r}")
        if init == "kplane":
            return run_kplane(data, clusters, subspace_dim, seed=seed,
                              clip_norm=data.clip.clip_norm).bases
        rng = np.random.default_rng(None if seed is None else [seed, INIT_STREAM])
        return random_subspaces(rng, d, clusters, subspace_dim)
    bases = validate_bases(init, d, clusters, "init")
    if any(U.shape[1] != subspace_dim for U in bases):
        raise ConfigurationError(
            f"init bases must have subspace_dim={subspace_dim} columns, got "
            f"{[U.shape[1] for U in bases]}"
        )
    return bases


def mixing_statistic(basis_sums: Sequence[np.ndarray], sweeps: int) -> float:
    """Paper Fig. 3's ``(sum_l ||(1/T) sum_t U_l^(t)||_F^2 / (k q))^(1/2)`` (mean 0 under
    eq. (10)) from the running sums of the bases over ``T = sweeps`` sweeps."""
    total = sum(float(np.sum(S * S)) for S in basis_sums)
    k, q = len(basis_sums), basis_sums[0].shape[1]
    return float(np.sqrt(total / (k * q))) / sweeps


def privacy_record(epsilon: float, clip_norm: float, sweeps: int, init: str) -> dict[str, Any]:
    """The guarantee of a Gibbs release (see the module docstring)."""
    caveats = [APPROXIMATE_SAMPLING] + ([DATA_DEPENDENT_START] if init == "kplane" else [])
    return {
        "mechanism": "exponential mechanism over (subspaces, assignments), eq. (10): "
        "exp(-eps / (2 C^2) sum_i d^2(x_i, S_z_i))",
        "unit": UNIT,
        "epsilon": epsilon,
        "delta": 0.0,
        "score": "-sum_i d^2(x_i, S_z_i)",
        "sensitivity": clip_norm**2,
        "scale": bingham_scale(epsilon, clip_norm),
        "exact_sampling": False,
        "sampler": f"Gibbs: the state after {sweeps} sweeps (assignments by Gumbel-max, "
        "subspaces by one Hoff matrix-Bingham sweep each) from a "
        + ("non-private k-plane start" if init == "kplane" else f"{init} start"),
        "released": "bases and assignments of the last sweep",
        "not_private": "history (cost, test statistic and evaluate's metrics per sweep, "
        "computed from the raw data: for the curator only)",
        "clip_norm": clip_norm,
        "trust_model": TRUST_CENTRAL,
        "caveats": caveats,
    }


def run_gibbs_clustering(
    X: np.ndarray | SiteData,
    clusters: int,
    subspace_dim: int,
    epsilon: float,
    sweeps: int = DEFAULT_SWEEPS,
    seed: int | None = None,
    init: str | Sequence[np.ndarray] = "random",
    clip_norm: float = 1.0,
    evaluate: Evaluate | None = None,
) -> ClusteringResult:
    """Exponential-mechanism subspace clustering (paper 003 Sec. 4) by Gibbs sampling.

    Privacy guarantee: eps-DP (pure) per record of the pooled data (replace-one, score
    sensitivity ``C^2``), central trust model, for an exact draw of eq. (10); the released
    Gibbs state meets it only asymptotically in ``sweeps`` (the privacy record says so).

    Args:
        X: the pooled ``n x d`` records (rows clipped to norm ``clip_norm``).
        clusters: number of subspaces ``k >= 1``.
        subspace_dim: their dimension ``q``, ``1 <= q < d``.
        epsilon: the privacy parameter, finite and > 0.
        sweeps: Gibbs sweeps; the state after the last one is released.
        seed: seed for reproducible simulation only (``None``: OS randomness).
        init: ``"random"`` (uniform subspaces from public randomness, the default),
            ``"kplane"`` (the non-private k-plane solution, as the paper starts from
            non-private SSC/LRR; see the caveat) or ``k`` public ``d x q`` bases.
        clip_norm: public row-norm bound ``C``.
        evaluate: optional ``bases -> metrics`` added to every sweep's history entry.

    Returns:
        A :class:`ClusteringResult` with the last sweep's bases and assignments; its history
        has one entry per sweep (``round`` = sweep, ``cost``, ``test_statistic``, and
        ``evaluate``'s metrics): the mixing diagnostic, NOT private.
    """
    start = time.perf_counter()
    epsilon = require_finite_positive(epsilon, "epsilon")
    data, k, q = check_problem(X, clusters, subspace_dim, clip_norm)
    sweeps = require_positive_int(sweeps, "sweeps")
    bases = starting_bases(data, k, q, init, seed)
    scale = bingham_scale(epsilon, clip_norm)
    rng = NoiseSource(seed, ALGORITHM).generator(0)
    sq = squared_distances(data.X, bases)
    sums = [np.zeros_like(U) for U in bases]
    history: list[dict[str, Any]] = []
    for sweep in range(1, sweeps + 1):
        labels = draw_assignments(sq, scale, rng)
        bases = draw_subspaces(data.X, labels, bases, scale, rng)
        sq = squared_distances(data.X, bases)
        for total, U in zip(sums, bases, strict=True):
            total += U
        entry: dict[str, Any] = {
            "round": sweep, "sites": 1, "cost": float(sq.min(axis=1).mean()),
            "test_statistic": mixing_statistic(sums, sweep),
            "cluster_sizes": np.bincount(labels, minlength=k).tolist(),
        }
        if evaluate is not None:
            entry.update(evaluate(bases))
        history.append(entry)
    init_name = init if isinstance(init, str) else "given"
    logger.info("Gibbs clustering: k=%d, q=%d, eps=%g, %d sweeps, final cost %.4g",
                k, q, epsilon, sweeps, history[-1]["cost"])
    config = {
        "clusters": k, "subspace_dim": q, "samples": data.X.shape[0], "dim": data.X.shape[1],
        "epsilon": epsilon, "sweeps": sweeps, "init": init_name, "seed": seed,
        "clip_norm": clip_norm, "clipped_rows": data.clip.clipped_rows,
        "wall_seconds": time.perf_counter() - start,
    }
    return ClusteringResult(ALGORITHM, bases, labels,
                            privacy_record(epsilon, clip_norm, sweeps, init_name), history,
                            config)

"""SuLQ k-plane subspace clustering as a Flower strategy, on the Message API
(:class:`SuLQKPlane`) or the legacy API (:class:`KPlaneStrategy`).

Paper: Wang, Wang, Singh, "Differentially Private Subspace Clustering", NIPS 2015,
https://papers.nips.cc/paper/5991 (Sec. 5, the SuLQ k-plane baseline).

Every round sends the ``k`` current bases (one array each) and receives each site's noisy
per-cluster moments; the initial bases are public randomness from the server's seed. Every
formula lives in :mod:`fedpca.algorithms.kplane`; this module only moves arrays. The privacy
guarantee is the sites' (each adds its own noise, see :mod:`fedpca.clients.kplane`); the
server only records what they report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fedpca.algorithms.centred_run import KPLANE_MECHANISM
from fedpca.algorithms.kplane import KPlaneServer
from fedpca.algorithms.secure_sum import SecureSum
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.strategies.centring import centred
from fedpca.strategies.legacy import LegacySiteStrategy
from fedpca.strategies.message_api import MessageSiteStrategy


def kplane_server(
    *,
    dim: int,
    clusters: int,
    subspace_dim: int,
    rounds: int,
    clip_norm: float = 1.0,
    seed: int | None = None,
    initial_bases: Sequence[np.ndarray] | None = None,
    evaluate_fn: Callable[[list[np.ndarray]], dict[str, float]] | None = None,
    secure: tuple[SecureSum, GridChoice] | None = None,
) -> KPlaneServer:
    """Federated SuLQ k-plane's server (noisy per-cluster second moments, top-``q``
    eigenvectors) from its strategies' parameters.

    Args:
        dim (int): number of features ``d`` every site holds.
        clusters (int): number of subspaces ``k``.
        subspace_dim (int): dimension ``q`` of each subspace.
        rounds (int): k-plane rounds ``T`` (one Flower round each).
        clip_norm (float, default 1.0): the sites' public row-norm bound ``C``.
        seed (int | None, default None): seed of the public initial bases.
        initial_bases (sequence of np.ndarray | None, default None): ``k`` public
            orthonormal ``d x q`` bases to start from instead.
        evaluate_fn (callable | None, default None): ``bases -> dict`` of metrics recorded in
            the history after every round (e.g. cost and distance to a known truth).
        secure (tuple | None, default None): every round's public secure sum and the sites'
            grid (:func:`fedpca.algorithms.kplane.secure_sum_for`).
    """
    return KPlaneServer(dim, clusters, subspace_dim, rounds, clip_norm=clip_norm, seed=seed,
                        initial_bases=initial_bases, evaluate=evaluate_fn, secure=secure)


class KPlaneStrategy(LegacySiteStrategy):
    """SuLQ k-plane on Flower's legacy strategy API; parameters: :func:`kplane_server`'s and
    :class:`~fedpca.strategies.base.SiteRoundStrategy`'s."""

    build = staticmethod(kplane_server)


class SuLQKPlane(MessageSiteStrategy):
    """SuLQ k-plane on Flower's Message API; parameters: :func:`kplane_server`'s and
    :class:`~fedpca.strategies.base.SiteRoundStrategy`'s."""

    build = staticmethod(kplane_server)


class CentredKPlane(MessageSiteStrategy):
    """SuLQ k-plane on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then k-plane's ``T`` rounds (parameters: ``centring``, ``columns``
    (:func:`~fedpca.strategies.centring.centred`) and :class:`SuLQKPlane`'s; ``clip_norm``:
    the sites' ``C`` for the centred rows; ``secure``: the rounds' secure sum, the moments'
    is the ``centring`` server's). The result is a
    :class:`~fedpca.clustering.result.CentredClusteringResult`."""

    mechanism = KPLANE_MECHANISM
    build = staticmethod(centred(kplane_server))

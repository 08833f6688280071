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
from typing import Any

import numpy as np
from flwr.common import Scalar

from fedpca.algorithms.centred_run import KPLANE_MECHANISM
from fedpca.algorithms.kplane import KPlaneServer
from fedpca.algorithms.secure_sum import SecAggPlusEmbedding, SecureSum
from fedpca.algorithms.site import SiteAnswer
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.strategies.base import SiteRoundStrategy
from fedpca.strategies.centring import CentredRounds
from fedpca.strategies.legacy import LegacySiteStrategy
from fedpca.strategies.message_api import MessageSiteStrategy


class KPlaneRounds(SiteRoundStrategy):
    """Federated SuLQ k-plane (noisy per-cluster second moments, top-``q`` eigenvectors):
    the rounds' requests and their combination, for either Flower API.

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
            grid (:func:`fedpca.algorithms.kplane.secure_sum_for`) when sites with
            ``secure_min_sites`` send distributed discrete Gaussian residues through SecAgg+
            (legacy strategy with :meth:`SecAggSettings.for_residues` only).
        **options: :class:`~fedpca.strategies.base.SiteRoundStrategy`'s ``min_sites``,
            ``wait_for_sites``, ``min_noise_multiplier`` and ``privacy``.
    """

    label = "SuLQ k-plane"

    def __init__(
        self,
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
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.server = KPlaneServer(
            dim, clusters, subspace_dim, rounds, clip_norm=clip_norm, seed=seed,
            initial_bases=initial_bases, evaluate=evaluate_fn, secure=secure,
        )
        if secure is not None:
            self.secagg_embedding = SecAggPlusEmbedding(secure[1].modulus)

    def __repr__(self) -> str:
        s = self.server
        return (
            f"{type(self).__name__}(dim={s.dim}, clusters={s.clusters}, "
            f"subspace_dim={s.subspace_dim}, "
            f"rounds={s.rounds}, min_sites={self.min_sites})"
        )

    @property
    def num_rounds(self) -> int:
        """Flower rounds this strategy needs: ``T``."""
        return self.server.rounds

    def fit_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Scalar]]:
        """The ``k`` current bases, with the announced ``d`` and ``k``."""
        s = self.server
        config: dict[str, Scalar] = {"round": server_round, "dim": s.dim, "clusters": s.clusters}
        if s.secure is not None:  # the sum the sites' residues go into
            config.update(s.secure[0].to_config())
        return list(s.bases), config

    def combine(
        self, server_round: int, answers: list[SiteAnswer]
    ) -> tuple[np.ndarray, dict[str, Scalar]]:
        """One k-plane update by :class:`KPlaneServer`; the new bases stacked ``k x d x q``."""
        bases = self.server.receive(server_round, answers)
        metrics = {
            k: v for k, v in self.server.history[-1].items()
            if isinstance(v, (int, float, str, bool))
        }
        return np.stack(bases), metrics


class KPlaneStrategy(KPlaneRounds, LegacySiteStrategy):
    """SuLQ k-plane on Flower's legacy strategy API; parameters: :class:`KPlaneRounds`."""


class SuLQKPlane(KPlaneRounds, MessageSiteStrategy):
    """SuLQ k-plane on Flower's Message API; parameters: :class:`KPlaneRounds`."""


class CentredKPlane(CentredRounds, SuLQKPlane):
    """SuLQ k-plane on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then k-plane's ``T`` rounds (parameters: :class:`CentredRounds`'s and
    :class:`KPlaneRounds`'s; ``clip_norm``: the sites' ``C`` for the centred rows;
    ``secure``: the rounds' secure sum, the moments' is the ``centring`` server's). The
    result is a :class:`~fedpca.clustering.result.CentredClusteringResult`."""

    mechanism = KPLANE_MECHANISM

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

from fedpca.algorithms.centred_run import KPLANE_MECHANISM
from fedpca.algorithms.kplane import KPlaneServer
from fedpca.flower.centring import centred
from fedpca.flower.legacy_strategy import LegacySiteStrategy
from fedpca.flower.strategy import MessageSiteStrategy

class KPlaneStrategy(LegacySiteStrategy):
    """SuLQ k-plane on Flower's legacy strategy API; parameters:
    :class:`~fedpca.algorithms.kplane.KPlaneServer`'s and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = KPlaneServer


class SuLQKPlane(MessageSiteStrategy):
    """SuLQ k-plane on Flower's Message API; parameters:
    :class:`~fedpca.algorithms.kplane.KPlaneServer`'s (``dim``, ``clusters``,
    ``subspace_dim``, ``rounds``, ``clip_norm``, ``seed``, ``initial_bases``,
    ``evaluate_fn``, ``secure``) and :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = KPlaneServer


class CentredKPlane(MessageSiteStrategy):
    """SuLQ k-plane on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then k-plane's ``T`` rounds (parameters: ``centring``, ``columns``
    (:func:`~fedpca.flower.centring.centred`) and :class:`SuLQKPlane`'s; ``clip_norm``:
    the sites' ``C`` for the centred rows; ``secure``: the rounds' secure sum, the moments'
    is the ``centring`` server's). The result is a
    :class:`~fedpca.clustering.result.CentredClusteringResult`."""

    mechanism = KPLANE_MECHANISM
    build = centred(KPlaneServer)

"""DPdisPCA as a Flower strategy (one round, one release per site), on the Message API
(:class:`DPdisPCA`) or the legacy API (:class:`DPdisPCAStrategy`).

Paper: Imtiaz, Sarwate, "Differentially-private Distributed Principal Component Analysis"
(slides, Rutgers, 2018).

The single round asks every site for its partial square root ``P_s`` (``d x R``) of its
noisy second-moment matrix, or its whole noisy ``A^_s`` in the comparison variant, and merges
them into the top-``K`` eigenvectors of ``A_c = sum_s w_s P_s P_s^T``. Every formula lives in
:mod:`fedpca.algorithms.dpdis_pca`; this module only moves arrays. The privacy guarantee is
the sites' (each adds its own noise, see :mod:`fedpca.clients.dpdis_pca`).
"""

from __future__ import annotations

from fedpca.algorithms.centred_run import DPDIS_MECHANISM
from fedpca.algorithms.dpdis_pca import DPdisPCAServer
from fedpca.flower.centring import centred
from fedpca.flower.legacy_strategy import LegacySiteStrategy
from fedpca.flower.strategy import MessageSiteStrategy

class DPdisPCAStrategy(LegacySiteStrategy):
    """DPdisPCA on Flower's legacy strategy API; parameters:
    :class:`~fedpca.algorithms.dpdis_pca.DPdisPCAServer`'s and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = DPdisPCAServer


class DPdisPCA(MessageSiteStrategy):
    """DPdisPCA on Flower's Message API; parameters:
    :class:`~fedpca.algorithms.dpdis_pca.DPdisPCAServer`'s (``dim``, ``k``, ``r``,
    ``weighting``, ``variant``, ``evaluation``, ``secure``, ``variance``) and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = DPdisPCAServer


class CentredDPdisPCA(MessageSiteStrategy):
    """DPdisPCA on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then DPdisPCA's (parameters: ``centring``, ``columns``
    (:func:`~fedpca.flower.centring.centred`) and :class:`DPdisPCA`'s; ``secure``: the
    algorithm's secure sum, the moments' is the ``centring`` server's)."""

    mechanism = DPDIS_MECHANISM
    build = centred(DPdisPCAServer)

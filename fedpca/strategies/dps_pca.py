"""DPS-PCA as a Flower strategy, on the Message API (:class:`DPSPCA`) or the legacy API
(:class:`DPSPCAStrategy`, also with SecAgg+).

Paper: Ge, Wang, Wang, Liu, "Minimax-Optimal Privacy-Preserving Sparse PCA in Distributed
Systems", AISTATS 2018, http://proceedings.mlr.press/v84/ge18a.html

Round 1 (unless an initial basis is given) asks every site for its noisy diagonal of
``X^T X``; rounds ``2..T+1`` send the current basis ``Q`` and receive ``H_i``; with
``explained_variance``, round ``T+2`` sends the final ``Q`` and receives the noisy Rayleigh
quotients and trace. Every formula
lives in :mod:`fedpca.algorithms.dps_pca`; this module only moves arrays. The privacy
guarantee is the sites' (each adds its own noise, see :mod:`fedpca.clients.dps_pca`); the
server only records what they report.
"""

from __future__ import annotations

from fedpca.algorithms.centred_run import DPS_MECHANISM
from fedpca.algorithms.dps_pca import DPSPCAServer
from fedpca.flower.centring import centred
from fedpca.flower.legacy_strategy import LegacySiteStrategy
from fedpca.flower.strategy import MessageSiteStrategy

class DPSPCAStrategy(LegacySiteStrategy):
    """DPS-PCA on Flower's legacy strategy API (and SecAgg+); parameters:
    :class:`~fedpca.algorithms.dps_pca.DPSPCAServer`'s and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = DPSPCAServer


class DPSPCA(MessageSiteStrategy):
    """DPS-PCA on Flower's Message API; parameters:
    :class:`~fedpca.algorithms.dps_pca.DPSPCAServer`'s (``dim``, ``k``, ``s_hat``,
    ``rounds``, ``seed``, ``initial_basis``, ``evaluate_fn``, ``secure``,
    ``explained_variance``) and :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = DPSPCAServer


class CentredDPSPCA(MessageSiteStrategy):
    """DPS-PCA on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then DPS-PCA's initialisation and power rounds (parameters: ``centring``,
    ``columns`` (:func:`~fedpca.flower.centring.centred`) and :class:`DPSPCA`'s;
    ``secure``: the algorithm's secure sums, the moments' is the ``centring`` server's).
    ``explained_variance``: one more round, every site's noisy Rayleigh quotients and trace
    of its centred rows (DPS-PCA's server holds no noisy matrix to read them from)."""

    mechanism = DPS_MECHANISM
    build = centred(DPSPCAServer)

"""Each algorithm's Flower strategy by name, started like Flower's ``FedAvg``.

A named strategy is the one Message-API strategy
(:class:`~fedpca.flower.strategy.MessageSiteStrategy`) that builds its algorithm's
Flower-free server from its parameters, or the adapter of that strategy to Flower's legacy
strategy API (:class:`~fedpca.flower.legacy_strategy.LegacySiteStrategy`, e.g.
:class:`DPSPCAStrategy` for a ``ServerApp(server_fn=...)``). Every
formula lives in the server's module; the strategies only move arrays. The privacy guarantee
is the sites' (each adds its own noise before anything leaves it); the server records what
they state.

* DPS-PCA (:class:`DPSPCA`, :class:`DPSPCAStrategy`): Ge, Wang, Wang, Liu, "Minimax-Optimal
  Privacy-Preserving Sparse PCA in Distributed Systems" (AISTATS 2018): the noisy diagonal,
  then ``T`` noisy power steps (:class:`~fedpca.algorithms.dps_pca.DPSPCAServer`).
* DPdisPCA (:class:`DPdisPCA`, :class:`DPdisPCAStrategy`): "Differentially Private
  Distributed Principal Component Analysis": one round of partial square roots ``P_s``
  (:class:`~fedpca.algorithms.dpdis_pca.DPdisPCAServer`).
* LDP-PCA (:class:`LDPCovariance`, :class:`LDPCovarianceStrategy`): Wang & Xu, "Principal
  Component Analysis in the Local Differential Privacy Model": every record's noisy view,
  summed per site; ``sparse``: Fantope projection and selection
  (:class:`~fedpca.algorithms.ldp_pca.LDPCovarianceServer`).
* SuLQ k-plane (:class:`SuLQKPlane`, :class:`KPlaneStrategy`): Wang, Wang, Singh,
  "Differentially Private Subspace Clustering" (NIPS 2015): per-cluster noisy moments each
  round (:class:`~fedpca.algorithms.kplane.KPlaneServer`).

A run of any algorithm, centred or not, needs no named class:
``MessageSiteStrategy(server, min_sites=...)`` runs the server it is given.
"""

from __future__ import annotations

from typing import Any

from fedpca.algorithms.dpdis_pca import DPdisPCAServer
from fedpca.algorithms.dps_pca import DPSPCAServer
from fedpca.algorithms.kplane import KPlaneServer
from fedpca.algorithms.ldp_pca import LDPCovarianceServer
from fedpca.flower.legacy_strategy import LegacySiteStrategy
from fedpca.flower.rounds import SiteRoundStrategy
from fedpca.flower.strategy import MessageSiteStrategy


class DPSPCA(MessageSiteStrategy):
    """DPS-PCA on Flower's Message API; parameters: :class:`DPSPCAServer`'s (``dim``, ``k``,
    ``s_hat``, ``rounds``, ``seed``, ``initial_basis``, ``evaluate_fn``, ``secure``,
    ``explained_variance``, ``start``) and :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = DPSPCAServer


class DPdisPCA(MessageSiteStrategy):
    """DPdisPCA on Flower's Message API; parameters: :class:`DPdisPCAServer`'s (``dim``,
    ``k``, ``r``, ``weighting``, ``variant``, ``evaluation``, ``secure``, ``variance``) and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = DPdisPCAServer


def record_sigma(strategy: SiteRoundStrategy) -> float | None:
    """The sites' per-record noise: the strategy's configured ``sigma``, or more if it asks
    for more (its ``min_noise_multiplier``); the sparse solver's default penalty reads it."""
    sigma = strategy.privacy.get("sigma")
    if sigma is None or strategy.min_noise_multiplier is None:
        return sigma
    return max(sigma, strategy.min_noise_multiplier * strategy.privacy["sensitivity"])


def build_ldp(strategy: SiteRoundStrategy, **params: Any) -> LDPCovarianceServer:
    """An LDP-PCA strategy's server (:class:`LDPCovarianceServer`'s parameters: ``dim``,
    ``k``, ``sparse``, ``lam``, ``admm``, ``evaluate_fn``, ``true_support``), with its
    per-record noise (:func:`record_sigma`)."""
    return LDPCovarianceServer(record_sigma=record_sigma(strategy), **params)


class LDPCovariance(MessageSiteStrategy):
    """LDP-PCA on Flower's Message API; parameters: :func:`build_ldp`'s and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = build_ldp


class SuLQKPlane(MessageSiteStrategy):
    """SuLQ k-plane on Flower's Message API; parameters: :class:`KPlaneServer`'s (``dim``,
    ``clusters``, ``subspace_dim``, ``rounds``, ``clip_norm``, ``seed``, ``initial_bases``,
    ``evaluate_fn``, ``secure``) and :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = KPlaneServer


class DPSPCAStrategy(LegacySiteStrategy):
    """DPS-PCA on Flower's legacy strategy API; parameters: :class:`DPSPCA`'s."""

    STRATEGY = DPSPCA


class DPdisPCAStrategy(LegacySiteStrategy):
    """DPdisPCA on Flower's legacy strategy API; parameters: :class:`DPdisPCA`'s."""

    STRATEGY = DPdisPCA


class LDPCovarianceStrategy(LegacySiteStrategy):
    """LDP-PCA on Flower's legacy strategy API; parameters: :class:`LDPCovariance`'s."""

    STRATEGY = LDPCovariance


class KPlaneStrategy(LegacySiteStrategy):
    """SuLQ k-plane on Flower's legacy strategy API; parameters: :class:`SuLQKPlane`'s."""

    STRATEGY = SuLQKPlane

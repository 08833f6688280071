"""LDP-PCA (local-DP covariance aggregation) as a Flower strategy, on the Message API
(:class:`LDPCovariance`) or the legacy API (:class:`LDPCovarianceStrategy`).

Paper: Wang & Xu, "Principal Component Analysis in the Local Differential Privacy Model",
https://arxiv.org/abs/1908.11090 (Alg. 1; Alg. 2 with ``sparse=True``).

One Flower round: every site sends the sum of its records' private views ``X^T X + Z``;
the server forms ``S~`` and takes its top-``k`` eigenvectors, or solves Fantope projection
and selection first. Every formula lives in :mod:`fedpca.algorithms.ldp_pca` and
:mod:`fedpca.linalg.fantope`; this module only moves arrays. The privacy guarantee is the records'
(each site adds the noise, see :mod:`fedpca.clients.ldp_pca`); the server only records it.
"""

from __future__ import annotations

from typing import Any

from fedpca.algorithms.centred_run import LDP_MECHANISM
from fedpca.algorithms.ldp_pca import LDPCovarianceServer
from fedpca.flower.rounds import SiteRoundStrategy
from fedpca.flower.centring import centred
from fedpca.flower.legacy_strategy import LegacySiteStrategy
from fedpca.flower.strategy import MessageSiteStrategy

def record_sigma(strategy: SiteRoundStrategy) -> float | None:
    """The sites' per-record noise: the strategy's configured ``sigma``, or more if it asks
    for more (its ``min_noise_multiplier``); the sparse solver's default penalty reads it."""
    sigma = strategy.privacy.get("sigma")
    if sigma is None or strategy.min_noise_multiplier is None:
        return sigma
    return max(sigma, strategy.min_noise_multiplier * strategy.privacy["sensitivity"])


def build_ldp(strategy: SiteRoundStrategy, **params: Any) -> LDPCovarianceServer:
    """An LDP-PCA strategy's server (:class:`~fedpca.algorithms.ldp_pca.LDPCovarianceServer`'s
    parameters: ``dim``, ``k``, ``sparse``, ``lam``, ``admm``, ``evaluate_fn``,
    ``true_support``), with its per-record noise (:func:`record_sigma`)."""
    return LDPCovarianceServer(record_sigma=record_sigma(strategy), **params)


def build_centred_ldp(strategy: SiteRoundStrategy, **params: Any) -> Any:
    """A centred LDP-PCA strategy's server, with its per-record noise."""
    return centred(LDPCovarianceServer)(record_sigma=record_sigma(strategy), **params)


class LDPCovarianceStrategy(LegacySiteStrategy):
    """LDP-PCA on Flower's legacy strategy API; parameters: :func:`build_ldp`'s and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = build_ldp


class LDPCovariance(MessageSiteStrategy):
    """LDP-PCA on Flower's Message API; parameters: :func:`build_ldp`'s and
    :class:`~fedpca.flower.rounds.SiteRoundStrategy`'s."""

    build = build_ldp


class CentredLDP(MessageSiteStrategy):
    """LDP-PCA on the sites' centred (standardised) rows, on Flower's Message API: the local
    moments round (every record's own view, sites under a local
    :class:`~fedpca.algorithms.centring.CentredPolicy`), then LDP-PCA's one round
    (parameters: ``centring``, ``columns`` (:func:`~fedpca.flower.centring.centred`)
    and :class:`LDPCovariance`'s; ``privacy`` must carry the covariance view's per-record
    ``sigma`` for the sparse solver's default penalty,
    :func:`~fedpca.algorithms.centred_run.centred_ldp_privacy`)."""

    mechanism = LDP_MECHANISM
    build = build_centred_ldp

"""Each algorithm's Flower strategy by name, started like Flower's ``FedAvg``.

A named strategy is the one Message-API strategy
(:class:`~fedpca.flower.server.strategy.MessageSiteStrategy`) that builds its algorithm's
Flower-free server from its parameters, or the adapter of that strategy to Flower's legacy
strategy API (:class:`~fedpca.flower.server.legacy_strategy.LegacySiteStrategy`, e.g.
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
``MessageSiteStrategy(server, min_sites=...)`` runs the server it is given. The named classes
are derived from the specs (:data:`STRATEGIES` and :data:`LEGACY_STRATEGIES`: one of each per
:data:`~fedpca.algorithms.specs.SPECS` entry, named and built as its ``strategy`` says).
"""

from __future__ import annotations

from typing import Any

from fedpca.algorithms.ldp_pca import LDPCovarianceServer
from fedpca.algorithms.specs import SPECS, AlgorithmSpec, load
from fedpca.flower.server.legacy_strategy import LegacySiteStrategy
from fedpca.flower.server.rounds import SiteRoundStrategy
from fedpca.flower.server.strategy import MessageSiteStrategy


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


def message_strategy(spec: AlgorithmSpec) -> type[MessageSiteStrategy]:
    """``spec``'s named Message-API strategy (:attr:`AlgorithmSpec.strategy`): a
    :class:`~fedpca.flower.server.strategy.MessageSiteStrategy` that builds the algorithm's server
    from its parameters."""
    name, _, build = spec.strategy
    doc = (f"{spec.name} on Flower's Message API; parameters: "
           f":obj:`~{build.replace(':', '.')}`'s and "
           ":class:`~fedpca.flower.server.rounds.SiteRoundStrategy`'s.")
    return named_class(name, MessageSiteStrategy, {"build": load(build), "__doc__": doc})


def legacy_strategy(spec: AlgorithmSpec) -> type[LegacySiteStrategy]:
    """``spec``'s named adapter to Flower's legacy strategy API (:attr:`AlgorithmSpec.strategy`):
    a :class:`~fedpca.flower.server.legacy_strategy.LegacySiteStrategy` of its Message-API
    strategy."""
    message, name, _ = spec.strategy
    doc = f"{spec.name} on Flower's legacy strategy API; parameters: :class:`{message}`'s."
    return named_class(name, LegacySiteStrategy, {"STRATEGY": STRATEGIES[spec.name],
                                                  "__doc__": doc})


def named_class(name: str, base: type, namespace: dict[str, Any]) -> type:
    """A subclass ``name`` of ``base`` defined in this module (so that it pickles by name)."""
    return type(name, (base,), {**namespace, "__module__": __name__, "__qualname__": name})


#: Each algorithm's named Message-API strategy, by algorithm name.
STRATEGIES = {spec.name: message_strategy(spec) for spec in SPECS.values()}
DPSPCA, DPdisPCA = STRATEGIES["dps-pca"], STRATEGIES["dpdis-pca"]
LDPCovariance, SuLQKPlane = STRATEGIES["ldp-pca"], STRATEGIES["sulq-kplane"]
#: Each algorithm's named adapter to Flower's legacy strategy API, by algorithm name.
LEGACY_STRATEGIES = {spec.name: legacy_strategy(spec) for spec in SPECS.values()}
DPSPCAStrategy, DPdisPCAStrategy = LEGACY_STRATEGIES["dps-pca"], LEGACY_STRATEGIES["dpdis-pca"]
LDPCovarianceStrategy = LEGACY_STRATEGIES["ldp-pca"]
KPlaneStrategy = LEGACY_STRATEGIES["sulq-kplane"]

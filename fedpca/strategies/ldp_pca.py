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

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from flwr.common import Scalar

from fedpca.algorithms.centred_run import LDP_MECHANISM
from fedpca.algorithms.ldp_pca import PHASE, LDPCovarianceServer
from fedpca.algorithms.site import SiteAnswer
from fedpca.errors import ConfigurationError
from fedpca.linalg.fantope import ADMMSettings
from fedpca.strategies.base import SiteRoundStrategy
from fedpca.strategies.centring import CentredRounds
from fedpca.strategies.legacy import LegacySiteStrategy
from fedpca.strategies.message_api import MessageSiteStrategy

#: LDP-PCA is non-interactive: one request, one answer per site.
NUM_ROUNDS = 1


class LDPCovarianceRounds(SiteRoundStrategy):
    """Local-DP covariance aggregation, dense PCA or sparse (Fantope) PCA on the server: the
    request and its combination, for either Flower API.

    Args:
        dim (int): number of features ``d`` every site holds.
        k (int): number of principal components (``1 <= k <= d``).
        sparse (bool, default False): solve Fantope projection and selection (Alg. 2).
        lam (float | None, default None): FPS penalty; ``None`` derives it from the sites'
            per-record noise (``privacy["sigma"]``, raised to ``min_noise_multiplier``).
        admm (ADMMSettings | None, default None): FPS solver settings.
        evaluate_fn (callable | None, default None): ``basis -> dict`` of metrics recorded in
            the history (e.g. the distance to a known truth in simulation).
        true_support (sequence of int | None, default None): the known row support
            (simulation only), for support precision and recall.
        **options: :class:`~fedpca.strategies.base.SiteRoundStrategy`'s ``min_sites``,
            ``wait_for_sites``, ``min_noise_multiplier`` and ``privacy``.
    """

    label = "LDP-PCA"

    def __init__(
        self,
        *,
        dim: int,
        k: int,
        sparse: bool = False,
        lam: float | None = None,
        admm: ADMMSettings | None = None,
        evaluate_fn: Callable[[np.ndarray], dict[str, float]] | None = None,
        true_support: Sequence[int] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.server = LDPCovarianceServer(
            dim, k, sparse=sparse, lam=lam, record_sigma=self._record_sigma(), admm=admm,
            evaluate=evaluate_fn, true_support=true_support,
        )

    def _record_sigma(self) -> float | None:
        """The sites' per-record noise: the configured ``sigma``, or more if requested."""
        sigma = self.privacy.get("sigma")
        if sigma is None or self.min_noise_multiplier is None:
            return sigma
        return max(sigma, self.min_noise_multiplier * self.privacy["sensitivity"])

    def __repr__(self) -> str:
        s = self.server
        return (
            f"{type(self).__name__}(dim={s.dim}, k={s.k}, sparse={s.sparse}, lam={s.lam}, "
            f"min_sites={self.min_sites})"
        )

    @property
    def num_rounds(self) -> int:
        """Flower rounds this strategy needs: one."""
        return NUM_ROUNDS

    def fit_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Scalar]]:
        """Round 1: no arrays, ``phase=covariance`` and the expected ``dim``."""
        if server_round != NUM_ROUNDS:
            raise ConfigurationError(
                f"LDP-PCA has a single round; round {server_round} was requested"
            )
        return [], {"phase": PHASE, "dim": self.server.dim}

    def combine(
        self, server_round: int, answers: list[SiteAnswer]
    ) -> tuple[np.ndarray, dict[str, Scalar]]:
        """``S~`` and its (sparse) principal subspace, by :class:`LDPCovarianceServer`."""
        basis = self.server.receive(answers)
        metrics = {
            key: value for key, value in self.server.history[-1].items()
            if isinstance(value, (bool, int, float, str)) and key != "phase"
        }
        return basis, metrics


class LDPCovarianceStrategy(LDPCovarianceRounds, LegacySiteStrategy):
    """LDP-PCA on Flower's legacy strategy API; parameters: :class:`LDPCovarianceRounds`."""


class LDPCovariance(LDPCovarianceRounds, MessageSiteStrategy):
    """LDP-PCA on Flower's Message API; parameters: :class:`LDPCovarianceRounds`."""


class CentredLDP(CentredRounds, LDPCovariance):
    """LDP-PCA on the sites' centred (standardised) rows, on Flower's Message API: the local
    moments round (every record's own view, sites under a local
    :class:`~fedpca.algorithms.centring.CentredPolicy`), then LDP-PCA's one round
    (parameters: :class:`CentredRounds`'s and :class:`LDPCovarianceRounds`'s; ``privacy``
    must carry the covariance view's per-record ``sigma`` for the sparse solver's default
    penalty, :func:`~fedpca.algorithms.centred_run.centred_ldp_privacy`)."""

    mechanism = LDP_MECHANISM

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

from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.common import Scalar

from fedpca.algorithms.centred_run import DPS_MECHANISM
from fedpca.algorithms.dps_pca import PHASE_INIT, PHASE_VARIANCE, DPSPCAServer, DPSSecureSums
from fedpca.algorithms.secure_sum import SecAggPlusEmbedding
from fedpca.algorithms.site import SiteAnswer
from fedpca.strategies.base import SiteRoundStrategy
from fedpca.strategies.centring import CentredRounds
from fedpca.strategies.legacy import LegacySiteStrategy
from fedpca.strategies.message_api import MessageSiteStrategy


class DPSPCARounds(SiteRoundStrategy):
    """Distributed private sparse PCA (noisy truncated power method): the rounds' requests
    and their combination, for either Flower API.

    Args:
        dim (int): number of features ``d`` every site holds.
        k (int): number of principal components.
        s_hat (int): rows kept by thresholding (``k <= s_hat <= d``).
        rounds (int): power rounds ``T`` (the run has ``T + 1`` Flower rounds with the
            initialisation).
        seed (int | None, default None): seed of the server's public randomness (``Q(0)``).
        initial_basis (np.ndarray | None, default None): a ``d x k`` orthonormal ``Q(0)``;
            skips the initialisation round.
        evaluate_fn (callable | None, default None): ``Q -> dict`` of metrics recorded in the
            history after every round (e.g. the distance to a known truth in simulation).
        secure (DPSSecureSums | None, default None): the public secure sums (and the sites'
            grids) when sites with a ``discrete`` policy send distributed discrete Gaussian
            residues through SecAgg+ (:func:`fedpca.algorithms.dps_pca.secure_sums`; legacy
            strategy with :meth:`SecAggSettings.for_residues` only).
        explained_variance (bool, default False): one more round for the explained
            variance (every site's policy must agree to that release).
        **options: :class:`~fedpca.strategies.base.SiteRoundStrategy`'s ``min_sites``,
            ``wait_for_sites``, ``min_noise_multiplier`` and ``privacy``.
    """

    label = "DPS-PCA"

    def __init__(
        self,
        *,
        dim: int,
        k: int,
        s_hat: int,
        rounds: int,
        seed: int | None = None,
        initial_basis: np.ndarray | None = None,
        evaluate_fn: Callable[[np.ndarray], dict[str, float]] | None = None,
        secure: DPSSecureSums | None = None,
        explained_variance: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.server = DPSPCAServer(
            dim, k, s_hat, rounds, seed=seed, initial_basis=initial_basis,
            evaluate=evaluate_fn, secure=secure, explained_variance=explained_variance,
        )
        if secure is not None:
            self.secagg_embedding = SecAggPlusEmbedding(secure[1][1].modulus)

    def __repr__(self) -> str:
        s = self.server
        return (
            f"{type(self).__name__}(dim={s.dim}, k={s.k}, s_hat={s.s_hat}, rounds={s.rounds}, "
            f"min_sites={self.min_sites}, init={'private' if s.needs_init else 'given'})"
        )

    @property
    def num_rounds(self) -> int:
        """Flower rounds this strategy needs (``T``, plus one for the initialisation)."""
        return self.server.total_rounds

    def fit_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Scalar]]:
        """Init: no arrays; power round ``t`` and the explained variance: the current
        basis ``Q``."""
        phase, t = self.server.phase(server_round)
        arrays = [] if phase == PHASE_INIT else [self.server.basis]
        config: dict[str, Scalar] = {"phase": phase, "round": t}
        if self.server.secure is not None:  # the sum the sites' residues go into
            config.update(self.server.secure[phase != PHASE_INIT][0].to_config())
        return arrays, config

    def combine(
        self, server_round: int, answers: list[SiteAnswer]
    ) -> tuple[np.ndarray, dict[str, Scalar]]:
        """Initial support, one power step or the explained variance, by
        :class:`DPSPCAServer`."""
        phase, t = self.server.phase(server_round)
        if phase == PHASE_INIT:
            basis = self.server.receive_diagonal(answers)
        elif phase == PHASE_VARIANCE:
            basis = self.server.receive_rayleigh(t, answers)
        else:
            basis = self.server.receive_power(t, answers)
        return basis, {k: v for k, v in self.server.history[-1].items() if k != "phase"}


class DPSPCAStrategy(DPSPCARounds, LegacySiteStrategy):
    """DPS-PCA on Flower's legacy strategy API (and SecAgg+); parameters: :class:`DPSPCARounds`."""


class DPSPCA(DPSPCARounds, MessageSiteStrategy):
    """DPS-PCA on Flower's Message API; parameters: :class:`DPSPCARounds`."""


class CentredDPSPCA(CentredRounds, DPSPCA):
    """DPS-PCA on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then DPS-PCA's initialisation and power rounds (parameters:
    :class:`CentredRounds`'s and :class:`DPSPCARounds`'s; ``secure``: the algorithm's secure
    sums, the moments' is the ``centring`` server's). ``explained_variance``: one more round,
    every site's noisy Rayleigh quotients and trace of its centred rows (DPS-PCA's server
    holds no noisy matrix to read them from)."""

    mechanism = DPS_MECHANISM

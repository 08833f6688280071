"""DPS-PCA as a Flower strategy.

Paper: Ge, Wang, Wang, Liu, "Minimax-Optimal Privacy-Preserving Sparse PCA in Distributed
Systems", AISTATS 2018, http://proceedings.mlr.press/v84/ge18a.html

Round 1 (unless an initial basis is given) asks every site for its noisy diagonal of
``X^T X``; rounds ``2..T+1`` send the current basis ``Q`` and receive ``H_i``. Every formula
lives in :mod:`fedpca.algorithms.dps_pca`; this module only moves arrays. The privacy
guarantee is the sites' (each adds its own noise, see :mod:`fedpca.clients.dps_pca`); the
server only records what they report.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from fedpca.algorithms.dps_pca import PHASE_INIT, DPSPCAServer, SiteAnswer
from fedpca.errors import FedPCAError
from fedpca.results import PCAResult

logger = logging.getLogger(__name__)

WARNING_TOO_FEW_SITES = (
    "DPS-PCA round %s: only %s site(s) answered, fewer than min_sites=%s; the run stops "
    "here rather than aggregate an under-populated round. Failures: %s"
)


#: Flower wraps a client's exception in a Ray traceback; its own text follows "Message: ".
_CLIENT_MESSAGE = re.compile(r"Message: (.*?)(?:\\n|\\'|'|$)")


class RoundFailedError(FedPCAError):
    """Too few sites answered a round; the run was stopped."""


class DPSPCAStrategy(Strategy):
    """Distributed private sparse PCA (noisy truncated power method).

    Args:
        dim (int): number of features ``d`` every site holds.
        k (int): number of principal components.
        s_hat (int): rows kept by thresholding (``k <= s_hat <= d``).
        rounds (int): power rounds ``T`` (the run has ``T + 1`` Flower rounds with the
            initialisation).
        min_sites (int, default 2): a round proceeds only if at least this many sites
            answer; the strategy waits for this many to be connected before sampling.
        seed (int | None, default None): seed of the server's public randomness (``Q(0)``).
        initial_basis (np.ndarray | None, default None): a ``d x k`` orthonormal ``Q(0)``;
            skips the initialisation round.
        evaluate_fn (callable | None, default None): ``Q -> dict`` of metrics recorded in the
            history after every round (e.g. the distance to a known truth in simulation).
        min_noise_multiplier (float | None, default None): asks every site for at least this
            noise multiplier (a site never goes below its own).
        privacy (dict | None, default None): the guarantee the sites were configured with,
            copied into the result.
    """

    def __init__(
        self,
        *,
        dim: int,
        k: int,
        s_hat: int,
        rounds: int,
        min_sites: int = 2,
        seed: int | None = None,
        initial_basis: np.ndarray | None = None,
        evaluate_fn: Callable[[np.ndarray], dict[str, float]] | None = None,
        min_noise_multiplier: float | None = None,
        privacy: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.server = DPSPCAServer(
            dim, k, s_hat, rounds, seed=seed, initial_basis=initial_basis, evaluate=evaluate_fn
        )
        self.min_sites = max(1, int(min_sites))
        self.min_noise_multiplier = min_noise_multiplier
        self.privacy = dict(privacy or {})
        self.failures: list[str] = []

    def __repr__(self) -> str:
        s = self.server
        return (
            f"DPSPCAStrategy(dim={s.dim}, k={s.k}, s_hat={s.s_hat}, rounds={s.rounds}, "
            f"min_sites={self.min_sites}, init={'private' if s.needs_init else 'given'})"
        )

    @property
    def num_rounds(self) -> int:
        """Flower rounds this strategy needs (``T``, plus one for the initialisation)."""
        return self.server.total_rounds

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        """No client is asked for parameters: the first round carries none."""
        return ndarrays_to_parameters([])

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        """Ask every connected site for the release of this round."""
        phase, t = self.server.phase(server_round)
        config: dict[str, Scalar] = {"phase": phase, "round": t}
        if self.min_noise_multiplier is not None:
            config["min_noise_multiplier"] = float(self.min_noise_multiplier)
        arrays = [] if phase == PHASE_INIT else [self.server.basis]
        ins = FitIns(ndarrays_to_parameters(arrays), config)
        available = max(client_manager.num_available(), self.min_sites)
        clients = client_manager.sample(num_clients=available, min_num_clients=self.min_sites)
        return [(client, ins) for client in clients]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        """Combine the sites' releases into the next basis."""
        reasons = [_failure_reason(f) for f in failures]
        for reason in reasons:
            logger.warning("DPS-PCA round %s: a site failed: %s", server_round, reason)
        self.failures.extend(reasons)
        if len(results) < self.min_sites:
            logger.error(WARNING_TOO_FEW_SITES, server_round, len(results), self.min_sites,
                         reasons)
            raise RoundFailedError(
                f"round {server_round}: {len(results)} site(s) answered, need "
                f"{self.min_sites}; failures: {reasons}"
            )
        answers = [_answer(proxy, res) for proxy, res in results]
        phase, t = self.server.phase(server_round)
        if phase == PHASE_INIT:
            basis = self.server.receive_diagonal(answers)
        else:
            basis = self.server.receive_power(t, answers)
        metrics = {k: v for k, v in self.server.history[-1].items() if k != "phase"}
        return ndarrays_to_parameters([basis]), metrics

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        """No federated evaluation: sites release nothing beyond the fit rounds."""
        return []

    def aggregate_evaluate(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, EvaluateRes]],
        failures: list[tuple[ClientProxy, EvaluateRes] | BaseException],
    ) -> tuple[float | None, dict[str, Scalar]]:
        """Nothing to aggregate (no evaluation round)."""
        return None, {}

    def evaluate(
        self, server_round: int, parameters: Parameters
    ) -> tuple[float, dict[str, Scalar]] | None:
        """Metrics of the current basis are already in the history (``evaluate_fn``)."""
        return None

    def result(self, config: dict[str, Any] | None = None) -> PCAResult:
        """The final :class:`PCAResult` once every round has run."""
        return self.server.result(self.privacy, dict(config or {}))


def _answer(proxy: ClientProxy, res: FitRes) -> SiteAnswer:
    arrays = parameters_to_ndarrays(res.parameters)
    site = str(res.metrics.get("site", proxy.cid))
    if len(arrays) != 1:
        raise FedPCAError(f"site {site} returned {len(arrays)} arrays, expected 1")
    return SiteAnswer(
        site=site,
        n=int(res.num_examples),
        value=arrays[0],
        epsilon_spent=float(res.metrics.get("epsilon_spent", float("nan"))),
    )


def _failure_reason(failure: tuple[ClientProxy, FitRes] | BaseException) -> str:
    if isinstance(failure, BaseException):
        text = str(failure)
        found = _CLIENT_MESSAGE.findall(text)
        return found[-1].strip() if found else text
    proxy, res = failure
    return f"site {proxy.cid}: {res.status.message}"

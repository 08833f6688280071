"""A fedpca algorithm on Flower's legacy strategy API (``flwr.server.strategy.Strategy``).

The legacy API is the only one Flower's SecAgg+ workflow drives
(:func:`fedpca.flower.workflow.run_strategy` with ``secure=...``). Everything the rounds
do lives in :class:`~fedpca.flower.rounds.SiteRoundStrategy`; this module only turns its
requests into ``FitIns`` and the sites' ``FitRes`` into answers. Its budget round
(:mod:`fedpca.flower.readiness`) is run by ``run_strategy`` before Flower's workflow
starts: the legacy API has no hook before round 1 that may exchange messages.
"""

from __future__ import annotations

import logging

from flwr.app import Error
from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from fedpca.flower.wire import read_fit_res
from fedpca.flower.rounds import SiteRoundStrategy

logger = logging.getLogger(__name__)

WARNING_NO_BUDGET_ROUND = (
    "%s: no budget round before round 1 (run the strategy with "
    "fedpca.flower.workflow.run_strategy to have one): a site that cannot afford the "
    "whole run refuses its first request, but the other sites may then spend on a run "
    "that does not finish"
)


class LegacySiteStrategy(SiteRoundStrategy, Strategy):
    """A :class:`SiteRoundStrategy` as a legacy Flower strategy (hooks in the order Flower
    calls them); same constructor parameters."""

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        """No client is asked for parameters: the first round carries what it needs."""
        self.begin()
        return ndarrays_to_parameters([])

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        """Ask every connected site (after ``wait_for_sites`` connected) that did not decline
        the run in the budget round for its release."""
        if server_round == 1 and not self.budget_asked:
            logger.warning(WARNING_NO_BUDGET_ROUND, self.label)
        arrays, config = self.request(server_round)
        ins = FitIns(ndarrays_to_parameters(arrays), config)
        # Flower's legacy workflow registers the connected nodes when asked for their number
        # (else only every 5 s, which wait_for alone would sit out)
        client_manager.num_available()
        client_manager.wait_for(self.wait_for_sites)
        clients = client_manager.sample(
            num_clients=client_manager.num_available(), min_num_clients=self.wait_for_sites
        )
        declined = {str(node) for node in self.declined}
        clients = [client for client in clients if client.cid not in declined]
        self.asked = len(clients)
        return [(client, ins) for client in clients]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        """Check enough sites answered, then combine their releases."""
        array, metrics = self.aggregate(
            server_round, results, [failure_reason(f) for f in failures],
            lambda result: read_fit_res(result[1], result[0].cid),
        )
        return ndarrays_to_parameters([array]), metrics

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
        """Round metrics are recorded by the core server's history instead."""
        return None


def failure_reason(failure: tuple[ClientProxy, FitRes] | BaseException) -> str:
    """Why a site released nothing: the error its reply carried (Flower's workflows wrap a
    reply's :class:`~flwr.app.Error` in an ``Exception``), or a non-OK ``FitRes`` status."""
    if isinstance(failure, BaseException):
        error = failure.args[0] if failure.args else None
        if isinstance(error, Error):
            return error.reason or f"error code {error.code}"
        return str(failure)
    proxy, res = failure
    return f"site {proxy.cid}: {res.status.message}"

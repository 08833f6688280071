"""A fedpca strategy on Flower's legacy strategy API (``flwr.server.strategy.Strategy``).

For a ServerApp written against Flower's legacy API (``ServerApp(server_fn=...)`` returning
``ServerAppComponents(strategy=...)``, or ``DefaultWorkflow`` in a ``main``) whose sites are
``NumPyClient`` s (:mod:`fedpca.flower.site.site_client`). :class:`LegacySiteStrategy` is an
adapter over one :class:`~fedpca.flower.server.strategy.MessageSiteStrategy`: its requests become
``FitIns``, the sites' ``FitRes`` its answers; every round's check, combination, readiness
round, failure notice and result delivery is the Message-API strategy's own. It carries no
secure sums: those run only through fedpca's verifiable secure aggregation on the Message API.
Through :func:`fedpca.flower.server.workflow.run_strategy` the readiness round runs before Flower's
``DefaultWorkflow`` (the legacy API has no hook before round 1 that may exchange messages)
and the released result goes to every site after it.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from flwr.app import Error
from flwr.common import (
    Context,
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
)
from flwr.server import Grid, LegacyContext, ServerConfig
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy
from flwr.server.workflow import DefaultWorkflow

from fedpca.errors import ConfigurationError
from fedpca.flower.server.prompt_grid import prompt
from fedpca.flower.server.readiness import Readiness
from fedpca.flower.server.strategy import MessageSiteStrategy
from fedpca.flower.wire import read_fit_res

logger = logging.getLogger(__name__)

WARNING_NO_READINESS_ROUND = (
    "%s: no readiness round before round 1 (run the strategy with "
    "fedpca.flower.server.workflow.run_strategy to have one): a site that is not ready for "
    "the whole run refuses its first request, but the other sites may then spend on a run "
    "that does not finish"
)


class LegacySiteStrategy(Strategy):
    """Flower's legacy strategy hooks over :attr:`rounds`, a Message-API strategy (hooks in
    the order Flower calls them); every other attribute (``result()``, ``failures``,
    ``site_sizes``, ...) is that strategy's."""

    #: The Message-API strategy an algorithm's adapter builds from its parameters.
    STRATEGY: ClassVar[type[MessageSiteStrategy]] = MessageSiteStrategy

    def __init__(self, *args: Any, strategy: MessageSiteStrategy | None = None,
                 **params: Any) -> None:
        """Adapt ``strategy``, or the :attr:`STRATEGY` built from ``args`` and ``params``
        (the Message-API strategy's constructor parameters)."""
        rounds = self.STRATEGY(*args, **params) if strategy is None else strategy
        if rounds.secure_protocol is not None:
            raise ConfigurationError(
                f"{rounds.label}: secure sums run only through fedpca's verifiable secure "
                "aggregation on Flower's Message API; run the Message-API strategy itself")
        self.rounds = rounds

    def __getattr__(self, name: str) -> Any:
        """What the adapter does not define is the Message-API strategy's."""
        if name == "rounds":  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.rounds, name)

    def __setattr__(self, name: str, value: Any) -> None:
        """Every attribute but :attr:`rounds` is the Message-API strategy's (e.g. its
        ``contract``, ``asked``, ``privacy``)."""
        if name == "rounds":
            object.__setattr__(self, name, value)
        else:
            setattr(self.rounds, name, value)

    def __repr__(self) -> str:
        described = repr(self.rounds).split("(", 1)[1]  # the strategy's own parameters
        return f"{type(self).__name__}({described}"

    def run(self, grid: Grid, contract: str, readiness: Readiness | None = None, *,
            num_rounds: int | None = None, context: Context | None = None) -> None:
        """Run in a ServerApp's ``main`` (:func:`fedpca.flower.server.workflow.run_strategy`): the
        readiness round, Flower's ``DefaultWorkflow`` over ``context`` for ``num_rounds``
        rounds (default: the algorithm's), then the released result under ``contract`` to
        every site; a failure is told to every ready site, then raised."""
        rounds = self.rounds
        rounds.contract = contract
        if readiness is not None:
            rounds.readiness = readiness
        rounds.readiness_round(grid)
        legacy = LegacyContext(context=context, strategy=self, config=ServerConfig(
            num_rounds=rounds.num_rounds if num_rounds is None else num_rounds))
        try:  # Flower's workflow waits without a timeout: the grid brings the run's
            DefaultWorkflow()(prompt(grid, rounds.answer_seconds()), legacy)
        except Exception as error:
            rounds.announce_failure(grid, error)
            raise
        rounds.deliver_result(grid)

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        """No client is asked for parameters: the first round carries what it needs."""
        self.rounds.begin()
        return ndarrays_to_parameters([])

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        """Ask every connected site (after ``wait_for_sites`` connected) that did not decline
        the run in the readiness round for its release."""
        rounds = self.rounds
        if server_round == 1 and not rounds.readiness_asked:
            logger.warning(WARNING_NO_READINESS_ROUND, rounds.label)
        arrays, config = rounds.request(server_round)
        ins = FitIns(ndarrays_to_parameters(arrays), config)
        # Flower's legacy workflow registers the connected nodes when asked for their number
        # (else only every 5 s, which wait_for alone would sit out)
        client_manager.num_available()
        client_manager.wait_for(rounds.wait_for_sites, timeout=int(rounds.deadlines.connect))
        clients = client_manager.sample(
            num_clients=client_manager.num_available(), min_num_clients=rounds.wait_for_sites
        )
        declined = {str(node) for node in rounds.declined}
        clients = [client for client in clients if client.cid not in declined]
        rounds.asked = len(clients)
        return [(client, ins) for client in clients]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        """Check enough sites answered, then combine their releases."""
        array, metrics = self.rounds.aggregate(
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

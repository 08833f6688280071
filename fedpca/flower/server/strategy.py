"""A fedpca algorithm on Flower's Message API (``flwr.serverapp.strategy.Strategy``).

Used like Flower's ``FedAvg`` in a ServerApp's ``main``::

    strategy = DPSPCA(dim=200, k=3, s_hat=20, rounds=10, min_sites=2)
    strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=strategy.num_rounds)
    result = strategy.result()  # fedpca's PCAResult, with its history

Before round 1, ``start`` asks every site whether it is ready for the whole run (a QUERY
message: :mod:`fedpca.flower.server.readiness`) and stops before any release when fewer than
``min_sites`` can; after the last round it sends the released result to every site
(:mod:`fedpca.flower.server.delivery`). Everything the rounds do lives in
:class:`~fedpca.flower.server.rounds.SiteRoundStrategy`; this
module only turns its requests into train ``Message`` objects
(:func:`fedpca.flower.wire.request_content`) and the replies into answers. A reply that
carries an error is a failed site: its reason is ``msg.error.reason`` (the site's own refusal,
see :mod:`fedpca.flower.site.clientapp`). Sites answer through
:func:`fedpca.flower.site.clientapp.site_client_app`. Secure sums of distributed discrete Gaussian
residues
run through fedpca's verifiable secure aggregation (:meth:`MessageSiteStrategy.use_secure_protocol`,
:mod:`fedpca.flower.server.secure_server`). Flower's legacy strategy API drives the same strategy
through its adapter (:mod:`fedpca.flower.server.legacy_strategy`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from fedpca.flower.wire import read_reply, request_content
from fedpca.flower.secure_wire import PROTOCOL_RECORD
from fedpca.errors import ConfigurationError, RunFailedError
from fedpca.flower.server.prompt_grid import failure_reason, no_reply
from fedpca.flower.server.readiness import Readiness
from fedpca.flower.server.rounds import SiteRoundStrategy
from fedpca.flower.server.secure_server import VerifiedSecureAggregation

logger = logging.getLogger(__name__)


class MessageSiteStrategy(SiteRoundStrategy, Strategy):
    """A :class:`SiteRoundStrategy` as a Message-API Flower strategy (hooks in the order
    Flower calls them); same constructor parameters."""

    #: fedpca's verifiable secure aggregation, when the sites' answers are secure sums.
    secure_protocol: VerifiedSecureAggregation | None = None
    #: The grid of the running round (the protocol's extra exchanges use it).
    grid: Grid | None = None

    def use_secure_protocol(self, protocol: VerifiedSecureAggregation) -> None:
        """Run every round's answers through ``protocol``: a strategy whose sites send
        distributed discrete Gaussian residues (``secure=...``) only."""
        if self.server.secure_modulus is None:
            raise ConfigurationError(
                f"{self.label}: the verifiable secure aggregation sums residues; build the "
                "strategy with its secure sums (secure=...)"
            )
        self.secure_protocol = protocol

    def run(self, grid: Grid, contract: str, readiness: Readiness | None = None, *,
            num_rounds: int | None = None, context: Context | None = None) -> None:
        """Run in a ServerApp's ``main`` (:func:`fedpca.flower.server.workflow.run_strategy`):
        :meth:`start` under the data contract ``contract``, with the readiness round's
        answers ``readiness`` when the ServerApp asked already (``context``: unused, the
        legacy adapter's)."""
        self.contract = contract
        if readiness is not None:
            self.readiness = readiness
        self.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=num_rounds)

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None = None,
        num_rounds: int | None = None,
        timeout: float | None = None,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Run the algorithm's :attr:`num_rounds` rounds (Flower's ``Strategy.start``).

        ``initial_arrays`` must be empty (default: empty; the first round carries what it
        needs) and ``num_rounds`` the algorithm's own (default); ``train_config`` entries
        are added to every request, and sites refuse keys they do not know. Flower's
        ``Result`` holds each round's aggregated array and metrics; fedpca's result is
        :meth:`result`. The readiness round comes first
        (:meth:`~fedpca.flower.server.rounds.SiteRoundStrategy.readiness_round`). Raises
        :class:`~fedpca.flower.server.rounds.ReadinessRoundError` when fewer than
        ``min_sites`` sites are ready for the run,
        :class:`~fedpca.flower.server.rounds.RoundFailedError` when a round has fewer than
        ``min_sites`` answers, after telling every site that the run failed
        (:meth:`~fedpca.flower.server.rounds.SiteRoundStrategy.announce_failure`). Each wait for
        the sites' answers lasts the longest answer deadline a ready site stated
        (:class:`~fedpca.site.ready.SiteReady`), else ``timeout`` seconds (``None``: the
        plan's, :attr:`~fedpca.flower.server.readiness.Deadlines.answer`). The last step
        sends the released result to every site
        (:meth:`~fedpca.flower.server.rounds.SiteRoundStrategy.deliver_result`; a failed
        delivery is logged, never raised).
        """
        num_rounds = self.num_rounds if num_rounds is None else num_rounds
        if num_rounds != self.num_rounds:
            raise ConfigurationError(
                f"{self.label} runs exactly {self.num_rounds} Flower rounds, got "
                f"num_rounds={num_rounds}; pass num_rounds=strategy.num_rounds"
            )
        if initial_arrays is not None and len(initial_arrays) > 0:
            raise ConfigurationError(
                f"{self.label} takes no initial arrays (got {len(initial_arrays)}); pass "
                "initial_arrays=ArrayRecord() and give a starting basis to the constructor"
            )
        self.begin()
        sites = self.readiness_round(grid)
        timeout = self.readiness.answer_seconds(
            self.deadlines.answer if timeout is None else timeout)
        try:
            if self.secure_protocol is not None:
                self.secure_protocol.timeout = timeout
                self.secure_protocol.setup(
                    grid, {node: self.readiness.ready[node].site for node in sites},
                    [self.server.round_sum(r) for r in range(1, num_rounds + 1)])
            result = super().start(grid, ArrayRecord(), num_rounds, timeout, train_config,
                                   evaluate_config, evaluate_fn)
        except RunFailedError as error:  # naming each failing site, as the rounds' own do
            named = type(error)(self.named(str(error)), map(self.named, error.failures))
            self.announce_failure(grid, named)
            raise named from error
        except Exception as error:
            self.announce_failure(grid, error)
            raise
        self.deliver_result(grid)
        return result

    def summary(self) -> None:
        """Log what the strategy will do."""
        logger.info("\t├──> %r", self)
        logger.info("\t└──> waits for %d site(s), needs %d answer(s) per round",
                    self.wait_for_sites, self.min_sites)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Ask every connected site (after ``wait_for_sites`` connected) that did not decline
        the run in the readiness round for its release."""
        request_arrays, request = self.request(server_round)
        request = {**dict(config), **request}
        self.grid = grid
        content = request_content(request_arrays, request)
        if self.masked(server_round):
            inputs = self.secure_protocol.input_records(server_round, request)
            self.asked, self.asked_nodes = len(inputs), list(inputs)
            return [
                Message(content=_with(content, record), message_type=MessageType.TRAIN,
                        dst_node_id=node)
                for node, record in inputs.items()
            ]
        nodes = [node for node in self.connected_sites(grid) if node not in self.declined]
        self.asked, self.asked_nodes = len(nodes), nodes
        return [
            Message(content=content, message_type=MessageType.TRAIN, dst_node_id=node)
            for node in nodes
        ]

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Check enough sites answered (a reply with an error is a failed site), then
        combine their releases."""
        replies = list(replies)
        answered = [msg for msg in replies if not msg.has_error()]
        reasons = [failure_reason(msg) for msg in replies if msg.has_error()]
        if len(replies) < self.asked:
            reasons.append(no_reply(self.asked - len(replies), self.asked_nodes, replies))
        if self.secure_protocol is not None:  # sites lost since the key agreement
            reasons += self.secure_protocol.take_failures()
        summed, groups = None, None
        if self.masked(server_round) and len(answered) >= self.min_sites:
            summed = self.secure_protocol.unmask(self.grid, server_round, answered)
            groups = [self.secure_protocol.group_of(msg.metadata.src_node_id)
                      for msg in answered]
        array, metrics = self.aggregate(
            server_round, answered, reasons,
            lambda msg: read_reply(msg.content, str(msg.metadata.src_node_id)), summed=summed,
            groups=groups,
        )
        numbers = {
            key: value for key, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        return ArrayRecord([array]), MetricRecord(numbers)

    def masked(self, server_round: int) -> bool:
        """Whether ``server_round``'s answers travel inside the secure protocol: a run with
        one, in a round with a secure sum (a private panel's per-site frequencies are each
        site's own answer, in the clear, as every member agreed in the key agreement's
        description of the rounds)."""
        return (self.secure_protocol is not None
                and self.server.round_sum(server_round) is not None)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """No federated evaluation: sites release nothing beyond the train rounds."""
        return []

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """Nothing to aggregate (no evaluation round)."""
        return None


def _with(content: RecordDict, protocol: ConfigRecord) -> RecordDict:
    """``content``'s records (shared, as a plain round shares one content: the request's
    arrays are serialised once) and the protocol message ``protocol``."""
    return RecordDict({**content, PROTOCOL_RECORD: protocol})

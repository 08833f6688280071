"""The server's side of fedpca's verifiable secure aggregation on Flower's Message API.

:class:`VerifiedSecureAggregation` moves the messages of the Flower-free
:class:`fedpca.secure.server_session.ServerSession` between a Message-API strategy and its sites:
setup once per run (key advertisements, then the signed key list and the encrypted shares),
then per round the sites' masked answers, a consistency round and the unmasking (of exactly
``t`` sites when nobody dropped out, again with every other survivor if one of them fails:
:meth:`ServerSession.endorsers`), after which the strategy receives exactly the sum of the
survivors' residues. It is the honest server:
nothing a site does depends on it being honest (every check is the site's,
:mod:`fedpca.flower.secure_wire`), so a hostile ServerApp gains nothing by replacing it.

The threshold is the smallest that keeps at least ``min_sites`` honest members in any sum
with ``colluders`` members colluding (:func:`fedpca.secure.conditions.smallest_threshold`);
sites refuse a threshold below what their own policy needs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid

from fedpca.algorithms.secure_sum import SUM_PREFIX, SecureSum, SumDescription
from fedpca.flower.secure_wire import (
    PROTOCOL_RECORD,
    is_protocol_message,
    read_masked_input,
)
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS
from fedpca.dp.hadamard import next_power_of_two
from fedpca.secure.conditions import smallest_threshold
from fedpca.secure.messages import Advertisement, Endorsement, Reveal, ShareBundle
from fedpca.secure.server_session import ServerSession
from fedpca.flower.server.prompt_grid import failure_reason, no_reply
from fedpca.flower.server.rounds import RoundFailedError

logger = logging.getLogger(__name__)

class VerifiedSecureAggregation:
    """Secure sums of distributed discrete Gaussian residues, verifiable by every site.

    Args:
        min_sites (int): ``M``, the fewest honest sites in any sum (the sites' own ``M``
            must not exceed it, or they refuse the threshold).
        colluders (int, default 0): ``c``, members assumed to collude with the server.
        modulus (int, default ``2^31``): the residues' modulus (the sites' own).
        timeout (float): seconds each exchange waits for replies (a strategy sets the
            run's own, :meth:`~fedpca.flower.server.rounds.SiteRoundStrategy.answer_seconds`,
            before the first exchange).
    """

    def __init__(self, *, min_sites: int, colluders: int = 0, modulus: int = DEFAULT_MODULUS,
                 timeout: float) -> None:
        self.min_sites, self.colluders = min_sites, colluders
        self.modulus, self.timeout = modulus, timeout
        self.session: ServerSession | None = None
        #: node id -> member name, for every site that advertised a key.
        self.members: dict[int, str] = {}
        #: Why sites failed an exchange since the round's strategy last asked
        #: (:meth:`take_failures`).
        self.failures: list[str] = []

    def take_failures(self) -> list[str]:
        """The sites' failures in the exchanges since the last call (then forgotten)."""
        failures, self.failures = self.failures, []
        return failures

    def __repr__(self) -> str:
        return (f"VerifiedSecureAggregation(min_sites={self.min_sites}, "
                f"colluders={self.colluders}, modulus={self.modulus})")

    def setup(self, grid: Grid, nodes: Sequence[int], sums: Sequence[SecureSum | None]) -> None:
        """The run's one key agreement with ``nodes`` for one round per entry of ``sums``
        (each round's secure sum, or ``None``), under the run's agreed description of them
        (:class:`~fedpca.algorithms.secure_sum.SumDescription`, which every site signs);
        raises :class:`RoundFailedError` with the sites' reasons when too few take part."""
        threshold = smallest_threshold(len(nodes), self.colluders, self.min_sites)
        description = SumDescription(self.min_sites, self.colluders, tuple(sums))
        self.session = ServerSession(str(grid.run.run_id), len(sums), threshold, self.modulus,
                                     description.to_text())
        request = self.session.setup_request().to_dict()
        for node, reply in self._exchange(grid, {n: request for n in nodes}, "setup",
                                          needed=threshold):
            advertisement = Advertisement.from_dict(reply)
            self.session.receive_advertisement(advertisement)
            self.members[node] = advertisement.member
        key_list = self.session.key_list().to_dict()
        for _, reply in self._exchange(grid, {n: key_list for n in self.members}, "shares",
                                       needed=threshold):
            self.session.receive_bundle(ShareBundle.from_dict(reply))
        logger.info("secure aggregation: %d sites agreed keys, threshold %d", len(self.members),
                    threshold)

    def input_records(
        self, server_round: int, config: Mapping[str, Any]
    ) -> dict[int, ConfigRecord]:
        """Each site's input request for ``server_round`` (the padded length of the secure
        sum ``config`` describes)."""
        length = next_power_of_two(int(config[SUM_PREFIX + "dimension"]))
        requests = self.session.input_requests(server_round, length)
        return {node: ConfigRecord(requests[member].to_dict())
                for node, member in self.members.items() if member in requests}

    def unmask(self, grid: Grid, server_round: int, replies: Sequence[Message]) -> np.ndarray:
        """The exact sum modulo the modulus of the masked answers in ``replies``, after the
        consistency round and the unmasking (repeated with more survivors when one asked
        fails; :class:`~fedpca.secure.server_session.SecureAggregationError` when too few
        remain)."""
        for reply in replies:
            self.session.receive_masked_input(read_masked_input(reply.content))
        while not self.session.decodable(server_round):  # a retry only after a failure
            request = self.session.consistency_request(server_round).to_dict()
            endorsers = set(self.session.endorsers(server_round))
            asked = [node for node, member in self.members.items() if member in endorsers]
            for _, reply in self._exchange(grid, dict.fromkeys(asked, request),
                                           f"round {server_round} consistency"):
                self.session.receive_endorsement(Endorsement.from_dict(reply))
            unmask = self.session.unmask_requests(server_round)
            records = {node: unmask[member].to_dict() for node, member in self.members.items()
                       if member in unmask}
            for _, reply in self._exchange(grid, records, f"round {server_round} unmasking"):
                self.session.receive_reveal(Reveal.from_dict(reply))
        return self.session.decode(server_round)

    def _exchange(self, grid: Grid, records: Mapping[int, Mapping[str, Any]], stage: str,
                  needed: int = 0) -> list[tuple[int, dict[str, Any]]]:
        """Send each node its protocol message; the replies' protocol messages (failures
        logged with the sites' reasons; :class:`RoundFailedError` with them when fewer than
        ``needed`` sites answered)."""
        if not records:
            return []
        messages = [Message(RecordDict({PROTOCOL_RECORD: ConfigRecord(dict(record))}),
                            dst_node_id=node, message_type=MessageType.TRAIN)
                    for node, record in records.items()]
        answered, reasons = [], []
        replies = list(grid.send_and_receive(messages, timeout=self.timeout))
        for reply in replies:
            node = reply.metadata.src_node_id
            if reply.has_error():
                reasons.append(failure_reason(reply))
            elif not is_protocol_message(reply.content):
                reasons.append(f"node {node}: no secure-aggregation reply")
            else:
                answered.append((node, dict(reply.content[PROTOCOL_RECORD])))
        missing = len(records) - len(answered) - len(reasons)
        if missing > 0:
            reasons.append(no_reply(missing, records, replies))
        for reason in reasons:
            logger.warning("secure aggregation, %s: a site failed: %s", stage, reason)
        self.failures += [f"secure aggregation, {stage}: {reason}" for reason in reasons]
        if len(answered) < needed:
            raise RoundFailedError(
                f"secure aggregation {stage}: {len(answered)} site(s) answered, below the "
                f"threshold {needed}; failures: {reasons[:5]}",
                failures=reasons,
            )
        return answered

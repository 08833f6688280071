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

**Groups** (``group_size``, :mod:`fedpca.algorithms.sum_groups`). With a group size the
ready sites are dealt into groups by the names they said in the readiness round
(:func:`~fedpca.algorithms.sum_groups.assign_groups`, as the Flower-free reference deals its
sites) before the setup, and each group runs its own :class:`ServerSession`, of its own
threshold (:func:`~fedpca.secure.conditions.smallest_threshold` of its size), all of them in
the same Flower exchanges: every site receives its own group's message of each stage. A site
simply takes part in one key agreement whose key list is its group, and its own checks of
that list (:mod:`fedpca.secure.conditions`, its ``M`` and ``c``) are what guarantee that
every group sum it helps reveal holds at least ``M`` honest members: a group the coordinator
makes too small is refused by its members. :meth:`VerifiedSecureAggregation.unmask` returns
one sum per group, :meth:`VerifiedSecureAggregation.group_of` says which a site's answer is in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid

from fedpca.algorithms.secure_sum import SUM_PREFIX, SecureSum, SumDescription
from fedpca.algorithms.sum_groups import assign_groups
from fedpca.errors import ConfigurationError
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


@dataclass(eq=False)
class SumGroup:
    """One secure sum's key agreement: its session, the nodes asked to join it and the
    member name each node advertised (node id -> name, once it advertised a key)."""

    session: ServerSession
    nodes: tuple[int, ...]
    members: dict[int, str] = field(default_factory=dict)

    @property
    def threshold(self) -> int:
        """The group's Shamir threshold ``t``."""
        return self.session.params.threshold


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
        group_size (int, default 0): sum the sites in groups of at least this many sites
            (at least ``M + c``), one secure sum per group (module docstring); 0: one sum of
            every site.
    """

    def __init__(self, *, min_sites: int, colluders: int = 0, modulus: int = DEFAULT_MODULUS,
                 timeout: float, group_size: int = 0) -> None:
        self.min_sites, self.colluders = min_sites, colluders
        self.modulus, self.timeout, self.group_size = modulus, timeout, group_size
        #: Each secure sum's key agreement, in group order (one without groups).
        self.groups: list[SumGroup] = []
        #: node id -> its group (every node asked to join a key agreement).
        self._group_of: dict[int, SumGroup] = {}
        #: Why sites failed an exchange since the round's strategy last asked
        #: (:meth:`take_failures`).
        self.failures: list[str] = []

    def take_failures(self) -> list[str]:
        """The sites' failures in the exchanges since the last call (then forgotten)."""
        failures, self.failures = self.failures, []
        return failures

    def __repr__(self) -> str:
        return (f"VerifiedSecureAggregation(min_sites={self.min_sites}, "
                f"colluders={self.colluders}, modulus={self.modulus}, "
                f"group_size={self.group_size})")

    def partition(self, sites: Mapping[int, str]) -> list[tuple[int, ...]]:
        """``sites`` (node id -> the name it said) as the run's groups of nodes: every node
        in one group without a group size, else dealt by name
        (:func:`~fedpca.algorithms.sum_groups.assign_groups`, refused below ``M + c``).

        Raises:
            ConfigurationError: two nodes said the same name, or ``group_size`` is below
                ``M + c`` or above the sites.
        """
        if not self.group_size:
            return [tuple(sites)]
        node_of = {name: node for node, name in sites.items()}
        if len(node_of) < len(sites):
            names = list(sites.values())
            shared = sorted({name for name in names if names.count(name) > 1})
            raise ConfigurationError(
                f"several ready sites are named {shared}; secure sums in groups deal the "
                "sites by name: give every site its own name")
        groups = assign_groups(list(node_of), self.group_size, self.min_sites + self.colluders)
        return [tuple(node_of[name] for name in group) for group in groups]

    def setup(self, grid: Grid, sites: Mapping[int, str],
              sums: Sequence[SecureSum | None]) -> None:
        """The run's key agreements with ``sites`` (node id -> the name it said in the
        readiness round), one per group (:meth:`partition`), for one round per entry of
        ``sums`` (each round's secure sum, or ``None``), under the run's agreed description
        of them (:class:`~fedpca.algorithms.secure_sum.SumDescription`, which every site
        signs); raises :class:`RoundFailedError` with the sites' reasons when too few of a
        group take part."""
        description = SumDescription(self.min_sites, self.colluders, tuple(sums)).to_text()
        self.groups = [
            SumGroup(ServerSession(str(grid.run.run_id), len(sums), smallest_threshold(
                len(nodes), self.colluders, self.min_sites), self.modulus, description), nodes)
            for nodes in self.partition(sites)]
        self._group_of = {node: group for group in self.groups for node in group.nodes}
        requests = {node: group.session.setup_request().to_dict()
                    for group in self.groups for node in group.nodes}
        for node, reply in self._exchange(grid, requests, "setup", quorum=True):
            advertisement = Advertisement.from_dict(reply)
            group = self._group_of[node]
            group.session.receive_advertisement(advertisement)
            group.members[node] = advertisement.member
        key_lists = {}
        for group in self.groups:
            key_list = group.session.key_list().to_dict()
            key_lists.update(dict.fromkeys(group.members, key_list))
        for node, reply in self._exchange(grid, key_lists, "shares", quorum=True):
            self._group_of[node].session.receive_bundle(ShareBundle.from_dict(reply))
        for index, group in enumerate(self.groups):
            logger.info("secure aggregation: %d sites agreed keys in group %d of %d, "
                        "threshold %d", len(group.members), index + 1, len(self.groups),
                        group.threshold)

    def group_of(self, node: int) -> int | None:
        """The index of the group whose sum holds ``node``'s answers; ``None`` without a
        group size (one sum of every site)."""
        return self.groups.index(self._group_of[node]) if self.group_size else None

    def input_records(
        self, server_round: int, config: Mapping[str, Any]
    ) -> dict[int, ConfigRecord]:
        """Each site's input request for ``server_round`` (the padded length of the secure
        sum ``config`` describes), from its group's session."""
        length = next_power_of_two(int(config[SUM_PREFIX + "dimension"]))
        records = {}
        for group in self.groups:
            requests = group.session.input_requests(server_round, length)
            records.update({node: ConfigRecord(requests[member].to_dict())
                            for node, member in group.members.items() if member in requests})
        return records

    def unmask(self, grid: Grid, server_round: int, replies: Sequence[Message]
               ) -> list[np.ndarray]:
        """Each group's exact sum modulo the modulus of its members' masked answers in
        ``replies`` (in group order), after the consistency round and the unmasking, the
        groups' messages in the same exchanges (repeated, for the groups still undecoded,
        with more survivors when one asked fails;
        :class:`~fedpca.secure.server_session.SecureAggregationError` when too few of a
        group remain)."""
        for reply in replies:
            self._group_of[reply.metadata.src_node_id].session.receive_masked_input(
                read_masked_input(reply.content))
        while pending := [g for g in self.groups if not g.session.decodable(server_round)]:
            requests = {}  # a retry only after a failure
            for group in pending:
                request = group.session.consistency_request(server_round).to_dict()
                endorsers = set(group.session.endorsers(server_round))
                requests.update({node: request for node, member in group.members.items()
                                 if member in endorsers})
            for node, reply in self._exchange(grid, requests,
                                              f"round {server_round} consistency"):
                self._group_of[node].session.receive_endorsement(Endorsement.from_dict(reply))
            records = {}
            for group in pending:
                unmask = group.session.unmask_requests(server_round)
                records.update({node: unmask[member].to_dict()
                                for node, member in group.members.items() if member in unmask})
            for node, reply in self._exchange(grid, records, f"round {server_round} unmasking"):
                self._group_of[node].session.receive_reveal(Reveal.from_dict(reply))
        return [group.session.decode(server_round) for group in self.groups]

    def _exchange(self, grid: Grid, records: Mapping[int, Mapping[str, Any]], stage: str,
                  quorum: bool = False) -> list[tuple[int, dict[str, Any]]]:
        """Send each node its protocol message; the replies' protocol messages (failures
        logged with the sites' reasons; with ``quorum``, :class:`RoundFailedError` with them
        when fewer of a group's nodes answered than its threshold)."""
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
        for index, group in enumerate(self.groups if quorum else ()):
            count = sum(self._group_of[node] is group for node, _ in answered)
            if count < group.threshold:
                within = f" in group {index + 1} of {len(self.groups)}" if self.group_size else ""
                raise RoundFailedError(
                    f"secure aggregation {stage}: {count} site(s) answered{within}, below the "
                    f"threshold {group.threshold}; failures: {reasons[:5]}",
                    failures=reasons,
                )
        return answered

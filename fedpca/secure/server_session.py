"""The honest server's side of the secure aggregation: :class:`ServerSession`.

It drives the stages of :mod:`fedpca.secure` (setup, then each round's input, consistency and
unmasking), collects and relays the sites' messages, and decodes each round's sum exactly.
Nothing a site's guarantee rests on is checked here: a site checks every message itself
(:class:`~fedpca.secure.site_session.SiteSession`), so a hostile coordinator gains nothing by
replacing this object. What it does check keeps an honest run from decoding garbage: a
message that does not fit the protocol raises
:class:`~fedpca.secure.conditions.ProtocolRefusal` (the server drops it), and a round it
cannot decode raises :class:`SecureAggregationError`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from fedpca.errors import ConfigurationError, FedPCAError, InvalidDataError
from fedpca.secure import shamir
from fedpca.secure.keys import KEY_BYTES, MAX_LENGTH, MAX_MODULUS, mask_sign, prg_sum
from fedpca.secure import messages
from fedpca.secure.wire import refuse

__all__ = ["SecureAggregationError", "ServerSession"]

logger = logging.getLogger(__name__)


class SecureAggregationError(FedPCAError):
    """The server cannot decode a round (too few survivors or reveals, or lost seeds);
    nothing was unmasked."""


@dataclass
class _Round:
    length: int
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    survivors: tuple[str, ...] = ()
    #: The endorsers of the current consistency attempt, those of them who endorsed (once
    #: the unmask requests are made), and the survivors who failed an earlier attempt.
    asked: tuple[str, ...] = ()
    endorsements: dict[str, messages.Endorsement] = field(default_factory=dict)
    endorsers: tuple[str, ...] = ()
    failed: set[str] = field(default_factory=set)
    reveals: dict[str, messages.Reveal] = field(default_factory=dict)
    result: np.ndarray | None = None


class ServerSession:
    """The honest server: drives the stages, collects and relays, decodes each round's sum.

    A message that does not fit the protocol raises :class:`ProtocolRefusal` (the server drops
    it); a round it cannot decode raises :class:`SecureAggregationError`.
    """

    def __init__(self, run_id: str, rounds: int, threshold: int, modulus: int,
                 description: str = "") -> None:
        self.params = messages.SetupRequest(run_id, rounds, threshold, modulus, description)
        if modulus > MAX_MODULUS or modulus & (modulus - 1):
            raise ConfigurationError("the modulus must be a power of two between 2 and 2**62")
        self._ads: dict[str, messages.Advertisement] = {}
        self._members: tuple[str, ...] = ()
        self._bundles: dict[str, messages.ShareBundle] = {}
        self._setup_members: tuple[str, ...] = ()
        self._rounds: dict[int, _Round] = {}

    @property
    def setup_members(self) -> tuple[str, ...]:
        """``U_setup``: the members whose shares were relayed (empty before round one)."""
        return self._setup_members

    def setup_request(self) -> messages.SetupRequest:
        """S1: the request every member gets."""
        return self.params

    def receive_advertisement(self, ad: messages.Advertisement) -> None:
        """Collect one S1 reply."""
        if self._members or ad.run_id != self.params.run_id or ad.member in self._ads:
            refuse("an advertisement out of order, of another run, or repeated")
        self._ads[ad.member] = ad

    def key_list(self) -> messages.KeyList:
        """S2: every advertisement collected (the member set is fixed from here on)."""
        if len(self._ads) < self.params.threshold:
            raise SecureAggregationError(f"fewer members advertised keys than the threshold "
                                         f"t={self.params.threshold}; wait for more members")
        self._members = tuple(sorted(self._ads))
        return messages.KeyList(self.params.run_id, tuple(self._ads[m] for m in self._members))

    def receive_bundle(self, bundle: messages.ShareBundle) -> None:
        """Collect one S2 reply."""
        expected = set(self._members) - {bundle.member}
        if (bundle.member not in self._members or bundle.run_id != self.params.run_id
                or set(bundle.ciphertexts) != expected or self._setup_members):
            refuse("a share bundle out of order, of another run, or not for every member")
        self._bundles[bundle.member] = bundle

    def input_requests(self, round_number: int, length: int) -> dict[str, messages.InputRequest]:
        """A round's input requests, one per member of ``U_setup`` (the first also relays)."""
        if not 1 <= round_number <= self.params.rounds or round_number in self._rounds:
            raise ConfigurationError(f"round {round_number} is out of range or already started")
        if not 0 < length <= MAX_LENGTH:
            raise ConfigurationError("the vector length must be between 1 and 2**27")
        relay = not self._setup_members
        if relay:
            if len(self._bundles) < self.params.threshold:
                raise SecureAggregationError("fewer members sent shares than the threshold; the "
                                             "run cannot go on")
            self._setup_members = tuple(sorted(self._bundles))
        self._rounds[round_number] = _Round(length)
        members = self._setup_members
        return {member: messages.InputRequest(
                    self.params.run_id, round_number, length, members if relay else (),
                    {j: self._bundles[j].ciphertexts[member] for j in members
                     if j != member} if relay else {})
                for member in members}

    def receive_masked_input(self, message: messages.MaskedInput) -> None:
        """Collect one masked input (before the round's consistency request)."""
        state = self._round(message.round)
        vector = message.vector
        if (message.member not in self._setup_members or message.member in state.inputs
                or state.survivors or vector.shape != (state.length,) or vector.min() < 0
                or vector.max() >= self.params.modulus):
            refuse("a masked input out of order, repeated, or malformed")
        state.inputs[message.member] = vector

    def consistency_request(self, round_number: int) -> messages.ConsistencyRequest:
        """``U3``, the members whose masked inputs arrived, and the survivors asked to
        endorse it (:meth:`endorsers`). Called again when the last attempt got fewer than
        ``t`` reveals (:meth:`decodable`): the same ``U3``, endorsed by every survivor that
        has not failed an attempt. Fails below the threshold, or when a survivor failed to
        reveal after members dropped before the input (design point (d))."""
        state = self._round(round_number)
        threshold = self.params.threshold
        if len(state.inputs) < threshold:
            raise SecureAggregationError(
                f"round {round_number}: fewer survivors than the threshold t={threshold}; the "
                "round fails and nothing is unmasked")
        if not state.survivors:
            state.survivors = tuple(sorted(state.inputs))
            everyone = self._dropped(state)
            state.asked = state.survivors if everyone else state.survivors[:threshold]
        else:
            if self._dropped(state):  # every survivor was asked, and one did not reveal
                raise SecureAggregationError(
                    f"round {round_number}: a survivor dropped before revealing while other "
                    "members had dropped before the input stage, so their pairwise masks are "
                    "lost; the round fails and nothing is unmasked")
            state.failed |= (set(state.asked) - set(state.endorsements)) | (
                set(state.endorsers) - set(state.reveals))
            state.asked = tuple(m for m in state.survivors if m not in state.failed)
            if len(state.asked) < threshold:
                raise SecureAggregationError(
                    f"round {round_number}: fewer than t={threshold} survivors endorse and "
                    "reveal; the round fails and nothing is unmasked")
        state.endorsements, state.endorsers = {}, ()
        return messages.ConsistencyRequest(self.params.run_id, round_number, state.survivors,
                                           state.asked)

    def endorsers(self, round_number: int) -> tuple[str, ...]:
        """The survivors asked to endorse ``U3`` and then to reveal. First, every survivor
        when a member of ``U_setup`` sent no input (each must reveal its pairwise seed with
        it), else the first ``t``: ``t`` endorsements and ``t`` reveals unmask the sum, so
        the last two exchanges of a round go to ``t`` sites, not all (and each endorser MACs
        only the others asked). If one of them fails, the next attempt
        (:meth:`consistency_request`) asks every survivor that has not failed. (Which
        survivors endorse is the server's choice and changes nothing a site checks: a site
        may endorse the same ``U3`` again, for another list of endorsers, and reveals once.)"""
        return self._round(round_number).asked

    def receive_endorsement(self, message: messages.Endorsement) -> None:
        """Collect one endorsement."""
        state = self._round(message.round)
        if (message.member not in state.asked or state.endorsers
                or set(message.macs) != set(state.asked) - {message.member}):
            refuse("an endorsement out of order or not for every other endorser")
        state.endorsements[message.member] = message

    def unmask_requests(self, round_number: int) -> dict[str, messages.UnmaskRequest]:
        """One unmask request per endorser that has not revealed yet, with the MACs of this
        attempt addressed to it (none below ``t`` endorsements: :meth:`decodable` is then
        false and the next attempt asks more survivors)."""
        state = self._round(round_number)
        endorsers = tuple(sorted(state.endorsements))
        if len(endorsers) < self.params.threshold:
            return {}
        state.endorsers = endorsers
        return {
            i: messages.UnmaskRequest(
                self.params.run_id, round_number, state.survivors,
                {j: state.endorsements[j].macs[i] for j in endorsers if j != i})
            for i in endorsers if i not in state.reveals
        }

    def decodable(self, round_number: int) -> bool:
        """Whether the reveals suffice: ``t`` of them, and every survivor's when members
        dropped before the input."""
        state = self._round(round_number)
        return len(state.reveals) >= self.params.threshold and (
            not self._dropped(state) or set(state.survivors) <= set(state.reveals))

    def _dropped(self, state: _Round) -> bool:
        """Whether members of ``U_setup`` sent no input this round."""
        return set(state.survivors) != set(self._setup_members)

    def receive_reveal(self, message: messages.Reveal) -> None:
        """Collect one reveal."""
        state = self._round(message.round)
        dropped = set(self._setup_members) - set(state.survivors)
        if (message.member not in state.endorsers or message.member in state.reveals
                or message.share_members != state.survivors or set(message.seeds) != dropped):
            refuse("a reveal out of order, repeated, or not for the survivor set")
        state.reveals[message.member] = message

    def decode(self, round_number: int) -> np.ndarray:
        """The round's exact sum of the survivors' values modulo the modulus (int64)."""
        state = self._round(round_number)
        if state.result is not None:
            return state.result.copy()
        threshold, modulus = self.params.threshold, self.params.modulus
        if not state.survivors or len(state.reveals) < threshold:
            raise SecureAggregationError(
                f"round {round_number}: fewer reveals than the threshold t={threshold}; the "
                "round fails and nothing is unmasked")
        dropped = [j for j in self._setup_members if j not in state.survivors]
        silent = [i for i in state.survivors if i not in state.reveals]
        if dropped and silent:
            raise SecureAggregationError(
                f"round {round_number}: a survivor dropped before revealing while other members "
                "had dropped before the input stage, so their pairwise masks are lost; the round "
                "fails and nothing is unmasked")
        total = np.sum([state.inputs[i] for i in state.survivors], axis=0, dtype=np.uint64)
        pairs = [(i, j) for i in (state.survivors if dropped else ()) for j in dropped]
        total -= prg_sum(
            self._self_mask_seeds(state, round_number)
            + [state.reveals[i].seeds[j] for i, j in pairs if mask_sign(i, j) > 0],
            [state.reveals[i].seeds[j] for i, j in pairs if mask_sign(i, j) < 0],
            state.length, modulus)
        state.result = (total & np.uint64(modulus - 1)).astype(np.int64)
        logger.info("server decoded round %d", round_number)
        return state.result.copy()

    def _self_mask_seeds(self, state: _Round, round_number: int) -> list[bytes]:
        revealers = sorted(state.reveals)[: self.params.threshold]
        points = np.array([self._members.index(m) + 1 for m in revealers])
        shares = np.stack([state.reveals[m].shares for m in revealers])
        elements = shamir.reconstruct(points, shares)
        try:
            return [shamir.elements_to_bytes(e, KEY_BYTES) for e in elements]
        except InvalidDataError:
            raise SecureAggregationError(
                f"round {round_number}: the revealed shares do not reconstruct the self-mask "
                "seeds (a member sent wrong shares); the round fails") from None

    def _round(self, round_number: int) -> _Round:
        state = self._rounds.get(round_number)
        if state is None:
            refuse(f"round {round_number} has not started")
        return state

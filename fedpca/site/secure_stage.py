"""A site's side of fedpca's verifiable secure aggregation, one protocol message at a time.

The protocol itself is the Flower-free :class:`fedpca.secure.site_session.SiteSession`; this
module keeps the site's session between messages in the run's state (the SuperNode's memory
for this run; it never leaves the site) and wraps the input stage around the site's ordinary
answer (:func:`fedpca.site.answer.answer_request`, masked by the protocol).

What a hostile coordinator could try here, and what stops it:

* **a setup below the site's policy** (threshold 1, the site alone, fewer than ``M``
  honest members, keys it made itself, Sybils): the session refuses before the site sends
  anything masked (:mod:`fedpca.secure.conditions`, the roster's signatures);
* **different sums for different members** (a coarser grid, more records, more sites per
  sum, another noise or rotation for the target's peers, so that their noise counts for
  little in the target's units): the setup carries the run's one description of every
  round's sum (:class:`~fedpca.algorithms.secure_sum.SumDescription`), read and checked here
  before the site advertises (its rounds, and the ``M`` and ``c`` its threshold assumes, no
  fewer than the site's own); the site's signature covers it, so peers shown another one
  refuse the site's advertisement and it theirs, before any share is sent; and a round's
  input request must name exactly the description's sum for that round, or it is refused
  before anything is computed or charged;
* **a masked answer the site cannot give**: the input request is checked against the
  session (round, length) and against the secure sum it names (modulus, padded length)
  *before* the site's answer is computed and charged; the site's own checks of the sum
  (sensitivity, record bound, ``M``, the agreed noise against its own budget) follow in the
  answer, still before the charge;
* **two answers for one round, or an unmask of another survivor set**: refused by the
  session, which masks once per round and reveals at most once per round and only for the
  set it endorsed; a real site also records its key list, each masked input (before it is
  computed and charged), each endorsement and each reveal in its ledger before the reply
  leaves (:class:`StepJournal`), so a second one for the same round is refused even from
  another process or after a restart, whatever the run's state holds;
* **Sybils in the roster**: members the site did not vouch for count as colluders
  (:mod:`fedpca.secure.vouching`); the recorded key list says how many there were;
* **a run id or stage out of order**: refused; a refused message leaves the session as it was.

Privacy guarantee: unchanged by this module; the site's release is charged to its ledger
with both guarantees (:class:`~fedpca.dp.events.Release`) before the masked vector is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from fedpca.algorithms.secure_sum import SUM_KEYS, SumDescription
from fedpca.dp.hadamard import next_power_of_two
from fedpca.errors import InvalidRequestError
from fedpca.secure.authenticated import description_digest
from fedpca.secure.conditions import ProtocolRefusal
from fedpca.secure.identity import SecureIdentity
from fedpca.secure.messages import (
    ConsistencyRequest,
    InputRequest,
    KeyList,
    SetupRequest,
    UnmaskRequest,
    message_from_dict,
)
from fedpca.secure.site_session import SiteSession
from fedpca.site.answer import Answer, ProtocolMasking
from fedpca.site.ledger_records import ENDORSE, INPUT, KEY_LIST, REVEAL

logger = logging.getLogger(__name__)

#: The run state's key of the site's session between messages.
SESSION = "secure-session"


class RunState(Protocol):
    """What a site keeps between the messages of one run (the SuperNode's memory)."""

    def load(self, key: str) -> bytes | None: ...

    def store(self, key: str, value: bytes) -> None: ...


class StepJournal(Protocol):
    """Where a site records the protocol steps it takes once per run and round."""

    def record_step(self, run_id: str, round_number: int, stage: str, note: str) -> None:
        """Record ``stage`` of ``round_number`` before its reply leaves; raises to refuse a
        second record of it."""


#: ``masking -> answer``: the site's ordinary answer to the input stage's request, masked.
AnswerFn = Callable[[ProtocolMasking], Answer]


def protocol_reply(identity: SecureIdentity | None, run_id: str, message: Mapping[str, Any],
                   config: Mapping[str, Any], state: RunState, journal: StepJournal,
                   answer: AnswerFn) -> tuple[dict[str, Any], Answer | None]:
    """The site's reply to one protocol ``message`` (a request's ``config`` names the secure
    sum at the input stage): the reply message, and at the input stage the site's masked
    answer (its one array the masked vector). Raises, changing nothing, to refuse; a refusal
    names the site."""
    if identity is None:
        raise InvalidRequestError(
            "refused: this site takes part in no verified secure aggregation (its policy "
            "sets no secure-aggregation min-sites, roster and signing key)"
        )
    try:
        return _reply(identity, run_id, message, config, state, journal, answer)
    except ProtocolRefusal as refusal:
        raise ProtocolRefusal(f"{identity.member}: refused: {refusal}") from None


def _reply(identity: SecureIdentity, run_id: str, message: Mapping[str, Any],
           config: Mapping[str, Any], state: RunState, journal: StepJournal,
           answer: AnswerFn) -> tuple[dict[str, Any], Answer | None]:
    request = message_from_dict(dict(message))
    if getattr(request, "run_id", run_id) != run_id:
        raise InvalidRequestError(f"{identity.member}: refused: the protocol message names "
                                  "another run than the one it arrived in")
    session = _session(identity, state, new=isinstance(request, SetupRequest))
    masked = None
    if isinstance(request, SetupRequest):
        _check_description(identity, request)
        reply = session.advertise(request).to_dict()
    elif isinstance(request, KeyList):
        reply = session.share(request).to_dict()
        journal.record_step(run_id, 0, KEY_LIST, _key_list_note(session))
    elif isinstance(request, InputRequest):
        reply, masked = _masked_answer(session, request, config, journal, answer)
    elif isinstance(request, ConsistencyRequest):
        reply = session.endorse(request).to_dict()
        journal.record_step(run_id, request.round, ENDORSE, "")
    elif isinstance(request, UnmaskRequest):
        reply = session.unmask(request).to_dict()
        journal.record_step(run_id, request.round, REVEAL, "")
    else:
        raise InvalidRequestError(f"{identity.member}: refused: a {request.KIND} message is "
                                  "a site's reply, not a request")
    state.store(SESSION, session.to_bytes())
    return reply, masked


def _key_list_note(session: SiteSession) -> str:
    """What the ledger's row of the run says about its key list (public counts) and the sums
    its members agreed on (their description's digest, which every member signed)."""
    members, unvouched = session.key_list_members or (0, 0)
    agreed = f"; sums agreed as description {description_digest(session.parameters).hex()[:16]}"
    if not unvouched:
        return f"{members} members, every one vouched for by this site{agreed}"
    return (f"{members} members, {unvouched} not vouched for by this site (counted as "
            f"colluders){agreed}")


def _check_description(identity: SecureIdentity, request: SetupRequest) -> None:
    """Refuse, before the site advertises, a setup whose description of the run's sums is
    not one (:meth:`SumDescription.from_text`), covers another number of rounds, or assumes
    fewer honest members ``M`` or colluders ``c`` than the site's own policy."""
    description = SumDescription.from_text(request.description, identity.member)
    if description.rounds != request.rounds:
        raise InvalidRequestError(
            f"{identity.member}: refused: the run's description covers {description.rounds} "
            f"rounds and the setup asks for {request.rounds}; nothing was sent")
    if (description.min_sites < identity.min_sites
            or description.colluders < identity.colluders):
        raise InvalidRequestError(
            f"{identity.member}: refused: the run's sums assume M={description.min_sites} "
            f"honest members and c={description.colluders} colluders, fewer than this site's "
            f"M={identity.min_sites}, c={identity.colluders}; nothing was sent")


def _masked_answer(session: SiteSession, request: InputRequest, config: Mapping[str, Any],
                   journal: StepJournal, answer: AnswerFn) -> tuple[dict[str, Any], Answer]:
    """The input stage: check, record the step (once per run and round, before anything is
    computed or charged), answer (charging the ledger), mask."""
    session.check_input(request)
    _check_sum(session, request, config)
    journal.record_step(request.run_id, request.round, INPUT, "")
    plain = answer(ProtocolMasking(session.parameters.modulus))
    (residues,) = plain.values
    masked = session.masked_input(request, np.asarray(residues, dtype=np.int64))
    header = {k: v for k, v in masked.to_dict().items() if k != "vector"}
    return header, Answer(plain.site, [masked.vector], plain.weight, plain.metrics)


def _check_sum(session: SiteSession, request: InputRequest, config: Mapping[str, Any]) -> None:
    """Refuse, before the answer is computed, an input request whose secure sum is not the
    one the run's agreed description names for its round (field by field: the grid, the
    noise, the record bound and every other), or whose length or modulus is not that sum's
    (the site's residues could not be masked). Quotes field names only."""
    params = session.parameters
    agreed = SumDescription.from_text(params.description, session.member).round_sum(
        request.round)
    if agreed is None:
        raise InvalidRequestError(f"{session.member}: refused: the run's agreed description "
                                  f"has no secure sum in round {request.round}; nothing was "
                                  "released")
    expected = agreed.to_config()
    differing = sorted(key for key in SUM_KEYS if config.get(key) != expected[key])
    if differing:
        raise InvalidRequestError(
            f"{session.member}: refused: the request's secure sum differs from the one the "
            f"run's members agreed for round {request.round} in {differing}; nothing was "
            "released")
    if request.length != next_power_of_two(agreed.dimension) or agreed.modulus != params.modulus:
        raise InvalidRequestError(
            f"{session.member}: refused: the input request's length {request.length} and "
            f"modulus {params.modulus} are not those of the run's agreed sum (padded length "
            f"{next_power_of_two(agreed.dimension)}, modulus {agreed.modulus}); nothing was "
            "released"
        )


def _session(identity: SecureIdentity, state: RunState, new: bool) -> SiteSession:
    if new:
        if state.load(SESSION) is not None:
            logger.warning("%s: a new secure-aggregation setup in the same run replaces the "
                           "previous one", identity.member)
        return SiteSession(identity.member, identity.signing_key, identity.roster,
                           min_sites=identity.min_sites, colluders=identity.colluders,
                           max_rounds=identity.max_rounds, vouched=identity.vouched)
    stored = state.load(SESSION)
    if stored is None:
        raise InvalidRequestError(f"{identity.member}: refused: no secure-aggregation setup "
                                  "in this run yet")
    return SiteSession.from_bytes(stored, identity.signing_key, identity.roster,
                                  identity.vouched)

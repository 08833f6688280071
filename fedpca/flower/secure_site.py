"""A site's side of fedpca's verifiable secure aggregation, in its Flower ClientApp.

The protocol itself is the Flower-free :class:`fedpca.secure.site_session.SiteSession`; this
module only moves its messages: a request carries one protocol message in the ConfigRecord
:data:`PROTOCOL_RECORD`, the site's session lives between messages in ``context.state``
(the SuperNode's memory for this run; it never leaves the site), and the input stage wraps
the site's ordinary answer (:func:`fedpca.flower.clientapp.answer_request`).

What a hostile coordinator could try here, and what stops it:

* **a setup below the site's policy** (threshold 1, the site alone, fewer than ``M``
  honest members, keys it made itself, Sybils): the session refuses before the site sends
  anything masked (:mod:`fedpca.secure.conditions`, the roster's signatures);
* **a masked answer the site cannot give**: the input request is checked against the
  session (round, length) and against the secure sum it names (modulus, padded length)
  *before* the site's answer is computed and charged; the site's own checks of the sum
  (sensitivity, record bound, ``M``) follow in the answer, still before the charge;
* **two answers for one round, or an unmask of another survivor set**: refused by the
  session, which reveals at most once per round and only for the set it endorsed;
* **a run id or stage out of order**: refused; a refused message leaves the session as it was.

Privacy guarantee: unchanged by this module; the site's release is charged to its ledger
with both guarantees (:class:`~fedpca.dp.events.Release`) before the masked vector
is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

from fedpca.algorithms.secure_sum import SUM_PREFIX
from fedpca.flower.wire import ARRAYS, CONFIG
from fedpca.flower.secagg_plus import PROTOCOL_MASKED_RECORD
from fedpca.errors import InvalidRequestError
from fedpca.dp.hadamard import next_power_of_two
from fedpca.secure.conditions import ProtocolRefusal
from fedpca.secure.identity import SecureIdentity
from fedpca.secure.messages import (
    ConsistencyRequest,
    InputRequest,
    KeyList,
    MaskedInput,
    SetupRequest,
    UnmaskRequest,
    message_from_dict,
)
from fedpca.secure.site_session import SiteSession

logger = logging.getLogger(__name__)

#: The ConfigRecord holding one protocol message (request or reply).
PROTOCOL_RECORD = "fedpca.secagg"
#: ``context.state``'s ConfigRecord holding the site's session between messages.
STATE_RECORD = "fedpca.secagg.session"

#: ``context -> SecureIdentity | None``: the site's identity in secure aggregation, from its
#: own policy (``None``: the site takes part in none).
IdentityFn = Callable[[Context], SecureIdentity | None]
#: ``(request content, context) -> answer content``: the site's ordinary Message-API answer.
AnswerFn = Callable[[RecordDict, Context], RecordDict]
RecordT = TypeVar("RecordT", ArrayRecord, ConfigRecord)


def is_protocol_message(content: RecordDict) -> bool:
    """Whether a train message carries a secure-aggregation protocol message."""
    return isinstance(content.get(PROTOCOL_RECORD), ConfigRecord)


def answer_protocol(
    message: Message, context: Context, identity_fn: IdentityFn, answer: AnswerFn
) -> Message:
    """The site's reply to one protocol message (raises, changing nothing, to refuse; a
    refusal names the site)."""
    identity = identity_fn(context)
    try:
        return _answer(message, context, identity, answer)
    except ProtocolRefusal as refusal:
        raise ProtocolRefusal(f"{identity.member}: refused: {refusal}") from None


def _answer(message: Message, context: Context, identity: SecureIdentity | None,
            answer: AnswerFn) -> Message:
    if identity is None:
        raise InvalidRequestError(
            "refused: this site takes part in no verified secure aggregation (its policy "
            "sets no secure-aggregation min-sites, roster and signing key)"
        )
    request = message_from_dict(dict(message.content[PROTOCOL_RECORD]))
    run_id = str(context.run_id)
    if getattr(request, "run_id", run_id) != run_id:
        raise InvalidRequestError(f"{identity.member}: refused: the protocol message names "
                                  "another run than the one it arrived in")
    session = _session(context, identity, new=isinstance(request, SetupRequest))
    if isinstance(request, SetupRequest):
        reply = session.advertise(request)
    elif isinstance(request, KeyList):
        reply = session.share(request)
    elif isinstance(request, InputRequest):
        return _masked_answer(message, context, session, request, answer)
    elif isinstance(request, ConsistencyRequest):
        reply = session.endorse(request)
    elif isinstance(request, UnmaskRequest):
        reply = session.unmask(request)
    else:
        raise InvalidRequestError(f"{identity.member}: refused: a {request.KIND} message is "
                                  "a site's reply, not a request")
    _store(context, session)
    return Message(RecordDict({PROTOCOL_RECORD: ConfigRecord(reply.to_dict())}),
                   reply_to=message)


def _masked_answer(message: Message, context: Context, session: SiteSession,
                   request: InputRequest, answer: AnswerFn) -> Message:
    """The input stage: check, answer (charging the ledger), mask, send."""
    session.check_input(request)
    content = message.content
    config = _record(content, CONFIG, ConfigRecord)
    _check_sum(session, request, config)
    plain = RecordDict({ARRAYS: _record(content, ARRAYS, ArrayRecord), CONFIG: config})
    context.state[PROTOCOL_MASKED_RECORD] = ConfigRecord({"modulus": session.parameters.modulus})
    try:
        reply = answer(plain, context)
    finally:
        del context.state[PROTOCOL_MASKED_RECORD]
    (residues,) = reply[ARRAYS].to_numpy_ndarrays()
    masked = session.masked_input(request, np.asarray(residues, dtype=np.int64))
    _store(context, session)
    header = {k: v for k, v in masked.to_dict().items() if k != "vector"}
    records = RecordDict({**reply, ARRAYS: ArrayRecord([masked.vector]),
                          PROTOCOL_RECORD: ConfigRecord(header)})
    return Message(records, reply_to=message)


def _check_sum(session: SiteSession, request: InputRequest, config: ConfigRecord) -> None:
    """Refuse, before the answer is computed, an input request whose length or modulus is
    not the secure sum's it names (the site's residues could not be masked)."""
    dimension, modulus = config.get(SUM_PREFIX + "dimension"), config.get(SUM_PREFIX + "modulus")
    if not isinstance(dimension, int) or isinstance(dimension, bool) or dimension < 1:
        raise InvalidRequestError(f"{session.member}: refused: a masked request must describe "
                                  "its secure sum (sum_dimension); nothing was released")
    if request.length != next_power_of_two(dimension) or modulus != session.parameters.modulus:
        raise InvalidRequestError(
            f"{session.member}: refused: the input request's length {request.length} and "
            f"modulus {session.parameters.modulus} are not those of the secure sum it names "
            f"(padded length {next_power_of_two(dimension)}, modulus {modulus}); nothing was "
            "released"
        )


def read_masked_input(content: RecordDict) -> MaskedInput:
    """The :class:`MaskedInput` of a masked answer (header and the answer's one array)."""
    header = dict(_record(content, PROTOCOL_RECORD, ConfigRecord))
    (vector,) = _record(content, ARRAYS, ArrayRecord).to_numpy_ndarrays()
    return MaskedInput(str(header.get("member")), str(header.get("run_id")),
                       header.get("round"), vector)


def _session(context: Context, identity: SecureIdentity, new: bool) -> SiteSession:
    if new:
        if STATE_RECORD in context.state:
            logger.warning("%s: a new secure-aggregation setup in the same run replaces the "
                           "previous one", identity.member)
        return SiteSession(identity.member, identity.signing_key, identity.roster,
                           min_sites=identity.min_sites, colluders=identity.colluders,
                           max_rounds=identity.max_rounds)
    stored = context.state.get(STATE_RECORD)
    if stored is None:
        raise InvalidRequestError(f"{identity.member}: refused: no secure-aggregation setup "
                                  "in this run yet")
    return SiteSession.from_bytes(bytes(stored["session"]), identity.signing_key,
                                  identity.roster)


def _store(context: Context, session: SiteSession) -> None:
    context.state[STATE_RECORD] = ConfigRecord({"session": session.to_bytes()})


def _record(content: RecordDict, key: str, kind: type[RecordT]) -> RecordT:
    """``content``'s record ``key`` if it is a ``kind``, else an empty one (read directly:
    Flower's ``config_records`` view copies every record of the message on each access)."""
    record = content.get(key)
    return record if isinstance(record, kind) else kind()

"""A site's side of fedpca's verifiable secure aggregation, one protocol message at a time.

The protocol itself is the Flower-free :class:`fedpca.secure.site_session.SiteSession`; this
module keeps the site's session between messages in the run's state (the SuperNode's memory
for this run; it never leaves the site) and wraps the input stage around the site's ordinary
answer (:func:`fedpca.site.answer.answer_request`, masked by the protocol).

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
with both guarantees (:class:`~fedpca.dp.events.Release`) before the masked vector is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from fedpca.algorithms.secure_sum import SUM_PREFIX
from fedpca.dp.hadamard import next_power_of_two
from fedpca.errors import InvalidRequestError
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

logger = logging.getLogger(__name__)

#: The run state's key of the site's session between messages.
SESSION = "secure-session"


class RunState(Protocol):
    """What a site keeps between the messages of one run (the SuperNode's memory)."""

    def load(self, key: str) -> bytes | None: ...

    def store(self, key: str, value: bytes) -> None: ...


#: ``masking -> answer``: the site's ordinary answer to the input stage's request, masked.
AnswerFn = Callable[[ProtocolMasking], Answer]


def protocol_reply(identity: SecureIdentity | None, run_id: str, message: Mapping[str, Any],
                   config: Mapping[str, Any], state: RunState,
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
        return _reply(identity, run_id, message, config, state, answer)
    except ProtocolRefusal as refusal:
        raise ProtocolRefusal(f"{identity.member}: refused: {refusal}") from None


def _reply(identity: SecureIdentity, run_id: str, message: Mapping[str, Any],
           config: Mapping[str, Any], state: RunState,
           answer: AnswerFn) -> tuple[dict[str, Any], Answer | None]:
    request = message_from_dict(dict(message))
    if getattr(request, "run_id", run_id) != run_id:
        raise InvalidRequestError(f"{identity.member}: refused: the protocol message names "
                                  "another run than the one it arrived in")
    session = _session(identity, state, new=isinstance(request, SetupRequest))
    masked = None
    if isinstance(request, SetupRequest):
        reply = session.advertise(request).to_dict()
    elif isinstance(request, KeyList):
        reply = session.share(request).to_dict()
    elif isinstance(request, InputRequest):
        reply, masked = _masked_answer(session, request, config, answer)
    elif isinstance(request, ConsistencyRequest):
        reply = session.endorse(request).to_dict()
    elif isinstance(request, UnmaskRequest):
        reply = session.unmask(request).to_dict()
    else:
        raise InvalidRequestError(f"{identity.member}: refused: a {request.KIND} message is "
                                  "a site's reply, not a request")
    state.store(SESSION, session.to_bytes())
    return reply, masked


def _masked_answer(session: SiteSession, request: InputRequest, config: Mapping[str, Any],
                   answer: AnswerFn) -> tuple[dict[str, Any], Answer]:
    """The input stage: check, answer (charging the ledger), mask."""
    session.check_input(request)
    _check_sum(session, request, config)
    plain = answer(ProtocolMasking(session.parameters.modulus))
    (residues,) = plain.values
    masked = session.masked_input(request, np.asarray(residues, dtype=np.int64))
    header = {k: v for k, v in masked.to_dict().items() if k != "vector"}
    return header, Answer(plain.site, [masked.vector], plain.weight, plain.metrics)


def _check_sum(session: SiteSession, request: InputRequest, config: Mapping[str, Any]) -> None:
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


def _session(identity: SecureIdentity, state: RunState, new: bool) -> SiteSession:
    if new:
        if state.load(SESSION) is not None:
            logger.warning("%s: a new secure-aggregation setup in the same run replaces the "
                           "previous one", identity.member)
        return SiteSession(identity.member, identity.signing_key, identity.roster,
                           min_sites=identity.min_sites, colluders=identity.colluders,
                           max_rounds=identity.max_rounds)
    stored = state.load(SESSION)
    if stored is None:
        raise InvalidRequestError(f"{identity.member}: refused: no secure-aggregation setup "
                                  "in this run yet")
    return SiteSession.from_bytes(stored, identity.signing_key, identity.roster)

"""fedpca's verifiable secure aggregation on Flower's wire: a site's protocol messages.

A request carries one protocol message in the ConfigRecord :data:`PROTOCOL_RECORD` (at the
input stage, with the round's request: the ArrayRecord ``"arrays"`` and the ConfigRecord
``"config"``); the site's reply carries its protocol message in the same record, and at the
input stage its masked answer (the masked vector as its one array, the answer's public
numbers as usual). What the site does with a message is Flower-free
(:mod:`fedpca.site.secure_stage`, answered by :class:`~fedpca.site.service.SiteService`);
every field is UNTRUSTED and read as such here.
"""

from __future__ import annotations

from typing import TypeVar

from flwr.app import ArrayRecord, ConfigRecord, RecordDict

from fedpca.flower.wire import ARRAYS, CONFIG, answer_content
from fedpca.secure.messages import MaskedInput
from fedpca.site.service import ProtocolReply, Secure

#: The ConfigRecord holding one protocol message (request or reply).
PROTOCOL_RECORD = "fedpca.secagg"

RecordT = TypeVar("RecordT", ArrayRecord, ConfigRecord)


def is_protocol_message(content: RecordDict) -> bool:
    """Whether a train message carries a secure-aggregation protocol message."""
    return isinstance(content.get(PROTOCOL_RECORD), ConfigRecord)


def protocol_request(content: RecordDict) -> Secure:
    """The protocol stage a train message carries (with the round's request, if any)."""
    return Secure(dict(content[PROTOCOL_RECORD]),
                  _record(content, ARRAYS, ArrayRecord).to_numpy_ndarrays(),
                  dict(_record(content, CONFIG, ConfigRecord)))


def protocol_content(reply: ProtocolReply) -> RecordDict:
    """A site's protocol reply as a message's content."""
    message = ConfigRecord(reply.message)
    if reply.answer is None:
        return RecordDict({PROTOCOL_RECORD: message})
    return RecordDict({**answer_content(reply.answer), PROTOCOL_RECORD: message})


def read_masked_input(content: RecordDict) -> MaskedInput:
    """The :class:`MaskedInput` of a masked answer (header and the answer's one array)."""
    header = dict(_record(content, PROTOCOL_RECORD, ConfigRecord))
    (vector,) = _record(content, ARRAYS, ArrayRecord).to_numpy_ndarrays()
    return MaskedInput(str(header.get("member")), str(header.get("run_id")),
                       header.get("round"), vector)


def _record(content: RecordDict, key: str, kind: type[RecordT]) -> RecordT:
    """``content``'s record ``key`` if it is a ``kind``, else an empty one (read directly:
    Flower's ``config_records`` view copies every record of the message on each access)."""
    record = content.get(key)
    return record if isinstance(record, kind) else kind()

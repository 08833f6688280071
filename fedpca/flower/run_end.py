"""The message telling every site that a run failed, and the site's answer.

A multi-round run that stops part-way (a site stopped, a round fell below ``min_sites``, a
secure sum could not be unmasked) has cost every site that released in it budget that stays
spent; nobody gets a result. The coordinator's fedpca ServerApp then sends every site one
QUERY message (:func:`fedpca.flower.server.delivery.announce_failure`) whose content is
the ConfigRecord ``"run-end"`` (``status = "failed"`` and a ``reason``), so that each site's
ledger says what happened to the run (``failed: <reason>``) instead of leaving it open. A
site answers with the same record holding its name only.

Everything in the message is UNTRUSTED (:func:`read_run_end`): a hostile coordinator can
send it for any run, at any time, with any reason. It changes only the words of the site's
own ledger: never a budget (a failed run's releases stay charged), and only for a run the
site released in; the reason is cut to printable text of bounded length. A coordinator that
never sends it leaves the run ``stopped`` in the ledger.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, RecordDict

from fedpca.errors import InvalidRequestError
from fedpca.site.ledger_records import FAILED

#: The message's and the answer's ConfigRecord.
RUN_END = "run-end"
#: The longest reason a site keeps.
MAX_REASON = 200


def run_end_message(reason: str) -> RecordDict:
    """The content telling a site that its run failed for ``reason``."""
    return RecordDict({RUN_END: ConfigRecord({"status": FAILED, "reason": reason[:MAX_REASON]})})


def is_run_end_message(content: RecordDict) -> bool:
    """Whether a QUERY message announces a run's end."""
    return isinstance(content.get(RUN_END), ConfigRecord)


def read_run_end(content: RecordDict) -> str:
    """The reason a run-end message gives (UNTRUSTED): printable characters only, at most
    :data:`MAX_REASON` of them; refuses any other content or status."""
    record = content.get(RUN_END)
    if set(content) != {RUN_END} or not isinstance(record, ConfigRecord) or (
            record.get("status") != FAILED or not isinstance(record.get("reason"), str)):
        raise InvalidRequestError(
            f"refused: a run-end message holds only the ConfigRecord {RUN_END!r} with status "
            f"{FAILED!r} and a reason; nothing was recorded")
    return "".join(c for c in record["reason"] if c.isprintable())[:MAX_REASON]


def run_end_answer(site: str) -> RecordDict:
    """A site's acknowledgement: its name only."""
    return RecordDict({RUN_END: ConfigRecord({"site": site})})

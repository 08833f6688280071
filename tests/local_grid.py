"""A Flower grid without Ray: each node's ClientApp answers in this process. The strategies'
and ClientApp's real code runs; only the transport is left out."""

from types import SimpleNamespace

import pytest
from flwr.app import Context
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity

from fedpca.flower.secure_wire import PROTOCOL_RECORD

#: The run id every message and context of a local grid carries.
RUN_ID = 5


def set_run_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give Flower's messages the run's identity (Flower sets it in a real run)."""
    for attribute in ("_task_id", "_run_id", "_node_id"):
        monkeypatch.setattr(TaskIdentity, attribute, RUN_ID)


@pytest.fixture
def run_identity(monkeypatch):
    """:func:`set_run_identity` for one test."""
    set_run_identity(monkeypatch)


class LocalGrid:
    """``app`` answering for each node of ``contexts`` (node id -> its Context);
    ``drop(kind, node, round)`` decides which secure-aggregation messages a site never
    answers (a dropout). ``sent`` and ``types`` list each message's protocol kind and
    message type."""

    def __init__(self, app: ClientApp, contexts: dict[int, Context],
                 drop=lambda kind, node, config: False):
        self.run = SimpleNamespace(run_id=RUN_ID)
        self.app = app
        self.contexts = contexts
        self.drop = drop
        self.sent: list[str] = []
        self.types: list[str] = []

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, *, timeout=None):
        replies = []
        for message in messages:
            node = message.metadata.dst_node_id
            protocol = message.content.config_records.get(PROTOCOL_RECORD, {})
            kind = str(protocol.get("kind"))
            self.sent.append(kind)
            self.types.append(message.metadata.message_type)
            if not self.drop(kind, node, protocol.get("round")):
                replies.append(self.app(message, self.contexts[node]))
        return replies

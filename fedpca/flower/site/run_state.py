"""What a site keeps between the messages of one run, in Flower's ``context.state``, and who
is asked in which run (a message's context, Flower-free).

``context.state`` persists per node for the whole run, in simulation (where a site's
objects may be rebuilt, or answer in another Ray process, for every message) and in
deployment (where each message runs in a fresh process), so a restart of the ClientApp
cannot reset what a simulated site has spent nor its secure-aggregation session. It never
leaves the site.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, Context

from fedpca.site.service import LEDGER, Node

#: The prefix of fedpca's records in ``context.state``.
PREFIX = "fedpca."


class ContextState:
    """A :class:`~fedpca.site.secure_stage.RunState` over ``context.state``: one
    ConfigRecord ``fedpca.KEY`` per key, holding its bytes."""

    def __init__(self, context: Context) -> None:
        self.state = context.state

    def load(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or ``None``."""
        record = self.state.get(PREFIX + key)
        return bytes(record["value"]) if isinstance(record, ConfigRecord) else None

    def store(self, key: str, value: bytes) -> None:
        """Keep ``value`` under ``key`` for the rest of the run."""
        self.state[PREFIX + key] = ConfigRecord({"value": value})


#: ``context.state``'s record of a simulated site's in-memory ledger.
LEDGER_RECORD = PREFIX + LEDGER


def node_of(context: Context) -> Node:
    """The Flower-free view of a message's context: who is asked, in which run."""
    return Node(str(context.run_id), int(context.node_id), dict(context.node_config),
                dict(context.run_config))

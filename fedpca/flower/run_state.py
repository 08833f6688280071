"""What a site keeps between the messages of one run, in Flower's ``context.state``.

``context.state`` persists per node for the whole run, in simulation (where a site's
objects may be rebuilt, or answer in another Ray process, for every message) and in
deployment (where each message runs in a fresh process), so a restart of the ClientApp
cannot reset what a simulated site has spent nor its secure-aggregation session. It never
leaves the site.
"""

from __future__ import annotations

import json

from flwr.app import ConfigRecord, Context

from fedpca.dp.ledger import PrivacyLedger
from fedpca.site.service import LEDGER

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


def load_ledger(context: Context, ledger: PrivacyLedger) -> PrivacyLedger:
    """Fill ``ledger`` with the releases the run's state holds (if any) and return it."""
    stored = ContextState(context).load(LEDGER)
    if stored is not None:
        ledger.restore(json.loads(stored))
    return ledger


def store_ledger(context: Context, ledger: PrivacyLedger) -> None:
    """Keep ``ledger``'s releases in the run's state."""
    ContextState(context).store(LEDGER, json.dumps(ledger.to_dict()).encode())

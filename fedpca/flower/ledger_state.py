"""Keep a site's privacy ledger in the Flower ``Context`` so it survives across rounds.

``context.state`` persists per node for the whole run, both in simulation (where the
NumPyClient is rebuilt for every message) and in deployment (where each message runs in a
fresh process), so a restart of the client cannot reset what the site has spent.
"""

from __future__ import annotations

import json

from flwr.common import ConfigRecord, Context

from fedpca.dp.ledger import PrivacyLedger

LEDGER_RECORD = "fedpca.dp.ledger"


def load_ledger(context: Context, ledger: PrivacyLedger) -> PrivacyLedger:
    """Fill ``ledger`` with the releases stored in ``context.state`` (if any) and return it."""
    record = context.state.config_records.get(LEDGER_RECORD)
    if record is not None:
        ledger.restore(json.loads(str(record["releases"])))
    return ledger


def store_ledger(context: Context, ledger: PrivacyLedger) -> None:
    """Write the ledger's releases into ``context.state``."""
    context.state.config_records[LEDGER_RECORD] = ConfigRecord(
        {"releases": json.dumps(ledger.to_dict())}
    )

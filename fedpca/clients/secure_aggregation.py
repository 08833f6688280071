"""Client side of secure aggregation (Flower SecAgg+), guarded for a site's privacy.

:func:`secure_aggregation_mod` hands messages that carry SecAgg+ configs to Flower's
``secaggplus_mod`` and passes every other message through untouched (a bare
``secaggplus_mod`` breaks plain rounds). While the site's answer is produced inside the
masking stage it marks the context, so a site whose policy relies on secure aggregation
(noise ``sigma / sqrt(m)``) can refuse any request that would reveal its answer unmasked.
After the site answers it checks that the values fit SecAgg+'s clipping range: Flower clips
out-of-range values silently, which would corrupt the sum.

Trust model (stated in every secure-aggregation result, see
:data:`fedpca.algorithms.dps_pca.SECURE_TRUST`): an honest-but-curious server that runs
SecAgg+ and reveals only sums over at least ``m`` sites. Flower's masks come from
numpy's RandomState seeded with a 32-bit fold of the shared key and its quantisation rounding
uses unseeded numpy randomness: this is not cryptographic-grade secure aggregation.
"""

from __future__ import annotations

import numpy as np
from flwr.client.mod import secaggplus_mod
from flwr.common import ConfigRecord, Context, Message, MessageType
from flwr.common.secure_aggregation.secaggplus_constants import (
    RECORD_KEY_CONFIGS,
    RECORD_KEY_STATE,
)

from fedpca.errors import InvalidRequestError

#: Marks, in ``context.state``, that the current fit runs inside SecAgg+ masking.
MASKED_RECORD = "fedpca.masked"

def is_masked(context: Context) -> bool:
    """Whether the current fit is being answered inside SecAgg+ masking."""
    return MASKED_RECORD in context.state.config_records


def secure_aggregation_mod(msg: Message, ctxt: Context, call_next) -> Message:
    """SecAgg+ for messages that carry its configs; a pass-through for all others."""
    if (
        msg.metadata.message_type != MessageType.TRAIN
        or RECORD_KEY_CONFIGS not in msg.content.config_records
    ):
        return call_next(msg, ctxt)

    def masked_fit(message: Message, context: Context) -> Message:
        context.state.config_records[MASKED_RECORD] = ConfigRecord({"masked": True})
        try:
            reply = call_next(message, context)
        finally:
            del context.state.config_records[MASKED_RECORD]
        _check_clipping_range(reply, context)
        return reply

    return secaggplus_mod(msg, ctxt, masked_fit)


def _check_clipping_range(reply: Message, context: Context) -> None:
    if not reply.has_content():
        return
    limit = float(context.state.config_records[RECORD_KEY_STATE]["clipping_range"])
    for record in reply.content.array_records.values():
        for array in record.values():
            values = array.numpy()
            if values.size and float(np.abs(values).max()) > limit:
                raise InvalidRequestError(
                    f"refused: the answer has values up to {float(np.abs(values).max()):.3g}, "
                    f"beyond the SecAgg+ clipping range {limit}; they would be clipped "
                    "silently. Raise clipping_range in the server's SecAgg+ settings"
                )

"""Client side of secure aggregation (Flower SecAgg+), guarded for a site's privacy.

:func:`secure_aggregation_mod` hands messages that carry SecAgg+ configs to Flower's
``secaggplus_mod`` and passes every other message through untouched (a bare
``secaggplus_mod`` breaks plain rounds). While the site's answer is produced inside the
masking stage it marks the context, so a site whose policy relies on secure aggregation
(noise ``sigma / sqrt(m)``) can refuse any request that would reveal its answer unmasked,
and so the site can check, before it charges anything, that SecAgg+'s clipping range holds
its answer's public bound (Flower clips out-of-range values silently, which would corrupt the
sum). The check never looks at the answer itself: the unmasked answer carries only
``sigma / sqrt(m)`` noise, so no number derived from it may leave the site, not even in an
error message.

Trust model (stated in every secure-aggregation result, see
:data:`fedpca.algorithms.dps_pca.SECURE_TRUST`): an honest-but-curious server that runs
SecAgg+ and reveals only sums over at least ``m`` sites. Flower's masks come from
numpy's RandomState seeded with a 32-bit fold of the shared key and its quantisation rounding
uses unseeded numpy randomness: this is not cryptographic-grade secure aggregation.
"""

from __future__ import annotations

from flwr.client.mod import secaggplus_mod
from flwr.common import ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.common.secure_aggregation.secaggplus_constants import (
    RECORD_KEY_CONFIGS,
    RECORD_KEY_STATE,
)

from fedpca.site.answer import SecAggMasking

#: Marks, in ``context.state``, that the current fit runs inside SecAgg+ masking.
MASKED_RECORD = "fedpca.masked"


def is_secagg_plus_stage(content: RecordDict) -> bool:
    """Whether a message is a stage of Flower's SecAgg+ protocol."""
    return RECORD_KEY_CONFIGS in content.config_records


def masked_settings(context: Context) -> SecAggMasking | None:
    """SecAgg+'s parameters when the current fit runs inside its masking, else ``None``."""
    if MASKED_RECORD not in context.state:
        return None
    state = context.state.config_records[RECORD_KEY_STATE]
    return SecAggMasking(
        clipping_range=float(state["clipping_range"]),
        quantization_range=int(state["target_range"]),
        modulus_range=int(state["mod_range"]),
        max_weight=float(state["max_weight"]),
    )


def secure_aggregation_mod(msg: Message, ctxt: Context, call_next) -> Message:
    """SecAgg+ for messages that carry its configs; a pass-through for all others."""
    if msg.metadata.message_type != MessageType.TRAIN or not is_secagg_plus_stage(msg.content):
        return call_next(msg, ctxt)

    def masked_fit(message: Message, context: Context) -> Message:
        context.state.config_records[MASKED_RECORD] = ConfigRecord({"masked": True})
        try:
            reply = call_next(message, context)
        finally:
            del context.state.config_records[MASKED_RECORD]
        return reply

    return secaggplus_mod(msg, ctxt, masked_fit)

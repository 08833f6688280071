"""What changed between two recordings of a site's policy, in sentences a privacy officer reads.

A site's ledger records the settings of its policy that decide what it spends and releases
(:meth:`~fedpca.site.policy.SitePolicyFile.ledger_settings`: plain JSON values by
their keys in the policy file, such as ``budget.daily-epsilon``) whenever they differ from
the last ones recorded (:meth:`~fedpca.site.ledger.SiteLedger.note_policy`). This
module compares two such recordings and says what changed: ``budget.daily-epsilon 1 -> 2``.
It reads nothing and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: How a setting one recording lacks is shown (a key an older fedpca did not record).
NOT_SET = "(not set)"
#: The sentence of the first recording of a ledger's policy.
RECORDED = "policy recorded"

#: One change: the setting's key, its value before and after (``NOT_SET`` when absent).
Change = tuple[str, str, str]


def shown(value: Any) -> str:
    """A setting's value as the report shows it: numbers as ``%g``, booleans and ``None`` as
    the policy file writes them (``true``, ``false``, ``none``), texts as they are."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"{value:g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[Change]:
    """Each setting whose value differs between ``before`` and ``after`` (a key only one of
    them has included), by key; ``[]`` when they are equal. ``before=None``: no earlier
    recording, nothing to compare (also ``[]``)."""
    if before is None:
        return []
    keys = sorted(set(before) | set(after))
    return [(key, shown(before[key]) if key in before else NOT_SET,
             shown(after[key]) if key in after else NOT_SET)
            for key in keys if before.get(key, NOT_SET) != after.get(key, NOT_SET)]


def sentences(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[str]:
    """What a recording of ``after`` over ``before`` says: for the first recording
    (``before=None``) ``policy recorded: KEY VALUE; ...``; else one ``KEY OLD -> NEW`` per
    change; ``[]`` when nothing changed."""
    if before is None:
        return [f"{RECORDED}: " + "; ".join(f"{key} {shown(after[key])}"
                                            for key in sorted(after))]
    return [f"{key} {old} -> {new}" for key, old, new in changes(before, after)]

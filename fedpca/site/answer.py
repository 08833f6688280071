"""A site's answer to one round's request: every check before the charge, then the release.

:func:`answer_request` is what a site does with a round's request whatever carried it (the
Flower ClientApp, Flower's SecAgg+ legacy path, the audit of the mechanisms): the request's
config keys, whether the answer may leave unmasked, whether the masking can carry it, then
the algorithm's own checks and release (:meth:`~fedpca.algorithms.site.PrivateSite.respond`:
computed in memory, then charged to the ledger). The answer holds the site's noisy release,
its public record count and what is public under its policy (its name, the epsilon its ledger
has spent, its release count, the guarantee its policy gives:
:mod:`fedpca.dp.guarantee`), nothing else; the number of clipped rows is data-dependent and
stays in the site's own log.

What a hostile coordinator could try, and what stops it (all before anything is charged):

* **ask a site that relies on secure aggregation for an unmasked answer** (its noise is
  ``sigma / sqrt(m)``, safe only inside a sum of ``m`` sites): refused;
* **choose SecAgg+ settings that would clip or round the answer silently** (a clipping range
  below the answer's public bound, another modulus or quantisation than the exact embedding
  of the site's residues): refused, quoting only public quantities;
* **ask for residues under another modulus inside fedpca's verifiable protocol**: refused.

Privacy guarantee (unit: one record of this site, replace-one): each answer is one release
under the site's own policy, charged before it is returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedpca.algorithms.secure_sum import SecAggPlusEmbedding
from fedpca.algorithms.site import PrivateSite
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS

#: The metric holding the record count of a site whose answer's weight is fixed (secure
#: sums of residues: the count travels apart).
RECORDS = "records"


@dataclass(frozen=True)
class SecAggMasking:
    """The answer is masked by Flower's SecAgg+ under these parameters (the coordinator
    chose them, so the site checks them before it releases anything)."""

    clipping_range: float
    quantization_range: int = 0
    modulus_range: int = 0
    max_weight: float = 0.0


@dataclass(frozen=True)
class ProtocolMasking:
    """The answer is masked by fedpca's verifiable secure aggregation: the site sends
    residues modulo ``modulus`` and the protocol masks them exactly."""

    modulus: int


#: How an answer leaves the site: unmasked (``None``), or inside a secure sum.
Masking = SecAggMasking | ProtocolMasking | None


@dataclass(frozen=True)
class Answer:
    """A site's answer: its release (one array), its weight (the record count, or the fixed
    weight of a secure sum's residues) and its public numbers."""

    site: str
    values: list[np.ndarray]
    weight: int
    metrics: dict[str, Any] = field(default_factory=dict)


def embedding(site: PrivateSite) -> SecAggPlusEmbedding | None:
    """How the site's residues pass a secure sum when it sends distributed discrete Gaussian
    messages (its policy's ``discrete``), else ``None``."""
    return SecAggPlusEmbedding(DEFAULT_MODULUS) if site.discrete else None


def answer_request(site: PrivateSite, arrays: Sequence[np.ndarray], config: Mapping[str, Any],
                   masking: Masking = None) -> Answer:
    """Check the request, make the release (computed in memory, then charged), answer. What
    follows the charge (the encoding of residues, the transport's serialisation) handles an
    answer whose size the site bounded before any work
    (:mod:`fedpca.algorithms.site_limits`); should it fail, the budget stays spent and
    nothing is sent."""
    site.check_config(config)
    if site.secure_min_sites is not None and masking is None:
        raise site.refuse(
            "this site answers only inside a secure sum over at least "
            f"{site.secure_min_sites} sites, and this request is not masked"
        )
    if masking is not None:
        check_masking(site, masking, config)
    value = site.respond(list(arrays), config)
    metrics = {
        "site": site.site,
        "epsilon_spent": site.ledger.epsilon_spent(),
        "releases": site.ledger.count,
        **site.guarantee().to_metrics(),
    }
    residues = embedding(site)
    if residues is None:
        return Answer(site.site, [value], site.n, metrics)
    metrics[RECORDS] = site.n  # a secure sum's weight is fixed: the count travels apart
    if not isinstance(masking, ProtocolMasking):  # SecAgg+ carries the embedded residues
        value = residues.encode(value)
    return Answer(site.site, [value], residues.weight, metrics)


def check_masking(site: PrivateSite, masking: SecAggMasking | ProtocolMasking,
                  config: Mapping[str, Any]) -> None:
    """Refuse, before anything is charged, a masking this site cannot answer under. The
    message quotes only public quantities."""
    residues = embedding(site)
    if isinstance(masking, ProtocolMasking):
        if residues is None or masking.modulus != residues.modulus:
            raise site.refuse(
                "fedpca's verifiable secure aggregation carries distributed discrete "
                "Gaussian residues modulo the site's own modulus "
                f"{DEFAULT_MODULUS}; this site's policy or the protocol's modulus "
                f"{masking.modulus} does not match; nothing was released"
            )
        return
    if residues is not None:
        if not residues.matches(masking.clipping_range, masking.quantization_range,
                                masking.modulus_range, masking.max_weight):
            raise site.refuse(
                f"this site sends distributed discrete Gaussian residues and answers "
                f"only under SecAgg+ settings {residues.settings()} (the exact "
                f"embedding of its residues), not clipping_range={masking.clipping_range:g}"
                f", quantization_range={masking.quantization_range}, modulus_range="
                f"{masking.modulus_range}, max_weight={masking.max_weight:g}; nothing was "
                "released"
            )
        return
    bound = site.answer_bound(config)
    if bound is None:
        raise site.refuse("this algorithm has no secure-aggregation mode at this site")
    if bound > masking.clipping_range:
        raise site.refuse(
            f"SecAgg+ clipping_range={masking.clipping_range:g} is below the public bound "
            f"{bound:.3g} on the values this site sends (C^2 plus the tail of its noise "
            "over n); they would be clipped silently. Raise clipping_range; nothing was "
            "released"
        )

"""A site's answer to one round's request: every check before the charge, then the release.

:func:`answer_request` is what a site does with a round's request whatever carried it (the
Flower ClientApp, the ``NumPyClient`` adapter, the audit of the mechanisms): the request's
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
* **ask for residues under another modulus inside fedpca's verifiable protocol**: refused.

Privacy guarantee (unit: one record of this site, replace-one): each answer is one release
under the site's own policy, charged before it is returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedpca.algorithms.site import PrivateSite
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS

#: The metric holding the record count of a site whose answer's weight is fixed (secure
#: sums of residues: the count travels apart).
RECORDS = "records"
#: The weight every secure sum's residues carry (the sum is of residues, unweighted).
RESIDUE_WEIGHT = 1


@dataclass(frozen=True)
class ProtocolMasking:
    """The answer is masked by fedpca's verifiable secure aggregation: the site sends
    residues modulo ``modulus`` and the protocol masks them exactly."""

    modulus: int


#: How an answer leaves the site: unmasked (``None``), or inside a secure sum.
Masking = ProtocolMasking | None


@dataclass(frozen=True)
class Answer:
    """A site's answer: its release (one array), its weight (the record count, or the fixed
    weight of a secure sum's residues) and its public numbers."""

    site: str
    values: list[np.ndarray]
    weight: int
    metrics: dict[str, Any] = field(default_factory=dict)


def answer_request(site: PrivateSite, arrays: Sequence[np.ndarray], config: Mapping[str, Any],
                   masking: Masking = None) -> Answer:
    """Check the request, make the release (computed in memory, then charged), answer. What
    follows the charge (the encoding of residues, the transport's serialisation) handles an
    answer whose size the site bounded before any work
    (:mod:`fedpca.algorithms.site_limits`); should it fail, the budget stays spent and
    nothing is sent."""
    site.check_config(config)
    min_sites, discrete = site.sum_settings(config)
    if min_sites is not None and masking is None:
        raise site.refuse(
            "this site answers only inside a secure sum over at least "
            f"{min_sites} sites, and this request is not masked"
        )
    if masking is not None:
        check_masking(site, masking, discrete)
    value = site.respond(list(arrays), config)
    metrics = {
        "site": site.site,
        "epsilon_spent": site.ledger.epsilon_spent(),
        "releases": site.ledger.count,
        **site.guarantee().to_metrics(),
    }
    if not discrete:
        return Answer(site.site, [value], site.n, metrics)
    metrics[RECORDS] = site.n  # a secure sum's weight is fixed: the count travels apart
    return Answer(site.site, [value], RESIDUE_WEIGHT, metrics)


def check_masking(site: PrivateSite, masking: ProtocolMasking, discrete: bool) -> None:
    """Refuse, before anything is charged, a masking this site cannot answer under
    (``discrete``: the release asked for is one of discrete Gaussian residues). The message
    quotes only public quantities."""
    if not discrete or masking.modulus != DEFAULT_MODULUS:
        raise site.refuse(
            "fedpca's verifiable secure aggregation carries distributed discrete "
            "Gaussian residues modulo the site's own modulus "
            f"{DEFAULT_MODULUS}; this site's policy or the protocol's modulus "
            f"{masking.modulus} does not match; nothing was released"
        )

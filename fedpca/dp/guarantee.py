"""What one site guarantees for a run, in public numbers from its own policy.

A site calibrates its noise from its own policy; a real site's policy file replaces the
coordinator's privacy keys (:mod:`fedpca.site.real_site`). What the coordinator asked for is
therefore not what the sites guaranteed. Every answer carries its site's
:class:`SiteGuarantee`; the strategy keeps each site's latest one and the run record reports
them per site (``site_guarantees``), with :func:`weakest` as the run's headline: the
guarantee every site gives at least, which also replaces the request's values in the
result's privacy record (:func:`as_guaranteed`); the request is kept apart, as a request.

Nothing in a guarantee is derived from the records: epsilon, delta, accounting and clip norm
are the policy's, the noise multiplier is its calibration's (for a distributed discrete
Gaussian sum, of the sum the site answered), ``M`` its secure-sum minimum, and the worst case
composes the site's own noise shares over the releases it made in the run (after its last
round: the whole run's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from fedpca.errors import FedPCAError

#: The prefix of a guarantee's keys in an answer's metrics (``guarantee.epsilon``, ...).
PREFIX = "guarantee."


@dataclass(frozen=True)
class SiteGuarantee:
    """One site's guarantee for one run (unit: one record of the site, replace-one).

    Attributes:
        epsilon: the epsilon the site calibrated the run to (a real site's ``run-epsilon``).
        epsilon_achieved: the epsilon its accountant certifies for the run (at most
            ``epsilon``; conditional on the secure sums with ``secure_min_sites``).
        delta: the delta both are stated at.
        accounting: how the noise multiplier was chosen (``pld``, ``paper``, ``rdp``, or for
            a distributed discrete Gaussian ``kls-rdp``/``ddg-pld``).
        noise_multiplier: ``sigma / sensitivity`` of its releases (of a secure sum's total).
        clip_norm: the public row-norm bound ``C``.
        noise_sampler: how the site drew the noise of its own releases: ``"exact"`` (grid
            points plus exact discrete Gaussian noise: every real site) or ``"float"``
            (numpy's float Gaussians: simulations only); secure sums of discrete residues
            are exact either way.
        secure_min_sites: ``M`` when its answers are revealed only inside secure sums of at
            least ``M`` sites, else ``None``.
        epsilon_worst_case: with ``secure_min_sites``: the epsilon of the site's own shares
            seen alone (what a coordinator that bypasses the secure sums learns) over the
            releases made in the run; else ``None``.
    """

    epsilon: float
    epsilon_achieved: float
    delta: float
    accounting: str
    noise_multiplier: float
    clip_norm: float
    noise_sampler: str
    secure_min_sites: int | None = None
    epsilon_worst_case: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field, ``None`` included (the run record's ``site_guarantees``)."""
        return asdict(self)

    def to_metrics(self) -> dict[str, float | int | str]:
        """The fields under :data:`PREFIX`, as an answer's metrics carry them (``None``
        fields left out: Flower's records hold no null)."""
        # the fields are plain numbers and text: no deep copy (asdict) on every answer
        return {PREFIX + f.name: value for f in fields(self)
                if (value := getattr(self, f.name)) is not None}

    @staticmethod
    def metric_keys() -> frozenset[str]:
        """The keys every answer's guarantee carries (``secure_min_sites`` and
        ``epsilon_worst_case`` only with secure sums)."""
        return frozenset(PREFIX + f.name for f in fields(SiteGuarantee) if f.default is MISSING)

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any], site: str) -> SiteGuarantee | None:
        """The guarantee in an answer's metrics (:meth:`to_metrics`), ``None`` when the site
        sent none; a malformed one is an error naming the site."""
        values = {f.name: metrics[key] for f in fields(cls) if (key := PREFIX + f.name) in metrics}
        if not values:
            return None
        try:
            guarantee = cls(**values)
        except TypeError as exc:
            raise FedPCAError(
                f"site {site} sent an incomplete guarantee ({exc}); is it running fedpca's "
                "client?"
            ) from None
        return guarantee


def weakest(guarantees: Iterable[SiteGuarantee]) -> dict[str, Any]:
    """What every one of ``guarantees`` gives at least: the largest epsilons and delta, the
    smallest noise multiplier, every accounting used (joined by ``/``). A site without
    secure sums counts with its achieved epsilon as its worst case."""
    sites = list(guarantees)
    return {
        "epsilon": max(g.epsilon for g in sites),
        "epsilon_achieved": max(g.epsilon_achieved for g in sites),
        "epsilon_worst_case": max(
            g.epsilon_achieved if g.epsilon_worst_case is None else g.epsilon_worst_case
            for g in sites
        ),
        "delta": max(g.delta for g in sites),
        "accounting": "/".join(sorted({g.accounting for g in sites})),
        "noise_multiplier": min(g.noise_multiplier for g in sites),
        "noise_sampler": "/".join(sorted({g.noise_sampler for g in sites})),
    }


#: The privacy record's keys that state a guarantee (the rest describe the mechanism).
GUARANTEE_KEYS = ("epsilon", "epsilon_achieved", "epsilon_worst_case", "delta", "accounting",
                  "noise_multiplier", "noise_sampler", "sigma", "clip_norm", "secure_min_sites")


def as_guaranteed(privacy: Mapping[str, Any], guarantees: Iterable[SiteGuarantee]
                  ) -> dict[str, Any]:
    """The run's privacy record ``privacy`` (the request's, as the server calibrated it)
    with what the sites guaranteed in place of what was asked: every key of
    :data:`GUARANTEE_KEYS` it holds is :func:`weakest`'s, or the sites' common clip norm and ``M``,
    or the request's ``sigma`` when every site used the request's multiplier and clip norm
    (``None`` where the sites differ); the mechanism's description is kept. Without
    guarantees (a run whose sites stated none), ``privacy`` as it is."""
    sites = list(guarantees)
    if not sites:
        return dict(privacy)
    clip = {g.clip_norm for g in sites}
    minimum = {g.secure_min_sites for g in sites}
    as_asked = all((g.noise_multiplier, g.clip_norm)
                   == (privacy.get("noise_multiplier"), privacy.get("clip_norm")) for g in sites)
    guaranteed = {**weakest(sites),
                  "sigma": privacy.get("sigma") if as_asked else None,
                  "clip_norm": clip.pop() if len(clip) == 1 else None,
                  "secure_min_sites": minimum.pop() if len(minimum) == 1 else None}
    return {key: guaranteed[key] if key in GUARANTEE_KEYS else value
            for key, value in privacy.items()}

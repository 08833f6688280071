"""Who a site is in fedpca's secure aggregation: its roster name, signing key and the
limits of its own policy, for a real site (its files) or a simulation's virtual site.

A :class:`SecureIdentity` is everything a :class:`~fedpca.secure.site_session.SiteSession` needs
besides the coordinator's messages; none of it comes from the coordinator.

Simulation identities (:func:`simulation_identity`) derive every virtual site's key from a
*public* label, so that ``fedpca simulate`` and ``flwr run`` simulations need no key files:
the coordinator can compute them, which is harmless when one party runs every site and
meaningless for a real site, whose key is a file only it can read (:func:`policy_identity`
in :mod:`fedpca.site.real_site`).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedpca.secure.roster import Roster, roster_entry

#: The consortium name of every simulation roster.
SIMULATION_CONSORTIUM = "fedpca-simulation"


@dataclass(frozen=True)
class SecureIdentity:
    """A site's part in secure aggregation, from its own policy.

    Attributes:
        member: the site's roster name.
        signing_key: its Ed25519 key (the roster's entry for ``member``).
        roster: the consortium's members and keys.
        min_sites: ``M``, the fewest honest members in any sum it helps reveal.
        colluders: ``c``, how many other members it assumes may collude with the coordinator.
        max_rounds: the most secure rounds it agrees to in one run (its releases per run).
        vouched: the members it vouched for (itself included): only they count toward ``M``;
            every other member of a key list counts as a possible colluder
            (:mod:`fedpca.secure.vouching`).
    """

    member: str
    signing_key: Ed25519PrivateKey
    roster: Roster
    min_sites: int
    colluders: int
    max_rounds: int
    vouched: frozenset[str]


def simulation_key(partition: int) -> Ed25519PrivateKey:
    """Virtual site ``partition``'s key, derived from a public label (simulation only)."""
    seed = hashlib.sha256(f"fedpca simulation member {partition}".encode()).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


@functools.lru_cache(maxsize=8)
def simulation_roster(partitions: int) -> Roster:
    """The roster of a simulation's ``partitions`` virtual sites, named ``"0"`` to
    ``str(partitions - 1)`` like their answers."""
    return Roster.from_members(SIMULATION_CONSORTIUM, {
        str(p): roster_entry(SIMULATION_CONSORTIUM, str(p), simulation_key(p))
        for p in range(partitions)
    })


def simulation_identity(
    partition: int, partitions: int, min_sites: int, max_rounds: int
) -> SecureIdentity:
    """Virtual site ``partition``'s identity in a simulation of ``partitions`` sites (no
    colluders assumed and every member vouched for: one party runs every site)."""
    roster = simulation_roster(partitions)
    return SecureIdentity(str(partition), simulation_key(partition), roster, min_sites, 0,
                          max_rounds, frozenset(roster.names))

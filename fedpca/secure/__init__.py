"""Secure aggregation against an active, hostile coordinator, without Flower (sans-I/O).

* :mod:`fedpca.secure.protocol`: the message objects and the two state machines
  (:class:`~fedpca.secure.protocol.SiteSession`, :class:`~fedpca.secure.protocol.ServerSession`).
* :mod:`fedpca.secure.conditions`: the threshold conditions a site enforces, and their derivation.
* :mod:`fedpca.secure.keys`: canonical encoding, pairwise key derivation, the ChaCha20 PRG.
* :mod:`fedpca.secure.shamir`: Shamir secret sharing over ``GF(2**31 - 1)``, vectorised.
* :mod:`fedpca.secure.roster`: the consortium's roster of Ed25519 keys, a site's signing key.
"""

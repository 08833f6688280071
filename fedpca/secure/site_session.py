"""A site's side of the secure aggregation: :class:`SiteSession`, a sans-I/O state machine.

It consumes the coordinator's messages (:mod:`fedpca.secure.messages`) and emits the site's
replies, through the stages of :mod:`fedpca.secure`: advertise a fresh key, verify the key
list and send seed shares, mask each round's input, endorse one survivor set per round and
reveal once per round for it. Everything the coordinator sends is untrusted, and the
protections against a hostile coordinator are the site's own checks here: roster signatures
over the run's parameters (no names outside the roster, no forged or altered keys), the
threshold conditions of :mod:`fedpca.secure.conditions` against the site's own ``M``,
``max_rounds`` and ``c`` grown by one per member of the key list the site did not vouch for
(:mod:`fedpca.secure.vouching`: Sybils the roster's writer added count as colluders), and
the consistency round before any unmasking. Every refusal
(:class:`~fedpca.secure.conditions.ProtocolRefusal`) happens before the site changes its
state or releases anything, so a refused message may be retried. The state survives between
messages as :meth:`SiteSession.to_bytes` (secret; the signing key and roster stay in the
site's files).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Collection
from typing import Any, NoReturn

import numpy as np
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedpca.errors import ConfigurationError, FedPCAError, InvalidDataError
from fedpca.secure import shamir
from fedpca.secure.agreed_state import AgreedState
from fedpca.secure.authenticated import (
    advertisement_payload,
    endorsed_set,
    endorsement_mac,
    session_id_for,
    shares_aad,
    survivor_set_digest,
)
from fedpca.secure.conditions import ProtocolRefusal, check_setup, check_vouched
from fedpca.secure.keys import (
    KEY_BYTES,
    MAX_LENGTH,
    MAX_MODULUS,
    mask_sign,
    pair_keys,
    prg_sum,
    round_seed,
    shared_secret,
)
from fedpca.secure.messages import (
    SEED_ELEMENTS,
    Advertisement,
    ConsistencyRequest,
    Endorsement,
    InputRequest,
    KeyList,
    MaskedInput,
    Reveal,
    SetupRequest,
    ShareBundle,
    UnmaskRequest,
)
from fedpca.secure.roster import Roster
from fedpca.secure.wire import vector_bytes

__all__ = ["SiteSession"]

logger = logging.getLogger(__name__)

_NONCE_BYTES = 12
_STATE_FORMAT = "fedpca-secagg-site-state/4"
_NEW, _ADVERTISED, _SHARED, _READY = "new", "advertised", "shared", "ready"


class SiteSession:
    """One site's side of one run: consumes server messages, emits replies.

    Args:
        member: the site's name in the roster.
        signing_key: the site's Ed25519 key (its public key must be the roster's entry).
        roster: the consortium's roster.
        min_sites: ``M >= 2``, the fewest honest members in any sum the site helps reveal.
        colluders: ``c >= 0``, how many other members the site assumes collude with the server.
        max_rounds: the most rounds the site agrees to in one run.
        vouched: the roster members the site vouched for (it counts itself): only they count
            toward ``M``; any other member of a key list counts as one more colluder.
    """

    def __init__(self, member: str, signing_key: Ed25519PrivateKey, roster: Roster, *,
                 min_sites: int, colluders: int, max_rounds: int,
                 vouched: Collection[str]) -> None:
        if member not in roster:
            raise ConfigurationError(f"site {member!r} is not in the roster; ask the consortium "
                                     "to add its public key")
        public = signing_key.public_key().public_bytes(serialization.Encoding.Raw,
                                                       serialization.PublicFormat.Raw)
        if public != roster.keys[member]:
            raise ConfigurationError(f"the signing key of site {member!r} is not the roster's "
                                     "key for it; load the right key file or update the roster")
        for name, value, low in (("min_sites", min_sites, 2), ("colluders", colluders, 0),
                                 ("max_rounds", max_rounds, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigurationError(f"{name} must be an integer >= {low}; fix the site's "
                                         "secure-aggregation policy")
        outside = sorted(set(vouched) - set(roster.names))
        if outside:
            raise ConfigurationError(f"the site vouches for {outside}, who are not in the roster; "
                                     "fix the vouched list or the roster")
        self.member = member
        self.min_sites, self.colluders, self.max_rounds = min_sites, colluders, max_rounds
        self.vouched = frozenset(vouched) | {member}
        #: ``(N, unvouched)`` of the key list the site accepted (``None`` before).
        self.key_list_members: tuple[int, int] | None = None
        self._signing_key, self._roster = signing_key, roster
        self._stage = _NEW
        self._params: SetupRequest | None = None
        self._exchange_key: bytes | None = None          # X25519 private key, S1 to S2 only
        self._advertisement: Advertisement | None = None
        self._session_id = b""
        self._seeds: dict[int, bytes] = {}               # own b^r until round r is masked
        self._own_shares = np.zeros((0, SEED_ELEMENTS), dtype=np.int64)
        self._masked: set[int] = set()
        self._endorsed: dict[int, bytes] = {}            # round -> digest of the set endorsed
        self._revealed: set[int] = set()
        #: What the key agreement and the relay fixed for the rest of the run (the bulk of
        #: the state: keys and shares of every member).
        self._agreed = AgreedState()
        #: The input request :meth:`check_input` last passed and what it opened (this message
        #: only; never saved).
        self._checked: tuple[InputRequest, Any] | None = None

    @property
    def parameters(self) -> SetupRequest | None:
        """The run's parameters once the site advertised a key (``None`` before)."""
        return self._params

    # -- setup ---------------------------------------------------------------------------------

    def advertise(self, request: SetupRequest) -> Advertisement:
        """S1: check the run parameters, make a fresh X25519 key pair and sign it."""
        self._expect(_NEW, "a setup request", "this site already advertised a key for the run")
        t, c, m = request.threshold, self.colluders, self.min_sites
        if request.rounds > self.max_rounds:
            self._fail(f"the run asks for more rounds than this site's max_rounds "
                       f"({self.max_rounds}); lower the rounds or raise the site's limit")
        if request.modulus > MAX_MODULUS or request.modulus & (request.modulus - 1):
            self._fail("the modulus must be a power of two between 2 and 2**62; fix the run's "
                       "modulus")
        if t - c < m:
            self._fail(f"threshold t={t} cannot keep M={m} honest members in a sum with c={c} "
                       "colluders (need t - c >= M); raise the threshold")
        if t > len(self._roster.names):
            self._fail(f"threshold t={t} exceeds the roster's {len(self._roster.names)} "
                       "members, so nothing could be unmasked; lower the threshold")
        try:
            check_vouched(len(self.vouched), c, m)
        except ProtocolRefusal as refusal:
            self._fail(str(refusal))
        private = X25519PrivateKey.generate()
        public = private.public_key().public_bytes(serialization.Encoding.Raw,
                                                   serialization.PublicFormat.Raw)
        signature = self._signing_key.sign(
            advertisement_payload(self._roster.consortium, request, self.member, public))
        self._params = request
        self._exchange_key = private.private_bytes(serialization.Encoding.Raw,
                                                   serialization.PrivateFormat.Raw,
                                                   serialization.NoEncryption())
        self._advertisement = Advertisement(self.member, request.run_id, public, signature)
        self._stage = _ADVERTISED
        logger.info("site %s advertised its key for run %s", self.member, request.run_id)
        return self._advertisement

    def share(self, key_list: KeyList) -> ShareBundle:
        """S2: verify every advertisement and the thresholds, then send the seed shares."""
        self._expect(_ADVERTISED, "a key list", "this site already answered a key list")
        params = self._check_run(key_list.run_id)
        self._verify_key_list(key_list)
        members = tuple(sorted(a.member for a in key_list.advertisements))
        unvouched = len(set(members) - self.vouched)
        try:
            check_setup(len(members), params.threshold, self.colluders + unvouched,
                        self.min_sites)
        except ProtocolRefusal as refusal:
            self._fail(f"{refusal} ({unvouched} of the colluders are members this site did not "
                       "vouch for); nothing sent")
        session_id = session_id_for(self._roster.consortium, params, key_list.advertisements)
        keys = self._derive_pair_keys(key_list, session_id)
        seeds = {r: os.urandom(KEY_BYTES) for r in range(1, params.rounds + 1)}
        elements = np.concatenate([shamir.bytes_to_elements(seeds[r]) for r in sorted(seeds)])
        points = np.arange(1, len(members) + 1)
        shares = shamir.split(elements, params.threshold, points).reshape(
            len(members), params.rounds, SEED_ELEMENTS)
        ciphertexts = {}
        for index, peer in enumerate(members):
            if peer != self.member:
                nonce = os.urandom(_NONCE_BYTES)
                plaintext = vector_bytes(shares[index].ravel())
                ciphertexts[peer] = nonce + AESGCM(keys[peer].send).encrypt(
                    nonce, plaintext, shares_aad(session_id, self.member, peer))
        self._session_id, self._seeds = session_id, seeds
        self._own_shares = shares[members.index(self.member)]
        self._agreed = AgreedState.from_pair_keys(members, keys)
        self._exchange_key = None
        self.key_list_members = (len(members), unvouched)
        self._stage = _SHARED
        logger.info("site %s verified the key list of run %s and sent its shares",
                    self.member, params.run_id)
        return ShareBundle(self.member, params.run_id, ciphertexts)

    def _verify_key_list(self, key_list: KeyList) -> None:
        """Protects against Sybils (names outside the roster), advertisements the server
        forged or altered (signatures under roster keys over the parameters this site saw)
        and a list that drops or replaces this site's own advertisement."""
        assert self._params is not None and self._advertisement is not None
        for ad in key_list.advertisements:
            if ad.member not in self._roster:
                self._fail(f"the key list names {ad.member!r}, who is not in the roster: the "
                           "coordinator may be inventing members; nothing sent")
            content = advertisement_payload(self._roster.consortium, self._params, ad.member,
                                            ad.public_key)
            try:
                self._roster.public_key(ad.member).verify(ad.signature, content)
            except InvalidSignature:
                self._fail(f"the advertisement of {ad.member!r} is not signed by its roster key "
                           "over this run's parameters: forged or altered; nothing sent")
        own = [a for a in key_list.advertisements if a.member == self.member]
        if own != [self._advertisement]:
            self._fail("the key list does not hold this site's advertisement unchanged; "
                       "nothing sent")

    def _derive_pair_keys(self, key_list: KeyList, session_id: bytes) -> dict[str, Any]:
        assert self._exchange_key is not None
        private = X25519PrivateKey.from_private_bytes(self._exchange_key)
        keys = {}
        for ad in key_list.advertisements:
            if ad.member == self.member:
                continue
            try:
                secret = shared_secret(private, ad.public_key)
            except ValueError:
                self._fail(f"the key of {ad.member!r} is not a valid X25519 key; nothing sent")
            keys[ad.member] = pair_keys(secret, session_id, self.member, ad.member)
        return keys

    # -- rounds --------------------------------------------------------------------------------

    def check_input(self, request: InputRequest) -> None:
        """Refuse an input request before the caller computes (and charges) its value: an
        unknown run, a round out of range or already masked, an absurd length, or (on the
        first request) relayed shares that do not decrypt. :meth:`masked_input` of the same
        request object reuses what this opened."""
        self._checked = (request, self._check_input(request))

    def masked_input(self, request: InputRequest, value: np.ndarray) -> MaskedInput:
        """Mask ``value`` (int64 residues in ``[0, modulus)``) for ``request``'s round, at most
        once per round."""
        checked, self._checked = self._checked, None
        received = checked[1] if checked and checked[0] is request else self._check_input(request)
        params = self._params
        assert params is not None
        vector = np.asarray(value)
        if (vector.shape != (request.length,) or not np.issubdtype(vector.dtype, np.integer)
                or vector.min() < 0 or vector.max() >= params.modulus):
            raise InvalidDataError("the value to mask must be a vector of the requested length "
                                   "of integer residues in [0, modulus); encode it first")
        if received is not None:
            self._agreed = self._agreed.relayed(*received)
            self._stage = _READY
        agreed = self._agreed
        peers = [p for p in agreed.setup_members if p != self.member]
        seeds = [round_seed(agreed.mask_key(p), request.round) for p in peers]
        masks = prg_sum([self._seeds.pop(request.round)]
                        + [s for p, s in zip(peers, seeds) if mask_sign(self.member, p) > 0],
                        [s for p, s in zip(peers, seeds) if mask_sign(self.member, p) < 0],
                        request.length, params.modulus)
        self._masked.add(request.round)
        logger.info("site %s masked its input for round %d", self.member, request.round)
        out = ((vector.astype(np.uint64) + masks) & np.uint64(params.modulus - 1)).astype(np.int64)
        return MaskedInput(self.member, params.run_id, request.round, out)

    def _check_input(self, request: InputRequest
                     ) -> tuple[tuple[str, ...], np.ndarray] | None:
        if self._stage not in (_SHARED, _READY):
            self._fail("an input request before the key agreement completed; run the setup first")
        self._check_round(request.run_id, request.round)
        if request.round in self._masked:
            self._fail(f"this site already masked an input for round {request.round}; a round "
                       "is masked once")
        if not 0 < request.length <= MAX_LENGTH:
            self._fail("the vector length must be between 1 and 2**27; fix the request")
        if self._stage == _READY:
            if request.setup_members or request.ciphertexts:
                self._fail("shares are relayed once, with the first input request; drop them")
            return None
        return self._open_relay(request)

    def _open_relay(self, request: InputRequest
                    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Decrypt the relayed shares (one row per member of ``U_setup``, in its order).
        Protects against a split view (different key lists give different session ids, so
        nothing decrypts), altered or withheld ciphertexts, and a ``U_setup`` too small for
        the threshold or outside the key list."""
        params = self._params
        assert params is not None
        setup = tuple(sorted(request.setup_members))
        if self.member not in setup or not set(setup) <= set(self._agreed.members):
            self._fail("U_setup must hold this site and only members of the key list; the "
                       "first input request must relay the shares")
        if len(setup) < params.threshold:
            self._fail(f"fewer members sent shares than the threshold t={params.threshold}; "
                       "nothing could be unmasked, so nothing is sent")
        if set(request.ciphertexts) != set(setup) - {self.member}:
            self._fail("the relayed shares must come from exactly the other members of U_setup")
        shares = {self.member: self._own_shares}
        for sender, blob in request.ciphertexts.items():
            try:
                plaintext = AESGCM(self._agreed.receive_key(sender)).decrypt(
                    blob[:_NONCE_BYTES], blob[_NONCE_BYTES:],
                    shares_aad(self._session_id, sender, self.member))
            except (InvalidTag, ValueError):
                self._fail(f"the shares from {sender!r} do not decrypt: the coordinator altered "
                           "them or showed members different key lists; nothing sent")
            values = np.frombuffer(plaintext, dtype="<i8").astype(np.int64)
            if values.size != params.rounds * SEED_ELEMENTS or values.min() < 0 or (
                    values.max() >= shamir.PRIME):
                self._fail(f"the shares from {sender!r} are malformed; nothing sent")
            shares[sender] = values.reshape(params.rounds, SEED_ELEMENTS)
        return setup, np.stack([shares[k] for k in setup])

    def endorse(self, request: ConsistencyRequest) -> Endorsement:
        """Endorse the survivor set ``U3`` of a round, at most one set per round, with a MAC
        for each other endorser the server names. Protects against a server that shows
        members different survivor sets to unmask two sums. (Which survivors endorse is the
        server's choice: a site reveals only after ``t - 1`` other survivors' MACs of the set
        it endorsed verify, whoever they are.)"""
        params = self._ready(request.run_id, request.round)
        survivors = tuple(sorted(request.survivors))
        endorsers = tuple(sorted(request.endorsers)) or survivors
        if request.round not in self._masked:
            self._fail(f"this site sent no masked input for round {request.round}; it endorses "
                       "only rounds it took part in")
        if self.member not in survivors or not set(survivors) <= set(
                self._agreed.setup_members):
            self._fail("the survivors must include this site and lie within U_setup; nothing "
                       "endorsed")
        if self.member not in endorsers or not set(endorsers) <= set(survivors):
            self._fail("the endorsers must include this site and be survivors; nothing endorsed")
        for what, members in (("survivors", survivors), ("endorsers", endorsers)):
            if len(members) < params.threshold:
                self._fail(f"fewer {what} than the threshold t={params.threshold}; the round "
                           "cannot be unmasked, nothing endorsed")
        survivors_digest = survivor_set_digest(self._session_id, request.round, survivors)
        earlier = self._endorsed.get(request.round)
        if earlier is not None and earlier != survivors_digest:
            self._fail(f"this site already endorsed another survivor set for round "
                       f"{request.round}; it endorses one set per round")
        endorsed = endorsed_set(survivors_digest)
        agreed = self._agreed
        macs = {peer: endorsement_mac(agreed.endorse_key(peer), endorsed, self.member,
                                      peer).finalize()
                for peer in endorsers if peer != self.member}
        self._endorsed[request.round] = survivors_digest
        logger.info("site %s endorsed the survivors of round %d", self.member, request.round)
        return Endorsement(self.member, params.run_id, request.round, macs)

    def unmask(self, request: UnmaskRequest) -> Reveal:
        """Reveal the round's secrets, once, for the set this site endorsed, when ``t - 1``
        other survivors' MACs of that set verify."""
        params = self._ready(request.run_id, request.round)
        survivors = tuple(sorted(request.survivors))
        if request.round in self._revealed:
            self._fail(f"this site already revealed its secrets for round {request.round}; it "
                       "reveals once per round")
        survivors_digest = survivor_set_digest(self._session_id, request.round, survivors)
        if self._endorsed.get(request.round) != survivors_digest:
            self._fail("the unmask request names another survivor set than this site endorsed; "
                       "nothing revealed")
        self._verify_endorsements(request, survivors_digest, survivors, params.threshold)
        self._revealed.add(request.round)
        agreed = self._agreed
        shares = agreed.round_shares(survivors, request.round)
        dropped = sorted(set(agreed.setup_members) - set(survivors))
        seeds = {j: round_seed(agreed.mask_key(j), request.round) for j in dropped}
        logger.info("site %s revealed its round %d secrets", self.member, request.round)
        return Reveal(self.member, params.run_id, request.round, survivors, shares, seeds)

    def _verify_endorsements(self, request: UnmaskRequest, survivors_digest: bytes,
                             survivors: tuple[str, ...], threshold: int) -> None:
        """Every MAC must be from another survivor and verify (an altered one means the
        server shows sets inconsistently); ``t - 1`` of them plus this site's own."""
        endorsed = endorsed_set(survivors_digest)
        others = set(survivors) - {self.member}
        for peer, tag in request.macs_for_you.items():
            if peer not in others:
                self._fail("an endorsement comes from outside the survivor set; nothing revealed")
            try:
                endorsement_mac(self._agreed.endorse_key(peer), endorsed, peer,
                                self.member).verify(tag)
            except InvalidSignature:
                self._fail(f"the endorsement of {peer!r} does not verify: the coordinator "
                           "altered it or showed members different survivor sets; nothing "
                           "revealed")
        if len(request.macs_for_you) < threshold - 1:
            self._fail(f"fewer than t={threshold} members endorsed this survivor set; nothing "
                       "revealed")

    # -- checks --------------------------------------------------------------------------------

    def _fail(self, message: str) -> NoReturn:
        logger.warning("site %s refused: %s", self.member, message)
        raise ProtocolRefusal(message) from None

    def _expect(self, stage: str, what: str, otherwise: str) -> None:
        if self._stage != stage:
            self._fail(f"{what} is out of order: {otherwise}" if self._stage != _NEW else
                       f"{what} is out of order: the run has not been set up")

    def _check_run(self, run_id: str) -> SetupRequest:
        if self._params is None or run_id != self._params.run_id:
            self._fail("the message is for another run than this session's; start a new session")
        return self._params

    def _check_round(self, run_id: str, round_number: int) -> SetupRequest:
        params = self._check_run(run_id)
        if not 1 <= round_number <= params.rounds:
            self._fail(f"round {round_number} is outside the run's rounds 1..{params.rounds}")
        return params

    def _ready(self, run_id: str, round_number: int) -> SetupRequest:
        if self._stage != _READY:
            self._fail("a round message before this site masked any input; nothing released")
        return self._check_round(run_id, round_number)

    # -- state ---------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The session state (secret: it holds seeds and keys; keep it on the site) without the
        signing key and roster: a JSON header of what changes from message to message, then
        what the key agreement and the relay fixed (:class:`AgreedState`, serialised once per run,
        because a simulation saves the state after every message)."""
        params = self._params
        header = {
            "format": _STATE_FORMAT, "member": self.member, "min_sites": self.min_sites,
            "colluders": self.colluders, "max_rounds": self.max_rounds, "stage": self._stage,
            "params": None if params is None else [params.run_id, params.rounds,
                                                   params.threshold, params.modulus,
                                                   params.description],
            "exchange_key": _b64(self._exchange_key),
            "advertisement": None if self._advertisement is None else [
                _b64(self._advertisement.public_key), _b64(self._advertisement.signature)],
            "session_id": _b64(self._session_id),
            "seeds": {str(r): _b64(s) for r, s in self._seeds.items()},
            "own_shares": _b64(vector_bytes(self._own_shares.ravel())),
            "masked": sorted(self._masked), "revealed": sorted(self._revealed),
            "endorsed": {str(r): _b64(d) for r, d in self._endorsed.items()},
        }
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        return b"".join([len(text).to_bytes(4, "big"), text, self._agreed.to_bytes()])

    @classmethod
    def from_bytes(cls, data: bytes, signing_key: Ed25519PrivateKey, roster: Roster,
                   vouched: Collection[str]) -> SiteSession:
        """A session restored from :meth:`to_bytes`, with the site's signing key, roster and
        vouched members re-read from its files."""
        try:
            size = int.from_bytes(data[:4], "big")
            state = json.loads(data[4:4 + size].decode("utf-8"))
            if state.get("format") != _STATE_FORMAT:
                raise ValueError("format")
            site = cls(state["member"], signing_key, roster, min_sites=state["min_sites"],
                       colluders=state["colluders"], max_rounds=state["max_rounds"],
                       vouched=vouched)
            site._restore(state, data[4 + size:])
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            if isinstance(exc, FedPCAError):
                raise
            raise ProtocolRefusal("the saved secure-aggregation state cannot be read; the run "
                                  "must start over") from None
        return site

    def _restore(self, state: dict[str, Any], agreed: bytes) -> None:
        if state["stage"] not in (_NEW, _ADVERTISED, _SHARED, _READY):
            raise ValueError("stage")
        self._stage = state["stage"]
        if state["params"] is not None:
            self._params = SetupRequest(*state["params"])
        self._exchange_key = _unb64(state["exchange_key"])
        if state["advertisement"] is not None and self._params is not None:
            public, signature = (_unb64(v) for v in state["advertisement"])
            self._advertisement = Advertisement(self.member, self._params.run_id, public,
                                                signature)
        self._session_id = _unb64(state["session_id"]) or b""
        self._seeds = {int(r): _unb64(s) for r, s in state["seeds"].items()}
        self._own_shares = np.frombuffer(_unb64(state["own_shares"]), dtype="<i8").astype(
            np.int64).reshape(-1, SEED_ELEMENTS)
        self._masked, self._revealed = set(state["masked"]), set(state["revealed"])
        self._endorsed = {int(r): _unb64(d) for r, d in state["endorsed"].items()}
        self._agreed = AgreedState.from_bytes(agreed)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)

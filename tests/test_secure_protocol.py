"""The sans-I/O secure aggregation protocol (fedpca.secure), in memory, against an honest and
a hostile coordinator: exact sums with and without dropouts, the attacks it must refuse (a
threshold-1 session of one member, forged and Sybil advertisements, inconsistent survivor sets,
replays, a split view, reflected endorsements), the threshold conditions (a table, and a brute
force over every pair of survivor sets for N <= 7), Shamir sharing, the PRG, the site state's
serialisation, the roster and signing-key files, and the messages' dict form."""

import base64
import itertools
import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fedpca.errors import ConfigurationError, InvalidDataError, InvalidRequestError
from fedpca.secure import shamir
from fedpca.secure.authenticated import advertisement_payload
from fedpca.secure.conditions import ProtocolRefusal, check_setup, smallest_threshold
from fedpca.secure.keys import MAX_LENGTH, prg_sum, round_seed
from fedpca.secure.messages import (
    Advertisement,
    ConsistencyRequest,
    InputRequest,
    KeyList,
    MaskedInput,
    SetupRequest,
    UnmaskRequest,
    message_from_dict,
)
from fedpca.secure.roster import (
    Roster,
    load_roster,
    load_signing_key,
    write_roster,
    roster_entry,
    write_signing_key,
)
from fedpca.secure.server_session import SecureAggregationError, ServerSession
from fedpca.secure.site_session import SiteSession

NAMES = tuple(f"site-{letter}" for letter in "abcdef")
COLLUDERS, MIN_SITES, ROUNDS, MODULUS, LENGTH = 1, 2, 3, 2**31, 16
THRESHOLD = smallest_threshold(len(NAMES), COLLUDERS, MIN_SITES)  # 4
RUN = "run-1"


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    """A roster of six members with real Ed25519 keys written to (and read from) files."""
    base = tmp_path_factory.mktemp("consortium")
    members, keys = {}, {}
    for name in NAMES:
        path, entry = write_signing_key(base / "keys", name, "test-consortium")
        keys[name], members[name] = load_signing_key(path), entry
    return load_roster(write_roster(base / "roster.toml", "test-consortium", members)), keys


def wire(message):
    """The message after a trip through its dict form (what a ConfigRecord carries)."""
    return message_from_dict(message.to_dict())


def make_site(consortium, name, **policy):
    roster, keys = consortium
    policy = {"min_sites": MIN_SITES, "colluders": COLLUDERS, "max_rounds": ROUNDS,
              "vouched": roster.names, **policy}
    return SiteSession(name, keys[name], roster, **policy)


def set_up(consortium, rounds=ROUNDS, threshold=THRESHOLD, names=NAMES):
    """An honest server and its sites after S1 and S2."""
    server = ServerSession(RUN, rounds, threshold, MODULUS)
    sites = {name: make_site(consortium, name) for name in names}
    for site in sites.values():
        server.receive_advertisement(wire(site.advertise(wire(server.setup_request()))))
    key_list = wire(server.key_list())
    for site in sites.values():
        server.receive_bundle(wire(site.share(key_list)))
    return server, sites


def values_for(names, seed):
    rng = np.random.default_rng(seed)
    return {name: rng.integers(0, MODULUS, LENGTH, dtype=np.int64) for name in names}


def exact_sum(values, names):
    return sum(values[name] for name in names) % MODULUS


def send_inputs(server, sites, round_number, values, skip=()):
    for name, request in server.input_requests(round_number, LENGTH).items():
        if name not in skip:
            request = wire(request)
            sites[name].check_input(request)
            server.receive_masked_input(wire(sites[name].masked_input(request, values[name])))


def finish_round(server, sites, round_number, skip_unmask=(), between=None, skip_endorse=()):
    """Consistency and unmask stages, again while the reveals do not suffice (as
    :class:`~fedpca.flower.server.secure_server.VerifiedSecureAggregation` runs them); the
    sites in ``skip_endorse``/``skip_unmask`` never answer that stage; ``between(sites)``
    runs after the endorsements."""
    while not server.decodable(round_number):
        consistency = wire(server.consistency_request(round_number))
        for name in server.endorsers(round_number):
            if name not in skip_endorse:
                server.receive_endorsement(wire(sites[name].endorse(consistency)))
        if between is not None:
            between(sites)
        for name, request in server.unmask_requests(round_number).items():
            if name not in skip_unmask:
                server.receive_reveal(wire(sites[name].unmask(wire(request))))
    return server.decode(round_number)


def run_round(server, sites, round_number, values, skip_input=(), **skips):
    send_inputs(server, sites, round_number, values, skip_input)
    return finish_round(server, sites, round_number, **skips)


def masked_sites(consortium, round_number=1, names=NAMES):
    """Sites that masked round ``round_number``'s input, and the server."""
    server, sites = set_up(consortium, names=names)
    send_inputs(server, sites, round_number, values_for(names, 0))
    return server, sites


def endorsements(sites, survivors, endorsers, round_number=1):
    request = ConsistencyRequest(RUN, round_number, tuple(survivors))
    return {name: sites[name].endorse(request) for name in endorsers}


def macs_for(name, endorsed):
    """The MACs addressed to ``name`` among ``endorsed`` (an endorsement of a set without
    ``name`` holds none for it)."""
    return {peer: e.macs[name] for peer, e in endorsed.items() if name in e.macs}


# --- exact sums ------------------------------------------------------------------------------


def test_honest_run_decodes_the_exact_sum_every_round(consortium):
    assert THRESHOLD == 4
    server, sites = set_up(consortium)
    for round_number in range(1, ROUNDS + 1):
        values = values_for(NAMES, round_number)
        result = run_round(server, sites, round_number, values)
        assert result.dtype == np.int64
        assert np.array_equal(result, exact_sum(values, NAMES))
        # nobody dropped: exactly t endorsers are asked, not every survivor
        assert server.endorsers(round_number) == NAMES[:THRESHOLD]


def test_dropouts_within_the_threshold_keep_the_sum_exact(consortium):
    server, sites = set_up(consortium)
    dropped = NAMES[2]
    values = values_for(NAMES, 1)
    assert np.array_equal(run_round(server, sites, 1, values), exact_sum(values, NAMES))
    # round 2: one member never sends its input; the 5 survivors' exact sum
    values = values_for(NAMES, 2)
    survivors = [n for n in NAMES if n != dropped]
    result = run_round(server, sites, 2, values, skip_input=[dropped])
    assert np.array_equal(result, exact_sum(values, survivors))
    # round 2 asked every survivor (each reveals its pairwise seed with the dropped member)
    assert server.endorsers(2) == tuple(survivors)
    # round 3: the dropped member goes on (only its round-2 seeds were revealed), and one of
    # the t endorsers drops between endorsement and unmask with no earlier dropout in this
    # round: the others endorse again with every survivor that did not fail, and those who
    # have not revealed yet reveal
    values = values_for(NAMES, 3)
    result = run_round(server, sites, 3, values, skip_unmask=[NAMES[0]])
    assert np.array_equal(result, exact_sum(values, NAMES))
    assert server.endorsers(3) == NAMES[1:]


def test_an_endorser_that_never_endorses_is_replaced(consortium):
    # one of the t endorsers never endorses: nobody is asked to reveal, and the next attempt
    # asks every survivor but it; one other then never reveals: t reveals remain
    server, sites = set_up(consortium)
    values = values_for(NAMES, 1)
    result = run_round(server, sites, 1, values, skip_endorse=[NAMES[1]],
                       skip_unmask=[NAMES[4]])
    assert np.array_equal(result, exact_sum(values, NAMES))
    assert server.endorsers(1) == (NAMES[0], *NAMES[2:])


def test_a_round_whose_survivors_fail_below_the_threshold_fails(consortium):
    server, sites = set_up(consortium)
    values = values_for(NAMES, 1)
    with pytest.raises(SecureAggregationError, match="fewer than t=4 survivors endorse"):
        run_round(server, sites, 1, values, skip_unmask=NAMES[:3])


def test_a_round_below_the_threshold_fails_before_unmasking(consortium):
    server, sites = set_up(consortium)
    send_inputs(server, sites, 1, values_for(NAMES, 1), skip=NAMES[:3])
    with pytest.raises(SecureAggregationError, match="fewer survivors than the threshold"):
        server.consistency_request(1)
    # a hostile server that asks anyway gets no endorsement
    with pytest.raises(ProtocolRefusal, match="fewer survivors than the threshold"):
        sites[NAMES[4]].endorse(ConsistencyRequest(RUN, 1, NAMES[3:]))


def test_endorsers_named_by_the_server_mac_each_other_and_nothing_else(consortium):
    server, sites = masked_sites(consortium)
    asked = NAMES[:THRESHOLD]
    request = ConsistencyRequest(RUN, 1, NAMES, asked)
    endorsed = {name: sites[name].endorse(request) for name in asked}
    for name, endorsement in endorsed.items():
        assert set(endorsement.macs) == set(asked) - {name}
    # the t endorsers' MACs are enough to reveal; each verifies the others'
    reveal = sites[asked[0]].unmask(UnmaskRequest(RUN, 1, NAMES, macs_for(asked[0], endorsed)))
    assert reveal.share_members == NAMES
    for endorsers, reason in ((NAMES[1:THRESHOLD + 1], "include this site"),
                              ((*asked[:-1], "nobody"), "include this site"),
                              (NAMES[:THRESHOLD - 1], "fewer endorsers than the threshold")):
        with pytest.raises(ProtocolRefusal, match=reason):
            sites[NAMES[0]].endorse(ConsistencyRequest(RUN, 1, NAMES, endorsers))


def test_dropout_before_input_and_before_unmask_fails_the_round(consortium):
    """Design point (d): the pair seeds of the survivor that left with the member that had
    already left are lost; the server refuses to decode."""
    server, sites = set_up(consortium)
    send_inputs(server, sites, 1, values_for(NAMES, 1), skip=[NAMES[0]])
    with pytest.raises(SecureAggregationError, match="pairwise masks are lost"):
        finish_round(server, sites, 1, skip_unmask=[NAMES[1]])


# --- attacks ---------------------------------------------------------------------------------


def test_attack_threshold_one_and_a_lonely_key_list_are_refused(consortium):
    """Flower 1.41's SecAgg+ hole: a threshold of 1 and a key list of the site alone would
    make the site's "sum" its own value. Refused before any share or masked input."""
    site = make_site(consortium, NAMES[0])
    with pytest.raises(ProtocolRefusal, match="threshold t=1"):
        site.advertise(SetupRequest(RUN, ROUNDS, 1, MODULUS))
    own = site.advertise(SetupRequest(RUN, ROUNDS, THRESHOLD, MODULUS))  # a refusal changed nothing
    with pytest.raises(ProtocolRefusal, match="N=1 members"):
        site.share(KeyList(RUN, (own,)))
    with pytest.raises(ProtocolRefusal, match="key agreement"):
        site.check_input(InputRequest(RUN, 1, LENGTH))
    with pytest.raises(InvalidRequestError):  # the refusal is an InvalidRequestError
        check_setup(1, 1, COLLUDERS, MIN_SITES)


def _forged(request, name, roster, key=None, public_key=None):
    """An advertisement for ``name`` signed by ``key`` (by default a key the server made)."""
    key = key or Ed25519PrivateKey.generate()
    public = public_key or X25519PrivateKey.generate().public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw)
    signature = key.sign(advertisement_payload(roster.consortium, request, name, public))
    return Advertisement(name, request.run_id, public, signature)


def test_attack_forged_sybil_and_tampered_advertisements_are_refused(consortium):
    roster, keys = consortium
    request = SetupRequest(RUN, ROUNDS, THRESHOLD, MODULUS)
    sites = {name: make_site(consortium, name) for name in NAMES}
    ads = {name: site.advertise(request) for name, site in sites.items()}
    victim, own = sites[NAMES[0]], ads[NAMES[0]]
    signature = "not signed by its roster key"
    cases = [
        # M members in the roster, signed with keys the server made itself
        (signature, [own] + [_forged(request, n, roster) for n in NAMES[1:4]]),
        # members the roster does not know (Sybils)
        ("not in the roster", [own] + [_forged(request, f"sybil-{i}", roster) for i in range(3)]),
        # a valid advertisement whose public key the server replaced
        (signature, [own, ads[NAMES[1]], ads[NAMES[2]], Advertisement(
            NAMES[3], RUN, ads[NAMES[4]].public_key, ads[NAMES[3]].signature)]),
        # signed by the right member, over other run parameters (another threshold)
        (signature, [own, ads[NAMES[1]], ads[NAMES[2]], _forged(
            SetupRequest(RUN, ROUNDS, THRESHOLD - 1, MODULUS), NAMES[3], roster,
            key=keys[NAMES[3]])]),
        # the site's own advertisement replaced by another key it never made
        ("this site's advertisement", [_forged(request, NAMES[0], roster, key=keys[NAMES[0]])]
         + [ads[n] for n in NAMES[1:]]),
    ]
    for reason, listed in cases:
        with pytest.raises(ProtocolRefusal, match=reason):
            victim.share(KeyList(RUN, tuple(listed)))
    assert victim.share(KeyList(RUN, tuple(ads.values()))).ciphertexts  # the honest list works


def test_attack_inconsistent_survivor_sets_reveal_nothing(consortium):
    """Half the members endorse U3 (all six), the other half U3' (one removed): neither set has
    t endorsements, so nobody reveals, whatever MACs the server shows them."""
    _, sites = masked_sites(consortium)
    u3, u3_prime = NAMES, NAMES[:-1]
    first, second = (NAMES[0], NAMES[1], NAMES[5]), NAMES[2:5]
    endorsed_u3 = endorsements(sites, u3, first)
    endorsed_prime = endorsements(sites, u3_prime, second)
    for name in first:
        with pytest.raises(ProtocolRefusal, match="fewer than t=4"):
            sites[name].unmask(UnmaskRequest(RUN, 1, u3, macs_for(name, endorsed_u3)))
        with pytest.raises(ProtocolRefusal, match="another survivor set"):
            sites[name].unmask(UnmaskRequest(RUN, 1, u3_prime, macs_for(name, endorsed_prime)))
    for name in second:
        with pytest.raises(ProtocolRefusal, match="fewer than t=4"):
            sites[name].unmask(UnmaskRequest(RUN, 1, u3_prime, macs_for(name, endorsed_prime)))
        # a member shown the other set's MACs (as if they endorsed its set) refuses
        shown = {**macs_for(name, endorsed_prime), NAMES[0]: endorsed_u3[NAMES[0]].macs[name]}
        with pytest.raises(ProtocolRefusal, match="does not verify"):
            sites[name].unmask(UnmaskRequest(RUN, 1, u3_prime, shown))
        with pytest.raises(ProtocolRefusal, match="already endorsed another survivor set"):
            sites[name].endorse(ConsistencyRequest(RUN, 1, u3))


def test_attack_reflected_endorsement_is_refused(consortium):
    """The server returns a member's own MACs to it as its peers' endorsements."""
    _, sites = masked_sites(consortium)
    name = NAMES[0]
    own = endorsements(sites, NAMES, [name])[name]
    with pytest.raises(ProtocolRefusal, match="does not verify"):
        sites[name].unmask(UnmaskRequest(RUN, 1, NAMES, dict(own.macs)))


def test_replays_and_out_of_range_rounds_are_refused(consortium):
    server, sites = masked_sites(consortium)
    site, values = sites[NAMES[0]], values_for(NAMES, 0)
    with pytest.raises(ProtocolRefusal, match="already masked"):
        site.masked_input(InputRequest(RUN, 1, LENGTH), values[NAMES[0]])
    for round_number in (0, ROUNDS + 1):
        with pytest.raises(ProtocolRefusal, match="outside the run's rounds"):
            site.check_input(InputRequest(RUN, round_number, LENGTH))
    for length in (0, MAX_LENGTH + 1):
        with pytest.raises(ProtocolRefusal, match="length"):
            site.check_input(InputRequest(RUN, 2, length))
    with pytest.raises(ProtocolRefusal, match="another run"):
        site.check_input(InputRequest("run-2", 2, LENGTH))
    with pytest.raises(ProtocolRefusal, match="relayed once"):
        site.check_input(InputRequest(RUN, 2, LENGTH, NAMES, {NAMES[1]: b"x" * 40}))
    with pytest.raises(ProtocolRefusal, match="no masked input for round 2"):
        site.endorse(ConsistencyRequest(RUN, 2, NAMES))
    endorsed = endorsements(sites, NAMES, NAMES)
    again = site.endorse(ConsistencyRequest(RUN, 1, tuple(reversed(NAMES))))  # idempotent
    assert again.macs == endorsed[NAMES[0]].macs
    with pytest.raises(ProtocolRefusal, match="another survivor set"):
        site.unmask(UnmaskRequest(RUN, 1, NAMES[:-1], macs_for(NAMES[0], endorsed)))
    reveal = site.unmask(UnmaskRequest(RUN, 1, NAMES, macs_for(NAMES[0], endorsed)))
    assert reveal.share_members == NAMES and not reveal.seeds
    with pytest.raises(ProtocolRefusal, match="already revealed"):
        site.unmask(UnmaskRequest(RUN, 1, NAMES, macs_for(NAMES[0], endorsed)))
    with pytest.raises(InvalidDataError, match="residues"):
        site.masked_input(InputRequest(RUN, 2, LENGTH), np.full(LENGTH, MODULUS))


def test_attack_split_view_fails_decryption(consortium):
    """A colluding member signs two advertisements; the server shows site-a a key list with one
    and everybody else the other. Session ids differ, so the relayed shares do not decrypt."""
    request = SetupRequest(RUN, ROUNDS, THRESHOLD, MODULUS)
    sites = {name: make_site(consortium, name) for name in NAMES}
    ads = {name: site.advertise(request) for name, site in sites.items()}
    colluder = NAMES[5]
    other = make_site(consortium, colluder).advertise(request)  # the colluder's second key
    view_a = KeyList(RUN, tuple(ads[n] if n != colluder else other for n in NAMES))
    view_b = KeyList(RUN, tuple(ads.values()))
    bundles = {n: s.share(view_a if n == NAMES[0] else view_b) for n, s in sites.items()}
    for name in NAMES[:2]:
        relayed = {j: bundles[j].ciphertexts[name] for j in NAMES if j != name}
        with pytest.raises(ProtocolRefusal, match="do not decrypt"):
            sites[name].check_input(InputRequest(RUN, 1, LENGTH, NAMES, relayed))
    # tampering with one ciphertext is refused; the refusal changes nothing
    name = NAMES[1]
    relayed = {j: bundles[j].ciphertexts[name] for j in NAMES[1:] if j != name}
    tampered = {**relayed, NAMES[2]: relayed[NAMES[2]][:-1] + bytes([relayed[NAMES[2]][-1] ^ 1])}
    with pytest.raises(ProtocolRefusal, match="do not decrypt"):
        sites[name].check_input(InputRequest(RUN, 1, LENGTH, NAMES[1:], tampered))
    sites[name].check_input(InputRequest(RUN, 1, LENGTH, NAMES[1:], relayed))


# --- conditions ------------------------------------------------------------------------------


@pytest.mark.parametrize("members, threshold, colluders, min_sites, accepted", [
    (6, 4, 1, 2, True),
    (6, 3, 1, 2, False),   # 2t = N + c - 1: two sums possible
    (6, 4, 2, 2, False),   # 2t = N + c
    (6, 5, 2, 3, True),
    (6, 5, 2, 4, False),   # t - c < M
    (6, 7, 0, 2, False),   # t > N
    (3, 2, 0, 2, True),
    (2, 2, 0, 2, True),
    (1, 1, 0, 2, False),   # one member
    (10, 6, 0, 2, True),
    (10, 6, 3, 2, False),
    (10, 7, 3, 4, True),
    (100, 51, 0, 2, True),
    (100, 50, 0, 2, False),
    (6, 4, 1, 1, False),   # M < 2
])
def test_conditions_table(members, threshold, colluders, min_sites, accepted):
    if accepted:
        check_setup(members, threshold, colluders, min_sites)
    else:
        with pytest.raises(ProtocolRefusal, match=f"N={members} members, t={threshold}"):
            check_setup(members, threshold, colluders, min_sites)


def test_smallest_threshold():
    assert smallest_threshold(6, 1, 2) == 4
    assert smallest_threshold(300, 10, 5) == 156
    assert smallest_threshold(5, 0, 4) == 4
    with pytest.raises(ProtocolRefusal, match="N=4 members"):
        smallest_threshold(4, 2, 3)


def _certificates(members, threshold, colluders):
    """For every pair of survivor sets (U, U') (bit masks; the colluders are the first
    ``colluders`` members): can both collect ``threshold`` endorsements, when colluders endorse
    any set that holds them and each honest member endorses at most one set holding it?"""
    sets = np.arange(1 << members)
    popcount = np.array([bin(s).count("1") for s in sets])
    u, v = np.meshgrid(sets, sets, indexing="ij")
    bad = (1 << colluders) - 1
    honest = ((1 << members) - 1) ^ bad
    only_u = popcount[u & bad] + popcount[u & ~v & honest]
    only_v = popcount[v & bad] + popcount[v & ~u & honest]
    shared = popcount[u & v & honest]  # honest members in both: each picks one of the sets
    # some split x (to U) + (shared - x) (to U') gives both sets `threshold` endorsements
    low = np.maximum(0, threshold - only_u)
    high = np.minimum(shared, only_v + shared - threshold)
    return (u != v) & (low <= high)


def test_conditions_brute_force_for_small_federations():
    """Accepted setups never allow two certified survivor sets in a round, and every set with
    a certificate holds at least M honest endorsers; refused setups with 2t <= N + c (the other
    conditions holding) do allow two, so the condition is tight."""
    checked = 0
    for members, colluders, min_sites in itertools.product(range(2, 8), range(0, 6), range(2, 8)):
        for threshold in range(1, members + 1):
            try:
                check_setup(members, threshold, colluders, min_sites)
                accepted = True
            except ProtocolRefusal:
                accepted = False
            if colluders >= members:
                continue
            double = _certificates(members, threshold, colluders).any()
            if accepted:
                checked += 1
                assert not double, (members, threshold, colluders, min_sites)
                assert threshold - colluders >= min_sites  # certified sets: >= t - c honest
            elif threshold <= members and threshold - colluders >= min_sites:
                assert double, (members, threshold, colluders, min_sites)
    assert checked > 20


# --- Shamir, PRG -----------------------------------------------------------------------------


def test_shamir_threshold_reconstructs_and_fewer_do_not():
    rng = np.random.default_rng(0)
    secret = rng.integers(0, shamir.PRIME, 20)
    points = np.arange(1, 7)
    shares = shamir.split(secret, 4, points)
    assert shares.shape == (6, 20) and shares.max() < shamir.PRIME
    for subset in itertools.combinations(range(6), 4):
        index = list(subset)
        assert np.array_equal(shamir.reconstruct(points[index], shares[index]), secret)
    for subset in itertools.combinations(range(6), 3):
        index = list(subset)
        assert not np.array_equal(shamir.reconstruct(points[index], shares[index]), secret)
    assert np.array_equal(shamir.split(secret, 1, points), np.tile(secret, (6, 1)))
    # vectorised over a trailing shape: (t, members, elements)
    many = shares.reshape(6, 4, 5)
    assert np.array_equal(shamir.reconstruct(points[:4], many[:4]), secret.reshape(4, 5))
    with pytest.raises(InvalidDataError):
        shamir.split(secret, 7, points)
    with pytest.raises(InvalidDataError):
        shamir.reconstruct(np.array([1, 1]), shares[:2])


def test_shamir_bytes_round_trip():
    for _ in range(20):
        data = os.urandom(32)
        elements = shamir.bytes_to_elements(data)
        assert elements.shape == (9,) and elements.max() < 2**30
        assert shamir.elements_to_bytes(elements, 32) == data
    with pytest.raises(InvalidDataError):
        shamir.elements_to_bytes(np.full(9, 2**30), 32)
    with pytest.raises(InvalidDataError):  # 270 bits where 256 fit
        shamir.elements_to_bytes(np.full(9, 2**30 - 1), 32)


def test_prg_is_deterministic_per_seed_and_fresh_per_round():
    key = os.urandom(32)
    seeds = [round_seed(key, r) for r in (1, 2, 3)]
    assert len(set(seeds)) == 3 and round_seed(key, 1) == seeds[0]
    for modulus in (2, 2**31, 2**62):
        a = prg_sum([seeds[0]], [], 1000, modulus)
        assert a.dtype == np.uint64 and a.max() < modulus
        assert np.array_equal(a, prg_sum([seeds[0]], [], 1000, modulus))
        assert not np.array_equal(a, prg_sum([seeds[1]], [], 1000, modulus))
    assert prg_sum([seeds[0]], [], 1000, 2**62).max() > 2**61  # the high bits are used
    with pytest.raises(ValueError):
        prg_sum([seeds[0]], [], 10, 3)


# --- state, files, messages ------------------------------------------------------------------


def test_site_state_survives_serialisation(consortium):
    roster, keys = consortium

    def restore(sites):
        for name in sites:
            sites[name] = SiteSession.from_bytes(sites[name].to_bytes(), keys[name], roster,
                                                 roster.names)

    server = ServerSession(RUN, ROUNDS, THRESHOLD, MODULUS)
    sites = {name: make_site(consortium, name) for name in NAMES}
    for site in sites.values():
        server.receive_advertisement(site.advertise(server.setup_request()))
    restore(sites)  # after S1: the exchange key is in the state
    key_list = server.key_list()
    for site in sites.values():
        server.receive_bundle(site.share(key_list))
    restore(sites)  # after setup
    for round_number in (1, 2):
        values = values_for(NAMES, round_number)
        send_inputs(server, sites, round_number, values, skip=[NAMES[1]])
        restore(sites)
        result = finish_round(server, sites, round_number, between=restore)  # after endorsing
        assert np.array_equal(result, exact_sum(values, NAMES[:1] + NAMES[2:]))
    with pytest.raises(ProtocolRefusal, match="already masked"):
        sites[NAMES[0]].check_input(InputRequest(RUN, 1, LENGTH))
    with pytest.raises(ProtocolRefusal, match="already endorsed another survivor set"):
        sites[NAMES[0]].endorse(ConsistencyRequest(RUN, 2, NAMES[:1] + NAMES[3:]))
    with pytest.raises(ConfigurationError, match="not the roster's key"):
        SiteSession.from_bytes(sites[NAMES[0]].to_bytes(), keys[NAMES[1]], roster, NAMES)
    with pytest.raises(ProtocolRefusal, match="cannot be read"):
        SiteSession.from_bytes(b"{not json", keys[NAMES[0]], roster, NAMES)


def test_roster_and_signing_key_files(consortium, tmp_path):
    roster, keys = consortium
    assert roster.names == NAMES and roster.consortium == "test-consortium"
    path, entry = write_signing_key(tmp_path / "new", "site-z", "x")
    public = entry.key
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    with pytest.raises(ConfigurationError, match="exists"):
        write_signing_key(tmp_path / "new", "site-z", "x")
    path.chmod(0o640)
    with pytest.raises(ConfigurationError, match="chmod 600"):
        load_signing_key(path)
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_signing_key(tmp_path / "missing.pem")
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_roster(tmp_path / "missing.toml")
    good = base64.b64encode(roster.keys[NAMES[0]]).decode()
    bad = {
        "listed twice": f'name = "a"\nkey = "{good}"\n\n[[member]]\nname = "a"\nkey = "{public}"',
        "not valid base64": 'name = "a"\nkey = "not base64!"',
        "not 32 raw": f'name = "a"\nkey = "{base64.b64encode(b"short").decode()}"',
        "member name": f'name = "../a"\nkey = "{good}"',
    }
    for reason, member in bad.items():
        file = tmp_path / "roster.toml"
        member = member.replace("\n\n[[member]]", '\nproof = "AAAA"\n\n[[member]]')
        file.write_text(f'[roster]\nconsortium = "x"\n\n[[member]]\n{member}\nproof = "AAAA"\n')
        with pytest.raises(ConfigurationError, match=reason) as error:
            load_roster(file)
        assert "\n" not in str(error.value)
    with pytest.raises(ConfigurationError, match="same key"):
        Roster.from_members("x", {"a": roster_entry("x", "a", keys[NAMES[0]]),
                                  "b": roster_entry("x", "b", keys[NAMES[0]])})
    with pytest.raises(ConfigurationError, match="not in the roster"):
        SiteSession("site-z", keys[NAMES[0]], roster, min_sites=2, colluders=0, max_rounds=1,
                    vouched=NAMES)
    with pytest.raises(ConfigurationError, match="min_sites"):
        make_site(consortium, NAMES[0], min_sites=1)


def test_messages_round_trip_and_malformed_ones_are_refused(consortium):
    server, sites = set_up(consortium, names=NAMES[:4])
    request = server.input_requests(1, LENGTH)[NAMES[0]]
    masked = sites[NAMES[0]].masked_input(request, np.arange(LENGTH))
    messages = [server.setup_request(), server.key_list(), request, masked,
                ConsistencyRequest(RUN, 1, NAMES[:4])]
    for message in messages:
        data = message.to_dict()
        for value in data.values():
            assert isinstance(value, (str, int, bytes, list)) and not isinstance(value, bool)
            if isinstance(value, list):
                assert all(isinstance(v, (str, bytes)) for v in value)
        assert wire(message).to_dict() == data
    data = request.to_dict()
    malformed = [
        {**data, "round": "1"}, {**data, "round": True}, {**data, "kind": "other"},
        {k: v for k, v in data.items() if k != "length"}, {**data, "extra": 1},
        {**data, "senders": data["senders"].rsplit("\n", 1)[0]},
        {**data, "senders": data["senders"] + "\n"}, {**data, "setup_members": [1, 2]},
        {**data, "setup_members": ["a", "b"]}, {**data, "setup_members": "a\na"},
        {**data, "setup_members": "../x"}, {**data, "setup_members": "a\n\nb"},
        {**data, "setup_members": "a\n" + "b" * 65}, {**data, "setup_members": "a b"},
        {**masked.to_dict(), "vector": b"\0" * 7}, "not a mapping",
        {**server.key_list().to_dict(), "signatures": b"\0" * 10},
        {**server.key_list().to_dict(), "public_keys": b"\0" * 32},
    ]
    for bad in malformed:
        with pytest.raises(ProtocolRefusal):
            message_from_dict(bad)
    assert isinstance(wire(masked), MaskedInput)


def test_prg_is_the_chacha20_keystream():
    # ChaCha20-Poly1305's encryption of zeros is the ChaCha20 keystream from block 1 (RFC 8439)
    seed = bytes(range(32))
    counter_one = (1).to_bytes(4, "little") + bytes(12)
    keystream = Cipher(algorithms.ChaCha20(seed, counter_one), mode=None).encryptor().update(
        bytes(8 * 100))
    np.testing.assert_array_equal(prg_sum([seed], [], 100, 2**32),
                                  np.frombuffer(keystream[:400], dtype="<u4"))
    np.testing.assert_array_equal(prg_sum([seed], [], 100, 2**62),
                                  np.frombuffer(keystream, dtype="<u8") & np.uint64(2**62 - 1))

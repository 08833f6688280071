"""A roster a site can check: proofs of possession, fingerprints, and only vouched members
counted as honest (Sybils the roster's writer added count as colluders), by key or by CA."""

import datetime

import numpy as np
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedpca.errors import ConfigurationError
from fedpca.secure.conditions import ProtocolRefusal, smallest_threshold
from fedpca.secure.roster import (
    Roster,
    RosterEntry,
    key_fingerprint,
    load_roster,
    normal_fingerprint,
    roster_entry,
    write_roster,
)
from fedpca.secure.server_session import ServerSession
from fedpca.secure.site_session import SiteSession
from fedpca.secure.vouching import (
    load_authority,
    load_revocation_list,
    member_certificate,
    new_authority,
    vouched_members,
)
from fedpca.site.policy import PolicyError, load_site_policy
from fedpca.site.policy_template import write_policy_template

CONSORTIUM, RUN, MODULUS, LENGTH = "study", "run-1", 2**31, 8
SITE, PEERS = "hospital-a", ("hospital-b", "hospital-c")


@pytest.fixture(scope="module")
def keys():
    """The real members' keys and nine keys the coordinator made for itself."""
    names = [SITE, *PEERS, *(f"sybil-{i}" for i in range(9))]
    return {name: Ed25519PrivateKey.generate() for name in names}


def roster_of(keys, names, consortium=CONSORTIUM) -> Roster:
    return Roster.from_members(consortium, {n: roster_entry(consortium, n, keys[n])
                                            for n in names})


def session(keys, roster, name, vouched, min_sites=3, colluders=0):
    return SiteSession(name, keys[name], roster, min_sites=min_sites, colluders=colluders,
                       max_rounds=1, vouched=vouched)


def test_a_roster_entry_proves_its_key_for_its_name_and_consortium(keys, tmp_path):
    key = keys[SITE]
    with pytest.raises(ConfigurationError, match="proof of member 'hospital-a'"):
        Roster.from_members(CONSORTIUM, {SITE: roster_entry("another-study", SITE, key)})
    stolen = roster_entry(CONSORTIUM, SITE, key)  # listed under another name
    with pytest.raises(ConfigurationError, match="not made by the holder of the key"):
        Roster.from_members(CONSORTIUM, {"hospital-z": stolen})
    roster = write_roster(tmp_path / "roster.toml", CONSORTIUM, {SITE: stolen})
    assert load_roster(roster).keys == roster_of(keys, [SITE]).keys
    roster.write_text(roster.read_text().replace("proof = ", "# proof = "))
    with pytest.raises(ConfigurationError, match="needs name, key and proof"):
        load_roster(roster)


def test_fingerprints_are_short_stable_and_forgiving_to_type(keys):
    roster = roster_of(keys, [SITE, *PEERS])
    printed = roster.fingerprint(SITE)
    assert len(printed) == 39 and printed.count("-") == 7
    assert printed == roster_entry(CONSORTIUM, SITE, keys[SITE]).fingerprint
    assert normal_fingerprint(printed.lower().replace("-", " ")) == printed
    assert len({roster.fingerprint(n) for n in roster.names}) == 3
    for typo in (printed[:-1], printed.replace(printed[0], "1"), 42):
        with pytest.raises(ConfigurationError, match="not a key fingerprint"):
            normal_fingerprint(typo)
    changed = roster_of({**keys, PEERS[0]: Ed25519PrivateKey.generate()}, [SITE, *PEERS])
    assert changed.digest != roster.digest and len(roster.digest) == 16
    assert key_fingerprint(roster.keys[SITE]) == printed


def test_a_roster_of_one_real_site_and_members_the_coordinator_made_is_refused(keys):
    """The issue's attack: M = 10, c = 0, t = 10 over the site and nine Sybils whose keys the
    coordinator holds. Counted as colluders, no threshold works: refused at the setup
    request, before the site advertises anything."""
    sybils = [f"sybil-{i}" for i in range(9)]
    roster = roster_of(keys, [SITE, *sybils])
    site = session(keys, roster, SITE, vouched=[SITE], min_sites=10)
    server = ServerSession(RUN, 1, 10, MODULUS)
    with pytest.raises(ProtocolRefusal, match=r"vouched for V=1 members .* M=10"):
        site.advertise(server.setup_request())
    # the site's real vouches name keys the coordinator's roster does not hold: refused when
    # the site reads its roster, before any run
    real = roster_of(keys, [SITE, *PEERS])
    with pytest.raises(ConfigurationError, match="no member of the roster"):
        vouched_members(roster, SITE, [real.fingerprint(p) for p in PEERS], [])


def test_unvouched_members_of_a_key_list_count_as_colluders(keys):
    """A roster of the three real hospitals and two Sybils; the site vouches for the
    hospitals (M = 3, c = 0). A key list of all five needs t = 5 (t - c - u >= M with u = 2):
    t = 4 (enough were all five vouched) is refused at the key list, t = 5 is accepted and completes, and every sum it
    unmasks holds the three vouched members."""
    names = [SITE, *PEERS, "sybil-0", "sybil-1"]
    roster = roster_of(keys, names)
    vouched = vouched_members(roster, SITE, [roster.fingerprint(p) for p in PEERS], [])
    assert vouched == {SITE, *PEERS}
    assert smallest_threshold(5, 0, 3) == 3  # what it would accept were all five vouched

    def set_up(threshold):
        server = ServerSession(RUN, 1, threshold, MODULUS)
        sites = {n: session(keys, roster, n, vouched if n == SITE else names) for n in names}
        for s in sites.values():
            server.receive_advertisement(s.advertise(server.setup_request()))
        return server, sites

    server, sites = set_up(4)
    with pytest.raises(ProtocolRefusal, match=r"c=2 colluders.*2 of the colluders are members "
                                              r"this site did not vouch for"):
        sites[SITE].share(server.key_list())
    server, sites = set_up(5)
    key_list = server.key_list()
    for s in sites.values():
        server.receive_bundle(s.share(key_list))
    assert sites[SITE].key_list_members == (5, 2)
    values = {n: np.full(LENGTH, i + 1, dtype=np.int64) for i, n in enumerate(names)}
    requests = server.input_requests(1, LENGTH)
    for n, s in sites.items():
        server.receive_masked_input(s.masked_input(requests[n], values[n]))
    consistency = server.consistency_request(1)
    for s in sites.values():
        server.receive_endorsement(s.endorse(consistency))
    unmask = server.unmask_requests(1)
    for n, s in sites.items():
        server.receive_reveal(s.unmask(unmask[n]))
    assert np.array_equal(server.decode(1), sum(values.values()) % MODULUS)


def test_a_site_may_vouch_by_a_certificate_authority_that_is_not_the_coordinator(keys, tmp_path):
    authority_key, authority = new_authority("consortium CA")
    rogue_key, rogue = new_authority("the coordinator's CA")
    entries = {
        SITE: roster_entry(CONSORTIUM, SITE, keys[SITE]),
        PEERS[0]: roster_entry(CONSORTIUM, PEERS[0], keys[PEERS[0]], member_certificate(
            authority_key, authority, PEERS[0], keys[PEERS[0]].public_key(), CONSORTIUM)),
        # issued by a CA the site does not vouch for
        PEERS[1]: roster_entry(CONSORTIUM, PEERS[1], keys[PEERS[1]], member_certificate(
            rogue_key, rogue, PEERS[1], keys[PEERS[1]].public_key(), CONSORTIUM)),
        # the consortium CA's certificate, but of another member's name
        "sybil-0": roster_entry(CONSORTIUM, "sybil-0", keys["sybil-0"], member_certificate(
            authority_key, authority, PEERS[0], keys["sybil-0"].public_key(), CONSORTIUM)),
    }
    roster = load_roster(write_roster(tmp_path / "roster.toml", CONSORTIUM, entries))
    assert vouched_members(roster, SITE, [], [authority]) == {SITE, PEERS[0]}
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=3000)
    assert vouched_members(roster, SITE, [], [authority], now=later) == {SITE}  # expired
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(authority.public_bytes(serialization.Encoding.PEM))
    assert load_authority(ca_file) == authority
    ca_file.write_text(entries[PEERS[0]].certificate)
    with pytest.raises(ConfigurationError, match="not a CA certificate"):
        load_authority(ca_file)


def test_a_secure_policy_without_vouching_is_refused_with_instructions(tmp_path):
    np.save(tmp_path / "records.npy", np.eye(4))
    policy = write_policy_template(tmp_path / "policy.toml", SITE, "records.npy")
    for name in ("roster.toml", "key.pem"):
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o600)
    text = (policy.read_text().replace("min-sites = 0", "min-sites = 2")
            .replace("# worst-case-epsilon = 8", "worst-case-epsilon = 8")
            .replace('# roster = "roster.toml"', 'roster = "roster.toml"')
            .replace('# signing-key = "secagg.pem"', 'signing-key = "key.pem"'))
    policy.write_text(text)
    with pytest.raises(PolicyError, match=r"needs vouched = .*by phone or in person, never "
                                          r"through the coordinator"):
        load_site_policy(policy)
    policy.write_text(text.replace("# vouched = []", 'vouched = ["not-a-fingerprint"]'))
    with pytest.raises(PolicyError, match="not a key fingerprint"):
        load_site_policy(policy)
    fingerprint = RosterEntry(roster_entry(CONSORTIUM, SITE, Ed25519PrivateKey.generate()).key,
                              "").fingerprint
    policy.write_text(text.replace("# vouched = []", f'vouched = ["{fingerprint.lower()}"]'))
    assert load_site_policy(policy).vouched == (fingerprint,)


def test_site_check_prints_the_rosters_digest_fingerprints_vouches_and_reachable_m(tmp_path,
                                                                                   capsys):
    from fedpca.cli import main
    from fedpca.deployment.consortium import write_consortium

    data = []
    for name in ("a", "b", "c"):
        np.save(tmp_path / f"{name}.npy", np.eye(4) / 2)
        data.append(tmp_path / f"{name}.npy")
    policies = write_consortium(tmp_path / "study", ["a", "b", "c"], data, min_sites=3)
    roster = load_roster(tmp_path / "study" / "roster.toml")
    assert main(["site", "check", "--policy", str(policies[0])]) == 0
    out = capsys.readouterr().out
    assert f"3 members, digest {roster.digest}" in out
    for name in ("a", "b", "c"):
        assert f"{name:<20} {roster.fingerprint(name)}  vouched" in out
    assert "a sum can keep at most 3 honest members this site vouched for" in out
    # the site stops vouching for c: min-sites = 3 can no longer be reached
    text = policies[0].read_text()
    policies[0].write_text(text.replace(f'"{roster.fingerprint("c")}"', "").replace(", ]", "]")
                           .replace("[, ", "["))
    assert main(["site", "check", "--policy", str(policies[0])]) == 1
    out = capsys.readouterr().out
    assert f"c                    {roster.fingerprint('c')}  NOT vouched" in out
    assert "PROBLEM: 2 vouched members" in out and "fewer than min-sites=3" in out
    # ... and revokes it: the check says so; vouching for a revoked key is a problem too
    unvouched = policies[0].read_text()
    revoked = f'revoked = ["{roster.fingerprint("c")}"]\n'
    policies[0].write_text(unvouched.replace("\nvouched = ", f"\n{revoked}vouched = "))
    assert main(["site", "check", "--policy", str(policies[0])]) == 1
    assert f"c                    {roster.fingerprint('c')}  REVOKED" in capsys.readouterr().out
    policies[0].write_text(text.replace("\nvouched = ", f"\n{revoked}vouched = "))
    assert main(["site", "check", "--policy", str(policies[0])]) == 1
    assert "both vouches for and revokes key" in capsys.readouterr().out


def test_the_ca_commands_certify_a_members_key_in_its_roster_entry(tmp_path, capsys):
    from fedpca.cli import main

    assert main(["deploy", "secagg-ca", "--out", str(tmp_path / "ca"), "--name", "study CA"]) == 0
    assert (tmp_path / "ca" / "secagg-ca.key.pem").stat().st_mode & 0o777 == 0o600
    entries = {}
    for name in ("h1", "h2"):
        assert main(["deploy", "secagg-key", "--out", str(tmp_path / name), "--name", name,
                     "--consortium", CONSORTIUM]) == 0
        out = capsys.readouterr().out
        entries[name] = out.split("--member ")[1].split()[0]
        assert normal_fingerprint(out.split("fingerprint: ")[1].split()[0])
    key = entries["h1"].split("=", 1)[1].split(":")[0]
    assert main(["deploy", "secagg-cert", "--ca", str(tmp_path / "ca"), "--name", "h1",
                 "--key", key, "--consortium", CONSORTIUM, "--out", str(tmp_path / "h1.pem")]) == 0
    assert main(["deploy", "roster", "--out", str(tmp_path / "roster.toml"), "--consortium",
                 CONSORTIUM, *(f"--member={e}" for e in entries.values()),
                 "--certificate", f"h1={tmp_path / 'h1.pem'}"]) == 0
    roster = load_roster(tmp_path / "roster.toml")
    authority = load_authority(tmp_path / "ca" / "secagg-ca.pem")
    assert vouched_members(roster, "h2", [], [authority]) == {"h1", "h2"}
    # the CA withdraws h1's certificate: a site holding its fresh list no longer vouches
    assert main(["deploy", "secagg-revoke", "--ca", str(tmp_path / "ca"), "--certificate",
                 str(tmp_path / "h1.pem"), "--out", str(tmp_path / "crl.pem")]) == 0
    crl = load_revocation_list(tmp_path / "crl.pem", [authority])
    assert vouched_members(roster, "h2", [], [authority], revocation_lists=[crl]) == {"h2"}
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=31)
    with pytest.raises(ConfigurationError, match="expired on"):
        load_revocation_list(tmp_path / "crl.pem", [authority], now=later)
    assert main(["deploy", "secagg-ca", "--out", str(tmp_path / "ca"), "--name", "again"]) != 0


def test_a_certificate_vouches_only_in_its_consortium_while_its_ca_is_valid_and_unrevoked(
        keys, tmp_path):
    authority_key, authority = new_authority("consortium CA", days=10)
    entries = {SITE: roster_entry(CONSORTIUM, SITE, keys[SITE])}
    for name, consortium in ((PEERS[0], CONSORTIUM), (PEERS[1], "another-study")):
        entries[name] = roster_entry(CONSORTIUM, name, keys[name], member_certificate(
            authority_key, authority, name, keys[name].public_key(), consortium, days=30))
    roster = load_roster(write_roster(tmp_path / "roster.toml", CONSORTIUM, entries))
    assert vouched_members(roster, SITE, [], [authority]) == {SITE, PEERS[0]}
    # the member's certificate is still valid in 20 days, the CA's own is not
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=20)
    assert vouched_members(roster, SITE, [], [authority], now=later) == {SITE}
    revoked = [roster.fingerprint(PEERS[0])]
    assert vouched_members(roster, SITE, [], [authority], revoked=revoked) == {SITE}
    with pytest.raises(ConfigurationError, match="both vouches for and revokes"):
        vouched_members(roster, SITE, revoked, [], revoked=revoked)

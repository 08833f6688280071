"""A hostile coordinator against a real site that answers only inside verified secure sums,
through the App's real ClientApp (its policy, roster, signing key and lifetime ledger).

The coordinator plays the server of fedpca's secure aggregation with the site and two
other members of a three-site consortium (their sessions run in this process). Each attack
is refused before the site sends anything masked, and its ledger shows no release; the
honest run charges both guarantees and sends a vector only the sum unmasks.
"""

import dataclasses
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flwr.app import ConfigRecord, Context, RecordDict
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS
from secure_consortium import (
    CONSORTIUM,
    D,
    PEERS,
    RUN_ID,
    SITE,
    finish_round,
    ledger_rows,
    make_consortium,
    protocol,
    refused,
    run_identity,
    sent_at_once,
    send,
    server_for,
    setup,
    site_context,
    the_sum,
    with_request,
)

from fedpca.linalg.subspace import triangle_size
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS
from fedpca.dp.hadamard import next_power_of_two
from fedpca.dp.mechanisms import upper_triangle_sensitivity
from fedpca.flower.secure_wire import PROTOCOL_RECORD, read_masked_input
from fedpca.site.ledger_report import format_ledger, summarize
from fedpca.site.policy import load_site_policy
from fedpca.secure.messages import Advertisement, InputRequest, KeyList
from fedpca.secure.roster import (
    load_roster,
    load_signing_key,
    public_key_b64,
    roster_entry,
    write_roster,
)
from fedpca.secure.site_session import SiteSession


@pytest.fixture(autouse=True)
def _run_identity(monkeypatch):
    run_identity(monkeypatch)


@pytest.fixture
def consortium(tmp_path):
    return make_consortium(tmp_path)


def test_attack_1_threshold_one_and_the_site_alone_is_refused_before_anything_masked(
        consortium):
    policy, roster, keys = consortium
    context = site_context(policy)
    server = server_for(policy, 1)
    refused(send(context, protocol(server.setup_request())), "threshold t=1", "M=3")
    # a threshold that fits, then a key list of the site alone
    server = server_for(policy, 3)
    reply = send(context, protocol(server.setup_request()))
    own = Advertisement.from_dict(dict(reply.content.config_records[PROTOCOL_RECORD]))
    refused(send(context, protocol(KeyList(str(RUN_ID), (own,)))), "N=1")
    # asked for its input anyway, with no completed setup: nothing is computed or charged
    alone = InputRequest(str(RUN_ID), 1, next_power_of_two(triangle_size(D)), (SITE,))
    refused(send(context, with_request(alone, the_sum(policy))), "hospital-a")
    assert ledger_rows(policy) == []


def forged_key_list(policy, keys, forged: dict) -> tuple[Context, KeyList]:
    """The site's own advertisement beside members the coordinator made: ``forged`` maps
    their names to key pairs it holds (advertised as if by members of a roster it wrote)."""
    context = site_context(policy)
    server = server_for(policy, 3)
    reply = send(context, protocol(server.setup_request()))
    server.receive_advertisement(Advertisement.from_dict(
        dict(reply.content.config_records[PROTOCOL_RECORD])))
    its_roster = load_roster(write_roster(
        policy.parent / "coordinators-roster.toml", CONSORTIUM,
        {SITE: roster_entry(CONSORTIUM, SITE, keys[SITE]),
         **{name: roster_entry(CONSORTIUM, name, key) for name, key in forged.items()}}))
    for name, key in forged.items():
        session = SiteSession(name, key, its_roster, min_sites=3, colluders=0, max_rounds=1,
                              vouched=its_roster.names)
        server.receive_advertisement(session.advertise(server.setup_request()))
    return context, server.key_list()


def test_attack_2_neighbours_keys_made_by_the_coordinator_are_refused(consortium):
    policy, _, keys = consortium
    # the coordinator's own key pairs under the peers' names (right names, wrong keys)
    context, key_list = forged_key_list(
        policy, keys, {name: Ed25519PrivateKey.generate() for name in PEERS})
    refused(send(context, protocol(key_list)), "hospital-a: refused",
            "not signed by its roster key")
    assert ledger_rows(policy) == []


def test_attack_3_sybils_outside_the_roster_are_refused(consortium):
    policy, _, keys = consortium
    context, key_list = forged_key_list(
        policy, keys, {f"fake-{i}": Ed25519PrivateKey.generate() for i in range(4)})
    refused(send(context, protocol(key_list)), "hospital-a: refused", "roster")
    assert ledger_rows(policy) == []


def test_flowers_secagg_plus_is_refused_at_a_site_with_min_sites(consortium):
    policy, _, _ = consortium
    content = RecordDict({RECORD_KEY_CONFIGS: ConfigRecord({"stage": "setup"})})
    refused(send(site_context(policy), content), "refused", "a request carries exactly")
    assert ledger_rows(policy) == []


def test_the_sites_policy_decides_its_sum_and_the_honest_answer_is_masked(consortium):
    policy, roster, keys = consortium
    context = site_context(policy)
    server, others = setup(context, policy, roster, keys)
    length = next_power_of_two(triangle_size(D))
    requests = server.input_requests(1, length)

    def ask(**changes):
        return send(context, with_request(requests[SITE], the_sum(policy, **changes)))

    # a sum over fewer sites than the site's M, of a smaller sensitivity, another modulus
    # than the members agreed on: refused before anything is charged
    refused(ask(sum_sites_in_sum=2), "differs from the one", "sum_sites_in_sum")
    refused(ask(sum_sensitivity=upper_triangle_sensitivity(1.0) / 4), "sum_sensitivity")
    refused(ask(sum_modulus=2**20), "sum_modulus")
    assert ledger_rows(policy) == []
    reply = ask()
    assert not reply.has_error(), reply.error.reason
    masked = read_masked_input(reply.content)
    (row,) = ledger_rows(policy)  # charged once, durably, with both guarantees
    assert row["sites_in_sum"] == 3 and row["summands"] >= 3 and masked.vector.shape == (length,)
    # the same request again (the site restarted, or a repeat): the same masked vector,
    # from the site's journal, nothing charged; another request for the round: refused
    again = read_masked_input(ask().content)
    np.testing.assert_array_equal(again.vector, masked.vector)
    other = dataclasses.replace(requests[SITE], ciphertexts={})
    refused(send(context, with_request(other, the_sum(policy))), "already masked")
    assert len(ledger_rows(policy)) == 1
    # the round completes through the ClientApp; the peers send zeros, so the unmasked sum
    # is the site's own residues, which its masked vector does not show
    server.receive_masked_input(masked)
    for name, session in others.items():
        server.receive_masked_input(session.masked_input(requests[name],
                                                         np.zeros(length, dtype=np.int64)))
    residues, unmask = finish_round(context, server, others)
    assert residues.shape == (length,) and not np.array_equal(residues, masked.vector)
    assert residues.min() >= 0 and residues.max() < DEFAULT_MODULUS
    # one reveal per round: the same unmask request again gets the journaled reveal,
    # one for another survivor set nothing
    first, again = (send(context, protocol(unmask)) for _ in range(2))
    assert not again.has_error() and (dict(again.content.config_records[PROTOCOL_RECORD])
                                      == dict(first.content.config_records[PROTOCOL_RECORD]))
    fewer = dataclasses.replace(unmask, survivors=unmask.survivors[:-1])
    refused(send(context, protocol(fewer)), "hospital-a")


def test_the_key_and_roster_commands_write_what_a_site_loads(tmp_path, capsys):
    from fedpca.cli import main

    entries = []
    for name in ("h1", "h2"):
        assert main(["deploy", "secagg-key", "--out", str(tmp_path / name), "--name", name,
                     "--consortium", "c"]) == 0
        entries.append(capsys.readouterr().out.split("--member ")[1].split()[0])
    roster_file = tmp_path / "roster.toml"
    args = ["deploy", "roster", "--out", str(roster_file), "--consortium", "c"]
    assert main([*args, *(f"--member={entry}" for entry in entries)]) == 0
    roster = load_roster(roster_file)
    key = load_signing_key(tmp_path / "h1" / "h1.secagg-key.pem")
    assert roster.names == ("h1", "h2")
    assert public_key_b64(key) == entries[0].split("=", 1)[1].split(":")[0]
    assert (tmp_path / "h1" / "h1.secagg-key.pem").stat().st_mode & 0o777 == 0o600
    assert main([*args[:3], str(tmp_path / "r2.toml"), *args[4:], "--member", "h1"]) != 0


def test_concurrent_endorsements_in_two_processes_are_refused_after_the_first(consortium):
    """Two ClientApp processes holding the same run state are asked for the round's
    endorsement at once: the ledger's record, under its write lock, lets exactly one
    endorse; the run's key list is in the ledger's row of the run."""
    policy, roster, keys = consortium
    context = site_context(policy)
    server, others = setup(context, policy, roster, keys)
    length = next_power_of_two(triangle_size(D))
    requests = server.input_requests(1, length)
    reply = send(context, with_request(requests[SITE], the_sum(policy)))
    server.receive_masked_input(read_masked_input(reply.content))
    for name, session in others.items():
        server.receive_masked_input(session.masked_input(requests[name],
                                                         np.zeros(length, dtype=np.int64)))
    answers = sent_at_once(context, protocol(server.consistency_request(1)), "endorsed")
    assert answers[0] == "endorsed", answers
    assert "already recorded its endorsement for round 1" in answers[1], answers
    assert "Traceback" not in answers[1]
    ledger = load_site_policy(policy).open_ledger()
    note = ledger.run_records()[str(RUN_ID)]["key_list"]
    assert note.startswith("3 members, every one vouched for by this site; sums agreed as "
                           "description "), note
    assert "secure sums: 3 members, every one vouched" in format_ledger(summarize(ledger))


def test_a_roster_the_coordinator_wrote_with_its_own_members_is_refused_before_anything_sent(
        consortium):
    """The coordinator hands the site a roster of itself and nine members whose keys it
    made (every entry's proof valid): the members the site vouched for are not in it, so the
    setup is refused before the site advertises anything; the site's own roster, with the
    fingerprints it compared, works as before."""
    policy, roster, keys = consortium
    site_roster = policy.parent / "roster.toml"
    honest = site_roster.read_text()
    sybils = {f"member-{i}": Ed25519PrivateKey.generate() for i in range(9)}
    write_roster(site_roster, CONSORTIUM, {
        SITE: roster_entry(CONSORTIUM, SITE, keys[SITE]),
        **{name: roster_entry(CONSORTIUM, name, key) for name, key in sybils.items()}})
    try:
        server = server_for(policy, 10)
        refused(send(site_context(policy), protocol(server.setup_request())),
                "vouches for key", "which no member of the roster")
    finally:
        site_roster.write_text(honest)
    assert ledger_rows(policy) == []
    server = server_for(policy, 3)
    assert not send(site_context(policy), protocol(server.setup_request())).has_error()

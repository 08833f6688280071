"""A hostile coordinator against what a real site's secure sums rest on, through the App's real
ClientApp (``tests/secure_consortium.py``: the site, its two peers' sessions, the run's agreed
description): every member honest and vouched, and still the coordinator tries to make the
site's ledger record more noise than its sums carry.

* per-member sums (a grid, record bound, sum size or noise of the peers' own): the peers'
  signatures over another description are refused before the site sends any share, and a
  round's request naming another sum than the agreed one is refused before anything is
  computed or charged;
* a noise below the site's own need (what a laxer peer's policy would add): refused before
  the charge; a laxer peer adds the agreed noise, and the decoded noise is what the site's
  ledger records;
* certificates of the vouched CA for another consortium, of an expired CA, or revoked: they
  vouch for nobody;
* two processes asked for the same round's input: exactly one answers;
* a 10 MB run_config value: a short refusal, a short log line, no file path of the site.
"""

import dataclasses
import datetime
import math

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID
from flwr.app import Message, MessageType
from secure_consortium import (
    CONSORTIUM,
    N,
    PEERS,
    RUN_ID,
    SITE,
    agreed_sum,
    description,
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
    site_policy,
    the_sum,
    unit_rows,
    width,
    with_request,
)

from fedpca.algorithms.dpdis_pca import VARIANT_SECURE, DPdisPCASite, secure_sum_for
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS
from fedpca.dp.hadamard import next_power_of_two
from fedpca.flower.app import client_app
from fedpca.flower.secure_wire import PROTOCOL_RECORD, read_masked_input
from fedpca.flower.wire import readiness_question
from fedpca.linalg.subspace import triangle_size
from fedpca.secure.conditions import ProtocolRefusal
from fedpca.secure.messages import Advertisement, KeyList, SetupRequest
from fedpca.secure.site_session import SiteSession
from fedpca.secure.vouching import member_certificate, new_authority, revocation_list


@pytest.fixture(autouse=True)
def _run_identity(monkeypatch):
    run_identity(monkeypatch)


@pytest.fixture
def consortium(tmp_path):
    return make_consortium(tmp_path)


def peer_sessions(roster, keys, max_rounds=1):
    return {name: SiteSession(name, keys[name], roster, min_sites=3, colluders=0,
                              max_rounds=max_rounds, vouched=roster.names) for name in PEERS}


def coarse_sum(policy):
    """The sum a coordinator would show the peers to coarsen their grid: the largest record
    bound and sites per sum their grid search accepts (the honest record bound is ``N``)."""
    return secure_sum_for(site_policy(policy), width(policy), 1000 * N, 10, rotation_seed=11)[0]


@pytest.mark.parametrize("other", ["coarse grid", "less noise", "other rotation"])
def test_peers_shown_another_description_are_refused_before_the_site_sends_a_share(
        consortium, other):
    """Grid splitting: the site sees the honest description, its peers one with a coarser
    grid (more records, more sites per sum), less noise or another rotation. Their
    advertisements are signed over theirs, so the site refuses the key list before it sends
    any share, and the peers refuse the site's advertisement alike."""
    policy, roster, keys = consortium
    honest = agreed_sum(policy)
    theirs = {"coarse grid": coarse_sum(policy),
              "less noise": dataclasses.replace(honest, sigma_sq=honest.sigma_sq // 16),
              "other rotation": dataclasses.replace(honest, rotation_seed=12)}[other]
    if other == "coarse grid":  # the attack the description defeats: a 3.75x coarser grid
        assert theirs.grid_step > 3.5 * honest.grid_step
    context = site_context(policy)
    reply = send(context, protocol(server_for(policy).setup_request()))
    own = Advertisement.from_dict(dict(reply.content.config_records[PROTOCOL_RECORD]))
    shown = SetupRequest(str(RUN_ID), 1, 3, DEFAULT_MODULUS, description(policy, (theirs,)))
    sessions = peer_sessions(roster, keys)
    key_list = KeyList(str(RUN_ID), (own, *(s.advertise(shown) for s in sessions.values())))
    refused(send(context, protocol(key_list)), "hospital-a: refused",
            "not signed by its roster key over this run's parameters")
    for session in sessions.values():
        with pytest.raises(ProtocolRefusal, match="not signed by its roster key"):
            session.share(key_list)
    assert ledger_rows(policy) == []


def test_a_setup_whose_description_is_not_the_runs_is_refused_before_the_site_advertises(
        consortium):
    policy, _, _ = consortium
    context = site_context(policy)
    for request, why in [
        (SetupRequest(str(RUN_ID), 1, 3, DEFAULT_MODULUS), "is not JSON"),
        (SetupRequest(str(RUN_ID), 2, 3, DEFAULT_MODULUS, description(policy)),
         "covers 1 rounds and the setup asks for 2"),
        (SetupRequest(str(RUN_ID), 1, 3, DEFAULT_MODULUS, description(policy, min_sites=2)),
         "assume M=2"),
        (SetupRequest(str(RUN_ID), 1, 3, DEFAULT_MODULUS, description(policy)[:-1] + " }"),
         "canonical form"),
    ]:
        refused(send(context, protocol(request)), "hospital-a: refused", why)
    assert ledger_rows(policy) == []


@pytest.mark.parametrize("changes", [
    {"sum_max_records": 1000 * N},
    {"sum_sites_in_sum": 10},
    {"sum_grid_step": "x4"},
    {"sum_sigma_sq": "/16"},
    {"sum_draws": 2},
    {"sum_rotation_seed": 12},
])
def test_a_round_naming_another_sum_than_the_agreed_one_is_refused_before_the_charge(
        consortium, changes):
    policy, roster, keys = consortium
    context = site_context(policy)
    server, _ = setup(context, policy, roster, keys)
    honest = agreed_sum(policy)
    (key, value), = changes.items()
    if value == "x4":
        value = 4 * honest.grid_step
    elif value == "/16":
        value = honest.sigma_sq // 16
    request = server.input_requests(1, next_power_of_two(triangle_size(width(policy))))[SITE]
    refused(send(context, with_request(request, the_sum(policy, **{key: value}))),
            "differs from the one the run's members agreed for round 1", key)
    # the whole coarse sum, as the peers would be asked for it
    refused(send(context, with_request(request, the_sum(policy, coarse_sum(policy)))),
            "differs from the one the run's members agreed")
    assert ledger_rows(policy) == []
    reply = send(context, with_request(request, the_sum(policy)))
    assert not reply.has_error(), reply.error.reason
    (row,) = ledger_rows(policy)
    assert row["sites_in_sum"] == 3 and row["grid_step"] == pytest.approx(honest.grid_step)


def test_an_agreed_noise_below_the_sites_own_need_is_refused_before_the_charge(consortium):
    """The coordinator agrees with every member on the noise a laxer policy (run epsilon 4)
    would add: the site, whose policy spends 1 per run, refuses it before it masks or
    charges anything."""
    policy, roster, keys = consortium
    lax = secure_sum_for(site_policy(policy, epsilon=4.0), width(policy), N, 3,
                         rotation_seed=11)[0]
    assert lax.draws * lax.sigma_sq < agreed_sum(policy).draws * agreed_sum(policy).sigma_sq
    context = site_context(policy)
    server, _ = setup(context, policy, roster, keys,
                      server=server_for(policy, sums=(lax,)))
    request = server.input_requests(1, next_power_of_two(triangle_size(width(policy))))[SITE]
    refused(send(context, with_request(request, the_sum(policy, lax))),
            "hospital-a: refused: the agreed noise", "is below what epsilon=1",
            "nothing was released")
    assert ledger_rows(policy) == []


def one_run(policy, roster, keys, run_id, peers_policy):
    """One honest run of the three members: the site through its ClientApp, two peers of a
    laxer policy adding the agreed noise (their statistics of their own records); the
    decoded sum's error from the true sum, and the site's ledger row of the run."""
    context = site_context(policy, run_id)
    secure = agreed_sum(policy)
    server = server_for(policy, run_id=run_id)
    server, sessions = setup(context, policy, roster, keys, server=server)
    length = next_power_of_two(triangle_size(width(policy)))
    requests = server.input_requests(1, length)
    reply = send(context, with_request(requests[SITE], the_sum(policy)))
    assert not reply.has_error(), reply.error.reason
    server.receive_masked_input(read_masked_input(reply.content))
    records = {SITE: np.load(policy.parent / "records.npy")}
    for index, (name, session) in enumerate(sessions.items()):
        records[name] = unit_rows(run_id * 10 + index + 1, width(policy))
        peer = DPdisPCASite(records[name], peers_policy, site=name, seed=None)
        residues = peer.release(VARIANT_SECURE, secure=secure)
        server.receive_masked_input(session.masked_input(requests[name], residues))
    decoded = secure.decode([finish_round(context, server, sessions)[0]])
    dim = width(policy)
    truth = sum(X.T @ X for X in records.values())[np.triu_indices(dim)]
    (row,) = [r for r in ledger_rows(policy) if r["run_id"] == str(run_id)]
    return decoded - truth, row


def test_the_decoded_noise_is_the_noise_the_sites_ledger_records(tmp_path):
    """A consortium of mixed policies (the site at run epsilon 1, its peers at 4): the honest
    coordinator agrees on the noise the strictest needs, the laxer peers add it, and over
    3 runs (6,240 coordinates) the decoded noise's standard deviation is the one the site's
    ledger records (its conditional line: M = 3 members' agreed shares) within 5%."""
    policy, roster, keys = make_consortium(tmp_path, dim=64, budget=20.0)
    lax = site_policy(policy, epsilon=4.0)
    errors, rows = zip(*(one_run(policy, roster, keys, run, lax) for run in (2, 3, 4)))
    errors = np.concatenate(errors)
    recorded = {row["sigma"] * row["grid_step"] for row in rows}
    assert len(recorded) == 1 and all(row["sites_in_sum"] == 3 for row in rows)
    (sigma,) = recorded
    assert errors.size == 3 * triangle_size(64)
    assert abs(errors.mean()) < 5 * sigma / math.sqrt(errors.size)
    assert errors.std() / sigma == pytest.approx(1.0, abs=0.05)


# -- certificates ---------------------------------------------------------------------------


def expired_authority(name: str) -> tuple[Ed25519PrivateKey, x509.Certificate]:
    """A CA whose own certificate expired 30 days ago."""
    key = Ed25519PrivateKey.generate()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=400))
                   .not_valid_after(now - datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .sign(key, None))
    return key, certificate


def ca_consortium(tmp_path, authority, consortium_of=lambda name: CONSORTIUM, extra=""):
    """The consortium, its site vouching by ``authority`` alone (its CA file beside the
    policy), every member's roster entry carrying that CA's certificate for the consortium
    ``consortium_of(name)``."""
    authority_key, certificate = authority
    tmp_path.mkdir(parents=True, exist_ok=True)
    ca_file = tmp_path / "secagg-ca.pem"
    ca_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))

    def certify(name, key):
        return member_certificate(authority_key, certificate, name, key.public_key(),
                                  consortium_of(name))

    return make_consortium(tmp_path, certify=certify, vouching=f'vouched-ca = "{ca_file}"',
                           extra=extra)


def setup_reply(policy, run_id=RUN_ID):
    """The site's reply to an honest setup of run ``run_id`` (a site reads its roster, keys
    and vouches once per run)."""
    return send(site_context(policy, run_id),
                protocol(server_for(policy, run_id=run_id).setup_request()))


def test_the_vouched_ca_vouches_for_its_members_of_this_consortium(tmp_path):
    policy, _, _ = ca_consortium(tmp_path, new_authority("consortium CA"))
    reply = setup_reply(policy)
    assert not reply.has_error(), reply.error.reason


def test_a_certificate_of_the_vouched_ca_for_another_consortium_does_not_vouch(tmp_path):
    """The coordinator's node, certified by the same CA for another study, in the roster."""
    policy, _, _ = ca_consortium(tmp_path, new_authority("consortium CA"),
                                 lambda name: "another-study" if name == PEERS[1] else CONSORTIUM)
    refused(setup_reply(policy), "vouched for V=2 members", "need V >= M + c")
    assert ledger_rows(policy) == []


def test_no_certificate_of_an_expired_ca_vouches(tmp_path):
    policy, _, _ = ca_consortium(tmp_path, expired_authority("consortium CA"))
    refused(setup_reply(policy), "vouched for V=1 members")
    assert ledger_rows(policy) == []


def test_a_revoked_fingerprint_and_a_revoked_certificate_do_not_vouch(tmp_path):
    authority = new_authority("consortium CA")
    policy, roster, _ = ca_consortium(tmp_path / "a", authority)
    revoked = roster.fingerprint(PEERS[0])
    text = policy.read_text().replace('\nvouched-ca = "', f'\nrevoked = ["{revoked}"]\nvouched-ca = "')
    policy.write_text(text)
    refused(setup_reply(policy), "vouched for V=2 members")
    # the CA's revocation list of the other peer's certificate
    policy, roster, _ = ca_consortium(tmp_path / "b", authority,
                                      extra='revocation-list = "crl.pem"')
    withdrawn = x509.load_pem_x509_certificate(roster.certificates[PEERS[1]].encode())
    crl = revocation_list(authority[0], authority[1], [withdrawn])
    (policy.parent / "crl.pem").write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    refused(setup_reply(policy), "vouched for V=2 members")
    # a list the vouched CA did not sign is refused, and says so without the site's paths
    rogue = new_authority("the coordinator's CA")
    (policy.parent / "crl.pem").write_bytes(revocation_list(rogue[0], rogue[1], []).public_bytes(
        serialization.Encoding.PEM))
    reply = setup_reply(policy, run_id=2)
    refused(reply, "is not signed by a CA this site vouches for", "<a file of the site>")
    assert str(tmp_path) not in reply.error.reason
    # a fresh, empty list of the vouched CA: every member vouches again
    (policy.parent / "crl.pem").write_bytes(revocation_list(*authority, []).public_bytes(
        serialization.Encoding.PEM))
    assert not setup_reply(policy, run_id=3).has_error()


# -- the input stage, once per round ---------------------------------------------------------


def test_two_processes_asked_for_the_same_rounds_input_answer_once(consortium):
    policy, roster, keys = consortium
    context = site_context(policy)
    server, _ = setup(context, policy, roster, keys)
    request = server.input_requests(1, next_power_of_two(triangle_size(width(policy))))[SITE]
    answers = sent_at_once(context, with_request(request, the_sum(policy)), "masked")
    assert answers[0] == "masked", answers
    assert "already recorded its masked-input for round 1" in answers[1], answers
    assert len(ledger_rows(policy)) == 1  # one charge, one noisy view


# -- bounded, path-free refusals --------------------------------------------------------------


def readiness(context):
    return client_app(Message(content=readiness_question(), dst_node_id=7,
                              message_type=MessageType.QUERY), context)


@pytest.mark.parametrize("key", ["contract", "start-sha256", "seed"])
def test_a_10_mb_run_config_value_gets_a_short_refusal_and_log_line(consortium, caplog, key):
    policy, _, _ = consortium
    caplog.set_level("INFO")
    context = site_context(policy)
    context.run_config[key] = "x" * 10_000_000
    reply = readiness(context)
    assert reply.has_error()
    assert len(reply.error.reason) < 1000, len(reply.error.reason)
    assert "xxxxxxxxxx" * 9 not in reply.error.reason
    assert str(policy.parent) not in reply.error.reason
    assert caplog.records and all(len(r.getMessage()) < 2000 for r in caplog.records), max(
        len(r.getMessage()) for r in caplog.records)
    assert ledger_rows(policy) == []


def test_no_refusal_the_coordinator_gets_names_a_file_of_the_site(tmp_path, caplog):
    """A policy whose vouched CA file is missing: the site's log names the file, the
    refusal the coordinator gets does not."""
    policy, _, _ = make_consortium(tmp_path, vouching='vouched-ca = "missing-ca.pem"')
    caplog.set_level("WARNING")
    reply = setup_reply(policy)
    refused(reply, "vouched-ca <a file of the site> does not exist")
    assert str(tmp_path) not in reply.error.reason and "missing-ca.pem" not in reply.error.reason
    assert any(str(tmp_path) in r.getMessage() for r in caplog.records)

"""A real site of a three-member consortium, through the App's real ClientApp, and the
coordinator's side of fedpca's verified secure aggregation with it: the site's folder (its
records, roster, signing key and a policy with ``M = 3``), its two peers' sessions (run in the
test's process), the run's agreed description of its one secure sum, and the messages a
coordinator sends (``tests/test_verified_secure_site.py``, ``tests/test_agreed_sums.py``)."""

import dataclasses
import json
import multiprocessing
from collections.abc import Callable

import numpy as np
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flwr.supercore.task_identity import TaskIdentity

from fedpca.algorithms.dpdis_pca import VARIANT_SECURE, secure_sum_for
from fedpca.algorithms.secure_sum import SecureSum, SumDescription
from fedpca.flower.app import client_app
from fedpca.flower.wire import request_content
from fedpca.flower.secure_wire import PROTOCOL_RECORD
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.secure.messages import (
    Advertisement,
    Endorsement,
    Reveal,
    ShareBundle,
    UnmaskRequest,
)
from fedpca.secure.roster import (
    load_roster,
    load_signing_key,
    roster_entry,
    write_roster,
    write_signing_key,
)
from fedpca.secure.server_session import ServerSession
from fedpca.secure.site_session import SiteSession

D, N = 8, 400
SITE, PEERS = "hospital-a", ("hospital-b", "hospital-c")
RUN_ID = 1
CONSORTIUM = "test-consortium"
#: The coordinator's run_config (a real site replaces its privacy keys with its policy's).
RUN_CONFIG = {"algorithm": "dpdis-pca", "dim": D, "k": 2, "r": 0, "epsilon": 1e6,
              "delta": 0.5, "rounds": 1, "clip-norm": 100.0, "accounting": "pld",
              "secure-min-sites": 0, "seed": -1, "variant": VARIANT_SECURE,
              "weighting": "uniform", "alpha": 0.0}


def run_identity(monkeypatch) -> None:
    """Flower's messages need the run's identity (set by Flower in a real run)."""
    for attribute in ("_task_id", "_run_id", "_node_id"):
        monkeypatch.setattr(TaskIdentity, attribute, RUN_ID)


def make_consortium(tmp_path, extra: str = "", dim: int = D, budget: float | None = None,
                    certify: Callable[[str, Ed25519PrivateKey], str] | None = None,
                    vouching: str | None = None):
    """The real site's folder (records of ``dim`` columns, keys, roster, a policy with
    M = 3, ``extra`` appended to its ``[secure-aggregation]`` table; ``budget``: its lifetime,
    weekly and daily epsilon, else the template's) and its peers' keys; returns the policy
    path, the roster and every member's signing key. The site vouches for its peers' key
    fingerprints, or by ``vouching`` (its policy lines instead), each roster entry holding
    the certificate ``certify(name, key)`` makes when given."""
    paths = {name: write_signing_key(tmp_path / "keys", name, CONSORTIUM)[0]
             for name in (SITE, *PEERS)}
    signing = {name: load_signing_key(path) for name, path in paths.items()}
    entries = {name: roster_entry(CONSORTIUM, name, key, certify(name, key) if certify else None)
               for name, key in signing.items()}
    roster_path = write_roster(tmp_path / "roster.toml", CONSORTIUM, entries)
    roster = load_roster(roster_path)
    # compared with them by phone
    vouched = vouching or f"vouched = {json.dumps([roster.fingerprint(p) for p in PEERS])}"
    np.save(tmp_path / "records.npy", unit_rows(0, dim))
    policy = write_policy_template(tmp_path / "policy.toml", SITE, "records.npy")
    text = policy.read_text()
    if budget is not None:
        for key, value in (("epsilon", 4.0), ("weekly-epsilon", 2.0), ("daily-epsilon", 1.0)):
            text = text.replace(f"\n{key} = {value}", f"\n{key} = {float(budget)}")
    worst_case = 8 if budget is None else max(8, 10 * budget)
    text = (text
            .replace("min-sites = 0", "min-sites = 3")
            .replace("# worst-case-epsilon = 8", f"worst-case-epsilon = {worst_case}")
            .replace('# roster = "roster.toml"', f'roster = "{roster_path}"')
            .replace('# signing-key = "secagg.pem"', f'signing-key = "{paths[SITE]}"')
            .replace("# vouched = []", f"{vouched}\n{extra}"))
    policy.write_text(text)
    return policy, roster, signing


def unit_rows(seed: int, dim: int = D, n: int = N) -> np.ndarray:
    """``n`` records of ``dim`` columns on the unit sphere (the clip norm: none is clipped)."""
    X = np.random.default_rng(seed).standard_normal((n, dim))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def width(policy) -> int:
    """The columns of the real site's records."""
    return int(np.load(policy.parent / "records.npy", mmap_mode="r").shape[1])


def site_context(policy, run_id: int = RUN_ID) -> Context:
    return Context(run_id=run_id, node_id=7, node_config={"policy": str(policy)},
                   state=RecordDict(), run_config={**RUN_CONFIG, "dim": width(policy)})


def send(context: Context, content: RecordDict) -> Message:
    return client_app(Message(content=content, dst_node_id=7, message_type=MessageType.TRAIN),
                      context)


def _send_when_released(context, content, answered, barrier, results) -> None:
    barrier.wait()
    reply = send(context, content)
    results.put(reply.error.reason if reply.has_error() else answered)


def sent_at_once(context: Context, content: RecordDict, answered: str) -> list[str]:
    """Two ClientApp processes of the same SuperNode, forked from the same moment (each its
    copy of the run's state), send ``content`` at once; their outcomes, sorted: ``answered``
    for a reply, the refusal's reason for an error."""
    fork = multiprocessing.get_context("fork")
    barrier, results = fork.Barrier(2), fork.Queue()
    processes = [fork.Process(target=_send_when_released,
                              args=(context, content, answered, barrier, results))
                 for _ in range(2)]
    for process in processes:
        process.start()
    outcomes = sorted(results.get(timeout=60) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    return outcomes


def protocol(message) -> RecordDict:
    return RecordDict({PROTOCOL_RECORD: ConfigRecord(message.to_dict())})


def ledger_rows(policy):
    return load_site_policy(policy).open_ledger().rows()


def peers(roster, keys):
    return {name: SiteSession(name, keys[name], roster, min_sites=3, colluders=0,
                              max_rounds=1, vouched=roster.names) for name in PEERS}


def refused(reply: Message, *fragments: str) -> None:
    assert reply.has_error(), "the site answered"
    for fragment in fragments:
        assert fragment in reply.error.reason, reply.error.reason
    assert "Traceback" not in reply.error.reason


def agreed_sum(policy, **changes) -> SecureSum:
    """The run's one secure sum as the honest coordinator proposes it for sites holding the
    real site's policy (its grid and noise: :func:`~fedpca.algorithms.secure_sum.agreed_sum`),
    with ``changes``."""
    return dataclasses.replace(secure_sum_for(site_policy(policy), width(policy), N, 3,
                                              rotation_seed=11)[0], **changes)


def site_policy(policy, **privacy):
    """The DPdisPCA policy the real site's policy file gives a run (``privacy``: run_config
    privacy keys to change, e.g. a laxer peer's ``epsilon``)."""
    config = {**RUN_CONFIG, "dim": width(policy),
              **load_site_policy(policy).privacy_config("dpdis-pca"), **privacy}
    return DPdisPCAScenario.from_run_config(config, sites=3).policy()


def description(policy, sums=None, min_sites=3, colluders=0) -> str:
    """The run's agreed description of its sums (default: the one agreed sum)."""
    return SumDescription(min_sites, colluders, tuple(sums or (agreed_sum(policy),))).to_text()


def server_for(policy, threshold=3, run_id: int = RUN_ID, **kwargs) -> ServerSession:
    """The coordinator's session of a one-round run under :func:`description`."""
    return ServerSession(str(run_id), 1, threshold, DEFAULT_MODULUS,
                         description(policy, **kwargs))


def the_sum(policy, secure: SecureSum | None = None, **changes) -> dict:
    """A round's config naming ``secure`` (default: the agreed sum; ``changes``: config keys
    to alter)."""
    secure = secure or agreed_sum(policy)
    return {"dim": width(policy), "variant": VARIANT_SECURE, **secure.to_config(), **changes}


def setup(context, policy, roster, keys, threshold=3, server=None):
    """An honest setup of the three members (``server``: the coordinator's session, default
    :func:`server_for`'s); the server and the peers' sessions."""
    server = server or server_for(policy, threshold)
    others = peers(roster, keys)
    reply = send(context, protocol(server.setup_request()))
    assert not reply.has_error(), reply.error.reason
    server.receive_advertisement(Advertisement.from_dict(
        dict(reply.content.config_records[PROTOCOL_RECORD])))
    for session in others.values():
        server.receive_advertisement(session.advertise(server.setup_request()))
    key_list = server.key_list()
    reply = send(context, protocol(key_list))
    assert not reply.has_error(), reply.error.reason
    server.receive_bundle(ShareBundle.from_dict(
        dict(reply.content.config_records[PROTOCOL_RECORD])))
    for session in others.values():
        server.receive_bundle(session.share(key_list))
    return server, others


def with_request(request, config) -> RecordDict:
    """A Message-API request carrying the protocol's input request."""
    content = request_content([], config)
    content[PROTOCOL_RECORD] = ConfigRecord(request.to_dict())
    return content


def finish_round(context, server, sessions) -> tuple[np.ndarray, UnmaskRequest]:
    """The consistency and unmasking stages of round 1 once every member's masked input is
    in: the site answers through its ClientApp, its peers' ``sessions`` in process; the
    round's sum of residues the server then decodes, and the unmask request the site
    answered."""
    consistency = server.consistency_request(1)
    reply = send(context, protocol(consistency))
    server.receive_endorsement(Endorsement.from_dict(
        dict(reply.content.config_records[PROTOCOL_RECORD])))
    for session in sessions.values():
        server.receive_endorsement(session.endorse(consistency))
    unmask = server.unmask_requests(1)
    reply = send(context, protocol(unmask[SITE]))
    server.receive_reveal(Reveal.from_dict(dict(reply.content.config_records[PROTOCOL_RECORD])))
    for name, session in sessions.items():
        server.receive_reveal(session.unmask(unmask[name]))
    return server.decode(1), unmask[SITE]


"""A real site that restarts in the middle of a run goes on with it and releases nothing
twice (``fedpca.site.reply_journal``): each test's "restart" is a fresh ClientApp process
(nothing kept in this process) with an empty ``context.state`` (the SuperNode's memory of
the run is gone); only the site's disk remains.

* a round's request asked again gets the journaled answer, byte for byte, and no second
  release; a request that differs in any byte is a new release, charged;
* the site's secure session (its key-agreement secrets) survives on its disk: after a
  restart between its key agreement and the round's input, the site masks its input and the
  round decodes; a backup of the ledger holds none of it and the run's end deletes it.
"""

import numpy as np
import pytest
from flwr.app import Context, Message, MessageType, RecordDict
from secure_consortium import (
    SITE,
    finish_round,
    make_consortium,
    run_identity,
    send,
    setup,
    site_context,
    the_sum,
    with_request,
)
from secure_consortium import ledger_rows as secure_rows
from test_readiness_round import REQUEST, ledger_rows, real_site, scenario

import fedpca.flower.site.clientapp as clientapp
from fedpca.dp.hadamard import next_power_of_two
from fedpca.flower.app import client_app
from fedpca.flower.secure_wire import read_masked_input
from fedpca.flower.wire import request_content
from fedpca.linalg.subspace import triangle_size
from fedpca.site.ledger import SiteLedger
from fedpca.site.ledger_store import connect_ledger
from fedpca.site.policy import load_site_policy
from fedpca.site.reply_journal import request_digest
from fedpca.site.service import Ask

RUN = 5


@pytest.fixture(autouse=True)
def identity(monkeypatch):
    run_identity(monkeypatch)


def restarted() -> None:
    """A fresh ClientApp process: no service kept from an earlier message."""
    clientapp.SERVICES.clear()


def power_request(seed: int) -> Message:
    basis = np.linalg.qr(np.random.default_rng(seed).standard_normal((REQUEST["dim"], 2)))[0]
    return Message(content=request_content([basis], {"phase": "power", "round": 1}),
                   dst_node_id=1, message_type=MessageType.TRAIN)


def test_a_request_asked_again_after_a_restart_gets_the_same_answer_and_no_release(tmp_path):
    policy = real_site(tmp_path / "clinic", "clinic", scenario().all_site_data()[0], 4.0)

    def ask(message: Message) -> Message:
        restarted()  # and the SuperNode's memory of the run is empty
        return client_app(message, Context(run_id=RUN, node_id=1, state=RecordDict(),
                                           run_config=REQUEST,
                                           node_config={"policy": str(policy.path)}))

    first = ask(power_request(1))
    assert not first.has_error(), first.error.reason
    again = ask(power_request(1))
    np.testing.assert_array_equal(again.content.array_records["arrays"].to_numpy_ndarrays()[0],
                                  first.content.array_records["arrays"].to_numpy_ndarrays()[0])
    assert dict(again.content.metric_records["metrics"]) == dict(
        first.content.metric_records["metrics"])
    assert len(ledger_rows(policy)) == 1  # one release, whatever the number of asks
    # another request (another basis) is another release: charged
    assert not ask(power_request(2)).has_error()
    assert len(ledger_rows(policy)) == 2
    # the run's end deletes its journal; what it released stays spent
    ledger = load_site_policy(policy.path).open_ledger()
    assert ledger.end_run(str(RUN), "complete")
    with connect_ledger(ledger.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == 0
    assert len(ledger_rows(policy)) == 2


def test_a_request_differing_in_any_byte_has_another_digest():
    basis = np.eye(4)[:, :2]
    base = Ask([basis], {"phase": "power", "round": 1})
    others = [Ask([basis.astype(np.float32)], base.config),  # the dtype
              Ask([basis.reshape(2, 4)], base.config),  # the shape
              Ask([-basis], base.config),  # the values
              Ask([basis], {"phase": "power", "round": 2}),  # the config
              Ask([basis], {"phase": "power", "round": "1"}),  # a value's type
              Ask([basis, basis], base.config)]  # one more array
    config = {"algorithm": "dps-pca", "k": 2}
    digests = {request_digest(r, config) for r in [base, *others]}
    digests.add(request_digest(base, {**config, "k": 3}))  # the run_config changed mid-run
    assert len(digests) == 2 + len(others)
    assert request_digest(Ask([basis.copy()], dict(base.config)), dict(config)) == (
        request_digest(base, config))


def test_a_secure_site_restarted_after_its_key_agreement_masks_from_its_own_disk(tmp_path):
    policy, roster, keys = make_consortium(tmp_path)
    context = site_context(policy)
    server, others = setup(context, policy, roster, keys)  # its advertisement and shares
    requests = server.input_requests(1, next_power_of_two(triangle_size(8)))
    restarted()
    fresh = site_context(policy)  # the SuperNode restarted: its memory of the run is empty
    assert not fresh.state
    reply = send(fresh, with_request(requests[SITE], the_sum(policy)))
    assert not reply.has_error(), reply.error.reason  # its session came from its disk
    server.receive_masked_input(read_masked_input(reply.content))
    length = requests[SITE].length
    for name, session in others.items():
        server.receive_masked_input(session.masked_input(requests[name],
                                                         np.zeros(length, dtype=np.int64)))
    restarted()
    residues, _ = finish_round(site_context(policy), server, others)  # restarted once more
    assert residues.shape == (length,)
    assert len(secure_rows(policy)) == 1
    # the session's secrets are on the site's disk, never in a backup of its ledger
    ledger: SiteLedger = load_site_policy(policy).open_ledger()
    with connect_ledger(ledger.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM run_state").fetchone()[0] == 1
    ledger.backup(tmp_path / "backup.sqlite")
    with connect_ledger(tmp_path / "backup.sqlite", upgrade=False) as conn:
        assert conn.execute("SELECT COUNT(*) FROM run_state").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0] == 1

"""A site that stops answering never hangs a run: the Flower App's real ServerApp (its
:class:`~fedpca.flower.server.prompt_grid.PromptGrid` over a grid) against three real sites (their
own policy files, data and ledgers, the real ClientApp) that answer in threads of this
process, as a SuperLink's nodes answer, one message at a time. Each site's policy states
``[limits] answer-seconds = 2``, so the run's plan (the readiness round's answers) gives every
later exchange a 2 s deadline. A site still connected whose replies never come (its ClientApp
blocked) fails the run at that deadline, naming the site, long before any test timeout;
a site silent in the readiness round is left out once that round's own deadline (run_config
``readiness-seconds``) passed, a site that never connects holds the wait for the sites no
longer than run_config ``connect-seconds``, and Flower's legacy workflow, which passes no
timeout of its own, waits no longer than the plan's either."""

import functools
import json
import threading
import time
import uuid
from types import SimpleNamespace

import numpy as np
import pytest
from flwr.app import Context, Message, MessageType, RecordDict
from flwr.serverapp import Grid
from local_grid import RUN_ID, run_identity  # noqa: F401 (a fixture)

from fedpca.algorithms.specs import app_config
from fedpca.errors import ConfigurationError
from fedpca.flower.app import client_app, main
from fedpca.flower.server.app_server import server_scenario
from fedpca.flower.server.prompt_grid import prompt
from fedpca.flower.server.readiness import Deadlines
from fedpca.flower.server.rounds import (
    ReadinessRoundError,
    RoundFailedError,
    connected_nodes,
    named_nodes,
)
from fedpca.flower.server.strategies import DPSPCAStrategy
from fedpca.flower.server.workflow import run_strategy
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template

pytestmark = pytest.mark.usefixtures("run_identity")

#: What the coordinator asks: DPS-PCA of two rounds.
REQUEST = {**app_config(), "dim": 12, "samples": 3000, "k": 2, "sparsity": 4, "s-hat": 6,
           "rounds": 2, "data-seed": 1}
#: The longest each site's policy lets it take to answer one request.
ANSWER_SECONDS = 2.0
#: How long a silent site's blocked ClientApp would wait (released when the test ends).
SILENCE_SECONDS = 120.0


@functools.cache
def scenario():
    return DPSPCAScenario.from_run_config(REQUEST, sites=3)


class ThreadedGrid(Grid):
    """Each node of ``contexts`` answers every message in a thread of its own, with the
    real ``client_app``; a message for which ``silent(node, message)`` holds is never
    answered while the test runs (its node stays connected). ``sent`` lists each
    message's node and type."""

    def __init__(self, contexts: dict[int, Context], silent, connected=None) -> None:
        self._run = SimpleNamespace(run_id=RUN_ID)
        self.contexts, self.silent = contexts, silent
        self.connected = list(contexts) if connected is None else connected
        self.replies: dict[str, Message] = {}
        self.sent: list[tuple[int, str]] = []
        self.release = threading.Event()
        self.lock = threading.Lock()

    @property
    def run(self):
        return self._run

    def set_run(self, run_id: int) -> None:
        pass

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        return Message(content, dst_node_id=dst_node_id, message_type=message_type)

    def get_node_ids(self):
        return list(self.connected)

    def _answer(self, message: Message) -> None:
        node = message.metadata.dst_node_id
        if self.silent(node, message):
            self.release.wait(SILENCE_SECONDS)
            return
        reply = client_app(message, self.contexts[node])
        with self.lock:
            self.replies[message.metadata.message_id] = reply

    def push_messages(self, messages):
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            self.sent.append((message.metadata.dst_node_id, message.metadata.message_type))
            threading.Thread(target=self._answer, args=(message,), daemon=True).start()
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids):
        with self.lock:
            return [self.replies.pop(i) for i in list(message_ids) if i in self.replies]

    def send_and_receive(self, messages, *, timeout=None):
        raise AssertionError("the ServerApp waits through its PromptGrid")


@pytest.fixture
def contexts(tmp_path):
    """Three real sites (node ids 1, 2, 3 = sites "0", "1", "2"), each of whose policy
    states ``answer-seconds = 2``."""
    contexts = {}
    for node, records in enumerate(scenario().all_site_data(), start=1):
        folder = tmp_path / str(node - 1)
        folder.mkdir()
        np.save(folder / "records.npy", records)
        policy = write_policy_template(folder / "policy.toml", str(node - 1), "records.npy",
                                       rounds=REQUEST["rounds"])
        text = policy.read_text()
        assert "answer-seconds = 600 " in text
        policy.write_text(text.replace("answer-seconds = 600 ",
                                       f"answer-seconds = {ANSWER_SECONDS:g} "))
        contexts[node] = Context(run_id=RUN_ID, node_id=node, state=RecordDict(),
                                 run_config=REQUEST, node_config={"policy": str(policy)})
    return contexts


def server_context(tmp_path, min_sites: int, **deadlines: float) -> Context:
    """The coordinator's context; ``deadlines``: run_config waits (``readiness_seconds``
    for ``readiness-seconds``, ...)."""
    waits = {key.replace("_", "-"): value for key, value in deadlines.items()}
    return Context(run_id=RUN_ID, node_id=0, state=RecordDict(), node_config={},
                   run_config={**REQUEST, "min-sites": min_sites,
                               "output": str(tmp_path / "run.json"), **waits})


def test_a_site_that_stops_answering_fails_the_run_at_its_planned_deadline(contexts,
                                                                           tmp_path):
    grid = ThreadedGrid(contexts, lambda node, message: (
        node == 1 and message.metadata.message_type == MessageType.TRAIN))
    started = time.monotonic()
    try:
        with pytest.raises(RoundFailedError) as failed:
            main(grid, server_context(tmp_path, min_sites=3))
    finally:
        grid.release.set()
    took = time.monotonic() - started
    # round 1 waited its 2 s deadline for site 0, then the run failed naming it
    assert ANSWER_SECONDS <= took < ANSWER_SECONDS + 15
    # named by the site's own name from the readiness round, and its node
    assert "site 0 (node 1)" in str(failed.value)
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "failed" and "site 0 (node 1)" in record["error"]
    assert any("site 0 (node 1)" in failure for failure in record["site_failures"])
    for node in (2, 3):  # the other sites' ledgers say which site stopped the run
        policy = load_site_policy(contexts[node].node_config["policy"])
        (run,) = policy.open_ledger().run_records().values()
        assert run["status"] == "failed" and "site 0 (node 1)" in run["reason"]
    assert grid.sent.count((1, MessageType.TRAIN)) == 1  # asked once, never again


def test_a_site_silent_in_the_readiness_round_is_left_out_at_that_rounds_deadline(
        contexts, tmp_path):
    grid = ThreadedGrid(contexts, lambda node, message: (
        node == 1 and message.metadata.message_type == MessageType.QUERY))
    started = time.monotonic()
    try:
        main(grid, server_context(tmp_path, min_sites=2, readiness_seconds=ANSWER_SECONDS))
    finally:
        grid.release.set()
    assert time.monotonic() - started < ANSWER_SECONDS + 30
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "complete"
    assert record["sites_answered"] == [["1", "2"]] * 3
    assert (1, MessageType.TRAIN) not in grid.sent


def test_a_site_that_never_connects_holds_the_wait_for_sites_no_longer_than_its_deadline(
        caplog):
    grid = SimpleNamespace(get_node_ids=lambda: [1, 2])  # the third never connects
    started = time.monotonic()
    assert connected_nodes(grid, 3, timeout=0.5) == [1, 2]
    assert 0.5 <= time.monotonic() - started < 0.5 + 2
    assert "2 connected after 0.5 s, 3 wanted; going on with those connected" in caplog.text
    assert connected_nodes(SimpleNamespace(get_node_ids=lambda: [1, 2, 3]), 3,
                           timeout=0.0) == [1, 2, 3]


def test_the_serverapp_waits_for_a_site_that_never_connects_no_longer_than_its_plan(
        contexts, tmp_path):
    grid = ThreadedGrid(contexts, lambda node, message: False, connected=[2, 3])
    started = time.monotonic()
    with pytest.raises(ReadinessRoundError, match=r"2 site\(s\) are ready for this run, need 3"):
        main(grid, server_context(tmp_path, min_sites=3, connect_seconds=1.0))
    assert 1.0 <= time.monotonic() - started < 1.0 + 15
    assert {node for node, _ in grid.sent} == {2, 3}  # only the connected were asked


def test_flowers_legacy_workflow_waits_no_longer_than_the_plan(contexts, tmp_path):
    grid = ThreadedGrid(contexts, lambda node, message: (
        node == 1 and message.metadata.message_type == MessageType.TRAIN))
    context = server_context(tmp_path, min_sites=3)
    served = prompt(grid, Deadlines.of(context.run_config).answer)  # as the ServerApp serves
    scenario, _, ready = server_scenario(DPSPCAScenario, served, context)
    strategy = DPSPCAStrategy(dim=scenario.dim, k=scenario.k, s_hat=scenario.s_hat,
                              rounds=scenario.rounds, min_sites=3)
    started = time.monotonic()
    try:
        with pytest.raises(RoundFailedError, match=r"2 site\(s\) answered, need 3"):
            run_strategy(served, context, strategy, readiness=ready)
    finally:
        grid.release.set()
    # the sites stated answer-seconds = 2: Flower's workflow, which passes no timeout, got
    # the run's deadline from the grid (not the served grid's 600 s)
    assert ANSWER_SECONDS <= time.monotonic() - started < ANSWER_SECONDS + 15
    assert grid.sent.count((1, MessageType.TRAIN)) == 1


def test_a_runs_deadlines_come_from_its_run_config_and_must_be_positive_seconds():
    assert Deadlines.of({}) == Deadlines(connect=600.0, readiness=300.0, answer=600.0,
                                         restart=120.0)
    assert Deadlines.of({"connect-seconds": 5, "answer-seconds": 2.5,
                         "restart-seconds": 0}) == Deadlines(
        connect=5.0, readiness=300.0, answer=2.5, restart=0.0)
    for bad in (0, -1.0, "60", True):
        with pytest.raises(ConfigurationError, match="run_config readiness-seconds must be a "
                                                     "positive number of seconds"):
            Deadlines.of({"readiness-seconds": bad})
    for bad in (-1.0, "60", True):  # a restart may be awaited 0 s, never less
        with pytest.raises(ConfigurationError, match="run_config restart-seconds must be a "
                                                     "non-negative number of seconds"):
            Deadlines.of({"restart-seconds": bad})


def test_a_failure_names_each_ready_site_once_and_leaves_unknown_nodes_as_they_are():
    names = {1: "hospital-a", 2: "hospital-b"}
    reason = "2 site(s) sent no reply in time: node 1, node 2; node 9: error code 0"
    named = named_nodes(reason, names)
    assert named == ("2 site(s) sent no reply in time: site hospital-a (node 1), site "
                     "hospital-b (node 2); node 9: error code 0")
    assert named_nodes(named, names) == named  # naming twice changes nothing
    assert named_nodes("node 10 left", names) == "node 10 left"  # not node 1's

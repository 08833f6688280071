"""No site spends on a run that cannot finish: the readiness round through the Flower App's real
ServerApp and ClientApp, real sites (their own policy files, data and lifetime ledgers)
answering in this process (a grid without Ray). Site 0's remaining lifetime budget holds
releases but not a whole run: with ``min-sites = 3`` the run stops before any release and
writes its failure record; with 2 it goes on without site 0, which is never asked. A site's
answer, message by message, comes from its policy and ledger. At the end of a run that
completes, the sites that released in it store its result beside their policy."""

import functools
import json

import numpy as np
import pytest
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from local_grid import RUN_ID, LocalGrid, run_identity  # noqa: F401 (a fixture)

from fedpca.algorithms.dps_pca import DPSPCAPolicy
from fedpca.algorithms.specs import app_config
from fedpca.report import record_lines, table_header
from fedpca.flower.app import client_app, main
from fedpca.flower.server.app_server import server_scenario
from fedpca.flower.site.site_client import client_factory
from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.flower.site.clientapp import site_client_app
from fedpca.flower.wire import readiness_question, request_content
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.ledger_store import create_ledger
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.site.results import load_result, results_folder
from fedpca.flower.server.rounds import ReadinessRoundError, declined_kinds
from fedpca.flower.server.strategies import DPSPCAStrategy
from fedpca.flower.server.workflow import run_strategy

pytestmark = pytest.mark.usefixtures("run_identity")

#: What the coordinator asks: DPS-PCA of two rounds (three releases a site).
REQUEST = {**app_config(), "dim": 12, "samples": 3000, "k": 2, "sparsity": 4, "s-hat": 6,
           "rounds": 2, "data-seed": 1}


@functools.cache
def scenario():
    """The run's scenario, its policy calibrated when first asked."""
    return DPSPCAScenario.from_run_config(REQUEST, sites=3)


#: Site 0's lifetime budget: one run, of which an earlier run spent one release.
ONE_RUN = 1.0


def real_site(folder, name: str, records: np.ndarray, lifetime: float):
    """A site's folder as ``fedpca site init`` writes it, with a lifetime of ``lifetime``."""
    folder.mkdir()
    np.save(folder / "records.npy", records)
    policy = write_policy_template(folder / "policy.toml", name, "records.npy",
                                   rounds=REQUEST["rounds"], daily_epsilon=lifetime,
                                   weekly_epsilon=lifetime)
    policy.write_text(policy.read_text().replace("epsilon = 4.0", f"epsilon = {lifetime!r}"))
    return load_site_policy(policy)


def ledger_rows(policy) -> list[dict]:
    return SiteLedger(policy.ledger, policy.population, policy.epsilon, policy.delta).rows()


@pytest.fixture
def federation(tmp_path):
    """Three real sites (node ids 1, 2, 3 = sites "0", "1", "2"); site 0 has spent one
    release of an earlier run."""
    policies, contexts = [], {}
    for node, records in enumerate(scenario().all_site_data(), start=1):
        name = str(node - 1)
        policy = real_site(tmp_path / name, name, records, ONE_RUN if node == 1 else 4.0)
        policies.append(policy)
        contexts[node] = Context(run_id=RUN_ID, node_id=node, state=RecordDict(),
                                 run_config=REQUEST, node_config={"policy": str(policy.path)})
    earlier = policies[0].open_ledger().for_run(RunCharge("earlier", "dps-pca", "f" * 64, 3))
    earlier.charge(policies[0].planned_run("dps-pca")[0])
    return policies, LocalGrid(client_app, contexts)


def server_context(tmp_path, min_sites: int) -> Context:
    return Context(run_id=RUN_ID, node_id=0, state=RecordDict(), node_config={},
                   run_config={**REQUEST, "min-sites": min_sites,
                               "output": str(tmp_path / "run.json")})


def test_a_run_one_site_cannot_afford_stops_before_any_release(federation, tmp_path):
    policies, grid = federation
    before = [ledger_rows(policy) for policy in policies]
    with pytest.raises(ReadinessRoundError, match=r"readiness round: 2 site\(s\) are ready for "
                                                  r"this run, need 3; nothing was released"):
        main(grid, server_context(tmp_path, min_sites=3))
    assert grid.types == [MessageType.QUERY] * 3  # no request for a release was sent
    assert [ledger_rows(policy) for policy in policies] == before
    record = json.loads((tmp_path / "run.json").read_text())
    assert (record["status"], record["algorithm"]) == ("failed", "dps-pca")
    (reason,) = record["site_failures"]
    assert reason.startswith("cannot afford: 0: refused this run of dps-pca: the 3 releases left "
                             "of it")
    assert "lifetime budget epsilon=1 (delta=1e-07) would be exceeded" in reason
    assert reason in record["error"]
    # the coordinator's error says what kind of no it was: a budget, not data or policy
    assert "nothing was released; declined by kind: cannot afford 1; declined: " in record[
        "error"]


def test_the_coordinators_error_counts_the_declines_by_their_kind():
    reasons = ["cannot afford: a: the budget ...", "refused: data: b: refused: ...",
               "refused: policy: c: refused ...", "refused: data: d: refused: ...",
               "node 7: no answer within 300 s"]
    assert declined_kinds(reasons) == ("cannot afford 1, refused: data 2, refused: policy 1, "
                                       "no answer or failed 1")
    assert declined_kinds(["refused: policy: x"]) == "refused: policy 1"


def test_the_sites_that_can_afford_the_run_go_on_without_the_one_that_cannot(federation,
                                                                             tmp_path, capsys):
    policies, grid = federation
    before = ledger_rows(policies[0])
    main(grid, server_context(tmp_path, min_sites=2))
    record = json.loads((tmp_path / "run.json").read_text())
    # the coordinator's screen: a simulation's round table, line by line, then what
    # `fedpca show` prints of the record (the sites' guarantees, the summary)
    screen = capsys.readouterr().out.splitlines()
    assert table_header("dps-pca", elapsed=True).splitlines() == screen[:2]
    assert [line.split()[:3] for line in screen[2:5]] == [
        ["0", "init", "2/2"], ["1", "power", "2/2"], ["2", "power", "2/2"]]
    assert screen[5:] == record_lines(record, table=False)
    assert any(line.startswith("trust model: ") for line in screen[5:])
    assert record["status"] == "complete"
    assert record["sites_answered"] == [["1", "2"]] * 3
    assert grid.types.count(MessageType.TRAIN) == 2 * 3  # site 0 was never asked
    assert ledger_rows(policies[0]) == before
    assert [len(ledger_rows(policy)) for policy in policies[1:]] == [3, 3]
    # the last step: the released result reached every site; the two that released in the
    # run stored it beside their policy (0600); site 0, which released nothing in it,
    # refused it, and the run still completed
    assert grid.types[-3:] == [MessageType.QUERY] * 3
    assert record["config"]["result_delivered"] == ["1", "2"]
    assert not results_folder(policies[0].path).exists()
    for policy in policies[1:]:
        (stored,) = results_folder(policy.path).iterdir()
        assert stored.name == f"run-{RUN_ID}.json" and stored.stat().st_mode & 0o777 == 0o600
        kept = load_result(stored)
        np.testing.assert_array_equal(kept.basis, np.asarray(record["basis"]))
        assert (kept.run_id, kept.algorithm, kept.mean, kept.scale) == (
            str(RUN_ID), "dps-pca", None, None)


def test_the_legacy_strategy_has_the_same_readiness_round(federation, tmp_path):
    policies, grid = federation
    context = server_context(tmp_path, min_sites=2)  # the ServerApp's round lets it go on
    scenario, _, readiness = server_scenario(DPSPCAScenario, grid, context)
    strategy = DPSPCAStrategy(dim=scenario.dim, k=scenario.k, s_hat=scenario.s_hat,
                              rounds=scenario.rounds, min_sites=3)
    with pytest.raises(ReadinessRoundError, match="0: refused this run of dps-pca"):
        run_strategy(grid, context, strategy, readiness=readiness)  # before Flower's workflow
    assert grid.types == [MessageType.QUERY] * 3
    assert strategy.failures == list(strategy.declined.values()) and list(strategy.declined) == [1]


# --- a site's answer, message by message (a user's own ClientApp: site_client_app's default) --

D = 8
X = np.random.default_rng(0).uniform(-0.2, 0.2, size=(30, D))
POLICY = DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=2)  # three releases a run


def query(content=None) -> Message:
    return Message(content=content or readiness_question(), dst_node_id=1,
                   message_type=MessageType.QUERY)


def test_a_sites_answer_comes_from_its_policy_and_ledger(tmp_path):
    create_ledger(tmp_path / "ledger.sqlite")
    lifetime = SiteLedger(tmp_path / "ledger.sqlite", "clinic", 1.2, 1e-5, site="clinic")

    def app(run_id: str):
        charge = RunCharge(run_id, "dps-pca", "f" * 64, POLICY.releases)
        return site_client_app(lambda context: client_factory(DPSPCASite)(
            context, X, POLICY, "clinic", ledger=lifetime.for_run(charge)))

    def context() -> Context:
        return Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})

    reply = app("1")(query(), context())
    assert reply.content.config_records["readiness"] == {"site": "clinic", "ready": True}
    basis = np.linalg.qr(np.random.default_rng(1).standard_normal((D, 2)))[0]
    for _ in range(POLICY.releases):  # run 1 spends epsilon 1 of the lifetime's 1.2
        train = Message(content=request_content([basis], {"phase": "power", "round": 1}),
                        dst_node_id=1, message_type=MessageType.TRAIN)
        assert not app("1")(train, context()).has_error()
    reply = app("2")(query(), context())
    assert reply.has_error() and reply.error.reason.startswith(
        "cannot afford: clinic: refused this run of dps-pca: the 3 releases left of it")
    assert len(lifetime.rows()) == POLICY.releases
    # a simulated site's in-memory ledger is the run's own: a fresh run always fits
    fresh = site_client_app(lambda c: client_factory(DPSPCASite)(c, X, POLICY, "clinic"))
    assert not fresh(query(), context()).has_error()


def test_a_query_that_is_not_the_readiness_question_is_refused():
    app = site_client_app(lambda c: client_factory(DPSPCASite)(c, X, POLICY, "clinic"))
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    reply = app(query(RecordDict({"secrets": ConfigRecord({"row": 0})})), context)
    assert reply.has_error() and "the only question a site answers is the readiness round's" \
        in reply.error.reason


def test_a_real_site_reads_its_policy_plans_the_run_and_opens_its_ledger_once_a_request(
        tmp_path, monkeypatch):
    """One readiness question, then one round's request, each to a fresh ClientApp process
    (as a SuperNode starts one per message): each reads the policy file once, plans the run
    once and opens the ledger once, however many checks read them."""
    import fedpca.flower.site.clientapp as clientapp
    import fedpca.site.real_site as real_site_module

    records = scenario().all_site_data()[0]
    policy = real_site(tmp_path / "clinic", "clinic", records, 4.0)
    counts = {"policy": 0, "plan": 0, "ledger": 0}

    def counted(name, function):
        def call(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(real_site_module, "load_site_policy",
                        counted("policy", real_site_module.load_site_policy))
    monkeypatch.setattr(real_site_module, "plan_run",
                        counted("plan", real_site_module.plan_run))
    monkeypatch.setattr(type(policy), "open_ledger",
                        counted("ledger", type(policy).open_ledger))

    def ask(message: Message) -> Message:
        clientapp.SERVICES.clear()  # a fresh process: nothing kept from the last message
        counts.update(policy=0, plan=0, ledger=0)
        context = Context(run_id=RUN_ID, node_id=1, state=RecordDict(), run_config=REQUEST,
                          node_config={"policy": str(policy.path)})
        return client_app(message, context)

    ready = ask(query())
    assert not ready.has_error()
    assert ready.content.config_records["readiness"]["site"] == "clinic"
    assert counts == {"policy": 1, "plan": 1, "ledger": 1}
    basis = np.linalg.qr(np.random.default_rng(1).standard_normal((REQUEST["dim"], 2)))[0]
    answer = ask(Message(content=request_content([basis], {"phase": "power", "round": 1}),
                         dst_node_id=1, message_type=MessageType.TRAIN))
    assert not answer.has_error()
    assert counts == {"policy": 1, "plan": 1, "ledger": 1}
    assert len(ledger_rows(policy)) == 1  # the round's one release, charged once

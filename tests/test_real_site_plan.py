"""One plan per run at a real site: centred (standardised) secure sums at real sites.

Three real sites (each its own policy with ``min-sites = 2``, roster, signing key, lifetime
ledger and table read through the consortium's contract) answer the App's ServerApp in this
process (a grid without Ray: the real strategies, ClientApp and site code). The coordinator
names only the algorithm, the variant, the centring and the contract: the secure sum's
``M``, the sites' calibration and the record bound come from what the sites state in the
readiness round. Each site plans the run once (:class:`fedpca.site.plan.RunPlan`): its
budget check, its secure session's rounds and its ledger's release cap all read that plan,
so a centred secure run (a moments round before the algorithm's) completes with exactly the
plan's releases.
"""

import json

import pytest
from flwr.app import Context, RecordDict
from liver_contract import CONTRACT, liver_table
from local_grid import RUN_ID, LocalGrid, set_run_identity

from fedpca.algorithms.specs import app_config
from fedpca.apps.app import client_app
from fedpca.apps.dpdis_pca import server_main as dpdis_main
from fedpca.apps.dps_pca import server_main as dps_main
from fedpca.apps.real_site import site_plan
from fedpca.data.contract import load_contract
from fedpca.deployment.consortium import write_consortium
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.privacy.site_policy import PolicyError, load_site_policy
from fedpca.privacy.site_ledger import RunCharge, SiteLedger
from fedpca.site.plan import plan_run

SITES = ("hospital-a", "hospital-b", "hospital-c")
ROWS = 150
#: DPS-PCA rounds every site's policy calibrates for.
ROUNDS = 2


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    """Three sites' tables, the contract and their secure policies (M = 2)."""
    work = tmp_path_factory.mktemp("consortium")
    (work / "contract.toml").write_text(CONTRACT)
    data = []
    for i, name in enumerate(SITES):
        data.append(work / f"{name}.csv")
        data[-1].write_text(liver_table(ROWS, seed=i))
    policies = write_consortium(work / "sites", SITES, data, min_sites=2,
                                contract=work / "contract.toml")
    for policy in policies:
        policy.write_text(policy.read_text().replace("rounds = 10", f"rounds = {ROUNDS}"))
    return work, policies


def run(consortium, main, run_id, **request):
    """One run of ``main`` over the three sites; the run record and each site's rows of it."""
    work, policies = consortium
    contract = load_contract(work / "contract.toml")
    config = {**app_config(), "contract": contract.hash,
              "contract-file": str(work / "contract.toml"), "k": 2, "min-sites": 3,
              "output": str(work / f"run-{run_id}.json"), **request}
    contexts = {node: Context(run_id=run_id, node_id=node, state=RecordDict(),
                              run_config=config, node_config={"policy": str(policy)})
                for node, policy in enumerate(policies, start=1)}
    server = Context(run_id=run_id, node_id=0, state=RecordDict(), node_config={},
                     run_config=config)
    with pytest.MonkeyPatch.context() as patch:
        set_run_identity(patch)
        patch.setattr("local_grid.RUN_ID", run_id)
        main(LocalGrid(client_app, contexts), server)
    record = json.loads((work / f"run-{run_id}.json").read_text())
    rows = {name: [r for r in load_site_policy(p).open_ledger().rows()
                   if r["run_id"] == str(run_id)] for name, p in zip(SITES, policies)}
    return record, rows, contexts


@pytest.mark.parametrize("main, request_, releases", [
    (dpdis_main, {"algorithm": "dpdis-pca", "variant": "secure-sum", "centring": "standardize"},
     2),  # the moments, then one DPdisPCA release
    (dps_main, {"algorithm": "dps-pca", "centring": "centre", "rounds": ROUNDS, "s-hat": 6},
     ROUNDS + 2),  # the moments, the initialisation, the power rounds
], ids=["dpdis-standardize", "dps-centre"])
def test_a_centred_secure_run_completes_at_real_sites_with_the_plans_releases(
        consortium, main, request_, releases):
    run_id = 40 + releases
    record, rows, contexts = run(consortium, main, run_id, **request_)
    assert record["status"] == "complete"
    assert all(answered == list(SITES) for answered in record["sites_answered"])
    assert record["flower_rounds"] == releases
    for (name, site_rows), context in zip(rows.items(), contexts.values()):
        _, plan = site_plan(context, request_["algorithm"])
        assert plan.count == releases and len(site_rows) == releases, name
        assert all(r["planned"] == releases and r["sites_in_sum"] == 2 for r in site_rows)
    # the sites' own settings ran the sum: M and the record bound came from them
    assert record["site_guarantees"]["hospital-a"]["secure_min_sites"] == 2


def test_the_plan_counts_the_moments_release_and_refuses_what_the_policy_does_not_allow(
        consortium):
    _, policies = consortium
    policy = load_site_policy(policies[0])
    contract = policy.contract_hash()
    plain = plan_run(policy, "7", "dps-pca", {"contract": contract})
    centred = plan_run(policy, "7", "dps-pca", {"contract": contract, "centring": "centre"})
    assert plain.count == ROUNDS + 1 and centred.count == ROUNDS + 2
    assert centred.charged_algorithm == "dps-pca+centre" and centred.centring == "centre"
    charge = centred.charge("f" * 64)
    assert isinstance(charge, RunCharge) and charge.max_releases == centred.count
    assert charge.description["releases"] == centred.count
    assert charge.description["contract"] == contract
    with pytest.raises(PolicyError, match="not allowed"):
        plan_run(policy, "7", "sulq-kplane", {"contract": contract})
    with pytest.raises(InvalidRequestError, match="seed=3"):
        plan_run(policy, "7", "dps-pca", {"contract": contract, "seed": 3})
    with pytest.raises(InvalidRequestError, match="centring='both'"):
        plan_run(policy, "7", "dps-pca", {"contract": contract, "centring": "both"})


def test_an_algorithm_count_that_disagrees_with_the_plan_is_refused_before_any_charge(
        consortium, tmp_path):
    _, policies = consortium
    policy = load_site_policy(policies[1])
    plan = plan_run(policy, "8", "dps-pca", {"contract": policy.contract_hash()})
    ledger = policy.open_ledger()
    run = ledger.for_run(plan.charge("f" * 64), plan.releases)
    run.require_run(plan.releases)  # the same count passes
    with pytest.raises(ConfigurationError, match="the algorithm plans 2 more releases"):
        run.require_run(plan.releases[:2])
    assert isinstance(ledger, SiteLedger) and ledger.run_releases("8") == 0


class StoppingGrid(LocalGrid):
    """A local grid whose node ``stopped`` receives nothing after its first ``answers``
    messages (its SuperNode stopped mid-run)."""

    def __init__(self, app, contexts, stopped: int, answers: int):
        super().__init__(app, contexts)
        self.stopped, self.answers, self.received = stopped, answers, 0

    def send_and_receive(self, messages, *, timeout=None):
        kept = []
        for message in messages:
            if message.metadata.dst_node_id == self.stopped:
                self.received += 1
                if self.received > self.answers:
                    continue
            kept.append(message)
        return super().send_and_receive(kept, timeout=timeout)


def everything_in(policy) -> tuple:
    """What a site's ledger holds: releases, runs and policy events."""
    ledger = load_site_policy(policy).open_ledger()
    return ledger.rows(), ledger.run_records(), ledger.policy_events()


def test_a_site_that_stops_mid_run_fails_the_run_at_every_site_that_released(
        consortium, tmp_path):
    work, policies = consortium
    config = {**app_config(), "algorithm": "dps-pca", "contract": load_contract(
        work / "contract.toml").hash, "contract-file": str(work / "contract.toml"),
        "centring": "centre", "rounds": ROUNDS, "s-hat": 6, "k": 2, "min-sites": 3,
        "output": str(tmp_path / "run.json")}
    run_id = 77
    contexts = {node: Context(run_id=run_id, node_id=node, state=RecordDict(),
                              run_config=config, node_config={"policy": str(policy)})
                for node, policy in enumerate(policies, start=1)}
    server = Context(run_id=run_id, node_id=0, state=RecordDict(), node_config={},
                     run_config=config)
    with pytest.MonkeyPatch.context() as patch:
        set_run_identity(patch)
        patch.setattr("local_grid.RUN_ID", run_id)
        # hospital-c answers the readiness question, the key agreement (2 messages) and the
        # first rounds' messages (it releases), then stops
        with pytest.raises(Exception, match=r"round \d: 2 site\(s\) answered, need 3"):
            from fedpca.apps.app import main
            main(StoppingGrid(client_app, contexts, stopped=3, answers=6), server)
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "failed"
    assert any("no reply" in reason for reason in record["site_failures"])
    for name, policy in zip(SITES, policies):
        ledger = load_site_policy(policy).open_ledger()
        run = ledger.run_records()[str(run_id)]
        assert ledger.run_releases(str(run_id)) >= 1, name  # every site released the moments
        # the sites still up are told the run failed; the stopped one heard nothing more
        expected = "failed" if name != "hospital-c" else None
        assert run["status"] == expected, (name, run)
        assert ("2 site(s) answered, need 3" in (run["reason"] or "")) == (expected == "failed")


def test_a_site_whose_table_fails_its_contract_stops_the_run_before_any_ledger_changes(
        tmp_path):
    (tmp_path / "contract.toml").write_text(CONTRACT)
    data = []
    for i, name in enumerate(SITES):
        data.append(tmp_path / f"{name}.csv")
        data[-1].write_text(liver_table(ROWS, seed=i))
    policies = write_consortium(tmp_path / "sites", SITES, data, min_sites=2,
                                contract=tmp_path / "contract.toml")
    # one hospital's export renames a column
    data[1].write_text(data[1].read_text().replace("bili", "bilirubin", 1))
    before = [everything_in(p) for p in policies]
    config = {**app_config(), "algorithm": "dpdis-pca", "variant": "secure-sum",
              "centring": "standardize", "contract": load_contract(
                  tmp_path / "contract.toml").hash,
              "contract-file": str(tmp_path / "contract.toml"), "k": 2, "min-sites": 3,
              "output": str(tmp_path / "run.json")}
    contexts = {node: Context(run_id=9, node_id=node, state=RecordDict(), run_config=config,
                              node_config={"policy": str(policy)})
                for node, policy in enumerate(policies, start=1)}
    server = Context(run_id=9, node_id=0, state=RecordDict(), node_config={},
                     run_config=config)
    grid = LocalGrid(client_app, contexts)
    with pytest.MonkeyPatch.context() as patch:
        set_run_identity(patch)
        from fedpca.apps.app import main
        with pytest.raises(Exception, match="budget round: 2 site"):
            main(grid, server)
    assert set(grid.types) == {"query"}  # nothing but the readiness question was sent
    record = json.loads((tmp_path / "run.json").read_text())
    (reason,) = record["site_failures"]
    assert reason.startswith("hospital-b: refused: the site's data file cannot be used")
    assert "bili" not in reason  # the reason stays in the site's log
    assert [everything_in(p) for p in policies] == before

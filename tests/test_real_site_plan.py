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

import dataclasses
import json
from pathlib import Path

import pytest
from flwr.app import Context, RecordDict
from liver_contract import CONTRACT, liver_table
from local_grid import LocalGrid, set_run_identity

from fedpca.algorithms.specs import app_config
from fedpca.flower.app import client_app
from fedpca.flower.app import main as app_main
from fedpca.site.real_site import RealSiteSource
from fedpca.data.contract import load_contract
from fedpca.deployment.consortium import write_consortium
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.site.policy import PolicyError, load_site_policy
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.plan import plan_run

SITES = ("hospital-a", "hospital-b", "hospital-c")
ROWS = 150
#: DPS-PCA rounds every site's policy calibrates for.
ROUNDS = 2


def hospitals(work: Path) -> tuple[list[Path], list[Path]]:
    """Three sites' tables in ``work``, the contract and their secure policies (M = 2)."""
    (work / "contract.toml").write_text(CONTRACT)
    data = [work / f"{name}.csv" for name in SITES]
    for i, path in enumerate(data):
        path.write_text(liver_table(ROWS, seed=i))
    policies = write_consortium(work / "sites", SITES, data, min_sites=2,
                                contract=work / "contract.toml")
    for policy in policies:
        policy.write_text(policy.read_text().replace("rounds = 10", f"rounds = {ROUNDS}")
                          + f"\n[algorithms.sulq-kplane]\nrounds = {ROUNDS}\n")
    return data, policies


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    """:func:`hospitals`, once for the module."""
    work = tmp_path_factory.mktemp("consortium")
    return work, hospitals(work)[1]


def request_for(work: Path, **request) -> dict:
    """The coordinator's run_config for a centred run under ``work``'s contract."""
    return {**app_config(), "contract": load_contract(work / "contract.toml").hash,
            "contract-file": str(work / "contract.toml"), "k": 2, "min-sites": 3, **request}


def federation(policies, config: dict, run_id: int, grid_cls=LocalGrid, **grid_options):
    """The grid of the real sites of ``policies`` (node ``i`` the ``i``-th) answering in
    this process, the server's context and each site's."""
    contexts = {node: Context(run_id=run_id, node_id=node, state=RecordDict(),
                              run_config=config, node_config={"policy": str(policy)})
                for node, policy in enumerate(policies, start=1)}
    server = Context(run_id=run_id, node_id=0, state=RecordDict(), node_config={},
                     run_config=config)
    grid = grid_cls(client_app, contexts, **grid_options)
    grid.run.run_id = run_id
    return grid, server, contexts


def run_app(grid, server: Context) -> None:
    """The App's ServerApp over ``grid`` (run ``server.run_id``)."""
    with pytest.MonkeyPatch.context() as patch:
        set_run_identity(patch)
        patch.setattr("local_grid.RUN_ID", server.run_id)
        app_main(grid, server)


def run(consortium, run_id, **request):
    """One run over the three sites; the run record and each site's rows of it."""
    work, policies = consortium
    output = work / f"run-{run_id}.json"
    grid, server, contexts = federation(
        policies, request_for(work, output=str(output), **request), run_id)
    run_app(grid, server)
    rows = {name: [r for r in load_site_policy(p).open_ledger().rows()
                   if r["run_id"] == str(run_id)] for name, p in zip(SITES, policies)}
    return json.loads(output.read_text()), rows, contexts


@pytest.mark.parametrize("request_, releases", [
    ({"algorithm": "dpdis-pca", "variant": "secure-sum", "centring": "standardize"},
     2),  # the moments, then one DPdisPCA release
    ({"algorithm": "dps-pca", "centring": "centre", "rounds": ROUNDS, "s-hat": 6},
     ROUNDS + 2),  # the moments, the initialisation, the power rounds
    ({"algorithm": "sulq-kplane", "centring": "standardize", "rounds": ROUNDS, "clusters": 2,
      "subspace-dim": 2}, ROUNDS + 1),  # the moments, then one release a round
], ids=["dpdis-standardize", "dps-centre", "kplane-standardize"])
def test_a_centred_secure_run_completes_at_real_sites_with_the_plans_releases(
        consortium, request_, releases):
    run_id = 40 + releases
    record, rows, contexts = run(consortium, run_id, **request_)
    assert record["status"] == "complete"
    assert [entry["sites"] for entry in record["history"]] == [len(SITES)] * releases
    assert record["flower_rounds"] == releases
    for (name, site_rows), context in zip(rows.items(), contexts.values()):
        plan = RealSiteSource(context, request_["algorithm"]).plan
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
    only_dps = dataclasses.replace(policy, algorithms={"dps-pca": policy.algorithms["dps-pca"]})
    with pytest.raises(PolicyError, match="not allowed"):
        plan_run(only_dps, "7", "sulq-kplane", {"contract": contract})
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
    config = request_for(work, algorithm="dps-pca", centring="centre", rounds=ROUNDS,
                         output=str(tmp_path / "run.json"), **{"s-hat": 6})
    run_id = 77
    # hospital-c answers the readiness question, the key agreement (2 messages) and the
    # first rounds' messages (it releases), then stops
    grid, server, _ = federation(policies, config, run_id, StoppingGrid, stopped=3, answers=6)
    with pytest.raises(Exception, match=r"round \d: 2 site\(s\) answered, need 3"):
        run_app(grid, server)
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
    data, policies = hospitals(tmp_path)
    # one hospital's export renames a column
    data[1].write_text(data[1].read_text().replace("bili", "bilirubin", 1))
    before = [everything_in(p) for p in policies]
    config = request_for(tmp_path, algorithm="dpdis-pca", variant="secure-sum",
                         centring="standardize", output=str(tmp_path / "run.json"))
    grid, server, _ = federation(policies, config, 9)
    with pytest.raises(Exception, match="readiness round: 2 site"):
        run_app(grid, server)
    assert set(grid.types) == {"query"}  # nothing but the readiness question was sent
    record = json.loads((tmp_path / "run.json").read_text())
    (reason,) = record["site_failures"]
    assert reason.startswith(
        "refused: data: hospital-b: the site's data file cannot be used")
    assert reason.count("refused") == 1  # the kind's, once
    assert "bili" not in reason  # the reason stays in the site's log
    assert [everything_in(p) for p in policies] == before

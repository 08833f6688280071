"""A site offers only what its policy allows in its mode, each run counted by its own plan:
``fedpca site check``, ``fedpca site ledger`` (text, JSON) and its HTML page's header; the
kind a readiness refusal begins with; the roster named alike by the check and the ledger."""

import json
import re

import pytest

from fedpca.cli import main as cli_main
from fedpca.errors import BudgetExceededError, InvalidDataError, InvalidRequestError
from fedpca.site.ledger_lifecycle import create_site_ledger
from fedpca.site.offers import site_offers
from fedpca.site.plan import plan_run
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_reader import PolicyError
from fedpca.site.real_site import RealSiteSource
from fedpca.site.refusal_kinds import (
    CANNOT_AFFORD,
    KINDS,
    REFUSED_DATA,
    REFUSED_POLICY,
    kind_of,
    refusal_kind,
    with_kind,
)
from fedpca.site.service import SITE_FAILURE, Ask, Node, Ready, Refusal, SiteService
from fedpca.site.policy_template import write_policy_template
from liver_contract import CONTRACT, liver_table
from secure_consortium import make_consortium
from test_site_service import MemoryState


def test_a_secure_site_refuses_ldp_and_offers_no_runs_left_of_it(tmp_path, capsys):
    path, _, _ = make_consortium(tmp_path)
    policy = load_site_policy(path)
    assert "ldp-pca" in policy.algorithms and policy.secure_min_sites == 3
    with pytest.raises(PolicyError, match=r"refused: ldp-pca .* no secure sum.*"
                                          r"\[secure-aggregation\] min-sites = 3"):
        plan_run(policy, "run-1", "ldp-pca", {"contract": ""})
    assert policy.ledger is not None and not load_site_policy(path).open_ledger().rows()
    assert cli_main(["site", "check", "--policy", str(path)]) == 0
    out = capsys.readouterr().out
    assert "runs left    ldp-pca" not in out
    assert "not offered  ldp-pca: hospital-a: refused: " in out
    assert "[secure-aggregation] min-sites = 3" in out and "secure_min_sites" not in out
    assert "runs left    dps-pca: " in out and "runs left    dpdis-pca: " in out
    assert cli_main(["site", "ledger", "--policy", str(path)]) == 0
    table = capsys.readouterr().out
    assert "runs left, ldp-pca: not offered (hospital-a: refused: " in table
    assert "runs left, dpdis-pca: " in table and "1 releases a run" in table
    assert cli_main(["site", "ledger", "--policy", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert isinstance(summary["runs_left"]["ldp-pca"], str)
    page = tmp_path / "ledger.html"
    assert cli_main(["site", "ledger", "--policy", str(path), "--html", str(page)]) == 0
    html = page.read_text()
    assert "runs left, ldp-pca: not offered" in html and "runs left, dps-pca: " in html
    assert "ldp-pca" not in summary["releases_per_run"]
    assert summary["releases_per_run"]["dps-pca"] == 11


def test_a_centred_run_is_offered_with_its_moments_release_counted(tmp_path, capsys):
    (tmp_path / "table.csv").write_text(liver_table(40))
    (tmp_path / "contract.toml").write_text(CONTRACT)
    path = write_policy_template(tmp_path / "site.toml", "clinic", "table.csv",
                                 contract="contract.toml", delta=1e-7)
    create_site_ledger(load_site_policy(path).witness())
    policy = load_site_policy(path)
    ledger = policy.open_ledger()
    offers = {offer.run: offer for offer in site_offers(policy, ledger)}
    assert {"dpdis-pca", "dpdis-pca+centre", "dpdis-pca+standardize"} <= set(offers)
    # the same plan a request gets: a standardised DPdisPCA run makes 2 releases here
    asked = plan_run(policy, "run-1", "dpdis-pca",
                     {"contract": policy.contract_hash(), "centring": "standardize"})
    assert offers["dpdis-pca+standardize"].releases == asked.count == 2
    assert offers["dpdis-pca"].releases == 1
    assert offers["dpdis-pca+standardize"].runs == ledger.runs_remaining(list(asked.releases))
    assert cli_main(["site", "check", "--policy", str(path)]) == 0
    out = capsys.readouterr().out
    assert (f"runs left    dpdis-pca+standardize: {offers['dpdis-pca+standardize'].runs} full "
            "runs of 2 releases") in out
    assert cli_main(["site", "ledger", "--policy", str(path)]) == 0
    assert "runs left, dpdis-pca+standardize: " in capsys.readouterr().out


def test_a_readiness_refusal_begins_with_its_kind(tmp_path):
    path, _, _ = make_consortium(tmp_path)
    node = Node(run_id="1", node_id=7, node_config={"policy": str(path)},
                run_config={"algorithm": "ldp-pca", "contract": ""})
    service = SiteService(node, RealSiteSource(node, "ldp-pca"))
    reply = service.handle(Ready(), MemoryState())
    assert isinstance(reply, Refusal)
    assert reply.reason.startswith(f"{REFUSED_POLICY}: hospital-a: ldp-pca ")
    assert reply.reason.count("refused") == 1  # the kind says it once
    assert refusal_kind(reply.reason) == REFUSED_POLICY
    # the kinds are the documented phrases, one per cause; a site's failure carries none
    assert KINDS == ("cannot afford", "refused: data", "refused: policy")
    assert kind_of(BudgetExceededError("x")) == CANNOT_AFFORD
    assert kind_of(InvalidDataError("x")) == REFUSED_DATA
    assert kind_of(InvalidRequestError("x")) == REFUSED_POLICY
    assert refusal_kind(SITE_FAILURE) is None
    # the site's own leading "refused:" (alone or after its name) gives way to the kind's
    policy, data = InvalidRequestError("x"), InvalidDataError("x")
    assert with_kind(policy, "refused: the App names x") == "refused: policy: the App names x"
    assert with_kind(data, "b: refused: the file") == "refused: data: b: the file"
    assert with_kind(BudgetExceededError("x"), "0: refused this run of dps-pca: it") == (
        "cannot afford: 0: refused this run of dps-pca: it")
    assert with_kind(policy, "a: the run: refused: y") == "refused: policy: a: the run: refused: y"
    assert refusal_kind(with_kind(data, "b: refused: the file")) == REFUSED_DATA
    # only the readiness round's refusals carry a kind: a round's refusal is the site's words
    asked = service.handle(Ask([], {"phase": "covariance"}), MemoryState())
    assert isinstance(asked, Refusal) and asked.reason.startswith("hospital-a: refused: ")


def test_site_check_and_the_ledger_name_the_roster_alike(tmp_path, capsys):
    path, roster, _ = make_consortium(tmp_path)
    assert cli_main(["site", "check", "--policy", str(path)]) == 0
    out = capsys.readouterr().out
    named = re.search(r"file sha256 ([0-9a-f]{64}) \(the ledger's secure-aggregation.roster\)",
                      out)
    assert named and f"digest {roster.digest}" in out
    assert cli_main(["site", "ledger", "--policy", str(path)]) == 0
    # recorded when the roster file came (the template's first recording had none)
    assert re.search(rf"secure-aggregation\.roster (none -> )?{named.group(1)}",
                     capsys.readouterr().out)

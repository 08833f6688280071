"""A site whose policy names a data contract: its records are its table preprocessed by the
contract, ``fedpca site check`` names the contract and what it finds in the table, and a run
made under another contract (or none) is refused before anything is read or charged."""

import logging

import numpy as np
import pytest
from flwr.common import Context, RecordDict

from fedpca.site.real_site import RealSiteSource
from fedpca.cli import main as cli_main
from fedpca.data.contract import load_contract
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.site.ledger_lifecycle import create_site_ledger
from fedpca.site.ledger import SiteLedger
from fedpca.site.policy import SitePolicyFile, load_site_policy
from fedpca.site.policy_template import write_policy_template
from liver_contract import ALL_SCALED, CONTRACT, SCALED, liver_table

ROWS = 40


@pytest.fixture(scope="module")
def policy_text(tmp_path_factory):
    """The policy ``fedpca site init --contract contract.toml`` writes (calibrated once)."""
    folder = tmp_path_factory.mktemp("template")
    return write_policy_template(folder / "site.toml", "clinic", "table.csv",
                                 contract="contract.toml", delta=1e-7).read_text()


def site_folder(tmp_path, policy_text, sex=("f", "m", None)):
    """A site's table, the consortium's contract and the policy naming both."""
    (tmp_path / "table.csv").write_text(liver_table(ROWS, sex))
    (tmp_path / "contract.toml").write_text(CONTRACT)
    return write_policy(tmp_path / "site.toml", policy_text)


def write_policy(path, text):
    """The policy, with its ledger and identity file as fedpca site init creates them."""
    path.write_text(text)
    path.chmod(0o600)
    create_site_ledger(load_site_policy(path).witness())
    return path


def context(policy, **run_config):
    return Context(run_id=1, node_id=7, node_config={"policy": str(policy)},
                   state=RecordDict(), run_config={"algorithm": "dpdis-pca", **run_config})


def test_the_policy_reads_its_table_through_its_contract(tmp_path, policy_text):
    policy = load_site_policy(site_folder(tmp_path, policy_text))
    contract = load_contract(tmp_path / "contract.toml")
    assert policy.contract == tmp_path / "contract.toml"
    assert policy.contract_hash() == contract.hash
    records = policy.load_records()
    assert records.shape == (ROWS, len(contract.output_columns)) == (ROWS, 8)
    assert (records >= 0).all() and (records <= contract.widths).all()
    sex = [contract.output_columns.index(c) for c in ("sex=f", "sex=m", "sex:missing")]
    np.testing.assert_array_equal(records[:, sex].sum(axis=1), 1.0)  # one level per row
    np.testing.assert_array_equal(records[:, sex[-1]], np.arange(ROWS) % 3 == 2)


def test_site_check_names_the_contract_and_what_is_wrong_with_the_table(
        tmp_path, capsys, monkeypatch, policy_text):
    monkeypatch.chdir(tmp_path)
    site_folder(tmp_path, policy_text)
    (tmp_path / "site.toml").unlink()  # written again by fedpca site init --contract
    hash_ = load_contract("contract.toml").hash
    assert cli_main(["site", "init", "--policy", "site.toml", "--name", "clinic", "--data",
                     "table.csv", "--contract", "contract.toml"]) == 0
    assert 'contract = "contract.toml"' in (tmp_path / "site.toml").read_text()
    out = capsys.readouterr().out
    assert f"contract     liver-v1 sha256 {hash_} (a run must name this hash)" in out
    assert "records      n=40 (sent to the coordinator with every answer), d=8" in out
    assert ("table        column 'bili': 4 values outside the range [0.1, 30] are clipped into "
            "it (shown here only, never sent)") in out
    # every kind of run the site may be asked for, with the clip norm it uses
    assert "clip norm    plain run: 1, clips 100.0% of the rows" in out
    assert "centre the runs (run_config centring) or raise [data] clip-norm" in out
    assert "clip norm    centred run: " in out and "clip norm    standardised run: 2.828" in out
    site_folder(tmp_path, policy_text, sex=("f", "m", "x-rare"))  # a level the contract lacks
    assert cli_main(["site", "check", "--policy", "site.toml"]) == 1
    out = capsys.readouterr().out
    assert ("PROBLEM: the table does not meet the contract: column 'sex' has 13 cells that "
            "are not one of its levels ['f', 'm']") in out
    assert "x-rare" not in out  # no record's value


@pytest.mark.parametrize("requested", ["", "0" * 64, "another"])
def test_a_run_under_another_contract_is_refused_before_anything_is_read_or_charged(
        tmp_path, caplog, monkeypatch, policy_text, requested):
    policy = site_folder(tmp_path, policy_text)

    def never(self):
        raise AssertionError("the site read its records before refusing")

    monkeypatch.setattr(SitePolicyFile, "load_records", never)
    own = load_contract(tmp_path / "contract.toml").hash
    with caplog.at_level(logging.ERROR, logger="fedpca.site.real_site"), pytest.raises(
            InvalidRequestError,
            match=rf"clinic: refused: the run names data contract '{requested or 'none'}'; this "
                  rf"site holds its data under contract 'liver-v1': run with "
                  rf"contract=\"{own}\""):
        RealSiteSource(context(policy, contract=requested), "dpdis-pca").opened
    assert f"clinic: refused a run under contract {requested!r}" in caplog.text
    loaded = load_site_policy(policy)
    ledger = SiteLedger(loaded.ledger, loaded.population, loaded.epsilon, loaded.delta)
    assert ledger.rows() == []


def test_a_run_under_the_sites_contract_is_answered_and_one_without_contract_needs_none(
        tmp_path, policy_text):
    policy = site_folder(tmp_path, policy_text)
    own = load_contract(tmp_path / "contract.toml").hash
    site = RealSiteSource(context(policy, contract=own), "dpdis-pca").opened
    assert site.records.shape == (ROWS, 8) and site.config["contract"] == own
    plain = tmp_path / "plain"
    plain.mkdir()
    np.save(plain / "records.npy", np.full((ROWS, 3), 0.1))
    matrix_site = write_policy(plain / "site.toml", policy_text.replace('"clinic"', '"plain"')
                               .replace("table.csv", "records.npy")
                               .replace('contract = "contract.toml"', "# no contract"))
    assert RealSiteSource(context(matrix_site), "dpdis-pca").opened.records.shape == (ROWS, 3)
    with pytest.raises(InvalidRequestError, match=r"plain: refused: the run names data "
                                                  rf"contract '{own}'; this site holds its "
                                                  r"data under no contract"):
        RealSiteSource(context(matrix_site, contract=own), "dpdis-pca").opened


def test_a_contract_others_may_change_is_refused(tmp_path, policy_text):
    policy = site_folder(tmp_path, policy_text)
    (tmp_path / "contract.toml").chmod(0o666)
    with pytest.raises(ConfigurationError, match=r"data contract .*contract.toml has mode 0666: "
                                                 r"group or others may write it; run chmod 600"):
        load_site_policy(policy)


def test_a_sites_centred_policy_takes_its_share_from_its_contracts_public_scales(
        tmp_path, policy_text):
    """Every scale public: a standardised run releases no squares, so the site's own policy
    takes the centring share; some private: the standardising share. A real site answering
    a standardised run under such a contract releases the sums only."""
    policy = site_folder(tmp_path, policy_text)
    (tmp_path / "contract.toml").write_text(ALL_SCALED)
    loaded = load_site_policy(policy)
    centred = loaded.centred_policy("dpdis-pca", standardize=True)
    assert centred.public_scales and centred.share == 0.1
    bounds = loaded.load_contract().bounds
    assert centred.record(bounds)["moments_sensitivity"] == pytest.approx(
        bounds.unit().sum_sensitivity())
    (tmp_path / "contract.toml").write_text(SCALED)
    centred = load_site_policy(policy).centred_policy("dpdis-pca", standardize=True)
    assert not centred.public_scales and centred.share == 0.3

"""``fedpca simulate ... --malicious-site ATTACK`` (experiments only): a Flower simulation
whose site 0 scales its statistic by 1e3 is refused with one secure sum (naming the round and
the sum's members, its record ``failed``), and without secure sums the site's answer is
dropped from every round and named in the record's history, in both algorithms."""

import json

import pytest
from cli_runs import run_cli, run_cli_record

#: Six sites, d = 20: small and fast.
SMALL = ["--sites", "6", "--dim", "20", "--samples", "1200", "--seed", "1"]
DPS = ["simulate", "dps-pca", *SMALL, "--k", "2", "--sparsity", "5", "--s-hat", "10",
       "--rounds", "2"]
DPDIS = ["simulate", "dpdis-pca", *SMALL, "--k", "2"]


def test_one_secure_sum_refuses_the_malicious_sites_sum_naming_the_round(tmp_path, capsys):
    output = tmp_path / "run.json"
    code, _ = run_cli([*DPS, "--secure-aggregation", "3", "--discrete",
                       "--malicious-site", "scale:1e3", "--output", str(output)])
    assert code != 0
    error = capsys.readouterr().err
    record = json.loads(output.read_text())
    assert record["status"] == "failed"
    assert record["error"].startswith(
        "round 1: the secure sum of diag(X^T X) over sites 0, 1, 2, 3, 4, 5 exceeded")
    assert "round 1: the secure sum of diag(X^T X)" in error


@pytest.mark.parametrize("argv", [DPS, DPDIS], ids=["dps-pca", "dpdis-pca"])
def test_per_site_answers_drop_the_malicious_site_and_the_record_names_it(argv, tmp_path):
    printed, record = run_cli_record([*argv, "--malicious-site", "scale:1e3"],
                                     tmp_path / "run.json")
    assert "EXPERIMENT: simulated site 0 is malicious (scale:1000)" in printed
    assert record["status"] == "complete"
    assert record["config"]["malicious_site"] == "scale:1000"
    assert record["history"]
    for entry, answered in zip(record["history"], record["sites_answered"], strict=True):
        (reason,) = entry["dropped"]
        assert reason.startswith("site 0's answer was dropped")
        assert sorted(answered) == ["1", "2", "3", "4", "5"]
        assert f"  round {entry['round']}: {reason}" in printed  # under its round's line


def test_an_honest_run_drops_nothing_and_a_bad_attack_is_refused(tmp_path, capsys):
    _, record = run_cli_record(DPDIS, tmp_path / "honest.json")
    assert "malicious_site" not in record["config"]
    assert all("dropped" not in entry for entry in record["history"])
    code, _ = run_cli([*DPDIS, "--malicious-site", "scale:0.5"])
    assert code != 0 and "scale's factor must be a finite number > 1" in capsys.readouterr().err

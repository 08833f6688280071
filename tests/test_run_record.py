"""The run record (one schema for the CLI and the Flower App, documented once in docs/api.md),
a failed run's record and exit code, and command-line errors that name the command's flags.
No Flower federation is started."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from record_schema import FAILURE, all_documented_keys, record_keys

from fedpca.algorithms.dpdis_pca import run_dpdis_pca
from fedpca.algorithms.dps_pca import run_dps_pca
from fedpca.scenarios.dpdis_pca import known_evaluation as _known_evaluation
from fedpca.cli import main as cli_main
from fedpca.errors import ParameterError
from fedpca.results import PCAResult
from fedpca.run_record import run_record, save_run_record
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower.server.rounds import ReadinessRoundError

README = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def readme_schema_keys() -> set[str]:
    """Every key in the first column of docs/api.md's "Result JSON" table."""
    section = README.read_text().split("## Result JSON", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header
    return {key for row in rows for key in re.findall(r"`([a-z_]+)`", row.split(" | ")[0])}


def test_the_readme_documents_every_key_of_the_record():
    assert readme_schema_keys() == all_documented_keys()


def test_a_reference_result_gives_the_same_record_keys_and_loads_back(tmp_path):
    scenario = DPSPCAScenario(sites=2, dim=20, samples=400, k=2, sparsity=4, s_hat=6,
                              rounds=2, seed=3, data_seed=3)
    result = run_dps_pca(scenario.all_site_data(), 2, 6, scenario.policy(), seed=3,
                         evaluate=scenario.distance_to_truth)
    record = run_record(result)
    assert set(record) == record_keys("dps-pca")
    assert (record["sites"], record["samples"], record["seed"]) == (2, 400, 3)
    assert record["rounds"] == 2 and record["flower_rounds"] == 3
    assert record["distances"] == [h["distance"] for h in result.history]
    save_run_record(result, tmp_path / "run.json")
    loaded = PCAResult.load(tmp_path / "run.json")
    np.testing.assert_array_equal(loaded.basis, result.basis)
    assert loaded.history == result.history


def test_a_record_loads_back_as_its_kind_pca_or_clustering_centred_or_not(tmp_path):
    from test_centring import BOUNDS, ROWS

    from fedpca.algorithms.centred_run import run_centred_kplane, run_centred_pca
    from fedpca.clustering.nonprivate import run_kplane
    from fedpca.run_record import load_run_result

    sites = np.array_split(ROWS, 2)
    results = [
        run_dps_pca([np.clip(s / 40, -1, 1) for s in sites], 2, 4, DPSPCAScenario(
            sites=2, dim=BOUNDS.dim, samples=len(ROWS), k=2, sparsity=3, s_hat=4,
            rounds=1).policy(), seed=1),
        run_centred_pca(sites, BOUNDS, 2, seed=1),
        run_kplane(np.clip(ROWS / 40, -1, 1), 2, 1, restarts=1, seed=1),
        run_centred_kplane(sites, BOUNDS, 2, 1, seed=1),
    ]
    for result in results:
        save_run_record(result, tmp_path / "run.json")
        loaded = load_run_result(tmp_path / "run.json")
        assert type(loaded) is type(result)
        assert loaded.k == result.k and loaded.to_dict().keys() == result.to_dict().keys()


def test_the_app_evaluates_only_sites_that_are_the_configured_partitions():
    scenario = DPdisPCAScenario(sites=3, dim=12, samples=300, k=2, seed=4, data_seed=4)
    config = scenario.to_run_config()
    partitions = {"0": 100, "1": 100, "2": 100}
    np.testing.assert_array_equal(_known_evaluation(config, partitions), scenario.evaluation())
    assert _known_evaluation(config, {"0": 100, "1": 100, "hospital": 100}) is None
    assert _known_evaluation(config, {"0": 100, "1": 100, "2": 99}) is None
    reference = run_dpdis_pca(scenario.all_prepared_sites(), 2, policy=scenario.policy(), seed=4)
    assert run_record(reference)["energy_ratio"] is None  # nothing to compare with: null


def test_parameter_errors_read_as_keywords_by_default():
    error = ParameterError("need {k} <= {dim}", {"k": 5, "dim": 3}, hint="lower {k}")
    assert str(error) == "need k <= dim, got k=5, dim=3; lower k"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--epsilon", "-1"],
         "--epsilon must be a finite number > 0, got --epsilon=-1.0; pass e.g. --epsilon=1.0"),
        (["--k", "500", "--dim", "200"], "need --k <= --dim, got --k=500, --dim=200"),
        (["--k", "15"], "need --k <= --sparsity, got --k=15, --sparsity=10 (default)"),
        (["--s-hat", "300"], "need --s-hat <= --dim, got --s-hat=300, --dim=200 (default)"),
        (["--secure-aggregation", "1"], "--secure-aggregation must be in 2..100"),
        (["--min-sites", "500"], "--min-sites must be in 1..100 (the number of --sites)"),
        (["--failure-rate", "1"], "--failure-rate must be in [0, 1), got --failure-rate=1.0"),
    ],
)
def test_cli_errors_name_the_flags(argv, message, capsys):
    assert cli_main(["simulate", "dps-pca", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert not re.search(r"(?<!-)\b(epsilon|s_hat|sparsity|min_sites)=", err)  # no keywords


def test_a_failed_run_exits_non_zero_and_leaves_its_record(tmp_path, monkeypatch, capsys):
    from fedpca.flower import simulations as simulation

    declined = "1: refused this run of dps-pca: the 5 releases left of it ... do not fit"

    def stopped(*args, **kwargs):
        raise ReadinessRoundError("readiness round: 1 site(s) are ready for this run, need 2; "
                                  "nothing was released", failures=[declined])

    monkeypatch.setattr(simulation, "simulate", stopped)
    output = tmp_path / "run.json"
    assert cli_main(["simulate", "dps-pca", "--quiet", "--output", str(output)]) == 2
    assert "readiness round: 1 site(s) are ready for this run" in capsys.readouterr().err
    record = json.loads(output.read_text())
    assert set(record) == FAILURE
    assert (record["algorithm"], record["status"]) == ("dps-pca", "failed")
    assert record["error"].startswith("readiness round") and record["site_failures"] == [declined]
    assert cli_main(["show", str(output)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"dps-pca: the run failed: {record['error']}", f"  {declined}"]

"""The result says what the sites guaranteed, not what the coordinator asked: real sites
(their own policy files, data and ledgers) answer the Flower App's DPS-PCA ServerApp in this
process (a grid without Ray), asked for (1.0, 1e-5)-DP while their policies say otherwise;
the run record, ``fedpca show`` and the App's log report each site's own guarantee and label
the request as a request."""

import json

import numpy as np
import pytest
from flwr.app import Context, RecordDict
from local_grid import RUN_ID, LocalGrid, set_run_identity

from fedpca.algorithms.specs import app_config
from fedpca.flower.app import client_app
from fedpca.flower.server.serverapp import server_main
from fedpca.cli import main as cli_main
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.site.policy_template import write_policy_template
from fedpca.scenarios.dps_pca import DPSPCAScenario

#: What the coordinator asks for (privacy keys included: a real site ignores them).
REQUEST = {**app_config(), "dim": 12, "samples": 3000, "k": 2, "sparsity": 4, "s-hat": 6,
           "rounds": 2, "data-seed": 1, "epsilon": 1.0, "delta": 1e-5}
SCENARIO = DPSPCAScenario.from_run_config(REQUEST, sites=3)
#: Each site's own per-run epsilon and accounting; every policy's delta is 1e-7.
POLICIES = {"0": (2.0, "pld"), "1": (3.0, "pld"), "2": (2.0, "paper")}
DELTA = 1e-7


def real_site(folder, name: str, records: np.ndarray, run_epsilon: float, accounting: str):
    """A site's folder as ``fedpca site init`` writes it, with this test's policy."""
    folder.mkdir()
    np.save(folder / "records.npy", records)
    policy = write_policy_template(folder / "policy.toml", name, "records.npy", delta=DELTA,
                                   rounds=REQUEST["rounds"], daily_epsilon=run_epsilon,
                                   weekly_epsilon=run_epsilon)
    text = policy.read_text().replace("run-epsilon = 1.0", f"run-epsilon = {run_epsilon!r}")
    policy.write_text(text.replace('accounting = "pld"', f'accounting = "{accounting}"'))
    return policy


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """The run record of one App run over three real sites."""
    work = tmp_path_factory.mktemp("sites")
    contexts = {}
    for node, (name, records) in enumerate(zip(POLICIES, SCENARIO.all_site_data()), start=1):
        policy = real_site(work / name, name, records, *POLICIES[name])
        contexts[node] = Context(run_id=RUN_ID, node_id=node, state=RecordDict(),
                                 run_config=REQUEST, node_config={"policy": str(policy)})
    output = work / "run.json"
    server = Context(run_id=RUN_ID, node_id=0, state=RecordDict(), node_config={},
                     run_config={**REQUEST, "output": str(output)})
    with pytest.MonkeyPatch.context() as patch:
        set_run_identity(patch)
        server_main(LocalGrid(client_app, contexts), server)
    return json.loads(output.read_text())


def test_the_record_holds_each_sites_own_guarantee(record):
    releases = REQUEST["rounds"] + 1
    for name, (run_epsilon, accounting) in POLICIES.items():
        own = calibrate_gaussian(releases, run_epsilon, DELTA, accounting, paper_rule="dps-pca")
        assert record["site_guarantees"][name] == {
            "epsilon": run_epsilon, "epsilon_achieved": own.epsilon, "delta": DELTA,
            "accounting": accounting, "noise_multiplier": own.noise_multiplier,
            "clip_norm": 1.0, "noise_sampler": "exact", "secure_min_sites": None,
            "epsilon_worst_case": None,
        }
    # the headline: what every site gives at least, never the request
    weakest = min(g["noise_multiplier"] for g in record["site_guarantees"].values())
    assert (record["epsilon"], record["delta"]) == (3.0, DELTA)
    assert record["accounting"] == "paper/pld" and record["noise_multiplier"] == weakest
    assert record["sigma"] is None  # no site used the request's noise
    # real sites draw exact noise whatever the request says (a simulation's float default)
    assert record["noise_sampler"] == "exact" and record["request"]["noise_sampler"] == "float"
    assert record["request"]["epsilon"] == 1.0 and record["request"]["delta"] == 1e-5
    assert record["request"]["noise_multiplier"] == SCENARIO.privacy()["noise_multiplier"]


def test_show_prints_the_sites_guarantees_and_labels_the_request(record, tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record))
    assert cli_main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "each site (3.0, 1e-07)-DP [paper/pld]" in out
    assert "guaranteed by the sites (each by its own policy):" in out
    assert "1 site(s) (1): (eps=3.0, delta=1e-07)-DP [pld, noise multiplier" in out
    assert "1 site(s) (2): (eps=2.0, delta=1e-07)-DP [paper, noise multiplier" in out
    assert "request (not a guarantee): (eps=1.0, delta=1e-05)-DP [pld" in out
    site_lines = [line for line in out.splitlines() if " site(s) (" in line]
    assert site_lines and all(line.endswith("exact noise]") for line in site_lines)
    assert "float noise]" in out.split("request (not a guarantee)")[1]
    assert "(eps=3.0, delta=1e-07)-DP per record per site [paper/pld" in out

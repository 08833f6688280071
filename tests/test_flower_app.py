"""``flwr run .`` runs DPS-PCA and DPdisPCA (its secure-sum mode) as a Flower App, gives the
reference's basis, and writes the same run record as the CLI (LDP's and SuLQ k-plane's App
entries are the same dispatch; their simulations run in tests/test_ldp_flower.py and
tests/test_kplane_flower.py, k-plane's secure mode in tests/test_ray_cluster.py: the suite's
time budget).

One local simulation SuperLink (Flower detaches it) on free ports serves every run of this
module; every process whose command line names the module's FLWR_HOME is stopped by PID
afterwards, with its descendants, even when a test fails.
"""

import functools
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from cli_runs import run_cli
from record_schema import record_keys

from fedpca.algorithms.dpdis_pca import run_dpdis_pca
from fedpca.algorithms.dps_pca import run_dps_pca
from fedpca.deployment.launch import free_port
from fedpca.deployment.processes import processes_naming, stop_processes
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.scenarios.dps_pca import DPSPCAScenario

pytestmark = pytest.mark.federation

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def scenario():
    """The DPS-PCA scenario, its policy calibrated when first asked."""
    return DPSPCAScenario(
        sites=3, dim=40, samples=1500, k=2, sparsity=6, s_hat=10, rounds=2,
        epsilon=1.5, delta=1e-5, seed=21, data_seed=4,
    )


@pytest.fixture(scope="module")
def flwr_home(tmp_path_factory):
    """A FLWR_HOME whose local SuperLink listens on free ports (not Flower's fixed ones, so
    another test session on this machine cannot answer in its place)."""
    home = tmp_path_factory.mktemp("flwr-home")
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = ":local:"\n'
    )
    try:
        yield home
    finally:
        stop_processes(processes_naming(str(home)))
        assert not processes_naming(str(home))


@pytest.fixture(scope="module")
def flwr_env(flwr_home):
    env = dict(os.environ)
    env.update(
        FLWR_HOME=str(flwr_home),
        FLWR_LOCAL_SUPERLINK_HTTP_API_PORT=str(free_port()),
        FLWR_LOCAL_CONTROL_API_PORT=str(free_port()),
        FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
        OPENBLAS_NUM_THREADS="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def flwr_run(env: dict, out: Path, run_config: dict, sites: int) -> dict:
    """``flwr run .`` with ``run_config`` (only keys pyproject declares) on ``sites`` sites."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    config = " ".join(
        f"{k}={_toml_value(v)}" for k, v in run_config.items() if k in declared
    )
    # two CPUs per site on this 2-core machine: one Ray worker runs every site in turn (a
    # worker's start, its imports of fedpca and Flower, costs ~3 s of CPU)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "flwr"), "run", str(ROOT), "--stream",
         "--federation-config", f"num-supernodes={sites} client-resources-num-cpus=2",
         "--run-config", f'{config} output="{out}"'],
        env=env, capture_output=True, text=True, timeout=400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    deadline = time.time() + 60
    while not out.exists() and time.time() < deadline:
        time.sleep(0.5)
    assert out.exists(), proc.stdout[-3000:]
    return json.loads(out.read_text())


def test_flwr_run_gives_the_reference_basis(flwr_env, tmp_path):
    setting = scenario()
    raw = flwr_run(flwr_env, tmp_path / "result.json", setting.to_run_config(), setting.sites)
    assert raw["algorithm"] == "dps-pca"
    assert raw["sites_answered"] == [["0", "1", "2"]] * (setting.rounds + 1)
    reference = run_dps_pca(
        setting.all_site_data(), setting.k, setting.s_hat, setting.policy(),
        seed=setting.seed, evaluate=setting.distance_to_truth,
    )
    np.testing.assert_allclose(np.asarray(raw["basis"]), reference.basis, atol=1e-8, rtol=0)
    assert raw["history"][-1]["epsilon_spent"] == pytest.approx(setting.epsilon, rel=1e-3)
    # the CLI's record (tests/test_flower_simulation.py checks the same key set)
    assert set(raw) == record_keys("dps-pca")
    assert raw["config"]["run_id"].isdigit()  # as the sites' ledgers name the run
    assert (raw["sites"], raw["samples"], raw["dim"], raw["k"], raw["seed"]) == (3, 1500, 40, 2, 21)
    assert raw["rounds"] == 2 and raw["flower_rounds"] == 3  # the initialisation, then T
    assert raw["distances"] == pytest.approx([h["distance"] for h in reference.history], abs=1e-8)
    assert raw["wall_seconds"] > 0
    # `fedpca show` reads the App's record as it reads the CLI's: header, table, summary, plot
    code, shown = run_cli(["show", str(tmp_path / "result.json"), "--plot",
                           str(tmp_path / "app.png")])
    assert code == 0 and shown.startswith("dps-pca: 3 sites, n=1500, d=40, k=2;")
    rows = [line.split() for line in shown.splitlines() if line[:5].strip().isdigit()]
    assert [(r[0], r[1], r[2]) for r in rows] == [("0", "init", "3"), ("1", "power", "3"),
                                                  ("2", "power", "3")]
    assert [float(r[3]) for r in rows] == pytest.approx(raw["distances"], abs=1e-4)
    assert f"distance {raw['subspace_distance']:.4f}" in shown
    assert (tmp_path / "app.png").stat().st_size > 20_000


def test_flwr_run_serves_dpdis_pca_secure_sums_with_its_energy_ratio(flwr_env, tmp_path):
    # The App's secure path: distributed discrete Gaussian residues through fedpca's
    # verifiable secure aggregation
    # (the factor variant's App path is the same code; tests/test_message_api.py runs it).
    # in three groups of two sites (run_config secure-group-size), as the reference sums them
    dpdis = DPdisPCAScenario(sites=6, dim=30, samples=1800, k=4, epsilon=2.0, seed=5,
                             variant="secure-sum", secure_min_sites=2, secure_group_size=2)
    raw = flwr_run(flwr_env, tmp_path / "dpdis.json",
                   {**dpdis.to_run_config(), "algorithm": "dpdis-pca",
                    "secagg-max-weight": 300}, dpdis.sites)
    sites = [dpdis.prepared_site(i) for i in range(dpdis.sites)]
    reference = run_dpdis_pca(sites, dpdis.k, policy=dpdis.policy(), seed=dpdis.seed,
                              variant="secure-sum", evaluation=dpdis.evaluation(),
                              group_size=2)
    assert raw["algorithm"] == "dpdis-pca"
    np.testing.assert_allclose(np.asarray(raw["basis"]), reference.basis, atol=1e-8, rtol=0)
    assert "dropped" not in raw["history"][0] and len(raw["sites_answered"][0]) == 6
    assert raw["privacy"]["mechanism"] == "distributed-discrete-gaussian"
    assert raw["privacy"]["min_sites_per_sum"] == 2
    # the synthetic data are known to the server: the energy ratio, as the CLI reports it
    assert set(raw) == record_keys("dpdis-pca")
    assert raw["energy_ratio"] == pytest.approx(reference.history[0]["energy_ratio"], abs=1e-8)
    assert (raw["variant"], raw["rounds"], raw["flower_rounds"]) == ("secure-sum", 1, 1)

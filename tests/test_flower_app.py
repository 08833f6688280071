"""``flwr run .`` runs DPS-PCA as a Flower App and gives the reference's basis.

Starts a local simulation SuperLink (Flower detaches it); every process whose command line
names this test's FLWR_HOME is stopped by PID afterwards, with its descendants, even when
the test fails.
"""

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

from fedpca.algorithms.dpdis_pca import run_dpdis_pca
from fedpca.algorithms.dps_pca import run_dps_pca
from fedpca.algorithms.ldp_pca import run_ldp_pca
from fedpca.deployment.processes import processes_naming, stop_processes
from fedpca.dpdis_scenario import DPdisPCAScenario
from fedpca.ldp_scenario import LDPScenario
from fedpca.scenario import DPSPCAScenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = DPSPCAScenario(
    sites=3, dim=40, samples=1500, k=2, sparsity=6, s_hat=10, rounds=2,
    epsilon=1.5, delta=1e-5, seed=21, data_seed=4,
)


@pytest.fixture
def flwr_home(tmp_path):
    home = tmp_path / "flwr-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = ":local:"\n'
    )
    try:
        yield home
    finally:
        stop_processes(processes_naming(str(home)))
        assert not processes_naming(str(home))


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def flwr_run(flwr_home: Path, out: Path, run_config: dict, sites: int) -> dict:
    """``flwr run .`` with ``run_config`` (only keys pyproject declares) on ``sites`` sites."""
    env = dict(os.environ)
    env.update(
        FLWR_HOME=str(flwr_home),
        FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
        OPENBLAS_NUM_THREADS="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    config = " ".join(
        f"{k}={_toml_value(v)}" for k, v in run_config.items() if k in declared
    )
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "flwr"), "run", str(ROOT), "--stream",
         "--federation-config", f"num-supernodes={sites} client-resources-num-cpus=1",
         "--run-config", f'{config} output="{out}"'],
        env=env, capture_output=True, text=True, timeout=400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    deadline = time.time() + 60
    while not out.exists() and time.time() < deadline:
        time.sleep(0.5)
    assert out.exists(), proc.stdout[-3000:]
    return json.loads(out.read_text())


def test_flwr_run_gives_the_reference_basis(flwr_home, tmp_path):
    raw = flwr_run(flwr_home, tmp_path / "result.json", SCENARIO.to_run_config(), SCENARIO.sites)
    assert raw["algorithm"] == "dps-pca"
    assert raw["sites_answered"] == [["0", "1", "2"]] * (SCENARIO.rounds + 1)
    reference = run_dps_pca(
        SCENARIO.all_site_data(), SCENARIO.k, SCENARIO.s_hat, SCENARIO.policy(),
        seed=SCENARIO.seed,
    )
    np.testing.assert_allclose(np.asarray(raw["basis"]), reference.basis, atol=1e-8, rtol=0)
    assert raw["history"][-1]["epsilon_spent"] == pytest.approx(SCENARIO.epsilon, rel=1e-3)


def test_flwr_run_serves_dpdis_and_ldp_pca(flwr_home, tmp_path):
    dpdis = DPdisPCAScenario(sites=3, dim=30, samples=900, k=4, r=6, epsilon=2.0, seed=5)
    raw = flwr_run(flwr_home, tmp_path / "dpdis.json",
                   {**dpdis.to_run_config(), "algorithm": "dpdis-pca"}, dpdis.sites)
    sites = [dpdis.prepared_site(i) for i in range(dpdis.sites)]
    reference = run_dpdis_pca(sites, dpdis.k, dpdis.r, dpdis.policy(), seed=dpdis.seed)
    assert raw["algorithm"] == "dpdis-pca"
    np.testing.assert_allclose(np.asarray(raw["basis"]), reference.basis, atol=1e-8, rtol=0)
    assert raw["privacy"]["smallest_site"] == 300

    ldp = LDPScenario(sites=3, dim=12, samples=3000, k=2, sparsity=None, epsilon=0.5, seed=6)
    raw = flwr_run(flwr_home, tmp_path / "ldp.json",
                   {**ldp.to_run_config(), "algorithm": "ldp-pca"}, ldp.sites)
    sites = [ldp.prepared_site(i) for i in range(ldp.sites)]
    reference = run_ldp_pca(sites, ldp.k, ldp.policy(), seed=ldp.seed)
    assert raw["algorithm"] == "ldp-pca"
    np.testing.assert_allclose(np.asarray(raw["basis"]), reference.basis, atol=1e-8, rtol=0)

"""``fedpca simulate --ray-address`` on a real two-node Ray cluster on loopback, running
DPS-PCA's and SuLQ k-plane's secure modes (distributed discrete Gaussian residues through
fedpca's verifiable secure aggregation), each equal to its Flower-free reference under the same seeds (DPdisPCA's
secure mode runs as a Flower App in tests/test_flower_app.py).

A head node with no CPUs (it holds Ray's control plane and the ServerApp's driver) and a
second node, started by its own ``ray start --address``, with the only CPUs: every virtual
site must run on the second node, so the run finishing proves the simulation used both.
The cluster has its own ports and temporary directory; every process whose command line
names that directory or the cluster's port (Ray's client server names only the latter), with
its descendants (Ray's agents rename themselves), is stopped by PID afterwards, also when
the test fails, and none may be left.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from fedpca.algorithms.dps_pca import run_dps_pca
from fedpca.algorithms.kplane import run_sulq_kplane
from fedpca.deployment.launch import free_port
from fedpca.deployment.processes import process_table, processes_naming, stop_processes
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.scenarios.kplane import KPlaneScenario

pytestmark = pytest.mark.federation

RAY = str(Path(sys.executable).parent / "ray")


# Ray gives a starting node 30 s to register with its head, which a 2-core machine busy with
# the rest of the suite can miss: a failed start is stopped by PID and tried once more
STARTS = 2


def ray_start(env: dict, *args: str) -> str:
    """``ray start ARGS``; ``""`` when it succeeded, else the end of its output."""
    proc = subprocess.run([RAY, "start", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    return "" if proc.returncode == 0 else proc.stdout[-2000:] + proc.stderr[-2000:]


def distinct_ports(count: int, taken: set[int]) -> list[int]:
    """``count`` free ports, none in ``taken`` (which gains them): Ray refuses a node whose
    components would share a port."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in taken:
            taken.add(port)
            ports.append(port)
    return ports


def node_ports(taken: set[int]) -> list[str]:
    """Free ports for everything a Ray node listens on (never Ray's fixed defaults, which
    another Ray on this machine may hold); workers take Ray's own free ones."""
    names = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
             "dashboard-agent-grpc-port", "metrics-export-port", "runtime-env-agent-port")
    return [f"--{name}={port}" for name, port in zip(
        names, distinct_ports(len(names), taken), strict=True)]


def cluster_processes(temp: Path, port: int) -> set[int]:
    """The live processes of the cluster with this temporary directory and head port."""
    table = process_table()
    return processes_naming(str(temp)) | {
        pid for pid in processes_naming(f":{port}") if "ray" in table[pid].cmdline
    }


def start_cluster(temp: Path, env: dict, port: int, taken: set[int]) -> str:
    """Start the head on ``port`` (0 CPUs) and a second node with 2 CPUs; ``""`` when both
    started, else the failing start's output."""
    dashboard, client_server = distinct_ports(2, taken)
    return ray_start(
        env, "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=0",
        f"--temp-dir={temp}", "--include-dashboard=false", f"--dashboard-port={dashboard}",
        f"--ray-client-server-port={client_server}", "--disable-usage-stats",
        *node_ports(taken),
    ) or ray_start(env, f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1",
                   "--num-cpus=2", "--disable-usage-stats", *node_ports(taken))


@pytest.fixture(scope="module")
def cluster():
    """``HOST:PORT`` of a two-node loopback cluster: a head with 0 CPUs, a worker with 2."""
    # short: Ray's socket paths under it must stay within AF_UNIX's 107 bytes
    temp = Path(tempfile.mkdtemp(prefix="fedpca-ray-", dir="/tmp"))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "OPENBLAS_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    taken: set[int] = set()
    heads: list[int] = []
    try:
        failures: list[str] = []
        while len(failures) < STARTS:
            heads.append(distinct_ports(1, taken)[0])
            failure = start_cluster(temp, env, heads[-1], taken)
            if not failure:
                break
            failures.append(failure)
            stop_processes(cluster_processes(temp, heads[-1]))
        assert len(failures) < STARTS, "\n".join(failures)
        yield f"127.0.0.1:{heads[-1]}", env
    finally:
        for port in heads:  # a Ray node's daemons need no grace: SIGKILL after a second
            stop_processes(cluster_processes(temp, port), grace=1.0)
            assert not cluster_processes(temp, port)
        shutil.rmtree(temp, ignore_errors=True)


def simulate(address: str, env: dict, out: Path, algorithm: str, *flags: str) -> dict:
    """``fedpca simulate ALGORITHM FLAGS --ray-address ADDRESS`` (a separate driver process,
    as a user runs it); its result record."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "fedpca"), "simulate", algorithm, *flags,
         # two CPUs per site: one Ray worker (an actor) on the second node runs every site
         # in turn; a worker's start (its imports of fedpca and Flower) costs ~3 s of CPU
         "--ray-address", address, "--cpus-per-site", "2", "--quiet", "--output", str(out)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_secure_kplane_on_a_two_node_cluster_equals_the_reference(cluster, tmp_path):
    # SuLQ k-plane's secure sums (distributed discrete Gaussian, verifiable) on the cluster
    scenario = KPlaneScenario(sites=4, samples=2000, clusters=2, subspace_dim=2, rounds=1,
                              epsilon=2.0, seed=7, data_seed=7, secure_min_sites=4)
    raw = simulate(*cluster, tmp_path / "kplane.json", "sulq-kplane", "--sites", "4",
                   "--samples", "2000", "--clusters", "2", "--subspace-dim", "2", "--rounds",
                   "1", "--epsilon", "2", "--seed", "7", "--secure-aggregation")
    reference = run_sulq_kplane(scenario.all_site_data(), 2, 2, scenario.policy(),
                                seed=scenario.seed, evaluate=scenario.evaluate)
    for U, V in zip(raw["bases"], reference.bases, strict=True):
        np.testing.assert_allclose(np.asarray(U), V, atol=1e-8, rtol=0)
    assert [h["sites"] for h in raw["history"]] == [4]
    assert raw["privacy"]["mechanism"] == "distributed-discrete-gaussian"


def test_dps_pca_with_discrete_noise_on_the_cluster_equals_the_reference(cluster, tmp_path):
    scenario = DPSPCAScenario(sites=4, samples=8000, dim=30, k=2, sparsity=5, s_hat=8,
                              rounds=2, secure_min_sites=4, discrete=True, seed=1,
                              data_seed=1, epsilon=2.0)
    raw = simulate(*cluster, tmp_path / "dps.json", "dps-pca", "--sites", "4", "--samples",
                   "8000", "--dim", "30", "--k", "2", "--sparsity", "5", "--s-hat", "8",
                   "--rounds", "2", "--epsilon", "2", "--seed", "1", "--secure-aggregation",
                   "--discrete")
    reference = run_dps_pca(scenario.all_site_data(), 2, 8, scenario.policy(), seed=1,
                            evaluate=scenario.distance_to_truth)
    np.testing.assert_allclose(np.asarray(raw["basis"]), reference.basis, atol=1e-8, rtol=0)
    assert raw["sites_answered"] == [["0", "1", "2", "3"]] * 3
    # the sites' true record counts, as each site states them with its answers
    assert raw["config"]["site_records"] == {str(i): 2000 for i in range(4)}
    assert raw["privacy"]["accounting"] == "ddg-pld"

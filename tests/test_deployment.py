"""A real Flower deployment on loopback: TLS, SuperNode authentication, one data file per site.

One SuperLink and three SuperNodes (module fixture) run DPS-PCA with ``flwr run`` and must
give the reference's basis; a SuperNode with an unregistered key and an ``--insecure`` one
must be refused. The fixture stops every process it started by PID, with descendants, even
when a test fails, and asserts that none is left.
"""

import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    load_ssh_private_key,
    load_ssh_public_key,
)

from fedpca.algorithms.dps_pca import run_dps_pca
from fedpca.deployment.certs import write_deployment_files, write_site_key
from fedpca.deployment.local import DeploymentError, LocalDeployment, Site, config_pairs
from fedpca.deployment.processes import (
    descendants,
    process_table,
    processes_naming,
    stop_processes,
)
from fedpca.errors import ConfigurationError
from fedpca.scenario import DPSPCAScenario

ROOT = Path(__file__).resolve().parents[1]
#: The run, as flwr run receives it; the reference reads the same keys the app does.
RUN_CONFIG = {
    "dim": 30, "samples": 600, "k": 2, "sparsity": 5, "s-hat": 8, "rounds": 2,
    "epsilon": 1.5, "delta": 1e-5, "seed": 11, "data-seed": 3, "min-sites": 3,
}
SCENARIO = DPSPCAScenario.from_run_config(RUN_CONFIG, sites=3)
#: What Flower logs when a SuperNode cannot connect (the process itself exits with 1).
CONNECTION_FAILED = "Exit Code: 305"
REFUSAL_TIMEOUT = 60


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    work = tmp_path_factory.mktemp("deployment")
    sites = []
    for i, records in enumerate(SCENARIO.all_site_data()):
        path = work / f"site-{i}.npy"
        np.save(path, records)
        sites.append(Site(str(i), path))
    local = LocalDeployment(work, sites, ROOT)
    try:
        with local:
            yield local
    finally:
        assert all(item.process.poll() is not None for item in local.launched)
        assert not local.leftovers()
        assert not processes_naming(str(work))


def test_flwr_run_on_the_deployment_gives_the_reference_basis(deployment):
    result = deployment.run(RUN_CONFIG, timeout=240)
    reference = run_dps_pca(
        SCENARIO.all_site_data(), SCENARIO.k, SCENARIO.s_hat, SCENARIO.policy(),
        seed=SCENARIO.seed,
    )
    np.testing.assert_allclose(result.basis, reference.basis, atol=1e-8, rtol=0)
    assert result.sites_answered == [["0", "1", "2"]] * (SCENARIO.rounds + 1)
    assert result.history[-1]["epsilon_spent"] == pytest.approx(SCENARIO.epsilon, rel=1e-3)


def _refused(node) -> str:
    """Wait for a SuperNode that must give up; return its log."""
    code = node.process.wait(timeout=REFUSAL_TIMEOUT)
    log = node.log.read_text(errors="replace")
    assert code != 0 and CONNECTION_FAILED in log, log[-2000:]
    return log


def test_an_unregistered_supernode_is_refused(deployment, tmp_path):
    key = write_site_key(tmp_path, "intruder")
    node = deployment.start_supernode(
        "supernode-intruder", key.private,
        {"data-path": str(deployment.sites[0].data_path), "site-name": "intruder"},
    )
    assert "Failed to activate SuperNode" in _refused(node)


def test_an_insecure_supernode_cannot_join_the_tls_superlink(deployment):
    # Without a key: Flower itself refuses --insecure with a key (exit code 303) before
    # dialling; this checks that the SuperLink does not speak plaintext.
    node = deployment.start_supernode(
        "supernode-insecure", None,
        {"data-path": str(deployment.sites[0].data_path), "site-name": "0"},
        insecure=True, extra_args=["--max-retries", "2", "--max-wait-time", "20"],
    )
    assert "Failed to initialize the connection to the SuperLink" in _refused(node)


def test_certificates_and_keys(tmp_path):
    files = write_deployment_files(tmp_path, ["a", "b"], hosts=["link.example", "10.0.0.5"])
    ca = x509.load_pem_x509_certificate(files.server.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(files.server.cert.read_bytes())
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = [str(ip) for ip in names.get_values_for_type(x509.IPAddress)]
    assert ips == ["10.0.0.5", "127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["link.example"]
    for key in files.sites:
        private = load_ssh_private_key(key.private.read_bytes(), None)
        public = load_ssh_public_key(key.public.read_bytes())
        assert isinstance(private.curve, ec.SECP384R1)
        assert private.public_key() == public
        assert stat.S_IMODE(key.private.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.server.key.stat().st_mode) == 0o600
    with pytest.raises(ConfigurationError):
        write_deployment_files(tmp_path, ["a", "a"])


def test_an_undeclared_run_config_key_is_refused_before_flwr_run(tmp_path):
    np.save(tmp_path / "0.npy", np.zeros((2, 3)))
    local = LocalDeployment(tmp_path, [Site("0", tmp_path / "0.npy")], ROOT)
    with pytest.raises(ConfigurationError, match="not-a-key"):
        local.run({"k": 2, "not-a-key": 1})
    assert not local.launched


def test_a_superlink_that_does_not_come_up_is_reported_and_stopped(tmp_path):
    np.save(tmp_path / "0.npy", np.zeros((2, 3)))
    site = Site("0", tmp_path / "0.npy")
    local = LocalDeployment(tmp_path, [site], ROOT, startup_timeout=0.01)
    with pytest.raises(DeploymentError, match=r"superlink .* not listening on 127\.0\.0\.1"):
        with local:
            pass
    assert [item.name for item in local.launched] == ["superlink"]
    assert local.launched[0].process.poll() is not None
    assert not local.leftovers()


def test_config_pairs():
    assert config_pairs({"k": 2, "eps": 0.5, "on": True, "out": "/a b.json"}) == (
        'k=2 eps=0.5 on=true out="/a b.json"'
    )
    for bad in ('say "hi"', "C:\\data"):
        with pytest.raises(ConfigurationError):
            config_pairs({"x": bad})


def test_stop_processes_kills_descendants_that_ignore_sigterm():
    """python -> sh -> sleep, the shell in a new session and deaf to SIGTERM: the parent
    exits on SIGTERM, its orphans get SIGKILL after the grace period."""
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, time; subprocess.Popen(['sh', '-c', 'trap \"\" TERM; sleep 60'],"
         " start_new_session=True); time.sleep(60)"],
    )
    deadline = time.monotonic() + 10
    while len(descendants([parent.pid], process_table())) < 3:
        assert time.monotonic() < deadline, "the children did not start"
        time.sleep(0.05)
    stopped = stop_processes([parent.pid], grace=1)
    parent.wait(timeout=5)
    assert len(stopped) == 3
    assert not set(stopped) & set(process_table())

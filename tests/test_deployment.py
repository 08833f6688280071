"""A real Flower deployment on loopback: TLS, SuperNode authentication, one data file, policy
file, lifetime ledger and pinned ClientApp per site, and a hostile coordinator.

Three SuperNodes (module fixture; ``--isolation process`` with each site's ``fedpca site
superexec``) join the session's SuperLink (``tests/loopback.py``) and run DPS-PCA with
``flwr run``; then the coordinator ships a FAB with modified client code (every site refuses it, nothing is charged), site 0 restarts, and
a third run finds site 0's lifetime budget spent (its ledger survived the restart): site 0
declines the run in its readiness round, the run stops before any release, no site's ledger
gains a row, and the run's record says why (``fedpca deploy local`` then exits non-zero). A
SuperNode with an unregistered key and an ``--insecure`` one must be refused. The fixture
stops every process it started by PID, with descendants, even when a test fails, and
asserts that none is left (the SuperLink's, at the session's end).
"""

import functools
import json
import re
import shutil
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
from loopback import joined

from fedpca.cli import main as cli_main
from fedpca.deployment import command, register_keys
from fedpca.deployment.certs import write_deployment_files, write_site_key
from fedpca.deployment.fab_check import config_only_pyproject
from fedpca.deployment.launch import DeploymentError, config_pairs
from fedpca.deployment.local import LocalDeployment, Site
from fedpca.deployment.processes import descendants, process_table, stop_processes
from fedpca.errors import ConfigurationError
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.site.ledger import SiteLedger
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.site.results import load_result, results_folder

pytestmark = pytest.mark.federation

ROOT = Path(__file__).resolve().parents[1]
#: The run, as the coordinator sends it: no privacy keys matter at a real site, no seed.
RUN_CONFIG = {
    "dim": 30, "samples": 30000, "k": 2, "sparsity": 5, "s-hat": 8, "rounds": 4,
    "data-seed": 3, "min-sites": 3, "epsilon": 1000.0,
}


@functools.cache
def scenario():
    """The run's scenario, its policy calibrated when first asked."""
    return DPSPCAScenario.from_run_config(RUN_CONFIG, sites=3)


#: Each run's calibration (each site's own policy); site 0's lifetime budget is one run,
#: its daily and weekly ceilings are its lifetime's.
RUN_EPSILON, DELTA = 4.0, 1e-7
#: What Flower logs when a SuperNode cannot connect (the process itself exits with 1).
CONNECTION_FAILED = "Exit Code: 305"
REFUSAL_TIMEOUT = 60
#: Seconds run A may take: about a minute alone on an idle 2-core machine (five rounds and
#: the released result's delivery, each message a fresh ClientApp process at every site),
#: several minutes when other test files load the machine.
RUN_TIMEOUT = 600


def site_policy(folder: Path, name: str, data: Path, lifetime: float) -> Path:
    """A policy as ``fedpca site init`` writes it, with this test's budget."""
    folder.mkdir()
    path = write_policy_template(folder / "policy.toml", name, str(data), delta=DELTA, rounds=4)
    text = path.read_text().replace("epsilon = 4.0", f"epsilon = {lifetime!r}")
    for key, value in (("run", RUN_EPSILON), ("daily", lifetime), ("weekly", lifetime)):
        text = re.sub(rf"^{key}-epsilon = \S+", f"{key}-epsilon = {value!r}", text, flags=re.M)
    path.write_text(text)
    return path


def ledger_rows(site: Site) -> list[dict]:
    p = load_site_policy(site.policy)
    return SiteLedger(p.ledger, p.population, p.epsilon, p.delta).rows()


def scenario_sites(work: Path, names: list[str], lifetimes: list[float]) -> list[Site]:
    """One real site per partition of the run's scenario, named ``names``, with these
    lifetime budgets: its records and policy under ``work``."""
    sites = []
    for name, lifetime, records in zip(names, lifetimes, scenario().all_site_data()):
        path = work / f"site-{name}.npy"
        np.save(path, records)
        sites.append(Site(name, path, site_policy(work / f"site-{name}", name, path, lifetime)))
    return sites


@pytest.fixture(scope="module")
def deployment(loopback, tmp_path_factory):
    work = tmp_path_factory.mktemp("deployment")
    sites = scenario_sites(work, ["0", "1", "2"], [RUN_EPSILON] + [10 * RUN_EPSILON] * 2)
    with joined(loopback, sites, work) as federation:
        yield federation


def modified_code_app(folder: Path) -> Path:
    """What a hostile coordinator ships: the whole App, one line of client code changed so
    that a site's first record would travel back in the metrics."""
    shutil.copytree(ROOT / "fedpca", folder / "fedpca",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "pyproject.toml").write_text(config_only_pyproject())
    base = folder / "fedpca" / "site" / "answer.py"
    original = base.read_text()
    leak = original.replace('"releases": site.ledger.count,',
                            '"releases": site.ledger.count, "leak": float(site.X[0, 0]),')
    assert leak != original
    base.write_text(leak)
    return folder


def test_a_hostile_coordinator_against_real_sites(deployment, tmp_path):
    # Run A: the sites answer with their own budget (the run_config's epsilon=1000 is ignored).
    result = deployment.run(RUN_CONFIG, timeout=RUN_TIMEOUT)
    assert result.sites_answered == [["0", "1", "2"]] * (scenario().rounds + 1)
    # OS noise and a random public start: compared with the truth (a random plane in d=30 is
    # at about 1.3; in 300 reference runs of this setting the largest distance was 0.47).
    assert result.history[-1]["distance"] < 0.6
    own = calibrate_gaussian(5, RUN_EPSILON, DELTA, "pld", paper_rule="dps-pca")
    assert result.history[-1]["epsilon_spent"] == pytest.approx(RUN_EPSILON, rel=1e-3)
    # the result states what the sites guaranteed; the request (epsilon=1000) is kept apart,
    # as a request, and no block of the record repeats it as a guarantee
    assert result.privacy["epsilon"] == RUN_EPSILON
    assert result.config["request"]["epsilon"] == 1000.0
    for stated in result.config["site_guarantees"].values():
        assert (stated["epsilon"], stated["delta"]) == (RUN_EPSILON, DELTA)
        assert stated["noise_multiplier"] == own.noise_multiplier
    for site in deployment.sites:
        rows = ledger_rows(site)
        # exact noise (grid points): sigma in grid steps over the rounded sensitivity is the
        # site's own multiplier
        assert [r["mechanism"] for r in rows] == (["dps-pca/diagonal+exact"]
                                                  + ["dps-pca/power+exact"] * 4)
        assert all(r["summands"] == 1 and r["sigma"] / r["sensitivity"]
                   == pytest.approx(own.noise_multiplier, rel=1e-4) for r in rows)
        assert len({r["run_id"] for r in rows}) == 1
        # the run's last step: the site stored the released result beside its policy
        (stored,) = results_folder(Path(site.policy)).iterdir()
        np.testing.assert_array_equal(load_result(stored).basis, result.basis)
    assert result.config["result_delivered"] == ["0", "1", "2"]
    # Run B: a FAB carrying modified client code is refused by every site; nothing is spent.
    with pytest.raises(DeploymentError) as refused:
        deployment.run(RUN_CONFIG, timeout=120, app_dir=modified_code_app(tmp_path / "app"))
    logs = "".join(item.log.read_text(errors="replace") for item in deployment.launched)
    assert "refused: the App (FAB) carries" in logs and "fedpca/__init__.py" in logs
    assert "leak" not in str(refused.value)
    assert all(len(ledger_rows(site)) == 5 for site in deployment.sites)
    # Site 0 restarts; its lifetime ledger is on its disk, so run C finds its budget spent:
    # site 0 declines the whole run in the readiness round, and no site spends anything.
    key = deployment.keys["0"]
    deployment.stop_site("0")
    deployment.start_site(deployment.sites[0], key)
    before = [ledger_rows(site) for site in deployment.sites]
    output = tmp_path / "run-c.json"
    with pytest.raises(DeploymentError, match=r"the run failed: readiness round: 2 site\(s\) are "
                                              r"ready for this run, need 3; nothing was released"):
        deployment.run({**RUN_CONFIG, "output": str(output)}, timeout=120)
    assert [ledger_rows(site) for site in deployment.sites] == before
    record = json.loads(output.read_text())
    assert record["status"] == "failed"
    (declined,) = record["site_failures"]
    assert declined.startswith(
        "cannot afford: 0: refused this run of dps-pca: the 5 releases left of it")
    assert "lifetime budget epsilon=4 (delta=1e-07) would be exceeded" in declined


def test_deploy_local_exits_non_zero_when_the_run_fails(tmp_path, monkeypatch, capsys):
    class FailingRun(LocalDeployment):
        def start(self) -> None:
            self.port = 1

        def run(self, run_config, timeout=0, **options):
            raise DeploymentError(
                "the run failed: readiness round: 1 site(s) are ready for this run")

    monkeypatch.setattr(command, "LocalDeployment", FailingRun)
    np.save(tmp_path / "0.npy", np.zeros((2, 3)))
    argv = ["deploy", "local", "--workdir", str(tmp_path), "--data", str(tmp_path / "0.npy")]
    assert cli_main(argv) == 2
    assert "the run failed: readiness round" in capsys.readouterr().err


def test_deploy_local_runs_each_run_config_in_turn_on_one_federation(tmp_path, monkeypatch,
                                                                     capsys):
    started, runs = [], []

    class RecordingRun(LocalDeployment):
        def start(self) -> None:
            started.append(True)
            self.port = 1

        def run(self, run_config, timeout=0, **options):
            runs.append(dict(run_config))
            return run_config["algorithm"]

    monkeypatch.setattr(command, "LocalDeployment", RecordingRun)
    monkeypatch.setattr(command, "result_summary", lambda result: f"{result} done")
    np.save(tmp_path / "0.npy", np.zeros((2, 3)))
    argv = ["deploy", "local", "--workdir", str(tmp_path), "--data", str(tmp_path / "0.npy"),
            "--run-config", 'algorithm="dps-pca" k=2', "--run-config",
            f'algorithm="ldp-pca" output="{tmp_path / "ldp.json"}"']
    assert cli_main(argv) == 0
    assert started == [True]  # one federation for both runs
    assert runs == [{"algorithm": "dps-pca", "k": 2, "output": str(tmp_path / "result-1.json")},
                    {"algorithm": "ldp-pca", "output": str(tmp_path / "ldp.json")}]
    printed = capsys.readouterr().out
    assert "run 1 of 2 finished" in printed and "run 2 of 2 finished" in printed
    assert "ldp-pca done; result: " + str(tmp_path / "ldp.json") in printed


def _refused(node) -> str:
    """Wait for a SuperNode that must give up; return its log."""
    code = node.process.wait(timeout=REFUSAL_TIMEOUT)
    log = node.log.read_text(errors="replace")
    assert code != 0 and CONNECTION_FAILED in log, log[-2000:]
    return log


#: An intruder's SuperNode runs no ClientApp of its own: with Flower's default isolation it
#: would start a SuperExec process beside it, which the refusal never reaches.
NO_CLIENTAPP = ["--isolation", "process"]


def test_an_unregistered_supernode_is_refused(deployment, tmp_path):
    key = write_site_key(tmp_path, "intruder")
    node = deployment.start_supernode(
        "supernode-intruder", key.private, {"policy": str(deployment.sites[0].policy)},
        extra_args=NO_CLIENTAPP,
    )
    assert "Failed to activate SuperNode" in _refused(node)


def test_an_insecure_supernode_cannot_join_the_tls_superlink(deployment):
    # Without a key: Flower itself refuses --insecure with a key (exit code 303) before
    # dialling; this checks that the SuperLink does not speak plaintext.
    node = deployment.start_supernode(
        "supernode-insecure", None, {"policy": str(deployment.sites[0].policy)},
        insecure=True,
        extra_args=["--max-retries", "2", "--max-wait-time", "20", *NO_CLIENTAPP],
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
    local = LocalDeployment(tmp_path, [Site("0", tmp_path / "0.npy")])
    with pytest.raises(ConfigurationError, match="not-a-key"):
        local.run({"k": 2, "not-a-key": 1})
    assert not local.launched


def test_a_superlink_that_does_not_come_up_is_reported_and_stopped(tmp_path):
    np.save(tmp_path / "0.npy", np.zeros((2, 3)))
    site = Site("0", tmp_path / "0.npy")
    local = LocalDeployment(tmp_path, [site], startup_timeout=0.01)
    with pytest.raises(DeploymentError, match=r"superlink .* not listening on 127\.0\.0\.1"):
        with local:
            pass
    assert [item.name for item in local.launched] == ["superlink"]
    assert local.launched[0].process.poll() is not None
    assert not local.leftovers()


def test_registering_a_group_stops_at_the_first_key_it_cannot_register(monkeypatch, capsys):
    # one process registers a group of sites' keys (LocalDeployment.register); a malformed
    # pair or a registration Flower refuses (its entry point exiting 1) makes it exit
    # non-zero, naming the site, before it tries the keys after it
    assert register_keys.register("fedpca", ["no-name-or-key"]) == 2
    assert "'no-name-or-key' is not NAME=PUBLIC_KEY" in capsys.readouterr().err
    calls = []
    monkeypatch.setattr("flwr.cli.app.app", lambda args, **_: calls.append(args) or sys.exit(1))
    assert register_keys.register("fedpca", ["a=/a.pub", "b=/b.pub"]) == 1
    assert calls == [["supernode", "register", "/a.pub", "fedpca", "--name", "a"]]
    assert "registering a failed (exit code 1)" in capsys.readouterr().err


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

"""What a consortium's operators call things (issue 48): the SuperLink connection's name is one
``flwr`` can take beside the clone, and ``fedpca deploy local`` says which node is which site.
No federation is started: the deployment's processes are stand-ins with their logs."""

import re
import subprocess
from pathlib import Path

import numpy as np
from flwr.cli.config_migration import _is_legacy_usage

from fedpca.cli import main as cli_main
from fedpca.deployment import command
from fedpca.deployment.launch import Launched
from fedpca.deployment.local import DEFAULT_FEDERATION, LocalDeployment, SiteProcesses
from fedpca.site.policy_template import write_policy_template

ROOT = Path(__file__).resolve().parents[1]
#: Every page that shows an operator a ``flwr`` command naming the connection.
PAGES = ("deploy/README.md", "docs/genomics.md")


def test_the_connection_name_is_no_folder_flower_takes_for_an_app(tmp_path, monkeypatch):
    # beside the clone (a folder "fedpca" with a pyproject.toml) Flower reads the name
    # "fedpca" as a legacy App path and stops with "Cannot migrate configuration"
    (tmp_path / "fedpca").mkdir()
    (tmp_path / "fedpca" / "pyproject.toml").write_text("[project]\nname = 'fedpca'\n")
    monkeypatch.chdir(tmp_path)
    assert _is_legacy_usage("fedpca", [])
    assert DEFAULT_FEDERATION == "consortium" and not _is_legacy_usage(DEFAULT_FEDERATION, [])


def test_the_docs_name_the_connection_as_deploy_local_writes_it():
    readme = (ROOT / "deploy/README.md").read_text()
    assert f'default = "{DEFAULT_FEDERATION}"' in readme
    assert f"[superlink.{DEFAULT_FEDERATION}]" in readme
    commands = [line.strip() for page in PAGES for line in (ROOT / page).read_text().splitlines()
                if re.search(r"\bflwr (run|log|supernode)\b", line)]
    named = [line for line in commands
             if re.search(r"flwr (supernode (register|list|unregister)|run|log) ", line)]
    assert len(named) >= 8
    assert not [line for line in named if re.search(r"\sfedpca(\s|`|$)", line)]
    assert all(DEFAULT_FEDERATION in line for line in named
               if line.startswith(("flwr supernode", "flwr run")))


def stand_in(tmp_path: Path, name: str, log_text: str) -> SiteProcesses:
    """A finished process whose log reads ``log_text``, as site ``name``'s both processes,
    with a policy naming the site ``name``."""
    log = tmp_path / f"supernode-{name}.log"
    log.write_text(log_text)
    process = subprocess.Popen(["true"])
    process.wait()
    folder = tmp_path / name
    folder.mkdir()
    np.save(folder / "data.npy", np.zeros((2, 3)))
    policy = write_policy_template(folder / "policy.toml", name, str(folder / "data.npy"))
    launched = Launched(f"supernode-{name}", process, log)
    return SiteProcesses(launched, launched, policy)


def test_node_names_maps_each_connected_sites_node_id_to_its_policys_name(tmp_path):
    deployment = LocalDeployment(tmp_path / "work", [])
    deployment.running = {
        "0": stand_in(tmp_path, "hospital-a", "INFO :      SuperNode ID: 1234\n"
                      "INFO :      reconnected\nINFO :      SuperNode ID: 98765\n"),
        "1": stand_in(tmp_path, "hospital-b", "INFO :      SuperNode ID: 42\n"),
        "2": stand_in(tmp_path, "hospital-c", "INFO :      Starting SuperNode\n"),
    }
    # the latest id after a restart; a site not yet connected has none
    assert deployment.node_names() == {98765: "hospital-a", 42: "hospital-b"}


def test_deploy_local_prints_which_node_is_which_site(tmp_path, monkeypatch, capsys):
    class Connected(LocalDeployment):
        def start(self) -> None:
            self.port = 1
            self.running = {"0": stand_in(tmp_path, "hospital-a", "SuperNode ID: 7\n"),
                            "1": stand_in(tmp_path, "hospital-b", "SuperNode ID: 3\n")}

        def run(self, run_config, timeout=0, **options):
            return "done"

    monkeypatch.setattr(command, "LocalDeployment", Connected)
    monkeypatch.setattr(command, "result_summary", lambda result: result)
    np.save(tmp_path / "0.npy", np.zeros((2, 3)))
    argv = ["deploy", "local", "--workdir", str(tmp_path / "work"), "--data",
            str(tmp_path / "0.npy"), "--run-config", 'algorithm="dps-pca" k=2']
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "node 3: site hospital-b\nnode 7: site hospital-a\n" in out
    assert out.index("node 3: site hospital-b") < out.index("run 1 of 1 finished")

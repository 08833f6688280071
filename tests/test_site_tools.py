"""What a site's operator uses: the FAB check, the configuration-only App, the site CLI."""

import io
import json
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fedpca.algorithms.specs import app_config
from fedpca.apps.app_config import COMPONENTS, PUBLISHER
from fedpca.cli import main as cli_main
from fedpca.deployment.fab_check import (
    FabRefusedError,
    check_fab,
    config_only_pyproject,
    write_config_only_app,
)
from fedpca.privacy.mechanisms import Release
from fedpca.privacy.site_ledger import RunCharge, SiteLedger
from fedpca.privacy.site_policy import load_site_policy

ROOT = Path(__file__).resolve().parents[1]


def fab(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_pyproject_declares_the_app_the_package_ships():
    app = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert app["publisher"] == PUBLISHER
    assert app["components"] == COMPONENTS
    assert app["config"] == app_config()


def test_a_configuration_only_fab_is_accepted():
    check_fab(fab({"pyproject.toml": config_only_pyproject(), ".info/CONTENT": "x"}))


@pytest.mark.parametrize("files,match", [
    ({"pyproject.toml": config_only_pyproject(), "fedpca/clients/base.py": "leak()"},
     r"carries 1 files besides its configuration \(fedpca/clients/base.py\)"),
    ({"pyproject.toml": config_only_pyproject(), "evil.so": ""}, r"\(evil.so\)"),
    ({"pyproject.toml": config_only_pyproject().replace(
        "fedpca.apps.app:client_app", "evil.app:client_app")}, "clientapp='evil.app:client_app'"),
    ({".info/CONTENT": "no pyproject"}, "not a readable Flower App"),
])
def test_a_fab_with_code_or_another_clientapp_is_refused(files, match):
    with pytest.raises(FabRefusedError, match=match):
        check_fab(fab(files))


def test_not_a_zip_is_refused():
    with pytest.raises(FabRefusedError, match="not a readable Flower App"):
        check_fab(b"#!/bin/sh\nrm -rf /")


def test_the_written_app_builds_a_fab_the_sites_accept(tmp_path):
    app = write_config_only_app(tmp_path / "app")
    project = tomllib.loads((app / "pyproject.toml").read_text())
    assert project["tool"]["flwr"]["app"]["config"] == app_config()
    check_fab(fab({"pyproject.toml": (app / "pyproject.toml").read_text()}))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "code.py").write_text("")
    with pytest.raises(FabRefusedError, match="holds other files"):
        write_config_only_app(tmp_path / "other")


def test_site_init_then_ledger_as_table_and_json(tmp_path, capsys):
    np.save(tmp_path / "records.npy", np.eye(4))
    assert cli_main(["site", "init", "--policy", str(tmp_path / "site.toml"), "--name",
                     "hospital-c", "--data", "records.npy"]) == 0
    policy = load_site_policy(tmp_path / "site.toml")
    ledger = SiteLedger(policy.ledger, policy.population, policy.epsilon, policy.delta)
    ledger.for_run(RunCharge("run-1", "dpdis-pca", "ab" * 32, 1.0, 1)).charge(
        Release("dpdis-pca", 1.0, 5.0, (4, 4)))
    capsys.readouterr()
    assert cli_main(["site", "ledger", "--policy", str(tmp_path / "site.toml")]) == 0
    table = capsys.readouterr().out
    assert "site hospital-c, population hospital-c" in table and "run-1" in table
    assert "remaining" in table and "abababab" in table
    assert cli_main(["site", "ledger", "--policy", str(tmp_path / "site.toml"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["releases"] == 1 and summary["runs"][0]["run_id"] == "run-1"
    assert summary["epsilon_spent"] + summary["epsilon_remaining"] == pytest.approx(4.0)
    assert summary["rows"][0]["sigma"] == 5.0 and summary["rows"][0]["shape"] == "[4, 4]"


def test_site_commands_report_a_missing_policy(tmp_path, capsys):
    assert cli_main(["site", "ledger", "--policy", str(tmp_path / "none.toml")]) == 2
    assert "does not exist; write one with fedpca site init" in capsys.readouterr().err

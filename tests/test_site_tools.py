"""What a site's operator uses: the FAB check (sizes before decompression, in front of
Flower's own parser too), the memory limit, the configuration-only App, the site CLI."""

import io
import json
import re
import resource
import stat
import subprocess
import sys
import tomllib
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fedpca.algorithms.specs import app_config
from fedpca.flower.app_config import COMPONENTS, PUBLISHER
from fedpca.cli import main as cli_main
from fedpca.deployment.fab_check import (
    MAX_MEMBER_BYTES,
    FabRefusedError,
    check_fab,
    config_only_pyproject,
    write_config_only_app,
)
from fedpca.deployment.site_runtime import checked_fab_config
from fedpca.errors import ConfigurationError
from fedpca.dp.events import Release
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template

ROOT = Path(__file__).resolve().parents[1]


def fab(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def inflating_fab(expanded: int, chunk: int = 1 << 20, app: bool = True) -> bytes:
    """A FAB whose pyproject.toml (valid TOML: the App's unless not ``app``, then spaces)
    expands to ``expanded`` bytes, written in chunks so the test never holds it."""
    buffer = io.BytesIO()
    head = config_only_pyproject().encode() if app else b""
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("pyproject.toml", "w") as member:
            member.write(head)
            for start in range(len(head), expanded, chunk):
                member.write(b" " * min(chunk, expanded - start))
    return buffer.getvalue()


def declaring(content: bytes, name: bytes, size: int) -> bytes:
    """``content`` with member ``name``'s uncompressed size in the central directory
    replaced by ``size`` (a lying header)."""
    entry = content.index(b"PK\x01\x02")
    while content[entry + 46:entry + 46 + len(name)] != name:
        entry = content.index(b"PK\x01\x02", entry + 4)
    return content[:entry + 24] + size.to_bytes(4, "little") + content[entry + 28:]


def test_a_fab_that_expands_past_the_limit_is_refused_before_anything_is_decompressed(
    monkeypatch,
):
    bomb = inflating_fab(20 * 1024 * 1024)  # about 20 KB that expand to 20 MB
    assert len(bomb) < 100_000

    def decompress(*_args):
        raise AssertionError("the FAB check decompressed a member")

    monkeypatch.setattr(zipfile, "_get_decompressor", decompress)
    with pytest.raises(FabRefusedError, match=rf"pyproject.toml expands to 20971520 bytes, "
                                              rf"above this site's limit of {MAX_MEMBER_BYTES}"):
        check_fab(bomb)
    monkeypatch.undo()
    check_fab(inflating_fab(MAX_MEMBER_BYTES // 2))  # within the limit: read and accepted
    with pytest.raises(FabRefusedError, match=r"expands \d+ times, above this site's limit"):
        check_fab(inflating_fab(MAX_MEMBER_BYTES, app=False))  # 64 KiB of spaces: absurd


def test_a_fab_whose_header_understates_its_size_costs_no_more_memory():
    lying = declaring(inflating_fab(20 * 1024 * 1024), b"pyproject.toml", 4096)
    tracemalloc.start()
    with pytest.raises(FabRefusedError, match="not a readable Flower App"):
        check_fab(lying)  # reading stops at the declared size: the CRC does not match
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * MAX_MEMBER_BYTES + len(lying)


def test_a_fab_larger_than_any_configuration_is_refused_as_received():
    with pytest.raises(FabRefusedError, match=r"has \d+ bytes, above this site's limit"):
        check_fab(fab({"pyproject.toml": config_only_pyproject(),
                       ".info/CONTENT": bytes(range(256)).hex() * 10000}))


def test_members_that_expand_past_the_limit_together_are_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive, pytest.warns(
        UserWarning, match="Duplicate name"
    ):
        for copy in range(75):  # each copy within the limits, all of them not
            archive.writestr("pyproject.toml", config_only_pyproject() + f"# {copy}\n" +
                             "".join(f"# {i % 1000}\n" for i in range(10000)))
    with pytest.raises(FabRefusedError, match=r"expands to \d+ bytes, above this site's "
                                              r"limit of 4194304; nothing was decompressed"):
        check_fab(buffer.getvalue())


def test_pyproject_declares_the_app_the_package_ships():
    app = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert app["publisher"] == PUBLISHER
    assert app["components"] == COMPONENTS
    assert app["config"] == app_config()


def test_a_configuration_only_fab_is_accepted():
    check_fab(fab({"pyproject.toml": config_only_pyproject(), ".info/CONTENT": "x"}))


@pytest.mark.parametrize("files,match", [
    ({"pyproject.toml": config_only_pyproject(), "fedpca/flower/site/site_client.py": "leak()"},
     r"carries 1 files besides its configuration \(fedpca/flower/site/site_client.py\)"),
    ({"pyproject.toml": config_only_pyproject(), "evil.so": ""}, r"\(evil.so\)"),
    ({"pyproject.toml": config_only_pyproject().replace(
        "fedpca.flower.app:client_app", "evil.app:client_app")}, "clientapp='evil.app:client_app'"),
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


def test_site_init_then_ledger_as_table_and_json(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "records.npy", np.eye(4))
    assert cli_main(["site", "init", "--policy", str(tmp_path / "site.toml"), "--name",
                     "hospital-c", "--data", "records.npy"]) == 0
    policy = load_site_policy(tmp_path / "site.toml")
    ledger = SiteLedger(policy.ledger, policy.population, policy.epsilon, policy.delta)
    ledger.for_run(RunCharge("run-1", "dpdis-pca", "ab" * 32, 1)).charge(
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
    # the runs of each allowed algorithm the remaining lifetime still allows, as site check
    # counts them, in the table and the JSON
    assert set(summary["runs_left"]) == set(policy.algorithms) == set(summary["runs_now"])
    assert all(isinstance(n, int) and n >= 1 for n in summary["runs_left"].values())
    for algorithm, runs in summary["runs_left"].items():
        now = summary["runs_now"][algorithm]
        assert 0 <= now <= runs
        assert f"runs left, {algorithm}: {runs} ({now} now, within the spending windows)" in table


def test_site_init_writes_the_data_path_the_operator_typed_relative_to_the_policy(
        tmp_path, monkeypatch):
    # typed from the current folder: trial/blank.toml and data/blank.npy; the policy reads
    # paths relative to its own folder, so it must name ../data/blank.npy
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trial").mkdir()
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "blank.npy", np.eye(4))
    assert cli_main(["site", "init", "--policy", "trial/blank.toml", "--name", "trial",
                     "--data", "data/blank.npy"]) == 0
    assert load_site_policy(tmp_path / "trial" / "blank.toml").data == (
        tmp_path / "data" / "blank.npy").resolve()
    assert 'data = "../data/blank.npy"' in (tmp_path / "trial" / "blank.toml").read_text()
    absolute = str(tmp_path / "data" / "blank.npy")
    assert cli_main(["site", "init", "--policy", "trial/abs.toml", "--name", "trial",
                     "--data", absolute, "--ledger", "abs.sqlite"]) == 0
    assert load_site_policy(tmp_path / "trial" / "abs.toml").data == Path(absolute).resolve()
    # every path typed is read from the current folder, the ledger's too
    assert load_site_policy(tmp_path / "trial" / "abs.toml").ledger == tmp_path / "abs.sqlite"
    assert (tmp_path / "abs.sqlite").is_file()
    assert load_site_policy(tmp_path / "trial" / "blank.toml").ledger == (
        tmp_path / "trial" / "ledger.sqlite")


def test_site_commands_report_a_missing_policy(tmp_path, capsys):
    assert cli_main(["site", "ledger", "--policy", str(tmp_path / "none.toml")]) == 2
    assert "does not exist; write one with fedpca site init" in capsys.readouterr().err


def test_site_ledger_and_check_read_and_create_nothing(tmp_path, capsys):
    np.save(tmp_path / "records.npy", np.eye(4))
    policy = load_site_policy(write_policy_template(tmp_path / "site.toml", "clinic",
                                                    "records.npy"))
    policy.open_ledger().for_run(RunCharge("run-1", "dpdis-pca", "ab" * 32, 1)).charge(
        Release("dpdis-pca", 1.0, 50.0, (4, 4)))
    before = {path: path.read_bytes() for path in tmp_path.iterdir()}
    for command in (["ledger"], ["ledger", "--json"], ["check"]):
        assert cli_main(["site", *command, "--policy", str(policy.path)]) == 0
    assert {path: path.read_bytes() for path in tmp_path.iterdir()} == before
    # a deleted ledger: refused with what to do, and not created again by reading it
    policy.ledger.unlink()
    before = listing(tmp_path)
    assert cli_main(["site", "ledger", "--policy", str(policy.path)]) == 2
    assert re.search(r"ledger .*ledger.sqlite named by .*site.toml does not exist, though",
                     capsys.readouterr().err)
    assert cli_main(["site", "check", "--policy", str(policy.path)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"PROBLEM: the ledger .*ledger.sqlite named by .* does not exist", out)
    assert "n=4" in out and "runs left" not in out
    assert listing(tmp_path) == before


def test_the_supernode_hands_flower_no_fab_the_site_refuses(monkeypatch, caplog):
    parsed = []

    def flower_parser(content, run):
        parsed.append(run)
        return {"k": 2}

    checked = checked_fab_config(flower_parser)
    assert checked(fab({"pyproject.toml": config_only_pyproject()}), "run-1") == {"k": 2}
    monkeypatch.setattr(zipfile, "_get_decompressor", None)  # any decompression would fail
    assert checked(inflating_fab(20 * 1024 * 1024), "run-2") == {}
    assert parsed == ["run-1"]  # Flower's parser never saw the 20 MB pyproject
    assert "SuperNode: refused: the App (FAB) member pyproject.toml expands to" in caplog.text


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS as Linux reports it")
def test_the_memory_limit_holds_in_every_process_a_site_process_starts():
    child = (
        "import subprocess, sys\n"
        "from fedpca.deployment.memory_limit import apply_memory_limit\n"
        "apply_memory_limit(600)\n"
        "grandchild = 'print(open(\"/proc/self/limits\").read()); bytearray(2 << 30)'\n"
        "out = subprocess.run([sys.executable, '-c', grandchild], capture_output=True, text=True)\n"
        "print(out.stdout, out.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         check=True).stdout
    assert re.search(rf"Max address space\s+{600 * 1024 * 1024}\s+{600 * 1024 * 1024}", out)
    assert "MemoryError" in out  # 2 GiB fails in that process, not on the host


def test_site_supernode_sets_the_node_config_itself(tmp_path, capsys):
    np.save(tmp_path / "records.npy", np.eye(4))
    cli_main(["site", "init", "--policy", str(tmp_path / "site.toml"), "--name", "h",
              "--data", "records.npy"])
    assert load_site_policy(tmp_path / "site.toml").memory_mib == 4096
    assert cli_main(["site", "supernode", "--policy", str(tmp_path / "site.toml"), "--",
                     "--insecure", "--node-config", "policy='other.toml'"]) == 2
    assert "sets --node-config itself" in capsys.readouterr().err


def test_site_files_are_the_owners_alone(tmp_path):
    # init writes the policy 0600 and the ledger is created 0600 in a 0700 folder
    np.save(tmp_path / "records.npy", np.eye(4))
    policy = load_site_policy(write_policy_template(tmp_path / "site.toml", "clinic",
                                                    "records.npy", ledger="private/ledger.sqlite"))
    policy.open_ledger()
    assert stat.S_IMODE((tmp_path / "site.toml").stat().st_mode) == 0o600
    assert stat.S_IMODE(policy.ledger.stat().st_mode) == 0o600
    assert stat.S_IMODE(policy.witness().path.stat().st_mode) == 0o600
    assert stat.S_IMODE(policy.ledger.parent.stat().st_mode) & 0o077 == 0
    # a policy others may change, a ledger others may read: refused, saying how to fix it
    for path, mode, what in ((tmp_path / "site.toml", 0o666, "site policy"),
                             (policy.ledger, 0o644, "ledger")):
        path.chmod(mode)
        with pytest.raises(ConfigurationError, match=f"{what} .* has mode 0{mode:o}: group or "
                                                     "others may .*chmod 600"):
            load_site_policy(tmp_path / "site.toml")
        path.chmod(0o600)
    (tmp_path / "site.toml").chmod(0o644)  # others may read a policy, not change it
    assert load_site_policy(tmp_path / "site.toml").name == "clinic"


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("name,content,problem", [
    ("missing.csv", None, r"data file .*missing.csv does not exist"),
    ("records.txt", b"0.1,0.2\n", r"has suffix '.txt'; give a .csv or .csv.gz or .parquet"),
    ("records.parquet", b"PAR1 not read", r"records.parquet cannot be read: it is not a Parquet"),
    ("records.csv", b"age,weight,name\n31,70.5,Smith\n", r"column 3 holds text, not numbers"),
    ("records.csv", b"0.1,0.2\n0.3,nan\n0.2,inf\n", r"2 NaN/inf entries in 2 rows"),
])
def test_site_init_and_check_catch_a_bad_data_file_before_any_run(
        tmp_path, capsys, monkeypatch, name, content, problem):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / name).write_bytes(content)
    # init writes the policy and the ledger, then reports the problem and exits non-zero
    assert cli_main(["site", "init", "--policy", "site.toml", "--name", "h", "--data",
                     name]) == 1
    out = capsys.readouterr().out
    assert "wrote" in out and re.search(f"PROBLEM: .*{problem}", out)
    assert "1 problem(s): a run would fail at this site" in out
    before = listing(tmp_path)
    assert cli_main(["site", "check", "--policy", "site.toml"]) == 1
    out = capsys.readouterr().out
    assert re.search(f"PROBLEM: .*{problem}", out)
    assert "Smith" not in out and "70.5" not in out  # no record's value, ever
    assert listing(tmp_path) == before  # the check created nothing


def test_site_check_reports_a_good_site_and_the_runs_left(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    records = np.full((40, 3), 0.1)
    records[:10] = 1.0  # norm sqrt(3) > 1: a quarter of the rows is clipped
    np.savetxt(tmp_path / "records.csv", records, delimiter=",", header="a,b,c", comments="")
    assert cli_main(["site", "init", "--policy", "site.toml", "--name", "h", "--data",
                     "records.csv"]) == 0
    policy = load_site_policy("site.toml")
    ledger = policy.open_ledger()
    fresh = {name: ledger.runs_remaining(policy.planned_run(name)) for name in policy.algorithms}
    ledger.for_run(RunCharge("run-1", "dpdis-pca", "ab" * 32, 1)).charge(
        policy.planned_run("dpdis-pca")[0])
    capsys.readouterr()
    before = listing(tmp_path)
    assert cli_main(["site", "check", "--policy", "site.toml"]) == 0
    out = capsys.readouterr().out
    assert listing(tmp_path) == before
    assert f"data         {tmp_path / 'records.csv'} (exists)" in out
    assert f"ledger       {tmp_path / 'ledger.sqlite'} (exists)" in out
    assert "n=40 (sent to the coordinator with every answer), d=3" in out
    assert "1e-07 <= 0.1/n: ok" in out and "clips 25.0% of the rows" in out
    assert "spent" in out and "in 1 releases" in out and "daily " in out and "weekly " in out
    left = ledger.runs_remaining(policy.planned_run("dpdis-pca"))
    assert 0 < left == fresh["dpdis-pca"] - 1  # one single-release run was spent
    assert f"dpdis-pca: {left} full runs of 1 releases" in out
    assert f"dps-pca: {ledger.runs_remaining(policy.planned_run('dps-pca'))} full runs of " \
           f"11 releases" in out and "ldp-pca: " in out
    assert out.rstrip().endswith("ok: this site is ready for a run")


def test_site_check_refuses_a_delta_not_well_below_one_over_n(tmp_path, capsys):
    np.save(tmp_path / "records.npy", np.full((20, 2), 0.1))
    policy = write_policy_template(tmp_path / "site.toml", "clinic", "records.npy", delta=0.01)
    load_site_policy(policy).open_ledger()
    assert cli_main(["site", "check", "--policy", str(policy)]) == 1
    assert re.search(r"PROBLEM: .*delta=0.01 is not well below 1/n", capsys.readouterr().out)


@pytest.mark.parametrize("insecure, certificates", [(True, None), (False, "/etc/site/ca.pem")])
@pytest.mark.parametrize("task_type", ["flwr-clientapp", "flwr-serverapp"])
def test_a_forked_task_gets_the_arguments_flowers_executor_would_give(
    monkeypatch, insecure, certificates, task_type
):
    from flwr.supercore.superexec.executor import subprocess_executor
    from flwr.supercore.superexec.executor.types import ExecutionSpec

    from fedpca.deployment.task_forks import task_arguments

    spec = ExecutionSpec(task_type=task_type, runtime_api_address="127.0.0.1:9094",
                         token="t0ken", insecure=insecure, root_certificates_path=certificates,
                         runtime_dependency_install=False, parent_pid=4242,
                         suppress_output=False, task_id=7)
    started = []
    monkeypatch.setattr(subprocess_executor.subprocess, "Popen", started.append)
    subprocess_executor.SubprocessExecutor().launch(spec)
    assert started[0][1:] == task_arguments(spec)


def test_the_fork_switch_takes_on_or_off_only(monkeypatch):
    from fedpca.deployment.site_runtime import FORKS_ENV, forked_tasks

    monkeypatch.delenv(FORKS_ENV, raising=False)
    assert forked_tasks()
    monkeypatch.setenv(FORKS_ENV, "off")
    assert not forked_tasks()
    monkeypatch.setenv(FORKS_ENV, "no")
    with pytest.raises(ConfigurationError, match="must be 'on'"):
        forked_tasks()


def preloaded(limit_mib: int, steps: dict[str, tuple[str, ...]]) -> list[list[str]]:
    """For each preload module of ``steps`` in turn, imported in one process limited to
    ``limit_mib`` MiB of address space (0: none) as a site's fork server imports them:
    whether each of its modules is loaded once it has been imported."""
    script = ("import importlib, resource, sys\n"
              f"limit = {limit_mib} * 2**20 or resource.RLIM_INFINITY\n"
              "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
              f"for preload, modules in {list(steps.items())!r}:\n"
              "    importlib.import_module(preload)\n"
              "    print(*[name in sys.modules for name in modules])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split() for line in done.stdout.splitlines()]


@pytest.mark.parametrize("limit_mib, extras", [(512, False), (0, True)])
def test_the_fork_servers_preload_fits_a_sites_smallest_memory_limit(limit_mib, extras):
    """Under the smallest memory limit a policy allows, the fork server loads what every
    task imports and leaves the rest to the tasks; without a limit it loads the rest too,
    and a table site's the table reader."""
    from fedpca.deployment.clientapp_preload import room_for_extras
    from fedpca.deployment.site_runtime import CLIENTAPP_PRELOAD, TABLE_PRELOAD

    assert room_for_extras(resource.RLIM_INFINITY) and not room_for_extras(512 * 2**20)
    every_site, table_site = preloaded(limit_mib, {
        CLIENTAPP_PRELOAD: ("fedpca.flower.app", "dp_accounting.pld",
                            "fedpca.deployment.task_forks", "pyarrow"),
        # what reading a CSV or Parquet file imports on first use, its first conversion's too
        TABLE_PRELOAD: ("pyarrow.csv", "pyarrow.parquet", "pyarrow.dataset", "pyarrow.compute"),
    })
    # the module a forked task starts in is loaded once, not by every task; a site whose
    # records are not a table never loads pyarrow
    assert every_site == ["True", str(extras), "True", "False"]
    assert table_site == [str(extras)] * 4


def test_only_a_table_sites_fork_server_loads_the_table_reader(tmp_path):
    from fedpca.deployment.site_runtime import (CLIENTAPP_PRELOAD, TABLE_PRELOAD,
                                                clientapp_preloads)

    for data in ("records.npy", "records.csv", "records.csv.gz", "records.parquet"):
        folder = tmp_path / data.replace(".", "-")
        folder.mkdir()
        policy = load_site_policy(write_policy_template(folder / "policy.toml", "0", data))
        table = data != "records.npy"
        assert clientapp_preloads(policy) == (
            (CLIENTAPP_PRELOAD, TABLE_PRELOAD) if table else (CLIENTAPP_PRELOAD,))


def test_a_sites_processes_send_flower_no_telemetry_whatever_the_environment_says(
        monkeypatch):
    from flwr.supercore import telemetry

    from fedpca.deployment.site_runtime import TELEMETRY_ENV, no_flower_telemetry

    monkeypatch.setenv(TELEMETRY_ENV, "1")
    monkeypatch.setattr(telemetry, "FLWR_TELEMETRY_ENABLED", "1")  # imported with it on
    no_flower_telemetry()
    assert telemetry.FLWR_TELEMETRY_ENABLED == "0"
    opened = []
    monkeypatch.setattr(telemetry.urllib.request, "urlopen", lambda *a, **k: opened.append(a))
    event = telemetry.event(telemetry.EventType.FLWR_CLIENTAPP_RUN_ENTER)
    assert event.result(timeout=30) == "disabled" and opened == []  # nothing sent
    # and the processes it starts (the fork server, fresh ClientApp processes) read it
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['"
                            f"{TELEMETRY_ENV}'])"], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "0"

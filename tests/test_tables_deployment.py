"""Clinical tables at three real sites on loopback, end to end (the session's deployment,
``tests/loopback.py``: TLS, SuperNode authentication, ``--isolation process`` with each
site's ``fedpca site superexec``).

The hospitals export one table each, as hospitals do: a CSV with a patient-id column and
empty cells for blanks, an R-style CSV with every value quoted and ``NA`` for blanks, and a
Parquet file. Each site holds it under the consortium's contract (whose ``id`` column is
never sent) and sets the secure-sum keys of ``deploy/README.md``'s example, read from the
README itself. The coordinator runs the README's centred, standardised secure DPdisPCA run
as written (its run_config read from the README, paths and the contract's hash put in)
and, at the same time, a centred secure DPS-PCA run. Both complete; each site's ledger shows
each run complete with exactly the releases its plan counted; each site writes its own
records' scores keyed by its patient ids (``fedpca site project``).
"""

import csv
import json
import re
import shlex
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from liver_contract import CONTRACT, liver_table
from loopback import beside, joined

from fedpca.cli import main as cli_main
from fedpca.data.contract import load_contract
from fedpca.deployment.local import Site
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.secure.roster import write_roster, write_signing_key

pytestmark = pytest.mark.federation

README = Path(__file__).resolve().parents[1] / "deploy" / "README.md"
SITES = ("hospital-a", "hospital-b", "hospital-c")
ROWS = 160
#: DPS-PCA rounds each site's policy calibrates for (kept short: every round of a secure
#: sum is four message exchanges on loopback).
DPS_ROUNDS = 2
#: The contract of the tests' liver table, with the hospitals' patient-id column.
ID_CONTRACT = CONTRACT.replace('name = "liver-v1"\n', 'name = "liver-v1"\n\n[[column]]\n'
                               'name = "patient"\nkind = "id"\n', 1)
RUN_TIMEOUT = 600


def readme_block(marker: str) -> str:
    """The code block after ``<!-- secure-example: MARKER -->`` in deploy/README.md."""
    text = README.read_text()
    after = text[text.index(f"<!-- secure-example: {marker} -->"):]
    return after.split("```", 2)[1].split("\n", 1)[1]


def readme_run_config(contract_hash: str, contract_file: Path, output: Path) -> dict:
    """The README's secure run_config as written, with this test's hash and paths."""
    command = readme_block("run").replace("\\\n", " ")
    words = shlex.split(command)
    pairs = shlex.split(words[words.index("--run-config") + 1])
    config = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        config[key] = (value.strip('"') if value.startswith('"')
                       else int(value) if value.isdigit() else value)
    assert config.pop("output").startswith("/var/lib/fedpca/")
    assert config["contract"] == "HASH" and config["contract-file"].startswith("/etc/fedpca/")
    return {**config, "contract": contract_hash, "contract-file": str(contract_file),
            "output": str(output)}


def with_readme_keys(policy: Path, roster: Path, signing_key: Path, vouched: list[str]) -> None:
    """Set in ``policy`` every key of the README's policy snippet (its paths: this site's)."""
    text = policy.read_text()
    table = None
    for line in readme_block("policy").splitlines():
        header = re.match(r"\[(.+)\]", line)
        if header:
            table = header.group(1)
            continue
        setting = re.match(r"([\w-]+) = (\S+)", line)
        if not setting:
            continue
        key, value = setting.groups()
        value = {"roster": f'"{roster}"', "signing-key": f'"{signing_key}"',
                 "vouched": json.dumps(vouched)}.get(key, value)
        section = text.index(f"[{table}]")
        end = text.find("\n[", section + 1)
        end = len(text) if end < 0 else end
        body = text[section:end]
        line_re = re.compile(rf"^#? ?{re.escape(key)} = .*$", re.M)
        body = (line_re.sub(f"{key} = {value}", body, count=1) if line_re.search(body)
                else body.replace(f"[{table}]", f"[{table}]\n{key} = {value}", 1))
        text = text[:section] + body + text[end:]
    policy.write_text(text)


def exports(folder: Path) -> list[Path]:
    """The three hospitals' exports of the liver table, each with its patients' ids."""
    tables = []
    for i in range(3):
        rows = list(csv.reader(liver_table(ROWS, seed=i).splitlines()))
        header, body = ["patient", *rows[0]], [[f"P{i}-{r:04d}", *row]
                                               for r, row in enumerate(rows[1:])]
        tables.append((header, body))
    a = folder / "hospital-a.csv"  # a plain CSV: an id column, empty cells for blanks
    with a.open("w", newline="") as handle:
        csv.writer(handle).writerows([tables[0][0], *tables[0][1]])
    b = folder / "hospital-b.csv"  # R's write.csv: every value quoted, NA for a blank
    with b.open("w", newline="") as handle:
        csv.writer(handle, quoting=csv.QUOTE_ALL).writerows(
            [tables[1][0], *[[cell or "NA" for cell in row] for row in tables[1][1]]])
    c = folder / "hospital-c.parquet"
    header, body = tables[2]
    columns = {name: [row[j] or None for row in body] for j, name in enumerate(header)}
    typed = {name: pa.array(values) if name in ("patient", "sex") else
             pa.array([None if v is None else float(v) for v in values])
             for name, values in columns.items()}
    pq.write_table(pa.table(typed), c)
    return [a, b, c]


@pytest.fixture(scope="module")
def hospitals(loopback, tmp_path_factory):
    """The three sites' exports, policies (the README's secure keys), the contract and the
    running deployment (the sites are ``liver-a``... there: the secure deployment's sites,
    which join the same SuperLink before, are named ``hospital-a``...)."""
    work = tmp_path_factory.mktemp("hospitals")
    contract = work / "contract.toml"
    contract.write_text(ID_CONTRACT)
    keys = {name: write_signing_key(work / "secagg", name, "liver-study") for name in SITES}
    roster = write_roster(work / "roster.toml", "liver-study",
                          {name: entry for name, (_, entry) in keys.items()})
    policies = []
    for name, data in zip(SITES, exports(work)):
        policy = write_policy_template(work / name / "site.toml", name, str(data),
                                       contract=str(contract), daily_epsilon=4.0,
                                       weekly_epsilon=4.0)
        with_readme_keys(policy, roster, keys[name][0],
                         [entry.fingerprint for other, (_, entry) in keys.items() if other != name])
        policy.write_text(policy.read_text().replace("rounds = 10", f"rounds = {DPS_ROUNDS}"))
        load_site_policy(policy).open_ledger()  # the operator's edits, recorded
        policies.append(policy)
    sites = [Site(f"liver-{name[-1]}", Path(load_site_policy(p).data), p)
             for name, p in zip(SITES, policies)]
    with joined(loopback, sites, work) as deployment:
        yield work, contract, policies, deployment


@pytest.fixture(scope="module")
def runs(hospitals):
    """The README's secure DPdisPCA run and a centred secure DPS-PCA run, at the same time
    (:func:`loopback.beside`; one after the other they took 65 s on the loaded 2-core
    machine, the DPS-PCA run about a third of it)."""
    work, contract, policies, deployment = hospitals
    hash_ = load_contract(contract).hash
    readme = readme_run_config(hash_, contract, work / "secure.json")
    dps_config = {**{k: readme[k] for k in ("contract", "contract-file", "dataset",
                                            "min-sites", "k")},
                  "algorithm": "dps-pca", "centring": "centre", "s-hat": 8,
                  "rounds": DPS_ROUNDS, "output": str(work / "dps.json")}
    with beside(deployment, lambda: deployment.run(dps_config, timeout=RUN_TIMEOUT),
                RUN_TIMEOUT) as dps:
        dpdis = deployment.run(readme, timeout=RUN_TIMEOUT)
    assert dps.error is None, dps.error
    return {"dpdis": dpdis, "dps": dps.value}


def test_the_readme_examples_policy_and_run_config_are_what_the_sites_run(hospitals):
    _, _, policies, _ = hospitals
    policy = load_site_policy(policies[0])
    assert policy.secure_min_sites == 3 and policy.discrete and policy.worst_case_epsilon == 8


@pytest.mark.parametrize("name, releases", [("dpdis", 2), ("dps", DPS_ROUNDS + 2)])
def test_centred_secure_runs_complete_with_the_plans_releases_at_every_site(
        hospitals, runs, name, releases):
    _, _, policies, _ = hospitals
    for run in completed_at_every_site(runs[name], SITES, policies, releases):
        assert run["description"]["centring"] in ("standardize", "centre")


def completed_at_every_site(result, sites, policies, releases: int) -> list[dict]:
    """Every site of ``sites`` (their ``policies``) answered every round of the secure run
    ``result`` (3 sites at least in each sum) and its ledger records the run complete with
    ``releases`` releases, as planned; those ledger records."""
    assert all(answered == list(sites) for answered in result.sites_answered)
    assert {g["secure_min_sites"] for g in result.config["site_guarantees"].values()} == {3}
    run_id, records = str(result.config["run_id"]), []
    for policy in policies:
        ledger = load_site_policy(policy).open_ledger()
        records.append(ledger.run_records()[run_id])
        assert ledger.run_releases(run_id) == releases == records[-1]["planned"]
        assert records[-1]["status"] == "complete", records[-1]
    return records


def test_each_site_writes_its_own_records_scores_keyed_by_its_patient_ids(
        hospitals, runs, capsys):
    work, _, policies, _ = hospitals
    for i, policy in enumerate(policies):
        out = work / f"scores-{i}.csv"
        assert cli_main(["site", "project", "--policy", str(policy), "--out", str(out)]) == 0
        with out.open() as handle:
            rows = list(csv.reader(handle))
        assert rows[0][0] == "patient" and rows[0][1:] == ["PC1", "PC2"]
        assert [row[0] for row in rows[1:]] == [f"P{i}-{r:04d}" for r in range(ROWS)]
        assert np.isfinite(np.array([row[1:] for row in rows[1:]], dtype=float)).all()

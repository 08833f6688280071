"""The released result at a site: a real site takes it from the coordinator as hostile input
(refused when malformed, with no ledger change, nothing stored), stores a good one beside its
policy, and ``fedpca site project`` writes its records' scores, equal to the local projection
``(preprocess(X) - mean) / scale @ V``, refusing a result it cannot use. (A whole run that
delivers the result: tests/test_readiness_round.py, real sites; tests/test_flower_simulation.py,
simulated ones.)"""

import csv
import json
import logging

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from local_grid import RUN_ID, run_identity  # noqa: F401 (a fixture)

from fedpca.algorithms.dps_pca import DPSPCAPolicy
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.flower.app import client_app
from fedpca.cli import main as cli_main
from fedpca.flower.site.site_client import client_factory
from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.flower.site.clientapp import site_client_app
from fedpca.flower.result_wire import RESULT_ARRAYS, read_result_message, result_message
from fedpca.data.contract import load_contract
from fedpca.data.tables import read_table
from fedpca.errors import InvalidDataError, InvalidRequestError
from fedpca.site.ledger_lifecycle import create_site_ledger
from fedpca.site.ledger import RunCharge
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.site.results import ReleasedResult, load_result, results_folder, store_result
from liver_contract import CONTRACT, WITH_ID, liver_table

pytestmark = pytest.mark.usefixtures("run_identity")

RNG = np.random.default_rng(4)
#: The contract's 8 output columns; the plain site's records have D columns too.
D, K = 8, 2
BASIS = np.linalg.qr(RNG.standard_normal((D, K)))[0]
MEAN, SCALE = RNG.uniform(0, 1, D), RNG.uniform(0.5, 2, D)


@pytest.fixture(scope="module")
def policy_text(tmp_path_factory):
    """A policy as ``fedpca site init`` writes it (calibrated once), for ``data.npy``."""
    folder = tmp_path_factory.mktemp("template")
    return write_policy_template(folder / "site.toml", "clinic", "data.npy").read_text()


def plain_site(folder, policy_text):
    """A site whose data file is a numeric matrix, whose ledger holds one release of run
    ``RUN_ID``."""
    np.save(folder / "data.npy", RNG.uniform(-1, 1, (30, D)))
    return released_in_run(write_policy(folder / "site.toml", policy_text))


def contract_site(folder, policy_text, contract=CONTRACT, table=None):
    """A site whose policy names the liver contract (or ``contract``) and whose data file is
    its table (or ``table``)."""
    (folder / "table.csv").write_text(table or liver_table(40))
    (folder / "contract.toml").write_text(contract)
    text = policy_text.replace('data = "data.npy"',
                               'data = "table.csv"\ncontract = "contract.toml"')
    return released_in_run(write_policy(folder / "site.toml", text))


def write_policy(path, text):
    """The policy, with its ledger and identity file as ``fedpca site init`` creates them."""
    path.write_text(text)
    path.chmod(0o600)
    create_site_ledger(load_site_policy(path).witness())
    return load_site_policy(path)


def released_in_run(policy, run_id=RUN_ID):
    """``policy``, its ledger charged one release of run ``run_id``."""
    run = policy.open_ledger().for_run(RunCharge(str(run_id), "dps-pca", "f" * 64, 3))
    run.charge(policy.planned_run("dps-pca")[0])
    return policy


def project(policy, *extra) -> int:
    return cli_main(["site", "project", "--policy", str(policy.path), *map(str, extra)])


def read_scores(path) -> tuple[list[str], np.ndarray]:
    with open(path, newline="") as handle:
        header, *rows = list(csv.reader(handle))
    return header, np.array(rows, dtype=np.float64)


def test_site_project_writes_the_local_projection_of_the_contracts_rows(tmp_path, policy_text):
    policy = contract_site(tmp_path, policy_text)
    contract = load_contract(tmp_path / "contract.toml")
    store_result(policy.path, ReleasedResult(
        str(RUN_ID), "dpdis-pca", BASIS, MEAN, SCALE, contract.output_columns, contract.hash,
    ), "clinic")
    assert project(policy, "--out", tmp_path / "scores.csv") == 0  # the latest stored result
    header, scores = read_scores(tmp_path / "scores.csv")
    rows = contract.preprocess(read_table(tmp_path / "table.csv")).matrix
    assert header == ["PC1", "PC2"] and scores.shape == (40, K)
    np.testing.assert_allclose(scores, (rows - MEAN) / SCALE @ BASIS, rtol=0, atol=1e-12)
    assert (tmp_path / "scores.csv").stat().st_mode & 0o777 == 0o600


def test_site_project_reads_a_coordinators_run_record_for_a_plain_site(tmp_path, policy_text):
    policy = plain_site(tmp_path, policy_text)
    record = tmp_path / "run.json"  # as fedpca simulate --output writes it: no mean, no scale
    record.write_text(json.dumps({"status": "complete", "algorithm": "dps-pca",
                                  "basis": BASIS.tolist(), "config": {"contract": ""}}))
    assert project(policy, "--result", record, "--out", tmp_path / "scores.csv") == 0
    _, scores = read_scores(tmp_path / "scores.csv")
    np.testing.assert_allclose(scores, np.load(tmp_path / "data.npy") @ BASIS, rtol=0, atol=1e-12)


@pytest.mark.parametrize("result, error", [
    ({"algorithm": "dps-pca", "basis": BASIS.tolist(), "contract": "ab" * 32},
     "made under data contract 'abab"),
    ({"algorithm": "dps-pca", "basis": BASIS[:-1].tolist()}, "its basis has shape (7, 2)"),
    ({"status": "failed", "algorithm": "dps-pca"}, "is not a fedpca result"),
    ({"basis": "no"}, "is not a fedpca result"),
])
def test_site_project_refuses_a_result_it_cannot_use(tmp_path, policy_text, capsys, result,
                                                     error):
    policy = plain_site(tmp_path, policy_text)
    (tmp_path / "result.json").write_text(json.dumps(result))
    assert project(policy, "--result", tmp_path / "result.json", "--out", "x.csv") == 2
    assert error in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_site_project_without_a_stored_result_says_where_it_looked(tmp_path, policy_text, capsys):
    policy = plain_site(tmp_path, policy_text)
    assert project(policy, "--out", tmp_path / "x.csv") == 2
    assert f"no stored result in {results_folder(policy.path)}" in capsys.readouterr().err


# --- the result message at a real site, from the Flower App's own ClientApp ---------------

def send(policy, content: RecordDict) -> Message:
    """``content`` as the run's result message to the real site ``policy``."""
    context = Context(run_id=RUN_ID, node_id=1, node_config={"policy": str(policy.path)},
                      state=RecordDict(), run_config={"algorithm": "dps-pca"})
    message = Message(content=content, dst_node_id=1, message_type=MessageType.QUERY)
    return client_app(message, context)


def released(basis=BASIS, mean=None, scale=None, run_id=str(RUN_ID),
             floored=None) -> RecordDict:
    return result_message(ReleasedResult(run_id, "dps-pca", basis, mean, scale,
                                         floored_scales=floored))


def with_config(key: str, value: object) -> RecordDict:
    content = released(mean=MEAN, scale=SCALE)
    content["result"] = ConfigRecord({**content["result"], key: value})
    return content


def with_array(name: str, array: Array) -> RecordDict:
    content = released()
    content[RESULT_ARRAYS] = ArrayRecord({**content[RESULT_ARRAYS], name: array})
    return content


NAN = BASIS.copy()
NAN[0, 0] = np.nan
HOSTILE = {
    "wrong shape": (released(BASIS[:-1]), "its basis is float64 of shape (7, 2)"),
    "more columns than d": (released(np.eye(D, D + 1)), f"of shape ({D}, {D + 1})"),
    "NaN": (released(NAN), "its basis holds values that are not finite"),
    "not orthonormal": (released(2 * BASIS), "columns are not orthonormal"),
    "scale not > 0": (released(scale=np.zeros(D)), "its scale holds values that are not > 0"),
    "mean of another width": (released(mean=np.zeros(D + 1)), "its mean is float64 of shape (9,)"),
    "float32": (released(BASIS.astype(np.float32)), "its basis is float32"),
    "more bytes than its shape": (
        with_array("mean", Array(dtype="float64", shape=(D,), stype="numpy.ndarray",
                                 data=bytes(10**6))),
        "its mean carries 1000000 bytes"),
    "another array": (with_array("rows", Array(np.zeros(D))), "unknown or missing keys"),
    "another record": (RecordDict({**released(), "extra": ConfigRecord({})}), "exactly a"),
    "another run": (released(run_id="other"), "it names run 'other' and came in run '5'"),
    "a floored scale twice": (released(mean=MEAN, scale=SCALE, floored=(1, 1)),
                              "its floored scales must be distinct column indices below 8"),
    "a floored scale past d": (released(mean=MEAN, scale=SCALE, floored=(D,)),
                               "its floored scales must be distinct column indices"),
    "floored scales without a scale": (released(floored=(0,)), "of a result with a scale"),
    "floored scales not a list": (with_config("floored-scales", "all"),
                                  "its floored-scales must be a list of at most 8"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_real_site_refuses_a_hostile_result_and_spends_nothing(tmp_path, policy_text, case):
    policy = plain_site(tmp_path, policy_text)
    before = policy.open_ledger().rows()
    content, error = HOSTILE[case]
    reply = send(policy, content)
    assert reply.has_error() and error in reply.error.reason
    assert "refused the released result" in reply.error.reason
    assert policy.open_ledger().rows() == before
    assert not results_folder(policy.path).exists()


def test_a_result_larger_than_the_sites_answer_limit_is_refused_before_it_is_read():
    with pytest.raises(InvalidRequestError, match=r"basis of shape \(8, 2\) \(0.0001221 MB\) "
                                                  r"is above this site's limit of 0.0001 MB"):
        read_result_message(released(), D, SiteLimits(max_answer_mb=1e-4))


def test_a_real_site_stores_a_good_result_and_answers_with_its_name_only(tmp_path, policy_text):
    policy = plain_site(tmp_path, policy_text)
    before = policy.open_ledger().rows()
    reply = send(policy, released(mean=MEAN, scale=SCALE))
    assert not reply.has_error()
    assert dict(reply.content.config_records["result"]) == {"site": "clinic"}
    assert not reply.content.array_records and not reply.content.metric_records
    assert policy.open_ledger().rows() == before
    (path,) = results_folder(policy.path).iterdir()
    assert path.stat().st_mode & 0o777 == 0o600
    assert results_folder(policy.path).stat().st_mode & 0o777 == 0o700
    stored = json.loads(path.read_text())
    assert (stored["run_id"], stored["site"], stored["k"]) == (str(RUN_ID), "clinic", K)
    np.testing.assert_array_equal(stored["scale"], SCALE)


def test_a_contract_site_refuses_a_result_under_another_contract(tmp_path, policy_text):
    policy = contract_site(tmp_path, policy_text)
    reply = send(policy, released())  # contract "" to a site that holds one
    assert reply.has_error() and "refused: the run names data contract 'none'" in (
        reply.error.reason)
    assert not results_folder(policy.path).exists()


def test_a_simulated_site_checks_the_result_against_its_own_width():
    records = RNG.uniform(-0.2, 0.2, (30, D))
    app = site_client_app(lambda c: client_factory(DPSPCASite)(
        c, records, DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=2), "3"))
    context = Context(run_id=RUN_ID, node_id=1, node_config={}, state=RecordDict(),
                      run_config={})

    def taken(content: RecordDict) -> Message:
        return app(Message(content=content, dst_node_id=1, message_type=MessageType.QUERY),
                   context)

    assert dict(taken(released()).content.config_records["result"]) == {"site": "3"}
    reply = taken(released(NAN))
    assert reply.has_error() and "its basis holds values that are not finite" in (
        reply.error.reason)


def test_a_real_site_refuses_the_result_of_a_run_it_released_nothing_in(tmp_path, policy_text):
    np.save(tmp_path / "data.npy", RNG.uniform(-1, 1, (30, D)))
    policy = released_in_run(write_policy(tmp_path / "site.toml", policy_text), run_id=4)
    reply = send(policy, released())
    assert reply.has_error() and "made no release in run '5'" in reply.error.reason
    assert not results_folder(policy.path).exists()


# --- scales at the noise floor, and ids (issue 32) -------------------------------------------

def test_a_site_stores_and_says_how_many_scales_sit_at_the_noise_floor(
        tmp_path, policy_text, caplog, capsys):
    policy = plain_site(tmp_path, policy_text)
    with caplog.at_level(logging.INFO, logger="fedpca.site.results"):
        reply = send(policy, released(mean=MEAN, scale=SCALE, floored=(0, 3, 5)))
    assert not reply.has_error()
    (path,) = results_folder(policy.path).iterdir()
    assert json.loads(path.read_text())["floored_scales"] == [0, 3, 5]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "standardising failed for 3 of 8 columns" in warned[0]
    assert "[data] moments-share" in warned[0] and "public scales in the contract" in warned[0]
    assert project(policy, "--out", tmp_path / "scores.csv") == 0
    out = capsys.readouterr().out
    assert "scales: 3 of 8 columns at the noise floor" in out and "warning:" in out


def test_a_coordinators_run_record_says_its_floored_scales_to_the_site(tmp_path):
    record = {"algorithm": "dpdis-pca", "basis": BASIS.tolist(), "mean": MEAN.tolist(),
              "scale": SCALE.tolist(), "privacy": {"standardize": True},
              "config": {"floored_variances": [2]}}
    (tmp_path / "run.json").write_text(json.dumps(record))
    loaded = load_result(tmp_path / "run.json")
    assert loaded.floored_scales == (2,)
    assert loaded.scaling_lines() == ["scales: 1 of 8 columns at the noise floor"]
    record["privacy"]["standardize"] = False
    (tmp_path / "run.json").write_text(json.dumps(record))
    assert load_result(tmp_path / "run.json").floored_scales is None


def with_ids(text: str, ids: list[str]) -> str:
    """The CSV ``text`` with a first column ``pid`` holding ``ids``."""
    header, *rows = text.splitlines()
    return "\n".join([f"pid,{header}", *(f"{i},{row}" for i, row in zip(ids, rows))]) + "\n"


def test_site_project_writes_each_records_id_first_and_logs_none(tmp_path, policy_text, caplog):
    ids = [f"{1000 + 7 * i}" for i in range(40)]
    policy = contract_site(tmp_path, policy_text, WITH_ID, with_ids(liver_table(40), ids))
    contract = load_contract(tmp_path / "contract.toml")
    assert contract.id_column == "pid"
    store_result(policy.path, ReleasedResult(
        str(RUN_ID), "dpdis-pca", BASIS, MEAN, SCALE, contract.output_columns, contract.hash,
    ), "clinic")
    with caplog.at_level(logging.DEBUG):
        assert project(policy, "--out", tmp_path / "scores.csv") == 0
    with open(tmp_path / "scores.csv", newline="") as handle:
        header, *rows = list(csv.reader(handle))
    assert header == ["pid", "PC1", "PC2"]
    assert [row[0] for row in rows] == ids  # whole numbers without ".0", in row order
    table = read_table(tmp_path / "table.csv")
    expected = (contract.preprocess(table).matrix - MEAN) / SCALE @ BASIS
    np.testing.assert_allclose(np.array([r[1:] for r in rows], float), expected, atol=1e-12)
    assert not any(i in record.getMessage() for record in caplog.records for i in ids[1:])


def test_three_exports_whose_id_columns_have_three_names_all_meet_the_contract(
        tmp_path, policy_text):
    """The id is a role: ``pid`` as the contract names it, ``patient_id`` named in the
    site's policy (``[data] id-column``), and no id column at all (scores by row number)."""
    ids = [f"{1000 + 7 * i}" for i in range(40)]
    exports = {"pid": with_ids(liver_table(40), ids),
               "patient_id": with_ids(liver_table(40), ids).replace("pid,", "patient_id,", 1),
               None: liver_table(40)}
    keys = {}
    for own, table in exports.items():
        folder = tmp_path / str(own)
        folder.mkdir()
        policy = contract_site(folder, policy_text, WITH_ID, table)
        if own == "patient_id":  # this site names its own id column
            text = policy.path.read_text().replace(
                "[data]\n", '[data]\nid-column = "patient_id"\n', 1)
            policy.path.write_text(text)
            policy = load_site_policy(policy.path)
            assert policy.id_column == "patient_id"
        contract = load_contract(folder / "contract.toml")
        assert contract.check(policy.read_table(contract)).ok, own
        store_result(policy.path, ReleasedResult(
            str(RUN_ID), "dpdis-pca", BASIS, MEAN, SCALE, contract.output_columns,
            contract.hash), "clinic")
        assert project(policy, "--out", folder / "scores.csv") == 0, own
        with open(folder / "scores.csv", newline="") as handle:
            header, *rows = list(csv.reader(handle))
        assert header == ["pid", "PC1", "PC2"]
        keys[own] = [row[0] for row in rows]
    assert keys["pid"] == keys["patient_id"] == ids
    assert keys[None] == [str(i) for i in range(1, 41)]  # no ids: the row numbers


def test_a_policys_id_column_that_the_table_lacks_is_refused(tmp_path, policy_text):
    policy = contract_site(tmp_path, policy_text, WITH_ID, liver_table(40))
    contract = load_contract(tmp_path / "contract.toml")
    with pytest.raises(InvalidDataError, match="the policy's \\[data\\] id-column 'mrn' is "
                                               "not a column of the table"):
        contract.site_table(read_table(policy.data), "mrn")


def test_a_site_whose_ids_repeat_refuses_its_table_without_quoting_an_id(
        tmp_path, policy_text, capsys):
    ids = ["A17"] * 3 + [f"B{i}" for i in range(37)]
    policy = contract_site(tmp_path, policy_text, WITH_ID, with_ids(liver_table(40), ids))
    contract = load_contract(tmp_path / "contract.toml")
    store_result(policy.path, ReleasedResult(
        str(RUN_ID), "dpdis-pca", BASIS, MEAN, SCALE, contract.output_columns, contract.hash,
    ), "clinic")
    assert project(policy, "--out", tmp_path / "scores.csv") == 2
    error = capsys.readouterr().err
    assert "id column 'pid' has 2 cells repeating an id" in error and "A17" not in error

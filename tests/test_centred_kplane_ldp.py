"""Centred runs of SuLQ k-plane and LDP-PCA (issue 23, item 3): the moments round, then the
algorithm on the centred (standardised) rows; the reference runs find the pooled
standardised subspace at a large epsilon, charge one ledger per site, and a Flower
simulation over tables equals its reference under the same seeds.
"""

import numpy as np
import pytest
from liver_contract import CONTRACT, liver_table
from record_schema import record_keys
from test_centring import BOUNDS, COLUMNS, ROWS

from fedpca.algorithms.centred_run import run_centred_kplane
from fedpca.algorithms.centring import CentredPolicy
from fedpca.clustering.result import CentredClusteringResult
from fedpca.linalg.subspace import subspace_distance
from fedpca.run_record import run_record
from fedpca.scenarios.kplane import KPlaneScenario
from fedpca.scenarios.tables import TableRun
from fedpca.simulations.tables import simulate_kplane_tables


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


def test_a_centred_clustering_assigns_rows_after_centring_them():
    result = run_centred_kplane(np.array_split(ROWS, 2), BOUNDS, 2, 1,
                                CentredPolicy(epsilon=4.0, standardize=True), seed=1)
    centred = (ROWS - result.mean) / result.scale
    np.testing.assert_array_equal(result.predict(ROWS),
                                  super(CentredClusteringResult, result).predict(centred))


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
    result = simulate_kplane_tables(run)
    assert set(run_record(result)) == record_keys("sulq-kplane", centred=True)
    assert [h.get("phase") for h in result.history] == ["moments", None, None]
    reference = run_centred_kplane([run.site_rows(i) for i in range(3)], BOUNDS, 2, 1,
                                   run.policy(), seed=6)
    for key in ("mean", "scale"):
        np.testing.assert_array_equal(getattr(result, key), getattr(reference, key))
    for got, expected in zip(result.bases, reference.bases, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert result.config["site_guarantees"]["0"]["epsilon"] == 3.0

"""Genotype sites through every door: DPS-PCA's site streaming genotype rows answers as it
does over the same rows in memory; a real site's policy names a PLINK prefix and a SNP panel
(the panel's digest is the run's contract, its row-norm the clip norm, DPS-PCA only);
``fedpca site check`` reads the fileset against the panel; ``fedpca site project`` writes
the local projection as a PLINK covariate file; ``fedpca simulate dps-pca --plink ...
--panel`` runs (per-site noise and secure sums). (Three real sites on loopback:
tests/test_genotype_deployment.py.)"""

import functools
import json

import numpy as np
import pytest

from cli_runs import run_cli
from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy, run_dps_pca
from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, DPdisPCASite
from fedpca.data.cohort import write_cohort
from fedpca.data.covariates import read_covariates
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.plink import PlinkFileset
from fedpca.data.snp_panel import check_fileset, load_panel, write_panel
from fedpca.dp.site_data import SiteData
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.scenarios.genotypes import GenotypeRun
from fedpca.errors import ConfigurationError, FedPCAError, InvalidDataError, InvalidRequestError
from fedpca.site.plan import plan_run
from fedpca.site.policy import PolicyError, load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.site.real_site import RealSiteSource
from fedpca.site.results import ReleasedResult, store_result
from fedpca.site.service import Node

pytestmark = pytest.mark.federation  # its simulations start Flower

SAMPLES, SNPS = 80, 120


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """3 sites x 80 individuals x 120 SNPs, some missing calls."""
    return write_cohort(tmp_path_factory.mktemp("cohort"), sites=3, samples_per_site=SAMPLES,
                        snps=SNPS, populations=3, fst=0.05, reference_size=100, k=2, seed=5,
                        missing=0.01)


def rows_of(cohort, site, block=50):
    panel, fileset = load_panel(cohort.panel), PlinkFileset(cohort.sites[site])
    return GenotypeRows(fileset, panel, check_fileset(panel, fileset, str(site)), block=block)


def genotype_policy(folder, cohort, site=0, edit=lambda text: text):
    """A genotype site's policy as ``fedpca site init --genotypes --panel`` writes it."""
    path = write_policy_template(folder / "site.toml", f"biobank-{site}", None,
                                 genotypes=(str(cohort.sites[site]), str(cohort.panel)))
    path.write_text(edit(path.read_text()))
    return path


def test_dps_pca_streaming_genotype_rows_answers_as_over_the_same_rows_in_memory(cohort):
    rows = rows_of(cohort, 0)
    policy = DPSPCAPolicy(epsilon=2.0, delta=1e-6, rounds=3, clip_norm=rows.clip_norm)
    dense = SiteData.prepare(rows.dense(), rows.clip_norm)
    streamed_site = DPSPCASite(rows, policy, site="0", seed=4)
    dense_site = DPSPCASite(dense, policy, site="0", seed=4)
    assert streamed_site.X is None and (streamed_site.n, streamed_site.dim) == (SAMPLES, SNPS)
    np.testing.assert_allclose(streamed_site.release_diagonal(), dense_site.release_diagonal(),
                               rtol=0, atol=1e-9)
    basis = np.linalg.qr(np.random.default_rng(2).normal(size=(SNPS, 2)))[0]
    np.testing.assert_allclose(streamed_site.release_power(basis),
                               dense_site.release_power(basis), rtol=0, atol=1e-9)
    np.testing.assert_allclose(rows.squared_column_norms(), (rows.dense() ** 2).sum(axis=0),
                               rtol=0, atol=1e-9)
    assert streamed_site.ledger.count == dense_site.ledger.count == 2


def test_streamed_rows_are_refused_by_an_algorithm_that_reads_the_whole_matrix_or_another_norm(
        cohort):
    rows = rows_of(cohort, 0)
    with pytest.raises(ConfigurationError, match=r"reads a site's whole matrix.*\(dps-pca\)"):
        DPdisPCASite(rows, DPdisPCAPolicy(clip_norm=rows.clip_norm))
    with pytest.raises(ConfigurationError, match="bounded by norm .* set the policy's clip norm"):
        DPSPCASite(rows, DPSPCAPolicy(clip_norm=1.0))


def test_a_genotype_policy_reads_its_panel_as_contract_and_bound_and_allows_dps_pca_only(
        tmp_path, cohort):
    policy = load_site_policy(genotype_policy(tmp_path, cohort))
    panel = load_panel(cohort.panel)
    assert policy.contract_hash() == panel.digest and policy.clip_norm == panel.row_norm
    assert policy.data == cohort.sites[0].with_suffix(".bed").resolve()
    assert list(policy.algorithms) == ["dps-pca"]
    records = policy.load_records()
    assert isinstance(records, GenotypeRows) and records.shape == (SAMPLES, SNPS)
    assert policy.ledger_settings()["site.contract"] == panel.digest


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("panel = ", "# panel = "), "site.genotypes needs site.panel"),
    (lambda t: t.replace("[site]\n", '[site]\ndata = "x.npy"\n'), "remove data"),
    (lambda t: t.replace("[data]\n", "[data]\nclip-norm = 2.0\n"), "remove it; the panel's"),
    (lambda t: t + "\n[algorithms.ldp-pca]\n", r"answers only \['dps-pca'\]"),
])
def test_a_genotype_policy_that_would_mix_bounds_or_algorithms_is_refused(
        tmp_path, cohort, edit, message):
    genotype_policy(tmp_path, cohort)  # what init writes loads
    path = tmp_path / "other.toml"
    path.write_text(edit((tmp_path / "site.toml").read_text()))
    path.chmod(0o600)
    with pytest.raises(PolicyError, match=message):
        load_site_policy(path)


def test_a_run_under_another_panel_or_centred_is_refused_before_anything(tmp_path, cohort):
    policy = load_site_policy(genotype_policy(tmp_path, cohort))
    digest = load_panel(cohort.panel).digest
    assert plan_run(policy, "1", "dps-pca", {"contract": digest}).contract == digest
    with pytest.raises(InvalidRequestError, match=f"SNP panel .*contract=\"{digest}\""):
        plan_run(policy, "1", "dps-pca", {"contract": "0" * 64})
    with pytest.raises(InvalidRequestError, match="refused: a centred run; this genotype site"):
        plan_run(policy, "1", "dps-pca", {"contract": digest, "centring": "centre"})
    with pytest.raises(FedPCAError, match="not allowed"):
        plan_run(policy, "1", "dpdis-pca", {"contract": digest})


def test_a_real_genotype_site_answers_with_its_rows_streamed(tmp_path, cohort):
    path = genotype_policy(tmp_path, cohort)
    panel = load_panel(cohort.panel)
    node = Node("7", 1, {"policy": str(path)},
                {"algorithm": "dps-pca", "contract": panel.digest, "dim": SNPS, "s-hat": SNPS,
                 "k": 2, "rounds": 3, "dataset": "files"})
    site = RealSiteSource(node, "dps-pca").site()
    assert isinstance(site.rows, GenotypeRows) and site.X is None
    assert site.clip_norm == panel.row_norm and site.exact


def test_site_check_reports_the_panel_and_refuses_a_flipped_allele_by_name(tmp_path, cohort):
    path = genotype_policy(tmp_path, cohort)
    code, printed = run_cli(["site", "check", "--policy", str(path)])
    digest = load_panel(cohort.panel).digest
    assert code == 0 and f"digest {digest}" in printed and "every panel SNP present" in printed
    panel = load_panel(cohort.panel)
    flipped = tmp_path / "flipped.toml"  # the panel with its first SNP's alleles swapped
    a1, a2 = list(panel.a1), list(panel.a2)
    a1[0], a2[0] = a2[0], a1[0]
    write_panel(flipped, "flipped", list(panel.snps), a1, a2, panel.freq, panel.row_norm)
    path.write_text(path.read_text().replace(str(cohort.panel), str(flipped)))
    code, printed = run_cli(["site", "check", "--policy", str(path)])
    assert code == 1 and f"swapped relative to panel 'flipped' for {panel.snps[0]}" in printed


def test_site_project_writes_the_local_projection_as_a_private_covariate_file(tmp_path, cohort):
    path = genotype_policy(tmp_path, cohort, site=1)
    policy = load_site_policy(path)
    basis = np.linalg.qr(np.random.default_rng(8).normal(size=(SNPS, 2)))[0]
    store_result(policy.path, ReleasedResult("9", "dps-pca", basis,
                                             contract=policy.contract_hash()), policy.name)
    out = tmp_path / "pcs.covar"
    code, printed = run_cli(["site", "project", "--policy", str(path), "--out", str(out)])
    assert code == 0 and f"{SAMPLES} records x 2 components" in printed
    covariates = read_covariates(out)
    fileset = PlinkFileset(cohort.sites[1])
    np.testing.assert_array_equal(covariates.fid, fileset.fid)
    np.testing.assert_array_equal(covariates.iid, fileset.iid)
    np.testing.assert_allclose(covariates.scores, rows_of(cohort, 1).dense() @ basis, rtol=0,
                               atol=1e-12)
    assert out.stat().st_mode & 0o777 == 0o600


def test_site_project_refuses_a_centred_or_another_panels_result(tmp_path, cohort):
    policy = load_site_policy(genotype_policy(tmp_path, cohort))
    basis = np.linalg.qr(np.random.default_rng(8).normal(size=(SNPS, 2)))[0]
    from fedpca.site.results import site_scores

    with pytest.raises(InvalidDataError, match="made under data contract"):
        site_scores(policy, ReleasedResult("9", "dps-pca", basis, contract="0" * 64))
    with pytest.raises(InvalidDataError, match="is centred"):
        site_scores(policy, ReleasedResult("9", "dps-pca", basis, np.zeros(SNPS),
                                           np.ones(SNPS), contract=policy.contract_hash()))


@pytest.mark.parametrize("secure", [[], ["--secure-aggregation"]])
def test_simulate_dps_pca_over_plink_filesets_names_the_panel_as_contract(
        tmp_path, cohort, secure):
    out = tmp_path / "run.json"
    code, printed = run_cli(["simulate", "dps-pca", "--plink", *map(str, cohort.sites),
                             "--panel", str(cohort.panel), "--k", "2", "--rounds", "2",
                             "--epsilon", "4", "--seed", "1", *secure, "--output", str(out)])
    assert code == 0, printed
    record = json.loads(out.read_text())
    panel = load_panel(cohort.panel)
    assert record["config"]["contract"] == panel.digest
    assert (record["samples"], record["dim"], record["s_hat"]) == (3 * SAMPLES, SNPS, SNPS)
    assert record["sites_answered"][-1] == ["0", "1", "2"]
    assert np.array(record["basis"]).shape == (SNPS, 2)
    assert record["config"]["clip-norm"] == panel.row_norm
    assert record["config"]["discrete"] == bool(secure)  # secure: fedpca's verifiable sums
    if not secure:  # the Flower run is the pure-numpy reference run under the same seeds
        run = GenotypeRun.build(cohort.sites, cohort.panel, functools.partial(
            DPSPCAScenario, k=2, rounds=2, epsilon=4.0, seed=1))
        reference = run_dps_pca([run.site_rows(i) for i in range(run.sites)], 2,
                                run.scenario.s_hat, run.scenario.policy(), seed=1)
        np.testing.assert_allclose(np.array(record["basis"]), reference.basis, atol=1e-8, rtol=0)
        assert reference.config["clipped_rows"] == sum(r.clipped_rows() for r in (
            run.site_rows(i) for i in range(run.sites)))


def test_the_apps_partitions_and_server_read_a_genotype_run_from_run_config(cohort):
    from flwr.app import Context, RecordDict

    from fedpca.flower.app import app_source
    from fedpca.flower.server.serverapp import genotype_context
    from fedpca.simulated_sites import GenotypeSource

    config = {"algorithm": "dps-pca", "plink": " ".join(map(str, cohort.sites)),
              "panel": str(cohort.panel), "k": 2, "rounds": 2, "epsilon": 4.0, "seed": 1,
              "secure-min-sites": 3, "discrete": True}
    source = app_source(Node("1", 1, {"partition-id": 2, "num-partitions": 3}, config))
    assert isinstance(source, GenotypeSource) and source.identity().min_sites == 3
    site = source.site()
    assert site.X is None and (site.n, site.dim) == (SAMPLES, SNPS)
    np.testing.assert_allclose(site.rows.dense(), rows_of(cohort, 2).dense(), rtol=0, atol=0)
    served = genotype_context(Context(run_id=1, node_id=0, node_config={},
                                      state=RecordDict(), run_config=config)).run_config
    panel = load_panel(cohort.panel)
    assert (served["contract"], served["dim"], served["s-hat"], served["clip-norm"],
            served["samples"], served["secagg-max-weight"], served["dataset"]) == (
        panel.digest, SNPS, SNPS, panel.row_norm, 3 * SAMPLES, SAMPLES, "plink")
    with pytest.raises(ConfigurationError, match="3 PLINK prefixes for 4 partitions"):
        app_source(Node("1", 1, {"partition-id": 0, "num-partitions": 4}, config))


def power_step_peak(rows) -> int:
    """The peak Python memory (bytes) of a DPS-PCA site's second power step over ``rows``
    (the first one's pass over the row scales is kept, so it is not counted)."""
    import tracemalloc

    site = DPSPCASite(rows, DPSPCAPolicy(rounds=2, clip_norm=rows.clip_norm), site="0", seed=1)
    basis = np.linalg.qr(np.random.default_rng(2).normal(size=(rows.d, 2)))[0]
    site.release_power(basis)
    tracemalloc.start()
    try:
        site.release_power(basis)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_power_step_holds_a_block_of_snps_in_float_never_the_whole_matrix(tmp_path):
    wide = write_cohort(tmp_path, sites=2, samples_per_site=500, snps=1500, populations=2,
                        fst=0.05, reference_size=100, k=2, seed=1)
    peak = power_step_peak(rows_of(wide, 0, block=100))
    # the dense float matrix is 6 MB, a block of 100 SNPs 0.4 MB (measured at 10,000 x
    # 20,000: 297 MiB peak RSS for a whole power step with exact noise)
    assert peak < 1.5e6, peak


def test_site_init_writes_a_genotype_policy_and_refuses_genotypes_without_a_panel(
        tmp_path, cohort, capsys):
    code, printed = run_cli(["site", "init", "--policy", str(tmp_path / "site.toml"), "--name",
                             "biobank", "--genotypes", str(cohort.sites[0]), "--panel",
                             str(cohort.panel)])
    assert code == 0, printed
    policy = load_site_policy(tmp_path / "site.toml")
    assert policy.genotypes.path == cohort.sites[0].resolve()
    assert "ok: this site is ready for a run" in printed
    code, _ = run_cli(["site", "init", "--policy", str(tmp_path / "other.toml"), "--name", "b",
                       "--genotypes", str(cohort.sites[0])])
    assert code != 0 and "--genotypes needs --panel" in capsys.readouterr().err
    assert not (tmp_path / "other.toml").exists()

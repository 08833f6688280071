"""The genomics benchmark (``benchmarks/genomics.py``): its union products equal a site's
``GenotypeRows``, its accuracy measure uses no label, its secure-sum emulation has the real
sum's noise, and ``--quick`` runs end to end."""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import genomics  # noqa: E402
from genomics_methods import NonPrivateRun, ddg_noise_check  # noqa: E402
from genomics_private import ReleasedRows  # noqa: E402
from genomics_union import (  # noqa: E402
    CohortSpec,
    UnionRows,
    cohort,
    matched_accuracy,
    population_accuracy,
)

from fedpca.data.genotypes import GenotypeRows  # noqa: E402
from fedpca.data.plink import PlinkFileset  # noqa: E402
from fedpca.data.snp_panel import check_fileset, load_panel  # noqa: E402
from fedpca.linalg.subspace import subspace_distance, thin_qr, top_eigenpairs  # noqa: E402

SPEC = CohortSpec(sites=3, samples_per_site=150, snps=400, fst=0.05, absent=2,
                  reference_size=200)


@pytest.fixture(scope="module", params=[0.0, 0.05], ids=["complete", "missing"])
def union(request, tmp_path_factory):
    """The cohort complete, and with 5% missing calls (0 once standardised)."""
    spec = dataclasses.replace(SPEC, missing=request.param)
    return UnionRows(cohort(spec, tmp_path_factory.mktemp("cache")))


def test_the_union_equals_every_sites_genotype_rows_stacked(union):
    panel = load_panel(union.panel.path)
    dense = []
    for j in range(SPEC.sites):
        fileset = PlinkFileset(union.panel.path.parent / f"site{j}")
        dense.append(GenotypeRows(fileset, panel, check_fileset(panel, fileset, "0")).dense())
    X = np.vstack(dense)
    basis = thin_qr(np.random.default_rng(0).standard_normal((X.shape[1], 3)))
    scale = np.abs(X.T @ X).max()
    assert np.abs(union.gram_times(basis) - X.T @ (X @ basis)).max() < 1e-5 * scale
    assert np.abs(union.covariance() - X.T @ X).max() < 1e-5 * scale
    assert np.allclose(union.diagonal(), np.einsum("ij,ij->j", X, X), rtol=1e-5)
    assert np.allclose(union.times(basis), X @ basis, atol=1e-4)
    assert union.n == X.shape[0] and union.labels.shape == (union.n,)


def test_the_union_under_released_frequencies_equals_each_runs_genotype_rows(union):
    """Every run's own standardisation (its released frequencies), side by side in one
    pass, equals ``GenotypeRows.with_frequencies`` stacked over the sites."""
    panel = load_panel(union.panel.path)
    rng = np.random.default_rng(1)
    frequencies = rng.uniform(0.01, 0.99, (3, union.d))
    released = ReleasedRows(union, frequencies)
    bases = {0: thin_qr(rng.standard_normal((union.d, 2))),
             2: thin_qr(rng.standard_normal((union.d, 3)))}
    grams, scores = released.gram_times(bases), released.times(bases)
    assert set(grams) == set(scores) == {0, 2}
    for run, basis in bases.items():
        X = np.vstack([GenotypeRows(fileset, panel, check_fileset(panel, fileset, "0"))
                       .with_frequencies(frequencies[run]).dense()
                       for fileset in (PlinkFileset(union.panel.path.parent / f"site{j}")
                                       for j in range(SPEC.sites))])
        scale = np.abs(X.T @ X).max()
        assert np.abs(grams[run] - X.T @ (X @ basis)).max() < 1e-5 * scale
        assert np.allclose(scores[run], X @ basis, atol=1e-4)
        assert (released.scales[:, run] < 1).any()  # some rows clipped under these frequencies


def test_a_cached_cohort_is_reused(tmp_path):
    first = cohort(SPEC, tmp_path)
    stamp = first.sites[0].with_suffix(".bed").stat().st_mtime_ns
    again = cohort(SPEC, tmp_path)
    assert again == first and first.sites[0].with_suffix(".bed").stat().st_mtime_ns == stamp


def test_the_nonprivate_iteration_finds_the_top_eigenvectors(union):
    run = NonPrivateRun(union.d, 2)
    while not run.done:
        run.feed(union.gram_times(run.basis))
    assert subspace_distance(run.components(), top_eigenpairs(union.covariance(), 2)[1]) < 1e-3


def test_accuracy_takes_its_centroids_from_the_scores_alone():
    rng = np.random.default_rng(0)
    truth = np.repeat([0, 1, 2], 200)
    centres = np.array([[0.0, 10.0], [10.0, 0.0], [-10.0, -10.0]])
    scores = centres[truth] + rng.standard_normal((600, 2))
    assert population_accuracy(scores, truth, 3) == 1.0
    assert population_accuracy(scores, (truth + 1) % 3, 3) == 1.0  # any relabelling
    assert population_accuracy(rng.standard_normal((600, 2)), truth, 3) < 0.5
    found = truth.copy()
    found[:30] = 1
    assert matched_accuracy(found, truth, 3) == pytest.approx(570 / 600)


def test_the_emulated_noise_is_the_real_secure_sums():
    check = ddg_noise_check(dim=256)
    assert 0.9 < check["ratio"] < 1.1 and abs(check["mean"]) < 0.1


def test_the_quick_benchmark_runs_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPCA_GENOMICS_CACHE", str(tmp_path))
    rows = genomics.run(quick=True)
    accuracy = [r for r in rows if r["kind"] == "accuracy"]
    methods = {r["method"] for r in accuracy}
    assert {genomics.PANEL, genomics.NONPRIVATE, genomics.ANALYZE} <= methods
    assert {m.name for m in genomics.SHIFTED[:1]} <= methods  # private frequencies, shifted
    assert all(0.0 <= a <= 1.0 for r in accuracy for a in r["accuracy"])
    structure = [r for r in rows if r["kind"] == "structure"]  # two absent, k = 3
    assert {r["scenario"] for r in structure} == {"c"}
    assert genomics.PER_SITE_METHOD.name in {r["method"] for r in structure}
    assert all(0.0 <= a <= 1.0 and r["distance"] >= 0 for r in structure
               for a in r["accuracy"])
    site = next(r for r in rows if r["kind"] == "site")
    assert site["peak_rss_mib"] > 0 and site["secure_seconds"] > 0
    assert all(t["passed"] is None for t in genomics.targets(rows, quick=True))
    assert "k-means" in genomics.markdown(rows)
    advised = [r for r in rows if "warned" in r]  # the plan's advice beside the size curve
    assert advised and all(r["planned"] >= 0 and r["panel_predicted"] > 0 for r in advised)
    assert "Advice before spending" in genomics.markdown(rows)


def test_a_cohort_with_missing_calls_holds_the_complete_cohorts_calls(tmp_path):
    """Missing calls come from their own stream: where called, the calls are the same
    cohort's without missing calls (so the two are compared like for like)."""
    spec = dataclasses.replace(SPEC, samples_per_site=40, snps=100)
    complete = cohort(spec, tmp_path / "complete")
    holed = cohort(dataclasses.replace(spec, missing=0.05), tmp_path / "holed")
    full = PlinkFileset(complete.sites[1]).read_block(np.arange(spec.snps))
    calls = PlinkFileset(holed.sites[1]).read_block(np.arange(spec.snps))
    called = calls != -127
    assert 0.03 < 1 - called.mean() < 0.07
    np.testing.assert_array_equal(calls[called], full[called])

"""Genotypes as a site's table: PLINK filesets, the SNP panel, standardised clipped rows
streamed in blocks, the simulated cohort, the covariate file and ``fedpca data cohort``."""

import stat
import sys

import numpy as np
import pytest
from bed_reader import to_bed

from cli_runs import run_cli
from fedpca.data.cohort import default_mixes, read_ancestry, read_populations, write_cohort
from fedpca.data.covariates import read_covariates, write_covariates
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.plink import MISSING, PlinkFileset
from fedpca.data.snp_panel import check_fileset, load_panel, write_panel
from fedpca.data.start_basis import load_start_basis
from fedpca.errors import ConfigurationError, InvalidDataError, InvalidRequestError

#: Known genotypes (3 samples x 4 SNPs), allele-1 counts with missing calls.
KNOWN = np.array([[0, 1, 2, MISSING], [2, MISSING, 0, 1], [1, 1, 1, 2]], dtype=np.int8)
SNPS, A1, A2 = ["rs1", "rs2", "rs3", "rs4"], ["A", "C", "G", "T"], ["G", "T", "A", "C"]
IIDS = ["secret-iid-1", "secret-iid-2", "secret-iid-3"]


def write_fileset(prefix, genotypes=KNOWN, snps=SNPS, a1=A1, a2=A2):
    """A PLINK fileset of ``genotypes`` at ``prefix`` (fid = iid)."""
    iids = [f"secret-iid-{i + 1}" for i in range(genotypes.shape[0])]
    to_bed(prefix.with_suffix(".bed"), genotypes,
           properties={"fid": iids, "iid": iids, "sid": snps, "allele_1": a1, "allele_2": a2})
    return PlinkFileset(prefix)


@pytest.fixture
def known(tmp_path):
    """The KNOWN fileset and a panel of its SNPs (public frequencies, row norm 2.5)."""
    fileset = write_fileset(tmp_path / "site")
    panel = write_panel(tmp_path / "panel.toml", "test", SNPS, A1, A2,
                        np.array([0.3, 0.5, 0.6, 0.2]), 2.5)
    return fileset, panel


def test_plink_reads_known_genotypes_with_their_missing_calls(known):
    fileset, _ = known
    assert fileset.samples == 3 and fileset.snp_count == 4
    assert fileset.snps.tolist() == SNPS and fileset.iid.tolist() == IIDS
    assert fileset.alleles[0].tolist() == A1 and fileset.alleles[1].tolist() == A2
    block = fileset.read_block([3, 0, 1])
    assert block.dtype == np.int8
    np.testing.assert_array_equal(block, KNOWN[:, [3, 0, 1]])
    assert (block == MISSING).sum() == 2


def test_a_truncated_or_absent_file_is_refused_naming_the_file_and_no_sample(tmp_path):
    write_fileset(tmp_path / "site")
    bed = tmp_path / "site.bed"
    bed.write_bytes(bed.read_bytes()[:-1])
    with pytest.raises(InvalidDataError, match="site.bed has 6 bytes but .* 3 samples .* 4 "
                                               "SNPs need 7") as error:
        PlinkFileset(tmp_path / "site")
    assert "secret" not in str(error.value)
    (tmp_path / "site.fam").unlink()
    with pytest.raises(InvalidDataError, match=r"site\.fam does not exist"):
        PlinkFileset(tmp_path / "site.bed")


def test_without_bed_reader_the_error_names_the_genomics_extra(tmp_path, monkeypatch):
    write_fileset(tmp_path / "site")
    monkeypatch.setitem(sys.modules, "bed_reader", None)
    with pytest.raises(ConfigurationError, match=r'pip install "fedpca\[genomics\]"'):
        PlinkFileset(tmp_path / "site")


def test_the_panel_check_maps_panel_snps_to_bed_columns_ignoring_others(tmp_path, known):
    fileset, _ = known
    panel = write_panel(tmp_path / "sub.toml", "sub", ["rs3", "rs1"], ["G", "A"], ["A", "G"],
                        np.array([0.5, 0.5]), 1.0)
    np.testing.assert_array_equal(check_fileset(panel, fileset, "a"), [2, 0])


def test_a_flipped_allele_is_refused_by_name(tmp_path, known):
    fileset, _ = known
    panel = write_panel(tmp_path / "flip.toml", "flip", SNPS, A1[:1] + ["T"] + A1[2:],
                        A2[:1] + ["C"] + A2[2:], np.full(4, 0.5), 1.0)
    with pytest.raises(InvalidDataError, match=r"site a: .* swapped .* for rs2; recode .*"
                                               r"--a1-allele"):
        check_fileset(panel, fileset, "a")


def test_another_allele_and_a_missing_snp_are_refused_by_name(tmp_path, known):
    fileset, _ = known
    other = write_panel(tmp_path / "other.toml", "o", SNPS, ["A", "C", "C", "T"], A2,
                        np.full(4, 0.5), 1.0)
    with pytest.raises(InvalidDataError, match="other alleles .* for rs3 "):
        check_fileset(other, fileset, "a")
    absent = write_panel(tmp_path / "absent.toml", "absent", SNPS + ["rs9"] + [
        f"x{i}" for i in range(6)], A1 + ["A"] * 7, A2 + ["G"] * 7, np.full(11, 0.5), 1.0)
    with pytest.raises(InvalidDataError, match=r"7 of the 11 SNPs .* rs9, x0, x1, x2, x3 and "
                                               r"2 more \(7 in all\)"):
        check_fileset(absent, fileset, "a")


def test_the_panel_digest_changes_when_either_file_changes(known):
    _, panel = known
    toml, tsv = panel.path, panel.table
    assert load_panel(toml).digest == panel.digest
    tsv.write_text(tsv.read_text().replace("0.3", "0.31"))
    changed_table = load_panel(toml).digest
    toml.write_text(toml.read_text().replace("2.5", "2.6"))
    assert len({panel.digest, changed_table, load_panel(toml).digest}) == 3


@pytest.mark.parametrize(("edit", "message"), [
    (("0.3", "1.0"), r"freq must lie in \(0, 1\) .*: rs1"),
    (("rs2", "rs1"), "SNP ids must be unique: rs1 repeat"),
    (("\tA\t0.6", "\tG\t0.6"), "SNP rs3 has a1 = a2"),
])
def test_a_bad_panel_table_is_refused_saying_what_to_fix(known, edit, message):
    _, panel = known
    panel.table.write_text(panel.table.read_text().replace(*edit))
    with pytest.raises(ConfigurationError, match=message):
        load_panel(panel.path)


def test_a_public_panel_needs_frequencies_and_a_positive_row_norm(tmp_path, known):
    _, panel = known
    panel.path.write_text(panel.path.read_text().replace("2.5", "-1.0"))
    with pytest.raises(ConfigurationError, match="row-norm must be a positive number"):
        load_panel(panel.path)
    no_freq = write_panel(tmp_path / "p.toml", "p", SNPS, A1, A2, None, 1.0, "private")
    no_freq.path.write_text(no_freq.path.read_text().replace("private", "public"))
    with pytest.raises(ConfigurationError, match="needs the column freq"):
        load_panel(no_freq.path)


def test_per_site_frequencies_are_a_private_panels_choice_and_change_its_digest(tmp_path):
    summed = write_panel(tmp_path / "s.toml", "p", SNPS, A1, A2, None, 1.0, "private")
    own = write_panel(tmp_path / "o.toml", "p", SNPS, A1, A2, None, 1.0, "private", "per-site")
    assert not summed.per_site_frequencies and own.per_site_frequencies
    assert own.digest != summed.digest  # every member names the choice by the digest
    assert "frequencies" not in summed.path.read_text()  # older panels keep their digest
    public = write_panel(tmp_path / "p.toml", "p", SNPS, A1, A2, np.full(len(SNPS), 0.3),
                         1.0)
    for text in ('frequencies = "per-site"', 'frequencies = "each"'):
        public.path.write_text(public.path.read_text().split("frequencies")[0] + text + "\n")
        with pytest.raises(ConfigurationError, match="frequencies must be one of"):
            load_panel(public.path)


def dense_reference(genotypes, freq, bound):
    """Standardised (missing -> 0), then clipped rows, by plain numpy."""
    x = (genotypes - 2 * freq) / np.sqrt(2 * freq * (1 - freq))
    x[genotypes == MISSING] = 0.0
    norms = np.linalg.norm(x, axis=1)
    return x * np.minimum(1.0, bound / np.maximum(norms, 1e-300))[:, None]


def test_standardisation_and_clipping_equal_a_dense_reference(known):
    fileset, panel = known
    rows = GenotypeRows(fileset, panel, check_fileset(panel, fileset, "a"), block=3)
    expected = dense_reference(KNOWN.astype(float), panel.freq, panel.row_norm)
    np.testing.assert_allclose(rows.dense(), expected, rtol=0, atol=1e-12)
    assert (rows.row_scales() < 1).sum() >= 1  # the bound bites
    assert np.linalg.norm(rows.dense(), axis=1).max() <= panel.row_norm + 1e-12


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """3 sites x 300 individuals x 1500 SNPs, 3 populations at Fst 0.05, population 2
    absent from a reference of 300, some missing calls."""
    return write_cohort(tmp_path_factory.mktemp("cohort"), sites=3, samples_per_site=300,
                        snps=1500, populations=3, fst=0.05, absent=2, reference_size=300,
                        k=3, seed=7, missing=0.01)


def cohort_site(files, site, block=1000, frequencies=None):
    """Site ``site``'s fileset, panel and rows."""
    fileset, panel = PlinkFileset(files.sites[site]), load_panel(files.panel)
    return GenotypeRows(fileset, panel, check_fileset(panel, fileset, str(site)),
                        frequencies, block=block)


@pytest.mark.parametrize("block", [7, 256, 1500])
def test_streamed_products_equal_dense_ones_for_every_block_size(cohort, block):
    rows = cohort_site(cohort, 0, block=block)
    dense = cohort_site(cohort, 0).dense()
    basis = np.linalg.qr(np.random.default_rng(1).normal(size=(rows.d, 3)))[0]
    np.testing.assert_allclose(rows.times(basis), dense @ basis, rtol=0, atol=1e-10)
    np.testing.assert_allclose(rows.gram_times(basis), dense.T @ (dense @ basis), rtol=0,
                               atol=1e-10)


def test_rows_are_clipped_to_the_panel_norm_and_match_numpy(cohort):
    rows = cohort_site(cohort, 1, block=500)
    genotypes = PlinkFileset(cohort.sites[1]).read_block(np.arange(rows.d)).astype(float)
    expected = dense_reference(genotypes, rows.panel.freq, rows.panel.row_norm)
    np.testing.assert_allclose(rows.dense(), expected, rtol=0, atol=1e-12)
    assert np.linalg.norm(rows.dense(), axis=1).max() <= rows.panel.row_norm * (1 + 1e-12)


def test_raw_moments_exclude_missing_calls(cohort):
    rows = cohort_site(cohort, 2, block=333)
    calls = PlinkFileset(cohort.sites[2]).read_block(np.arange(rows.d)).astype(np.int64)
    seen = calls != MISSING
    assert (~seen).sum() > 0
    np.testing.assert_array_equal(rows.column_sums(), np.where(seen, calls, 0).sum(axis=0))
    np.testing.assert_array_equal(rows.column_squares(),
                                  np.where(seen, calls ** 2, 0).sum(axis=0))
    np.testing.assert_array_equal(rows.called_counts(), seen.sum(axis=0))


def test_private_frequencies_standardise_and_a_bad_basis_is_refused(cohort):
    frequencies = np.full(1500, 0.4)
    rows = cohort_site(cohort, 0, block=400, frequencies=frequencies)
    calls = PlinkFileset(cohort.sites[0]).read_block(np.arange(1500)).astype(float)
    np.testing.assert_allclose(rows.dense(), dense_reference(calls, frequencies,
                                                             rows.panel.row_norm), atol=1e-12)
    with pytest.raises(InvalidRequestError, match=r"shape \(1499, 2\), not \(1500, k\)"):
        rows.gram_times(np.zeros((1499, 2)))
    with pytest.raises(InvalidRequestError, match="not finite"):
        rows.times(np.full((1500, 2), np.nan))
    with pytest.raises(InvalidDataError, match=r"1500 numbers in \(0, 1\)"):
        cohort_site(cohort, 0, frequencies=np.full(1500, 1.0))


def population_frequencies(files):
    """Each population's allele-1 frequency over all sites' samples (``K x d``), with the
    sample counts per population."""
    calls = np.vstack([PlinkFileset(p).read_block(np.arange(1500)) for p in files.sites])
    labels = np.concatenate([read_populations(p) for p in files.populations])
    called = np.where(calls == MISSING, np.nan, calls.astype(float))
    return np.array([np.nanmean(called[labels == k], axis=0) / 2 for k in range(3)]), \
        np.bincount(labels, minlength=3)


def test_the_cohort_has_the_asked_fst_and_a_reference_without_the_absent_population(cohort):
    freqs, counts = population_frequencies(cohort)
    n0, n1 = counts[0], counts[1]
    p0, p1 = freqs[0], freqs[1]
    # Hudson's Fst between populations 0 and 1, a ratio of averages over SNPs
    numerator = (p0 - p1) ** 2 - p0 * (1 - p0) / (n0 - 1) - p1 * (1 - p1) / (n1 - 1)
    hudson = numerator.sum() / (p0 * (1 - p1) + p1 * (1 - p0)).sum()
    assert 0.04 < hudson < 0.06
    # the panel's frequencies are the reference's: populations 0 and 1 in equal shares, 2 not
    panel = load_panel(cohort.panel).freq
    weights = np.linalg.lstsq(freqs.T, panel, rcond=None)[0]
    np.testing.assert_allclose(weights, [0.5, 0.5, 0.0], atol=0.1)
    assert np.abs(panel - freqs[:2].mean(axis=0)).mean() < 0.03
    # the absent population appears at a site, only where default_mixes puts it
    assert counts[2] > 0
    for site, path in enumerate(cohort.populations):
        assert ((read_populations(path) == 2).any()) == (default_mixes(3, 3, 2)[site, 2] > 0)


def test_an_isolate_drifts_from_its_parent_and_the_panels_pcs_put_it_on_top_of_it(tmp_path):
    isolate = write_cohort(tmp_path, sites=3, samples_per_site=300, snps=1500, populations=3,
                           fst=0.05, absent=2, reference_size=300, k=1, seed=7, isolate_of=0)
    freqs, _ = population_frequencies(isolate)
    # drifted by F from population 0 (variance F p (1 - p)), from population 1 by about 3 F
    assert ((freqs[2] - freqs[0]) ** 2).mean() * 2 < ((freqs[2] - freqs[1]) ** 2).mean()
    start, rows = np.load(isolate.start), cohort_site(isolate, 2)  # site 2: mostly the isolate
    scores, labels = rows.times(start)[:, 0], read_populations(isolate.populations[2])
    mean = {k: scores[labels == k].mean() for k in range(3)}
    assert abs(mean[2] - mean[0]) < abs(mean[0] - mean[1]) / 3  # the panel cannot tell them
    with pytest.raises(ConfigurationError, match="--isolate-of .* needs --absent"):
        write_cohort(tmp_path / "bad", sites=3, samples_per_site=10, snps=10, isolate_of=0)
    with pytest.raises(ConfigurationError, match="--isolate-of"):
        write_cohort(tmp_path / "bad", sites=3, samples_per_site=10, snps=10, absent=2,
                     isolate_of=2)


def test_two_isolates_of_one_parent_are_absent_and_drift_from_it_apart(tmp_path):
    files = write_cohort(tmp_path, sites=4, samples_per_site=300, snps=1500, populations=4,
                         fst=0.05, absent=(2, 3), isolate_of=(0, 0), reference_size=200,
                         k=1, seed=3)
    labels = [read_populations(p) for p in files.populations]
    mixes = default_mixes(4, 4, (2, 3))
    for site, found in enumerate(labels):  # each isolate only where it is the main one
        for population in (2, 3):
            assert (found == population).any() == (mixes[site, population] > 0)
    calls = np.vstack([PlinkFileset(p).read_block(np.arange(1500)) for p in files.sites])
    every = np.concatenate(labels)
    p = np.array([calls[every == k].mean(axis=0) / 2 for k in range(4)])
    near, apart = ((p[2] - p[0]) ** 2).mean(), ((p[2] - p[3]) ** 2).mean()
    assert near < apart < 2.6 * near  # each drifted from 0 by F; from each other by about 2 F
    with pytest.raises(ConfigurationError, match="one parent per --absent"):
        write_cohort(tmp_path / "bad", sites=2, samples_per_site=10, snps=10, populations=4,
                     absent=(2, 3), isolate_of=(0,))


def test_a_clines_individuals_carry_their_ancestry_share_in_their_calls(tmp_path):
    mixes = np.array([[0.5, 0.0, 0.5], [0.7, 0.0, 0.3]])
    files = write_cohort(tmp_path, sites=2, samples_per_site=400, snps=2000, populations=3,
                         fst=0.1, absent=2, isolate_of=0, reference_size=200, k=1, seed=4,
                         mixes=mixes, cline=(0, 2))
    q = np.concatenate([read_ancestry(p.with_suffix(".ancestry")) for p in files.sites])
    labels = np.concatenate([read_populations(p) for p in files.populations])
    assert (q[labels == 0] == 0).all() and ((q[labels == 2] > 0) & (q[labels == 2] < 1)).all()
    calls = np.vstack([PlinkFileset(p).read_block(np.arange(2000)) for p in files.sites])
    pure, admixed = calls[labels == 0].mean(axis=0), labels == 2
    # each admixed individual's calls lie along population 2's direction in proportion q:
    # its projection on the (noisy) direction of the most admixed individuals' mean
    most = calls[admixed & (q > 0.8)].mean(axis=0) - pure
    along = (calls[admixed] - pure) @ most / (most @ most)
    assert np.corrcoef(along, q[admixed])[0, 1] > 0.9
    with pytest.raises(ConfigurationError, match="--cline names two populations"):
        write_cohort(tmp_path / "bad", sites=2, samples_per_site=10, snps=10, cline=(1, 1))


def test_the_start_basis_is_orthonormal_and_separates_the_reference_populations(cohort):
    start = np.load(cohort.start)
    assert start.shape == (1500, 3)
    np.testing.assert_allclose(start.T @ start, np.eye(3), atol=1e-12)
    rows = cohort_site(cohort, 0)
    scores, labels = rows.times(start[:, :1]), read_populations(cohort.populations[0])
    means = [scores[labels == k].mean() for k in (0, 1)]
    assert abs(means[0] - means[1]) > 3 * scores.std() / 2


def test_the_covariate_file_round_trips_ids_and_scores_and_is_private(tmp_path):
    scores = np.random.default_rng(0).normal(size=(3, 2)) * 1e-3
    path = write_covariates(tmp_path / "pcs.covar", ["f1", "f2", "f3"], IIDS, scores)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    read = read_covariates(path)
    assert read.names == ("PC1", "PC2") and read.iid.tolist() == IIDS
    assert read.fid.tolist() == ["f1", "f2", "f3"]
    np.testing.assert_allclose(read.scores, scores, rtol=1e-12, atol=0)
    assert path.read_text().splitlines()[0].split("\t") == ["FID", "IID", "PC1", "PC2"]
    with pytest.raises(InvalidDataError, match="sample 2's FID or IID") as error:
        write_covariates(tmp_path / "bad", ["f1", "f 2", "f3"], IIDS, scores)
    assert "secret" not in str(error.value) and "f 2" not in str(error.value)


def test_the_cohort_command_writes_files_that_load(tmp_path):
    code, printed = run_cli(["data", "cohort", "--out", str(tmp_path), "--sites", "2",
                             "--samples-per-site", "20", "--snps", "40", "--populations",
                             "2", "--fst", "0.1", "--reference-size", "30", "--k", "2",
                             "--absent", "1", "--seed", "5"])
    assert code == 0
    assert "site1.bed/.bim/.fam/.pop" in printed and "start.npy" in printed
    panel = load_panel(tmp_path / "panel.toml")
    for site in (0, 1):
        fileset = PlinkFileset(tmp_path / f"site{site}")
        assert fileset.samples == 20
        np.testing.assert_array_equal(check_fileset(panel, fileset, str(site)), np.arange(40))
    start = load_start_basis(tmp_path / "start.npy")  # a start basis a run can name
    assert start.shape == (40, 2) and f"SHA-256 {start.digest}" in printed


def test_the_cohort_command_writes_two_isolates_and_a_cline(tmp_path):
    code, printed = run_cli(["data", "cohort", "--out", str(tmp_path), "--sites", "4",
                             "--samples-per-site", "30", "--snps", "40", "--populations",
                             "4", "--reference-size", "30", "--absent", "2", "3",
                             "--isolate-of", "0", "1", "--cline", "0", "2", "--seed", "6"])
    assert code == 0 and "population(s) 2, 3 absent" in printed
    assert "isolates of population(s) 0, 1" in printed and "admixed with 0" in printed
    labels = np.concatenate([read_populations(tmp_path / f"site{j}.pop") for j in range(4)])
    shares = np.concatenate([read_ancestry(tmp_path / f"site{j}.ancestry") for j in range(4)])
    assert {2, 3} <= set(labels)  # both absent populations are at the sites
    admixed = shares[labels == 2]
    assert ((admixed > 0) & (admixed < 1)).all() and (shares[labels == 0] == 0).all()
    assert np.isnan(shares[labels == 3]).all()
    code, printed = run_cli(["data", "cohort", "--out", str(tmp_path / "bad"), "--absent",
                             "2", "3", "--isolate-of", "0", "1", "0"])
    assert code != 0 and "Traceback" not in printed

"""A site's genotypes as PLINK 2 (``.pgen/.pvar/.psam``) and VCF/BCF (``.vcf``, ``.vcf.gz``,
``.bcf``) files, beside PLINK 1: known genotypes with missing calls read back, counting ALT;
flipped alleles, absent and multi-allelic SNPs refused by name; errors that quote no sample id;
the path chosen by suffix; FID/IID in the covariate file; and the same genotypes in the three
formats giving the same rows and the same DPS-PCA run."""

import functools
import sys

import numpy as np
import pytest
from bed_reader import to_bed
from cyvcf2 import VCF, Writer
from pgenlib import PgenWriter

from cli_runs import run_cli
from test_genotype_sites import power_step_peak
from fedpca.algorithms.dps_pca import DPSPCAPolicy, run_dps_pca
from fedpca.data.covariates import read_covariates
from fedpca.data.genotype_fileset import MISSING
from fedpca.data.genotype_formats import data_file, open_genotypes
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.plink import PlinkFileset
from fedpca.data.plink2 import Plink2Fileset
from fedpca.data.snp_panel import check_fileset, write_panel
from fedpca.data.vcf import VcfFile
from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.scenarios.genotypes import GenotypeRun
from fedpca.site.genotype_site import GenotypeFiles, genotype_scores
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template

#: Known genotypes (3 samples x 4 SNPs), ALT counts with missing calls.
KNOWN = np.array([[0, 1, 2, MISSING], [2, MISSING, 0, 1], [1, 1, 1, 2]], dtype=np.int8)
SNPS, ALT, REF = ["rs1", "rs2", "rs3", "rs4"], ["A", "C", "G", "T"], ["G", "T", "A", "C"]
FIDS = ["secret-fam-1", "secret-fam-2", "secret-fam-3"]
IIDS = ["secret-iid-1", "secret-iid-2", "secret-iid-3"]
#: A VCF's calls of each ALT count (a phased het beside an unphased one).
CALLS = {0: "0/0", 1: "0|1", 2: "1/1", MISSING: "./."}
VCF_HEADER = ("##fileformat=VCFv4.2\n##contig=<ID=1>\n"
              '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n'
              "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT")


def write_pgen(prefix, genotypes=KNOWN, snps=SNPS, alt=ALT, ref=REF, fids=FIDS, iids=IIDS,
               pvar_header=True):
    """A PLINK 2 fileset of ``genotypes`` (``n x d`` ALT counts) at ``prefix``: the .pgen by
    pgenlib, the .pvar (with a #CHROM header, or in .bim order) and .psam (#FID IID, or #IID
    only when ``fids`` is None) by hand."""
    writer = PgenWriter(bytes(prefix.with_suffix(".pgen")), genotypes.shape[0],
                        genotypes.shape[1], False)
    for calls in genotypes.T:
        writer.append_biallelic(np.where(calls == MISSING, -9, calls).astype(np.int8))
    writer.close()
    if pvar_header:
        lines = ["##fileformat=PVARv1.0", "#CHROM\tPOS\tID\tREF\tALT"] + [
            f"1\t{j + 1}\t{snp}\t{ref[j]}\t{alt[j]}" for j, snp in enumerate(snps)]
    else:
        lines = [f"1\t{snp}\t0\t{j + 1}\t{alt[j]}\t{ref[j]}" for j, snp in enumerate(snps)]
    prefix.with_suffix(".pvar").write_text("\n".join(lines) + "\n")
    samples = (["#IID\tSEX"] + [f"{i}\tNA" for i in iids] if fids is None else
               ["#FID\tIID\tSEX"] + [f"{f}\t{i}\tNA" for f, i in zip(fids, iids)])
    prefix.with_suffix(".psam").write_text("\n".join(samples) + "\n")
    return prefix.with_suffix(".pgen")


def vcf_text(genotypes=KNOWN, snps=SNPS, alt=ALT, ref=REF, iids=IIDS):
    """A VCF of ``genotypes`` (``n x d`` ALT counts), written by hand."""
    records = ["\t".join(["1", str(j + 1), snp, ref[j], alt[j], ".", ".", ".", "GT",
                          *(CALLS[int(g)] for g in genotypes[:, j])])
               for j, snp in enumerate(snps)]
    return "\n".join([VCF_HEADER + "\t" + "\t".join(iids), *records]) + "\n"


def write_vcf(path, **known):
    """``vcf_text(**known)`` at ``path``: as text for ``.vcf``, through cyvcf2's Writer for
    ``.vcf.gz`` (bgzip) and ``.bcf``."""
    if path.suffix == ".vcf":
        path.write_text(vcf_text(**known))
        return path
    text = write_vcf(path.with_name(path.name + ".text.vcf"), **known)
    source = VCF(str(text))
    writer = Writer(str(path), source, mode="wz" if path.suffix == ".gz" else "wb")
    for record in source:
        writer.write_record(record)
    writer.close()
    source.close()
    return path


def bed_panel(tmp_path, name="panel", alt=ALT, ref=REF, snps=SNPS, freq=None):
    """A panel whose a1 is ``alt`` (the counted allele) and a2 ``ref``."""
    freq = np.linspace(0.2, 0.6, len(snps)) if freq is None else freq
    return write_panel(tmp_path / f"{name}.toml", name, snps, alt, ref, freq, 2.5)


@pytest.fixture(params=[".pgen", ".vcf", ".vcf.gz", ".bcf"])
def known(request, tmp_path):
    """The KNOWN genotypes in one format (PLINK 2, VCF text, bgzipped VCF, BCF), opened."""
    if request.param == ".pgen":
        return open_genotypes(write_pgen(tmp_path / "site"))
    return open_genotypes(write_vcf(tmp_path / f"site{request.param}"))


def test_each_format_reads_the_known_alt_counts_with_their_missing_calls(known):
    assert known.samples == 3 and known.snp_count == 4 and known.snps.tolist() == SNPS
    assert known.alleles[0].tolist() == ALT and known.alleles[1].tolist() == REF
    block = known.read_block([3, 0, 1, 3])
    assert block.dtype == np.int8 and block.shape == (3, 4)
    np.testing.assert_array_equal(block, KNOWN[:, [3, 0, 1, 3]])
    np.testing.assert_array_equal(known.read_block(np.arange(4)), KNOWN)
    assert known.iid.tolist() == IIDS
    assert known.fid.tolist() == (FIDS if isinstance(known, Plink2Fileset) else ["0"] * 3)


def test_a_psam_without_fid_and_a_pvar_in_bim_order_read_as_plink2_writes_them(tmp_path):
    fileset = Plink2Fileset(write_pgen(tmp_path / "site", fids=None, pvar_header=False))
    assert fileset.fid.tolist() == ["0"] * 3 and fileset.iid.tolist() == IIDS
    assert fileset.snps.tolist() == SNPS and fileset.alleles[0].tolist() == ALT
    np.testing.assert_array_equal(fileset.read_block([2, 1]), KNOWN[:, [2, 1]])


def test_vcf_half_calls_are_missing_and_haploid_calls_count_as_homozygous(tmp_path):
    path = tmp_path / "calls.vcf"
    path.write_text(VCF_HEADER + "\ta\tb\tc\td\n"
                    "1\t1\trs1\tA\tG\t.\t.\t.\tGT\t./1\t0/.\t1|1\t1|0\n"
                    "1\t2\trs2\tA\tG\t.\t.\t.\tGT\t1\t0\t.\t1/1\n")
    np.testing.assert_array_equal(VcfFile(path).read_block([0, 1]),
                                  [[MISSING, 2], [MISSING, 0], [2, MISSING], [1, 2]])


@pytest.mark.parametrize("suffix", [".pgen", ".vcf"])
def test_a_flipped_allele_is_refused_naming_the_snp_and_the_recode(tmp_path, suffix):
    path = (write_pgen(tmp_path / "site") if suffix == ".pgen"
            else write_vcf(tmp_path / "site.vcf"))
    flipped = bed_panel(tmp_path, "flip", alt=ALT[:1] + [REF[1]] + ALT[2:],
                        ref=REF[:1] + [ALT[1]] + REF[2:])
    with pytest.raises(InvalidDataError, match=r"site a: .* has ALT and REF swapped relative "
                                               r"to panel 'flip' for rs2; recode .* plink2 "
                                               r"--(pfile|vcf) .* --ref-allele force") as error:
        check_fileset(flipped, open_genotypes(path), "a")
    assert "secret" not in str(error.value)
    np.testing.assert_array_equal(check_fileset(bed_panel(tmp_path), open_genotypes(path),
                                                "a"), [0, 1, 2, 3])


@pytest.mark.parametrize("suffix", [".pgen", ".vcf"])
def test_a_snp_missing_from_the_file_is_refused_naming_it(tmp_path, suffix):
    path = (write_pgen(tmp_path / "site") if suffix == ".pgen"
            else write_vcf(tmp_path / "site.vcf"))
    panel = bed_panel(tmp_path, "wide", alt=ALT + ["A"], ref=REF + ["G"], snps=SNPS + ["rs9"])
    with pytest.raises(InvalidDataError, match=r"site a: 1 of the 5 SNPs of panel 'wide' are "
                                               r"not in .*site\.(pvar|vcf): rs9;"):
        check_fileset(panel, open_genotypes(path), "a")


@pytest.mark.parametrize("suffix", [".pgen", ".vcf"])
def test_a_multiallelic_panel_snp_is_refused_by_id_with_the_fix(tmp_path, suffix):
    alt = ALT[:2] + ["G,C"] + ALT[3:]
    path = (write_pgen(tmp_path / "site", alt=alt) if suffix == ".pgen"
            else write_vcf(tmp_path / "site.vcf", alt=alt))
    fileset = open_genotypes(path)
    with pytest.raises(InvalidDataError, match=r"multi-allelic variants: rs3; .*bcftools norm "
                                               r"-m- .*plink2 --max-alleles 2"):
        check_fileset(bed_panel(tmp_path), fileset, "a")
    with pytest.raises(InvalidDataError, match="rs3 is multi-allelic"):
        fileset.read_block([0, 2])
    np.testing.assert_array_equal(fileset.read_block([3, 0]), KNOWN[:, [3, 0]])


def test_damaged_files_are_refused_naming_files_and_counts_never_a_sample(tmp_path):
    pgen = write_pgen(tmp_path / "site")
    psam = pgen.with_suffix(".psam")
    psam.write_text(psam.read_text() + "secret-fam-4\tsecret-iid-4\tNA\n")
    with pytest.raises(InvalidDataError, match=r"site\.pgen holds 3 samples x 4 variants but "
                                               r"its \.psam lists 4 and its \.pvar 4") as count:
        Plink2Fileset(pgen)
    psam.write_text(psam.read_text() + "secret-fam-5\n")
    with pytest.raises(InvalidDataError, match=r"site\.psam line 6 has 1 fields, not 3") as line:
        Plink2Fileset(tmp_path / "site")
    vcf = tmp_path / "bad.vcf"
    vcf.write_text("secret-iid-1 is not a VCF\n")
    with pytest.raises(InvalidDataError, match=r"could not read .*bad\.vcf as a VCF") as bad:
        VcfFile(vcf)
    pgen.with_suffix(".pvar").unlink()
    with pytest.raises(InvalidDataError, match=r"site\.pvar does not exist: a PLINK 2 fileset"):
        Plink2Fileset(pgen)
    assert not any("secret" in str(e.value) for e in (count, line, bad))


def test_without_pgenlib_or_cyvcf2_the_error_names_the_genomics_extra(tmp_path, monkeypatch):
    pgen, vcf = write_pgen(tmp_path / "site"), write_vcf(tmp_path / "site.vcf")
    monkeypatch.setitem(sys.modules, "pgenlib", None)
    monkeypatch.setitem(sys.modules, "cyvcf2", None)
    for path in (pgen, vcf):
        with pytest.raises(ConfigurationError, match=r'needs (pgenlib|cyvcf2), .*pip install '
                                                     r'"fedpca\[genomics\]"'):
            open_genotypes(path)


def test_the_path_chooses_the_format_by_suffix_and_an_unknown_one_is_refused(tmp_path):
    write_pgen(tmp_path / "two")
    to_bed(tmp_path / "one.bed", KNOWN, properties={"sid": SNPS, "allele_1": ALT,
                                                     "allele_2": REF})
    for name, kind, data in [("two.pgen", Plink2Fileset, "two.pgen"),
                             ("two.pvar", Plink2Fileset, "two.pgen"),
                             ("one", PlinkFileset, "one.bed"),
                             ("one.fam", PlinkFileset, "one.bed")]:
        assert type(open_genotypes(tmp_path / name)) is kind
        assert data_file(tmp_path / name) == tmp_path / data
    for name in ("v.vcf", "v.vcf.gz", "v.bcf"):
        assert type(open_genotypes(write_vcf(tmp_path / name))) is VcfFile
        assert data_file(tmp_path / name) == tmp_path / name
    with pytest.raises(InvalidDataError, match=r"site\.txt names no genotype files fedpca "
                                               r"reads: give a PLINK 1 fileset .* a PLINK 2 "
                                               r"fileset .* or a VCF/BCF file"):
        open_genotypes(tmp_path / "site.txt")


@pytest.mark.parametrize("suffix", [".pgen", ".vcf.gz"])
def test_covariates_carry_the_psams_fid_and_iid_or_a_vcfs_id_twice(tmp_path, suffix):
    path = (write_pgen(tmp_path / "site") if suffix == ".pgen"
            else write_vcf(tmp_path / f"site{suffix}"))
    files = GenotypeFiles(path, bed_panel(tmp_path))
    basis = np.linalg.qr(np.random.default_rng(3).normal(size=(4, 2)))[0]
    genotype_scores(files, "a", basis).write(tmp_path / "pcs.covar")
    covariates = read_covariates(tmp_path / "pcs.covar")
    assert covariates.iid.tolist() == IIDS
    assert covariates.fid.tolist() == (FIDS if suffix == ".pgen" else ["0"] * 3)
    np.testing.assert_allclose(covariates.scores, files.rows("a").dense() @ basis, rtol=0,
                               atol=1e-14)
    assert (tmp_path / "pcs.covar").stat().st_mode & 0o777 == 0o600


def test_a_real_sites_policy_names_a_vcf_as_its_genotypes_and_site_check_reads_it(tmp_path):
    vcf = write_vcf(tmp_path / "biobank.vcf.gz")
    panel = bed_panel(tmp_path)
    path = write_policy_template(tmp_path / "site.toml", "biobank", None,
                                 genotypes=(vcf.name, panel.path.name))
    policy = load_site_policy(path)
    assert policy.data == vcf.resolve()  # the file whose hash the ledger records
    records = policy.load_records()
    assert isinstance(records, GenotypeRows) and isinstance(records.fileset, VcfFile)
    np.testing.assert_array_equal(records.calls(0), KNOWN)
    code, printed = run_cli(["site", "check", "--policy", str(path)])
    assert code == 0 and f"{vcf.resolve()} (VCF): every panel SNP present" in printed
    assert "secret" not in printed


def cohort_sites(tmp_path, sites=3, n=40, d=30, seed=7):
    """The same random genotypes (5% missing) as a .bed, a .pgen and a .vcf per site, and a
    panel of their SNPs: ``({format: [path per site]}, panel)``."""
    rng = np.random.default_rng(seed)
    freq = rng.uniform(0.1, 0.9, d)
    snps = [f"snp{j}" for j in range(d)]
    alt, ref = ["A"] * d, ["G"] * d
    paths = {".bed": [], ".pgen": [], ".vcf": []}
    for site in range(sites):
        calls = rng.binomial(2, freq, (n, d)).astype(np.int8)
        calls[rng.random((n, d)) < 0.05] = MISSING
        iids = [f"s{site}-{i}" for i in range(n)]
        prefix = tmp_path / f"site{site}"
        to_bed(prefix.with_suffix(".bed"), calls, properties={
            "fid": iids, "iid": iids, "sid": snps, "allele_1": alt, "allele_2": ref})
        paths[".bed"].append(prefix)
        paths[".pgen"].append(write_pgen(prefix, calls, snps, alt, ref, iids, iids))
        paths[".vcf"].append(write_vcf(prefix.with_suffix(".vcf"), genotypes=calls,
                                       snps=snps, alt=alt, ref=ref, iids=iids))
    panel = write_panel(tmp_path / "panel.toml", "cohort", snps, alt, ref,
                        np.clip(freq + rng.normal(0, 0.02, d), 0.05, 0.95), 6.0)
    return paths, panel


def test_the_same_genotypes_in_three_formats_give_the_same_rows_and_the_same_run(tmp_path):
    paths, panel = cohort_sites(tmp_path)
    runs, dense = {}, {}
    for suffix, sites in paths.items():
        run = GenotypeRun.build(sites, panel.path, functools.partial(
            DPSPCAScenario, k=2, rounds=2, epsilon=2.0, seed=3))
        rows = [run.site_rows(i) for i in range(run.sites)]
        dense[suffix] = np.vstack([r.dense() for r in rows])
        policy = DPSPCAPolicy(epsilon=2.0, delta=1e-6, rounds=2, clip_norm=panel.row_norm)
        runs[suffix] = run_dps_pca(rows, 2, panel.d, policy, seed=3).basis
    assert sum(r.clipped_rows() for r in rows) > 0  # the row bound is exercised
    for suffix in (".pgen", ".vcf"):
        np.testing.assert_array_equal(dense[suffix], dense[".bed"])
        np.testing.assert_array_equal(runs[suffix], runs[".bed"])
    mixed = GenotypeRun.build([paths[".bed"][0], paths[".pgen"][1], paths[".vcf"][2]],
                              panel.path, functools.partial(DPSPCAScenario, k=2, rounds=2,
                                                            epsilon=2.0, seed=3))
    np.testing.assert_array_equal(np.vstack([mixed.site_rows(i).dense() for i in range(3)]),
                                  dense[".bed"])


def test_a_power_step_over_a_vcf_holds_a_block_of_snps_never_the_whole_matrix(tmp_path):
    rng = np.random.default_rng(4)
    n, d = 500, 1500
    calls = rng.binomial(2, 0.3, (n, d)).astype(np.int8)
    snps = [f"snp{j}" for j in range(d)]
    path = write_vcf(tmp_path / "wide.vcf", genotypes=calls, snps=snps, alt=["A"] * d,
                     ref=["G"] * d, iids=[f"s{i}" for i in range(n)])
    panel = write_panel(tmp_path / "wide.toml", "wide", snps, ["A"] * d, ["G"] * d,
                        np.full(d, 0.3), 30.0)
    fileset = open_genotypes(path)
    peak = power_step_peak(GenotypeRows(fileset, panel, check_fileset(panel, fileset, "0"),
                                        block=100))
    # the dense float matrix is 6 MB, a block of 100 SNPs 0.4 MB (htslib's one-record buffer
    # is C memory, outside tracemalloc)
    assert peak < 1.5e6, peak

"""Genotypes at three real sites on loopback, end to end (the session's deployment,
``tests/loopback.py``, shared with tests/test_tables_deployment.py: one run, no deployment
of its own).

Three biobanks each hold a PLINK fileset of a simulated cohort, the consortium's SNP panel
(private frequencies: each run releases them first) and the panel's public start basis;
their policies (``fedpca site init --genotypes ... --panel ...``, ``start``) set the
secure-sum keys of ``deploy/README.md``'s example. The coordinator runs secure DPS-PCA
naming the panel's digest as the contract and the start by its SHA-256: the frequencies'
release, then the power step from the start shifted along them; the run completes with
each site's planned releases (1 + T), and each site writes its own samples' scores (on the
released frequencies) as a PLINK covariate file (``fedpca site project``), ids from its
``.fam``.
"""

import shutil
from pathlib import Path

import numpy as np
import pytest
from loopback import joined
from test_tables_deployment import RUN_TIMEOUT, completed_at_every_site, with_readme_keys

from fedpca.cli import main as cli_main
from fedpca.data.cohort import write_cohort
from fedpca.data.covariates import read_covariates
from fedpca.data.plink import PlinkFileset
from fedpca.data.snp_panel import load_panel
from fedpca.data.start_basis import START_HASH, load_start_basis
from fedpca.deployment.local import Site
from fedpca.secure.roster import write_roster, write_signing_key
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template

pytestmark = pytest.mark.federation

SITES = ("biobank-a", "biobank-b", "biobank-c")
#: Power rounds each policy calibrates for (one: every secure round is four message
#: exchanges on loopback, and the group shares its time budget).
ROUNDS = 1


@pytest.fixture(scope="module")
def biobanks(loopback, tmp_path_factory):
    """The cohort, the three sites' policies and the running deployment."""
    work = tmp_path_factory.mktemp("biobanks")
    cohort = write_cohort(work / "cohort", sites=3, samples_per_site=120, snps=300,
                          populations=3, fst=0.05, reference_size=150, k=2, seed=3,
                          standardise="private")
    keys = {name: write_signing_key(work / "secagg", name, "gwas") for name in SITES}
    roster = write_roster(work / "roster.toml", "gwas",
                          {name: entry for name, (_, entry) in keys.items()})
    policies = []
    for name, prefix in zip(SITES, cohort.sites):
        policy = write_policy_template(work / name / "site.toml", name, None,
                                       genotypes=(str(prefix), str(cohort.panel)),
                                       daily_epsilon=4.0, weekly_epsilon=4.0)
        with_readme_keys(policy, roster, keys[name][0],
                         [entry.fingerprint for other, (_, entry) in keys.items() if other != name])
        shutil.copyfile(cohort.start, policy.parent / "start.npy")
        policy.write_text(policy.read_text().replace(
            "rounds = 10", f'rounds = {ROUNDS}\nstart = "start.npy"'))
        load_site_policy(policy).open_ledger()
        policies.append(policy)
    sites = [Site(name, Path(load_site_policy(p).data), p) for name, p in zip(SITES, policies)]
    with joined(loopback, sites, work) as deployment:
        yield work, cohort, policies, deployment


@pytest.fixture(scope="module")
def run(biobanks):
    """A secure DPS-PCA run under the private panel, from its start."""
    work, cohort, _, deployment = biobanks
    panel = load_panel(cohort.panel)
    return deployment.run({"algorithm": "dps-pca", "dataset": "files", "contract": panel.digest,
                           "panel": str(cohort.panel), "start": str(cohort.start),
                           START_HASH: load_start_basis(cohort.start).digest,
                           "dim": panel.d, "s-hat": panel.d, "k": 2, "rounds": ROUNDS,
                           "min-sites": 3, "output": str(work / "dps.json")},
                          timeout=RUN_TIMEOUT)


def test_a_secure_genotype_run_completes_with_the_plans_releases_at_every_site(biobanks, run):
    _, cohort, policies, _ = biobanks
    # the frequencies' release, then T power steps (no initialisation: the start)
    for record in completed_at_every_site(run, SITES, policies, ROUNDS + 1):
        # planned as a private panel's run from the start the run named by its hash
        assert record["description"]["centring"] == "private-frequencies", record
        assert record["description"]["start"] == load_start_basis(cohort.start).digest


def test_each_site_writes_its_samples_scores_as_a_plink_covariate_file(biobanks, run):
    work, cohort, policies, _ = biobanks
    for i, policy in enumerate(policies):
        out = work / f"pcs-{i}.covar"
        assert cli_main(["site", "project", "--policy", str(policy), "--out", str(out)]) == 0
        covariates = read_covariates(out)
        fileset = PlinkFileset(cohort.sites[i])
        assert covariates.names == ("PC1", "PC2") and out.stat().st_mode & 0o777 == 0o600
        np.testing.assert_array_equal(covariates.iid, fileset.iid)
        assert np.isfinite(covariates.scores).all() and covariates.scores.shape == (120, 2)

"""The advice before spending (``fedpca.algorithms.panel_advice``): the panel's reference
keys, the predicted distances against simulated spiked models, and the plan's screen."""

import math

import numpy as np
import pytest

from fedpca.algorithms.genotype_centring import genotype_bounds, genotype_policy
from fedpca.algorithms.genotype_run import genotype_advice, genotype_server
from fedpca.algorithms.panel_advice import (
    equal_size,
    panel_advice,
    panel_distance,
    planned_distance,
    power_sigma,
)
from fedpca.data.cohort import write_cohort
from fedpca.data.snp_panel import ReferenceSpectrum, load_panel, write_panel
from fedpca.data.start_basis import load_start_basis
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import ritz_components, subspace_distance, thin_qr
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.scenarios.genotypes import GenotypeRun

SNPS, A1, A2 = ["rs1", "rs2", "rs3"], ["A", "C", "G"], ["G", "T", "A"]


def test_a_panel_states_its_reference_or_not_and_older_panels_keep_their_digest(tmp_path):
    plain = write_panel(tmp_path / "p.toml", "p", SNPS, A1, A2, np.full(3, 0.3), 1.0)
    assert plain.reference is None and "reference" not in plain.path.read_text()
    spectrum = ReferenceSpectrum(500, (12.5, 7.25))
    stated = write_panel(tmp_path / "s.toml", "p", SNPS, A1, A2, np.full(3, 0.3), 1.0,
                         reference=spectrum)
    assert stated.reference == spectrum and stated.digest != plain.digest
    text = stated.path.read_text()
    for edit in (text.replace("reference-size = 500\n", ""),  # one without the other
                 text.replace("[12.5, 7.25]", "[7.25, 12.5]"),  # not largest first
                 text.replace("[12.5, 7.25]", "[12.5, -1.0]"),
                 text.replace("= 500", "= 1")):
        stated.path.write_text(edit)
        with pytest.raises(ConfigurationError, match="reference-size = N"):
            load_panel(stated.path)


def spiked(rng, dim, spikes):
    """A covariance ``I + U diag(spikes) U^T`` and its ``U`` (random orthonormal)."""
    U = thin_qr(rng.standard_normal((dim, len(spikes))))
    return np.eye(dim) + (U * np.asarray(spikes)) @ U.T, U


def test_the_panels_predicted_distance_matches_sampled_reference_pcs():
    rng = np.random.default_rng(0)
    dim, size, spikes = 400, 200, (25.0, 12.0)
    covariance, U = spiked(rng, dim, spikes)
    root = np.linalg.cholesky(covariance)
    measured, variances = [], []
    for _ in range(8):
        sample = rng.standard_normal((size, dim)) @ root.T
        _, singular, right = np.linalg.svd(sample, full_matrices=False)
        measured.append(subspace_distance(right[:2].T, U))
        variances.append(singular[:2] ** 2 / size)
    spectrum = ReferenceSpectrum(size, tuple(np.mean(variances, axis=0)))
    predicted = panel_distance(spectrum, dim)
    assert predicted == pytest.approx(np.mean(measured), rel=0.1)
    # and it is not a constant: a reference twice the size is predicted closer
    assert panel_distance(ReferenceSpectrum(4 * size, spectrum.variances), dim) < 0.7 * predicted


@pytest.mark.parametrize("ritz", [False, True])
def test_the_runs_predicted_distance_matches_a_noisy_power_step(ritz):
    rng = np.random.default_rng(1)
    dim, records, spikes, k = 300, 2000, (30.0, 15.0), 2
    covariance, U = spiked(rng, dim, spikes)
    # sample eigenvalues of a reference of 10 * d genomes, as a panel states them
    spectrum = ReferenceSpectrum(10 * dim, tuple((1 + s) * (1 + 0.1 / s) for s in spikes))
    columns = k + 3
    basis = thin_qr(np.hstack([U, rng.standard_normal((dim, columns - k))])) if ritz else U
    sigma = 0.6 * records * spikes[-1] / math.sqrt(dim if not ritz else 1.5)
    measured = []
    for _ in range(20):
        product = records * covariance @ basis + rng.normal(0.0, sigma, basis.shape)
        found = (ritz_components(basis, product, k) if ritz
                 else thin_qr(product))
        measured.append(subspace_distance(found, U))
    predicted = planned_distance(spectrum, dim, records, sigma, columns if ritz else None)
    assert predicted == pytest.approx(np.mean(measured), rel=0.2)
    assert planned_distance(spectrum, dim, 4 * records, sigma,
                            columns if ritz else None) < 0.5 * predicted


def test_noisy_frequencies_displace_the_last_component_when_their_shift_outweighs_it():
    rng = np.random.default_rng(2)
    dim, records, spikes = 300, 5000, (30.0, 10.0)
    covariance, U = spiked(rng, dim, spikes)
    spectrum = ReferenceSpectrum(10**6, tuple(1 + s for s in spikes))
    f = rng.uniform(0.1, 0.9, dim)
    for shift in (0.5, 3.0, 20.0, 40.0):  # ||e||^2 against the last spike's 10
        # the frequency sd per SNP that makes E ||e||^2 = shift
        frequency_sigma = math.sqrt(shift / np.sum(2.0 / (records**2 * f * (1 - f))))
        measured = []
        for _ in range(10):
            e = rng.normal(0.0, 1.0, dim) * np.sqrt(2 * frequency_sigma**2 / (
                records**2 * f * (1 - f)))
            centred_off = covariance + np.outer(e, e)  # rows centred at noisy frequencies
            basis = thin_qr(np.column_stack([U, e]))  # the shifted start holds e
            measured.append(subspace_distance(
                ritz_components(basis, centred_off @ basis, 2), U))
        predicted = planned_distance(spectrum, dim, records, 1e-9, 3, frequency_sigma, f)
        assert predicted == pytest.approx(np.mean(measured), abs=0.1), shift
    assert planned_distance(spectrum, dim, records, 1e-9, 3, frequency_sigma, f) > 0.8


def test_the_size_it_names_is_where_the_run_meets_the_panel():
    spectrum = ReferenceSpectrum(1000, (40.0, 20.0))
    advice = panel_advice(spectrum, 5000, 10_000, 40_000.0)
    assert advice.worse and "WARNING" in advice.message()
    assert f"{advice.needed:,}" in advice.message()
    assert planned_distance(spectrum, 5000, advice.needed, 40_000.0) <= advice.panel
    assert planned_distance(spectrum, 5000, int(advice.needed / 1.02), 40_000.0) > advice.panel
    large = panel_advice(spectrum, 5000, advice.needed, 40_000.0)
    assert not large.worse and large.message().startswith("planned accuracy")
    assert equal_size(lambda n: 2.0, 1.0, 10) is None  # never: no size named
    with pytest.raises(ConfigurationError, match="panel advice needs"):
        panel_advice(spectrum, 5000, 10, 1.0, 3, 5.0, None)


def test_the_genotype_advice_reads_the_noise_of_the_runs_own_sums(tmp_path):
    dim, k, sites, records = 400, 2, 5, 2000
    spectrum, f = ReferenceSpectrum(500, (20.0, 10.0)), np.full(dim, 0.3)
    np.save(tmp_path / "start.npy", thin_qr(np.random.default_rng(5).standard_normal((dim, k))))
    start = load_start_basis(tmp_path / "start.npy")
    for discrete in (False, True):
        policy = genotype_policy(1.0, 1e-6, 1, 30.0, True, secure_min_sites=sites,
                                 discrete=discrete)
        server, _ = genotype_server(policy, dim, k, 1, sites, records, start=start,
                                    reference=f, seed=3)
        sigma = (server.inner.secure[1][1].calibration.central_sigma if discrete else
                 power_sigma(policy.algorithm_policy(genotype_bounds(dim)), sites))
        advice = genotype_advice(server, policy, sites, spectrum, sites * records)
        expected = panel_advice(spectrum, dim, sites * records, sigma, k + 1,
                                server.centring.noise_sigma, f)
        assert advice == expected
        assert sigma > 0 and server.centring.noise_sigma > 0
        assert genotype_advice(server, policy, sites, None, sites * records) is None
        unshifted, _ = genotype_server(policy, dim, k, 1, sites, records, start=start, seed=3)
        assert genotype_advice(unshifted, policy, sites, spectrum, sites * records) is None


def test_the_plan_screen_warns_a_small_run_and_names_what_to_do(tmp_path):
    files = write_cohort(tmp_path, sites=3, samples_per_site=60, snps=300, reference_size=200,
                         seed=4, standardise="private")
    assert load_panel(files.panel).reference.size == 200

    def screen(epsilon):
        run = GenotypeRun.build([str(p) for p in files.sites], files.panel,
                                lambda **sizes: DPSPCAScenario(
                                    **sizes, k=2, rounds=1, epsilon=epsilon,
                                    start=str(files.start)))
        return run.header()[-1]

    assert screen(1.0).startswith("WARNING: the panel's PCs alone are likely closer")
    assert "fedpca site project" in screen(1.0) and str(tmp_path) not in screen(1.0)
    assert screen(100.0).startswith("planned accuracy")

    # a public panel's run from the start: the power step's whole d-dimensional noise
    public = write_cohort(tmp_path / "public", sites=3, samples_per_site=60, snps=300,
                          reference_size=200, seed=4)
    run = GenotypeRun.build([str(p) for p in public.sites], public.panel,
                            lambda **sizes: DPSPCAScenario(**sizes, k=2, rounds=1, epsilon=1.0,
                                                           start=str(public.start)))
    advice = run.advice()
    assert advice.worse and advice.needed > advice.records == 180

"""Secure sums with the distributed discrete Gaussian: DPdisPCA's secure-sum mode (a site's
refusals come before any charge, its ledger accounts the discrete release, the decoded sum is
the pooled second moment plus noise of the calibrated size, the result reaches central
Analyze Gauss, the audit passes the shipped mode and catches half the noise) and DPS-PCA with
discrete noise (the one-site accuracy that per-site noise loses)."""

import dataclasses
import functools
import math

import numpy as np
import pytest

from fedpca.algorithms.central import run_analyze_gauss
from fedpca.algorithms.dpdis_pca import (
    VARIANT_FULL,
    VARIANT_SECURE,
    DPdisPCAPolicy,
    DPdisPCASite,
    pooled_second_moment,
    run_dpdis_pca,
    secure_sum_for,
)
from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy, run_dps_pca, secure_sums
from fedpca.algorithms.kplane import KPlanePolicy, KPlaneSite, run_sulq_kplane
from fedpca.algorithms.kplane import secure_sum_for as kplane_secure_sum
from fedpca.algorithms.secure_sum import SecureSum, SumDescription
from fedpca.audit.attack import run_audit
from fedpca.audit.broken import halved_secure_sum_noise
from fedpca.audit.targets import audit_target
from fedpca.data.dpdis_model import DecayingSpectrumModel
from fedpca.data.synthetic import SparseSpikedModel, site_data
from fedpca.errors import ConfigurationError, InvalidRequestError, ParameterError
from fedpca.linalg.subspace import energy_ratio, subspace_distance
from fedpca.scenarios.kplane import KPlaneScenario

pytestmark = pytest.mark.slow  # the audits draw 20,000 exact discrete Gaussian vectors

POLICY = DPdisPCAPolicy(epsilon=1.0, delta=1e-5, secure_min_sites=4)
MODEL = DecayingSpectrumModel(dim=12, seed=0)
SITES = [MODEL.sample(300, stream=i) for i in range(4)]
#: Audit trials: tests/test_audit.py's power calculation (epsilon 3, delta 1e-3: 3000
#: evaluation trials, paired, separate sigma from sigma / 2; 2000 do not reliably).
TRIALS, CALIBRATION = 3000, 200
#: A correct mechanism passes with fewer trials too (fewer only weaken the lower bound).
PASS_TRIALS, PASS_CALIBRATION = 1500, 500


def secure(dim=12, sizes=(300,) * 4, **changes):
    public, grid = secure_sum_for(POLICY, dim, max(sizes), len(sizes), rotation_seed=5)
    return SecureSum(**{**public.__dict__, **changes}), grid


@pytest.mark.parametrize("changes", [
    {"sites_in_sum": 100_000},  # the sum of 100,000 messages would leave [-m/2, m/2)
    {"max_records": 10**9},  # a public bound so loose the statistic's norm could wrap it
])
def test_a_site_refuses_a_sum_whose_modulus_would_overflow_before_any_release(changes):
    site = DPdisPCASite(SITES[0], POLICY, site="a", seed=1)
    public, _ = secure()
    with pytest.raises(InvalidRequestError, match="a modular sum can wrap") as refused:
        site.release(VARIANT_SECURE, secure=SecureSum(**{**public.__dict__, **changes}))
    assert site.ledger.count == 0
    # the refusal quotes public quantities only: the same text for another site's records
    other = DPdisPCASite(SITES[1], POLICY, site="a", seed=1)
    with pytest.raises(InvalidRequestError) as again:
        other.release(VARIANT_SECURE, secure=SecureSum(**{**public.__dict__, **changes}))
    assert str(again.value) == str(refused.value)


@pytest.mark.parametrize("changes,match", [
    ({"max_records": 299}, "max_records=299"),
    ({"sites_in_sum": 3}, "fewer than this site's minimum M=4"),
    ({"modulus": 2**12}, "modulus"),
    # a coordinator naming a smaller sensitivity would make the site calibrate less noise
    ({"sensitivity": 0.5}, "sensitivity 0.5"),
    ({"norm_per_record": 0.5}, "norm per record 0.5"),
])
def test_a_site_refuses_a_sum_it_cannot_join_before_any_charge(changes, match):
    site = DPdisPCASite(SITES[0], POLICY, site="a", seed=1)
    public, _ = secure()
    with pytest.raises((InvalidRequestError, ParameterError), match=match):
        site.release(VARIANT_SECURE, secure=SecureSum(**{**public.__dict__, **changes}))
    assert site.ledger.count == 0


def test_the_variant_must_match_the_sites_policy():
    secure_site = DPdisPCASite(SITES[0], POLICY, site="a")
    with pytest.raises(InvalidRequestError, match="only inside a secure sum"):
        secure_site.release(VARIANT_FULL)
    plain = DPdisPCASite(SITES[0], DPdisPCAPolicy(epsilon=1.0, delta=1e-5), site="b")
    with pytest.raises(InvalidRequestError, match="own noise only"):
        plain.release(VARIANT_SECURE, secure=secure()[0])
    assert secure_site.ledger.count == plain.ledger.count == 0


def test_the_ledger_accounts_the_discrete_release_and_refuses_a_second():
    public, grid = secure()
    site = DPdisPCASite(SITES[0], POLICY, site="a", seed=1)
    message = site.release(VARIANT_SECURE, secure=public)
    assert message.shape == (grid.calibration.padded,) and message.dtype == np.int64
    assert 0 <= message.min() and message.max() < grid.modulus
    assert site.ledger.count == 1 and site.ledger.releases[0].discrete
    assert site.ledger.epsilon_spent() == pytest.approx(grid.calibration.epsilon, rel=1e-9)
    assert grid.calibration.epsilon <= POLICY.epsilon
    with pytest.raises(Exception, match="allows 1 releases"):
        site.release(VARIANT_SECURE, secure=public)


def test_the_decoded_sum_is_the_pooled_second_moment_plus_calibrated_noise():
    public, grid = secure()
    truth = sum(X.T @ X for X in SITES)[np.triu_indices(12)]
    errors = []
    for trial in range(60):
        sites = [DPdisPCASite(X, POLICY, site=str(i), seed=trial) for i, X in enumerate(SITES)]
        decoded = public.decode([s.release(VARIANT_SECURE, secure=public) for s in sites])
        errors.append(decoded - truth)
    errors = np.concatenate(errors)
    sd = grid.calibration.central_sigma  # the discrete Gaussians' variance is just below
    # 60 x 78 draws: the mean is 0 and the spread is the calibrated one (plus rounding)
    assert abs(errors.mean()) < 5 * sd / math.sqrt(errors.size)
    assert errors.std() == pytest.approx(sd, rel=0.05)


def test_the_secure_sum_reaches_central_analyze_gauss_and_beats_per_site_noise():
    model = DecayingSpectrumModel(dim=60, seed=0)
    sites = [model.sample(400, stream=i) for i in range(20)]
    pooled = pooled_second_moment(sites)
    policy = DPdisPCAPolicy(epsilon=1.0, delta=1e-5, secure_min_sites=20)
    ratios = {"secure": [], "per-site": [], "central": []}
    for seed in range(3):
        ratios["secure"].append(run_dpdis_pca(sites, 5, policy=policy, seed=seed,
                                              variant=VARIANT_SECURE,
                                              evaluation=pooled).history[0]["energy_ratio"])
        ratios["per-site"].append(run_dpdis_pca(
            sites, 5, policy=DPdisPCAPolicy(epsilon=1.0, delta=1e-5), seed=seed,
            variant=VARIANT_FULL, weighting="samples", evaluation=pooled,
        ).history[0]["energy_ratio"])
        central = run_analyze_gauss(np.vstack(sites), 5, 1.0, 1e-5, seed=seed)
        ratios["central"].append(energy_ratio(central.basis, pooled))
    mean = {key: float(np.mean(value)) for key, value in ratios.items()}
    assert mean["secure"] > 0.9 * mean["central"]
    assert mean["secure"] > mean["per-site"] + 0.2


@pytest.mark.parametrize("mechanism,trials", [
    ("dpdis-pca/secure-sum", (PASS_TRIALS, PASS_CALIBRATION)),
    # the same site-side mechanism (discrete_release) on k-plane's message: a shorter run
    ("sulq-kplane/secure-sum", (800, 300)),
])
def test_the_audit_passes_the_secure_sums(mechanism, trials):
    result = run_audit(audit_target(mechanism), *trials, seed=7)
    assert result.claimed_epsilon <= 3.0 + 1e-9
    assert result.passed, result.to_dict()


def test_the_audit_catches_a_secure_sum_with_half_the_noise():
    with halved_secure_sum_noise():
        result = run_audit(audit_target("dpdis-pca/secure-sum"), TRIALS, CALIBRATION, seed=7)
    assert not result.passed, result.to_dict()


# --- DPS-PCA with discrete noise --------------------------------------------------------

DPS_MODEL = SparseSpikedModel(dim=60, k=2, sparsity=6, seed=0)


@functools.cache
def discrete_policy():
    """The sites' secure-sum policy, calibrated when first asked."""
    return DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=3, secure_min_sites=10, discrete=True)


def dps_sites(count: int) -> list[np.ndarray]:
    return [site_data(DPS_MODEL, 20_000, count, i) for i in range(count)]


def test_a_discrete_policy_needs_its_minimum_and_a_described_sum():
    with pytest.raises(ConfigurationError, match="needs secure_min_sites"):
        DPSPCAPolicy(discrete=True)
    site = DPSPCASite(dps_sites(10)[0], discrete_policy(), site="a")
    init, _ = secure_sums(discrete_policy(), 60, 2, 2000, 10, rotation_seed=1)
    for request in ({}, {"secure": init[0], "min_noise_multiplier": 2.0}):
        with pytest.raises(InvalidRequestError, match="only inside a secure sum"):
            site.release_diagonal(**request)
    assert site.ledger.count == 0


def test_discrete_dps_pca_matches_one_site_where_per_site_noise_fails():
    distance = {}
    for label, count, policy in (
        ("one site", 1, DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=3)),
        ("per-site", 10, DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=3)),
        ("discrete", 10, discrete_policy()),
    ):
        runs = [run_dps_pca(dps_sites(count), 2, 12, policy, seed=seed) for seed in range(3)]
        # the median: a rare failed initialisation (wrong support) is not what this compares
        distance[label] = float(np.median([subspace_distance(r.basis, DPS_MODEL.truth)
                                           for r in runs]))
        if label == "discrete":  # T + 1 discrete releases, within the site's budget
            assert runs[0].privacy["epsilon_achieved"] <= 1.0
            assert runs[0].history[-1]["epsilon_spent"] <= 1.0 + 1e-9
    assert distance["discrete"] < 1.25 * distance["one site"] + 0.02
    assert distance["per-site"] > 2 * distance["discrete"]


def test_secure_kplane_matches_one_site_where_per_site_noise_fails():
    scenario = KPlaneScenario(sites=10, dim=5, samples=5000, clusters=2, subspace_dim=2,
                              rounds=4, epsilon=1.0, seed=7)
    data = scenario.all_site_data()
    cost = {}
    for label, sites, m in (("one site", [np.vstack(data)], None), ("per-site", data, None),
                            ("secure", data, 10)):
        policy = KPlanePolicy(epsilon=1.0, delta=1e-5, rounds=4, secure_min_sites=m)
        runs = [run_sulq_kplane(sites, 2, 2, policy, seed=s, evaluate=scenario.evaluate)
                for s in range(7)]
        # the median: k-plane's local minima from a bad public start hit every variant alike
        cost[label] = float(np.median([r.history[-1]["cost"] for r in runs]))
        if label == "secure":
            assert runs[0].privacy["mechanism"] == "distributed-discrete-gaussian"
            assert runs[0].history[-1]["epsilon_spent"] <= 1.0 + 1e-9
    assert cost["secure"] < 1.5 * cost["one site"] + 1e-4
    assert cost["per-site"] > 3 * cost["secure"]


def test_a_secure_kplane_site_refuses_a_request_outside_its_sum_before_any_charge():
    policy = KPlanePolicy(epsilon=1.0, delta=1e-5, rounds=2, secure_min_sites=4)
    site = KPlaneSite(SITES[0][:, :5], policy, site="a", seed=1)
    bases = [np.eye(5)[:, :2], np.eye(5)[:, 2:4]]
    public, _ = kplane_secure_sum(policy, 5, 2, 300, 4, rotation_seed=3)
    for secure, floor in ((None, None), (public, 2.0)):
        with pytest.raises(InvalidRequestError, match="only inside a secure sum"):
            site.release_clusters(bases, floor, secure=secure)
    halved = SecureSum(**{**public.__dict__, "sensitivity": public.sensitivity / 2})
    with pytest.raises(InvalidRequestError, match="sensitivity"):
        site.release_clusters(bases, secure=halved)
    assert site.ledger.count == 0
    message = site.release_clusters(bases, secure=public)
    assert message.dtype == np.int64 and site.ledger.count == 1


def test_a_secure_sum_at_genomics_width_runs_within_a_sites_default_draw_limit():
    """DPS-PCA's power step at d = 20,000 (k = 2): the grid needs more draws than the old
    fixed limit of 16, within a site's default limit, and a site whose policy allows fewer
    refuses it naming the key it can set."""
    from fedpca.algorithms.site_limits import DEFAULT_MAX_NOISE_DRAWS, SiteLimits
    from fedpca.dp.mechanisms import power_step_sensitivity

    secure = SecureSum(sensitivity=power_step_sensitivity(1.0), max_records=10_000,
                       norm_per_record=1.0, dimension=20_000 * 2, sites_in_sum=10,
                       rotation_seed=0)
    cal = secure.grid(1.0, 1e-6, 11, 10).calibration
    assert 16 < cal.draws <= DEFAULT_MAX_NOISE_DRAWS and cal.epsilon <= 1.0
    SiteLimits().require_draws(cal.draws, cal.padded, "site")
    with pytest.raises(InvalidRequestError, match=r"needs \d+ exact discrete Gaussian draws.*"
                                                  r"raises limits.max-noise-draws"):
        SiteLimits(max_noise_draws=16).require_draws(cal.draws, cal.padded, "site")


def test_the_grid_does_not_depend_on_the_draw_cap_when_a_smaller_one_serves():
    from fedpca.dp.distributed_gaussian import choose_grid

    common = {"releases": 3, "sensitivity": math.sqrt(2), "norm_bound": 400.0,
              "dimension": 300, "sites": 3}
    grids = [choose_grid(1.0, 1e-6, **common, max_draws=cap) for cap in (16, 64, 1024)]
    assert len({(g.gamma, g.calibration.sigma_sq, g.calibration.draws) for g in grids}) == 1


def test_the_runs_description_reads_back_exactly_and_refuses_anything_else_without_quoting_it():
    agreed, _ = secure()
    other = dataclasses.replace(agreed, rotation_seed=6)
    description = SumDescription(4, 1, (agreed, None, other, agreed))
    text = description.to_text()
    assert SumDescription.from_text(text, "a") == description
    assert description.round_sum(3) == other and description.round_sum(2) is None
    assert description.round_sum(5) is None and text.count('"rotation_seed"') == 2
    huge = "9" * 100_000
    for bad, why in [
        ("{", "is not JSON"),
        (text.replace('"colluders":1', '"colluders":true'), "min_sites or colluders"),
        (text.replace('"rounds":[0,-1,1,0]', '"rounds":[0,-1,2,0]'), "names a sum it does not"),
        (text.replace('"draws":', '"drawz":'), "missing or unexpected fields"),
        (text.replace('"rotation_seed":5', '"rotation_seed":5.5'), "sum_rotation_seed"),
        (text.replace('"rotation_seed":5', f'"rotation_seed":"{huge}"'), "sum_rotation_seed"),
        (text.replace(",", ", "), "canonical form"),
    ]:
        with pytest.raises(InvalidRequestError, match=why) as refused:
            SumDescription.from_text(bad, "a")
        assert len(str(refused.value)) < 400 and huge not in str(refused.value)


def test_the_agreed_noise_is_the_sites_own_calibration_and_never_less():
    """A site checks the noise the members agreed on against its own policy: the noise the
    honest coordinator derives from that policy is exactly the site's own calibration; any
    less (per draw, or draws) is refused; more is accepted and recorded as it is."""
    agreed, grid = secure()
    assert agreed.agreed and agreed.grid_step == grid.gamma
    assert agreed.agreed_noise(POLICY) == grid.calibration
    with pytest.raises(ConfigurationError, match="is below what epsilon=1"):
        dataclasses.replace(agreed, sigma_sq=agreed.sigma_sq - 1).agreed_noise(POLICY)
    louder = dataclasses.replace(agreed, draws=2).agreed_noise(POLICY)
    assert louder.draws == 2 and louder.epsilon < grid.calibration.epsilon
    assert louder.release("x").sigma == pytest.approx(
        math.sqrt(2) * grid.calibration.release("x").sigma)
    with pytest.raises(ConfigurationError, match="names no agreed grid"):
        agreed.public_part().agreed_noise(POLICY)

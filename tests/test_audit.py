"""The empirical privacy audit: every shipped mechanism passes, under-noised variants are caught.

Power calculation (why the audits run at epsilon 3, delta 1e-3, 3000 + 200 trials). On the
worst-case pair a release with noise multiplier ``z`` projects to ``N(0, 1)`` versus
``N(1/z, 1)``. With ``N`` evaluation trials and 95% Clopper-Pearson bounds, the bound an
optimal threshold is expected to give (``fedpca.audit.attack.epsilon_lower_bound`` at the expected
counts) is, at ``N = 4000``:

  claim (eps, delta)            z               correct       (b) sensitivity 1  (a) sigma/2
  3, 1e-3 (one release)         1.04            1.80          2.71               3.88
  1.96, 1e-3 (DPS-PCA, 1 of 2)  1.47            1.15          1.80               2.71
  4 / 6 / 8, 1e-5               1.08/0.76/0.60  1.7/2.6/3.4   2.6/3.7/4.6        3.7/5.0/6.0

so halving sigma is caught (bound above the claim) at delta 1e-3 but not at delta 1e-5, where
the claim lives at false-positive rates far below 1 / N; at ``N = 3000`` (a) is expected at
3.69 against the claim 3 (spread about 0.33), at ``N = 2000`` at 3.43, too close. The
sqrt(2) understatement (b) is too small to push the bound past the claim (that takes about
50,000 trials per dataset: expected 3.58 > 3), so (b) is compared with the correct mechanism
on the *same* noise draws (same seed: each trial's noise is the correct one divided by
sqrt(2)): a paired difference of the two bounds, and of the two separations. A seeded audit
also pairs each trial's two releases (common random numbers, ``fedpca.audit.attack``): the
test's direction is then exact, and 200 calibration trials per dataset choose it and the
threshold. Measured over 10 seeds (``benchmarks/audit_power.py``, results in
``benchmarks/results/audit_power.md``) at 3000 + 200 trials: every correct mechanism passed,
(a) was caught 10/10 for every mechanism and for the secure sum of tests/test_secure_sum.py
(smallest margin over the claim 0.17), (b) raised the bound by more than 0.25 10/10
(smallest gain 0.28), and the separation grew by 2 (a) and sqrt(2) (b) within 0.005; at
2000 + 200, (a) escaped 5 audits of 80.
"""

import argparse
import json
import math

import numpy as np
import pytest

import fedpca.algorithms.central as central
from fedpca.audit.attack import (
    AuditTarget,
    clopper_pearson,
    epsilon_lower_bound,
    run_audit,
    worst_case_basis,
    worst_case_neighbours,
)
from fedpca.audit.broken import UNDER_NOISED, add_remove_sensitivity
from fedpca.audit.broken import halved_noise as halved
from fedpca.audit.targets import MECHANISMS, AuditSettings, audit_target, upper_triangle
from fedpca.commands.audit import register_audit_command
from fedpca.errors import ConfigurationError
from fedpca.dp.calibration import pld_epsilon
from fedpca.dp.exact_noise import EXACT, grid_step
from fedpca.dp.mechanisms import (
    diagonal_sensitivity,
    power_step_sensitivity,
    upper_triangle_sensitivity,
)

TRIALS = 3000
CALIBRATION = 200
#: The attack's own randomness (every trial's noise seed); the noise is the mechanism's.
SEED = 2024

#: Audited in tests/test_secure_sum.py with fewer trials: the exact discrete Gaussian sampler
#: makes each of its releases about 100 times slower than a continuous one.
SLOW = {name for name in MECHANISMS if name.endswith("/secure-sum")}
FAST_MECHANISMS = [name for name in MECHANISMS if name not in SLOW]


def audit(name: str, settings: AuditSettings | None = None):
    return run_audit(audit_target(name, settings), TRIALS, CALIBRATION, seed=SEED)


@pytest.fixture(scope="module")
def correct():
    """Every shipped mechanism, audited once (shared by the comparisons below)."""
    return {name: audit(name) for name in FAST_MECHANISMS}


@pytest.fixture
def halved_noise():
    """Bug (a): every site and curator draws noise of sigma / 2 while its ledger, its
    calibration and its claim still say sigma (exact noise: half the grid steps)."""
    with halved():
        yield


# --- the statistics ---------------------------------------------------------------------

def test_clopper_pearson_matches_closed_forms_and_brackets_the_rate():
    n, alpha = 200, 0.05
    lower, upper = clopper_pearson(np.array([0, n]), n, alpha)
    assert lower[0] == 0 and upper[1] == 1
    assert math.isclose(upper[0], 1 - (alpha / 2) ** (1 / n))
    assert math.isclose(lower[1], (alpha / 2) ** (1 / n))
    lo, hi = clopper_pearson(30, n, alpha)
    assert lo < 30 / n < hi and 0.10 < lo < 0.11 and 0.20 < hi < 0.21


def test_epsilon_lower_bound_is_the_larger_of_the_two_tests():
    assert math.isclose(float(epsilon_lower_bound(0.01, 0.5, 0.0)), math.log(50))
    assert math.isclose(float(epsilon_lower_bound(0.5, 0.01, 0.0)), math.log(50))
    assert math.isclose(float(epsilon_lower_bound(0.01, 0.5, 0.1)), math.log(40))
    assert float(epsilon_lower_bound(0.5, 0.5, 1e-5)) == 0.0  # a coin flip proves nothing
    assert float(epsilon_lower_bound(1.0, 1.0, 1e-5)) == 0.0  # non-positive numerators


def test_worst_case_neighbours_attain_every_sensitivity():
    C, d = 1.7, 5
    pair = worst_case_neighbours(6, d, C, seed=3)
    changed = np.flatnonzero((pair.original != pair.neighbour).any(axis=1))
    assert changed.tolist() == [0]
    assert np.linalg.norm(pair.original, axis=1).max() <= C * (1 + 1e-12)
    A, B = pair.original.T @ pair.original, pair.neighbour.T @ pair.neighbour
    Q = worst_case_basis(d)
    assert math.isclose(np.linalg.norm(np.diag(B - A)), diagonal_sensitivity(C))
    assert math.isclose(np.linalg.norm(upper_triangle(B - A)), upper_triangle_sensitivity(C))
    assert math.isclose(np.linalg.norm((B - A) @ Q), power_step_sensitivity(C))


def gaussian_target(shift: float, claimed: float = 1.0) -> AuditTarget:
    """A Flower-free Gaussian mechanism: ``N(shift * neighbour e_1, I_3)``."""

    def release(neighbour: bool, seed: int | None) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(3) + shift * neighbour * np.eye(3)[0]

    return AuditTarget("gaussian", release, claimed, 1e-5, "synthetic")


def test_an_output_that_ignores_the_record_gives_no_bound_and_seeds_reproduce():
    first = run_audit(gaussian_target(0.0), trials=500, calibration_trials=100, seed=7)
    again = run_audit(gaussian_target(0.0), trials=500, calibration_trials=100, seed=7)
    assert first.epsilon_lower == 0.0 and first.passed and first.seeded
    assert first.to_dict() == again.to_dict()


def test_a_noiseless_release_is_caught():
    target = AuditTarget("leak", lambda neighbour, seed: np.array([float(neighbour)]), 1.0,
                         1e-5, "no noise")
    result = run_audit(target, trials=500, calibration_trials=10, seed=0)
    assert result.false_positives == result.false_negatives == 0
    assert result.epsilon_lower > 4 and not result.passed and result.margin < 0


@pytest.mark.parametrize("kwargs,match", [
    ({"trials": 50}, "trials must be >= 100"),
    ({"calibration_trials": 5}, "calibration_trials must be >= 10"),
    ({"alpha": 1.0}, "alpha must be in"),
])
def test_bad_audit_parameters_are_refused(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        run_audit(gaussian_target(1.0), **kwargs)


def test_a_release_of_changing_shape_is_refused():
    target = AuditTarget("ragged", lambda neighbour, seed: np.zeros(2 + neighbour), 1.0, 1e-5,
                         "bad")
    with pytest.raises(ConfigurationError, match="ragged: every release must be a 1-D array of 2"):
        run_audit(target, trials=100, calibration_trials=10, seed=0)


def test_unknown_mechanisms_and_impossible_settings_are_refused():
    with pytest.raises(ConfigurationError, match="unknown mechanism 'pca'; choose one of"):
        audit_target("pca")
    with pytest.raises(ConfigurationError, match="dim >= 2"):
        audit_target("dpdis-pca", AuditSettings(dim=1))


# --- the real mechanisms ----------------------------------------------------------------

@pytest.mark.parametrize("name", FAST_MECHANISMS)
def test_every_shipped_mechanism_passes(correct, name):
    result = correct[name]
    print(f"{name}: eps_lb {result.epsilon_lower:.3f} <= claimed {result.claimed_epsilon:.3f} "
          f"(margin {result.margin:.3f})")
    assert result.passed, result.to_dict()
    assert result.trials == TRIALS and result.confidence == 0.95


def test_the_audited_sites_draw_exact_noise_like_a_real_site():
    settings = AuditSettings()
    assert settings.noise_sampler == EXACT
    # DPdisPCA's A^_s (full variant): grid points of its sensitivity's grid
    values = audit_target("dpdis-pca", settings).release(False, 1)
    sensitivity = upper_triangle_sensitivity(settings.clip_norm) / settings.samples
    gamma = grid_step(sensitivity, values.size)
    assert np.array_equal(values / gamma, np.round(values / gamma))


@pytest.mark.parametrize("name", UNDER_NOISED)
def test_half_the_claimed_noise_is_caught(correct, halved_noise, name):
    result = audit(name)
    print(f"{name}: eps_lb {result.epsilon_lower:.3f} > claimed {result.claimed_epsilon:.3f} "
          "with sigma / 2")
    assert math.isclose(result.claimed_epsilon, correct[name].claimed_epsilon)  # unchanged
    assert not result.passed, result.to_dict()  # eps_lb > claimed: a refuted claim
    assert result.separation > 1.7 * correct[name].separation  # 2 in expectation


def test_half_of_mod_sulqs_noise_is_still_private_and_passes(halved_noise):
    settings = AuditSettings()
    result = audit("mod-sulq", settings)
    privacy = central.mod_sulq_release(
        settings.neighbours().original, settings.epsilon, settings.delta
    ).privacy
    halved = pld_epsilon((privacy["noise_multiplier"] / 2,), settings.delta)
    assert halved < result.claimed_epsilon
    assert result.passed


@pytest.mark.parametrize("name", UNDER_NOISED)
def test_the_add_remove_sensitivity_raises_the_bound(correct, name):
    with add_remove_sensitivity(name):  # bug (b): sqrt(2) too small in the calibration
        result = audit(name)
    print(f"{name}: eps_lb {result.epsilon_lower:.3f} with sensitivity 1, "
          f"{correct[name].epsilon_lower:.3f} with sqrt(2)")
    # exact noise: the claim moves by the grid's rounding term and integer sigma (< 0.1%)
    assert math.isclose(result.claimed_epsilon, correct[name].claimed_epsilon, rel_tol=1e-3)
    assert result.epsilon_lower > correct[name].epsilon_lower + 0.25
    assert result.separation > 1.25 * correct[name].separation  # sqrt(2) in expectation


# --- the command ------------------------------------------------------------------------

def run_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fedpca")
    register_audit_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_the_command_prints_a_table_per_mechanism_and_writes_json(tmp_path, capsys):
    out = tmp_path / "audit.json"
    code = run_command([
        "audit", "ldp-pca", "mod-sulq", "--trials", "200", "--calibration-trials", "20",
        "--seed", "1", "--output", str(out),
    ])
    text = capsys.readouterr().out
    assert code == 0
    lines = text.splitlines()
    for row in ("claimed", "false positives", "false negatives", "eps lower bound", "verdict"):
        assert sum(line.startswith(f"  {row} ") for line in lines) == 2
    assert "95% CI [" in text and "PASS" in text
    # a step line as each mechanism starts: which step of how many
    steps = [line.split(" (")[0] for line in lines if line.startswith("[")]
    assert steps == ["[1/2] auditing ldp-pca", "[2/2] auditing mod-sulq"]
    record = json.loads(out.read_text())
    assert [r["mechanism"] for r in record["results"]] == ["ldp-pca", "mod-sulq"]
    assert all(r["passed"] and r["seeded"] for r in record["results"])
    assert record["settings"]["epsilon"] == 3.0


def test_the_command_fails_a_refuted_claim(halved_noise, capsys):
    assert run_command(["audit", "analyze-gauss", "--seed", str(SEED), "--quiet"]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text
    # --quiet: the summary only, no step line and no per-mechanism table
    assert "auditing" not in text and "false positives" not in text


def test_the_command_refuses_unknown_mechanisms_before_running():
    with pytest.raises(ConfigurationError, match="unknown mechanism.*nope"):
        run_command(["audit", "ldp-pca", "nope"])

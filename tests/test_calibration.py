"""Noise calibration against dp-accounting and an exact closed form."""

import math

import pytest
from scipy.stats import norm

from fedpca.errors import ConfigurationError
from fedpca.dp.calibration import calibrate_gaussian, pld_epsilon, rdp_epsilon


def exact_gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact delta(eps) of one Gaussian mechanism with sensitivity/sigma = mu (Balle-Wang)."""
    return norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu)


def test_pld_multiplier_matches_dp_accounting_figure():
    cal = calibrate_gaussian(10, 1.0, 0.1, "pld")
    assert cal.noise_multiplier == pytest.approx(3.43, abs=0.02)
    assert cal.epsilon <= 1.0 + 1e-6
    assert cal.epsilon == pytest.approx(1.0, rel=1e-3)  # tight, not over-noised


def test_paper_multiplier_is_the_closed_form():
    cal = calibrate_gaussian(10, 1.0, 0.1, "paper", paper_rule="dps-pca")
    assert cal.noise_multiplier == pytest.approx(10 * math.sqrt(2 * math.log(200)), rel=1e-12)
    assert cal.noise_multiplier == pytest.approx(32.55, abs=0.01)
    # The paper's calibration over-delivers: what it achieves is far below the target.
    assert cal.epsilon < 0.2


@pytest.mark.parametrize("releases,epsilon,delta", [(1, 0.5, 1e-5), (11, 1.0, 1e-5), (11, 2.0, 0.01)])
def test_pld_agrees_with_exact_gaussian_composition(releases, epsilon, delta):
    # T Gaussian releases with multiplier z compose exactly to one with z / sqrt(T).
    cal = calibrate_gaussian(releases, epsilon, delta, "pld")
    mu = math.sqrt(releases) / cal.noise_multiplier
    exact = exact_gaussian_delta(epsilon, mu)
    assert exact <= delta * 1.001  # the guarantee holds
    assert exact >= delta * 0.9  # and is tight
    # RDP is a valid but looser bound at the same multiplier.
    assert cal.epsilon_rdp >= cal.epsilon


def test_rdp_calibration_is_looser_than_pld():
    pld = calibrate_gaussian(11, 1.0, 1e-5, "pld")
    rdp = calibrate_gaussian(11, 1.0, 1e-5, "rdp")
    assert rdp.noise_multiplier > pld.noise_multiplier
    assert rdp.epsilon <= 1.0


def test_more_releases_need_more_noise():
    zs = [calibrate_gaussian(t, 1.0, 1e-5).noise_multiplier for t in (1, 5, 11)]
    assert zs[0] < zs[1] < zs[2]


def test_epsilon_accessors_compose():
    one = pld_epsilon((5.0,), 1e-5)
    two = pld_epsilon((5.0, 5.0), 1e-5)
    assert 0 < one < two
    assert pld_epsilon((), 1e-5) == 0.0
    assert rdp_epsilon((5.0, 5.0), 1e-5) >= two


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(releases=10, epsilon=0.0, delta=1e-5), "epsilon"),
        (dict(releases=10, epsilon=float("nan"), delta=1e-5), "epsilon"),
        (dict(releases=10, epsilon=1.0, delta=1.5), "delta"),
        (dict(releases=0, epsilon=1.0, delta=1e-5), "releases"),
        (dict(releases=10, epsilon=1.0, delta=1e-5, accounting="moments"), "accounting"),
        (dict(releases=10, epsilon=20.0, delta=1e-5, accounting="paper", paper_rule="dps-pca"), "below 1"),
        (dict(releases=1, epsilon=2.0, delta=1e-5, accounting="paper"), "epsilon < 1"),
    ],
)
def test_bad_parameters_are_refused(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        calibrate_gaussian(**kwargs)


def test_very_small_noise_falls_back_to_a_finite_valid_bound():
    # eps = 1000 over 10 releases: the PLD grid overflows; RDP still bounds epsilon.
    cal = calibrate_gaussian(10, 1000.0, 2.3e-5)
    assert cal.epsilon <= 1000.0 * (1 + 1e-6)
    spent = [pld_epsilon((cal.noise_multiplier,) * m, 2.3e-5) for m in range(1, 11)]
    assert all(math.isfinite(e) for e in spent) and spent == sorted(spent)


# --- calibrations kept on a site's disk ---------------------------------------------------------

def kept_calibrations(tmp_path, monkeypatch):
    """Calibrations kept in ``tmp_path`` for this test, every in-memory cache cleared."""
    from fedpca.dp import calibration, calibration_cache

    monkeypatch.setattr(calibration_cache, "_directory", tmp_path)
    calibration.calibrate_gaussian.cache_clear()
    calibration.pld_epsilon.cache_clear()
    return calibration


def test_a_kept_calibration_is_read_back_and_a_tampered_one_never_lowers_the_noise(
        tmp_path, monkeypatch):
    import json

    calibration = kept_calibrations(tmp_path, monkeypatch)
    honest = calibration.calibrate_gaussian(6, 1.0, 1e-5)
    (entry,) = [p for p in tmp_path.iterdir() if '"releases"' in p.read_text()]
    calibration.calibrate_gaussian.cache_clear()
    searches = []
    real = calibration._calibrate
    monkeypatch.setattr(calibration, "_calibrate",
                        lambda *args: searches.append(args) or real(*args))
    assert calibration.calibrate_gaussian(6, 1.0, 1e-5) == honest and not searches  # kept
    kept = json.loads(entry.read_text())
    for tampered in ({"noise_multiplier": honest.noise_multiplier * 0.9},  # less noise
                     {"epsilon": honest.epsilon / 2},  # an understated epsilon
                     {"releases": 3}, {"noise_multiplier": "nan"}):
        entry.write_text(json.dumps({**kept, "value": {**kept["value"], **tampered}}))
        calibration.calibrate_gaussian.cache_clear()
        assert calibration.calibrate_gaussian(6, 1.0, 1e-5) == honest
    entry.write_text("{not json")  # corrupted
    calibration.calibrate_gaussian.cache_clear()
    assert calibration.calibrate_gaussian(6, 1.0, 1e-5) == honest
    assert len(searches) == 5  # each bad entry was recomputed, and written again
    calibration.calibrate_gaussian.cache_clear()
    assert calibration.calibrate_gaussian(6, 1.0, 1e-5) == honest and len(searches) == 5


def test_a_kept_ledger_epsilon_below_what_the_releases_spend_is_never_used(
        tmp_path, monkeypatch):
    import json

    calibration = kept_calibrations(tmp_path, monkeypatch)
    multipliers = (9.0,) * 6 + (4.0,)
    honest = calibration.pld_epsilon(multipliers, 1e-5)
    (entry,) = [p for p in tmp_path.iterdir() if "multipliers" in p.read_text()]
    kept = json.loads(entry.read_text())
    entry.write_text(json.dumps({**kept, "value": honest * 0.8}))  # would pass a budget
    calibration.pld_epsilon.cache_clear()
    assert calibration.pld_epsilon(multipliers, 1e-5) == honest
    assert json.loads(entry.read_text())["value"] == honest  # written again


def test_a_kept_grid_is_read_back_and_a_tampered_one_never_lowers_the_noise(
        tmp_path, monkeypatch):
    import json

    from fedpca.dp import distributed_gaussian as ddg

    kept_calibrations(tmp_path, monkeypatch)
    public = dict(releases=2, sensitivity=2.0, norm_bound=40.0, dimension=300, sites=3)
    honest = ddg.choose_grid(1.0, 1e-5, **public)
    (entry,) = [p for p in tmp_path.iterdir() if '"max_inflation"' in p.read_text()]
    calibrations = []
    real = ddg.calibrate_ddg
    monkeypatch.setattr(ddg, "calibrate_ddg",
                        lambda *a, **k: calibrations.append(k["gamma"]) or real(*a, **k))
    assert ddg.choose_grid(1.0, 1e-5, **public) == honest
    assert calibrations == [honest.gamma]  # one calibration at the kept step, not a search
    kept = json.loads(entry.read_text())
    coarser = min(0.9, honest.inflation * 8)
    entry.write_text(json.dumps({**kept, "value": [coarser, kept["value"][1]]}))
    tampered = ddg.choose_grid(1.0, 1e-5, **public)  # another grid, its noise calibrated
    assert tampered.inflation == coarser and tampered.calibration.epsilon <= 1.0 * (1 + 1e-6)
    for garbage in ("[0, 16]", '"x"', "[0.01]", "{not json"):
        entry.write_text(garbage if garbage.startswith("{") else
                         json.dumps({**kept, "value": json.loads(garbage)}))
        assert ddg.choose_grid(1.0, 1e-5, **public) == honest  # chosen again, written again
    assert json.loads(entry.read_text())["value"] == kept["value"]


def test_a_kept_ddg_noise_is_used_once_checked_and_a_lowered_one_is_recalibrated(
        tmp_path, monkeypatch):
    import json

    from fedpca.dp import distributed_gaussian as ddg

    kept_calibrations(tmp_path, monkeypatch)
    public = dict(releases=2, sensitivity=2.0, dimension=300, sites=3, gamma=0.02,
                  norm_bound=40.0)
    honest = ddg.calibrate_ddg(1.0, 1e-5, **public)
    (entry,) = [p for p in tmp_path.iterdir() if '"gamma"' in p.read_text()]
    assert json.loads(entry.read_text())["value"] == [honest.sigma_sq, honest.draws]
    checks = []
    real = ddg._within
    monkeypatch.setattr(ddg, "_within", lambda *a: checks.append(a[0]) or real(*a))
    assert ddg.calibrate_ddg(1.0, 1e-5, **public) == honest
    assert checks == [honest.sigma_sq]  # one privacy check at the kept noise, not a search
    kept = json.loads(entry.read_text())
    # more noise than needed passes the check (accuracy lost, not privacy); less never does
    entry.write_text(json.dumps({**kept, "value": [honest.sigma_sq + 7, honest.draws]}))
    louder = ddg.calibrate_ddg(1.0, 1e-5, **public)
    assert louder.sigma_sq == honest.sigma_sq + 7 and louder.epsilon <= 1.0
    for garbage in ([honest.sigma_sq // 2, honest.draws], [honest.sigma_sq, 0],
                    [honest.sigma_sq, 10**6], [0.5, 1], "x"):
        entry.write_text(json.dumps({**kept, "value": garbage}))
        assert ddg.calibrate_ddg(1.0, 1e-5, **public) == honest  # calibrated, kept again
        assert json.loads(entry.read_text())["value"] == kept["value"]


def test_calibrations_are_kept_in_the_named_folder_only_during_the_block(tmp_path, monkeypatch):
    from fedpca.dp import calibration_cache

    monkeypatch.setenv(calibration_cache.DIRECTORY_VARIABLE, str(tmp_path / "kept"))
    monkeypatch.setattr(calibration_cache, "_directory", None)  # in memory, as a simulation
    with calibration_cache.kept_in(calibration_cache.environment_directory()):
        assert calibration_cache.current_directory() == tmp_path / "kept"
    assert calibration_cache.current_directory() is None
    monkeypatch.setenv(calibration_cache.DIRECTORY_VARIABLE, "off")
    assert calibration_cache.environment_directory() is None

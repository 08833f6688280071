"""Secure sums over groups combined robustly, and per-site answers checked against their
declared records (:mod:`fedpca.algorithms.sum_groups`, :mod:`fedpca.algorithms.sum_bounds`):
a group or an answer beyond its bound is dropped and named, the robust combination is the
plain sum when nothing is dropped, and the per-site bound's false-alarm rate is what it
states."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
from scipy import stats

from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, run_dpdis_pca
from fedpca.algorithms.dps_pca import (
    DPSPCAPolicy,
    DPSPCAServer,
    DPSPCASite,
    answer_statistic,
    run_dps_pca,
)
from fedpca.algorithms.secure_sum import SecureSum, agreed_sum
from fedpca.algorithms.site import SiteAnswer
from fedpca.algorithms.sum_bounds import SumBoundError, answer_bound, noise_norm_bound
from fedpca.algorithms.sum_groups import (
    DEFAULT_SPREAD,
    assign_groups,
    in_groups,
    outlying_groups,
    robust_decode,
)
from fedpca.dp.ddg_encoding import encode_site
from fedpca.dp.mechanisms import power_step_sensitivity
from fedpca.errors import ConfigurationError
from fedpca.linalg.basis import thin_qr

DIM, K, SITES, N = 20, 2, 12, 200
C = 1.0


@functools.cache
def power_sum() -> SecureSum:
    """The power step's agreed secure sum of twelve sites of ``N`` records, M = 3."""
    policy = DPSPCAPolicy(epsilon=2.0, delta=1e-5, clip_norm=C, rounds=2, discrete=True,
                          secure_min_sites=3)
    public = SecureSum(sensitivity=power_step_sensitivity(C), max_records=N,
                       norm_per_record=C**2, dimension=DIM * K, sites_in_sum=SITES,
                       rotation_seed=7)
    return agreed_sum(public, policy)[0]


def site_records(rng, n=N):
    """``n`` records of a spiked model (top direction the first axis), clipped to ``C``."""
    X = 0.2 * rng.standard_normal((n, DIM)) * np.r_[3.0, 2.0, np.full(DIM - 2, 0.5)]
    return X * np.minimum(1.0, C / np.linalg.norm(X, axis=1, keepdims=True))


def messages(secure, statistics, rng, groups=None) -> list[SiteAnswer]:
    answers = [SiteAnswer(str(i), N, encode_site(
        s.ravel(), gamma=secure.grid_step, rotation=secure.rotation(), sigma_sq=secure.sigma_sq,
        modulus=secure.modulus, draws=secure.draws, rng=rng), 0.0)
        for i, s in enumerate(statistics)]
    return in_groups(answers, groups)


def honest_statistics(rng):
    Q = thin_qr(rng.standard_normal((DIM, K)))
    records = [site_records(rng) for _ in range(SITES)]
    return [X.T @ (X @ Q) for X in records], Q


def test_groups_hold_at_least_the_size_and_every_member_once():
    names = [str(i) for i in range(14)]
    groups = assign_groups(names, 3, min_sites=3)
    assert len(groups) == 4 and sorted(sum(groups, ())) == sorted(names)
    assert {len(g) for g in groups} <= {3, 4} and min(len(g) for g in groups) >= 3
    assert assign_groups(names[:5], 3) == [tuple(sorted(names[:5]))]  # one group below 2x
    with pytest.raises(ConfigurationError, match="at least M \\+ c = 3 members"):
        assign_groups(names, 2, min_sites=3)
    with pytest.raises(ConfigurationError, match="cannot fill one group"):
        assign_groups(names[:2], 3)


def test_the_robust_combination_is_the_plain_sum_when_nothing_is_dropped():
    rng = np.random.default_rng(1)
    statistics, _ = honest_statistics(rng)
    secure = power_sum()
    groups = assign_groups([str(i) for i in range(SITES)], 3)
    answers = messages(secure, statistics, rng, groups)
    combined = robust_decode(secure, answers, "X^T X Q")
    assert combined.dropped == [] and len(combined.kept) == SITES
    plain = secure.decode([a.value for a in answers])
    np.testing.assert_allclose(combined.total, plain, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("run", ["dps", "dpdis"])
def test_a_grouped_reference_run_equals_one_sum_under_the_same_seeds(run):
    rng = np.random.default_rng(3)
    data = [site_records(rng) for _ in range(SITES)]
    if run == "dps":
        policy = DPSPCAPolicy(epsilon=1.0, delta=1e-5, clip_norm=C, rounds=3, discrete=True,
                              secure_min_sites=3)
        one, grouped = (run_dps_pca(data, K, 8, policy, seed=5, group_size=g) for g in (0, 3))
    else:
        policy = DPdisPCAPolicy(epsilon=1.0, delta=1e-5, clip_norm=C, secure_min_sites=3)
        one, grouped = (run_dpdis_pca(data, K, policy=policy, seed=5, variant="secure-sum",
                                      group_size=g) for g in (0, 3))
    np.testing.assert_allclose(grouped.basis, one.basis, atol=1e-9)
    assert all("dropped" not in entry for entry in grouped.history)
    assert grouped.sites_answered == one.sites_answered


@pytest.mark.parametrize("attack", ["x1e3", "x1e6"])
def test_a_group_sum_beyond_its_bound_is_dropped_and_named(attack):
    rng = np.random.default_rng(2)
    statistics, _ = honest_statistics(rng)
    statistics[4] = statistics[4] * float(attack[1:])
    secure = power_sum()
    groups = assign_groups([str(i) for i in range(SITES)], 3)
    bad = next(g for g in groups if "4" in g)
    combined = robust_decode(secure, messages(secure, statistics, rng, groups), "X^T X Q")
    assert combined.dropped == [
        f"the secure sum of X^T X Q over sites {', '.join(sorted(bad))} was dropped: "
        + combined.dropped[0].split("dropped: ", 1)[1]]
    assert "times the bound its members' declared records allow" in combined.dropped[0] \
        or "median distance" in combined.dropped[0]
    assert sorted(a.site for a in combined.kept) == sorted(set(map(str, range(SITES))) - set(bad))
    honest = [s for i, s in enumerate(statistics) if str(i) not in bad]
    error = np.linalg.norm(combined.total - np.sum(honest, axis=0).ravel())
    assert error <= noise_norm_bound(secure, len(combined.kept))  # the honest groups' noise


def test_a_push_within_the_bound_is_dropped_by_the_median_rule():
    rng = np.random.default_rng(4)
    statistics, Q = honest_statistics(rng)
    secure = power_sum()
    v = np.zeros(DIM)
    v[-1] = 1.0  # a direction the data barely have
    top = np.linalg.eigvalsh(sum(s @ Q.T for s in statistics)).max()
    statistics[7] = statistics[7] + 10 * top * np.outer(v, v) @ Q
    groups = assign_groups([str(i) for i in range(SITES)], 3)
    answers = messages(secure, statistics, rng, groups)
    one_sum = [dataclasses.replace(a, group=None) for a in answers]
    assert robust_decode(secure, one_sum, "X^T X Q").dropped == []  # within the sum's bound
    combined = robust_decode(secure, answers, "X^T X Q", spread=DEFAULT_SPREAD)
    assert len(combined.dropped) == 1 and "median distance" in combined.dropped[0]
    assert "7" not in {a.site for a in combined.kept}


def test_the_median_rule_needs_three_groups_and_names_the_outlier():
    rng = np.random.default_rng(6)
    totals = [rng.standard_normal(10) + 5 for _ in range(4)]
    assert list(outlying_groups(totals[:2] + [totals[2] * 100], [1, 1, 1])) == [2]
    assert outlying_groups([totals[0], totals[1] * 100], [1, 1]) == {}
    assert outlying_groups(totals, [1] * 4) == {}  # honest spread: nothing dropped


def test_every_group_dropped_stops_the_round():
    rng = np.random.default_rng(7)
    statistics, _ = honest_statistics(rng)
    statistics = [s * 1e3 for s in statistics]
    secure = power_sum()
    groups = assign_groups([str(i) for i in range(SITES)], 3)
    with pytest.raises(SumBoundError, match="every group's secure sum of X\\^T X Q was "
                                            "dropped") as caught:
        robust_decode(secure, messages(secure, statistics, rng, groups), "X^T X Q")
    assert len(caught.value.failures) == len(groups)


# Per-site answers.

def per_site_policy():
    return DPSPCAPolicy(epsilon=1.0, delta=1e-5, clip_norm=C, rounds=2)


def test_a_per_site_answer_beyond_its_bound_is_dropped_and_named():
    rng = np.random.default_rng(8)
    sites = [DPSPCASite(site_records(rng), per_site_policy(), site=str(i), seed=1)
             for i in range(4)]
    Q = thin_qr(rng.standard_normal((DIM, K)))
    server = DPSPCAServer(DIM, K, 8, 2, seed=1, initial_basis=Q)
    answers = [s.answer(s.release_power(Q)) for s in sites]
    answers[2] = dataclasses.replace(answers[2], value=answers[2].value * 1e3)
    answers[3] = dataclasses.replace(answers[3], guarantee=None)  # nothing to check it by
    server.receive_power(1, answers)
    entry = server.history[-1]
    assert entry["sites"] == 2 and server.sites_answered[-1] == ["0", "1"]
    assert len(entry["dropped"]) == 2
    assert entry["dropped"][0].startswith("site 2's answer was dropped: ")
    assert "times the bound its declared records, clip norm and noise" in entry["dropped"][0]
    assert entry["dropped"][1] == ("site 3's answer was dropped: it states no guarantee (clip "
                                   "norm and noise) to check it against")
    # the honest answers are well inside: the check is not what removed them
    for a in answers[:2]:
        assert np.linalg.norm(a.value) < answer_bound(answer_statistic((DIM, K), 1), a)


def test_a_noise_floor_raises_the_per_site_bound():
    rng = np.random.default_rng(9)
    site = DPSPCASite(site_records(rng), per_site_policy(), site="0", seed=1)
    Q = thin_qr(rng.standard_normal((DIM, K)))
    answer = site.answer(site.release_power(Q))
    statistic = answer_statistic((DIM, K), 1)
    floor, mean = 10 * answer.guarantee.noise_multiplier, statistic.norm_per_record(C)
    raised = answer_bound(statistic, answer, noise_floor=floor) - mean
    assert raised == pytest.approx(10 * (answer_bound(statistic, answer) - mean))
    assert answer_bound(statistic, answer, noise_floor=0.1) == answer_bound(statistic, answer)


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_the_per_site_false_alarm_rate_is_at_most_alpha(alpha):
    """Pure noise (records of zeros): the answer's norm beyond the bound's noise part happens
    at most at rate ``alpha``; the noise is the Gaussian the bound assumes (its chi-square
    quantile is exceeded at close to ``alpha``) and the bound lies above that quantile."""
    zeros = np.zeros((N, DIM))
    Q = thin_qr(np.random.default_rng(10).standard_normal((DIM, K)))
    statistic = answer_statistic((DIM, K), 1)
    norms, bounds = [], []
    for seed in range(300):
        site = DPSPCASite(zeros, per_site_policy(), site="0", seed=seed)
        answer = site.answer(site.release_power(Q))
        norms.append(float(np.linalg.norm(answer.value)))
        bounds.append(answer_bound(statistic, answer, alpha) - statistic.norm_per_record(C))
    norms = np.array(norms)
    margin = 3 * math.sqrt(alpha * (1 - alpha) / norms.size)
    assert float(np.mean(norms > bounds[0])) <= alpha + margin
    sigma = answer.guarantee.noise_multiplier * power_step_sensitivity(C) / N
    quantile = sigma * math.sqrt(stats.chi2.ppf(1 - alpha, DIM * K))
    assert abs(float(np.mean(norms > quantile)) - alpha) <= margin
    assert bounds[0] > quantile


@pytest.mark.parametrize("grouped", [True, False], ids=["groups", "per-site"])
def test_a_site_dropped_once_stays_out_for_the_rest_of_the_run(grouped):
    """Site "0" scales its statistics by 1e3: its group (or, per-site, its answer) is dropped
    in the first round for its bound and in every later one as distrusted, and the result
    is the run without it from the start."""
    from fedpca.audit.malicious import Attack, malicious_site_class

    rng = np.random.default_rng(11)
    data = [site_records(rng) for _ in range(9)]
    policy = DPSPCAPolicy(epsilon=1.0, delta=1e-5, clip_norm=C, rounds=3, discrete=grouped,
                          secure_min_sites=3 if grouped else None)
    bad = malicious_site_class(DPSPCASite, Attack.parse("scale:1e3"), 9)
    size = 3 if grouped else 0
    attacked = run_dps_pca(data, K, 8, policy, seed=2, group_size=size, site_cls=bad)
    left_out = ("0", "3", "6") if grouped else ("0",)
    assert assign_groups([str(i) for i in range(9)], 3)[0] == ("0", "3", "6")
    without = run_dps_pca(data, K, 8, policy, seed=2, group_size=size, distrusted=left_out)
    first, *later = [entry["dropped"] for entry in attacked.history]
    assert "times the bound" in first[0] and len(first) == 1
    assert all(len(d) == 1 and "earlier round" in d[0] for d in later)
    assert all(not set(left_out) & set(answered) for answered in attacked.sites_answered)
    np.testing.assert_allclose(attacked.basis, without.basis, atol=1e-12)


def test_every_per_site_answer_dropped_stops_the_round_naming_each():
    rng = np.random.default_rng(12)
    sites = [DPSPCASite(site_records(rng), per_site_policy(), site=str(i), seed=1)
             for i in range(3)]
    Q = thin_qr(rng.standard_normal((DIM, K)))
    server = DPSPCAServer(DIM, K, 8, 2, seed=1, initial_basis=Q)
    answers = [dataclasses.replace(a, value=a.value * 1e3)
               for a in (s.answer(s.release_power(Q)) for s in sites)]
    with pytest.raises(SumBoundError, match="every site's answer was dropped: site 0's") as caught:
        server.receive_power(1, answers)
    assert len(caught.value.failures) == 3

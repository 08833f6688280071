"""The experiments' malicious site (:mod:`fedpca.audit.malicious`): each attack's extra rows
are what it says, the malicious site's releases are the honest formulas on ``X^T X + B^T B``
with its declared ``n`` unchanged (the same noise, so the difference is exactly ``B^T B``'s
part), an in-bound attacker sends what an honest site holding its records would, the other
sites are honest, and the servers drop (groups) or refuse (one sum) a scaled statistic."""

import numpy as np
import pytest

from fedpca.algorithms.dpdis_pca import (
    VARIANT_FULL,
    VARIANT_SECURE,
    DPdisPCAPolicy,
    DPdisPCASite,
    run_dpdis_pca,
)
from fedpca.algorithms.dps_pca import DPSPCAPolicy, DPSPCASite, run_dps_pca
from fedpca.algorithms.site_rows import DenseRows
from fedpca.algorithms.sum_bounds import SumBoundError
from fedpca.audit.malicious import (
    KINDS,
    Attack,
    malicious_site_class,
    union_top_eigenvalue,
)
from fedpca.dp.site_data import SiteData
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import thin_qr

DIM, N, SITES, C = 12, 80, 9, 1.0
ATTACKS = ["subspace", "rank-one", "scale:10", "in-bound"]


def records(seed: int, n: int = N) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, DIM))
    return 0.9 * C * X / np.linalg.norm(X, axis=1, keepdims=True)


def test_attacks_parse_from_text_and_refuse_what_they_cannot_be():
    assert Attack.parse("scale:1e3") == Attack("scale", 1000.0)
    assert str(Attack.parse(" Rank-One ")) == "rank-one" and str(Attack.parse("scale:10")) == \
        "scale:10"
    assert {Attack.parse(kind if kind != "scale" else "scale:2").kind for kind in KINDS} == \
        set(KINDS)
    for text, problem in [("subspaces", "unknown attack"), ("scale", "takes its factor"),
                          ("subspace:3", "takes its factor"), ("scale:1", "> 1"),
                          ("scale:x", "must be a number"), ("scale:inf", "> 1")]:
        with pytest.raises(ConfigurationError, match=problem):
            Attack.parse(text)


def test_each_attacks_extra_rows_are_what_it_says():
    X = records(0)
    estimate = union_top_eigenvalue(X, SITES)
    assert estimate == pytest.approx(SITES * np.linalg.eigvalsh(X.T @ X)[-1])
    subspace = Attack.parse("subspace", seed=4)
    B, U = subspace.extra_rows(X, SITES), subspace.subspace(DIM)
    assert np.allclose(U.T @ U, np.eye(3))
    assert np.allclose(B.T @ B, 3 * estimate * U @ U.T)
    B = Attack.parse("rank-one").extra_rows(X, SITES)
    v = Attack.parse("rank-one").direction(DIM)
    assert np.linalg.norm(v) == pytest.approx(1.0)
    assert np.allclose(B.T @ B, 10 * estimate * np.outer(v, v))
    B = Attack.parse("scale:10").extra_rows(X, SITES)
    assert np.allclose(B.T @ B, 9 * X.T @ X)
    inbound = Attack.parse("in-bound")
    assert inbound.extra_rows(X, SITES).shape == (0, DIM)
    assert np.allclose(inbound.records(X, C), C * inbound.direction(DIM))
    assert not np.allclose(Attack.parse("subspace", seed=5).subspace(DIM), U)


def second_moment_change(attack: Attack, X: np.ndarray) -> np.ndarray:
    """``B^T B`` (plus the records' change, in-bound): what the attack adds to ``X^T X``."""
    Y = attack.records(X, C)
    B = attack.extra_rows(Y, SITES)
    return Y.T @ Y + B.T @ B - X.T @ X


@pytest.mark.parametrize("text", ATTACKS)
def test_a_malicious_dps_site_releases_the_honest_formula_on_the_changed_second_moment(text):
    attack, X = Attack.parse(text), records(1)
    policy = DPSPCAPolicy(epsilon=1.0, rounds=2)
    Malicious = malicious_site_class(DPSPCASite, attack, SITES)
    bad, honest = Malicious(X, policy, site="0", seed=7), DPSPCASite(X, policy, site="0", seed=7)
    change = second_moment_change(attack, X)
    assert bad.n == honest.n == N
    assert np.allclose(bad.release_diagonal() - honest.release_diagonal(), np.diag(change) / N)
    Q = thin_qr(np.random.default_rng(2).standard_normal((DIM, 3)))
    assert np.allclose(bad.release_power(Q) - honest.release_power(Q), change @ Q / N)
    assert bad.answer(np.zeros(1)).n == N
    other, same = Malicious(X, policy, site="1", seed=7), DPSPCASite(X, policy, site="1", seed=7)
    assert np.array_equal(other.release_power(Q), same.release_power(Q))


@pytest.mark.parametrize("text", ATTACKS)
def test_a_malicious_dpdis_site_releases_the_honest_formula_on_the_changed_second_moment(text):
    attack, X = Attack.parse(text), records(3)
    policy = DPdisPCAPolicy(epsilon=1.0)
    Malicious = malicious_site_class(DPdisPCASite, attack, SITES)
    bad, honest = Malicious(X, policy, site="0", seed=7), DPdisPCASite(X, policy, site="0", seed=7)
    assert bad.n == N
    difference = bad.release(VARIANT_FULL) - honest.release(VARIANT_FULL)
    assert np.allclose(difference, second_moment_change(attack, X) / N)


def test_an_in_bound_attacker_sends_what_an_honest_site_with_its_records_would():
    attack, X = Attack.parse("in-bound", seed=2), records(4)
    policy = DPSPCAPolicy(epsilon=1.0, rounds=2)
    bad = malicious_site_class(DPSPCASite, attack, SITES)(X, policy, site="0", seed=3)
    honest = DPSPCASite(attack.records(X, C), policy, site="0", seed=3)
    Q = thin_qr(np.random.default_rng(5).standard_normal((DIM, 2)))
    assert np.allclose(bad.release_power(Q), honest.release_power(Q))
    assert honest.rows.clipped_rows() == 0  # its records are within the contract


def federation() -> list[np.ndarray]:
    return [records(10 + i) for i in range(SITES)]


def test_groups_drop_the_malicious_group_and_one_sum_refuses_it_in_both_algorithms():
    """Nine sites, M = 3: with groups of three the group of site 0 (sites 0, 3, 6) is
    dropped from every round and named in the history; one sum stops the run."""
    attack = Attack.parse("scale:1e3")
    dps = DPSPCAPolicy(epsilon=1.0, rounds=2, discrete=True, secure_min_sites=3)
    dps_cls = malicious_site_class(DPSPCASite, attack, SITES)
    result = run_dps_pca(federation(), 2, DIM, dps, seed=1, group_size=3, site_cls=dps_cls)
    assert len(result.history) == 3
    for entry, answered in zip(result.history, result.sites_answered):
        (reason,) = entry["dropped"]
        assert "over sites 0, 3, 6 was dropped" in reason and "0" not in answered
    with pytest.raises(SumBoundError, match="over sites 0, 1, 2, 3, 4, 5, 6, 7, 8 exceeded"):
        run_dps_pca(federation(), 2, DIM, dps, seed=1, site_cls=dps_cls)
    dpdis = DPdisPCAPolicy(epsilon=1.0, secure_min_sites=3)
    dpdis_cls = malicious_site_class(DPdisPCASite, attack, SITES)
    result = run_dpdis_pca(federation(), 2, policy=dpdis, seed=1, variant=VARIANT_SECURE,
                           group_size=3, site_cls=dpdis_cls)
    assert "over sites 0, 3, 6 was dropped" in result.history[0]["dropped"][0]
    with pytest.raises(SumBoundError, match="secure sum of X\\^T X over sites 0, 1"):
        run_dpdis_pca(federation(), 2, policy=dpdis, seed=1, variant=VARIANT_SECURE,
                      site_cls=dpdis_cls)


def test_a_site_with_streamed_rows_cannot_turn_malicious():
    rows = DenseRows(SiteData.prepare(records(6), C, "0"))
    Malicious = malicious_site_class(DPSPCASite, Attack.parse("subspace"), SITES)
    with pytest.raises(ConfigurationError, match="needs its records in memory"):
        Malicious(rows, DPSPCAPolicy(epsilon=1.0, rounds=2), site="0")

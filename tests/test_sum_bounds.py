"""Bounded influence inside secure sums (:mod:`fedpca.algorithms.sum_bounds`): one record
adds at most ``norm_per_record`` to its site's statistic, whatever the record (an adversarial
search); an honest sum, even of worst in-bound records, decodes; a member scaling its
statistic or pushing a rank-one term is refused and the sum's members named; the bound's
false-alarm rate on honest noisy sums is at most its stated alpha; DPdisPCA's and k-plane's
reference runs refuse a member scaling its statistic; and a secure DPS-PCA run through the
real strategy and ClientApp, one site scaling its statistic by 1e3, fails naming the
round."""

import functools
import math
import re

import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, RecordDict
from local_grid import RUN_ID, LocalGrid, run_identity  # noqa: F401 (a fixture)
from scipy import stats

from fedpca.algorithms.dpdis_pca import (
    VARIANT_SECURE,
    DPdisPCAServer,
    DPdisPCASite,
    answer_round,
    secure_sum_for,
)
from fedpca.algorithms.dps_pca import DPSPCASite, privacy_record
from fedpca.algorithms.kplane import (
    KPlaneServer,
    KPlaneSite,
    answer_rounds,
    cluster_moments,
    message_norm_per_record,
)
from fedpca.algorithms.kplane import secure_sum_for as kplane_sum
from fedpca.algorithms.secure_sum import SecureSum
from fedpca.algorithms.site import SiteAnswer
from fedpca.algorithms.site_rows import DenseRows
from fedpca.algorithms.sum_bounds import (
    SumBoundError,
    checked_decode,
    noise_norm_bound,
    sum_bound,
)
from fedpca.dp.ddg_encoding import encode_site
from fedpca.dp.mechanisms import triangle_indices
from fedpca.dp.moments import ColumnBounds, moment_statistic
from fedpca.dp.site_data import SiteData
from fedpca.flower.server.strategies import DPSPCA
from fedpca.flower.server.workflow import secure_aggregation
from fedpca.flower.site.clientapp import site_client_app
from fedpca.flower.site.site_client import source_client
from fedpca.linalg.basis import thin_qr
from fedpca.run_record import failure_record
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.scenarios.kplane import KPlaneScenario
from fedpca.simulated_sites import PartitionSource, partition_of

C = 1.3  # a clip norm that is not 1, so C^2 and C are told apart
DIM, K = 12, 3


def clipped(rows) -> SiteData:
    return SiteData.prepare(np.atleast_2d(np.asarray(rows, dtype=float)), C, "s")


def dps_diagonal(rows, basis):
    return DenseRows(clipped(rows)).squared_column_norms()


def dps_power(rows, basis):
    return DenseRows(clipped(rows)).gram_times(basis)


def dpdis_triangle(rows, basis):
    X = clipped(rows).X
    return (X.T @ X)[triangle_indices(np.triu_indices, X.shape[1])]


def kplane_message(rows, basis):
    X = clipped(rows).X
    return cluster_moments(X, [basis[:, :2], basis[:, 1:]], C)


#: Each secure sum's statistic as its site computes it, and the norm per record it declares.
STATISTICS = {
    "dps-pca diag(X^T X)": (dps_diagonal, C**2),
    "dps-pca X^T X Q": (dps_power, C**2),
    "dpdis-pca triu(X^T X)": (dpdis_triangle, C**2),
    "k-plane moments": (kplane_message, message_norm_per_record(C)),
}


def worst_ratio(statistic, norm, basis, rng) -> float:
    """The largest ``||statistic(x)|| / norm`` over candidate single records: coordinate
    axes, the basis's columns and their mixtures, constant rows, random directions at the
    clip norm (and inside it), then a hill climb from the best of them."""
    candidates = [np.eye(DIM)[j] for j in range(DIM)] + list(basis.T)
    candidates += [basis @ rng.standard_normal(K) for _ in range(20)]
    candidates += [np.ones(DIM), rng.standard_normal((40, DIM)), rng.random((40, DIM))]
    points = np.vstack([np.atleast_2d(c) for c in candidates])
    points = C * points / np.linalg.norm(points, axis=1, keepdims=True)
    points = np.vstack([points, 0.5 * points[:5]])

    def ratio(x):
        return float(np.linalg.norm(statistic(x, basis))) / norm

    best = max(points, key=ratio)
    for step in np.geomspace(0.5, 1e-3, 300):  # hill climb on the sphere of radius C
        trial = best + step * rng.standard_normal(DIM)
        trial = C * trial / np.linalg.norm(trial)
        if ratio(trial) > ratio(best):
            best = trial
    return ratio(best)


@pytest.mark.parametrize("name", STATISTICS)
def test_one_record_adds_at_most_norm_per_record(name):
    statistic, norm = STATISTICS[name]
    rng = np.random.default_rng(7)
    basis = thin_qr(rng.standard_normal((DIM, K)))
    assert worst_ratio(statistic, norm, basis, rng) <= 1 + 1e-9
    # attained: by a record along the basis's first column (the power step), else along a
    # coordinate axis
    worst = basis[:, 0] if name == "dps-pca X^T X Q" else np.eye(DIM)[0]
    one = np.linalg.norm(statistic(C * worst, basis)) / norm
    assert one == pytest.approx(1.0, rel=1e-9)
    # n records on one direction at the clip norm: exactly n times one record's norm
    n = 50
    assert np.linalg.norm(statistic(np.tile(C * worst, (n, 1)), basis)) == pytest.approx(
        n * one * norm, rel=1e-9)


def test_centring_moments_record_norm_is_attained_and_never_exceeded():
    bounds = ColumnBounds(widths=(1.0, 1.0, 1.0, 1.0, 1.0), groups=((3, 4),))
    norm = bounds.record_norm(True)
    rng = np.random.default_rng(3)
    rows = rng.random((2000, 5))
    level = rng.integers(0, 2, 2000)
    rows[:, 3], rows[:, 4] = level, 1 - level
    rows[:4, :3] = [[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 0]]  # the box's corners
    norms = [np.linalg.norm(moment_statistic(r[None], True, bounds.squared())) for r in rows]
    assert max(norms) <= norm * (1 + 1e-12)
    assert max(norms) == pytest.approx(norm)


# In-memory secure sums: the sites' residues on a real agreed grid, decoded by the server.

@functools.cache
def scenario():
    """Four sites of 300 records at d = 20, discrete noise with M = 2 (calibrated once)."""
    return DPSPCAScenario(sites=4, samples=1200, dim=20, k=2, sparsity=5, s_hat=8, rounds=2,
                          secure_min_sites=2, discrete=True, seed=3, epsilon=2.0, min_sites=3)


def power_sum() -> SecureSum:
    return scenario().secure_sums()[1][0]


def tight_records(rng, n, direction):
    """``n`` records at the clip norm close to ``direction``: a statistic near its bound."""
    rows = direction + 0.05 * rng.standard_normal((n, direction.size))
    return scenario().policy().clip_norm * rows / np.linalg.norm(rows, axis=1, keepdims=True)


def answers_of(secure: SecureSum, statistics, counts, rng) -> list[SiteAnswer]:
    return [SiteAnswer(str(i), n, encode_site(
        s.ravel(), gamma=secure.grid_step, rotation=secure.rotation(), sigma_sq=secure.sigma_sq,
        modulus=secure.modulus, draws=secure.draws, rng=rng), 0.0)
        for i, (s, n) in enumerate(zip(statistics, counts))]


def tight_power_statistics(rng):
    """Each of the four sites' ``X^T X Q`` over records close to one direction ``u`` (``Q``
    holding ``u``), and ``u``, ``Q``."""
    dim, k = scenario().dim, scenario().k
    u = np.zeros(dim)
    u[:3] = 1 / math.sqrt(3)
    Q = thin_qr(np.column_stack([u, rng.standard_normal((dim, k - 1))]))
    sites = [tight_records(rng, 300, u) for _ in range(scenario().sites)]
    return [X.T @ (X @ Q) for X in sites], u, Q


def test_honest_sums_near_their_bound_and_worst_in_bound_records_decode():
    rng = np.random.default_rng(11)
    secure = power_sum()
    statistics, u, Q = tight_power_statistics(rng)
    # member "3"'s records all on one direction at the clip norm: the most it may send
    worst = np.tile(scenario().policy().clip_norm * u, (300, 1))
    statistics[3] = worst.T @ (worst @ Q)
    answers = answers_of(secure, statistics, [300] * 4, rng)
    total = checked_decode(secure, answers, "X^T X Q")
    np.testing.assert_allclose(total, np.sum(statistics, axis=0).ravel(), atol=0.05 * np.abs(
        total).max())
    bound = sum_bound(secure, [300] * 4)
    assert np.linalg.norm(total) > 0.9 * bound.records  # the bound leaves little room here


@pytest.mark.parametrize("attack", ["x10", "x1e3", "x1e6", "rank-one push"])
def test_a_member_beyond_its_records_is_refused_and_the_sum_named(attack):
    rng = np.random.default_rng(5)
    secure = power_sum()
    statistics, u, Q = tight_power_statistics(rng)
    if attack == "rank-one push":  # 10 x the top eigenvalue of the honest X^T X along u
        top = np.linalg.eigvalsh(sum(s @ Q.T for s in statistics)).max()
        statistics[1] = statistics[1] + 10 * top * np.outer(u, u) @ Q
    else:
        statistics[1] = statistics[1] * float(attack[1:])
    answers = answers_of(secure, statistics, [300] * 4, rng)
    with pytest.raises(SumBoundError, match=r"X\^T X Q over sites 0, 1, 2, 3 exceeded what "
                       r"their declared records allow \([0-9.e+]+ times the bound"):
        checked_decode(secure, answers, "X^T X Q")


def test_a_member_declaring_more_than_max_records_gains_no_room():
    secure = power_sum()
    capped = sum_bound(secure, [secure.max_records + 10**6, 1])
    assert capped.records == (secure.max_records + 1) * secure.norm_per_record


# The false-alarm rate: pure noise and rounding (zero statistics, no records declared) is the
# tail the bound states.

def noise_sums(alpha, members=4, sums=400):
    secure = SecureSum(sensitivity=1.0, max_records=1, norm_per_record=1.0, dimension=32,
                       sites_in_sum=members, rotation_seed=9, grid_step=0.01, sigma_sq=50,
                       draws=2)
    rng = np.random.default_rng(2026)
    norms = np.array([np.linalg.norm(secure.decode([a.value for a in answers_of(
        secure, [np.zeros(32)] * members, [0] * members, rng)])) for _ in range(sums)])
    return secure, norms


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_the_false_alarm_rate_on_honest_sums_is_at_most_alpha(alpha):
    secure, norms = noise_sums(alpha)
    margin = 3 * math.sqrt(alpha * (1 - alpha) / norms.size)
    bound = noise_norm_bound(secure, 4, alpha)
    refused = float(np.mean(norms > bound))
    assert refused <= alpha + margin
    # the noise is what the bound assumes: its chi-square quantile (variance summed over the
    # members' draws) is exceeded at close to alpha, and the provable bound lies above it
    variance = 4 * secure.draws * secure.sigma_sq * secure.grid_step**2
    quantile = math.sqrt(variance * stats.chi2.ppf(1 - alpha, 32))
    assert abs(float(np.mean(norms > quantile)) - alpha) <= margin
    assert bound > quantile
    # at the default alpha = 1e-6 none of these honest sums is refused
    assert np.all(norms <= noise_norm_bound(secure, 4))


# In-process reference runs of the other algorithms with secure sums: the same check.

def scaling(site_cls, factor):
    """``site_cls`` scaling its plaintext statistic by ``factor`` before encoding it."""
    class Scaling(site_cls):
        def discrete_release(self, mechanism, statistic, secure, **described):
            return super().discrete_release(mechanism, factor * statistic, secure, **described)
    return Scaling


def dpdis_run(factor):
    scenario = DPdisPCAScenario(sites=4, samples=800, dim=10, k=2, variant=VARIANT_SECURE,
                                secure_min_sites=2, seed=4)
    data, policy = scenario.all_prepared_sites(), scenario.policy()
    sites = [scaling(DPdisPCASite, factor if i == 2 else 1.0)(d, policy, site=str(i), seed=4)
             for i, d in enumerate(data)]
    secure = secure_sum_for(policy, 10, max(s.n for s in sites), 4, 4)
    server = DPdisPCAServer(10, 2, None, "uniform", VARIANT_SECURE, None, secure)
    answer_round(server, sites)
    return server


def kplane_run(factor):
    scenario = KPlaneScenario(sites=4, samples=800, dim=5, clusters=2, subspace_dim=2,
                              rounds=2, secure_min_sites=2, seed=4)
    policy = scenario.policy()
    sites = [scaling(KPlaneSite, factor if i == 2 else 1.0)(x, policy, site=str(i), seed=4)
             for i, x in enumerate(scenario.all_site_data())]
    secure = kplane_sum(policy, 5, 2, max(s.n for s in sites), 4, 4)
    server = KPlaneServer(5, 2, 2, 2, clip_norm=policy.clip_norm, seed=4, secure=secure)
    answer_rounds(server, sites, secure)
    return server


@pytest.mark.parametrize("run,what", [(dpdis_run, "X^T X"),
                                      (kplane_run, "the clusters' moments")])
def test_every_algorithm_with_secure_sums_refuses_a_member_beyond_its_records(run, what):
    assert len(run(1.0).history) >= 1  # the honest run decodes every sum
    with pytest.raises(SumBoundError, match=f"secure sum of {re.escape(what)} over sites "
                                            "0, 1, 2, 3 exceeded"):
        run(1e3)


# Through the real strategy and ClientApp (sites in this process, as tests/test_secure_rounds).

class ScalingSite(DPSPCASite):
    """A malicious member: it scales its plaintext statistic by 1e3 before encoding it."""

    def discrete_release(self, mechanism, statistic, secure, **described):
        return super().discrete_release(mechanism, 1e3 * statistic, secure, **described)


class MaliciousPartition(PartitionSource):
    """Partition 0 answers with :class:`ScalingSite`; the others are honest."""

    def open(self):
        site = super().open()
        if self.partition != 0:
            return site
        return ScalingSite(self.scenario.prepared_site(0), self.scenario.policy(), site="0",
                           seed=self.scenario.seed)


def malicious_grid(scenario) -> LocalGrid:
    def client(context):
        return source_client(context, MaliciousPartition(scenario,
                                                         *partition_of(context.node_config)))

    def identity(context):
        return MaliciousPartition(scenario, *partition_of(context.node_config)).identity()

    app = site_client_app(client, identity)
    contexts = {
        node: Context(run_id=RUN_ID, node_id=node, state=RecordDict(), run_config={},
                      node_config={"partition-id": node - 1, "num-partitions": scenario.sites})
        for node in range(1, scenario.sites + 1)
    }
    return LocalGrid(app, contexts)


@pytest.mark.usefixtures("run_identity")
def test_a_flower_run_with_a_site_scaling_its_statistic_fails_naming_the_round():
    sums = scenario().secure_sums()
    strategy = DPSPCA(dim=scenario().dim, k=scenario().k, s_hat=scenario().s_hat,
                      rounds=scenario().rounds, min_sites=scenario().required_sites(),
                      seed=scenario().seed, secure=sums,
                      privacy=privacy_record(scenario().policy(), sums))
    secure_aggregation(scenario(), strategy)
    with pytest.raises(SumBoundError) as raised:
        strategy.start(grid=malicious_grid(scenario()), initial_arrays=ArrayRecord(),
                       num_rounds=strategy.num_rounds)
    message = str(raised.value)
    assert message.startswith("round 1: the secure sum of diag(X^T X) over sites 0, 1, 2, 3 "
                              "exceeded what their declared records allow")
    assert failure_record("dps-pca", raised.value)["error"] == message
    assert strategy.server.history == []  # nothing derived from the sum was released

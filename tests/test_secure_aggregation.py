"""SecAgg+ mode: sites split the noise, refuse unmasked requests, and the sum is exact."""

from dataclasses import replace
import functools

import numpy as np
import pytest
from scipy import stats

from fedpca.algorithms.dps_pca import DPSPCASite, SitePolicy
from fedpca.flower.simulations import partition_client
from fedpca.flower.site_client import PrivateSiteClient as DPSPCAClient
from fedpca.flower.site_client import client_factory
from fedpca.site.answer import SecAggMasking
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.linalg.subspace import thin_qr
from fedpca.dp.mechanisms import power_step_sensitivity
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower.federation import client_sites, run_federation
from fedpca.flower.rounds import RoundFailedError
from fedpca.flower.strategies import DPSPCAStrategy
from fedpca.flower.workflow import SecAggSettings

#: The algorithm's client factory (the one client of every algorithm, over its site).
client_for_site = client_factory(DPSPCASite)

pytestmark = pytest.mark.federation

M = 4


@functools.cache
def site_policy():
    """The sites' policy, calibrated when a test first asks, not as each worker collects."""
    return SitePolicy(epsilon=1.0, delta=1e-5, rounds=40, secure_min_sites=M)


def test_site_adds_sigma_over_sqrt_m_and_ledger_records_sigma():
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.1, 0.1, size=(30, 50))
    site = DPSPCASite(X, site_policy(), site="s")
    sigma = site_policy().calibration().sigma(power_step_sensitivity(1.0))
    noise = []
    for _ in range(site_policy().rounds):
        Q = thin_qr(rng.standard_normal((50, 3)))
        noise.append(site.release_power(Q) * site.n - site.X.T @ (site.X @ Q))
    noise = np.concatenate([n.ravel() for n in noise])
    dof = noise.size
    var = noise.var()
    lo = dof * var / stats.chi2.ppf(1 - 5e-5, dof)
    hi = dof * var / stats.chi2.ppf(5e-5, dof)
    assert lo <= sigma**2 / M <= hi
    last = site.ledger.releases[-1]
    assert last.sigma == pytest.approx(sigma)  # the guarantee relies on the sum's sigma
    assert "secagg(m=4)" in last.mechanism


def test_secure_site_refuses_an_unmasked_request():
    site = DPSPCASite(np.eye(5) * 0.1, site_policy(), site="hospital-2")
    Q = thin_qr(np.random.default_rng(1).standard_normal((5, 2)))
    with pytest.raises(InvalidRequestError, match="hospital-2: refused: .*not masked"):
        DPSPCAClient(site).fit([Q], {"phase": "power", "round": 1})
    assert site.ledger.count == 0
    (H,), n, _ = DPSPCAClient(site, masking=SecAggMasking(1e4)).fit([Q], {"phase": "power", "round": 1})
    assert H.shape == (5, 2) and n == 5


def test_secagg_settings_refuse_a_wrapping_modulus():
    settings = SecAggSettings.for_sites(300, 2000, 300)
    settings.check(300)
    with pytest.raises(ConfigurationError, match="wrap"):
        replace(settings, modulus_range=2**32).check(300)
    with pytest.raises(ConfigurationError, match="at least 3 sites"):
        SecAggSettings.for_sites(2, 100, 2)
    with pytest.raises(ConfigurationError, match="m=11 .* in 2..10"):
        SecAggSettings.for_sites(10, 100, 11)
    with pytest.raises(ConfigurationError, match="secure_min_sites .* 2..4"):
        DPSPCAScenario(sites=4, samples=400, secure_min_sites=10)


def test_secagg_refuses_to_unmask_a_sum_over_fewer_than_m_sites():
    # 5 sites, m = 5, but one site always fails: the sum must never be unmasked.
    scenario = DPSPCAScenario(sites=5, dim=20, samples=1000, k=2, sparsity=4, s_hat=6,
                              rounds=1, epsilon=2.0, seed=3, secure_min_sites=5,
                              min_sites=4, failure_rate=0.0)
    strategy = DPSPCAStrategy(dim=20, k=2, s_hat=6, rounds=1, min_sites=4, wait_for_sites=5)
    secure = SecAggSettings.for_sites(5, scenario.largest_site(), 5)

    def client_fn(context):
        if int(context.node_config["partition-id"]) == 4:
            raise RuntimeError("site 4 is down")
        return partition_client(scenario, context)

    with pytest.raises(RoundFailedError, match="stopped before unmasking: 4 active sites"):
        run_federation(strategy, client_sites(client_fn), 5, secure=secure)
    assert strategy.server.history == []

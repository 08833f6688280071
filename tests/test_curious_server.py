"""Against a curious or malicious server: answers depend only on the clipped data, the
site's noise and the request; absurd or lowering requests change nothing or are refused."""

import functools

import numpy as np
import pytest

from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, DPdisPCASite
from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy
from fedpca.algorithms.ldp_pca import LDPCovarianceSite, LDPPolicy
from fedpca.flower.site.site_client import PrivateSiteClient as DPdisPCAClient
from fedpca.flower.site.site_client import PrivateSiteClient as DPSPCAClient
from fedpca.flower.site.site_client import PrivateSiteClient as LDPCovarianceClient
from fedpca.errors import InvalidRequestError
from fedpca.linalg.subspace import thin_qr
from fedpca.dp.guarantee import SiteGuarantee

D = 8
Q = thin_qr(np.random.default_rng(0).standard_normal((D, 2)))
#: (client class, site class, policy (made when a test asks: its calibration), parameters,
#: config) of one request per algorithm.
ALGORITHMS = {
    "dps-pca": (DPSPCAClient, DPSPCASite, functools.partial(DPSPCAPolicy, rounds=3), [Q],
                {"phase": "power", "round": 1}),
    "dpdis-pca": (DPdisPCAClient, DPdisPCASite, DPdisPCAPolicy, [],
                  {"variant": "factor", "dim": D, "r": 3}),
    "ldp-pca": (LDPCovarianceClient, LDPCovarianceSite, LDPPolicy, [],
                {"phase": "covariance", "dim": D}),
}


def raw_data(seed: int = 1) -> np.ndarray:
    X = np.random.default_rng(seed).uniform(-0.2, 0.2, size=(30, D))
    X[:3] *= 20  # three rows far above the clip norm
    return X


def answer(name: str, data: np.ndarray, config: dict | None = None):
    client_cls, site_cls, policy_of, parameters, request = ALGORITHMS[name]
    client = client_cls(site_cls(data, policy_of(), site="clinic", seed=11))
    return client.fit(list(parameters), dict(config or request))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_answers_depend_only_on_clipped_data_noise_and_request(name):
    X = raw_data()
    Y = X.copy()
    Y[:3] *= 7  # different raw records, identical after clipping to norm 1
    (a,), n_a, m_a = answer(name, X)
    (b,), n_b, m_b = answer(name, Y)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)  # equal up to clipping's rounding
    assert n_a == n_b == 30 and m_a == m_b
    assert set(m_a) == {*SiteGuarantee.metric_keys(), "site", "epsilon_spent", "releases"}
    # nothing data-dependent: the guarantee's keys carry the policy's public numbers
    Z = X.copy()
    Z[5, 0] += 0.05  # a record inside the clip ball changes: the answer changes
    (c,), _, _ = answer(name, Z)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_lower_noise_request_changes_nothing(name):
    request = ALGORITHMS[name][4]
    (plain,), _, _ = answer(name, raw_data())
    (lowered,), _, _ = answer(name, raw_data(), {**request, "min_noise_multiplier": 1e-6})
    np.testing.assert_array_equal(plain, lowered)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("value,match", [
    (float("nan"), "finite"), (float("inf"), "finite"), (-1.0, "finite"), (0.0, "finite"),
    (1e12, "absurd"), ("loud", "number"),
])
def test_absurd_noise_requests_are_refused_before_release(name, value, match):
    client_cls, site_cls, policy_of, parameters, request = ALGORITHMS[name]
    site = site_cls(raw_data(), policy_of(), site="clinic")
    with pytest.raises(InvalidRequestError, match=f"clinic: refused: .*{match}"):
        client_cls(site).fit(list(parameters), {**request, "min_noise_multiplier": value})
    assert site.ledger.count == 0


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_unknown_config_keys_are_refused_before_release(name):
    client_cls, site_cls, policy_of, parameters, request = ALGORITHMS[name]
    site = site_cls(raw_data(), policy_of(), site="clinic")
    with pytest.raises(InvalidRequestError, match="clinic: refused: unknown config keys"):
        client_cls(site).fit(list(parameters), {**request, "epsilon": 100.0})
    assert site.ledger.count == 0

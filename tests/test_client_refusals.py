"""A curious or broken server gets clear refusals and nothing is released."""

import functools

import numpy as np
import pytest

from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy
from fedpca.flower.site.site_client import PrivateSiteClient as DPSPCAClient
from fedpca.errors import BudgetExceededError, InvalidDataError, InvalidRequestError
from fedpca.linalg.subspace import thin_qr

D, K, T = 12, 2, 3


@functools.cache
def site_policy():
    """The sites' policy, calibrated when a test first asks, not as each worker collects."""
    return DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=T)


@pytest.fixture
def client():
    X = np.random.default_rng(0).uniform(-0.2, 0.2, size=(40, D))
    return DPSPCAClient(DPSPCASite(X, site_policy(), site="hospital-7"))


def Q(d=D, k=K, seed=1):
    return thin_qr(np.random.default_rng(seed).standard_normal((d, k)))


def assert_nothing_released(client, before):
    assert client.site.ledger.count == before


def test_full_run_then_round_T_plus_1_is_refused(client):
    client.fit([], {"phase": "init", "round": 0})
    for t in range(1, T + 1):
        (H,), n, metrics = client.fit([Q()], {"phase": "power", "round": t})
        assert H.shape == (D, K) and n == 40 and metrics["site"] == "hospital-7"
    assert metrics["epsilon_spent"] == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(BudgetExceededError, match="hospital-7.*allows 4 releases"):
        client.fit([Q()], {"phase": "power", "round": T + 1})
    assert_nothing_released(client, T + 1)


@pytest.mark.parametrize(
    "arrays,match",
    [
        ([Q(k=K)[:-1]], "shape"),
        ([Q(d=D + 1)], "shape"),
        ([np.full((D, K), np.nan)], "NaN"),
        ([Q() * 3.0], "not orthonormal"),
        ([np.ones((D, K), dtype=int)], "dtype"),
        ([Q(), Q()], "exactly one"),
        ([], "exactly one"),
    ],
)
def test_malformed_basis_is_refused(client, arrays, match):
    with pytest.raises(InvalidRequestError, match=match):
        client.fit(arrays, {"phase": "power", "round": 1})
    assert_nothing_released(client, 0)


@pytest.mark.parametrize(
    "config,match",
    [
        ({"phase": "train"}, "unknown phase"),
        ({"phase": "power", "round": 1, "sigma": 0.0}, "unknown config keys"),
        ({"phase": "power", "round": 1, "min_noise_multiplier": float("nan")}, "finite"),
        ({"phase": "power", "round": 1, "min_noise_multiplier": -1.0}, "finite"),
    ],
)
def test_malformed_config_is_refused(client, config, match):
    with pytest.raises(InvalidRequestError, match=match):
        client.fit([Q()], config)
    assert_nothing_released(client, 0)


def test_init_with_arrays_is_refused(client):
    with pytest.raises(InvalidRequestError, match="no arrays"):
        client.fit([Q()], {"phase": "init", "round": 0})
    assert_nothing_released(client, 0)


def test_get_parameters_reveals_nothing(client):
    assert client.get_parameters({}) == []


@pytest.mark.parametrize(
    "data,match",
    [
        (np.array([[0.1, np.nan], [0.2, 0.3]]), "NaN/inf"),
        (np.array([[0.1, np.inf], [0.2, 0.3]]), "NaN/inf"),
        (np.zeros(5), "2-D"),
        (np.zeros((0, 4)), "no records"),
        (np.zeros((3, 0)), "no features"),
        (np.array([["a", "b"]]), "dtype"),
        (np.array([[object(), 1]], dtype=object), "dtype"),
    ],
)
def test_bad_site_data_gets_a_clear_error(data, match):
    with pytest.raises(InvalidDataError, match=f"clinic: .*{match}|clinic: data {match}|{match}"):
        DPSPCASite(data, site_policy(), site="clinic")


def test_rows_above_the_clip_norm_are_clipped_and_counted():
    X = np.zeros((5, 3))
    X[0] = [3.0, 4.0, 0.0]  # norm 5
    X[1] = [0.6, 0.0, 0.0]
    site = DPSPCASite(X, site_policy(), site="s")
    assert site.clip_report.clipped_rows == 1
    assert np.linalg.norm(site.X, axis=1).max() <= 1.0 + 1e-12
    np.testing.assert_allclose(site.X[0], [0.6, 0.8, 0.0])
    np.testing.assert_array_equal(site.X[1], X[1])


@pytest.mark.parametrize("dtype", [int, np.int8, bool])
def test_integer_and_boolean_data_is_refused(dtype):
    with pytest.raises(InvalidDataError, match="s: data has .* dtype .*X.astype\\(float\\)"):
        DPSPCASite(np.eye(4, dtype=dtype), site_policy(), site="s")
    site = DPSPCASite(np.eye(4, dtype=dtype).astype(float), site_policy(), site="s")
    assert site.X.dtype == np.float64


def test_prepared_data_must_match_the_policy_clip_norm():
    from fedpca.errors import ConfigurationError
    from fedpca.dp.site_data import SiteData

    data = SiteData.prepare(np.eye(3), clip_norm=0.5, site="s")
    assert data.clip.clipped_rows == 3
    with pytest.raises(ConfigurationError, match="clip_norm=1.0"):
        DPSPCASite(data, site_policy(), site="s")
    site = DPSPCASite(SiteData.prepare(np.eye(3) * 0.5, 1.0, "s"), site_policy(), site="s")
    assert site.clip_report.clipped_rows == 0


def test_clipping_leaves_the_input_untouched():
    from fedpca.dp.clipping import clip_rows

    X = np.array([[3.0, 4.0], [0.1, 0.1]])
    before = X.copy()
    clipped, report = clip_rows(X, 1.0)
    np.testing.assert_array_equal(X, before)
    assert report.clipped_rows == 1 and clipped is not X
    small = np.array([[0.1, 0.2]])
    same, report = clip_rows(small, 1.0)
    assert report.clipped_rows == 0 and same is small  # nothing clipped: no copy

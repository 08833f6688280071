"""scikit-learn-style estimators: parameters, fitted state, clear errors, privacy records."""

import numpy as np
import pytest

from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.estimators import (
    PPCA,
    AnalyzeGaussPCA,
    ModSulqPCA,
    NonPrivatePCA,
    NotFittedError,
)
from fedpca.results import PCAResult


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    scales = np.array([3.0, 2.0, 1.0, 0.3, 0.2, 0.1])
    data = rng.standard_normal((3000, 6)) * scales
    return data / np.linalg.norm(scales) / 2.0  # rows mostly inside the unit ball


ESTIMATORS = {
    "non-private": lambda **kw: NonPrivatePCA(**kw),
    "analyze-gauss": lambda **kw: AnalyzeGaussPCA(epsilon=5.0, random_state=0, **kw),
    "mod-sulq": lambda **kw: ModSulqPCA(epsilon=5.0, random_state=0, **kw),
    "ppca": lambda **kw: PPCA(epsilon=5.0, burn_in=5, random_state=0, **kw),
}


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_fit_transform_and_learned_attributes(make, X):
    est = make(n_components=2)
    assert est.fit(X) is est
    assert est.components_.shape == (2, 6)
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(2), atol=1e-10)
    assert est.n_features_in_ == 6 and est.n_components == 2
    assert isinstance(est.result_, PCAResult)
    np.testing.assert_allclose(est.transform(X[:7]), X[:7] @ est.components_.T)
    assert est.fit_transform(X).shape == (3000, 2)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_transform_and_learned_attributes_refuse_before_fit(make, X):
    est = make(n_components=2)
    with pytest.raises(NotFittedError, match=r"not fitted yet: call fit\(X\)"):
        est.transform(X)
    with pytest.raises(NotFittedError, match="components_"):
        est.components_
    assert not hasattr(est, "result_")  # NotFittedError is an AttributeError


def test_explained_variance_only_where_it_is_released(X):
    exact = np.linalg.eigvalsh(X.T @ X / len(X))[::-1][:2]
    np.testing.assert_allclose(NonPrivatePCA(2).fit(X).explained_variance_, exact, rtol=1e-10)
    for est in (AnalyzeGaussPCA(2, epsilon=50.0, random_state=1),
                ModSulqPCA(2, epsilon=5000.0, random_state=1)):
        ev = est.fit(X).explained_variance_
        assert ev.shape == (2,) and ev[0] >= ev[1]
        np.testing.assert_allclose(ev, exact, rtol=0.1)  # a generous budget: close
    ppca = PPCA(2, epsilon=1.0, burn_in=3, random_state=1).fit(X)
    assert not hasattr(ppca, "explained_variance_")
    with pytest.raises(AttributeError, match="only the principal subspace"):
        ppca.explained_variance_


def test_privacy_parameters_and_records(X):
    ag = AnalyzeGaussPCA(2, epsilon=0.5, delta=1e-6, data_norm=2.0).fit(X)
    assert (ag.epsilon, ag.delta, ag.data_norm) == (0.5, 1e-6, 2.0)
    privacy = ag.result_.privacy
    assert privacy["epsilon"] == 0.5 and privacy["delta"] == 1e-6
    assert privacy["sensitivity"] == pytest.approx(np.sqrt(2) * 4.0)
    assert privacy["trust_model"] == "central (trusted curator)"
    ppca = PPCA(2, epsilon=0.5, burn_in=4).fit(X)
    assert ppca.delta == 0.0 and ppca.result_.privacy["delta"] == 0.0
    assert ppca.result_.privacy["exact_sampling"] is False
    assert ppca.diagnostics_.energy.shape == (5,)
    assert ModSulqPCA(2, epsilon=0.5, delta=1e-3).fit(X).result_.privacy["beta"] > 0


def test_constructor_stores_only_and_fit_validates(X):
    est = AnalyzeGaussPCA(n_components=2, epsilon=float("nan"))  # no error yet
    assert est.get_params()["epsilon"] != est.get_params()["epsilon"]  # NaN stored as given
    with pytest.raises(ConfigurationError, match="epsilon must be a finite number"):
        est.fit(X)
    with pytest.raises(ConfigurationError, match="delta"):
        ModSulqPCA(2, delta=1.5).fit(X)
    with pytest.raises(ConfigurationError, match="epsilon must be finite"):
        PPCA(2, epsilon=float("inf")).fit(X)
    with pytest.raises(ConfigurationError, match="exceed the 6 features"):
        NonPrivatePCA(7).fit(X)
    with pytest.raises(ConfigurationError, match="integer"):
        AnalyzeGaussPCA(n_components=1.5).fit(X)
    with pytest.raises(ConfigurationError, match="clip_norm"):
        ModSulqPCA(2, data_norm=-1.0).fit(X)


def test_bad_data_is_refused_with_a_clear_error(X):
    bad = X[:50].copy()
    bad[4, 1] = np.inf
    for est in (NonPrivatePCA(2), AnalyzeGaussPCA(2), PPCA(2, burn_in=2)):
        with pytest.raises(InvalidDataError, match="NaN/inf"):
            est.fit(bad)
        with pytest.raises(InvalidDataError, match="2-D"):
            est.fit(X[:, 0])
    fitted = AnalyzeGaussPCA(2, random_state=0).fit(X)
    with pytest.raises(InvalidDataError, match="X has 5 features but this AnalyzeGaussPCA was"):
        fitted.transform(X[:, :5])
    with pytest.raises(InvalidDataError, match="NaN/inf"):
        fitted.transform(bad)


def test_params_repr_reproducibility_and_save_load(X, tmp_path):
    est = ModSulqPCA(2, epsilon=3.0, random_state=7)
    assert est.get_params() == {
        "n_components": 2, "epsilon": 3.0, "delta": 1e-5, "data_norm": 1.0, "random_state": 7,
    }
    assert repr(est) == (
        "ModSulqPCA(n_components=2, epsilon=3.0, delta=1e-05, data_norm=1.0, random_state=7)"
    )
    first = est.fit(X).components_
    np.testing.assert_array_equal(ModSulqPCA(2, epsilon=3.0, random_state=7).fit(X).components_,
                                  first)
    assert est.set_params(n_components=3).fit(X).components_.shape == (3, 6)
    with pytest.raises(ConfigurationError, match="no parameter 'eps'"):
        est.set_params(eps=1.0)
    est.result_.save(tmp_path / "r.json")
    loaded = PCAResult.load(tmp_path / "r.json")
    np.testing.assert_array_equal(loaded.components_, est.components_)
    assert loaded.privacy == est.result_.privacy

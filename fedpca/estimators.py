"""scikit-learn estimators for the central (trusted-curator) PCA methods.

Each estimator follows scikit-learn's conventions (as diffprivlib and OpenDP do for private
PCA): the constructor only stores its parameters; ``fit(X)`` validates, clips the rows to
``data_norm`` and runs the method; learned attributes end in an underscore; ``transform``
refuses to run before ``fit``. By default the data are *not* centred (the methods release
the principal subspace of the second-moment matrix ``X^T X / n``) and ``transform``
projects rows as given. With ``centring="centre"`` or ``"standardize"`` and the contract's
``bounds`` (``X`` is then the contract's preprocessed matrix), ``fit`` spends part of the
same budget on a private release of the column means (and standard deviations), learned
as ``mean_`` and ``scale_``, runs the method on the centred (standardised) rows clipped to
``data_norm`` (:func:`~fedpca.algorithms.centred_run.run_centred_pca`), and ``transform``
returns ``(X - mean_) / scale_ @ components_.T``; ``NonPrivatePCA`` centres with the exact
mean and scale.

Learned attributes: ``components_`` (``k x d``, rows are principal axes), ``result_`` (the
:class:`~fedpca.results.PCAResult`, with its privacy record and ``save``/``load``),
``n_features_in_``, ``feature_names_in_`` (only when ``X`` had string column names), and
``explained_variance_`` (the top eigenvalues of the released second-moment matrix) only for
methods that release it privately: Analyze Gauss and MOD-SuLQ (post-processing of their
noisy matrix) and the non-private baseline. PPCA releases only the subspace; asking for its
eigenvalues raises AttributeError.

scikit-learn is optional. When it is installed the estimators derive from its
``TransformerMixin`` and ``BaseEstimator``: ``clone``, ``check_is_fitted``, pipelines,
``set_output`` and grid searches work, and ``transform`` before ``fit`` raises an error that
is both fedpca's and scikit-learn's ``NotFittedError``. Without it they still fit,
transform, ``get_params`` and ``set_params``. Importing this module imports scikit-learn
(about half a second); the command line never imports this module.
``sklearn.utils.estimator_checks.check_estimator`` passes except for the checks in
:data:`EXPECTED_FAILED_CHECKS`, each deliberate. Checks that look at odds with differential
privacy pass for a stated reason: fit idempotence and pickling because the checks fix
``random_state`` (with ``random_state=None`` two fits differ: that is the noise); rows
longer than ``data_norm`` are clipped, never refused, so the checks' unscaled data fit; and
``n_features_in_`` (the width ``d``) and the column names are the public schema.

Computation: ``fit`` does not eigendecompose a ``d x d`` matrix to keep ``k`` components
when that is slower. ``NonPrivatePCA`` takes the thin SVD of ``X`` when ``n < d``;
``AnalyzeGaussPCA`` and ``ModSulqPCA`` draw the same noise as always and find the top ``k``
eigenvectors of the same noisy matrix by Lanczos when ``d >= 1000`` and ``k <= 5 (d/1000)^2``
(:func:`fedpca.linalg.subspace.eigensolver_for`; relative residual ``1e-12``, dense fallback with a
logged warning), by LAPACK's dense ``eigh`` otherwise. ``PPCA`` stays ``O(d^3)``: its
sampler needs all ``d`` eigenpairs of ``B``.

Privacy (unit: one record of ``X``, replace-one; central trust model): every fit of a
private estimator spends its whole (epsilon, delta); fitting twice on the same data
releases twice, so a grid search or cross-validation on private data spends the budget
once per candidate and fold, and choosing the best candidate by its score on that data is a
further, unaccounted release. The guarantee covers what ``fit`` releases (``components_``,
``explained_variance_``); ``transform(X)`` of private rows is those rows' own projection
and is not protected, nor is anything a pipeline fits on it. Steps before a private
estimator must be row-wise with public parameters (``Normalizer``, a ``FunctionTransformer``
with public constants): a step fitted on the data (``StandardScaler``) makes every row
depend on every record, which the stated sensitivity does not cover. ``random_state`` makes
the noise reproducible and is then NOT private against anyone who knows it: leave it
``None`` outside simulations.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

import numpy as np
from scipy import sparse

from fedpca import errors
from fedpca.algorithms.central import (
    ANALYZE_GAUSS,
    MOD_SULQ,
    released_eigenvalues,
    run_analyze_gauss,
    run_mod_sulq,
    run_pooled_pca,
)
from fedpca.algorithms.centred_run import run_centred_pca, run_pooled_centred_pca
from fedpca.algorithms.centring import CentredPolicy
from fedpca.algorithms.ppca import ALGORITHM as PPCA_ALGORITHM
from fedpca.algorithms.ppca import DEFAULT_BURN_IN, run_ppca
from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.linalg.matrix_bingham import ChainDiagnostics
from fedpca.dp.moments import ColumnBounds
from fedpca.dp.validation import validate_site_data
from fedpca.results import PCAResult

try:  # optional: with scikit-learn the estimators are scikit-learn estimators
    from sklearn.base import BaseEstimator, TransformerMixin
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError
except ImportError:  # without it: the same estimators, without the scikit-learn machinery
    _ESTIMATOR_BASES: tuple[type, ...] = ()
    _NOT_FITTED_BASES: tuple[type, ...] = ()
else:
    _ESTIMATOR_BASES = (TransformerMixin, BaseEstimator)
    _NOT_FITTED_BASES = (SklearnNotFittedError,)

#: The checks of ``sklearn.utils.estimator_checks.check_estimator`` these estimators fail on
#: purpose, with the reason (pass it as ``check_estimator(est, expected_failed_checks=...)``).
EXPECTED_FAILED_CHECKS: dict[str, str] = {
    "check_estimators_dtypes": (
        "integer X is refused, as at every fedpca site: an integer column is often a category "
        "code, so converting it (X.astype(float), scaled with public bounds) is the caller's "
        "explicit choice"
    ),
    "check_dtype_object": (
        "object-dtype X is refused even when its entries are numbers: fedpca accepts "
        "real-valued float arrays only, so nothing is coerced behind the caller's back"
    ),
    "check_complex_data": (
        "complex X is refused with fedpca's wording ('data has complex128 dtype ...; fedpca "
        "needs real-valued measurements as floats'), not scikit-learn's 'Complex data not "
        "supported'"
    ),
    "check_estimators_empty_data_messages": (
        "X without columns is refused with fedpca's wording ('data has no features (shape "
        "(12, 0))'), not scikit-learn's '0 feature(s) ... while a minimum of 1 is required'"
    ),
    "check_fit2d_predict1d": (
        "1-D X is refused with fedpca's wording ('data must be 2-D (records x features) ...; "
        "reshape it, e.g. X.reshape(len(X), -1)'), not scikit-learn's 'Reshape your data'"
    ),
}


class NotFittedError(errors.NotFittedError, *_NOT_FITTED_BASES):
    """An estimator was used before ``fit``: fedpca's NotFittedError and, when scikit-learn
    is installed, scikit-learn's too (``except`` either catches it)."""


def _dense(X: object, method: str) -> object:
    """``X`` itself, or InvalidDataError if it is a scipy sparse matrix or array."""
    if sparse.issparse(X):
        raise InvalidDataError(
            f"{method}: sparse input is not supported (rows are clipped and the d x d "
            "second-moment matrix is dense anyway); pass X.toarray()"
        )
    return X


def _feature_names(X: object) -> np.ndarray | None:
    """The column names of a DataFrame-like ``X`` when all are strings, else None."""
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    names = np.asarray(list(columns), dtype=object)
    return names if all(isinstance(name, str) for name in names) else None


def _noise_seed(random_state: object) -> int | None:
    """``random_state`` as the seed of the noise, or ConfigurationError."""
    if random_state is None or (
        isinstance(random_state, (int, np.integer))
        and not isinstance(random_state, bool)
        and random_state >= 0
    ):
        return None if random_state is None else int(random_state)
    raise ConfigurationError(
        f"random_state must be None (OS randomness: private) or a non-negative int seed "
        f"(reproducible, NOT private), got {random_state!r}; numpy RandomState and "
        "Generator objects are not accepted"
    )


#: ``centring``: none (second-moment PCA), centred, or centred and standardised; the value
#: is whether it standardises.
CENTRING: dict[str | None, bool | None] = {None: None, "centre": False, "standardize": True}
#: Learned attributes only a centred fit has.
_CENTRING_ATTRIBUTES = ("mean_", "scale_")


def _standardizes(centring: object) -> bool | None:
    """Whether ``centring`` standardises (``None``: no centring), or ConfigurationError."""
    if not (centring is None or isinstance(centring, str)) or centring not in CENTRING:
        raise ConfigurationError(
            f"centring must be None (second-moment PCA), 'centre' or 'standardize', got "
            f"{centring!r}")
    return CENTRING[centring]


def _contract_rows(X: object, centring: str, bounds: object, method: str) -> np.ndarray:
    """``X`` validated against the contract's ``bounds`` (required when centring: they set
    the moments' sensitivity), or a ConfigurationError / InvalidDataError saying what to
    pass."""
    if not isinstance(bounds, ColumnBounds):
        raise ConfigurationError(
            f"{method}: centring={centring!r} needs bounds=, the contract's public "
            f"ColumnBounds (Contract.bounds: they set the sensitivity of the private mean), "
            f"got {bounds!r}")
    X = validate_site_data(X, site=method)
    if X.shape[1] != bounds.dim:
        raise InvalidDataError(
            f"{method}: X has {X.shape[1]} columns but the bounds describe {bounds.dim}; pass "
            "the contract's preprocessed matrix (Contract.preprocess(table).matrix) with its "
            "bounds")
    return X


class _CentralPCA(*_ESTIMATOR_BASES):  # type: ignore[misc]
    """What every estimator shares: parameters, fit/transform, fitted-state checks."""

    #: Learned attributes the method never releases, and why (AttributeError message).
    _not_released: ClassVar[dict[str, str]] = {}

    def _fit_result(self, X: object) -> PCAResult:
        """The method's result on ``X``: second-moment PCA, or centred (standardised) first
        when ``centring`` says so."""
        standardize = _standardizes(self.centring)
        if standardize is None:
            if getattr(self, "bounds", None) is not None:
                raise ConfigurationError(
                    f"{type(self).__name__}: bounds are used only when centring; set "
                    "centring='centre' or 'standardize', or leave bounds=None")
            return self._fit_uncentred(X)
        return self._fit_centred(X, standardize)

    def _fit_uncentred(self, X: object) -> PCAResult:
        raise NotImplementedError

    def _fit_centred(self, X: object, standardize: bool) -> PCAResult:
        raise NotImplementedError

    def fit(self, X: object, y: object = None) -> _CentralPCA:
        """Validate ``X`` (``n x d``, float), run the method and store the learned attributes.

        ``y`` is ignored (scikit-learn pipeline compatibility).
        """
        names = _feature_names(X)
        result = self._fit_result(_dense(X, f"{type(self).__name__}.fit"))
        self.result_ = result
        self.components_ = result.components_
        self.n_features_in_ = int(result.basis.shape[0])
        if names is not None:
            self.feature_names_in_ = names
        else:
            vars(self).pop("feature_names_in_", None)  # from an earlier fit
        eigenvalues = released_eigenvalues(result)
        if eigenvalues is not None:
            self.explained_variance_ = eigenvalues
            self.explained_variance_ratio_ = result.explained_variance_ratio
        for name in _CENTRING_ATTRIBUTES:  # a centred fit's, or none from an earlier fit
            if self.centring is None:
                vars(self).pop(name, None)
            else:
                setattr(self, name, getattr(result, name))
        return self

    def transform(self, X: object) -> np.ndarray:
        """Project the rows of ``X`` (``m x d``) onto the fitted components: ``m x k``;
        after a centred fit, ``(X - mean_) / scale_ @ components_.T`` (the released mean
        and scale)."""
        result = self.result_  # raises NotFittedError before fit
        method = f"{type(self).__name__}.transform"
        names = _feature_names(X)
        X = validate_site_data(_dense(X, method), site=method)
        if X.shape[1] != self.n_features_in_:
            raise InvalidDataError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input; pass the features it was fitted "
                "on, in the same order"
            )
        fitted_names = vars(self).get("feature_names_in_")
        if names is not None and fitted_names is not None and list(names) != list(fitted_names):
            raise InvalidDataError(
                f"{method}: X's columns {list(names)} are not those seen in fit, "
                f"{list(fitted_names)}; select them in that order, "
                "X[list(est.feature_names_in_)]"
            )
        return result.transform(X)

    def fit_transform(self, X: object, y: object = None) -> np.ndarray:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X, y).transform(X)

    def get_feature_names_out(self, input_features: object = None) -> np.ndarray:
        """Names of the ``k`` output columns, as scikit-learn's PCA names them
        (``analyzegausspca0``, ...); ``input_features``, if given, must match the input."""
        k = self.components_.shape[0]  # raises NotFittedError before fit
        if input_features is not None and len(input_features) != self.n_features_in_:
            raise InvalidDataError(
                f"input_features should have length equal to the {self.n_features_in_} "
                f"features seen in fit, got {len(input_features)}"
            )
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(k)], dtype=object)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: an unreleased or not yet learned attribute.
        if name in self._not_released:
            raise AttributeError(self._not_released[name])
        if name in _CENTRING_ATTRIBUTES and "result_" in vars(self):
            raise AttributeError(
                f"this {type(self).__name__} was fitted without centring: it has no {name}; "
                "fit with centring='centre' or 'standardize'")
        if name.endswith("_") and not name.startswith("_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call fit(X) before using "
                f"{name}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def _parameter_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def _keep_parameters(self, arguments: dict[str, Any]) -> None:
        """Store each constructor parameter under its own name, as given: all a constructor
        does (scikit-learn's convention); ``arguments`` is the constructor's ``locals()``."""
        for name in self._parameter_names():
            setattr(self, name, arguments[name])

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (scikit-learn convention; ``deep`` is ignored)."""
        return {name: getattr(self, name) for name in self._parameter_names()}

    def set_params(self, **params: Any) -> _CentralPCA:
        """Change constructor parameters; takes effect at the next ``fit``."""
        for name, value in params.items():
            if name not in self._parameter_names():
                raise ConfigurationError(
                    f"{type(self).__name__} has no parameter {name!r}; valid: "
                    f"{', '.join(self._parameter_names())}"
                )
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        """Every parameter, defaults included (a privacy budget is never left implicit)."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class NonPrivatePCA(_CentralPCA):
    """Non-private PCA of the second-moment matrix ``X^T X / n`` (the upper bound), or of
    the centred (standardised) rows with their exact mean (and standard deviation).

    No privacy guarantee: the components, mean and scale are deterministic functions of the
    raw data.

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
        centring: ``None`` (second-moment PCA), ``"centre"`` (subtract the exact column
            means, ``mean_``) or ``"standardize"`` (also divide by the exact standard
            deviations, ``scale_``; ``/ n``, a constant column keeps 1).
    """

    def __init__(self, n_components: int = 1, centring: str | None = None) -> None:
        self._keep_parameters(locals())

    def _fit_uncentred(self, X: object) -> PCAResult:
        return run_pooled_pca(X, self.n_components)

    def _fit_centred(self, X: object, standardize: bool) -> PCAResult:
        return run_pooled_centred_pca(X, self.n_components, standardize)


class _PrivateCentredPCA(_CentralPCA):
    """A private estimator's centred fit: the curator's moments release, then the method
    on the centred clipped rows (:func:`~fedpca.algorithms.centred_run.run_centred_pca`)."""

    #: The method's name in :func:`~fedpca.algorithms.centred_run.run_centred_pca`.
    _centred_method: ClassVar[str]

    def _centred_policy(self, standardize: bool) -> CentredPolicy:
        """The run's budget (``epsilon``, ``delta``), its scaling and clip norm (the
        contract's public scales, if every column has one, release no squares)."""
        return CentredPolicy(epsilon=self.epsilon, delta=self.delta, standardize=standardize,
                             clip_norm=self.data_norm, public_scales=self._public_scales)

    @property
    def _public_scales(self) -> bool:
        """Whether ``bounds`` give every column a public scale."""
        return self.bounds is not None and self.bounds.all_public

    def _centred_options(self) -> dict[str, Any]:
        """The method's own arguments to ``run_centred_pca``."""
        return {}

    def _fit_centred(self, X: object, standardize: bool) -> PCAResult:
        X = _contract_rows(X, self.centring, self.bounds, f"{type(self).__name__}.fit")
        return run_centred_pca([X], self.bounds, self.n_components,
                               self._centred_policy(standardize), self._centred_method,
                               seed=_noise_seed(self.random_state), **self._centred_options())

    @property
    def clip_norm(self) -> float:
        """``data_norm``, or 1 without centring when it is ``None``."""
        return 1.0 if self.data_norm is None else self.data_norm


class _GaussianNoisePCA(_PrivateCentredPCA):
    """The parameters the (epsilon, delta) noisy-matrix methods share."""

    def __init__(
        self,
        n_components: int = 1,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float | None = None,
        random_state: int | None = None,
        centring: str | None = None,
        bounds: ColumnBounds | None = None,
    ) -> None:
        self._keep_parameters(locals())


#: The constructor arguments every private estimator documents alike (appended to its
#: docstring's Args at the end of this module).
_CENTRING_ARGS = """
        data_norm: public bound ``C`` on the row norms (of the centred, standardised rows
            when centring); longer rows are clipped to it. ``None``: 1 without centring;
            with it, the contract's default
            (:func:`~fedpca.algorithms.centring.default_clip_norm` of ``bounds``).
        random_state: seed for reproducible simulation only (``None``: OS randomness).
        centring: ``None`` (second-moment PCA of ``X`` as given), ``"centre"`` or
            ``"standardize"``: ``fit`` first releases the column means (and standard
            deviations) privately (``mean_``, ``scale_``), then runs the method on the
            centred (standardised) rows, clipped to ``data_norm``; the same
            (epsilon, delta) covers both
            (:func:`~fedpca.algorithms.centred_run.run_centred_pca`).
        bounds: the contract's public :class:`~fedpca.dp.moments.ColumnBounds`
            (``Contract.bounds``), required when centring: ``X`` must then be the
            contract's preprocessed matrix, every column within them (they set the mean's
            sensitivity).
"""


class AnalyzeGaussPCA(_GaussianNoisePCA):
    """Analyze Gauss: eigenvectors of ``X^T X`` plus symmetric Gaussian noise.

    Privacy guarantee: (epsilon, delta)-DP per record of ``X`` (replace-one) for each fit,
    analytic Gaussian calibration for the L2 sensitivity ``sqrt(2) data_norm^2``; when
    centring, the moments release and Analyze Gauss split the same (epsilon, delta)
    (:mod:`fedpca.dp.budget_split`: Gaussian releases compose exactly).

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
        epsilon: privacy parameter (finite, > 0).
        delta: privacy parameter in (0, 1).
        accounting: ``"pld"`` (analytic, default), ``"rdp"`` or ``"paper"`` (classic
            formula, epsilon < 1 only; not when centring: the split composes releases of
            different noise).
    """

    _centred_method = ANALYZE_GAUSS

    def __init__(
        self,
        n_components: int = 1,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float | None = None,
        random_state: int | None = None,
        accounting: str = "pld",
        centring: str | None = None,
        bounds: ColumnBounds | None = None,
    ) -> None:
        self._keep_parameters(locals())

    def _centred_policy(self, standardize: bool) -> CentredPolicy:
        return CentredPolicy(epsilon=self.epsilon, delta=self.delta, standardize=standardize,
                             clip_norm=self.data_norm, accounting=self.accounting,
                             public_scales=self._public_scales)

    def _fit_uncentred(self, X: object) -> PCAResult:
        return run_analyze_gauss(
            X, self.n_components, self.epsilon, self.delta, self.clip_norm,
            self.accounting, _noise_seed(self.random_state),
        )


class ModSulqPCA(_GaussianNoisePCA):
    """MOD-SuLQ (Chaudhuri et al. 2012, Alg. 1): eigenvectors of ``X^T X / n`` plus
    symmetric Gaussian noise with the paper's ``beta``.

    Privacy guarantee: (epsilon, delta)-DP per record of ``X`` (replace-one) for each fit,
    by the paper's Theorem 1 (rows of norm ``<= 1``: applied to ``X / data_norm``); when
    centring, the Gaussian moments release is (eps_m, delta / 2)-DP and MOD-SuLQ gets
    (epsilon - eps_m, delta / 2), basic composition
    (:mod:`fedpca.dp.basic_composition`).

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
        epsilon: privacy parameter, the paper's ``alpha`` (finite, > 0).
        delta: privacy parameter in (0, 1).
    """

    _centred_method = MOD_SULQ

    def _fit_uncentred(self, X: object) -> PCAResult:
        return run_mod_sulq(
            X, self.n_components, self.epsilon, self.delta, self.clip_norm,
            _noise_seed(self.random_state),
        )


class PPCA(_PrivateCentredPCA):
    """PPCA (Chaudhuri et al. 2012, Alg. 2): one draw of the matrix Bingham
    ``exp(tr(V^T (epsilon / (2 C^2)) X^T X V))``, the exponential mechanism.

    Privacy guarantee: epsilon-DP (pure, ``delta = 0``) per record of ``X`` (replace-one)
    for each fit, exact for ``n_components = 1``; for ``n_components > 1`` the frame comes
    from a Gibbs chain after ``burn_in`` sweeps and the guarantee holds only in the limit of
    exact sampling. When centring, the moments release is Gaussian: it is
    (eps_m, moments_delta)-DP and PPCA gets epsilon - eps_m, pure, so the fit is
    (epsilon, moments_delta)-DP by basic composition
    (:mod:`fedpca.dp.basic_composition`; :attr:`delta` says which). Only the subspace
    is released: ``explained_variance_`` does not exist. ``diagnostics_`` (the chain's
    mixing diagnostics, uncentred fits) is computed from the data and is NOT private.

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
        epsilon: privacy parameter, the paper's ``alpha`` (finite, > 0).
        burn_in: Gibbs sweeps before the released frame (``k > 1``).
        moments_delta: the delta of the moments release when centring, in (0, 1)
            (PPCA itself is pure; unused without centring).
    """

    _centred_method = PPCA_ALGORITHM
    _not_released: ClassVar[dict[str, str]] = {
        "explained_variance_": (
            "PPCA releases only the principal subspace, not its eigenvalues: computing them "
            "from the data would need a further private release (AnalyzeGaussPCA releases "
            "both)"
        ),
        "explained_variance_ratio_": "PPCA releases only the principal subspace, not the "
                                     "variances: no ratio either (AnalyzeGaussPCA has both)",
    }

    def __init__(
        self,
        n_components: int = 1,
        epsilon: float = 1.0,
        data_norm: float | None = None,
        burn_in: int = DEFAULT_BURN_IN,
        random_state: int | None = None,
        centring: str | None = None,
        bounds: ColumnBounds | None = None,
        moments_delta: float = 1e-5,
    ) -> None:
        self._keep_parameters(locals())

    @property
    def delta(self) -> float:
        """The fit's delta: 0 (pure) without centring, ``moments_delta`` with it."""
        return 0.0 if self.centring is None else self.moments_delta

    def _centred_options(self) -> dict[str, Any]:
        return {"burn_in": self.burn_in}

    def _fit_centred(self, X: object, standardize: bool) -> PCAResult:
        vars(self).pop("diagnostics_", None)  # an earlier uncentred fit's chain
        return super()._fit_centred(X, standardize)

    def _fit_uncentred(self, X: object) -> PCAResult:
        return run_ppca(
            X, self.n_components, self.epsilon, self.clip_norm, self.burn_in,
            _noise_seed(self.random_state), diagnostics=self._keep_diagnostics,
        )

    def _keep_diagnostics(self, diagnostics: ChainDiagnostics) -> None:
        self.diagnostics_ = diagnostics


for _estimator in (AnalyzeGaussPCA, ModSulqPCA, PPCA):
    _estimator.__doc__ = _estimator.__doc__.rstrip() + _CENTRING_ARGS

"""scikit-learn-style estimators for the central (trusted-curator) PCA methods.

Each estimator follows scikit-learn's conventions (as diffprivlib and OpenDP do for private
PCA): the constructor only stores its parameters; ``fit(X)`` validates, clips the rows to
``data_norm`` and runs the method; learned attributes end in an underscore; ``transform``
refuses to run before ``fit``. The data are *not* centred (the methods release the
principal subspace of the second-moment matrix ``X^T X / n``; centre with a public mean
first if needed) and ``transform`` projects rows as given.

Learned attributes: ``components_`` (``k x d``, rows are principal axes), ``result_`` (the
:class:`~fedpca.results.PCAResult`, with its privacy record and ``save``/``load``),
``n_features_in_``, and ``explained_variance_`` (the top eigenvalues of the released
second-moment matrix) only for methods that release it privately: Analyze Gauss and
MOD-SuLQ (post-processing of their noisy matrix) and the non-private baseline. PPCA
releases only the subspace; asking for its eigenvalues raises AttributeError.

Computation: ``fit`` does not eigendecompose a ``d x d`` matrix to keep ``k`` components
when that is slower. ``NonPrivatePCA`` takes the thin SVD of ``X`` when ``n < d``;
``AnalyzeGaussPCA`` and ``ModSulqPCA`` draw the same noise as always and find the top ``k``
eigenvectors of the same noisy matrix by Lanczos when ``d >= 1000`` and ``k <= 5 (d/1000)^2``
(:func:`fedpca.linalg.subspace.eigensolver_for`; relative residual ``1e-12``, dense fallback with a
logged warning), by LAPACK's dense ``eigh`` otherwise. ``PPCA`` stays ``O(d^3)``: its
sampler needs all ``d`` eigenpairs of ``B``.

Privacy (unit: one record of ``X``, replace-one; central trust model): every fit of a
private estimator spends its whole (epsilon, delta); fitting twice on the same data
releases twice. ``random_state`` makes the noise reproducible and is then NOT private
against anyone who knows it: leave it ``None`` outside simulations.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from fedpca.algorithms.central import (
    released_eigenvalues,
    run_analyze_gauss,
    run_mod_sulq,
    run_pooled_pca,
)
from fedpca.algorithms.ppca import DEFAULT_BURN_IN, run_ppca_chain
from fedpca.errors import ConfigurationError, InvalidDataError, NotFittedError
from fedpca.linalg.bingham import ChainDiagnostics
from fedpca.privacy.validation import validate_site_data
from fedpca.results import PCAResult


class _CentralPCA:
    """What every estimator shares: parameters, fit/transform, fitted-state checks."""

    #: Learned attributes the method never releases, and why (AttributeError message).
    _not_released: dict[str, str] = {}

    def _fit_result(self, X: np.ndarray) -> PCAResult:
        raise NotImplementedError

    def fit(self, X: np.ndarray, y: object = None) -> _CentralPCA:
        """Validate ``X`` (``n x d``), run the method and store the learned attributes.

        ``y`` is ignored (scikit-learn pipeline compatibility).
        """
        result = self._fit_result(X)
        self.result_ = result
        self.components_ = result.components_
        self.n_features_in_ = int(result.basis.shape[0])
        eigenvalues = released_eigenvalues(result)
        if eigenvalues is not None:
            self.explained_variance_ = eigenvalues
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Project the rows of ``X`` (``m x d``) onto the fitted components: ``m x k``."""
        result = self.result_  # raises NotFittedError before fit
        X = validate_site_data(X, site="transform input")
        if X.shape[1] != self.n_features_in_:
            raise InvalidDataError(
                f"X has {X.shape[1]} features but this {type(self).__name__} was fitted on "
                f"{self.n_features_in_}; use the same features, in the same order"
            )
        return result.transform(X)

    def fit_transform(self, X: np.ndarray, y: object = None) -> np.ndarray:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X, y).transform(X)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: an unreleased or not yet learned attribute.
        if name in self._not_released:
            raise AttributeError(self._not_released[name])
        if name.endswith("_") and not name.startswith("_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call fit(X) before using "
                f"{name}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def _parameter_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

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
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class NonPrivatePCA(_CentralPCA):
    """Non-private PCA of the second-moment matrix ``X^T X / n`` (the upper bound).

    No privacy guarantee: the components are a deterministic function of the raw data.

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
    """

    def __init__(self, n_components: int = 1) -> None:
        self.n_components = n_components

    def _fit_result(self, X: np.ndarray) -> PCAResult:
        return run_pooled_pca(X, self.n_components)


class _GaussianNoisePCA(_CentralPCA):
    """The parameters the (epsilon, delta) noisy-matrix methods share."""

    def __init__(
        self,
        n_components: int = 1,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        random_state: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.random_state = random_state


class AnalyzeGaussPCA(_GaussianNoisePCA):
    """Analyze Gauss: eigenvectors of ``X^T X`` plus symmetric Gaussian noise.

    Privacy guarantee: (epsilon, delta)-DP per record of ``X`` (replace-one), analytic
    Gaussian calibration for the L2 sensitivity ``sqrt(2) data_norm^2``.

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
        epsilon: privacy parameter (finite, > 0).
        delta: privacy parameter in (0, 1).
        data_norm: public bound ``C`` on the row norms; longer rows are clipped to it.
        random_state: seed for reproducible simulation only (``None``: OS randomness).
        accounting: ``"pld"`` (analytic, default), ``"rdp"`` or ``"paper"`` (classic
            formula, epsilon < 1 only).
    """

    def __init__(
        self,
        n_components: int = 1,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        random_state: int | None = None,
        accounting: str = "pld",
    ) -> None:
        super().__init__(n_components, epsilon, delta, data_norm, random_state)
        self.accounting = accounting

    def _fit_result(self, X: np.ndarray) -> PCAResult:
        return run_analyze_gauss(
            X, self.n_components, self.epsilon, self.delta, self.data_norm,
            self.accounting, self.random_state,
        )


class ModSulqPCA(_GaussianNoisePCA):
    """MOD-SuLQ (Chaudhuri et al. 2012, Alg. 1): eigenvectors of ``X^T X / n`` plus
    symmetric Gaussian noise with the paper's ``beta``.

    Privacy guarantee: (epsilon, delta)-DP per record of ``X`` (replace-one) by the paper's
    Theorem 1 (rows of norm ``<= 1``: applied to ``X / data_norm``).

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
        epsilon: privacy parameter, the paper's ``alpha`` (finite, > 0).
        delta: privacy parameter in (0, 1).
        data_norm: public bound ``C`` on the row norms; longer rows are clipped to it.
        random_state: seed for reproducible simulation only (``None``: OS randomness).
    """

    def _fit_result(self, X: np.ndarray) -> PCAResult:
        return run_mod_sulq(
            X, self.n_components, self.epsilon, self.delta, self.data_norm, self.random_state
        )


class PPCA(_CentralPCA):
    """PPCA (Chaudhuri et al. 2012, Alg. 2): one draw of the matrix Bingham
    ``exp(tr(V^T (epsilon / (2 C^2)) X^T X V))``, the exponential mechanism.

    Privacy guarantee: epsilon-DP (pure, ``delta = 0``) per record of ``X`` (replace-one),
    exact for ``n_components = 1``; for ``n_components > 1`` the frame comes from a Gibbs
    chain after ``burn_in`` sweeps and the guarantee holds only in the limit of exact
    sampling. Only the subspace is released: ``explained_variance_`` does not exist.
    ``diagnostics_`` (the chain's mixing diagnostics) is computed from the data and is NOT
    private.

    Args:
        n_components: number of components ``k`` (``1 <= k <= d``).
        epsilon: privacy parameter, the paper's ``alpha`` (finite, > 0).
        data_norm: public bound ``C`` on the row norms; longer rows are clipped to it.
        burn_in: Gibbs sweeps before the released frame (``k > 1``).
        random_state: seed for reproducible simulation only (``None``: OS randomness).
    """

    #: PPCA is pure differential privacy.
    delta = 0.0
    _not_released = {
        "explained_variance_": (
            "PPCA releases only the principal subspace, not its eigenvalues: computing them "
            "from the data would need a further private release (AnalyzeGaussPCA releases "
            "both)"
        )
    }

    def __init__(
        self,
        n_components: int = 1,
        epsilon: float = 1.0,
        data_norm: float = 1.0,
        burn_in: int = DEFAULT_BURN_IN,
        random_state: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.data_norm = data_norm
        self.burn_in = burn_in
        self.random_state = random_state

    def _fit_result(self, X: np.ndarray) -> PCAResult:
        run = run_ppca_chain(
            X, self.n_components, self.epsilon, self.data_norm, self.burn_in,
            self.random_state,
        )
        self.diagnostics_: ChainDiagnostics = run.diagnostics
        return run.result

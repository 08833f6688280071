"""The result every fedpca algorithm returns: a basis (a subspace clustering's: one basis per
cluster), its privacy record and its history."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from fedpca.errors import InvalidDataError
from fedpca.linalg.subspace import assign_to_subspaces

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fedpca.dp.moments import ColumnMoments

R = TypeVar("R", bound="SavedResult")


def _plain(value: Any) -> Any:
    """``value`` with numpy arrays (also inside lists) as nested lists, for JSON."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def float_array(value: Any) -> np.ndarray:
    """A float64 array read back from JSON."""
    return np.asarray(value, dtype=np.float64)


def scores(rows: np.ndarray, basis: np.ndarray, mean: np.ndarray | float = 0.0,
           scale: np.ndarray | float = 1.0) -> np.ndarray:
    """``(rows - mean) / scale @ basis``: the scores of rows (``m x d``) on a released basis
    (``d x k``), centred and scaled with the released mean and scale (post-processing)."""
    return (rows - mean) / scale @ basis


class SavedResult:
    """JSON ``save``/``load`` of a result dataclass: arrays are written as nested lists and
    read back by the class's :attr:`READERS`; keys a file holds beyond the fields are ignored
    (a run record, :mod:`fedpca.run_record`, holds more)."""

    #: field -> how to read it back from JSON (fields not named here are read as they are).
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description, arrays included."""
        return {f.name: _plain(getattr(self, f.name))
                for f in fields(self)}  # type: ignore[arg-type]

    def save(self, path: str | Path) -> None:
        """Write the result as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls: type[R], path: str | Path) -> R:
        """Read a result written by :meth:`save`, or the run record of
        :func:`fedpca.run_record.save_run_record` (``fedpca simulate --output``, the Flower
        App's ``output``), which holds the same keys."""
        raw = json.loads(Path(path).read_text())
        kwargs = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name in raw:
                value = raw[f.name]
                read = cls.READERS.get(f.name)
                kwargs[f.name] = value if read is None or value is None else read(value)
            elif f.default is MISSING and f.default_factory is MISSING:
                raise InvalidDataError(f"{path}: the result has no {f.name!r}")
        return cls(**kwargs)


@dataclass
class PCAResult(SavedResult):
    """A private principal subspace and how it was obtained.

    Attributes:
        algorithm: e.g. ``"dps-pca"``.
        basis: ``d x k`` orthonormal columns spanning the estimated subspace.
        privacy: the privacy the run was configured with (epsilon, delta, accounting, noise
            multiplier, sensitivity, sigma, unit of privacy, trust model): every site's in a
            simulation, the coordinator's request in the App, where a real site's policy
            replaces it (what each site guaranteed: ``config["site_guarantees"]``).
        history: one dict per round (round, phase, sites, epsilon_spent, and any metrics).
        config: the parameters of the run.
        sites_answered: per round, the site ids whose answers were used.
        columns: the names of the basis's rows (the contract's output columns), or
            ``None`` (then :meth:`column_names` gives ``x0 .. x{d-1}``).
        explained_variance: the variance per record along each component: the top-``k``
            eigenvalues of the whole noisy matrix the run released (clamped at 0), or
            DPS-PCA's released Rayleigh quotients; ``None`` when the run released none
            (:mod:`fedpca.algorithms.explained_variance`).
        explained_variance_ratio: each of them over the noisy total variance (a trace);
            ``None`` where the run released no total (DPdisPCA's factor variant).
    """

    algorithm: str
    basis: np.ndarray
    privacy: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    sites_answered: list[list[str]] = field(default_factory=list)
    columns: list[str] | None = None
    explained_variance: np.ndarray | None = None
    explained_variance_ratio: np.ndarray | None = None

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "basis": float_array, "explained_variance": float_array,
        "explained_variance_ratio": float_array,
    }

    @property
    def components_(self) -> np.ndarray:
        """``k x d`` principal axes, one per row (the scikit-learn convention)."""
        return self.basis.T

    @property
    def n_components(self) -> int:
        """Number of components ``k``."""
        return int(self.basis.shape[1])

    @property
    def k(self) -> int:
        """Number of components (the same as :attr:`n_components`)."""
        return self.n_components

    @property
    def dim(self) -> int:
        """Number of features ``d``."""
        return int(self.basis.shape[0])

    @property
    def epsilon(self) -> float | None:
        """The epsilon of the guarantee (``None`` for a non-private result)."""
        return self.privacy.get("epsilon")

    @property
    def delta(self) -> float | None:
        """The delta of the guarantee (``None`` for a non-private result)."""
        return self.privacy.get("delta")

    @property
    def data_norm(self) -> float | None:
        """The public row-norm bound ``C`` the data were clipped to."""
        return self.privacy.get("clip_norm")

    @property
    def explained_variance_(self) -> np.ndarray:
        """The released variance along each component (scikit-learn's name); raises where
        the run released none."""
        if self.explained_variance is None:
            raise AttributeError(
                f"{self.algorithm} releases only the subspace, not its variances: "
                "explained_variance_ is not available (releasing it would cost privacy "
                "budget; DPS-PCA releases it with explained_variance=True)")
        return self.explained_variance

    @property
    def explained_variance_ratio_(self) -> np.ndarray:
        """Each component's share of the total variance; raises where none was released."""
        if self.explained_variance_ratio is None:
            raise AttributeError(
                f"{self.algorithm} ({self.config.get('variant', '')}) released no total "
                "variance (no whole noisy matrix, no released trace): "
                "explained_variance_ratio_ is not available")
        return self.explained_variance_ratio

    def column_names(self) -> list[str]:
        """The names of the basis's rows: :attr:`columns`, or ``x0 .. x{d-1}``."""
        return list(self.columns) if self.columns is not None else [
            f"x{j}" for j in range(self.dim)]

    def rows(self, X: np.ndarray) -> np.ndarray:
        """``X`` as float64 rows of this basis's dimension, or raise InvalidDataError."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.basis.shape[0]:
            raise InvalidDataError(
                f"transform expects an array of shape (m, {self.basis.shape[0]}), got {X.shape}"
            )
        return X

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Project rows of ``X`` (``m x d``) onto the basis: returns ``m x k``."""
        return self.rows(X) @ self.basis


@dataclass
class CentredPCAResult(PCAResult):
    """A private principal subspace of centred (and possibly standardised) rows, with what
    a PCA user reads from it (:func:`fedpca.algorithms.centred_run.run_centred_pca`).

    Attributes (beyond :class:`PCAResult`'s, whose ``columns`` are the contract's output
    columns and whose explained variance is that of the noisy *centred* second moment;
    every one released or public):
        mean: the released column means (contract units: each column shifted to
            ``[0, w_j]``).
        scale: the released column standard deviations (ones when only centred; a column
            with a public scale in the contract has that one, ``privacy["public_scales"]``).
        explained_variance_ratio_floored: the explained-variance ratio is over a total in
            which some columns' scales sit at the noise floor (``config["floored_variances"]``:
            a variance the moments' noise hid, rounded up; those columns then weigh almost
            nothing, the total is too small and every ratio reads high). ``False`` when the
            run released no ratio or floored no scale.
    """

    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    explained_variance_ratio_floored: bool = False

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        **PCAResult.READERS, "mean": float_array, "scale": float_array,
    }

    @property
    def mean_(self) -> np.ndarray:
        """The released column means (scikit-learn's name)."""
        return self.mean

    @property
    def scale_(self) -> np.ndarray:
        """The released column scales (scikit-learn's ``StandardScaler`` name)."""
        return self.scale

    @property
    def floored_scales(self) -> list[int]:
        """The columns whose released scale sits at the noise floor (their variance was
        below the moments' noise); empty when the run did not standardise."""
        return list(self.config.get("floored_variances") or [])

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Scores of rows ``X`` (preprocessed by the contract, ``m x d``): centred and
        scaled with the released mean and scale, projected onto the basis (``m x k``).
        Rows are not clipped: scores are computed where the rows are and go nowhere."""
        return scores(self.rows(X), self.basis, self.mean, self.scale)


@dataclass
class ClusteringResult(SavedResult):
    """Private subspaces (one per cluster) and how they were obtained.

    Attributes:
        algorithm: e.g. ``"sulq-kplane"``.
        bases: one ``d x q`` orthonormal basis per cluster.
        assignments: each record's cluster when the algorithm releases them, else ``None``
            (federated algorithms keep every record's cluster at its site).
        privacy: the guarantee actually given (epsilon, delta, accounting, noise multiplier,
            sensitivity, sigma, unit of privacy, trust model).
        history: one dict per round (round, sites, epsilon_spent, and any metrics).
        config: the parameters of the run.
    """

    algorithm: str
    bases: list[np.ndarray]
    assignments: np.ndarray | None
    privacy: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "bases": lambda bases: [float_array(basis) for basis in bases],
        "assignments": lambda labels: np.asarray(labels, dtype=np.int64),
    }

    @property
    def clusters(self) -> int:
        """Number of clusters ``k``."""
        return len(self.bases)

    @property
    def k(self) -> int:
        """Number of clusters (the same as :attr:`clusters`)."""
        return self.clusters

    @property
    def dim(self) -> int:
        """Number of features ``d``."""
        return int(self.bases[0].shape[0])

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Each row of ``X``'s nearest subspace (post-processing: no privacy cost)."""
        return assign_to_subspaces(X, self.bases)


@dataclass
class CentredClusteringResult(ClusteringResult):
    """Private subspaces of centred (and possibly standardised) rows
    (:func:`fedpca.algorithms.centred_run.run_centred_kplane`): the bases live in the
    transformed space, so a row is centred and scaled with the released mean and scale
    before it is assigned (post-processing).

    Attributes (beyond :class:`ClusteringResult`'s; every one released or public):
        columns: the contract's output column names (the bases' rows).
        mean: the released column means (contract units).
        scale: the released column standard deviations (ones when only centred).
    """

    columns: list[str] | None = None
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        **ClusteringResult.READERS, "mean": float_array, "scale": float_array,
    }

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Each row of ``X`` (preprocessed by the contract), centred and scaled with the
        released mean and scale, to its nearest subspace (post-processing)."""
        return super().predict((np.asarray(X, dtype=np.float64) - self.mean) / self.scale)


def centred_result(base: PCAResult | ClusteringResult, moments: ColumnMoments,
                   columns: Sequence[str] | None = None
                   ) -> CentredPCAResult | CentredClusteringResult:
    """``base`` (an algorithm's result on the centred rows: a PCA result with its explained
    variance, or k-plane's clusters) with the released ``moments``' mean and scale and the
    contract's output ``columns``."""
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    if columns is not None:
        values["columns"] = list(columns)
    if isinstance(base, ClusteringResult):
        return CentredClusteringResult(**values, mean=moments.mean, scale=moments.scale)
    return CentredPCAResult(**values, mean=moments.mean, scale=moments.scale,
                            explained_variance_ratio_floored=floored_total(
                                moments, base.explained_variance_ratio))


def floored_total(moments: ColumnMoments, ratio: np.ndarray | None) -> bool:
    """Whether an explained-variance ``ratio`` is over a total in which ``moments`` floored
    some column's scale (so every ratio reads high)."""
    return ratio is not None and bool(moments.floored_variances)

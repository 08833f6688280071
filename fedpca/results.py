"""The result every fedpca algorithm returns: a basis, its privacy record and its history."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedpca.errors import InvalidDataError


@dataclass
class PCAResult:
    """A private principal subspace and how it was obtained.

    Attributes:
        algorithm: e.g. ``"dps-pca"``.
        basis: ``d x k`` orthonormal columns spanning the estimated subspace.
        privacy: the guarantee actually given (epsilon, delta, accounting, noise multiplier,
            sensitivity, sigma, unit of privacy, trust model).
        history: one dict per round (round, phase, sites, epsilon_spent, and any metrics).
        config: the parameters of the run.
        sites_answered: per round, the site ids whose answers were used.
    """

    algorithm: str
    basis: np.ndarray
    privacy: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    sites_answered: list[list[str]] = field(default_factory=list)

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
        """The released eigenvalues, when the method released them privately."""
        for entry in self.history:
            if "eigenvalues" in entry:
                return np.asarray(entry["eigenvalues"], dtype=np.float64)
        raise AttributeError(
            f"{self.algorithm} releases only the subspace, not its variances: "
            "explained_variance_ is not available (releasing it would cost privacy budget)"
        )

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Project rows of ``X`` (``m x d``) onto the basis: returns ``m x k``."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.basis.shape[0]:
            raise InvalidDataError(
                f"transform expects an array of shape (m, {self.basis.shape[0]}), got {X.shape}"
            )
        return X @ self.basis

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description, basis included."""
        return {
            "algorithm": self.algorithm,
            "basis": self.basis.tolist(),
            "privacy": self.privacy,
            "history": self.history,
            "config": self.config,
            "sites_answered": self.sites_answered,
        }

    def save(self, path: str | Path) -> None:
        """Write the result as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, path: str | Path) -> PCAResult:
        """Read a result written by :meth:`save`, or the run record of
        :func:`fedpca.run_record.save_run_record` (``fedpca simulate --output``, the Flower
        App's ``output``), which holds the same keys."""
        raw = json.loads(Path(path).read_text())
        return cls(
            algorithm=raw["algorithm"],
            basis=np.asarray(raw["basis"], dtype=np.float64),
            privacy=raw["privacy"],
            history=raw["history"],
            config=raw["config"],
            sites_answered=raw["sites_answered"],
        )

"""A malicious site for experiments: one member of a run that sends more than its records
could produce, or records chosen to steer the result (no Flower import).

**The model.** Every attack here is a change of the site's second-moment matrix from ``X^T X``
to ``X^T X + B^T B`` for extra rows ``B`` that are neither clipped nor counted: the site's
declared ``n`` stays its true record count, so nothing in its answer's metadata gives it away.
Its records are stacked with ``B`` (:class:`StackedRows`) and read as before, through the
:class:`~fedpca.algorithms.site_rows.SiteRows` products (DPS-PCA) or the matrix ``X``
(DPdisPCA): the same attack reaches every statistic of both algorithms, per-site answers and
secure-sum messages alike. The attacks (:class:`Attack`, parsed from text):

* ``subspace``: a chosen random ``3``-dimensional subspace ``U``, ``B = sqrt(a) U^T`` with
  ``a`` three times the union's top eigenvalue as the attacker estimates it (its own top
  eigenvalue of ``X^T X`` times the number of sites): the union's top 3 eigenvectors
  become ``U``;
* ``rank-one``: ``B = sqrt(10 e) v^T`` for a chosen unit ``v`` and that estimate ``e``;
* ``scale:s``: ``B = sqrt(s - 1) X``, the statistic scaled by ``s``;
* ``in-bound``: no extra rows; the site REPLACES its records by ``n`` rows ``C v`` (``C``
  its clip norm, ``v`` the chosen unit vector): records within the contract, all on one
  direction, which an honest site holding them would send too; no bound can tell them apart.

**Experiments only.** Nothing in the product builds a malicious site: the reference runs
take one as their ``site_cls`` (:func:`malicious_site_class`), ``fedpca simulate dps-pca|
dpdis-pca --malicious-site ATTACK`` turns simulated site ``"0"`` malicious, and
``benchmarks/malicious_site.py`` measures what the servers' bounds and the robust
combination of groups (:mod:`fedpca.algorithms.sum_groups`) catch. A malicious site charges
its ledger like an honest one; its guarantee to its own records is no concern of the attack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from fedpca.algorithms.site import PrivateSite
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import gram_product, thin_qr

SUBSPACE, RANK_ONE, SCALE, IN_BOUND = "subspace", "rank-one", "scale", "in-bound"
#: The attacks by name (``scale`` takes its factor: ``scale:1e3``).
KINDS = (SUBSPACE, RANK_ONE, SCALE, IN_BOUND)
#: The chosen subspace's dimension and its weight over the estimated top eigenvalue.
SUBSPACE_DIM, SUBSPACE_WEIGHT = 3, 3.0
#: The rank-one push's weight over the estimated top eigenvalue.
RANK_ONE_WEIGHT = 10.0
#: The algorithms whose sites it is built for (``fedpca simulate ... --malicious-site``).
ALGORITHMS = ("dps-pca", "dpdis-pca")
#: The site a simulation turns malicious.
MALICIOUS_SITE = "0"
#: Stream key of the attacker's own randomness (its subspace and direction).
ATTACK_STREAM = 0xBAD

S = TypeVar("S", bound=PrivateSite)


@dataclass(frozen=True)
class Attack:
    """One attack (module docstring).

    Attributes:
        kind: one of :data:`KINDS`.
        factor: ``scale``'s ``s > 1`` (``None`` for the other kinds).
        seed: seeds the attacker's chosen subspace and direction.
    """

    kind: str
    factor: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigurationError(
                f"unknown attack {self.kind!r}; expected one of {', '.join(KINDS)} (scale "
                "with its factor, e.g. scale:1e3)")
        if (self.kind == SCALE) != (self.factor is not None):
            raise ConfigurationError(
                "scale takes its factor (scale:S, S > 1) and the other attacks none, got "
                f"{self}")
        if self.factor is not None and not (math.isfinite(self.factor) and self.factor > 1):
            raise ConfigurationError(f"scale's factor must be a finite number > 1, got "
                                     f"{self.factor!r}")

    @classmethod
    def parse(cls, text: str, seed: int = 0) -> Attack:
        """``subspace``, ``rank-one``, ``in-bound`` or ``scale:S`` (``S`` a number > 1)."""
        kind, _, factor = text.strip().lower().partition(":")
        if not factor:
            return cls(kind, None, seed)
        try:
            value = float(factor)
        except ValueError:
            raise ConfigurationError(f"scale's factor must be a number, got {factor!r} in "
                                     f"{text!r}") from None
        return cls(kind, value, seed)

    def __str__(self) -> str:
        return self.kind if self.factor is None else f"{self.kind}:{self.factor:g}"

    def direction(self, dim: int) -> np.ndarray:
        """The chosen unit vector ``v`` (rank-one and in-bound)."""
        v = self._rng().standard_normal(dim)
        return v / np.linalg.norm(v)

    def subspace(self, dim: int) -> np.ndarray:
        """The chosen ``dim x 3`` orthonormal ``U`` (a uniformly random subspace)."""
        return thin_qr(self._rng().standard_normal((dim, SUBSPACE_DIM)))

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, ATTACK_STREAM])

    def records(self, X: np.ndarray, clip_norm: float) -> np.ndarray:
        """The records the site answers from: ``n`` rows ``C v`` for ``in-bound``, else
        ``X`` itself."""
        if self.kind != IN_BOUND:
            return X
        return np.tile(clip_norm * self.direction(X.shape[1]), (X.shape[0], 1))

    def extra_rows(self, X: np.ndarray, sites: int) -> np.ndarray:
        """``B`` (``m x d``, possibly ``m = 0``) for records ``X`` in a run of ``sites``
        sites (module docstring)."""
        dim = X.shape[1]
        if self.kind == IN_BOUND:
            return np.zeros((0, dim))
        if self.kind == SCALE:
            return math.sqrt(self.factor - 1.0) * X
        estimate = union_top_eigenvalue(X, sites)
        if self.kind == SUBSPACE:
            return math.sqrt(SUBSPACE_WEIGHT * estimate) * self.subspace(dim).T
        return math.sqrt(RANK_ONE_WEIGHT * estimate) * self.direction(dim)[None, :]


def union_top_eigenvalue(X: np.ndarray, sites: int) -> float:
    """The attacker's estimate of the union's top eigenvalue of its second moment: its own
    ``||X||_2^2`` (the top eigenvalue of ``X^T X``) times the number of ``sites``."""
    if sites < 1:
        raise ConfigurationError(f"the run's sites must be at least 1, got {sites}")
    return float(np.linalg.norm(X, 2) ** 2) * sites


class StackedRows:
    """A :class:`~fedpca.algorithms.site_rows.SiteRows` over ``records`` stacked with
    unclipped ``extra`` rows that are not counted: its products are those of ``[records;
    extra]``, its ``n`` the records' count."""

    def __init__(self, records: np.ndarray, extra: np.ndarray, clip_norm: float,
                 clipped: int) -> None:
        self.stacked = np.vstack([records, extra])
        self.records, self._clip_norm, self._clipped = int(records.shape[0]), clip_norm, clipped

    @property
    def n(self) -> int:
        """The records' count (what the site declares), not the stacked rows'."""
        return self.records

    @property
    def d(self) -> int:
        """The number of columns."""
        return int(self.stacked.shape[1])

    @property
    def clip_norm(self) -> float:
        """The site's public clip norm (the extra rows ignore it)."""
        return self._clip_norm

    def times(self, basis: np.ndarray) -> np.ndarray:
        """``[X; B] Q``."""
        return self.stacked @ basis

    def gram_times(self, basis: np.ndarray) -> np.ndarray:
        """``(X^T X + B^T B) Q``."""
        return gram_product(self.stacked, basis)

    def squared_column_norms(self) -> np.ndarray:
        """``diag(X^T X + B^T B)``."""
        return np.einsum("ij,ij->j", self.stacked, self.stacked)

    def clipped_rows(self) -> int:
        """The site's own records' clipped count."""
        return self._clipped


def turn_malicious(site: PrivateSite, attack: Attack, sites: int) -> None:
    """Make ``site`` answer from ``attack``'s records stacked with its extra rows (its
    :attr:`~PrivateSite.rows` and :attr:`~PrivateSite.X` both), its declared ``n``
    unchanged.

    Raises:
        ConfigurationError: the site's records are streamed (genotypes), not in memory.
    """
    if site.X is None:
        raise ConfigurationError(
            f"{site.site}: a malicious site needs its records in memory; streamed rows "
            "(genotypes) are not built for it")
    records = attack.records(site.X, site.clip_norm)
    rows = StackedRows(records, attack.extra_rows(records, sites), site.clip_norm,
                       site.rows.clipped_rows())
    site.rows, site.X = rows, rows.stacked


def malicious_site_class(site_cls: type[S], attack: Attack, sites: int,
                         name: str = MALICIOUS_SITE) -> type[S]:
    """A subclass of ``site_cls`` whose site named ``name`` turns malicious with ``attack``
    in a run of ``sites`` sites (:func:`turn_malicious`); every other site is honest. Usable
    as a reference run's ``site_cls``."""

    class MaliciousSite(site_cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            if self.site == name:
                turn_malicious(self, attack, sites)

    MaliciousSite.__name__ = MaliciousSite.__qualname__ = f"Malicious{site_cls.__name__}"
    MaliciousSite.__doc__ = f"{site_cls.__name__} whose site {name!r} attacks with {attack}."
    return MaliciousSite

"""Private column means and scales from public bounds: the sums a site releases for centring.

Every PCA user centres (and often standardises) the columns first. A federation cannot pool
the rows, so each site releases two sums of its own records, noisy, and everyone
post-processes their totals:

* ``S = sum_i x_i`` (the column sums) and, for standardising, ``Q = sum_i x_i^2`` (the
  column sums of squares), over a site's ``n`` records (``n`` is public: replace-one);
* ``mu = S / N``, ``var = Q / N - mu^2`` over all ``N`` records; each site then centres (and
  scales) its rows with the released ``mu`` (``sd``) and clips them to a public norm.

Bounds. A data contract (public, shared by the consortium) shifts every column to
``[0, w_j]`` with a public width ``w_j``; a categorical column becomes a *one-hot group* of
0/1 columns with exactly one 1 per record. :class:`ColumnBounds` holds the widths and the
groups.

Privacy guarantee (unit: one record, replace-one, L2): replacing a record ``x`` by ``y``
moves ``S`` by ``x - y``, whose coordinate ``j`` lies in ``[-w_j, w_j]`` outside any group;
inside a one-hot group two coordinates change by one each (or none), ``sqrt(2)`` in L2,
whatever the number of levels. Hence

* ``Delta(S) = sqrt(sum_{j not in a group} w_j^2 + 2 G)``, ``G`` the number of groups;
* ``Delta(Q) = sqrt(sum_{j not in a group} w_j^4 + 2 G)`` (a 0/1 column is its own square);
* ``Delta((S, Q)) = sqrt(Delta(S)^2 + Delta(Q)^2)`` when both are released as one vector.

Each bound is attained (:func:`extreme_pair`), so none is loose. The release itself is any
Gaussian release of the site (float, exact grid points or a secure sum) calibrated to that
sensitivity and charged to its ledger like every other release; everything in this module
after the release is post-processing of released values and public bounds, and costs no
privacy.

Post-processing (:func:`column_moments`): ``mu`` is clamped into ``[0, w_j]`` (where the true
mean lies), the variance into ``[floor, w_j^2 / 4]`` (``w_j^2 / 4`` is the largest variance a
variable in ``[0, w_j]`` can have; the floor, a public value, keeps a noisy variance near 0
from blowing a column up), so no noisy value is ever divided by near zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedpca.errors import ConfigurationError

#: The default floor of a released variance, relative to the column's largest ``w_j^2 / 4``.
VARIANCE_FLOOR = 1e-3


@dataclass(frozen=True)
class ColumnBounds:
    """Public bounds of a site's preprocessed columns: each column lies in ``[0, w_j]``
    (``widths``), and each of ``groups`` is a one-hot group (0/1 columns, exactly one 1 per
    record). Columns outside every group are *free*."""

    widths: tuple[float, ...]
    groups: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if not self.widths:
            raise ConfigurationError("column bounds need at least one column")
        if not all(math.isfinite(w) and w > 0 for w in self.widths):
            raise ConfigurationError(
                f"column widths must be finite and > 0, got {list(self.widths)}: a column "
                "whose public range is one point carries nothing; drop it from the contract"
            )
        seen: set[int] = set()
        for group in self.groups:
            if len(group) < 2 or any(not 0 <= j < self.dim for j in group):
                raise ConfigurationError(
                    f"one-hot group {list(group)} must name at least 2 of the {self.dim} "
                    "columns"
                )
            if seen & set(group):
                raise ConfigurationError(f"column(s) {sorted(seen & set(group))} are in two "
                                         "one-hot groups")
            if any(self.widths[j] != 1.0 for j in group):
                raise ConfigurationError(f"one-hot group {list(group)}: its columns are 0/1, "
                                         "width 1")
            seen |= set(group)

    @property
    def dim(self) -> int:
        """Number of columns."""
        return len(self.widths)

    def free(self) -> np.ndarray:
        """The widths of the columns outside every one-hot group."""
        grouped = {j for group in self.groups for j in group}
        return np.array([w for j, w in enumerate(self.widths) if j not in grouped])

    def sum_sensitivity(self) -> float:
        """Replace-one L2 sensitivity of the column sums ``S``."""
        return math.sqrt(float(np.sum(self.free() ** 2)) + 2 * len(self.groups))

    def square_sum_sensitivity(self) -> float:
        """Replace-one L2 sensitivity of the column sums of squares ``Q``."""
        return math.sqrt(float(np.sum(self.free() ** 4)) + 2 * len(self.groups))

    def moments_sensitivity(self, standardize: bool) -> float:
        """Replace-one L2 sensitivity of the released vector: ``S``, or ``(S, Q)`` when
        ``standardize``."""
        if not standardize:
            return self.sum_sensitivity()
        return math.hypot(self.sum_sensitivity(), self.square_sum_sensitivity())

    def unit(self) -> ColumnBounds:
        """The bounds of the rows divided by their widths: every column in ``[0, 1]``, the
        same one-hot groups. Releasing the moments of those rows puts each column's noise in
        proportion to its width (with the raw rows the widest column's range would set the
        noise of every column); :meth:`ColumnMoments.rescaled` takes them back."""
        return ColumnBounds(widths=(1.0,) * self.dim, groups=self.groups)

    def row_norm(self) -> float:
        """The largest L2 norm of a row within these bounds: ``sqrt(sum_free w_j^2 + G)``
        (one 1 per one-hot group)."""
        return math.sqrt(float(np.sum(self.free() ** 2)) + len(self.groups))

    def record_norm(self, standardize: bool) -> float:
        """The largest L2 norm of one record's contribution to the released vector
        (:func:`moment_statistic` of one row): its row, and with ``standardize`` its squares
        too (a secure sum's norm per record)."""
        if not standardize:
            return self.row_norm()
        return math.sqrt(self.row_norm() ** 2 + float(np.sum(self.free() ** 4))
                         + len(self.groups))

    def variance_bound(self) -> float:
        """The largest total variance rows within these bounds can have: ``w_j^2 / 4`` per
        free column, ``1 - 1/L`` per one-hot group of ``L`` levels; so the root-mean-square
        norm of centred rows is at most its square root."""
        groups = sum(1.0 - 1.0 / len(group) for group in self.groups)
        return float(np.sum(self.free() ** 2)) / 4 + groups

    def contains(self, rows: np.ndarray) -> bool:
        """Whether every row lies within these bounds (columns in ``[0, w_j]``, one 1 per
        one-hot group)."""
        rows = np.atleast_2d(rows)
        inside = bool(np.all((rows >= 0) & (rows <= np.asarray(self.widths))))
        return inside and all(
            np.all(np.isin(rows[:, list(g)], (0.0, 1.0))) and np.all(rows[:, list(g)].sum(1) == 1)
            for g in self.groups
        )


def moment_statistic(rows: np.ndarray, standardize: bool) -> np.ndarray:
    """What a site releases for centring: ``S`` (``d``), or ``S`` then ``Q`` (``2d``), summed
    over the records axis (``-2``: a stack of record sets gives one statistic each)."""
    sums = rows.sum(axis=-2)
    return np.concatenate([sums, (rows**2).sum(axis=-2)], axis=-1) if standardize else sums


def extreme_pair(bounds: ColumnBounds) -> tuple[np.ndarray, np.ndarray]:
    """Two records within ``bounds`` whose replacement moves ``S`` and ``Q`` by exactly
    their sensitivities: every free column at ``0`` against ``w_j``, each group's first
    level against its second."""
    x, y = np.zeros(bounds.dim), np.asarray(bounds.widths, dtype=float).copy()
    for group in bounds.groups:
        x[list(group)], y[list(group)] = 0.0, 0.0
        x[group[0]], y[group[1]] = 1.0, 1.0
    return x, y


@dataclass(frozen=True)
class ColumnMoments:
    """Released column means ``mean`` and scales ``scale`` (all ones unless
    ``standardized``), with the columns whose noisy value was clamped (said to the user,
    never hidden)."""

    mean: np.ndarray
    scale: np.ndarray
    clamped_means: tuple[int, ...]
    floored_variances: tuple[int, ...]
    standardized: bool = False

    def transform(self, rows: np.ndarray) -> np.ndarray:
        """``(rows - mean) / scale``: the centred (standardised) rows."""
        return (rows - self.mean) / self.scale

    def rescaled(self, widths: np.ndarray) -> ColumnMoments:
        """The moments of rows multiplied column by column by ``widths`` (the moments of
        rows released in :meth:`ColumnBounds.unit` units, in the contract's units)."""
        widths = np.asarray(widths, dtype=np.float64)
        scale = self.scale * widths if self.standardized else self.scale
        return ColumnMoments(self.mean * widths, scale, self.clamped_means,
                             self.floored_variances, self.standardized)

    def box_norm(self, bounds: ColumnBounds) -> float:
        """A bound on the norm of any transformed row within ``bounds``: always valid, often
        loose (a contract's clip norm may be smaller; rows past it are clipped)."""
        widths = np.asarray(bounds.widths)
        reach = np.maximum(self.mean, widths - self.mean) / self.scale
        return float(np.linalg.norm(reach))


def column_moments(
    noisy: np.ndarray, records: int, bounds: ColumnBounds, standardize: bool,
    floor: float | None = None,
) -> ColumnMoments:
    """Post-process the federation's total released ``noisy`` statistic (the sum of the
    sites' :func:`moment_statistic` releases) over ``records`` records into means and
    (with ``standardize``) scales. ``floor``: the smallest variance kept (public; default
    :data:`VARIANCE_FLOOR` times the largest ``w_j^2 / 4``)."""
    d = bounds.dim
    noisy = np.asarray(noisy, dtype=float)
    if noisy.shape != ((2 * d,) if standardize else (d,)) or not np.all(np.isfinite(noisy)):
        raise ConfigurationError(
            f"the released moments must be {2 * d if standardize else d} finite values for "
            f"{d} columns, got shape {noisy.shape}"
        )
    if records < 1:
        raise ConfigurationError(f"the moments need at least one record, got {records}")
    widths = np.asarray(bounds.widths)
    raw_mean = noisy[:d] / records
    mean = np.clip(raw_mean, 0.0, widths)
    clamped = tuple(int(j) for j in np.flatnonzero(mean != raw_mean))
    if not standardize:
        return ColumnMoments(mean, np.ones(d), clamped, ())
    floor = VARIANCE_FLOOR * float(np.max(widths**2 / 4)) if floor is None else floor
    raw_var = noisy[d:] / records - mean**2
    var = np.clip(raw_var, floor, np.maximum(widths**2 / 4, floor))
    floored = tuple(int(j) for j in np.flatnonzero(raw_var < floor))
    return ColumnMoments(mean, np.sqrt(var), clamped, floored, standardized=True)

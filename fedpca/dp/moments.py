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

**Public scales.** A contract may state a column's scale (its reference standard deviation,
public knowledge: :mod:`fedpca.data.contract`'s ``scale``); :attr:`ColumnBounds.scales`
holds it, in the column's ``[0, w_j]`` units. Such a column needs no released variance, so a
standardised release carries ``S`` over every column and ``Q`` over the *squared* columns
only (:meth:`ColumnBounds.squared`: those without a public scale; a one-hot group's levels
are all public or all not). Replacing a record moves only what is released:

* ``Delta(Q) = sqrt(sum_{j squared, not in a group} w_j^4 + 2 G_squared)``, ``G_squared``
  the groups whose squares are released; 0 when every scale is public, and then the
  standardised release *is* the centring one, ``S`` alone, of sensitivity ``Delta(S)``.

Each bound is attained (:func:`extreme_pair`), so none is loose. The release itself is any
Gaussian release of the site (float, exact grid points or a secure sum) calibrated to that
sensitivity and charged to its ledger like every other release; everything in this module
after the release is post-processing of released values and public bounds, and costs no
privacy.

Post-processing (:func:`column_moments`): ``mu`` is clamped into ``[0, w_j]`` (where the true
mean lies), the variance into ``[floor, w_j^2 / 4]`` (``w_j^2 / 4`` is the largest variance a
variable in ``[0, w_j]`` can have; the floor, a public value, keeps a noisy variance near 0
from blowing a column up), so no noisy value is ever divided by near zero. A public scale is
used as it is: never floored, never noisy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedpca.errors import ConfigurationError

#: The default floor of a released variance, relative to the column's largest ``w_j^2 / 4``.
VARIANCE_FLOOR = 1e-3
#: The smallest public scale, relative to its column's width (below it every value within
#: the range would sit a million standard deviations or more from the mean).
MIN_SCALE = 1e-6


@dataclass(frozen=True)
class ColumnBounds:
    """Public bounds of a site's preprocessed columns: each column lies in ``[0, w_j]``
    (``widths``), and each of ``groups`` is a one-hot group (0/1 columns, exactly one 1 per
    record). Columns outside every group are *free*. ``scales``: each column's public scale
    (a reference standard deviation in ``[0, w_j]`` units, ``0 < s_j <= w_j / 2``) or
    ``None`` (released privately); empty: none public. A one-hot group's columns are all
    public or all not."""

    widths: tuple[float, ...]
    groups: tuple[tuple[int, ...], ...] = ()
    scales: tuple[float | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.widths:
            raise ConfigurationError("column bounds need at least one column")
        if not all(math.isfinite(w) and w > 0 for w in self.widths):
            raise ConfigurationError(
                f"column widths must be finite and > 0, got {list(self.widths)}: a column "
                "whose public range is one point carries nothing; drop it from the contract"
            )
        self._check_scales()
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
            if len({self.public_scale(j) for j in group}) > 1:
                raise ConfigurationError(f"one-hot group {list(group)}: give every level a "
                                         "public scale, or none")
            seen |= set(group)

    def _check_scales(self) -> None:
        if self.scales and len(self.scales) != self.dim:
            raise ConfigurationError(
                f"{len(self.scales)} public scales for {self.dim} columns: give one per "
                "column (None where the scale is released privately)")
        for j in self.public:
            s, w = self.scales[j], self.widths[j]
            if not (math.isfinite(s) and MIN_SCALE * w <= s <= w / 2):
                raise ConfigurationError(
                    f"column {j}'s public scale {s!r} must lie in [{MIN_SCALE:g} w, w / 2] "
                    f"for its width w = {w:g}: no variable in [0, w] spreads more than w / 2, "
                    "and a scale near 0 blows the column up")

    @property
    def dim(self) -> int:
        """Number of columns."""
        return len(self.widths)

    def public_scale(self, column: int) -> bool:
        """Whether ``column`` has a public scale."""
        return bool(self.scales) and self.scales[column] is not None

    @property
    def public(self) -> tuple[int, ...]:
        """The columns with a public scale (their variance is never released)."""
        return tuple(j for j in range(self.dim) if self.public_scale(j))

    def squared(self) -> tuple[int, ...]:
        """The columns whose sums of squares a standardised release carries: those without
        a public scale, in order."""
        return tuple(j for j in range(self.dim) if not self.public_scale(j))

    @property
    def all_public(self) -> bool:
        """Every column has a public scale: a standardised release carries no squares."""
        return not self.squared()

    def statistic_dim(self, standardize: bool) -> int:
        """The length of the released statistic (:func:`moment_statistic`): ``d`` sums, and
        with ``standardize`` one sum of squares per :meth:`squared` column."""
        return self.dim + (len(self.squared()) if standardize else 0)

    def free(self, columns: tuple[int, ...] | None = None) -> np.ndarray:
        """The widths of the columns outside every one-hot group (of ``columns`` only, if
        given)."""
        grouped = {j for group in self.groups for j in group}
        chosen = range(self.dim) if columns is None else columns
        return np.array([self.widths[j] for j in chosen if j not in grouped])

    def _squared_groups(self) -> int:
        """The one-hot groups whose squares a standardised release carries."""
        return sum(1 for group in self.groups if not self.public_scale(group[0]))

    def sum_sensitivity(self) -> float:
        """Replace-one L2 sensitivity of the column sums ``S``."""
        return math.sqrt(float(np.sum(self.free() ** 2)) + 2 * len(self.groups))

    def square_sum_sensitivity(self) -> float:
        """Replace-one L2 sensitivity of the released sums of squares ``Q`` (of the
        :meth:`squared` columns; 0 when every scale is public)."""
        free = self.free(self.squared())
        return math.sqrt(float(np.sum(free**4)) + 2 * self._squared_groups())

    def moments_sensitivity(self, standardize: bool) -> float:
        """Replace-one L2 sensitivity of the released vector: ``S``, or ``(S, Q)`` when
        ``standardize`` (``S`` alone when every scale is public)."""
        if not standardize:
            return self.sum_sensitivity()
        return math.hypot(self.sum_sensitivity(), self.square_sum_sensitivity())

    def unit(self) -> ColumnBounds:
        """The bounds of the rows divided by their widths: every column in ``[0, 1]``, the
        same one-hot groups, the public scales divided by the widths. Releasing the moments
        of those rows puts each column's noise in proportion to its width (with the raw rows
        the widest column's range would set the noise of every column);
        :meth:`ColumnMoments.rescaled` takes them back."""
        scales = tuple(None if s is None else s / w for s, w in zip(self.scales, self.widths))
        return ColumnBounds(widths=(1.0,) * self.dim, groups=self.groups, scales=scales)

    def row_norm(self) -> float:
        """The largest L2 norm of a row within these bounds: ``sqrt(sum_free w_j^2 + G)``
        (one 1 per one-hot group)."""
        return math.sqrt(float(np.sum(self.free() ** 2)) + len(self.groups))

    def record_norm(self, standardize: bool) -> float:
        """The largest L2 norm of one record's contribution to the released vector
        (:func:`moment_statistic` of one row): its row, and with ``standardize`` the squares
        of its :meth:`squared` columns too (a secure sum's norm per record)."""
        if not standardize:
            return self.row_norm()
        free = self.free(self.squared())
        return math.sqrt(self.row_norm() ** 2 + float(np.sum(free**4))
                         + self._squared_groups())

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


def moment_statistic(rows: np.ndarray, standardize: bool,
                     squared: Sequence[int] | None = None) -> np.ndarray:
    """What a site releases for centring: ``S`` (``d``), or ``S`` then ``Q`` of the
    ``squared`` columns (default: all, ``2d``; :meth:`ColumnBounds.squared`), summed over the
    records axis (``-2``: a stack of record sets gives one statistic each)."""
    sums = rows.sum(axis=-2)
    if not standardize:
        return sums
    every = squared is None or list(squared) == list(range(rows.shape[-1]))
    chosen = rows if every else rows[..., list(squared)]
    return np.concatenate([sums, (chosen**2).sum(axis=-2)], axis=-1)


def extreme_pair(bounds: ColumnBounds) -> tuple[np.ndarray, np.ndarray]:
    """Two records within ``bounds`` whose replacement moves ``S`` and the released ``Q``
    (its :meth:`~ColumnBounds.squared` columns) by exactly their sensitivities: every free
    column at ``0`` against ``w_j``, each group's first level against its second."""
    x, y = np.zeros(bounds.dim), np.asarray(bounds.widths, dtype=float).copy()
    for group in bounds.groups:
        x[list(group)], y[list(group)] = 0.0, 0.0
        x[group[0]], y[group[1]] = 1.0, 1.0
    return x, y


@dataclass(frozen=True)
class ColumnMoments:
    """Released column means ``mean`` and scales ``scale`` (all ones unless
    ``standardized``), with the columns whose noisy value was clamped (said to the user,
    never hidden) and those whose scale is the contract's public one (``public_scales``)."""

    mean: np.ndarray
    scale: np.ndarray
    clamped_means: tuple[int, ...]
    floored_variances: tuple[int, ...]
    standardized: bool = False
    public_scales: tuple[int, ...] = ()

    def transform(self, rows: np.ndarray) -> np.ndarray:
        """``(rows - mean) / scale``: the centred (standardised) rows."""
        return (rows - self.mean) / self.scale

    def rescaled(self, bounds: ColumnBounds) -> ColumnMoments:
        """These moments, of rows released in ``bounds.unit()`` units, in ``bounds``' own:
        means and released scales times the widths, public scales ``bounds``' values as
        stated."""
        widths = np.asarray(bounds.widths, dtype=np.float64)
        scale = self.scale * widths if self.standardized else self.scale
        if self.standardized and self.public_scales:
            scale[list(self.public_scales)] = [bounds.scales[j] for j in self.public_scales]
        return ColumnMoments(self.mean * widths, scale, self.clamped_means,
                             self.floored_variances, self.standardized, self.public_scales)

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
    (with ``standardize``) scales: the released ones of the :meth:`~ColumnBounds.squared`
    columns, the public ones of the others. ``floor``: the smallest released variance kept
    (public; default :data:`VARIANCE_FLOOR` times the largest ``w_j^2 / 4``)."""
    d, length = bounds.dim, bounds.statistic_dim(standardize)
    noisy = np.asarray(noisy, dtype=float)
    if noisy.shape != (length,) or not np.all(np.isfinite(noisy)):
        raise ConfigurationError(
            f"the released moments must be {length} finite values for {d} columns, got shape "
            f"{noisy.shape}"
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
    squared = list(bounds.squared())
    scale = np.array([np.nan if s is None else s for s in bounds.scales] or [np.nan] * d)
    raw_var = noisy[d:] / records - mean[squared] ** 2
    var = np.clip(raw_var, floor, np.maximum(widths[squared] ** 2 / 4, floor))
    scale[squared] = np.sqrt(var)
    floored = tuple(squared[j] for j in np.flatnonzero(raw_var < floor))
    return ColumnMoments(mean, scale, clamped, floored, standardized=True,
                         public_scales=bounds.public)

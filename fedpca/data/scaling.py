"""Feature scaling and row-norm bounding that keep the privacy guarantee.

Every mechanism assumes ``||x||_2 <= C`` for a public ``C``. Scaling a record with
constants fixed *before* the data are seen is a per-record function, so it costs no privacy;
constants computed *from* the data (its min, max, mean, std or largest row norm) make every
record's output depend on every other record and break the DP guarantee. Hence:

* :class:`FeatureRanges` holds public per-feature ranges ``[low_j, high_j]`` (a pixel's
  ``[0, 255]``, a published instrument range) and maps each feature onto ``[0, 1]`` (or
  ``[-1, 1]`` when centred); a value outside its range is clipped to it and counted in the log.
* :func:`bound_rows` then divides every row by a public constant: ``sqrt(d)`` by default, which
  bounds the norm of a row of ``d`` features in ``[-1, 1]`` by 1.
* :meth:`FeatureRanges.from_own_statistics` is the only data-dependent route: an explicit
  opt-in that standardises with the data's own mean and standard deviation. It breaks the DP
  guarantee unless those statistics are public, and says so in the log and in the result.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from fedpca.errors import ConfigurationError
from fedpca.dp.validation import require_finite_positive

logger = logging.getLogger(__name__)

#: Standardised values are clipped to ``[-DEFAULT_CLIP_Z, DEFAULT_CLIP_Z]`` standard deviations.
DEFAULT_CLIP_Z = 3.0

#: Logged whenever the data-dependent opt-in is used.
WARNING_OWN_STATISTICS = (
    "scaling with the data's own mean and standard deviation: the differential-privacy "
    "guarantee does NOT hold unless these statistics are public (published, or computed "
    "from other, public data); use public feature ranges for a private run"
)


@dataclass(frozen=True, eq=False)
class FeatureRanges:
    """Per-feature ranges ``[low_j, high_j]`` that every record's features are mapped from.

    Build it with :meth:`of` (public ranges) or :meth:`from_own_statistics` (data-dependent
    opt-in). Attributes:
        low: ``(d,)`` float64 lower ends.
        high: ``(d,)`` float64 upper ends, each ``> low``.
        source: where the ranges come from (reported with every data set scaled by them).
        public: False only for ranges computed from the data being scaled.
    """

    low: np.ndarray
    high: np.ndarray
    source: str
    public: bool = True

    @classmethod
    def of(cls, low: object, high: object, dim: int, source: str) -> FeatureRanges:
        """Public ranges from scalars or length-``dim`` sequences (a scalar is broadcast)."""
        lo, hi = (_per_feature(value, dim, name) for value, name in ((low, "low"), (high, "high")))
        if not (hi > lo).all():
            bad = np.flatnonzero(~(hi > lo))
            raise ConfigurationError(
                f"feature ranges need high > low for every feature; features {bad[:5].tolist()}"
                f" have low={lo[bad[:5]].tolist()}, high={hi[bad[:5]].tolist()}"
            )
        return cls(lo, hi, source)

    @classmethod
    def from_own_statistics(cls, X: np.ndarray, clip_z: float = DEFAULT_CLIP_Z) -> FeatureRanges:
        """DATA-DEPENDENT opt-in: ranges ``mean_j +- clip_z * std_j`` of ``X`` itself.

        Scaling with them (centred) standardises each feature, clips it at ``clip_z``
        standard deviations and maps it onto ``[-1, 1]``. This BREAKS the differential-privacy
        guarantee unless the mean and standard deviation are public: every record's scaled
        value then depends on all other records. Use it only for non-private baselines or when
        the statistics are published. A constant feature gets standard deviation 1.
        """
        clip_z = require_finite_positive(clip_z, "clip_z")
        logger.warning(WARNING_OWN_STATISTICS)
        mean = X.mean(axis=0)
        std = X.std(axis=0)
        std[std == 0] = 1.0
        return cls(
            mean - clip_z * std,
            mean + clip_z * std,
            f"the data's own mean +- {clip_z:g} std (data-dependent: not differentially private)",
            public=False,
        )

    @property
    def dim(self) -> int:
        """Number of features ``d``."""
        return int(self.low.size)

    def scale(self, X: np.ndarray, centred: bool = False) -> np.ndarray:
        """Map feature ``j`` from ``[low_j, high_j]`` onto ``[0, 1]`` (``[-1, 1]`` if centred).

        Values outside a feature's range are clipped to it (a per-record operation, so still
        private); how many were clipped is logged, never silent.
        """
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ConfigurationError(
                f"data have shape {X.shape} but the feature ranges are for {self.dim} features"
            )
        outside = int(((X < self.low) | (X > self.high)).sum())
        if outside:
            logger.info(
                "%d of %d values fell outside their feature range (%s) and were clipped to it",
                outside, X.size, self.source,
            )
        unit = np.clip(X, self.low, self.high).astype(np.float64, copy=False)
        unit -= self.low
        unit /= self.high - self.low
        if centred:
            unit *= 2.0
            unit -= 1.0
        return unit

    def unit_rows(self, X: np.ndarray, centred: bool = False) -> np.ndarray:
        """:meth:`scale`, then :func:`bound_rows` by ``sqrt(d)`` in place (:meth:`scale`'s
        array is a new one; a second copy would double the memory a data set's load takes):
        every row has norm ``<= 1``."""
        unit = self.scale(X, centred)
        return bound_rows(unit, out=unit)

    def describe(self, centred: bool = False) -> str:
        """One line saying how :meth:`unit_rows` scales: reported with the data set."""
        target = "[-1, 1]" if centred else "[0, 1]"
        privacy = "public" if self.public else "DATA-DEPENDENT, breaks DP unless public"
        return (
            f"features mapped from {self.source} onto {target}, rows divided by "
            f"sqrt({self.dim}) ({privacy})"
        )


def bound_rows(X: np.ndarray, bound: float | None = None, *,
               out: np.ndarray | None = None) -> np.ndarray:
    """Divide every row by the public constant ``bound`` (default ``sqrt(d)``), into ``out``
    when given (``X`` itself: no copy).

    With features in ``[-1, 1]``, ``sqrt(d)`` bounds every row norm by 1. ``bound`` must not be
    computed from the data (e.g. its largest row norm): that breaks DP.
    """
    bound = math.sqrt(X.shape[1]) if bound is None else require_finite_positive(bound, "bound")
    return np.divide(X, bound, out=out)


def _per_feature(value: object, dim: int, name: str) -> np.ndarray:
    """``value`` as a finite float64 ``(dim,)`` array (scalars broadcast), else a clear error."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"feature range {name} is not numeric: {value!r}") from exc
    if arr.ndim == 0:
        arr = np.full(dim, float(arr))
    if arr.shape != (dim,):
        raise ConfigurationError(
            f"feature range {name} has shape {arr.shape}; give a scalar or one value per "
            f"feature ({dim})"
        )
    if not np.isfinite(arr).all():
        raise ConfigurationError(f"feature range {name} must be finite, got {arr.tolist()[:5]}...")
    return arr

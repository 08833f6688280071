"""Row clipping to a public norm bound ``C``: the step every sensitivity bound relies on."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from fedpca.dp.validation import require_finite_positive

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClipReport:
    """How many rows clipping changed (counts are reported, clipping is never silent)."""

    rows: int
    clipped_rows: int
    clip_norm: float
    max_norm_before: float

    @property
    def clipped_fraction(self) -> float:
        """Fraction of rows whose norm exceeded ``clip_norm``."""
        return self.clipped_rows / self.rows if self.rows else 0.0


def clip_scales(norms: np.ndarray, clip_norm: float) -> np.ndarray:
    """Each row's clipping factor ``min(1, C / ||x||)`` from its norm (1 for a row within
    ``C``, a zero row included)."""
    scale = np.ones_like(norms, dtype=np.float64)
    over = norms > clip_norm
    scale[over] = clip_norm / norms[over]
    return scale


def clip_rows(X: np.ndarray, clip_norm: float = 1.0) -> tuple[np.ndarray, ClipReport]:
    """Scale each row to norm ``<= clip_norm`` (``x <- x * min(1, C / ||x||)``).

    ``clip_norm`` must be a public constant: choosing it from the data breaks DP. Returns the
    clipped rows (the input itself when no row exceeds ``clip_norm``: it is never modified)
    and a :class:`ClipReport`.
    """
    clip_norm = require_finite_positive(clip_norm, "clip_norm")
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    over = norms > clip_norm
    scale = clip_scales(norms, clip_norm)
    report = ClipReport(
        rows=int(X.shape[0]),
        clipped_rows=int(over.sum()),
        clip_norm=float(clip_norm),
        max_norm_before=float(norms.max()) if norms.size else 0.0,
    )
    if not report.clipped_rows:
        return X, report
    return X * scale[:, None], report

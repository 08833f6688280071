"""A site's records once validated and clipped: the only form any mechanism reads."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from fedpca.dp.clipping import ClipReport, clip_rows
from fedpca.dp.validation import validate_site_data

logger = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class SiteData:
    """Validated ``n x d`` float64 records with every row norm ``<= clip.clip_norm``.

    Build it with :meth:`prepare`; a simulation caches it so a virtual site validates and
    clips its data once, not once per round.
    """

    X: np.ndarray
    clip: ClipReport
    site: str

    @classmethod
    def prepare(cls, data: object, clip_norm: float, site: str = "site") -> SiteData:
        """Validate ``data`` (clear errors naming ``site``) and clip rows to ``clip_norm``."""
        X, report = clip_rows(validate_site_data(data, site=site), clip_norm)
        if report.clipped_rows:
            logger.info(
                "%s: clipped %d of %d rows to norm %g (max norm %.3g)", site,
                report.clipped_rows, report.rows, clip_norm, report.max_norm_before,
            )
        return cls(X, report, site)

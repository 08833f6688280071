"""The discrete Gaussian ``N_Z(0, sigma^2)`` (integer-valued noise): its law and its limits.

``P(Y = y)`` proportional to ``exp(-y^2 / (2 sigma^2))`` for every integer ``y`` (Canonne,
Kamath and Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020). Its exact
samplers, for an integer ``sigma`` or an integer ``sigma^2``, are in
:mod:`fedpca.dp.discrete_gaussian_fast`; this module holds its probability mass function
and variance (for tests and calibration) and the largest ``sigma^2`` the calibration uses.
"""

from __future__ import annotations

import math

import numpy as np

#: Largest ``sigma^2`` (grid steps^2) of one draw: the calibration searches up to it, and the
#: integer-variance sampler's acceptance denominator ``2 sigma^2 t^2`` stays below ``2^54``.
MAX_SIGMA_SQ = 2**26


def discrete_gaussian_pmf(sigma_sq: float, support: np.ndarray) -> np.ndarray:
    """``P(Y = y)`` of ``N_Z(0, sigma_sq)`` on ``support`` (normalised over a wide range)."""
    radius = int(math.ceil(40 * math.sqrt(sigma_sq))) + 1
    full = np.arange(-radius, radius + 1)
    mass = np.exp(-(full.astype(np.float64) ** 2) / (2 * sigma_sq))
    return np.exp(-(np.asarray(support, np.float64) ** 2) / (2 * sigma_sq)) / mass.sum()


def discrete_gaussian_variance(sigma_sq: float) -> float:
    """The variance of ``N_Z(0, sigma_sq)`` (below ``sigma_sq``; equal to it in the limit)."""
    radius = int(math.ceil(40 * math.sqrt(sigma_sq))) + 1
    full = np.arange(-radius, radius + 1)
    return float((discrete_gaussian_pmf(sigma_sq, full) * full.astype(np.float64) ** 2).sum())

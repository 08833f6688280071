"""Exact noise for a site's own releases: the answer on a grid plus discrete Gaussian noise.

Why: a release ``statistic + sigma * standard_normal()`` in floating point leaks through its
low bits (Mironov, "On Significance of the Least Significant Bits for Differential
Privacy", CCS 2012; Jin et al., "Are We There Yet? Timing and Floating-Point Attacks on
Differential Privacy Systems", S&P 2022). Here every released value is a grid point
``gamma * integer`` whose law is exactly what the accounting assumes.

**Mechanism** (one release of a statistic ``v`` with ``D`` coordinates, replace-one L2
sensitivity ``Delta``): the site computes ``v`` in float64, rounds ``v / gamma`` to the
nearest integers ``R`` (``gamma`` a power of two, so ``v / gamma`` and the rounding are exact),
adds ``D`` i.i.d. exact ``N_Z(0, s^2)`` draws ``Z`` (an integer ``s``,
:mod:`fedpca.dp.discrete_gaussian_fast`) and releases ``gamma (R + Z)`` (exact in
float64: ``|R + Z| < 2^53``). A symmetric matrix is the same mechanism on its upper triangle
(diagonal included), mirrored.

**Sensitivity of the rounded answer (unit: one record, replace-one).** Let ``E`` bound the
floating-point error of the computed ``v`` in L2 (:func:`float_error`). Two neighbouring
datasets give computed ``a = v/gamma``, ``b = v'/gamma`` with ``||a - b|| <= (Delta + 2E) /
gamma``. Nearest rounding moves each coordinate by at most ``1/2``, so per coordinate
``|R(a)_i - R(b)_i| <= |a_i - b_i| + 1``, and by Minkowski's inequality

    ``||R(a) - R(b)||_2 <= (Delta + 2E) / gamma + sqrt(D)``     (grid units),

i.e. in real units the sensitivity grows by at most ``2E + gamma sqrt(D)``. The bound is
attained when ``Delta / (gamma sqrt(D))`` is an integer ``m`` (every coordinate of ``a`` just
below a half-integer, of ``b`` just above the half-integer ``m`` further), so no better bound
of this form holds for arbitrary statistics.
:func:`grid_step` picks ``gamma``, from public quantities only, as the largest power of two
with ``gamma sqrt(D) <= 2^-10 Delta`` (:data:`GRID_INFLATION`): the rounding adds at most
0.1% to the sensitivity.

**Privacy.** ``R + Z`` is the discrete Gaussian mechanism on an integer vector of L2
sensitivity ``Delta_Z`` (the bound above): by Canonne, Kamath and Steinke, "The Discrete
Gaussian for Differential Privacy" (NeurIPS 2020), it is ``Delta_Z^2 / (2 s^2)``-zCDP (Renyi
divergence ``alpha Delta_Z^2 / (2 s^2)``, no worse than the continuous Gaussian of the same
``s``). The ledger charges it as a :class:`~fedpca.dp.events.Release` with
``summands = 1`` (one discrete Gaussian per coordinate; no secure sum): the accountant then
takes the smaller of that Renyi bound and the Gaussian privacy loss distribution of
multiplier ``sqrt(s^2 - t^2) / Delta_Z`` plus a pointwise slack below ``1e-25``
(:mod:`fedpca.dp.distributed_gaussian`, bound B). :meth:`ExactGaussian.for_release`
chooses ``s = ceil(sqrt((z Delta_Z)^2 + t^2))`` for the site's multiplier ``z``: the exact
release is charged no more than the continuous one it replaces (up to that slack), so the
site's calibration and budget are unchanged.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from fedpca.errors import ConfigurationError
from fedpca.dp.discrete_gaussian_fast import discrete_gaussian_scale
from fedpca.dp.ddg_accounting import SMOOTHING_VARIANCE
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import block_rows, mirror_upper_triangle

logger = logging.getLogger(__name__)

#: The noise samplers: numpy float Gaussians (simulation only) or exact grid noise.
FLOAT, EXACT = "float", "exact"
NOISE_SAMPLERS = (FLOAT, EXACT)
#: Largest share of the sensitivity the rounding may add: ``gamma sqrt(D) <= 2^-10 Delta``.
GRID_INFLATION = 2.0**-10
#: Largest noise standard deviation in grid steps (``s^2`` exact in float64, ``< 2^53``).
MAX_GRID_SIGMA = 2**26
#: Largest ``|v| / gamma``: ``R + Z`` stays below ``2^53`` (exact as a float64 times gamma).
MAX_GRID_VALUE = 2.0**52
#: float64's unit roundoff.
UNIT_ROUNDOFF = 2.0**-53


def float_error(norm_bound: float, terms: int) -> float:
    """A bound on the L2 floating-point error of a statistic computed as sums of at most
    ``terms`` products, whose absolute-value counterpart (``|X|^T |X| |Q|`` for
    ``X^T X Q``) has L2 norm at most ``norm_bound``: ``gamma_terms * norm_bound`` with
    ``gamma_m = m u / (1 - m u)`` (Higham, "Accuracy and Stability of Numerical Algorithms",
    Sec. 3.5: any summation order, blocked BLAS included)."""
    mu = terms * UNIT_ROUNDOFF
    if mu >= 0.5:
        raise ConfigurationError(f"{terms} terms are too many for float64 sums")
    return mu / (1 - mu) * norm_bound


def grid_step(sensitivity: float, coordinates: int) -> float:
    """The largest power of two ``gamma`` with ``gamma sqrt(coordinates) <= GRID_INFLATION
    * sensitivity`` (public: the sensitivity and the release's shape)."""
    return 2.0 ** math.floor(math.log2(GRID_INFLATION * sensitivity / math.sqrt(coordinates)))


def rounded_sensitivity(sensitivity: float, error: float, gamma: float,
                        coordinates: int) -> float:
    """Replace-one L2 sensitivity, in grid steps, of the computed statistic rounded to the
    nearest multiples of ``gamma``: ``(Delta + 2E) / gamma + sqrt(D)`` (module docstring)."""
    return float((sensitivity + 2 * error) / gamma + math.sqrt(coordinates))


@dataclass(frozen=True)
class ExactGaussian:
    """The grid and the exact noise of one release.

    Attributes:
        gamma: grid step (a power of two, real units per integer).
        sigma: noise standard deviation in grid steps (an integer ``s``).
        sensitivity: replace-one L2 sensitivity ``Delta`` of the statistic (real units).
        grid_sensitivity: ``Delta_Z = (Delta + 2E) / gamma + sqrt(D)`` (grid units).
        coordinates: ``D``, the independent noisy coordinates.
    """

    gamma: float
    sigma: int
    sensitivity: float
    grid_sensitivity: float
    coordinates: int

    @classmethod
    def for_release(cls, sigma: float, sensitivity: float, coordinates: int,
                    error: float) -> ExactGaussian:
        """The exact noise replacing a continuous ``N(0, sigma^2)`` release of
        ``sensitivity`` over ``coordinates`` values computed within ``error``
        (:func:`float_error`): at least as private as that release (up to the slack in the
        module docstring). The grid is coarsened (logged) if the noise would exceed
        :data:`MAX_GRID_SIGMA` steps."""
        multiplier = sigma / sensitivity
        if multiplier * math.sqrt(coordinates) * (1 + GRID_INFLATION) >= MAX_GRID_SIGMA:
            raise ConfigurationError(
                f"exact noise of multiplier {multiplier:.3g} over {coordinates} values needs "
                f"more than {MAX_GRID_SIGMA} grid steps at any grid; release fewer values "
                "at once or spend more budget per release"
            )
        gamma = grid_step(sensitivity, coordinates)
        while True:
            grid_sensitivity = rounded_sensitivity(sensitivity, error, gamma, coordinates)
            steps = math.ceil(math.sqrt((multiplier * grid_sensitivity) ** 2
                                        + SMOOTHING_VARIANCE))
            if steps <= MAX_GRID_SIGMA:
                break
            gamma *= 2  # terminates: steps tend to multiplier sqrt(D) < MAX_GRID_SIGMA
        noise = cls(gamma, steps, sensitivity, grid_sensitivity, coordinates)
        if noise.inflation > 2 * GRID_INFLATION:
            logger.warning("exact noise: the grid was coarsened to keep the noise within "
                           "%d steps: the rounding adds %.2g%% to the sensitivity",
                           MAX_GRID_SIGMA, 100 * noise.inflation)
        return noise

    @property
    def inflation(self) -> float:
        """How much rounding and floating point add to the sensitivity (relative)."""
        return self.grid_sensitivity * self.gamma / self.sensitivity - 1

    def release(self, mechanism: str, shape: tuple[int, ...]) -> Release:
        """What the ledger charges: one discrete Gaussian per coordinate (``summands = 1``)
        of ``sigma`` grid steps of ``gamma``, sensitivity ``grid_sensitivity``."""
        return Release(mechanism + "+exact", self.grid_sensitivity, float(self.sigma), shape,
                       summands=1, padded=self.coordinates, grid_step=self.gamma)

    def noisy(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``gamma (round(values / gamma) + Z)``, ``Z`` i.i.d. ``N_Z(0, sigma^2)``: grid
        points, exactly."""
        scaled = np.asarray(values, dtype=np.float64) / self.gamma  # exact: a power of two
        if scaled.size != self.coordinates:
            raise ConfigurationError(
                f"the grid was built for {self.coordinates} values, got {scaled.size}"
            )
        if not np.abs(scaled).max(initial=0.0) < MAX_GRID_VALUE:  # NaN fails too
            raise ConfigurationError(
                f"a value is not finite or exceeds 2^52 grid steps of {self.gamma:g}; the "
                "statistic must be bounded by clipping"
            )
        grid = np.rint(scaled).astype(np.int64)
        grid += discrete_gaussian_scale(self.sigma, grid.shape, rng)
        return grid * self.gamma

    def noisy_symmetric(self, matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """:meth:`noisy` of a symmetric matrix's upper triangle (diagonal included, row by
        row), mirrored: a symmetric matrix of grid points."""
        dim = matrix.shape[0]
        starts = np.concatenate([[0], np.cumsum(np.arange(dim, 0, -1))])
        upper = np.concatenate([matrix[i, i:] for i in range(dim)])
        noisy = self.noisy(upper, rng)
        out = np.empty((dim, dim))
        for i in range(dim):
            out[i, i:] = noisy[starts[i]:starts[i + 1]]
        mirror_upper_triangle(out, block_rows(dim))
        return out

    def record(self) -> dict[str, float | int | str]:
        """What a result's privacy record says about the sampler."""
        return {"noise_sampler": EXACT, "grid_step": self.gamma,
                "grid_sigma": self.sigma, "grid_sensitivity": self.grid_sensitivity,
                "sensitivity_inflation": self.inflation}


def symmetric_coordinates(dim: int) -> int:
    """Independent noisy entries of a ``dim x dim`` symmetric release: ``d (d + 1) / 2``."""
    return dim * (dim + 1) // 2

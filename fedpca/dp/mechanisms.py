"""Gaussian mechanisms: replace-one sensitivities, release records and per-site noise.

Neighbouring relation: replace one record ``x`` by ``y`` with ``||x||, ||y|| <= C``.

* ``X^T X Q`` for orthonormal ``Q`` (``d x k``): L2 sensitivity ``sqrt(2) C^2``.
* ``diag(X^T X)``: L2 sensitivity ``sqrt(2) C^2``.
* the upper triangle (with diagonal) of ``X^T X``: L2 sensitivity ``sqrt(2) C^2``
  (symmetric noise: the upper triangle is drawn, the lower one mirrored).

A release is described by an immutable :class:`~fedpca.dp.events.Release` (mechanism,
sensitivity, sigma, shape); the mechanisms produce them, the ledgers store them and the
accountant (:mod:`fedpca.dp.accountant`) composes them.
"""

from __future__ import annotations

import functools
import logging
import math
import zlib
from collections.abc import Callable

import numpy as np

from fedpca.dp.events import Release

logger = logging.getLogger(__name__)

SQRT2 = math.sqrt(2.0)

SEEDED_NOISE_WARNING = (
    "noise is drawn from a seeded generator: the run is reproducible and NOT private "
    "against anyone who knows the seed; never use a seed in production"
)
#: The seed a configuration gives for none (a Flower ``run_config`` cannot hold ``None``):
#: a :class:`NoiseSource` of fresh OS randomness, the only kind a real site draws from.
NO_SEED = -1


def power_step_sensitivity(clip_norm: float) -> float:
    """Replace-one L2 sensitivity of ``X^T X Q`` for orthonormal ``Q``: ``sqrt(2) C^2``."""
    return SQRT2 * clip_norm**2


def diagonal_sensitivity(clip_norm: float) -> float:
    """Replace-one L2 sensitivity of ``diag(X^T X)``: ``sqrt(2) C^2``."""
    return SQRT2 * clip_norm**2


def upper_triangle_sensitivity(clip_norm: float) -> float:
    """Replace-one L2 sensitivity of the upper triangle (with diagonal) of ``X^T X``.

    ``sqrt(2) C^2``, attained by ``x = C e_1, y = C e_2``; for ``X^T X / n`` divide by ``n``.
    (Add/remove-one figures such as ``1/n`` under-state it by ``sqrt(2)``.)
    """
    return SQRT2 * clip_norm**2


def symmetric_gaussian(rng: np.random.Generator, dim: int, sigma: float) -> np.ndarray:
    """A ``dim x dim`` symmetric matrix: upper triangle with diagonal i.i.d. ``N(0, sigma^2)``,
    lower triangle mirrored (the noise of Analyze Gauss, MOD-SuLQ, DPdisPCA and LDP-PCA)."""
    upper = np.triu(rng.standard_normal((dim, dim)) * sigma)
    return upper + np.triu(upper, 1).T


#: Bytes of standard normal draws :func:`symmetric_gaussian_in_blocks` holds at a time.
NOISE_BLOCK_BYTES = 32 << 20


def symmetric_gaussian_in_blocks(
    rng: np.random.Generator, dim: int, sigma: float, block_bytes: int = NOISE_BLOCK_BYTES
) -> np.ndarray:
    """The matrix :func:`symmetric_gaussian` returns for the same ``rng``, bit for bit (and
    leaving ``rng`` in the same state), drawn ``block_bytes`` of rows at a time.

    The law is the same: upper triangle with diagonal i.i.d. ``N(0, sigma^2)``, lower
    triangle mirrored; the same ``dim x dim`` standard normals are drawn in the same order
    (row blocks of one C-ordered draw, straight into the result). Memory: the ``dim^2``
    result, where :func:`symmetric_gaussian` needs about four ``dim^2`` arrays.
    """
    out = np.empty((dim, dim))
    rows = block_rows(dim, block_bytes)
    for start in range(0, dim, rows):
        block = out[start : start + rows]
        rng.standard_normal(out=block)  # the draws below the diagonal are overwritten below
        block *= sigma
    mirror_upper_triangle(out, rows)
    return out


def block_rows(dim: int, block_bytes: int = NOISE_BLOCK_BYTES) -> int:
    """Rows of a ``dim x dim`` float64 matrix that fit in ``block_bytes`` (at least one)."""
    return min(max(1, block_bytes // (8 * max(dim, 1))), max(dim, 1))


@functools.lru_cache(maxsize=64)
def triangle_indices(make: Callable[[int, int], tuple[np.ndarray, np.ndarray]], dim: int,
                     offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``make(dim, offset)`` (``np.triu_indices`` or ``np.tril_indices``), made once per
    arguments: small releases mirror and cut triangles many times. Read-only: index with it."""
    rows, cols = make(dim, offset)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def mirror_upper_triangle(out: np.ndarray, rows: int) -> None:
    """Copy the upper triangle of square ``out`` below its diagonal, ``rows`` at a time."""
    dim = out.shape[0]
    for start in range(0, dim, rows):
        stop = min(start + rows, dim)
        out[start:stop, :start] = out[:start, start:stop].T
        diagonal = out[start:stop, start:stop]
        inside = triangle_indices(np.tril_indices, stop - start, -1)
        diagonal[inside] = diagonal.T[inside]


def planned_run(label: str, releases: int, noise_multiplier: float,
                sites_in_sum: int = 0) -> list[Release]:
    """The ``releases`` releases of one full run as a site calibrates it, for a ledger to
    test before the run starts: Gaussians of unit sensitivity at the calibrated
    ``noise_multiplier`` (what the accountant composes), inside secure sums of
    ``sites_in_sum`` sites when set, named ``label/planned``. A site's exact or discrete
    noise is charged as the release replacing each of them, within its grid's rounding."""
    return [Release(f"{label}/planned", 1.0, noise_multiplier, (),
                    sites_in_sum=sites_in_sum)] * releases


class NoiseSource:
    """Independent Gaussian noise for each release of one site.

    Unseeded (the default), every release draws from a fresh OS-seeded generator. Seeded,
    release ``r`` of site ``site`` draws from ``default_rng([seed, site_key, r])`` so a
    simulation and the reference produce identical noise; a seeded source logs a warning
    because its noise is predictable.
    """

    def __init__(self, seed: int | None = None, site: int | str = 0) -> None:
        self.seed = seed
        self.site_key = site if isinstance(site, int) else zlib.crc32(str(site).encode())
        if seed is not None:
            logger.debug("site %s: %s", site, SEEDED_NOISE_WARNING)

    def generator(self, release_index: int) -> np.random.Generator:
        """The generator for release number ``release_index`` (0-based)."""
        if self.seed is None:
            return np.random.default_rng()
        return np.random.default_rng([self.seed, self.site_key, release_index])

    def gaussian(self, release_index: int, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        """An array of i.i.d. ``N(0, sigma^2)`` entries for release ``release_index``."""
        return sigma * self.generator(release_index).standard_normal(shape)

    def symmetric(self, release_index: int, sigma: float, dim: int) -> np.ndarray:
        """A symmetric Gaussian matrix (see :func:`symmetric_gaussian`) for a release.

        Drawn in blocks of rows (:func:`symmetric_gaussian_in_blocks`): bit for bit the
        matrix :func:`symmetric_gaussian` gives, with ``dim^2`` floats of memory, not ~4x.
        """
        return symmetric_gaussian_in_blocks(self.generator(release_index), dim, sigma)

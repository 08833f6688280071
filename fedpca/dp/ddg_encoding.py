"""Site encoding and server decoding for the distributed discrete Gaussian (Flower-free).

Site (:func:`encode_site`): scale by ``1/gamma`` -> public randomised Hadamard rotation (pad to a
power of two) -> randomised rounding ``floor(y + U)`` -> add ``k`` i.i.d. ``N_Z(0, s^2)`` draws
per coordinate (exact sampler) -> reduce modulo ``m``. Server (:func:`modular_sum`,
:func:`decode_sum`): sum the
residues modulo ``m`` -> map to the centred range ``[-m/2, m/2)`` -> un-rotate -> times
``gamma`` -> unpad. Privacy and the choice of ``gamma``, ``s^2`` and ``m`` are in
``fedpca.dp.distributed_gaussian`` (Kairouz, Liu and Steinke, "The Distributed Discrete
Gaussian Mechanism for Federated Learning with Secure Aggregation", ICML 2021).

Randomness: the rounding uniforms and the noise come from one ``numpy.random.Generator``, by
default freshly seeded from the operating system for every call. A seeded generator makes a
run reproducible and NOT private against anyone who knows the seed (the rotation's seed, by
contrast, is public by design and never affects privacy).

The modulus ``m = 2^31`` (the default) keeps every residue a non-negative int32.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from fedpca.errors import ConfigurationError
from fedpca.dp.discrete_gaussian_fast import discrete_gaussian
from fedpca.dp.hadamard import RandomizedHadamard


def _check_modulus(modulus: int) -> int:
    if isinstance(modulus, bool) or not isinstance(modulus, (int, np.integer)) or modulus < 2 \
            or modulus % 2 or modulus > 2**62:
        raise ConfigurationError(f"modulus must be an even integer in [2, 2^62], got {modulus!r}")
    return int(modulus)


def randomized_round(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``floor(y + U)`` with ``U`` uniform on ``[0, 1)`` per coordinate (unbiased, int64)."""
    return np.floor(y + rng.random(y.shape)).astype(np.int64)


def encode_site(vector: np.ndarray, *, gamma: float, rotation: RandomizedHadamard,
                sigma_sq: int, modulus: int, draws: int = 1,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """A site's message: int64 residues in ``[0, modulus)`` of length ``rotation.padded``.

    ``vector`` is the site's statistic (float, length ``rotation.dimension``); the noise is the
    sum of ``draws`` independent ``N_Z(0, sigma_sq)`` per coordinate. ``gamma``, ``sigma_sq``,
    ``draws`` and ``modulus`` come from the site's own calibration
    (``fedpca.dp.distributed_gaussian.choose_grid``), never from the coordinator.
    """
    modulus = _check_modulus(modulus)
    v = np.asarray(vector, dtype=np.float64)
    if not np.isfinite(v).all():
        raise ConfigurationError("the statistic to encode has non-finite entries")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ConfigurationError(f"gamma must be a finite number > 0, got {gamma!r}")
    rng = rng if rng is not None else np.random.default_rng()
    rounded = randomized_round(rotation.rotate(v / gamma), rng)
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ConfigurationError(f"draws must be an integer >= 1, got {draws!r}")
    for _ in range(draws):
        rounded += discrete_gaussian(sigma_sq, rotation.padded, rng)
    return np.mod(rounded, modulus)


def modular_sum(messages: Iterable[np.ndarray], modulus: int) -> np.ndarray:
    """Sum of residue vectors modulo ``modulus`` (what secure aggregation reveals)."""
    modulus = _check_modulus(modulus)
    total: np.ndarray | None = None
    for message in messages:
        part = np.mod(np.asarray(message, dtype=np.int64), modulus)
        total = part if total is None else np.mod(total + part, modulus)
    if total is None:
        raise ConfigurationError("modular_sum needs at least one message")
    return total


def centre(residues: np.ndarray, modulus: int) -> np.ndarray:
    """The representative of each residue in ``[-modulus/2, modulus/2)``."""
    modulus = _check_modulus(modulus)
    half = modulus // 2
    return np.mod(np.asarray(residues, dtype=np.int64) + half, modulus) - half


def decode_sum(residue_sum: np.ndarray, *, gamma: float, rotation: RandomizedHadamard,
               modulus: int) -> np.ndarray:
    """The noisy sum of the sites' statistics (float64, length ``rotation.dimension``) from the
    modular sum of their messages. Correct whenever no coordinate wrapped (see
    ``fedpca.dp.distributed_gaussian.wrap_probability``)."""
    residue_sum = np.asarray(residue_sum)
    if residue_sum.shape != (rotation.padded,):
        raise ConfigurationError(
            f"expected a modular sum of length {rotation.padded}, got shape {residue_sum.shape}"
        )
    return rotation.unrotate(centre(residue_sum, modulus).astype(np.float64)) * gamma

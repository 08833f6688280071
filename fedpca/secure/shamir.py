"""Shamir secret sharing over the prime field ``p = 2**31 - 1``, vectorised with numpy.

Elements are int64 residues in ``[0, p)``. A product of two elements is below ``2**62``,
so every multiply-add (one product plus one element) fits int64; every one is reduced mod
``p`` at once, and no two products are ever summed before reducing.

A 32-byte seed is 256 bits: it travels as 9 elements of 30 bits each
(:func:`bytes_to_elements`), each below ``2**30 < p``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

from fedpca.errors import InvalidDataError

#: The field's prime, ``2**31 - 1``.
PRIME = 2**31 - 1
#: Bits of a seed carried by one field element.
CHUNK_BITS = 30
_CHUNK_MASK = (1 << CHUNK_BITS) - 1


def elements_for(length: int) -> int:
    """How many elements :func:`bytes_to_elements` makes of ``length`` bytes (32 -> 9)."""
    return math.ceil(8 * length / CHUNK_BITS)


def split(
    secret_elements: np.ndarray,
    threshold: int,
    points: np.ndarray,
    rng_bytes: Callable[[int], bytes] = os.urandom,
) -> np.ndarray:
    """Shares of every element of ``secret_elements`` at every point: shape ``(N, E)``.

    Each element gets its own random polynomial of degree ``threshold - 1`` (coefficients:
    uint64 from ``rng_bytes`` reduced mod ``p``; the bias, below ``2**-32``, is negligible),
    evaluated by Horner's rule at ``points`` (distinct, in ``1..p-1``; never 0, where the
    polynomial is the secret). Any ``threshold`` shares reconstruct the secret; fewer are
    uniformly distributed, independent of it.
    """
    secret = _elements(secret_elements, "secret_elements")
    if secret.ndim != 1:
        raise InvalidDataError("secret_elements must be one-dimensional; flatten it first")
    x = _points(points)
    if not 1 <= threshold <= len(x):
        raise InvalidDataError(
            "need 1 <= threshold <= number of points; lower the threshold or add points"
        )
    count = (threshold - 1) * secret.size
    raw = np.frombuffer(rng_bytes(8 * count), dtype="<u8") if count else np.zeros(0, np.uint64)
    coefficients = (raw % np.uint64(PRIME)).astype(np.int64).reshape(threshold - 1, secret.size)
    column = x[:, None]
    shares = np.zeros((len(x), secret.size), dtype=np.int64)
    for coefficient in coefficients[::-1]:
        shares = (shares * column + coefficient) % PRIME
    return (shares * column + secret) % PRIME


def reconstruct(points: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """The secrets (the interpolating polynomials at 0) from shares of shape ``(t, ...)``.

    Lagrange coefficients are computed with Python integers (exact, inverses by
    ``pow(x, p - 2, p)``); the sum runs over any trailing shape, so one call reconstructs
    many secrets.
    """
    x = _points(points)
    values = _elements(shares, "shares")
    if values.ndim < 1 or values.shape[0] != len(x):
        raise InvalidDataError("shares must have one row per point; pass them in the same order")
    result = np.zeros(values.shape[1:], dtype=np.int64)
    for coefficient, share in zip(_lagrange_at_zero([int(v) for v in x]), values):
        result = (result + coefficient * share) % PRIME
    return result


def bytes_to_elements(data: bytes) -> np.ndarray:
    """``data`` as field elements of 30 bits each, least significant chunk first."""
    number = int.from_bytes(data, "big")
    count = elements_for(len(data))
    return np.array([(number >> (CHUNK_BITS * k)) & _CHUNK_MASK for k in range(count)],
                    dtype=np.int64)


def elements_to_bytes(elements: np.ndarray, length: int) -> bytes:
    """The inverse of :func:`bytes_to_elements`; refuses elements no ``length`` bytes make
    (which is how a reconstruction from wrong shares usually shows)."""
    values = np.asarray(elements)
    if values.shape != (elements_for(length),) or values.min() < 0 or values.max() > _CHUNK_MASK:
        raise InvalidDataError("the elements do not encode bytes: a share was wrong or missing")
    number = 0
    for k, value in enumerate(values.tolist()):
        number |= int(value) << (CHUNK_BITS * k)
    if number >> (8 * length):
        raise InvalidDataError("the elements do not encode bytes: a share was wrong or missing")
    return number.to_bytes(length, "big")


def _lagrange_at_zero(x: list[int]) -> list[int]:
    coefficients = []
    for i, xi in enumerate(x):
        numerator, denominator = 1, 1
        for j, xj in enumerate(x):
            if j != i:
                numerator = numerator * xj % PRIME
                denominator = denominator * (xj - xi) % PRIME
        coefficients.append(numerator * pow(denominator, PRIME - 2, PRIME) % PRIME)
    return coefficients


def _points(points: np.ndarray) -> np.ndarray:
    x = np.asarray(points)
    if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.integer):
        raise InvalidDataError("points must be a non-empty one-dimensional integer array")
    x = x.astype(np.int64)
    if x.min() < 1 or x.max() >= PRIME or len(np.unique(x)) != len(x):
        raise InvalidDataError("points must be distinct integers in 1..p-1 (0 is the secret)")
    return x


def _elements(values: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values)
    if not np.issubdtype(array.dtype, np.integer):
        raise InvalidDataError(f"{name} must be an integer array of field elements")
    array = array.astype(np.int64)
    if array.size and (array.min() < 0 or array.max() >= PRIME):
        raise InvalidDataError(f"{name} must be field elements in [0, 2**31 - 1)")
    return array

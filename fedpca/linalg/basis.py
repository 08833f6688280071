"""A basis a site receives, checked and made exact before the site multiplies its records
by it.

A sender's basis ``Q`` is refused unless it is a float ``d x k`` array orthonormal to
:data:`ORTHONORMAL_TOLERANCE` (:func:`validate_basis`); the site then uses its
:func:`exact_basis`, whose spectral norm is at most 1, as the sensitivity its noise is
calibrated for assumes (:func:`exact_basis` says why). Both read ``Q^T Q`` (``O(d k^2)``),
computed once; the QR that makes a nearly orthonormal ``Q`` exact runs only for a ``Q``
farther than :data:`EXACT_TOLERANCE` from orthonormal (a basis a QR made, as every fedpca
server sends, is not).
"""

from __future__ import annotations

import math

import numpy as np

from fedpca.errors import InvalidRequestError
from fedpca.linalg.subspace import thin_qr

#: How far (largest entry of ``|Q^T Q - I|``) a basis a site receives (a request's, or a
#: released result's) may be from orthonormal for the site to take it as one (and, to
#: multiply its records by it, make it exact: :func:`exact_basis`); beyond this the sender
#: did not mean an orthonormal basis, and the site refuses it.
ORTHONORMAL_TOLERANCE = 1e-6
#: How close to orthonormal (largest entry of ``|Q^T Q - I|``) a basis must be for the site
#: to skip re-orthonormalising it (:func:`exact_basis`): a Householder QR in float64 leaves
#: about ``1e-15``.
EXACT_TOLERANCE = 1e-12


def validate_basis(Q: object, dim: int, site: str = "site") -> np.ndarray:
    """The float64 ``dim x k`` basis to use for ``Q`` (its :func:`exact_basis`), or
    InvalidRequestError for a ``Q`` that is not a float ``dim x k`` array with finite entries
    orthonormal to :data:`ORTHONORMAL_TOLERANCE`. The refusal quotes only ``Q`` (the
    sender's own array), never the site's data."""
    arr = np.asarray(Q)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.floating):
        raise InvalidRequestError(
            f"{site}: refused: basis Q has dtype {arr.dtype}, expected float"
        )
    if arr.ndim != 2 or arr.shape[0] != dim or not 1 <= arr.shape[1] <= dim:
        raise InvalidRequestError(
            f"{site}: refused: basis Q has shape {arr.shape}, expected ({dim}, k) with "
            f"1 <= k <= {dim}"
        )
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        raise InvalidRequestError(f"{site}: refused: basis Q contains NaN or inf")
    gram = arr.T @ arr
    gram_error = float(np.abs(gram - np.eye(arr.shape[1])).max())
    if gram_error > ORTHONORMAL_TOLERANCE:
        raise InvalidRequestError(
            f"{site}: refused: basis Q is not orthonormal (max |Q^T Q - I| = {gram_error:.3g}"
            f" > {ORTHONORMAL_TOLERANCE}); the privacy guarantee needs orthonormal columns"
        )
    return exact_basis(arr, gram)


def exact_basis(Q: np.ndarray, gram: np.ndarray | None = None) -> np.ndarray:
    """A basis with the span of the nearly orthonormal ``Q`` and spectral norm at most 1 up
    to floating-point rounding: ``Q`` re-orthonormalised by a Householder thin QR (``R``'s
    diagonal made positive: :func:`~fedpca.linalg.subspace.thin_qr`, so an orthonormal ``Q``
    comes back unchanged up to rounding) unless it is orthonormal to
    :data:`EXACT_TOLERANCE` already (``gram``: ``Q^T Q``, when the caller computed it), then
    divided by ``sqrt(||Q^T Q||_1)`` when that exceeds 1 (an upper bound on ``||Q||_2``:
    ``||Q||_2^2 = ||Q^T Q||_2 <= ||Q^T Q||_1``, the largest absolute column sum).

    Why (privacy): for replace-one records ``||x||, ||y|| <= C``,
    ``||(x x^T - y y^T) Q||_F <= ||x x^T - y y^T||_F ||Q||_2 <= sqrt(2) C^2 ||Q||_2``, so the
    sensitivity ``sqrt(2) C^2`` that DPS-PCA's ``X^T X Q`` is calibrated for needs
    ``||Q||_2 <= 1`` (SuLQ k-plane's message is bounded for any assignment, but its
    distances ``||x - U U^T x||`` mean what they say only for orthonormal ``U``). A basis
    only orthonormal to the tolerance is not enough: ``|Q^T Q - I| <= 1e-6`` entry by entry
    allows ``||Q||_2 = 1.0005`` at ``d = k = 1000``. Householder QR makes the columns
    orthonormal to working precision whatever the input's conditioning, and the division
    removes whatever rounding leaves above 1 by a bound rather than an estimate of the
    norm. The division alone bounds ``||Q||_2`` whatever ``Q`` is, so skipping the QR for a
    ``Q`` already orthonormal to :data:`EXACT_TOLERANCE` keeps the bound (and changes the
    basis by at most about that much). Cost ``O(d k^2)``, the order of checking ``Q^T Q``.
    """
    if gram is None:
        gram = Q.T @ Q
    if float(np.abs(gram - np.eye(Q.shape[1])).max()) > EXACT_TOLERANCE:
        Q = thin_qr(Q)
        gram = Q.T @ Q
    bound = math.sqrt(float(np.abs(gram).sum(axis=0).max()))
    return Q / bound if bound > 1.0 else Q

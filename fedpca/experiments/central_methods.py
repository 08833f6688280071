"""The central (trusted-curator) private PCA methods that papers 000 and 001 compare, run side
by side on the same pooled records, and the levels of a data-independent (random) subspace.

Methods (all on rows of norm ``<= C``, one record replace-one; :mod:`fedpca.algorithms`):

* ``mod_sulq``: MOD-SuLQ with the paper's own ``beta`` (paper 001 Alg. 1), (eps, delta)-DP;
* ``analyze_gauss``: the same input perturbation calibrated by fedpca (corrected ``sqrt(2)``
  sensitivity, PLD/analytic Gaussian): what MOD-SuLQ becomes with the default calibration;
* ``ppca``: the exponential mechanism (paper 001 Alg. 2) with ``alpha = eps``, pure eps-DP
  in the limit of exact sampling (Gibbs sampler for ``k > 1``).

The records are validated and clipped once (:func:`fedpca.algorithms.central.prepare_central`)
and shared by the three methods; each still forms its own ``X^T X``.
"""

from __future__ import annotations

import math

import numpy as np

from fedpca.algorithms.central import prepare_central, run_analyze_gauss, run_mod_sulq
from fedpca.algorithms.ppca import run_ppca
from fedpca.dp.site_data import SiteData

#: Public row-norm bound every experiment uses (rows are scaled to it beforehand).
CLIP_NORM = 1.0

CENTRAL_LABELS = {
    "mod_sulq": "MOD-SuLQ (paper's beta)",
    "analyze_gauss": "Analyze Gauss (MOD-SuLQ's mechanism, PLD, sqrt(2) sensitivity)",
    "ppca": "PPCA (alpha = eps, Gibbs)",
}


def central_bases(
    data: np.ndarray | SiteData, k: int, epsilon: float, delta: float, seed: int, burn_in: int
) -> dict[str, np.ndarray]:
    """The ``d x k`` basis each method of :data:`CENTRAL_LABELS` releases on ``data``.

    ``epsilon`` is every method's eps (PPCA's alpha); ``delta`` is MOD-SuLQ's and Analyze
    Gauss's (PPCA has none); ``burn_in`` is PPCA's number of Gibbs sweeps before the release.
    """
    prepared = prepare_central(data, CLIP_NORM)
    return {
        "mod_sulq": run_mod_sulq(prepared, k, epsilon, delta, CLIP_NORM, seed).basis,
        "analyze_gauss": run_analyze_gauss(
            prepared, k, epsilon, delta, CLIP_NORM, seed=seed
        ).basis,
        "ppca": run_ppca(prepared, k, epsilon, CLIP_NORM, burn_in, seed).basis,
    }


def random_subspace_distance(k: int, dim: int) -> float:
    """``sqrt(E ||sin Theta||_F^2) = sqrt(k (1 - k/d))`` between a fixed and a uniformly
    random k-dimensional subspace of ``R^d``: the error of an estimate with no information."""
    return math.sqrt(k * (1.0 - k / dim))


def random_subspace_energy(A: np.ndarray, k: int) -> float:
    """``E q_F(V) = k/d tr(A)`` for a uniformly random k-dimensional ``V``."""
    return k / A.shape[0] * float(np.trace(A))

"""DPdisPCA as a Flower strategy (one round, one release per site), on the Message API
(:class:`DPdisPCA`) or the legacy API (:class:`DPdisPCAStrategy`).

Paper: Imtiaz, Sarwate, "Differentially-private Distributed Principal Component Analysis"
(slides, Rutgers, 2018).

The single round asks every site for its partial square root ``P_s`` (``d x R``) of its
noisy second-moment matrix, or its whole noisy ``A^_s`` in the comparison variant, and merges
them into the top-``K`` eigenvectors of ``A_c = sum_s w_s P_s P_s^T``. Every formula lives in
:mod:`fedpca.algorithms.dpdis_pca`; this module only moves arrays. The privacy guarantee is
the sites' (each adds its own noise, see :mod:`fedpca.clients.dpdis_pca`).
"""

from __future__ import annotations

import numpy as np

from fedpca.algorithms.centred_run import DPDIS_MECHANISM
from fedpca.algorithms.dpdis_pca import VARIANT_FACTOR, WEIGHTING_UNIFORM, DPdisPCAServer
from fedpca.algorithms.secure_sum import SecureSum
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.strategies.centring import centred
from fedpca.strategies.legacy import LegacySiteStrategy
from fedpca.strategies.message_api import MessageSiteStrategy


def dpdis_pca_server(
    *,
    dim: int,
    k: int,
    r: int | None = None,
    weighting: str = WEIGHTING_UNIFORM,
    variant: str = VARIANT_FACTOR,
    evaluation: np.ndarray | None = None,
    secure: tuple[SecureSum, GridChoice] | None = None,
    variance: float | None = None,
) -> DPdisPCAServer:
    """DPdisPCA's server (one round) from its strategies' parameters.

    Args:
        dim (int): number of features ``d`` every site holds.
        k (int): number of principal components ``K``.
        r (int | None, default None): columns of each site's ``P_s``; ``None`` means
            ``min(2K, d)``. Ignored by the full variant.
        weighting (str, default "uniform"): ``"uniform"`` (``A_c = (1/S) sum P_s P_s^T``, the
            slides) or ``"samples"`` (weights ``N_s / N``).
        variant (str, default "factor"): ``"factor"`` (sites send ``P_s``), ``"full"``
            (sites send ``A^_s``; ``d / R`` times the traffic, same privacy) or
            ``"secure-sum"`` (distributed discrete Gaussian residues of ``X_s^T X_s``).
        evaluation (np.ndarray | None, default None): a ``d x d`` matrix (e.g. the pooled
            second moment, in simulation) for the ``energy_ratio`` recorded in the history.
        secure (tuple | None, default None): the ``secure-sum`` variant's public sum and the
            sites' grid (:func:`fedpca.algorithms.dpdis_pca.secure_sum_for`).
        variance (float | None, default None): keep the fewest components (at most ``k``)
            that explain this share of the DP variance (full and secure-sum variants).
    """
    return DPdisPCAServer(dim, k, r, weighting, variant, evaluation, secure, variance)


class DPdisPCAStrategy(LegacySiteStrategy):
    """DPdisPCA on Flower's legacy strategy API; parameters: :func:`dpdis_pca_server`'s and
    :class:`~fedpca.strategies.base.SiteRoundStrategy`'s."""

    build = staticmethod(dpdis_pca_server)


class DPdisPCA(MessageSiteStrategy):
    """DPdisPCA on Flower's Message API; parameters: :func:`dpdis_pca_server`'s and
    :class:`~fedpca.strategies.base.SiteRoundStrategy`'s."""

    build = staticmethod(dpdis_pca_server)


class CentredDPdisPCA(MessageSiteStrategy):
    """DPdisPCA on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then DPdisPCA's (parameters: ``centring``, ``columns``
    (:func:`~fedpca.strategies.centring.centred`) and :class:`DPdisPCA`'s; ``secure``: the
    algorithm's secure sum, the moments' is the ``centring`` server's)."""

    mechanism = DPDIS_MECHANISM
    build = staticmethod(centred(dpdis_pca_server))

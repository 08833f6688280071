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

from typing import Any

import numpy as np
from flwr.common import Scalar

from fedpca.algorithms.dpdis_pca import (
    VARIANT_FACTOR,
    WEIGHTING_UNIFORM,
    DPdisPCAServer,
)
from fedpca.algorithms.centred_run import DPDIS_MECHANISM
from fedpca.algorithms.secure_sum import SecAggPlusEmbedding, SecureSum
from fedpca.algorithms.site import SiteAnswer
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.strategies.base import SiteRoundStrategy
from fedpca.strategies.centring import CentredRounds
from fedpca.strategies.legacy import LegacySiteStrategy
from fedpca.strategies.message_api import MessageSiteStrategy


class DPdisPCARounds(SiteRoundStrategy):
    """Differentially private distributed PCA from partial square roots (one round): the
    request and its combination, for either Flower API.

    Args:
        dim (int): number of features ``d`` every site holds.
        k (int): number of principal components ``K``.
        r (int | None, default None): columns of each site's ``P_s``; ``None`` means
            ``min(2K, d)``. Ignored by the full variant.
        weighting (str, default "uniform"): ``"uniform"`` (``A_c = (1/S) sum P_s P_s^T``, the
            slides) or ``"samples"`` (weights ``N_s / N``).
        variant (str, default "factor"): ``"factor"`` (sites send ``P_s``) or ``"full"``
            (sites send ``A^_s``; ``d / R`` times the traffic, same privacy).
        evaluation (np.ndarray | None, default None): a ``d x d`` matrix (e.g. the pooled
            second moment, in simulation) for the ``energy_ratio`` recorded in the history.
        secure (tuple | None, default None): the ``secure-sum`` variant's public sum and the
            sites' grid (:func:`fedpca.algorithms.dpdis_pca.secure_sum_for`): sites send
            distributed discrete Gaussian residues through SecAgg+ (legacy strategy with
            :meth:`SecAggSettings.for_residues` only).
        variance (float | None, default None): keep the fewest components (at most ``k``)
            that explain this share of the DP variance (full and secure-sum variants).
        **options: :class:`~fedpca.strategies.base.SiteRoundStrategy`'s ``min_sites``,
            ``wait_for_sites``, ``min_noise_multiplier`` and ``privacy``.
    """

    label = "DPdisPCA"
    #: Flower rounds this strategy needs.
    num_rounds = 1

    def __init__(
        self,
        *,
        dim: int,
        k: int,
        r: int | None = None,
        weighting: str = WEIGHTING_UNIFORM,
        variant: str = VARIANT_FACTOR,
        evaluation: np.ndarray | None = None,
        secure: tuple[SecureSum, GridChoice] | None = None,
        variance: float | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.server = DPdisPCAServer(dim, k, r, weighting, variant, evaluation, secure,
                                     variance)
        if secure is not None:
            self.secagg_embedding = SecAggPlusEmbedding(secure[1].modulus)

    def __repr__(self) -> str:
        s = self.server
        return (
            f"{type(self).__name__}(dim={s.dim}, k={s.k}, r={s.r}, weighting={s.weighting!r}, "
            f"variant={s.variant!r}, min_sites={self.min_sites})"
        )

    def result_config(self) -> dict[str, Any]:
        """The base fields, the ``r`` sites were asked for and the bytes each one sent."""
        return {
            **super().result_config(),
            "r": self.server.r,
            "bytes_per_site": self.server.bytes_per_site,
        }

    def fit_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Scalar]]:
        """No arrays; the variant, ``d`` and ``r`` in the config."""
        return [], self.server.request()

    def combine(
        self, server_round: int, answers: list[SiteAnswer]
    ) -> tuple[np.ndarray, dict[str, Scalar]]:
        """The top-``K`` basis of ``A_c``, by :class:`DPdisPCAServer`."""
        basis = self.server.receive(answers)
        return basis, {k: v for k, v in self.server.history[-1].items() if k != "phase"}


class DPdisPCAStrategy(DPdisPCARounds, LegacySiteStrategy):
    """DPdisPCA on Flower's legacy strategy API; parameters: :class:`DPdisPCARounds`."""


class DPdisPCA(DPdisPCARounds, MessageSiteStrategy):
    """DPdisPCA on Flower's Message API; parameters: :class:`DPdisPCARounds`."""


class CentredDPdisPCA(CentredRounds, DPdisPCA):
    """DPdisPCA on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then DPdisPCA's (parameters: :class:`CentredRounds`'s and
    :class:`DPdisPCARounds`'s; ``secure``: the algorithm's secure sum, the moments' is the
    ``centring`` server's)."""

    mechanism = DPDIS_MECHANISM

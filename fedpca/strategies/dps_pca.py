"""DPS-PCA as a Flower strategy, on the Message API (:class:`DPSPCA`) or the legacy API
(:class:`DPSPCAStrategy`, also with SecAgg+).

Paper: Ge, Wang, Wang, Liu, "Minimax-Optimal Privacy-Preserving Sparse PCA in Distributed
Systems", AISTATS 2018, http://proceedings.mlr.press/v84/ge18a.html

Round 1 (unless an initial basis is given) asks every site for its noisy diagonal of
``X^T X``; rounds ``2..T+1`` send the current basis ``Q`` and receive ``H_i``; with
``explained_variance``, round ``T+2`` sends the final ``Q`` and receives the noisy Rayleigh
quotients and trace. Every formula
lives in :mod:`fedpca.algorithms.dps_pca`; this module only moves arrays. The privacy
guarantee is the sites' (each adds its own noise, see :mod:`fedpca.clients.dps_pca`); the
server only records what they report.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fedpca.algorithms.centred_run import DPS_MECHANISM
from fedpca.algorithms.dps_pca import DPSPCAServer, DPSSecureSums
from fedpca.strategies.centring import centred
from fedpca.strategies.legacy import LegacySiteStrategy
from fedpca.strategies.message_api import MessageSiteStrategy


def dps_pca_server(
    *,
    dim: int,
    k: int,
    s_hat: int,
    rounds: int,
    seed: int | None = None,
    initial_basis: np.ndarray | None = None,
    evaluate_fn: Callable[[np.ndarray], dict[str, float]] | None = None,
    secure: DPSSecureSums | None = None,
    explained_variance: bool = False,
) -> DPSPCAServer:
    """DPS-PCA's server from its strategies' parameters.

    Args:
        dim (int): number of features ``d`` every site holds.
        k (int): number of principal components.
        s_hat (int): rows kept by thresholding (``k <= s_hat <= d``).
        rounds (int): power rounds ``T`` (the run has ``T + 1`` Flower rounds with the
            initialisation).
        seed (int | None, default None): seed of the server's public randomness (``Q(0)``).
        initial_basis (np.ndarray | None, default None): a ``d x k`` orthonormal ``Q(0)``;
            skips the initialisation round.
        evaluate_fn (callable | None, default None): ``Q -> dict`` of metrics recorded in the
            history after every round (e.g. the distance to a known truth in simulation).
        secure (DPSSecureSums | None, default None): the public secure sums (and the sites'
            grids) when sites with a ``discrete`` policy send distributed discrete Gaussian
            residues (:func:`fedpca.algorithms.dps_pca.secure_sums`).
        explained_variance (bool, default False): one more round for the explained
            variance (every site's policy must agree to that release).
    """
    return DPSPCAServer(dim, k, s_hat, rounds, seed=seed, initial_basis=initial_basis,
                        evaluate=evaluate_fn, secure=secure,
                        explained_variance=explained_variance)


class DPSPCAStrategy(LegacySiteStrategy):
    """DPS-PCA on Flower's legacy strategy API (and SecAgg+); parameters:
    :func:`dps_pca_server`'s and :class:`~fedpca.strategies.base.SiteRoundStrategy`'s."""

    build = staticmethod(dps_pca_server)


class DPSPCA(MessageSiteStrategy):
    """DPS-PCA on Flower's Message API; parameters: :func:`dps_pca_server`'s and
    :class:`~fedpca.strategies.base.SiteRoundStrategy`'s."""

    build = staticmethod(dps_pca_server)


class CentredDPSPCA(MessageSiteStrategy):
    """DPS-PCA on the sites' centred (standardised) rows, on Flower's Message API: the
    moments round, then DPS-PCA's initialisation and power rounds (parameters: ``centring``,
    ``columns`` (:func:`~fedpca.strategies.centring.centred`) and :class:`DPSPCA`'s;
    ``secure``: the algorithm's secure sums, the moments' is the ``centring`` server's).
    ``explained_variance``: one more round, every site's noisy Rayleigh quotients and trace
    of its centred rows (DPS-PCA's server holds no noisy matrix to read them from)."""

    mechanism = DPS_MECHANISM
    build = staticmethod(centred(dps_pca_server))

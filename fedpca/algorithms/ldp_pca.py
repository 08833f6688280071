"""LDP-PCA: PCA from locally private covariance views, dense (Alg. 1) or sparse (Alg. 2).

Paper: Wang & Xu, "Principal Component Analysis in the Local Differential Privacy Model",
IJCAI 2019 / TCS 2020 (https://arxiv.org/abs/1908.11090), read as follows:

1. every record ``x`` is released as its own view ``x x^T + Z``, ``Z`` symmetric with upper
   triangle (diagonal included) i.i.d. ``N(0, sigma_1^2)``. A site holding ``m`` records
   sends the sum of their views, drawn as ``X^T X + Z_m`` with ``Z_m`` symmetric of entry
   variance ``m sigma_1^2`` (the same distribution as summing ``m`` views);
2. the server forms ``S~ = sum_i (X_i^T X_i + Z_i) / n`` and outputs its top-``k``
   eigenvectors (Alg. 1) or, with ``sparse=True``, solves Fantope projection and selection
   ``max <S~, X> - lam ||X||_{1,1}`` over ``0 <= X <= I, tr X = k`` by ADMM
   (:mod:`fedpca.linalg.fantope`) and outputs the top-``k`` eigenvectors of the solution and its
   row support ``{j : X_jj > SUPPORT_THRESHOLD}`` (Alg. 2).

Privacy guarantee (unit: one record, replace-one; local model): each record's view is
(epsilon, delta)-DP on its own, whoever sees it. ``sigma_1 = z sqrt(2) C^2`` with ``z`` from
:func:`fedpca.dp.calibration.calibrate_gaussian` for ONE release of replace-one sensitivity
``sqrt(2) C^2`` (the upper triangle of ``x x^T``; the paper's
``sigma_1^2 = 2 ln(1.25/delta) / eps^2`` is the add/remove figure and under-states it by
``sqrt(2)``; ``accounting="paper"`` keeps the paper's classic formula with the corrected
sensitivity). Each record is in one view, so a site's single ledger entry (noise multiplier
``z``) is the per-record guarantee; its sum, with more noise, is post-processing of the views.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fedpca.algorithms.explained_variance import along_basis
from fedpca.algorithms.privacy_record import privacy_record
from fedpca.algorithms.server import ServerRecord, ordered_answers, weighted_sum
from fedpca.algorithms.site import (
    PrivateSite,
    SingleReleasePolicy,
    SiteAnswer,
    build_sites,
)
from fedpca.errors import ConfigurationError
from fedpca.linalg.fantope import (
    ADMMResult,
    ADMMSettings,
    fantope_admm,
    require_penalty,
    require_rank,
    validate_symmetric,
)
from fedpca.linalg.subspace import top_eigenvectors
from fedpca.dp.exact_noise import float_error
from fedpca.dp.mechanisms import upper_triangle_sensitivity
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_positive_int
from fedpca.results import PCAResult

logger = logging.getLogger(__name__)

ALGORITHM = "ldp-pca"
MECHANISM = "ldp-pca/covariance-views"
PHASE = "covariance"
#: Every record is released once (in its site's single release).
RELEASES = 1
#: A row ``j`` is in the estimated support when the FPS solution has ``X_jj`` above this
#: (diagonals lie in [0, 1] and sum to ``k``; soft thresholding makes off-support ones 0).
SUPPORT_THRESHOLD = 1e-4


@dataclass(frozen=True)
class LDPPolicy(SingleReleasePolicy):
    """Every record's privacy settings (set by its site; the server can only add noise):
    ``epsilon, delta`` are the budget of each record's single view (see
    :class:`SingleReleasePolicy`; defaults are the paper's eps=0.5, delta=1e-4)."""

    epsilon: float = 0.5
    delta: float = 1e-4

    @property
    def sensitivity(self) -> float:
        """Replace-one L2 sensitivity of the upper triangle of ``x x^T``: ``sqrt(2) C^2``."""
        return upper_triangle_sensitivity(self.clip_norm)

    @property
    def record_sigma(self) -> float:
        """``sigma_1``: the noise standard deviation of one record's view."""
        return self.calibration().sigma(self.sensitivity)


class LDPCovarianceSite(PrivateSite):
    """A site that releases the sum of its records' private views, once.

    Constructed like :class:`~fedpca.algorithms.site.PrivateSite`, with a
    :class:`LDPPolicy` (or, in a centred run, the algorithm's share of a local
    :class:`~fedpca.algorithms.centring.CentredPolicy`: the sensitivity ``sqrt(2) C^2``
    comes from the policy's clip norm alone).
    """

    CONFIG_KEYS = frozenset({"phase", "dim", "min_noise_multiplier"})

    def respond(self, arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> np.ndarray:
        """The sum of the site's private views (``phase=covariance``, ``dim``, no arrays)."""
        phase = config.get("phase")
        if phase != PHASE:
            raise self.refuse(f"unknown phase {phase!r}; expected {PHASE!r}")
        self.require_dim(config.get("dim"))
        if arrays:
            raise self.refuse(f"the covariance request must carry no arrays, got {len(arrays)}")
        return self.release_covariance(config.get("min_noise_multiplier"))

    def release_covariance(self, min_noise_multiplier: float | None = None) -> np.ndarray:
        """``X^T X + Z_m``: the sum of the ``m`` records' views (the one accounted release).

        ``Z_m`` is symmetric with upper-triangle entries ``N(0, m sigma_1^2)``; the ledger
        records ``sigma_1``, the noise of each record's own view.
        """
        sensitivity = upper_triangle_sensitivity(self.clip_norm)
        sigma_1 = self.sigma(sensitivity, min_noise_multiplier)
        self.require_answer_size((self.dim, self.dim))
        return self.noisy_symmetric_release(
            MECHANISM, self.X.T @ self.X, sensitivity, sigma_1,
            error=float_error(self.n * self.clip_norm**2, self.n), scale=math.sqrt(self.n),
        )


def default_lambda(record_sigma: float, dim: int, n: int) -> float:
    """The default FPS penalty ``lam = sigma_1 sqrt(2 ln(d (d+1)) / n)``.

    Paper 004 (Thm. 4, 5) asks for ``lam >= ||S~ - Sigma||_{inf,inf}`` and sets
    ``lam ~ lambda_1 sqrt(log d / (n eps^2))`` (times ``sqrt(log 1/delta)`` in Thm. 5). In the
    local model the noise dominates ``S~ - Sigma``: its ``d(d+1)/2`` distinct entries are
    i.i.d. ``N(0, sigma_1^2 / n)``, and ``sqrt(2 ln(d(d+1)))`` standard deviations bound
    their maximum with probability at least ``1 - 1/sqrt(4 pi ln(d(d+1)))`` (0.92 at
    ``d = 400``). As
    ``sigma_1 ~ C^2 sqrt(ln(1/delta)) / eps``, this is the paper's rate with
    ``lambda_1 <= C^2`` and constant ``2`` on ``sqrt(log d)``; the sampling error, of order
    ``lambda_1 sqrt(log d / n)``, is smaller by ``sigma_1 / lambda_1`` and is left out.
    """
    return record_sigma * math.sqrt(2.0 * math.log(dim * (dim + 1)) / n)


def support_scores(estimated: Sequence[int], truth: Sequence[int]) -> dict[str, float]:
    """Precision and recall of an estimated row support (precision 0 for an empty one)."""
    est, true = set(int(j) for j in estimated), set(int(j) for j in truth)
    hits = len(est & true)
    return {
        "support_precision": hits / len(est) if est else 0.0,
        "support_recall": hits / len(true) if true else 1.0,
    }


class LDPCovarianceServer(ServerRecord):
    """The aggregator of LDP-PCA: one request, then the covariance estimate and its PCA.

    Args:
        dim: number of features ``d``.
        k: number of components (``1 <= k <= d``).
        sparse: solve Fantope projection and selection (Alg. 2) instead of plain PCA.
        lam: FPS penalty (``>= 0``); ``None`` uses :func:`default_lambda`.
        record_sigma: the per-record noise ``sigma_1`` the sites use (needed for the
            default ``lam``).
        admm: :class:`ADMMSettings` for the FPS solver.
        evaluate_fn: optional ``basis -> metrics`` recorded in the history (e.g. the distance
            to a known truth in simulation).
        true_support: the known row support (simulation only): adds support precision and
            recall to the history.

    After :meth:`receive`, ``basis`` holds the ``d x k`` output and, with ``sparse``,
    ``support`` the estimated row support.
    """

    algorithm = ALGORITHM

    def __init__(
        self,
        dim: int,
        k: int,
        sparse: bool = False,
        lam: float | None = None,
        record_sigma: float | None = None,
        admm: ADMMSettings | None = None,
        evaluate_fn: Callable[[np.ndarray], dict[str, float]] | None = None,
        true_support: Sequence[int] | None = None,
    ) -> None:
        self.dim = require_positive_int(dim, "dim")
        self.k = require_rank(k, self.dim)
        if sparse and lam is None and record_sigma is None:
            raise ConfigurationError(
                "the sparse solver needs lam, or record_sigma (the sites' per-record noise "
                "sigma_1) to compute the default lam"
            )
        self.sparse = bool(sparse)
        self.lam = None if lam is None else require_penalty(lam)
        self.record_sigma = record_sigma
        self.admm = admm or ADMMSettings()
        self.evaluate = evaluate_fn
        self.true_support = None if true_support is None else [int(j) for j in true_support]
        self.start_record()
        self.support: list[int] | None = None

    label = "LDP-PCA"

    def round_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        """The one round: no arrays, ``phase=covariance`` and the expected ``dim``."""
        if server_round != 1:
            raise ConfigurationError(
                f"LDP-PCA has a single round; round {server_round} was requested")
        return [], {"phase": PHASE, "dim": self.dim}

    def round_result(self, server_round: int, answers: Sequence[SiteAnswer]
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """``S~`` and its (sparse) principal subspace."""
        return self.receive(answers), self.round_metrics()

    def describe(self) -> str:
        """``dim``, ``k``, whether sparse and its penalty."""
        return f"dim={self.dim}, k={self.k}, sparse={self.sparse}, lam={self.lam}"

    def receive(self, answers: Sequence[SiteAnswer]) -> np.ndarray:
        """``S~ = sum_i (X_i^T X_i + Z_i) / n``; its top-``k`` basis (dense or FPS)."""
        if self.basis is not None:  # a centred run's history holds its moments round too
            raise ConfigurationError("LDP-PCA has a single round: the answers were received")
        ordered = ordered_answers(answers, (self.dim, self.dim))
        for a in ordered:
            validate_symmetric(a.value, f"site {a.site}'s answer")
        n_total = sum(a.n for a in ordered)
        S = weighted_sum(ordered, weighted=False) / n_total
        entry: dict[str, Any] = {
            "round": 1,
            "phase": PHASE,
            "sites": len(ordered),
            "epsilon_spent": max(a.epsilon_spent for a in ordered),
        }
        if self.sparse:
            lam = self.lam if self.lam is not None else default_lambda(
                self.record_sigma, self.dim, n_total
            )
            solved = fantope_admm(S, self.k, lam, self.admm)
            self.basis = top_eigenvectors(solved.solution, self.k)
            entry.update(self._sparse_metrics(lam, solved))
        else:
            self.basis = top_eigenvectors(S, self.k)
        self.explained = along_basis(self.basis, S @ self.basis, float(np.trace(S)))
        if self.evaluate is not None:
            entry.update(self.evaluate(self.basis))
        self.history.append(entry)
        self.sites_answered.append([a.site for a in ordered])
        logger.info("LDP-PCA: %s", {key: v for key, v in entry.items() if key != "support"})
        return self.basis

    def _sparse_metrics(self, lam: float, solved: ADMMResult) -> dict[str, Any]:
        self.support = np.flatnonzero(np.diag(solved.solution) > SUPPORT_THRESHOLD).tolist()
        metrics: dict[str, Any] = {
            "lam": lam,
            "admm_iterations": solved.iterations,
            "admm_converged": solved.converged,
            "primal_residual": solved.primal_residual,
            "dual_residual": solved.dual_residual,
            "support_size": len(self.support),
            "support": self.support,
        }
        if self.true_support is not None:
            metrics.update(support_scores(self.support, self.true_support))
        return metrics


def run_ldp_pca(
    sites: Sequence[np.ndarray | SiteData],
    k: int,
    policy: LDPPolicy,
    seed: int | None = None,
    sparse: bool = False,
    lam: float | None = None,
    admm: ADMMSettings | None = None,
    evaluate: Callable[[np.ndarray], dict[str, float]] | None = None,
    true_support: Sequence[int] | None = None,
) -> PCAResult:
    """Reference LDP-PCA over a list of site arrays (no Flower), same formulas as the app.

    Site ``i`` is named ``str(i)`` and, with ``seed``, draws its noise from the stream
    ``(seed, i, 0)``: a Flower run with the same seed gives the same basis.

    Privacy guarantee: every record's view is (policy.epsilon, policy.delta)-DP (local model,
    replace-one).
    """
    start = time.perf_counter()
    site_objs = build_sites(LDPCovarianceSite, sites, policy, seed)
    server = LDPCovarianceServer(
        site_objs[0].dim, k, sparse=sparse, lam=lam, record_sigma=policy.record_sigma,
        admm=admm, evaluate_fn=evaluate, true_support=true_support,
    )
    server.receive([s.answer(s.release_covariance()) for s in site_objs])
    config = {
        "k": k, "sparse": sparse, "lam": lam, "sites": len(site_objs),
        "samples": sum(s.n for s in site_objs), "dim": site_objs[0].dim, "seed": seed,
        **asdict(policy),
        "clipped_rows": sum(s.clip_report.clipped_rows for s in site_objs),
        "wall_seconds": time.perf_counter() - start,
    }
    return server.result(privacy_record(ALGORITHM, policy), config)

"""DPS-PCA: distributed private sparse PCA by a noisy truncated power method.

Paper: Ge, Wang, Wang, Liu, "Minimax-Optimal Privacy-Preserving Sparse PCA in Distributed
Systems", AISTATS 2018 (http://proceedings.mlr.press/v84/ge18a.html), Alg. 1-3, read as
follows:

1. initialisation (one accounted release): site ``i`` sends
   ``g_i = diag(X_i^T X_i) + N(0, sigma^2 I_d)``; the server keeps the ``s_hat`` coordinates
   of largest ``sum_i g_i`` and orthonormalises a public random ``d x k`` matrix on them;
2. for ``t = 1..T`` site ``i`` sends ``H_i = (X_i^T (X_i Q) + G_i) / n_i`` with
   ``G_i ~ N(0, sigma^2)^{d x k}``; the server forms ``K = sum_i n_i H_i / n`` and sets
   ``Q <- thinQR(Threshold(thinQR(K), s_hat))``.

3. with ``explained_variance`` in the site's policy, one more round (fedpca's addition, not
   the paper's): for the final ``Q`` site ``i`` sends the ``k`` Rayleigh quotients
   ``diag(Q^T X_i^T X_i Q)`` and ``trace(X_i^T X_i)`` with ``N(0, sigma^2 I_{k+1})``
   (:mod:`fedpca.algorithms.explained_variance`); the server sums them into the explained
   variance per component and its ratio, and orders the components by it.

A **public start** (:mod:`fedpca.data.start_basis`, fedpca's addition) replaces step 1: a
``d x k`` orthonormal basis computed from public data only, named in every request by the
SHA-256 of its file (config ``start``). A site whose policy holds that start
(:attr:`DPSPCAPolicy.start`) plans ``T`` power steps and no initialisation, so each release
gets a larger share of the run's epsilon; what a hostile coordinator could try with it:

* **name a start the site does not hold, or none when the site's plan has one**: refused
  (every request's ``start`` must be the plan's), before anything is charged;
* **claim a start to get fewer releases planned, then ask for ``T + 1``**: the
  initialisation is refused at a site whose plan has a start, and its ledger holds the run
  to the ``T`` releases planned;
* **send another basis in the first power step** (or skip it): the run's first release
  here must be the power step from the start, refused unless its basis is the site's own
  copy (to rounding), which the site multiplies its records by (a site that missed that
  round takes no further part in the run);
* **change the start between rounds**: every request names the start, checked each time;
* **replay the first step**: each answer is a release, charged; the ledger refuses the ``T+1``-th.

A run from a shifted start (``k + 1`` columns, :mod:`fedpca.algorithms.shifted_start`) keeps
the top ``k`` Ritz vectors of its last power step's span: post-processing, no release.

Privacy guarantee (per site, unit: one record, replace-one): the ``T + 1`` releases of a site
(``T`` with a public start; one more with ``explained_variance``) are (epsilon, delta)-DP
together; every release has sensitivity ``sqrt(2) C^2`` and noise ``sigma = z sqrt(2) C^2``
with ``z`` from :func:`fedpca.dp.calibration.calibrate_gaussian` for that many releases.
A site never forms its ``d x d`` covariance.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from fedpca.algorithms.explained_variance import (
    rayleigh_explained_variance,
    rayleigh_sensitivity,
    rayleigh_statistics,
)
from fedpca.algorithms.privacy_record import privacy_record as run_privacy
from fedpca.algorithms.secure_sum import SecureSum, agreed_sum, public_seed
from fedpca.algorithms.server import ServerRecord, ordered_answers, weighted_sum
from fedpca.algorithms.site import PrivateSite, RoundsPolicy, SiteAnswer, build_sites
from fedpca.algorithms.sum_bounds import AnswerStatistic, answers_within_bounds
from fedpca.algorithms.sum_groups import assign_groups, in_groups, robust_decode
from fedpca.data.start_basis import StartBasis, require_named_start, start_name
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.linalg.basis import validate_basis
from fedpca.linalg.subspace import thin_qr, threshold_rows, top_coordinates
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.dp.exact_noise import float_error
from fedpca.dp.mechanisms import (
    diagonal_sensitivity,
    power_step_sensitivity,
)
from fedpca.dp.validation import require_positive_int
from fedpca.results import PCAResult

logger = logging.getLogger(__name__)

ALGORITHM = "dps-pca"
INIT_MECHANISM = "dps-pca/diagonal"
POWER_MECHANISM = "dps-pca/power"
PHASE_INIT = "init"
PHASE_POWER = "power"
VARIANCE_MECHANISM = "dps-pca/rayleigh"
#: The last round with ``explained_variance``: the Rayleigh quotients of the final basis.
PHASE_VARIANCE = "variance"
#: The request config key naming the run's public start basis (its file's SHA-256, "": none).
START = "start"
#: Stream key that separates the server's public randomness from any site's noise.
PUBLIC_STREAM = 0x5EED


@dataclass(frozen=True)
class DPSPCAPolicy(RoundsPolicy):
    """A DPS-PCA site's own privacy settings (:class:`RoundsPolicy`): ``rounds`` power
    rounds and the initialisation, ``T + 1`` releases; ``accounting="paper"`` is the
    paper's closed form.

    ``discrete`` (with ``secure_min_sites = M``): the site sends distributed discrete
    Gaussian messages (:mod:`fedpca.algorithms.secure_sum`), whose sums over at least ``M``
    sites carry an exact guarantee (secure sums need it).

    ``explained_variance``: the site agrees to one more release at the end, the Rayleigh
    quotients of the final basis and its trace (``k + 1`` numbers), planned and calibrated
    with the others (``T + 2`` releases within the same budget, so every release is a
    little noisier); without it the site refuses that request. Not with ``discrete``.

    ``start``: the public start basis the site holds for this run (its own copy): the run
    has no initialisation release (``T`` power steps, or ``T + 1`` releases with the
    explained variance), every request must name it, and the first power step uses it.
    """

    EXTRA_RELEASES = 1

    discrete: bool = False
    explained_variance: bool = False
    start: StartBasis | None = None

    @property
    def releases(self) -> int:
        """The initialisation (none from a public :attr:`start`), ``T`` power steps and,
        with :attr:`explained_variance`, the Rayleigh quotients."""
        return super().releases - int(self.start is not None) + int(self.explained_variance)

    @property
    def start_name(self) -> str:
        """The SHA-256 of the start's file, ``""`` without one: what every request names."""
        return start_name(self.start)

    def record(self) -> dict[str, Any]:
        """The policy's settings as plain values (the start by its name)."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "start": self.start_name}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.discrete and self.explained_variance:
            raise ConfigurationError(
                "explained_variance is not built for discrete (secure-sum) noise: set "
                "discrete=false, or leave explained_variance off")
        if self.discrete and self.secure_min_sites is None:
            raise ConfigurationError(
                "discrete (distributed discrete Gaussian) noise needs secure_min_sites: the "
                "guarantee holds for sums over at least that many sites"
            )


class DPSPCASite(PrivateSite):
    """One data holder in DPS-PCA: validates, clips, calibrates, accounts and releases.

    Constructed like :class:`~fedpca.algorithms.site.PrivateSite`, with a
    :class:`DPSPCAPolicy`; it reads its records only through their products
    (:class:`~fedpca.algorithms.site_rows.SiteRows`), so they may be streamed from disk
    (a genotype site's ``.bed``, never held in float).
    """

    CONFIG_KEYS = frozenset({"phase", "round", "min_noise_multiplier", START})
    STREAMS_ROWS = True

    def respond(self, arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> np.ndarray:
        """The noisy diagonal (``phase=init``, no arrays), ``H_i`` (``phase=power``, one
        basis ``Q``) or the Rayleigh quotients (``phase=variance``, the final ``Q``); every
        request names the site's start (:func:`~fedpca.data.start_basis.require_named_start`)."""
        phase = config.get("phase")
        floor = config.get("min_noise_multiplier")
        require_named_start(config.get(START, ""), self.policy.start, self.site)
        if phase == PHASE_INIT:
            if arrays:
                raise self.refuse(f"the init request must carry no arrays, got {len(arrays)}")
            return self.release_diagonal(floor, secure=self.requested_sum(config))
        if phase not in (PHASE_POWER, PHASE_VARIANCE):
            raise self.refuse(f"unknown phase {phase!r}; expected {PHASE_INIT!r}, "
                              f"{PHASE_POWER!r} or {PHASE_VARIANCE!r}")
        if len(arrays) != 1:
            raise self.refuse(
                f"a {phase} request carries exactly one basis Q, got {len(arrays)} arrays")
        if phase == PHASE_VARIANCE:
            return self.release_rayleigh(arrays[0], floor)
        return self.release_power(arrays[0], floor, secure=self.requested_sum(config))

    def release_diagonal(
        self, min_noise_multiplier: float | None = None, secure: SecureSum | None = None
    ) -> np.ndarray:
        """``(diag(X^T X) + N(0, sigma^2 I_d)) / n_i``: the initialisation release (accounted).

        Divided by ``n_i`` like the power step, so the server's ``n_i``-weighted average
        (which is also what secure aggregation computes) is ``sum_i g_i / n``. With a
        ``discrete`` policy: the secure-sum message of ``diag(X^T X)`` for ``secure``.
        Refused (nothing charged) at a site whose plan starts from a public basis.
        """
        if self.policy.start is not None:
            raise self.refuse(f"this run starts from the public basis {self.policy.start_name}"
                              ", without an initialisation release; nothing was released")
        if self.policy.discrete:
            return self.discrete_release(
                INIT_MECHANISM, self.rows.squared_column_norms(),
                self.discrete_request(secure, min_noise_multiplier),
                sensitivity=diagonal_sensitivity(self.policy.clip_norm),
                norm_per_record=self.policy.clip_norm**2,
            )
        diagonal = self.rows.squared_column_norms()
        return self.noisy_release(
            INIT_MECHANISM, diagonal, diagonal_sensitivity(self.policy.clip_norm),
            min_noise_multiplier, error=float_error(self.n * self.clip_norm**2, self.n),
        ) / self.n

    def release_power(
        self, Q: np.ndarray, min_noise_multiplier: float | None = None,
        secure: SecureSum | None = None,
    ) -> np.ndarray:
        """``H_i = (X^T (X Q) + G) / n_i`` for an orthonormal ``Q`` (accounted); with a
        ``discrete`` policy, the secure-sum message of ``X^T X Q`` for ``secure``.

        ``Q``'s shape (the coordinator's ``k``) is bounded by the site's limits, then ``Q``
        is checked and made exact (:func:`~fedpca.linalg.basis.validate_basis`), all
        before anything is allocated for the answer or charged. The run's first release
        from a public start is the site's own copy of it
        (:meth:`~fedpca.data.start_basis.StartBasis.require_same`)."""
        self.require_answer_size(np.shape(Q))
        if self.policy.start is not None and self.ledger.count == 0:
            Q = self.policy.start.require_same(Q, self.site)
        Q = validate_basis(Q, self.dim, site=self.site)
        if self.policy.discrete:
            return self.discrete_release(
                POWER_MECHANISM, self.rows.gram_times(Q).ravel(),
                self.discrete_request(secure, min_noise_multiplier),
                sensitivity=power_step_sensitivity(self.policy.clip_norm),
                norm_per_record=self.policy.clip_norm**2,
            )
        # |X^T X Q| <= |X|^T |X| |Q| entrywise, of Frobenius norm <= n C^2 sqrt(k)
        bound = self.n * self.clip_norm**2 * math.sqrt(Q.shape[1])
        return self.noisy_release(
            POWER_MECHANISM, self.rows.gram_times(Q),
            power_step_sensitivity(self.policy.clip_norm), min_noise_multiplier,
            error=float_error(bound, self.n + self.dim),
        ) / self.n

    def release_rayleigh(
        self, Q: np.ndarray, min_noise_multiplier: float | None = None
    ) -> np.ndarray:
        """``(rayleigh_statistics(X, Q) + N(0, sigma^2 I_{k+1})) / n_i``: the ``k`` Rayleigh
        quotients of the final basis ``Q`` and the trace of ``X^T X`` (accounted;
        sensitivity ``sqrt(2) C^2``, :func:`rayleigh_sensitivity`).

        Refused, before anything is charged, unless the site's policy agreed to it
        (``explained_variance``), or as a run's first release from a public start (which
        is the start's power step); ``Q`` is checked like a power step's."""
        if self.policy.start is not None and self.ledger.count == 0:
            raise self.refuse("a run from a public start begins with the power step from "
                              "it, not the explained variance; nothing was released")
        if not self.policy.explained_variance:
            raise InvalidRequestError(
                f"{self.site}: this site's policy does not release the explained variance "
                "(explained_variance = false); run without it")
        self.require_answer_size(np.shape(Q))
        Q = validate_basis(Q, self.dim, site=self.site)
        # every entry is a sum of n squared norms <= C^2
        bound = self.n * self.clip_norm**2 * math.sqrt(Q.shape[1] + 1)
        return self.noisy_release(
            VARIANCE_MECHANISM, rayleigh_statistics(self.rows, Q),
            rayleigh_sensitivity(self.policy.clip_norm), min_noise_multiplier,
            error=float_error(bound, self.n + self.dim),
        ) / self.n


class DPSPCAServer(ServerRecord):
    """The coordinator of DPS-PCA: plans rounds, aggregates releases, thresholds.

    Args:
        dim: number of features ``d``.
        k: number of components.
        s_hat: rows kept by thresholding (``k <= s_hat <= d``).
        rounds: power rounds ``T``.
        seed: seed of the public randomness for ``Q(0)`` (``None``: OS randomness).
        initial_basis: a user-supplied ``Q(0)``; skips the initialisation release.
        start: a public start basis (:mod:`fedpca.data.start_basis`): ``Q(0)`` is its
            basis and every request names it (config ``start``), so that sites holding it
            plan no initialisation release; not with ``initial_basis``.
        evaluate_fn: optional ``Q -> metrics`` called after every round (e.g. distance to a
            known truth in simulation); its output goes into the history.
        secure: the initialisation's and the power steps' secure sums with their grids,
            when the sites send discrete Gaussian messages (see :func:`secure_sums`).
        explained_variance: ask the sites, after the last power round, for the Rayleigh
            quotients of the final basis (one more round; every site's policy must agree).
    """

    algorithm = ALGORITHM

    def __init__(
        self,
        dim: int,
        k: int,
        s_hat: int,
        rounds: int,
        seed: int | None = None,
        initial_basis: np.ndarray | None = None,
        evaluate_fn: Callable[[np.ndarray], dict[str, float]] | None = None,
        secure: DPSSecureSums | None = None,
        explained_variance: bool = False,
        start: StartBasis | None = None,
    ) -> None:
        if start is not None:
            if initial_basis is not None:
                raise ConfigurationError(
                    "give initial_basis or a public start basis, not both")
            start.require_shape(dim, k)
            initial_basis = start.basis
        self.start = start
        if secure is not None and explained_variance:
            raise ConfigurationError(
                "explained_variance is not built for discrete (secure-sum) noise")
        self.secure = secure
        self.explained_variance = bool(explained_variance)
        self.dim = require_positive_int(dim, "dim")
        self.k = require_positive_int(k, "k")
        self.s_hat = require_positive_int(s_hat, "s_hat")
        self.rounds = require_positive_int(rounds, "rounds")
        if not self.k <= self.s_hat <= self.dim:
            raise ConfigurationError(
                f"need k <= s_hat <= dim, got k={k}, s_hat={s_hat}, dim={dim}"
            )
        self.seed = seed
        self.evaluate = evaluate_fn
        self.start_record()
        if initial_basis is not None:
            basis = validate_basis(initial_basis, self.dim, site="initial_basis")
            if basis.shape[1] != self.k:
                raise ConfigurationError(
                    f"initial_basis has {basis.shape[1]} columns, expected k={self.k}"
                )
            self.basis = basis
        self.needs_init = initial_basis is None

    @property
    def expected_rounds(self) -> int:
        """The run's rounds: :attr:`total_rounds`."""
        return self.total_rounds

    @property
    def total_rounds(self) -> int:
        """Number of communication rounds: ``T``, plus one if the server initialises, plus
        one for the explained variance."""
        return self.rounds + int(self.needs_init) + int(self.explained_variance)

    def phase(self, server_round: int) -> tuple[str, int]:
        """``(phase, t)`` for communication round ``server_round`` (1-based)."""
        if not 1 <= server_round <= self.total_rounds:
            raise ConfigurationError(
                f"round {server_round} is outside 1..{self.total_rounds}"
            )
        if self.explained_variance and server_round == self.total_rounds:
            return PHASE_VARIANCE, self.rounds + 1
        if self.needs_init:
            return (PHASE_INIT, 0) if server_round == 1 else (PHASE_POWER, server_round - 1)
        return PHASE_POWER, server_round

    label = "DPS-PCA"

    @property
    def num_rounds(self) -> int:
        """Rounds of the run: ``T``, one more for the initialisation and for the explained
        variance."""
        return self.total_rounds

    def round_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        """Init: no arrays; power round ``t`` and the explained variance: the current
        basis ``Q``; with secure sums, the sum the sites' residues go into."""
        phase, t = self.phase(server_round)
        arrays = [] if phase == PHASE_INIT else [self.basis]
        config: dict[str, Any] = {"phase": phase, "round": t}
        if self.start is not None:
            config[START] = self.start.digest
        secure = self.round_sum(server_round)
        if secure is not None:
            config.update(secure.to_config())
        return arrays, config

    def round_sum(self, server_round: int) -> SecureSum | None:
        """The initialisation's secure sum in its round, the power steps' in every other."""
        if self.secure is None:
            return None
        return self.secure[self.phase(server_round)[0] != PHASE_INIT][0]

    def round_result(self, server_round: int, answers: Sequence[SiteAnswer]
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """The initial support, one power step or the explained variance."""
        phase, t = self.phase(server_round)
        if phase == PHASE_INIT:
            basis = self.receive_diagonal(answers)
        elif phase == PHASE_VARIANCE:
            basis = self.receive_rayleigh(t, answers)
        else:
            basis = self.receive_power(t, answers)
        return basis, {k: v for k, v in self.history[-1].items() if k != "phase"}

    @property
    def secure_modulus(self) -> int | None:
        """The power steps' residues' modulus with secure sums."""
        return None if self.secure is None else self.secure[1][1].modulus

    def describe(self) -> str:
        """``dim``, ``k``, ``s_hat``, ``rounds`` and how it starts."""
        init = ("private" if self.needs_init else "given" if self.start is None
                else f"public start {self.start.digest[:12]}")
        return (f"dim={self.dim}, k={self.k}, s_hat={self.s_hat}, rounds={self.rounds}, "
                f"init={init}")

    def receive_diagonal(self, answers: Sequence[SiteAnswer]) -> np.ndarray:
        """Sum the noisy diagonals, pick ``s_hat`` coordinates, set ``Q(0)``."""
        ordered, total, dropped = self._summed(answers, (self.dim,), 0)
        support = top_coordinates(total, self.s_hat)
        rng = np.random.default_rng(None if self.seed is None else [self.seed, PUBLIC_STREAM])
        start = np.zeros((self.dim, self.k))
        start[support] = rng.standard_normal((self.s_hat, self.k))
        self.basis = thin_qr(start)
        self._record(0, PHASE_INIT, ordered, dropped)
        return self.basis

    def receive_power(self, t: int, answers: Sequence[SiteAnswer]) -> np.ndarray:
        """``K = sum n_i H_i / n``; ``Q <- thinQR(Threshold(thinQR(K), s_hat))``."""
        ordered, total, dropped = self._summed(answers, (self.dim, self.k), 1)
        K = total / sum(a.n for a in ordered)
        self.basis = thin_qr(threshold_rows(thin_qr(K), self.s_hat))
        self._record(t, PHASE_POWER, ordered, dropped)
        return self.basis

    def receive_rayleigh(self, t: int, answers: Sequence[SiteAnswer]) -> np.ndarray:
        """Sum the sites' noisy Rayleigh quotients and traces into the explained variance
        and its ratio (:func:`rayleigh_explained_variance`), and order the basis's columns
        by it, largest first (post-processing: the subspace is unchanged)."""
        ordered, total, dropped = self._summed(answers, (self.k + 1,), None)
        values, ratio = rayleigh_explained_variance(total, sum(a.n for a in ordered))
        order = np.argsort(-values, kind="stable")
        self.basis = self.basis[:, order]
        self.explained = (values[order], None if ratio is None else ratio[order])
        self._record(t, PHASE_VARIANCE, ordered, dropped)
        return self.basis

    def _summed(
        self, answers: Sequence[SiteAnswer], shape: tuple[int, ...], which: int | None
    ) -> tuple[list[SiteAnswer], np.ndarray, list[str]]:
        """The kept answers, ``sum_i n_i H_i`` over them (the sites' unnormalised
        statistics) and why the others were dropped: per-site answers within their bounds
        (:func:`~fedpca.algorithms.sum_bounds.answers_within_bounds`), weighted; or the
        secure sum ``which`` (0: init, 1: power; None: never in a secure sum), decoded by
        group, each group beyond its members' declared records or outlying dropped
        (:func:`~fedpca.algorithms.sum_groups.robust_decode`); a site dropped once stays
        out for the rest of the run (:attr:`distrusted`)."""
        if self.secure is None or which is None:
            ordered = ordered_answers(answers, shape)
            kept, dropped = answers_within_bounds(
                answer_statistic(shape, which), ordered, noise_floor=self.noise_floor,
                distrusted=self.distrusted)
            total = None
        else:
            public, grid = self.secure[which]
            ordered = ordered_answers(answers, (grid.calibration.padded,))
            what = "diag(X^T X)" if which == 0 else "X^T X Q"
            combined = robust_decode(public, ordered, what, distrusted=self.distrusted)
            kept, dropped, total = combined.kept, combined.dropped, combined.total.reshape(shape)
        self.distrusted |= {a.site for a in ordered} - {a.site for a in kept}
        return kept, weighted_sum(kept, weighted=True) if total is None else total, dropped

    def _record(self, t: int, phase: str, ordered: list[SiteAnswer], dropped: list[str]
                ) -> None:
        entry: dict[str, Any] = {
            "round": t,
            "phase": phase,
            "sites": len(ordered),
            "epsilon_spent": max(a.epsilon_spent for a in ordered),
        }
        if dropped:
            entry["dropped"] = dropped
        if self.evaluate is not None:
            entry.update(self.evaluate(self.basis))
        self.history.append(entry)
        self.sites_answered.append([a.site for a in ordered])
        logger.info("DPS-PCA %s round %d: %s", phase, t, entry)


def answer_statistic(shape: tuple[int, ...], which: int | None) -> AnswerStatistic:
    """What bounds a per-site answer of ``shape``: the initial diagonal (``which`` 0), a
    power step (1) or the Rayleigh quotients and trace (``None``), each ``C^2`` per record
    (``sqrt(2) C^2`` for the quotients and trace together)."""
    coordinates = int(np.prod(shape))
    if which is None:
        return AnswerStatistic(lambda c: math.sqrt(2) * c**2, rayleigh_sensitivity, coordinates)
    sensitivity = diagonal_sensitivity if which == 0 else power_step_sensitivity
    return AnswerStatistic(lambda c: c**2, sensitivity, coordinates)


#: The initialisation's and the power steps' secure sums, each with the sites' grid.
DPSSecureSums = tuple[tuple[SecureSum, GridChoice], tuple[SecureSum, GridChoice]]


def secure_sums(policy: DPSPCAPolicy, dim: int, k: int, max_records: int, sites_in_sum: int,
                rotation_seed: int) -> DPSSecureSums:
    """The public secure sums of a discrete-noise run (``diag(X_i^T X_i)`` and
    ``X_i^T X_i Q``, both of norm at most ``n_i C^2``) over ``sites_in_sum`` sites of at most
    ``max_records`` records, and the grids a site with ``policy`` derives from them (each
    calibrated for the run's releases, ``policy.releases``; the ledger checks their actual
    composition)."""
    sums = []
    for which, (sensitivity, length) in enumerate(
        ((diagonal_sensitivity(policy.clip_norm), dim),
         (power_step_sensitivity(policy.clip_norm), dim * k))
    ):
        public = SecureSum(sensitivity=sensitivity, max_records=max_records,
                           norm_per_record=policy.clip_norm**2, dimension=length,
                           sites_in_sum=sites_in_sum, rotation_seed=rotation_seed + which)
        sums.append(agreed_sum(public, policy))
    return sums[0], sums[1]


def privacy_record(policy: RoundsPolicy, secure: DPSSecureSums | None = None
                   ) -> dict[str, Any]:
    """The guarantee a run with ``policy`` gives, for the result and the JSON output
    (:func:`~fedpca.algorithms.privacy_record.privacy_record` of its releases: inside
    ``secure``'s sums, the initialisation's grid unless the run starts from a public basis,
    then the power steps')."""
    grids = () if secure is None else (
        [secure[0][1]] * (policy.releases - policy.rounds) + [secure[1][1]] * policy.rounds)
    return run_privacy(ALGORITHM, policy, grids)


def answer_rounds(server: DPSPCAServer, sites: Sequence[DPSPCASite],
                  secure: DPSSecureSums | None = None,
                  groups: Sequence[Sequence[str]] | None = None) -> None:
    """Every round of ``server``'s run answered in process by ``sites`` (the reference
    runs'): the initialisation (unless the server has an initial basis), the power steps
    and, if the server asks, the Rayleigh quotients; inside ``secure``'s sums if given, one
    per group of ``groups`` (site names) if given."""
    init, power = (None, None) if secure is None else (secure[0][0], secure[1][0])
    for server_round in range(1, server.total_rounds + 1):
        phase, t = server.phase(server_round)
        if phase == PHASE_INIT:
            server.receive_diagonal(in_groups(
                [s.answer(s.release_diagonal(secure=init)) for s in sites], groups))
        elif phase == PHASE_VARIANCE:
            basis = server.basis
            server.receive_rayleigh(t, [s.answer(s.release_rayleigh(basis)) for s in sites])
        else:
            basis = server.basis
            server.receive_power(t, in_groups(
                [s.answer(s.release_power(basis, secure=power)) for s in sites], groups))


def run_dps_pca(
    sites: Sequence[np.ndarray],
    k: int,
    s_hat: int,
    policy: DPSPCAPolicy,
    seed: int | None = None,
    initial_basis: np.ndarray | None = None,
    evaluate: Callable[[np.ndarray], dict[str, float]] | None = None,
    group_size: int = 0,
    site_cls: type[DPSPCASite] = DPSPCASite,
    distrusted: Sequence[str] = (),
) -> PCAResult:
    """Reference DPS-PCA over a list of site arrays (no Flower), same formulas as the app.
    ``group_size``: with a discrete policy, sum the sites in groups of at least that many
    (:func:`~fedpca.algorithms.sum_groups.assign_groups`; 0: one sum); ``site_cls``: the
    sites' class (an experiment's malicious site, :mod:`fedpca.audit.malicious`);
    ``distrusted``: sites the server leaves out from the first round (an experiment's
    comparison: the run as if their group had been dropped at once).

    Site ``i`` is named ``str(i)`` and, with ``seed``, draws its noise from the stream
    ``(seed, i, release)``: a Flower run with the same seed gives the same basis. A policy
    with a public start starts from it (``initial_basis``, if given, must be it).

    Privacy guarantee: each site's transcript is (policy.epsilon, policy.delta)-DP per record.
    """
    start = time.perf_counter()
    site_objs = build_sites(site_cls, sites, policy, seed)
    secure = (secure_sums(policy, site_objs[0].dim, k, max(s.n for s in site_objs),
                          len(site_objs), public_seed(seed)) if policy.discrete else None)
    groups = (assign_groups([s.site for s in site_objs], group_size, policy.secure_min_sites)
              if group_size and secure is not None else None)
    if policy.start is not None and initial_basis is not None:
        policy.start.require_same(initial_basis, "initial_basis")
    server = DPSPCAServer(
        site_objs[0].dim, k, s_hat, policy.rounds, seed=seed,
        initial_basis=None if policy.start is not None else initial_basis,
        evaluate_fn=evaluate, secure=secure,
        explained_variance=policy.explained_variance, start=policy.start,
    )
    server.distrusted = set(distrusted)
    answer_rounds(server, site_objs, secure, groups)
    config = {
        "k": k, "s_hat": s_hat, "sites": len(sites), "samples": sum(s.n for s in site_objs),
        "dim": site_objs[0].dim, "seed": seed, **policy.record(),
        "clipped_rows": sum(s.rows.clipped_rows() for s in site_objs),
        "wall_seconds": time.perf_counter() - start,
    }
    return server.result(privacy_record(policy, secure), config)



def __getattr__(name: str) -> Any:
    """``SitePolicy``, DPS-PCA's policy's former name: :class:`DPSPCAPolicy` (docs/api.md)."""
    if name == "SitePolicy":
        warnings.warn("fedpca.algorithms.dps_pca.SitePolicy is now DPSPCAPolicy (every "
                      "algorithm's policy is named for it; docs/api.md)", DeprecationWarning,
                      stacklevel=2)
        return DPSPCAPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

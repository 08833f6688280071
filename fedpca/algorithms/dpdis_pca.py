"""DPdisPCA: one-round distributed private PCA from partial square roots.

Paper: Imtiaz, Sarwate, "Differentially-private Distributed Principal Component Analysis"
(slides, Rutgers, 2018), read as follows:

1. site ``s``: ``A_s = X_s^T X_s / N_s``; ``A^_s = A_s + E`` with ``E`` symmetric, its upper
   triangle (diagonal included) i.i.d. ``N(0, tau^2)`` and the lower triangle mirrored;
   ``eigh(A^_s)``; keep the ``R`` largest eigenvalues (negative ones clipped to 0) and their
   vectors; send ``P_s = U_R diag(sqrt(lambda_R))`` (``d x R``, default ``R = min(2K, d)``);
2. server: ``A_c = sum_s w_s P_s P_s^T`` with ``w_s = 1/S`` (``"uniform"``, the slides) or
   ``N_s / N`` (``"samples"``); output the top-``K`` eigenvectors of ``A_c``, computed as the
   left singular vectors of the stacked ``[sqrt(w_1) P_1 ... sqrt(w_S) P_S]`` when
   ``S R < d`` (``A_c`` is never formed) and by ``eigh`` of the ``d x d`` ``A_c`` otherwise
   (this linear algebra: :mod:`fedpca.algorithms.dpdis_factors`).

Variant ``"full"`` (the slides' comparison "sending A^_s"): each site sends ``A^_s`` itself
and the server takes the top-``K`` eigenvectors of ``sum_s w_s A^_s``; same privacy,
``d / R`` times the traffic.

Privacy guarantee (per site, unit: one record at one site, replace-one): a site makes exactly
one release, the upper triangle of ``A_s`` plus Gaussian noise of standard deviation
``tau = z * sqrt(2) C^2 / N_s`` (the replace-one L2 sensitivity of that upper triangle; the
slides' ``1/N_s`` is the add/remove-one figure and under-states it by ``sqrt(2)``), with
``z`` from :func:`fedpca.dp.calibration.calibrate_gaussian` for one release: the analytic
Gaussian mechanism (PLD accountant) by default, the classic ``sqrt(2 ln(1.25/delta)) / eps``
(eps < 1 only) in ``"paper"`` mode. It is (epsilon, delta)-DP; ``P_s`` and everything the
server computes are post-processing. ``N_s`` is public.

Computation (changes no law, no guarantee): a site never eigendecomposes the whole
``d x d`` ``A^_s`` to keep ``R`` pairs. It draws ``E`` in blocks of rows (bit for bit the
matrix of :func:`fedpca.dp.mechanisms.symmetric_gaussian`), keeps ``A^_s`` factored as
``X_s^T X_s / N_s + E`` and takes its top ``R`` eigenpairs by Lanczos on
``v -> X_s^T (X_s v) / N_s + E v`` when ``d >= 1000`` and ``R`` is small, by a dense ``eigh``
otherwise (:func:`fedpca.linalg.subspace.eigensolver_for`; tolerance
:data:`fedpca.linalg.subspace.LANCZOS_TOL`, dense fallback with a logged warning if Lanczos does not
converge). Memory: ``d^2`` floats for ``E`` plus the Krylov basis (``steps x d``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fedpca.algorithms.dpdis_factors import (
    merged_factor_basis,
    merged_full_matrix,
    partial_square_root,
    stacked_factors,
)
from fedpca.algorithms.explained_variance import along_basis, choose_k
from fedpca.algorithms.privacy_record import privacy_record
from fedpca.algorithms.secure_sum import SecureSum, agreed_sum, public_seed
from fedpca.algorithms.server import ServerRecord, ordered_answers
from fedpca.algorithms.sum_bounds import AnswerStatistic, answers_within_bounds
from fedpca.algorithms.sum_groups import assign_groups, in_groups, robust_decode
from fedpca.algorithms.site import (
    PrivateSite,
    SingleReleasePolicy,
    SiteAnswer,
    build_sites,
)
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.linalg.subspace import (
    GramPlusSymmetric,
    energy_ratio,
    top_eigenvectors,
    triangle_size,
    unpack_symmetric,
)
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.dp.exact_noise import float_error
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import triangle_indices, upper_triangle_sensitivity
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import (
    require_choice,
    require_ordered,
    require_positive_int,
)
from fedpca.results import PCAResult

logger = logging.getLogger(__name__)

ALGORITHM = "dpdis-pca"
MECHANISM = "dpdis-pca/second-moment"
#: A site sends ``P_s`` (``d x R``) or, for comparison, the whole noisy ``A^_s`` (``d x d``).
VARIANT_FACTOR = "factor"
VARIANT_FULL = "full"
#: Sites send their second moment ``X_s^T X_s`` (upper triangle) as distributed discrete
#: Gaussian messages; the server decodes their secure sum: Analyze Gauss on the union.
VARIANT_SECURE = "secure-sum"
VARIANTS = (VARIANT_FACTOR, VARIANT_FULL, VARIANT_SECURE)
#: ``w_s = 1/S`` (the slides) or ``w_s = N_s / N``.
WEIGHTING_UNIFORM = "uniform"
WEIGHTING_SAMPLES = "samples"
WEIGHTINGS = (WEIGHTING_UNIFORM, WEIGHTING_SAMPLES)
#: Every site releases once: the whole budget goes to ``A^_s``.
RELEASES = 1
#: Bytes per float64 entry sent.
FLOAT_BYTES = 8


def second_moment_sensitivity(clip_norm: float, n: int) -> float:
    """Replace-one L2 sensitivity of the upper triangle of ``A_s = X_s^T X_s / n``:
    ``sqrt(2) C^2 / n``."""
    return upper_triangle_sensitivity(clip_norm) / n


def default_r(k: int, dim: int) -> int:
    """The slides' intermediate dimension ``R = 2K``, capped at ``d``."""
    return min(2 * k, dim)


def message_bytes(dim: int, r: int | None) -> int:
    """Bytes of one site's answer: ``d R`` floats (factor), ``d d`` (full, ``r=None``)."""
    return dim * (dim if r is None else r) * FLOAT_BYTES


def merge_weights(sizes: Sequence[int], weighting: str) -> np.ndarray:
    """``w_s``: ``1/S`` for ``"uniform"``, ``N_s / N`` for ``"samples"``."""
    require_choice(weighting, "weighting", WEIGHTINGS)
    sizes = np.asarray(sizes, dtype=np.float64)
    if weighting == WEIGHTING_UNIFORM:
        return np.full(sizes.shape, 1.0 / sizes.size)
    return sizes / sizes.sum()


def pooled_second_moment(sites: Sequence[np.ndarray]) -> np.ndarray:
    """``A = sum_s X_s^T X_s / N`` of the pooled records: the non-private yardstick ``q_o``
    is measured against (evaluation in simulation only; it sees every site's data)."""
    total = sum(X.T @ X for X in sites)
    return total / sum(X.shape[0] for X in sites)


@dataclass(frozen=True)
class DPdisPCAPolicy(SingleReleasePolicy):
    """A DPdisPCA site's own privacy settings for its single release of ``A^_s`` (see
    :class:`SingleReleasePolicy`); the server cannot change them, only add noise.

    ``secure_min_sites = M``: the site answers only the ``secure-sum`` variant, its second
    moment as a distributed discrete Gaussian message whose noise makes every sum of at
    least ``M`` sites (epsilon, delta)-DP (:mod:`fedpca.algorithms.secure_sum`).
    """

    secure_min_sites: int | None = None

    @property
    def discrete(self) -> bool:
        """A secure-sum site sends distributed discrete Gaussian messages."""
        return self.secure_min_sites is not None


class DPdisPCASite(PrivateSite):
    """One data holder in DPdisPCA: validates, clips, calibrates, accounts and releases once.

    Constructed like :class:`~fedpca.algorithms.site.PrivateSite`, with a
    :class:`DPdisPCAPolicy`.
    """

    CONFIG_KEYS = frozenset({"variant", "dim", "r", "min_noise_multiplier"})

    def respond(self, arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> np.ndarray:
        """The one request (no arrays; its ``d`` must be this site's; the site checks ``r``):
        ``P_s``, ``A^_s`` or the secure-sum message (:meth:`release`)."""
        if arrays:
            raise self.refuse(f"the request must carry no arrays, got {len(arrays)}")
        self.require_dim(config.get("dim"))
        return self.release(config.get("variant"), config.get("r"),
                            config.get("min_noise_multiplier"), secure=self.requested_sum(config))

    def release(
        self, variant: str, r: object = None, min_noise_multiplier: float | None = None,
        secure: SecureSum | None = None,
    ) -> np.ndarray:
        """``P_s`` (``variant="factor"``, ``r`` columns), ``A^_s`` (``"full"``, no ``r``) or
        the secure-sum message of ``X_s^T X_s`` (``"secure-sum"``, the sum's public
        parameters ``secure``; only from a site whose policy sets ``secure_min_sites``).

        The request is checked before anything is drawn or charged: a malformed one, or one
        whose answer is larger than the site's limits allow, raises
        :class:`InvalidRequestError` and nothing is released; the answer (the eigensolver
        of ``P_s`` included) is computed before the charge.
        """
        if (variant == VARIANT_SECURE) != (self.secure_min_sites is not None):
            raise InvalidRequestError(
                f"{self.site}: refused: this site answers "
                + ("only inside a secure sum (variant secure-sum)"
                   if self.secure_min_sites is not None else "with its own noise only")
                + f", and the request asks for variant {variant!r}"
            )
        if variant == VARIANT_SECURE:
            if secure is None or secure.dimension != triangle_size(self.dim):
                raise InvalidRequestError(
                    f"{self.site}: refused: a secure-sum request must describe the sum of "
                    f"the {triangle_size(self.dim)} upper-triangle entries of X^T X"
                )
            self.require_answer_size((triangle_size(self.dim),))
            statistic = (self.X.T @ self.X)[triangle_indices(np.triu_indices, self.dim)]
            return self.discrete_release(
                MECHANISM, statistic, secure,
                sensitivity=upper_triangle_sensitivity(self.policy.clip_norm),
                norm_per_record=self.policy.clip_norm**2,
            )
        if variant == VARIANT_FACTOR:
            is_int = isinstance(r, (int, np.integer)) and not isinstance(r, bool)
            if not (is_int and 1 <= r <= self.dim):
                raise InvalidRequestError(
                    f"{self.site}: refused: r (the columns of P_s) must be an integer in "
                    f"1..{self.dim} (this site's d), got {r!r}"
                )
            self.require_answer_size((self.dim, int(r)))
            return self.publish_second_moment(
                lambda A_hat: partial_square_root(A_hat, int(r)), min_noise_multiplier
            )
        if variant == VARIANT_FULL:
            if r is not None:
                raise InvalidRequestError(
                    f"{self.site}: refused: the full variant sends A^_s and takes no r, got {r!r}"
                )
            return self.noisy_second_moment(min_noise_multiplier)
        raise InvalidRequestError(
            f"{self.site}: refused: unknown variant {variant!r}; expected one of {VARIANTS}"
        )

    def noisy_second_moment(self, min_noise_multiplier: float | None = None) -> np.ndarray:
        """``A^_s = X^T X / N_s + E`` with symmetric Gaussian ``E`` (the one accounted
        release) as a ``d x d`` array."""
        self.require_answer_size((self.dim, self.dim))
        return self.publish_second_moment(GramPlusSymmetric.dense, min_noise_multiplier)

    def publish_second_moment(
        self, answer: Callable[[GramPlusSymmetric], np.ndarray],
        min_noise_multiplier: float | None = None,
    ) -> np.ndarray:
        """``answer(A^_s)`` for ``A^_s = X^T X / N_s + E`` kept factored: the one accounted
        release, charged once ``answer`` has returned (:meth:`publish`).

        Privacy guarantee: charges the site's single release of the upper triangle of
        ``X^T X / N_s`` with Gaussian noise ``tau`` (replace-one sensitivity
        ``sqrt(2) C^2 / N_s``); (epsilon, delta)-DP per record of this site. The factored
        matrix holds the site's records (``X``): only ``A^_s`` itself, or what ``answer``
        computes from it alone (``P_s``), may leave the site.
        """
        sensitivity = second_moment_sensitivity(self.policy.clip_norm, self.n)
        tau = self.sigma(sensitivity, min_noise_multiplier)
        if self.exact:  # grid points: A^_s is formed (its factors would leak low bits)
            return self.noisy_symmetric_release(
                MECHANISM, self.X.T @ self.X / self.n, sensitivity, tau,
                error=float_error(self.clip_norm**2, self.n + 1),
                then=lambda noisy: answer(GramPlusSymmetric(np.zeros((0, self.dim)), 1.0, noisy)),
            )
        return self.publish(
            Release(MECHANISM, sensitivity, tau, (self.dim, self.dim)),
            lambda index: answer(GramPlusSymmetric(
                self.X, float(self.n), self.noise.symmetric(index, tau, self.dim))),
        )


#: Why DPdisPCA's factor variant cannot choose k.
CHOOSE_K_FACTOR = (
    "choosing k from the explained variance needs the whole noisy matrix: the factor "
    "variant's server holds each site's R leading directions only; use the full or "
    "secure-sum variant, or give k")


class DPdisPCAServer(ServerRecord):
    """The aggregator of DPdisPCA: one request, one merge.

    Args:
        dim: number of features ``d``.
        k: number of components ``K`` (``1 <= K <= d``).
        r: columns of each ``P_s`` (default ``min(2K, d)``); ignored by the full variant.
        weighting: ``"uniform"`` (``1/S``, the slides) or ``"samples"`` (``N_s / N``).
        variant: ``"factor"`` (sites send ``P_s``), ``"full"`` (sites send ``A^_s``) or
            ``"secure-sum"`` (sites send discrete Gaussian messages of ``X_s^T X_s``; the
            top-``K`` eigenvectors of their decoded sum, Analyze Gauss on the union;
            ``weighting`` does not apply).
        evaluation: optional ``d x d`` matrix (e.g. the pooled second moment, in simulation)
            against which the history records ``energy_ratio = q(V) / q(V_K)``.
        secure: the sum's public parameters and the sites' ``grid`` (secure-sum only: the
            grid every site derives from its policy, which the server must share to decode).
        variance: choose the number of components privately: the smallest ``K' <= K``
            whose cumulative DP explained-variance ratio reaches this share
            (:func:`~fedpca.algorithms.explained_variance.choose_k`, post-processing of the
            noisy matrix); full and secure-sum variants only.
    """

    algorithm = ALGORITHM

    def __init__(
        self,
        dim: int,
        k: int,
        r: int | None = None,
        weighting: str = WEIGHTING_UNIFORM,
        variant: str = VARIANT_FACTOR,
        evaluation: np.ndarray | None = None,
        secure: tuple[SecureSum, GridChoice] | None = None,
        variance: float | None = None,
    ) -> None:
        self.dim = require_positive_int(dim, "dim")
        self.k = require_positive_int(k, "k")
        if variance is not None and variant == VARIANT_FACTOR:
            raise ConfigurationError(CHOOSE_K_FACTOR)
        self.variance = variance
        require_ordered({"k": self.k, "dim": self.dim})
        self.variant = require_choice(variant, "variant", VARIANTS)
        self.weighting = require_choice(weighting, "weighting", WEIGHTINGS)
        self.r: int | None = None
        if variant == VARIANT_FACTOR:
            self.r = default_r(self.k, self.dim) if r is None else require_positive_int(r, "r")
            require_ordered({"r": self.r, "dim": self.dim})
        if evaluation is not None and np.shape(evaluation) != (self.dim, self.dim):
            raise ConfigurationError(
                f"evaluation must be a {self.dim} x {self.dim} matrix, got shape "
                f"{np.shape(evaluation)}"
            )
        if (variant == VARIANT_SECURE) != (secure is not None):
            raise ConfigurationError(
                "the secure-sum variant needs the sum's public parameters and grid (secure), "
                "and only it takes them"
            )
        self.secure = secure
        self.evaluation = evaluation
        #: The noisy matrix the last basis came from (the stacked factor ``M`` for the
        #: factor variant): post-processing of the releases, for :meth:`spectrum`.
        self.released: np.ndarray | None = None
        self.start_record()

    @property
    def answer_shape(self) -> tuple[int, ...]:
        """Shape every site's answer must have."""
        if self.secure is not None:
            return (self.secure[1].calibration.padded,)
        return (self.dim, self.dim if self.r is None else self.r)

    @property
    def bytes_per_site(self) -> int:
        """Bytes each site sends (``d R 8``, ``d d 8`` for the full variant, ``D 8`` for a
        secure-sum message of padded length ``D``)."""
        if self.secure is not None:
            return self.answer_shape[0] * FLOAT_BYTES
        return message_bytes(self.dim, self.r)

    label = "DPdisPCA"

    def round_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        """The one round: no arrays; the variant, ``d`` and ``r`` (and the secure sum)."""
        return [], self.request()

    def round_sum(self, server_round: int) -> SecureSum | None:
        """The one round's secure sum (secure-sum variant)."""
        return None if self.secure is None else self.secure[0]

    def round_result(self, server_round: int, answers: Sequence[SiteAnswer]
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """The top-``K`` basis of ``A_c``."""
        basis = self.receive(answers)
        return basis, {k: v for k, v in self.history[-1].items() if k != "phase"}

    @property
    def secure_modulus(self) -> int | None:
        """The residues' modulus of the secure-sum variant."""
        return None if self.secure is None else self.secure[1].modulus

    def result_extras(self) -> dict[str, Any]:
        """The ``r`` sites were asked for and the bytes each one sent."""
        return {"r": self.r, "bytes_per_site": self.bytes_per_site}

    def describe(self) -> str:
        """``dim``, ``k``, ``r``, the weighting and the variant."""
        return (f"dim={self.dim}, k={self.k}, r={self.r}, weighting={self.weighting!r}, "
                f"variant={self.variant!r}")

    def answer_statistic(self) -> AnswerStatistic:
        """What bounds a per-site answer: ``A^_s`` (``X^T X / N_s``, trace at most ``C^2``,
        symmetric noise on the upper triangle) or its factor ``P_s`` of ``r`` columns."""
        return AnswerStatistic(lambda c: c**2, upper_triangle_sensitivity,
                               triangle_size(self.dim), mirrored=True,
                               rank=self.r if self.variant == VARIANT_FACTOR else None)

    def request(self) -> dict[str, Any]:
        """What every site is asked: the variant, ``d`` (to check) and ``r`` (factor only)."""
        config: dict[str, Any] = {"variant": self.variant, "dim": self.dim}
        if self.r is not None:
            config["r"] = self.r
        if self.secure is not None:  # the sum the sites' residues go into
            config.update(self.secure[0].to_config())
        return config

    def receive(self, answers: Sequence[SiteAnswer]) -> np.ndarray:
        """Merge the sites' answers into the top-``K`` basis of ``A_c``: the decoded secure
        sum over its kept groups (:func:`~fedpca.algorithms.sum_groups.robust_decode`), or
        the per-site answers within their bounds
        (:func:`~fedpca.algorithms.sum_bounds.answers_within_bounds`)."""
        ordered = ordered_answers(answers, self.answer_shape)
        if self.secure is not None:
            combined = robust_decode(self.secure[0], ordered, "X^T X",
                                     distrusted=self.distrusted)
            ordered, dropped = combined.kept, combined.dropped
            self.released = unpack_symmetric(combined.total, self.dim) / sum(a.n for a in ordered)
            self.basis = self.top_basis()
        else:
            ordered, dropped = answers_within_bounds(self.answer_statistic(), ordered,
                                                     noise_floor=self.noise_floor,
                                                     distrusted=self.distrusted)
            weights = merge_weights([a.n for a in ordered], self.weighting)
            values = [a.value for a in ordered]
            if self.variant == VARIANT_FACTOR:
                self.basis = merged_factor_basis(values, weights, self.k)
                self.released = stacked_factors(values, weights)
            else:
                self.released = merged_full_matrix(values, weights)
                self.basis = self.top_basis()
        self.explained = self.explained_variance()
        entry: dict[str, Any] = {
            "round": 1,
            "phase": self.variant,
            "sites": len(ordered),
            "epsilon_spent": max(a.epsilon_spent for a in ordered),
        }
        if dropped:
            entry["dropped"] = dropped
        if self.evaluation is not None:
            entry["energy_ratio"] = energy_ratio(self.basis, self.evaluation)
        self.history.append(entry)
        self.sites_answered.append([a.site for a in ordered])
        logger.info("DPdisPCA: %s", entry)
        return self.basis

    def top_basis(self) -> np.ndarray:
        """The top-``K`` eigenvectors of the whole noisy matrix; with ``variance``, ``K``
        first lowered to the smallest that explains that share (post-processing)."""
        if self.variance is not None:
            chosen = choose_k(self.spectrum(), self.variance)
            logger.info("DPdisPCA: k=%d explains %.3g of the DP variance (at most %d)",
                        chosen, self.variance, self.k)
            self.k = min(self.k, chosen)
        return top_eigenvectors(self.released, self.k)

    def spectrum(self) -> np.ndarray:
        """Every eigenvalue (``d``, descending) of the noisy second moment the basis was
        taken from, per record: the decoded sum over ``N`` (secure-sum), ``sum_s w_s A^_s``
        (full), ``A_c = M M^T`` (factor: it holds only each site's ``R`` leading directions,
        so it is not the whole second moment and its other eigenvalues are 0).
        Post-processing of the sites' releases."""
        if self.released is None:
            raise ConfigurationError("no round has been received yet")
        if self.variant != VARIANT_FACTOR:
            return np.linalg.eigvalsh(self.released)[::-1]
        import scipy.linalg  # here, not above: a site's ClientApp process needs none of it

        values = scipy.linalg.svdvals(self.released, check_finite=False) ** 2
        return np.concatenate([values, np.zeros(max(self.dim - values.size, 0))])[:self.dim]

    def explained_variance(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The variance per record along each component and its ratio over the noisy
        trace (:func:`~fedpca.algorithms.explained_variance.along_basis`): of the summed
        noisy second moment (full, secure-sum) or of ``A_c = M M^T`` (factor: no ratio, the
        server holds each site's ``R`` leading directions only). Post-processing."""
        M = self.released
        if self.variant == VARIANT_FACTOR:
            return along_basis(self.basis, M @ (M.T @ self.basis), None)
        return along_basis(self.basis, M @ self.basis, float(np.trace(M)))

    def record_energy_ratio(self, evaluation: np.ndarray) -> None:
        """Record ``energy_ratio`` against ``evaluation`` (``d x d``) in the last history
        entry: for an evaluation matrix known only after the round."""
        self.history[-1]["energy_ratio"] = energy_ratio(self.basis, evaluation)


def secure_sum_for(
    policy: DPdisPCAPolicy, dim: int, max_records: int, sites_in_sum: int, rotation_seed: int
) -> tuple[SecureSum, GridChoice]:
    """The public parameters of the secure sum of ``sites_in_sum`` sites' second moments
    (each of at most ``max_records`` records) and the grid a site with ``policy`` derives
    from them."""
    secure = SecureSum(
        sensitivity=upper_triangle_sensitivity(policy.clip_norm), max_records=max_records,
        norm_per_record=policy.clip_norm**2, dimension=triangle_size(dim),
        sites_in_sum=sites_in_sum, rotation_seed=rotation_seed,
    )
    return agreed_sum(secure, policy)


def answer_round(server: DPdisPCAServer, sites: Sequence[DPdisPCASite],
                 groups: Sequence[Sequence[str]] | None = None) -> np.ndarray:
    """The one round in memory: every site answers the server's request (summed per group
    of ``groups``, site names, if given), the server merges (returns the basis)."""
    request = server.request()
    secure = None if server.secure is None else server.secure[0]
    return server.receive(in_groups([
        s.answer(s.release(server.variant, request.get("r"), secure=secure)) for s in sites
    ], groups))


def run_dpdis_pca(
    sites: Sequence[np.ndarray | SiteData],
    k: int,
    r: int | None = None,
    policy: DPdisPCAPolicy | None = None,
    seed: int | None = None,
    weighting: str = WEIGHTING_UNIFORM,
    variant: str = VARIANT_FACTOR,
    evaluation: np.ndarray | None = None,
    variance: float | None = None,
    group_size: int = 0,
    site_cls: type[DPdisPCASite] | None = None,
    distrusted: Sequence[str] = (),
) -> PCAResult:
    """Reference DPdisPCA over a list of site arrays (no Flower), same formulas as the app.
    ``variance``: ``k`` is then the most components, the run keeps the fewest that
    explain that share of the DP variance (:class:`DPdisPCAServer`). ``group_size``: with
    the secure-sum variant, sum the sites in groups of at least that many
    (:func:`~fedpca.algorithms.sum_groups.assign_groups`; 0: one sum); ``site_cls``: the
    sites' class (an experiment's malicious site, :mod:`fedpca.audit.malicious`);
    ``distrusted``: sites the server leaves out (an experiment's comparison: the run as if
    their group had been dropped).

    Site ``i`` is named ``str(i)`` and, with ``seed``, draws its noise from the stream
    ``(seed, i, 0)``: a Flower run with the same seed gives the same basis. Run it on one
    site's data for the local-only baseline.

    Privacy guarantee: each site's single release is (policy.epsilon, policy.delta)-DP per
    record of that site (replace-one); with ``variant="secure-sum"`` (a policy with
    ``secure_min_sites``) every sum of at least ``M`` sites' messages is.
    """
    start = time.perf_counter()
    policy = policy or DPdisPCAPolicy()
    site_objs = build_sites(site_cls or DPdisPCASite, sites, policy, seed)
    dim, sizes = site_objs[0].dim, [s.n for s in site_objs]
    secure = (secure_sum_for(policy, dim, max(sizes), len(sizes), public_seed(seed))
              if variant == VARIANT_SECURE else None)
    groups = (assign_groups([s.site for s in site_objs], group_size, policy.secure_min_sites)
              if group_size and secure is not None else None)
    server = DPdisPCAServer(dim, k, r, weighting, variant, evaluation, secure, variance)
    server.distrusted = set(distrusted)
    answer_round(server, site_objs, groups)
    config = {
        "k": server.k, "variance": variance, "r": server.r, "weighting": weighting,
        "variant": variant,
        "sites": len(site_objs), "samples": sum(s.n for s in site_objs),
        "dim": server.dim, "seed": seed, **asdict(policy),
        "bytes_per_site": server.bytes_per_site,
        "clipped_rows": sum(s.clip_report.clipped_rows for s in site_objs),
        "wall_seconds": time.perf_counter() - start,
    }
    grids = () if secure is None else [secure[1]]
    return server.result(privacy_record(ALGORITHM, policy, grids, sizes), config)

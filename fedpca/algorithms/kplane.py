"""SuLQ k-plane: federated private subspace clustering by noisy per-cluster second moments.

Paper: Wang, Wang, Singh, "Differentially Private Subspace Clustering", NIPS 2015
(https://papers.nips.cc/paper/5991), Sec. 5: the baseline "k-plane [Bradley & Mangasarian
2000] with the sample covariance perturbed via the SuLQ framework [Blum et al. 2005]", read
as follows:

0. the server draws ``k`` random ``q``-dimensional subspaces from its *public* seed
   (orthonormalised Gaussian ``d x q`` matrices; no privacy budget), or takes given public
   bases;
1. for ``t = 1..T`` it sends the ``k`` bases; site ``i`` assigns every record to its nearest
   subspace (``d(x, S) = ||x - U U^T x||``) and releases ONE array of shape
   ``(k, d (d+1)/2 + 1)``: row ``l`` is the upper triangle (diagonal included) of
   ``S_il = sum_{x in cluster l} x x^T`` followed by ``C^2 n_il``, plus i.i.d.
   ``N(0, sigma^2)`` on every entry;
2. the server sums the sites' arrays and sets cluster ``l``'s basis to the top-``q``
   eigenvectors of the symmetric matrix unpacked from ``sum_i S_il`` (+ noise). The noisy
   counts ``sum_i n_il`` (divided by ``C^2``) are only reported, clamped at 0; a cluster left
   (nearly) empty gets the eigenvectors of (nearly) pure symmetric Gaussian noise, i.e. a
   uniformly random subspace: k-plane's usual restart, at no cost.

Privacy guarantee (per site, unit: one record at one site, replace-one; the record may change
cluster): replacing ``x`` (cluster ``a``) by ``y`` (cluster ``b``), both of norm ``<= C``,
changes the whole array by at most ``D = 2 C^2`` in L2 norm
(:func:`cluster_moments_sensitivity`): ``sqrt(2) C^2`` if ``a = b`` (one upper triangle
changes), else ``sqrt(||x||^4 + ||y||^4 + (C^2)^2 + (C^2)^2) <= 2 C^2`` (two triangles and
two counts), attained by ``x = C e_1``, ``y = C e_2`` in different clusters. Each of the ``T``
releases adds ``sigma = z D`` with ``z`` from :func:`fedpca.dp.calibration.calibrate_gaussian`
(``releases = T``), so a site's whole transcript is (epsilon, delta)-DP. Assignments never
leave the site; the public initialisation and everything the server computes are
post-processing.

Secure sums (a policy with ``secure_min_sites = M``): the site sends its whole message,
flattened, as a distributed discrete Gaussian message (:mod:`fedpca.algorithms.secure_sum`)
whose noise makes every sum of at least ``M`` sites (epsilon, delta)-DP over the ``T``
releases; the same sensitivity ``2 C^2`` applies, and each record adds at most
``sqrt(C^4 + C^4) = sqrt(2) C^2`` to the message's L2 norm (its upper triangle of ``x x^T``,
of norm ``<= ||x||^2``, and ``C^2`` in its count), which bounds the norm for the wrap
analysis. The server decodes the sum of all sites' per-cluster sums and counts.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from fedpca.algorithms.privacy_record import privacy_record
from fedpca.algorithms.secure_sum import SecureSum, agreed_sum, public_seed
from fedpca.algorithms.server import ServerRecord, ordered_answers, weighted_sum
from fedpca.algorithms.sum_bounds import checked_decode
from fedpca.algorithms.site import (
    PrivateSite,
    RoundsPolicy,
    SiteAnswer,
    SitePrivacyPolicy,
    build_sites,
)
from fedpca.errors import ConfigurationError, InvalidRequestError, ParameterError
from fedpca.linalg.basis import validate_basis
from fedpca.linalg.subspace import (
    assign_to_subspaces,
    cluster_scatter,
    random_subspaces,
    top_eigenvectors,
    triangle_size,
    unpack_symmetric,
)
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.dp.exact_noise import float_error
from fedpca.dp.mechanisms import triangle_indices, upper_triangle_sensitivity
from fedpca.dp.validation import require_finite_positive, require_positive_int
from fedpca.results import ClusteringResult

logger = logging.getLogger(__name__)

ALGORITHM = "sulq-kplane"
MECHANISM = "sulq-kplane/cluster-moments"
#: ``accounting="paper"``: basic composition of ``T`` classic Gaussian mechanisms,
#: ``z = T/eps sqrt(2 ln(2T/delta))`` (the SuLQ framework's; paper 003's appendix E with its
#: exact constants is not in the project's copy).
PAPER_RULE = "dps-pca"
#: Stream key that separates the server's public initialisation from any site's noise.
INIT_STREAM = 0xC1A5


def count_weight(clip_norm: float) -> float:
    """``C^2``: the factor a cluster's count is released with, so counts and second moments
    share the per-record scale ``C^2`` and the joint sensitivity is ``2 C^2``."""
    return clip_norm**2


def cluster_moments_sensitivity(clip_norm: float) -> float:
    """Replace-one L2 sensitivity of a site's whole k-plane message: ``2 C^2``.

    The larger of ``sqrt(2) C^2`` (the record stays in its cluster: one upper triangle
    changes) and ``sqrt(C^4 + C^4 + 2 (C^2)^2)`` (it changes cluster: two upper triangles of
    ``x x^T``, each of norm ``<= ||x||^2 <= C^2``, and two counts weighted ``C^2``).
    """
    same_cluster = upper_triangle_sensitivity(clip_norm)
    switch = math.sqrt(2 * clip_norm**4 + 2 * count_weight(clip_norm) ** 2)
    return max(same_cluster, switch)


def message_norm_per_record(clip_norm: float) -> float:
    """How much one record adds, at most, to the L2 norm of a site's message:
    ``sqrt(2) C^2`` (its ``x x^T`` upper triangle and its weighted count)."""
    return math.sqrt(clip_norm**4 + count_weight(clip_norm) ** 2)


def message_shape(clusters: int, dim: int) -> tuple[int, int]:
    """Shape of a site's message: one row per cluster, upper triangle then count."""
    return clusters, triangle_size(dim) + 1


def cluster_moments(X: np.ndarray, bases: Sequence[np.ndarray], clip_norm: float) -> np.ndarray:
    """The noiseless message: per cluster of the nearest-subspace assignment, the upper
    triangle of ``sum x x^T`` and ``C^2`` times the count (see :func:`message_shape`)."""
    clusters = len(bases)
    labels = assign_to_subspaces(X, bases)
    rows, cols = triangle_indices(np.triu_indices, X.shape[1])
    counts = np.bincount(labels, minlength=clusters)
    return np.column_stack([
        cluster_scatter(X, labels, clusters)[:, rows, cols], count_weight(clip_norm) * counts
    ])


def require_subspace_dim(subspace_dim: object, dim: int) -> int:
    """``q`` if it is an integer with ``1 <= q < d``, else ConfigurationError (a
    ``d``-dimensional subspace contains every point: clustering would be meaningless)."""
    q = require_positive_int(subspace_dim, "subspace_dim")
    if q >= dim:
        raise ParameterError(
            "{subspace_dim} must be below {dim}", {"subspace_dim": q, "dim": dim},
            hint=f"a {dim}-dimensional subspace contains every point; choose "
                 "{subspace_dim} < {dim}",
        )
    return q


def validate_bases(
    bases: object, dim: int, clusters: int | None = None, site: str = "site"
) -> list[np.ndarray]:
    """``bases`` as a list of float64 orthonormal ``dim x q`` arrays, or InvalidRequestError
    (wrong container, count other than ``clusters``, shape, non-finite, not orthonormal)."""
    if isinstance(bases, (str, bytes)) or not isinstance(bases, (Sequence, np.ndarray)):
        raise InvalidRequestError(
            f"{site}: refused: expected a sequence of subspace bases, got {type(bases).__name__}"
        )
    if len(bases) == 0 or (clusters is not None and len(bases) != clusters):
        raise InvalidRequestError(
            f"{site}: refused: got {len(bases)} subspace bases, expected "
            f"{clusters if clusters is not None else 'at least 1'}"
        )
    return [validate_basis(U, dim, site=f"{site} (basis {j})") for j, U in enumerate(bases)]


class KPlanePolicy(RoundsPolicy):
    """A site's own privacy settings for SuLQ k-plane (:class:`RoundsPolicy`): ``rounds``
    releases (the initialisation is public); ``accounting="paper"`` is basic composition
    (see :data:`PAPER_RULE`). With ``secure_min_sites = M`` the site answers only inside
    secure sums of at least ``M`` sites, with distributed discrete Gaussian noise."""

    PAPER_RULE = PAPER_RULE

    @property
    def discrete(self) -> bool:
        """A secure-sum site sends distributed discrete Gaussian messages."""
        return self.secure_min_sites is not None

    @property
    def sensitivity(self) -> float:
        """Replace-one L2 sensitivity of one release: ``2 C^2``."""
        return cluster_moments_sensitivity(self.clip_norm)


class KPlaneSite(PrivateSite):
    """One data holder in SuLQ k-plane: validates, clips, assigns, accounts and releases.

    Constructed like :class:`~fedpca.algorithms.site.PrivateSite`, with a
    :class:`KPlanePolicy` (or, in a centred run, the algorithm's share of a
    :class:`~fedpca.algorithms.centring.CentredPolicy`: the sensitivity ``2 C^2`` comes from
    the policy's clip norm alone); the records' clusters are computed here and never leave.
    """

    CONFIG_KEYS = frozenset({"round", "dim", "clusters", "min_noise_multiplier"})

    def respond(self, arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> np.ndarray:
        """The noisy ``(k, d (d+1)/2 + 1)`` message for the ``k`` bases in ``arrays``
        (``config["clusters"] = k``, ``config["dim"] = d``)."""
        self.require_dim(config.get("dim"))
        clusters = config.get("clusters")
        if isinstance(clusters, bool) or not isinstance(clusters, int) or clusters < 1:
            raise self.refuse(f"config 'clusters' must be a positive integer, got {clusters!r}")
        if len(arrays) != clusters:
            raise self.refuse(
                f"the request announces {clusters} clusters but carries {len(arrays)} bases")
        return self.release_clusters(arrays, config.get("min_noise_multiplier"),
                                     secure=self.requested_sum(config))

    def release_clusters(
        self, bases: Sequence[np.ndarray], min_noise_multiplier: float | None = None,
        secure: SecureSum | None = None,
    ) -> np.ndarray:
        """The noisy per-cluster moments for these ``k`` bases (one accounted release); with
        a ``secure_min_sites`` policy, their secure-sum message for ``secure``.

        Refuses (InvalidRequestError, nothing released or charged) more clusters or a larger
        message than the site's limits allow, before anything is allocated for the answer,
        then malformed bases.
        """
        self.limits.require_clusters(len(bases), self.site)
        self.require_answer_size(message_shape(len(bases), self.dim))
        bases = validate_bases(bases, self.dim, site=self.site)
        sensitivity = cluster_moments_sensitivity(self.clip_norm)
        if self.discrete:
            return self.discrete_release(
                MECHANISM, cluster_moments(self.X, bases, self.clip_norm).ravel(),
                self.discrete_request(secure, min_noise_multiplier),
                sensitivity=sensitivity,
                norm_per_record=message_norm_per_record(self.clip_norm),
            )
        return self.noisy_release(
            MECHANISM, cluster_moments(self.X, bases, self.clip_norm), sensitivity,
            min_noise_multiplier,
            error=float_error(self.n * message_norm_per_record(self.clip_norm),
                              self.n + self.dim),
        )


class KPlaneServer(ServerRecord):
    """The coordinator of SuLQ k-plane: public initialisation, then one update per round.

    Args:
        dim: number of features ``d``.
        clusters: number of subspaces ``k``.
        subspace_dim: dimension ``q`` of each subspace (``1 <= q < d``).
        rounds: k-plane rounds ``T``.
        clip_norm: the sites' public ``C`` (to turn the released ``C^2 n_l`` into counts).
        seed: seed of the public initialisation (``None``: OS randomness).
        initial_bases: ``k`` public orthonormal ``d x q`` bases to start from instead.
        evaluate_fn: optional ``bases -> metrics`` called after every round (e.g. cost and
            distance to a known truth in simulation); its output goes into the history.
        secure: the rounds' public secure sum and the sites' grid when they send
            distributed discrete Gaussian messages (:func:`secure_sum_for`).
    """

    algorithm = ALGORITHM

    def __init__(
        self,
        dim: int,
        clusters: int,
        subspace_dim: int,
        rounds: int,
        clip_norm: float = 1.0,
        seed: int | None = None,
        initial_bases: Sequence[np.ndarray] | None = None,
        evaluate_fn: Callable[[list[np.ndarray]], dict[str, float]] | None = None,
        secure: tuple[SecureSum, GridChoice] | None = None,
    ) -> None:
        self.secure = secure
        self.dim = require_positive_int(dim, "dim")
        self.clusters = require_positive_int(clusters, "clusters")
        self.subspace_dim = require_subspace_dim(subspace_dim, self.dim)
        self.rounds = require_positive_int(rounds, "rounds")
        self.clip_norm = require_finite_positive(clip_norm, "clip_norm")
        self.evaluate = evaluate_fn
        #: k-plane rounds received (a centred run's history holds its moments round too).
        self.rounds_done = 0
        if initial_bases is None:
            rng = np.random.default_rng(None if seed is None else [seed, INIT_STREAM])
            self.bases = random_subspaces(rng, self.dim, self.clusters, self.subspace_dim)
        else:
            self.bases = validate_bases(initial_bases, self.dim, self.clusters, "initial_bases")
            if any(U.shape[1] != self.subspace_dim for U in self.bases):
                raise ConfigurationError(
                    f"initial_bases must all have subspace_dim={subspace_dim} columns, got "
                    f"{[U.shape[1] for U in self.bases]}"
                )
        self.start_record()

    @property
    def expected_rounds(self) -> int:
        """The ``T`` k-plane rounds."""
        return self.rounds

    label = "SuLQ k-plane"

    def round_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        """The ``k`` current bases, with the announced ``d`` and ``k`` (and the secure sum
        the sites' residues go into)."""
        config: dict[str, Any] = {"round": server_round, "dim": self.dim,
                                  "clusters": self.clusters}
        if self.secure is not None:
            config.update(self.secure[0].to_config())
        return list(self.bases), config

    def round_sum(self, server_round: int) -> SecureSum | None:
        """Every round's secure sum (the same one)."""
        return None if self.secure is None else self.secure[0]

    def round_result(self, server_round: int, answers: Sequence[SiteAnswer]
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """One k-plane update; the new bases stacked ``k x d x q``."""
        return np.stack(self.receive(server_round, answers)), self.round_metrics()

    @property
    def secure_modulus(self) -> int | None:
        """The rounds' residues' modulus with secure sums."""
        return None if self.secure is None else self.secure[1].modulus

    def describe(self) -> str:
        """``dim``, the clusters, their dimension and the rounds."""
        return (f"dim={self.dim}, clusters={self.clusters}, subspace_dim={self.subspace_dim}, "
                f"rounds={self.rounds}")

    def receive(self, t: int, answers: Sequence[SiteAnswer]) -> list[np.ndarray]:
        """Round ``t``: sum the sites' messages; each cluster's top-``q`` eigenvectors."""
        if t != self.rounds_done + 1 or t > self.rounds:
            raise ConfigurationError(
                f"round {t} is out of order: {self.rounds_done} of {self.rounds} rounds done"
            )
        shape = message_shape(self.clusters, self.dim)
        if self.secure is None:
            ordered = ordered_answers(answers, shape)
            total = weighted_sum(ordered, weighted=False)
        else:
            public, grid = self.secure
            ordered = ordered_answers(answers, (grid.calibration.padded,))
            total = checked_decode(public, ordered, "the clusters' moments").reshape(shape)
        self.bases = [
            top_eigenvectors(unpack_symmetric(row[:-1], self.dim), self.subspace_dim)
            for row in total
        ]
        sizes = np.maximum(total[:, -1] / count_weight(self.clip_norm), 0.0)
        entry: dict[str, Any] = {
            "round": t,
            "sites": len(ordered),
            "epsilon_spent": max(a.epsilon_spent for a in ordered),
            "cluster_sizes": sizes.tolist(),
        }
        if self.evaluate is not None:
            entry.update(self.evaluate(self.bases))
        self.history.append(entry)
        self.rounds_done = t
        self.sites_answered.append([a.site for a in ordered])
        logger.info("SuLQ k-plane round %d: %s", t, entry)
        return self.bases

    def result(self, privacy: dict[str, Any], config: dict[str, Any]) -> ClusteringResult:
        """The final :class:`ClusteringResult` (after the last round)."""
        self.require_finished()
        return ClusteringResult(
            algorithm=ALGORITHM, bases=self.bases, assignments=None, privacy=privacy,
            history=self.history, config=config,
        )


def secure_sum_for(
    policy: SitePrivacyPolicy, dim: int, clusters: int, max_records: int, sites_in_sum: int,
    rotation_seed: int,
) -> tuple[SecureSum, GridChoice]:
    """The public parameters of every round's secure sum of ``sites_in_sum`` sites' messages
    (each site of at most ``max_records`` records) and the grid a site with ``policy`` (a
    :class:`KPlanePolicy` or a centred run's algorithm share) derives from them."""
    rows, cols = message_shape(clusters, dim)
    secure = SecureSum(
        sensitivity=cluster_moments_sensitivity(policy.clip_norm), max_records=max_records,
        norm_per_record=message_norm_per_record(policy.clip_norm), dimension=rows * cols,
        sites_in_sum=sites_in_sum, rotation_seed=rotation_seed,
    )
    return agreed_sum(secure, policy)


def answer_rounds(server: KPlaneServer, sites: Sequence[KPlaneSite],
                  secure: tuple[SecureSum, GridChoice] | None = None) -> None:
    """Every k-plane round of ``server`` answered by ``sites`` (in-process, no Flower), into
    the secure sum ``secure`` when the sites send discrete messages."""
    public = None if secure is None else secure[0]
    for t in range(1, server.rounds + 1):
        bases = server.bases
        server.receive(t, [s.answer(s.release_clusters(bases, secure=public)) for s in sites])


def run_sulq_kplane(
    sites: Sequence[np.ndarray],
    clusters: int,
    subspace_dim: int,
    policy: KPlanePolicy,
    seed: int | None = None,
    evaluate: Callable[[list[np.ndarray]], dict[str, float]] | None = None,
    initial_bases: Sequence[np.ndarray] | None = None,
) -> ClusteringResult:
    """Reference SuLQ k-plane over a list of site arrays (no Flower), same formulas as the app.

    Site ``i`` is named ``str(i)`` and, with ``seed``, draws its noise from the stream
    ``(seed, i, release)`` and the server its initialisation from ``(seed, INIT_STREAM)``:
    a Flower run with the same seed gives the same bases.

    Privacy guarantee: each site's transcript is (policy.epsilon, policy.delta)-DP per record;
    with ``policy.secure_min_sites = M``, every secure sum of at least ``M`` sites' messages is.
    """
    start = time.perf_counter()
    site_objs = build_sites(KPlaneSite, sites, policy, seed)
    secure = None
    if policy.discrete:
        secure = secure_sum_for(policy, site_objs[0].dim, clusters,
                                max(s.n for s in site_objs), len(site_objs),
                                public_seed(seed))
    server = KPlaneServer(
        site_objs[0].dim, clusters, subspace_dim, policy.rounds, clip_norm=policy.clip_norm,
        seed=seed, initial_bases=initial_bases, evaluate_fn=evaluate, secure=secure,
    )
    answer_rounds(server, site_objs, secure)
    config = {
        "clusters": clusters, "subspace_dim": subspace_dim, "sites": len(sites),
        "samples": sum(s.n for s in site_objs), "dim": site_objs[0].dim, "seed": seed,
        **asdict(policy),
        "clipped_rows": sum(s.clip_report.clipped_rows for s in site_objs),
        "wall_seconds": time.perf_counter() - start,
    }
    grids = () if secure is None else [secure[1]] * policy.releases
    return server.result(privacy_record(ALGORITHM, policy, grids), config)

"""The genomics benchmark's methods over one cohort's union (``genomics_union.UnionRows``):
DPS-PCA with secure discrete sums (from the panel's start or the private start), the panel's
own PCs, central Analyze Gauss and the non-private PCs.

**Secure DPS-PCA, emulated at the union.** A reference run (``run_dps_pca`` with a
``discrete`` policy) holds every site's rows in float64 (16 GB for 10 x 10,000 x 20,000) and
draws every site's discrete Gaussian message (about 1 s a message at d = 20,000); a grid of
2 x 3 x 5 runs per cohort cannot afford either. Here the server's own code
(``DPSPCAServer``: its start, ``receive_diagonal``, ``receive_power``) is driven with what the
secure sum decodes to: the union's exact statistic (``sum_i X_i^T X_i Q``, or the diagonal)
plus independent Gaussian noise of the sum's standard deviation ``central_sigma`` per
coordinate, from the grid every site derives (``SecureSum.grid``: sensitivity
``sqrt(2) C^2``, ``max_records`` the largest site, norm per record ``C^2``, ``M`` = every
site in the sum). The decoded sum's noise is the un-rotated sum of ``M`` sites' discrete
Gaussian draws, of that variance at most, and its grid rounding adds under 2% of the
sensitivity (:func:`ddg_noise_check` measures the real messages' decoded noise against it).

**Calibration with a start.** A site that holds the public start plans ``T`` releases (the
power steps; no initialisation release), so the panel-start runs are calibrated for ``T``
releases; the private-start runs for ``T + 1`` (the initialisation's noisy diagonal too).
``run_dps_pca(..., initial_basis=...)`` on main still calibrates its policy for ``T + 1``
(``DPSPCAPolicy.releases``), more noise than a start needs.

**Oversampled start** (``extra`` > 0, for a population the panel lacks): the start is the
panel's basis with ``extra`` public random columns (seeded, orthonormalised), the power
steps carry ``k + extra`` columns (the same sensitivity ``sqrt(2) C^2`` for any orthonormal
``Q``; every column's noise is the same ``central_sigma``), and the run's components are the
top ``k`` of the final basis ordered by the last noisy power step
(``fedpca.linalg.subspace.leading_components``): post-processing of released sums only.

**Private frequencies and the shifted start** (``start = "shifted"``: fedpca's
``run_genotype_dps_pca`` with a private panel, ``fedpca.algorithms.genotype_run``): every
site's releases are planned by fedpca's own policy (``genotype_policy``: the allele counts'
release with the share ``GENOTYPE_MOMENTS_SHARE``, then ``T`` power steps), and each secure
sum's decoded noise is the grid a site derives from that plan (``frequency_sum`` for the
counts, ``secure_sums`` of the algorithm's part for ``d (k + 1)`` numbers): the union's allele
counts over 2 and its called counts over 2, plus Gaussian noise of the counts'
``central_sigma`` on each of the ``2 d`` values, give the frequencies
(``released_frequencies``, clamped into ``FREQUENCY_BOUNDS``, as ``FrequencyServer`` does), fedpca's
``ShiftedStartServer`` starts from ``thinQR([S, s])`` and keeps the top ``k`` Ritz vectors
of its last step's span (``ShiftedStartServer.components``); the power
steps read the union's rows standardised with the run's own frequencies
(``genomics_private.ReleasedRows``).
"""

from __future__ import annotations

import logging
import math
import zlib
from dataclasses import dataclass, field

import numpy as np

from fedpca.algorithms.central import ANALYZE_GAUSS
from fedpca.algorithms.dps_pca import (
    PHASE_INIT,
    PHASE_POWER,
    DPSPCASite,
    DPSPCAServer,
    DPSPCAPolicy,
    secure_sums,
)
from fedpca.algorithms.genotype_centring import (
    CALLED_WEIGHT,
    FREQUENCY_BOUNDS,
    GENOTYPE_WIDTH,
    FrequencyServer,
    frequency_sensitivity,
    frequency_sum,
    frequency_variance,
    released_frequencies,
    genotype_bounds,
    genotype_policy,
)
from fedpca.algorithms.secure_sum import SecureSum
from fedpca.algorithms.centring import moments_noise
from fedpca.algorithms.shifted_start import SHIFT_COLUMNS, ShiftedStartServer, site_columns
from fedpca.algorithms.site import SiteAnswer, build_sites
from fedpca.data.start_basis import StartBasis
from fedpca.dp.budget_split import MOMENTS
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.dp.guarantee import SiteGuarantee
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import leading_components
from fedpca.dp.mechanisms import (
    NoiseSource,
    diagonal_sensitivity,
    power_step_sensitivity,
    upper_triangle_sensitivity,
)
from scipy.sparse.linalg import eigsh

from fedpca.linalg.subspace import LANCZOS_TOL, gram_product, thin_qr
from genomics_private import ReleasedRows

logger = logging.getLogger("genomics")

#: A method's start with per-site frequencies (a panel's ``frequencies = "per-site"``).
PER_SITE = "per-site"
#: The row of the panel's own PCs (no noise, no run).
PANEL = "panel PCs alone"
#: Where the panel start's extra public columns come from (a public seed).
EXTRA_STREAM = 0x57A7
#: Power steps of the non-private subspace iteration (at d = 20,000, without a covariance).
NONPRIVATE_ROUNDS = 12
#: Columns of that iteration (the top ``k`` are kept).
NONPRIVATE_COLUMNS = 8


@dataclass(frozen=True)
class Method:
    """A secure DPS-PCA variant: its start (``"panel"``, ``"private"`` or ``"shifted"``:
    private frequencies and the panel's start shifted along them, module docstring;
    ``"per-site"``: each site's own frequencies, the start shifted along them too), power
    rounds and extra public random columns beside the panel's start."""

    name: str
    start: str
    rounds: int
    extra: int = 0

    @property
    def releases(self) -> int:
        """What a site plans: ``T``, plus the initialisation without a start."""
        return self.rounds + int(self.start == "private")


#: Each secure sum's replace-one L2 sensitivity and norm per record, from the clip norm ``C``:
#: a power step ``X_i^T X_i Q`` and the diagonal.
STATISTICS = {"power": (power_step_sensitivity, lambda c: c**2),
              "diagonal": (diagonal_sensitivity, lambda c: c**2)}


def decoded_sigma(statistic: str, clip: float, dim: int, max_records: int, sites: int,
                  epsilon: float, delta: float, releases: int) -> float:
    """The standard deviation per coordinate of a secure sum of ``sites`` sites' messages
    (``M`` = ``sites``) of ``statistic`` (:data:`STATISTICS`, length ``dim``), from the grid a
    site derives for ``releases`` releases."""
    sensitivity, per_record = STATISTICS[statistic]
    public = SecureSum(sensitivity=sensitivity(clip), max_records=max_records,
                       norm_per_record=per_record(clip), dimension=dim, sites_in_sum=sites,
                       rotation_seed=0)
    return public.grid(epsilon, delta, releases, sites).calibration.central_sigma


@dataclass
class SecureRun:
    """One emulated secure DPS-PCA run (module docstring) and where it stands."""

    method: Method
    epsilon: float
    seed: int
    server: DPSPCAServer
    sigmas: dict[str, float]
    rng: np.random.Generator
    n: int
    k: int
    clip: float
    round: int = 1
    last: np.ndarray | None = field(default=None, repr=False)
    #: The run's released frequencies (``"shifted"`` runs: its rows are standardised with
    #: them) and its index among the cohort's ``ReleasedRows``.
    frequencies: np.ndarray | None = field(default=None, repr=False)
    released: int | None = None

    @property
    def done(self) -> bool:
        """Whether every round has been answered."""
        return self.round > self.server.total_rounds

    @property
    def wants_diagonal(self) -> bool:
        """Whether this round is the initialisation (the noisy diagonal)."""
        return not self.done and self.server.phase(self.round)[0] == PHASE_INIT

    @property
    def basis(self) -> np.ndarray:
        """The basis of this round's power step."""
        return self.server.basis

    def feed(self, statistic: np.ndarray) -> None:
        """This round's decoded sum: ``statistic`` plus the sum's noise, to the server."""
        phase, t = self.server.phase(self.round)
        noisy = statistic + self.rng.normal(0.0, self.sigmas[phase], statistic.shape)
        # the decoded sum as one answer, stating its noise and clip norm as a site's
        # guarantee would, so the server bounds it as it bounds a site's answer
        stated = SiteGuarantee(self.epsilon, self.epsilon, 0.0, "ddg-pld",
                               self.sigmas[phase] / power_step_sensitivity(self.clip),
                               self.clip, "float")
        answer = SiteAnswer("union", self.n, noisy / self.n, self.epsilon, self.round, stated)
        if phase == PHASE_INIT:
            self.server.receive_diagonal([answer])
        else:
            self.server.receive_power(t, [answer])
            self.last = noisy
        self.round += 1

    def components(self) -> np.ndarray:
        """The run's ``k`` components: a shifted run's as fedpca's server keeps them (the Ritz
        vectors of its last step's span), an oversampled run's ordered by its last noisy
        step."""
        if isinstance(self.server, ShiftedStartServer):
            return self.server.components()
        if self.server.k == self.k:
            return self.server.basis
        return leading_components(self.last, self.k)


class NonPrivateRun:
    """The top ``k`` eigenvectors of ``X^T X`` without forming it (at d = 20,000): subspace
    iteration on ``NONPRIVATE_COLUMNS`` columns for ``NONPRIVATE_ROUNDS`` steps, then
    Rayleigh-Ritz on the last basis; driven like a :class:`SecureRun`."""

    wants_diagonal = False

    def __init__(self, dim: int, k: int, seed: int = 0) -> None:
        self.k, self.steps = k, 0
        self.basis = thin_qr(np.random.default_rng(seed).standard_normal(
            (dim, NONPRIVATE_COLUMNS)))
        self.ritz: np.ndarray | None = None

    @property
    def done(self) -> bool:
        """Whether every step has been taken."""
        return self.steps == NONPRIVATE_ROUNDS

    def feed(self, product: np.ndarray) -> None:
        """One step: ``X^T X Q`` for the current ``Q``."""
        values, vectors = np.linalg.eigh(self.basis.T @ product)
        self.ritz = self.basis @ vectors[:, ::-1][:, :self.k]
        self.basis = thin_qr(product)
        self.steps += 1

    def components(self) -> np.ndarray:
        """The Ritz vectors of the last step's basis."""
        return self.ritz


def start_basis(start: np.ndarray, extra: int) -> np.ndarray:
    """The panel's start with ``extra`` public random columns, orthonormalised."""
    if not extra:
        return start
    rng = np.random.default_rng([EXTRA_STREAM, extra])
    return thin_qr(np.hstack([start, rng.standard_normal((start.shape[0], extra))]))


@dataclass(frozen=True)
class Union:
    """What every run of one cohort reads that is public or exact: the panel's start and
    reference frequencies, the union's size, its largest site, its sites and the exact sums
    of its allele counts and its called counts (the counts' release before its noise)."""

    start: StartBasis
    reference: np.ndarray
    n: int
    max_records: int
    sites: int
    clip: float
    counts: np.ndarray
    called: np.ndarray
    #: Each site's allele counts and called counts (``sites x d``) and individuals: what
    #: per-site frequencies release before their noise.
    site_counts: np.ndarray | None = None
    site_called: np.ndarray | None = None
    site_sizes: tuple[int, ...] = ()


def sigmas_for(method: Method, union: Union, epsilon: float, delta: float
               ) -> dict[str, float]:
    """Each phase's decoded noise of ``method`` at ``epsilon`` (module docstring); raises
    ``ConfigurationError`` when no grid meets the site's wrap bound."""
    dim, k = union.start.shape
    if method.start in ("shifted", PER_SITE):
        per_site = method.start == PER_SITE
        policy = genotype_policy(epsilon, delta, method.rounds, union.clip, True,
                                 secure_min_sites=union.sites, discrete=True,
                                 per_site=per_site)
        bounds = genotype_bounds(dim)
        columns = k + SHIFT_COLUMNS + (site_columns(union.sites) if per_site else 0)
        power = secure_sums(policy.algorithm_policy(bounds), dim, columns,
                            union.max_records, union.sites, 0)[1][1]
        counts = (moments_noise(policy, bounds, 1, None, frequency_sensitivity(dim))
                  if per_site else frequency_sum(policy, dim, union.max_records,
                                                 union.sites, 0)[1].calibration.central_sigma)
        return {MOMENTS: counts, PHASE_POWER: power.calibration.central_sigma}
    sigmas = {PHASE_POWER: decoded_sigma("power", union.clip, dim * (k + method.extra),
                                         union.max_records, union.sites, epsilon, delta,
                                         method.releases)}
    if method.start == "private":
        sigmas[PHASE_INIT] = decoded_sigma("diagonal", union.clip, dim, union.max_records,
                                           union.sites, epsilon, delta, method.releases)
    return sigmas


def shifted_run(method: Method, epsilon: float, seed: int, union: Union,
                sigmas: dict[str, float], rng: np.random.Generator) -> SecureRun:
    """A ``"shifted"`` run after its counts' round: the released frequencies (the exact
    counts over 2 plus the sum's noise, over ``N``, clamped) and fedpca's server started
    along them; a ``"per-site"`` run's counts are every site's own release (each with the
    whole release's noise, ``sigmas[MOMENTS]``), given to fedpca's ``FrequencyServer`` as
    the sites' answers, its server started along the union's shift and the sites'."""
    dim, k = union.start.shape
    if method.start == PER_SITE:
        answers = [SiteAnswer(str(i), n, np.concatenate([
            union.site_counts[i] / GENOTYPE_WIDTH, CALLED_WEIGHT * union.site_called[i]])
            + rng.normal(0.0, sigmas[MOMENTS], 2 * dim), epsilon)
            for i, n in enumerate(union.site_sizes)]
        server = ShiftedStartServer(dim, k, method.rounds, union.start, union.reference,
                                    seed=seed, site_columns=site_columns(union.sites))
        frequencies_of = FrequencyServer(dim, None, sigmas[MOMENTS] * math.sqrt(union.sites),
                                         server.shift, sigmas[MOMENTS])
        frequencies_of.receive(answers)
        return SecureRun(method, epsilon, seed, server, sigmas, rng, union.n, k, union.clip,
                         frequencies=frequencies_of.frequencies)
    exact = np.concatenate([union.counts / GENOTYPE_WIDTH, CALLED_WEIGHT * union.called])
    total = exact + rng.normal(0.0, sigmas[MOMENTS], 2 * dim)
    released = released_frequencies(total, union.n, sigmas[MOMENTS])
    frequencies = np.clip(released[0], *FREQUENCY_BOUNDS)
    server = ShiftedStartServer(dim, k, method.rounds, union.start, union.reference,
                                seed=seed)
    server.shift(frequencies, frequency_variance(total, union.n, sigmas[MOMENTS], released))
    return SecureRun(method, epsilon, seed, server, sigmas, rng, union.n, k, union.clip,
                     frequencies=frequencies)


def secure_runs(methods: list[Method], epsilons: list[float], seeds: list[int], union: Union,
                delta: float) -> list[SecureRun]:
    """Every (method, epsilon, seed) run, ready for its first round."""
    dim, k = union.start.shape
    runs = []
    for method in methods:
        for epsilon in epsilons:
            try:
                sigmas = sigmas_for(method, union, epsilon, delta)
            except ConfigurationError as refused:  # no grid: reported, the rest runs
                logger.warning("%s at eps %g: no secure sum (%s)", method.name, epsilon,
                               refused)
                continue
            for seed in seeds:
                stream = [seed, zlib.crc32(method.name.encode()), int(epsilon * 1000)]
                rng = np.random.default_rng(stream)
                if method.start in ("shifted", PER_SITE):
                    runs.append(shifted_run(method, epsilon, seed, union, sigmas, rng))
                    continue
                initial = (start_basis(union.start.basis, method.extra)
                           if method.start == "panel" else None)
                server = DPSPCAServer(dim, k + method.extra, dim, method.rounds, seed=seed,
                                      initial_basis=initial)
                runs.append(SecureRun(method, epsilon, seed, server, sigmas, rng, union.n, k,
                                      union.clip))
    return runs


def run_lockstep(runs: list, gram_times, diagonal: np.ndarray,
                 released: ReleasedRows | None = None) -> None:
    """Every run (:class:`SecureRun`, :class:`NonPrivateRun`) to its end, one round at a
    time, each round's power steps of all runs in one product ``gram_times(bases side by
    side)`` (one pass over the data), those of runs with released frequencies in one
    product of ``released`` (one more pass)."""
    rounds = 0
    while True:
        for run in runs:
            if run.wants_diagonal:
                run.feed(diagonal)
        stepping = [r for r in runs if not r.done]
        if not stepping:
            return
        public = [r for r in stepping if getattr(r, "released", None) is None]
        if public:
            product = gram_times(np.hstack([r.basis for r in public]))
            at = 0
            for run in public:
                width = run.basis.shape[1]
                run.feed(product[:, at:at + width])
                at += width
        own = {r.released: r for r in stepping if getattr(r, "released", None) is not None}
        if own:
            for index, product in released.gram_times(
                    {i: r.basis for i, r in own.items()}).items():
                own[index].feed(product)
        rounds += 1
        logger.info("  power round %d: %d runs (%d with released frequencies)", rounds,
                    len(stepping), len(own))


def analyze_gauss(covariance: np.ndarray, k: int, epsilon: float, delta: float, clip: float,
                  seed: int) -> np.ndarray:
    """Central Analyze Gauss's top ``k`` components from the union's ``X^T X`` (as
    ``run_analyze_gauss``: its calibration for one release and its noise stream)."""
    sigma = calibrate_gaussian(1, epsilon, delta, "pld").sigma(upper_triangle_sensitivity(clip))
    noise = NoiseSource(seed, ANALYZE_GAUSS).symmetric(0, sigma, covariance.shape[0])
    noise += covariance
    return top_eigenvectors(noise, k)


def top_eigenvectors(matrix: np.ndarray, k: int) -> np.ndarray:
    """The top ``k`` eigenvectors of a symmetric ``matrix`` by Lanczos (``eigsh``, fedpca's
    tolerance ``LANCZOS_TOL``, a fixed start), as ``run_analyze_gauss`` computes them at
    d >= 1000; a dense ``eigh`` would take ``O(d^3)``."""
    values, vectors = eigsh(matrix, k, which="LA", tol=LANCZOS_TOL, v0=np.ones(len(matrix)))
    return vectors[:, np.argsort(values)[::-1]]


def ddg_noise_check(sites: int = 10, records: int = 100, dim: int = 512, k: int = 2,
                    epsilon: float = 1.0, delta: float = 1e-6, rounds: int = 2,
                    seed: int = 0) -> dict[str, float]:
    """The emulation's premise, measured with fedpca's real secure sum: ``sites``
    ``DPSPCASite``s with a ``discrete`` policy (``M`` = ``sites``) answer ``rounds + 1`` power
    steps through the secure sum ``run_dps_pca`` builds (``secure_sums``), the server decodes
    them (``SecureSum.decode``), and the decoded sum's error against the exact
    ``sum_i X_i^T X_i Q`` is compared with the grid's ``central_sigma`` (the emulation's
    noise): their ratio, its Gaussian tails (share beyond 2 and 3 standard deviations)."""
    rng = np.random.default_rng(seed)
    clip = math.sqrt(dim)
    data = [rng.standard_normal((records, dim)) for _ in range(sites)]
    policy = DPSPCAPolicy(epsilon=epsilon, delta=delta, rounds=rounds, clip_norm=clip,
                        secure_min_sites=sites, discrete=True)
    members = build_sites(DPSPCASite, data, policy, seed)
    public, grid = secure_sums(policy, dim, k, records, sites, rotation_seed=seed)[1]
    errors = []
    for _ in range(policy.releases):
        basis = thin_qr(rng.standard_normal((dim, k)))
        decoded = public.decode([s.release_power(basis, secure=public) for s in members])
        exact = sum(gram_product(s.X, basis) for s in members).ravel()
        errors.append(decoded - exact)
    error = np.concatenate(errors) / grid.calibration.central_sigma
    return {"coordinates": int(error.size), "draws": grid.calibration.draws,
            "central_sigma": grid.calibration.central_sigma,
            "ratio": float(error.std()), "mean": float(error.mean()),
            "beyond_2sd": float(np.mean(np.abs(error) > 2)),
            "beyond_3sd": float(np.mean(np.abs(error) > 3))}

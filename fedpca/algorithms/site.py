"""What every private site shares: prepared data, its own calibration, ledger and noise.

Privacy guarantee enforced here (per site, unit: one record, replace-one): every release
goes through :meth:`PrivateSite.publish`, which charges the site's ledger and refuses
(raising, nothing released) anything the ledger does not allow; the noise level is the
site's own calibration, raised but never lowered by a server request.

Work before charge, charge before send: a site first bounds every size the request chose
(:mod:`fedpca.algorithms.site_limits`), then computes its whole noisy answer in memory, then
commits the charge, and only then returns the answer. Whatever can fail (an allocation, a
solver, an encoding) fails before the charge: nothing spent, nothing sent. A crash after the
charge leaves the budget spent, never unspent.

The noise sampler is the policy's too (``noise_sampler``): ``"exact"`` releases grid points with
exact discrete Gaussian noise (:mod:`fedpca.dp.exact_noise`; what a real site always
draws), ``"float"`` numpy's float Gaussians (simulation only: their low bits can leak).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from fedpca.algorithms.secure_sum import SUM_KEYS, SecureSum
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.algorithms.site_rows import DenseRows, SiteRows
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.dp.calibration import ACCOUNTING_MODES, Calibration, calibrate_gaussian
from fedpca.dp.ddg_encoding import encode_site
from fedpca.dp.distributed_gaussian import DDGCalibration
from fedpca.dp.guarantee import SiteGuarantee
from fedpca.dp.exact_noise import (
    EXACT,
    FLOAT,
    NOISE_SAMPLERS,
    ExactGaussian,
    symmetric_coordinates,
)
from fedpca.dp.hadamard import next_power_of_two
from fedpca.dp.ledger import PrivacyLedger
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import NoiseSource, planned_run
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import (
    require_choice,
    require_finite_positive,
    require_positive_int,
)


class SitePrivacyPolicy(Protocol):
    """What a site's privacy policy provides (its own settings; the server cannot change
    them): the public clip norm, the calibration of its releases, how many it may make,
    ``m`` when its answers are only revealed inside secure sums of at least ``m`` sites, and
    the noise sampler (``"exact"`` or ``"float"``)."""

    clip_norm: float
    secure_min_sites: int | None
    noise_sampler: str

    @property
    def releases(self) -> int: ...

    def calibration(self) -> Calibration: ...

    def plan(self) -> list[Release]: ...


class SiteLedgerLike(Protocol):
    """What a site charges: the in-memory :class:`~fedpca.dp.ledger.PrivacyLedger` of a
    simulation or the durable :class:`~fedpca.site.ledger.RunLedger` of a real site."""

    @property
    def count(self) -> int: ...

    def charge(self, release: Release) -> None: ...

    def epsilon_spent(self) -> float: ...

    def worst_case_spent(self) -> float: ...

    def require_run(self, planned: Sequence[Release]) -> None: ...


def run_ledger(policy: SitePrivacyPolicy, site: str) -> PrivacyLedger:
    """A fresh in-memory ledger for one run under ``policy`` (a simulation's): its budget the
    calibration's target, at most ``policy.releases`` releases, inside secure sums its worst
    case reported, not bounded (:meth:`~fedpca.dp.ledger.PrivacyLedger.for_run`)."""
    cal = policy.calibration()
    return PrivacyLedger.for_run(cal.target_epsilon, cal.delta, policy.plan(), policy.releases,
                                 site)


def require_rest_of_run(policy: SitePrivacyPolicy, ledger: SiteLedgerLike) -> None:
    """Raise (:class:`~fedpca.errors.BudgetExceededError`, nothing charged) unless what is
    left of a run under ``policy`` fits ``ledger`` after the releases it holds: the run's
    releases as calibrated (``policy.plan()``), less the ``ledger.count`` this run has
    made. A site's answer to the readiness round, from its policy and ledger alone."""
    ledger.require_run(policy.plan()[ledger.count:])


class EqualReleases:
    """A policy whose run is ``releases`` releases at its calibration's multiplier."""

    def plan(self) -> list[Release]:
        """The run's releases as calibrated (:func:`~fedpca.dp.mechanisms.planned_run`),
        inside secure sums of ``secure_min_sites`` when set."""
        return planned_run("run", self.releases, self.calibration().noise_multiplier,
                           self.secure_min_sites or 0)


@dataclass(frozen=True)
class SingleReleasePolicy(EqualReleases):
    """A policy for mechanisms that release once per site (DPdisPCA, LDP covariance).

    Attributes:
        epsilon, delta: the budget of the single release.
        accounting: ``"pld"`` (default: the analytic Gaussian for one release), ``"rdp"`` or
            ``"paper"`` (the classic ``sqrt(2 ln(1.25/delta)) / eps``, refused for eps >= 1).
        clip_norm: public row-norm bound ``C``.
        noise_sampler: ``"float"`` (numpy Gaussians: simulation only) or ``"exact"`` (grid points
            plus exact discrete Gaussian noise: a real site's).
    """

    epsilon: float = 1.0
    delta: float = 1e-5
    accounting: str = "pld"
    clip_norm: float = 1.0
    noise_sampler: str = FLOAT

    #: One release per site; no secure-aggregation mode.
    releases = 1
    secure_min_sites = None

    def __post_init__(self) -> None:
        require_choice(self.accounting, "accounting", ACCOUNTING_MODES)
        require_choice(self.noise_sampler, "noise_sampler", NOISE_SAMPLERS)
        require_finite_positive(self.clip_norm, "clip_norm")
        self.calibration()

    def calibration(self) -> Calibration:
        """Noise multiplier for the one release within (epsilon, delta)."""
        return calibrate_gaussian(
            self.releases, self.epsilon, self.delta, self.accounting, paper_rule="classic"
        )


@dataclass(frozen=True)
class RoundsPolicy(EqualReleases):
    """A site's own privacy settings for an algorithm of ``rounds`` rounds (one release per
    round, plus :attr:`EXTRA_RELEASES`); the server cannot change them, only add noise.

    Attributes:
        epsilon, delta: the site's total budget for the whole run.
        rounds: rounds ``T`` the site agrees to.
        accounting: ``"pld"`` (default), ``"rdp"`` or ``"paper"`` (the closed form
            :attr:`PAPER_RULE`).
        clip_norm: public row-norm bound ``C``.
        secure_min_sites: ``M``, set only when every answer is revealed only inside a secure
            sum over at least ``M`` sites (fedpca's verifiable secure aggregation, with
            ``discrete``): the site refuses any request that would reveal its answer
            unmasked.
        noise_sampler: ``"float"`` (numpy Gaussians: simulation only) or ``"exact"`` (grid points
            plus exact discrete Gaussian noise: a real site's).
    """

    #: Releases beyond one per round (DPS-PCA's initialisation: 1).
    EXTRA_RELEASES: ClassVar[int] = 0
    #: What ``accounting="paper"`` means (see :func:`~fedpca.dp.calibration.calibrate_gaussian`).
    PAPER_RULE: ClassVar[str] = "dps-pca"

    epsilon: float = 1.0
    delta: float = 1e-5
    rounds: int = 10
    accounting: str = "pld"
    clip_norm: float = 1.0
    secure_min_sites: int | None = None
    noise_sampler: str = FLOAT

    def __post_init__(self) -> None:
        require_positive_int(self.rounds, "rounds")
        require_finite_positive(self.clip_norm, "clip_norm")
        require_choice(self.accounting, "accounting", ACCOUNTING_MODES)
        require_choice(self.noise_sampler, "noise_sampler", NOISE_SAMPLERS)
        self.calibration()

    @property
    def releases(self) -> int:
        """One release per round, plus :attr:`EXTRA_RELEASES`."""
        return self.rounds + self.EXTRA_RELEASES

    def calibration(self) -> Calibration:
        """Noise multiplier for :attr:`releases` releases within (epsilon, delta)."""
        return calibrate_gaussian(
            self.releases, self.epsilon, self.delta, self.accounting, paper_rule=self.PAPER_RULE
        )


#: A server may raise a site's noise multiplier up to this; beyond it a request is absurd.
MAX_NOISE_MULTIPLIER = 1e6
#: The refusal of a policy with secure sums of continuous shares (Flower's SecAgg+ carried
#: them; fedpca retired it: docs/api.md, "Migrating from SecAgg+").
CONTINUOUS_SHARES_RETIRED = (
    "secure sums are distributed discrete Gaussian residues through fedpca's verifiable "
    "secure aggregation: set discrete=true with secure_min_sites (--discrete on the command "
    "line); continuous shares ran only through Flower's SecAgg+, which fedpca no longer "
    "uses (docs/api.md, \"Migrating from SecAgg+\")")


@dataclass(frozen=True)
class SiteAnswer:
    """What the server receives from one site in one round (all of it is DP or public).

    ``group``: the secure sum the answer was summed in, when a secure run sums its sites in
    groups (:mod:`fedpca.algorithms.sum_groups`); ``None``: one sum, or a per-site answer.
    """

    site: str
    n: int
    value: np.ndarray
    epsilon_spent: float
    releases: int = 0
    guarantee: SiteGuarantee | None = None
    group: int | None = None


class PrivateSite:
    """One data holder: prepared data, its policy's calibration, ledger and noise source.

    A round's request reaches it as :meth:`respond` (arrays and config, checked against
    :attr:`CONFIG_KEYS` by :meth:`check_config`), whatever carried it: a Flower message, a
    reference run in process.

    Args:
        data: the site's ``n_i x d`` records, raw or already a :class:`SiteData`, or
            :class:`~fedpca.algorithms.site_rows.SiteRows` read only through their products
            (streamed genotypes; an algorithm with :attr:`STREAMS_ROWS` only).
        policy: the site's own :class:`SitePrivacyPolicy`. With ``policy.secure_min_sites =
            M`` (and ``discrete``) the site's answers are only revealed summed with those of
            at least ``M`` sites, as distributed discrete Gaussian residues
            (:mod:`fedpca.algorithms.secure_sum`).
        site: the site's name (messages, and with ``seed`` its noise stream).
        seed: seed for reproducible simulation only; ``None`` draws OS randomness.
        ledger: the ledger to charge: a real site's durable lifetime ledger for this run,
            or ``None`` for a fresh in-memory one sized by the policy (simulation).
        limits: the most one answer may hold (a real site's policy sets them; ``None``:
            the public defaults of :class:`~fedpca.algorithms.site_limits.SiteLimits`).
    """

    #: The request config keys :meth:`respond` understands (each algorithm's).
    CONFIG_KEYS: ClassVar[frozenset[str]] = frozenset()
    #: Whether the algorithm reads its records only through :class:`SiteRows` products, so
    #: that a site may stream them from disk (genotypes) instead of holding the matrix.
    STREAMS_ROWS: ClassVar[bool] = False

    def __init__(
        self,
        data: np.ndarray | SiteData | SiteRows,
        policy: SitePrivacyPolicy,
        site: str = "site",
        seed: int | None = None,
        ledger: SiteLedgerLike | None = None,
        limits: SiteLimits | None = None,
    ) -> None:
        #: Whether the site sends distributed discrete Gaussian messages (secure sums only).
        self.discrete = bool(getattr(policy, "discrete", False))
        if policy.secure_min_sites is not None:
            require_positive_int(policy.secure_min_sites, "secure_min_sites", minimum=2)
            if not self.discrete:
                raise ConfigurationError(CONTINUOUS_SHARES_RETIRED)
        self.policy = policy
        self.secure_min_sites = policy.secure_min_sites
        #: Whether its own releases are grid points with exact discrete Gaussian noise.
        self.exact = policy.noise_sampler == EXACT
        self.site = site
        self.clip_norm = policy.clip_norm
        # arrays and SiteData first: a runtime Protocol check costs ~40 us per call
        if not isinstance(data, (np.ndarray, SiteData)) and isinstance(data, SiteRows):
            self.rows: SiteRows = self._streamed(data)
            #: The records in memory (``None``: streamed, read through :attr:`rows` only).
            self.X, self.clip_report = None, None
        else:
            if not isinstance(data, SiteData):
                data = SiteData.prepare(data, self.clip_norm, site)
            elif data.clip.clip_norm != self.clip_norm:
                raise ConfigurationError(
                    f"{site}: data was clipped to norm {data.clip.clip_norm} but the policy "
                    f"says clip_norm={self.clip_norm}; prepare it with the policy's clip norm"
                )
            self.X, self.clip_report = data.X, data.clip
            self.rows = DenseRows(data)
        self.calibration = policy.calibration()
        #: The calibration of the last distributed discrete Gaussian sum the site answered.
        self.sum_calibration: DDGCalibration | None = None
        self.ledger: SiteLedgerLike = ledger or run_ledger(policy, site)
        self.noise = NoiseSource(seed, site)
        self.limits = limits or SiteLimits()

    def _streamed(self, rows: SiteRows) -> SiteRows:
        """``rows`` read only through their products (:class:`SiteRows`), refused by an
        algorithm that reads the whole matrix (:attr:`STREAMS_ROWS`) or when their rows are
        bounded by another norm than the policy's clip norm (every sensitivity assumes it)."""
        if not self.STREAMS_ROWS:
            raise ConfigurationError(
                f"{self.site}: {type(self).__name__} reads a site's whole matrix in memory; "
                "a site whose rows are streamed from disk (genotypes) answers only an "
                "algorithm that reads them block by block (dps-pca)")
        if rows.clip_norm != self.clip_norm:
            raise ConfigurationError(
                f"{self.site}: the rows are bounded by norm {rows.clip_norm:g} but the policy "
                f"says clip_norm={self.clip_norm:g}; set the policy's clip norm to the rows' "
                "public bound (a SNP panel's row-norm)")
        return rows

    @property
    def n(self) -> int:
        """Number of records (public under replace-one neighbouring)."""
        return self.rows.n

    @property
    def dim(self) -> int:
        """Number of features ``d``."""
        return self.rows.d

    def sigma(self, sensitivity: float, min_noise_multiplier: float | None = None) -> float:
        """The site's own sigma, raised (never lowered) to a server-requested multiplier.

        A request below the site's own multiplier changes nothing; a non-finite, non-positive
        or absurd one (above :data:`MAX_NOISE_MULTIPLIER`) is refused.
        """
        z = self.calibration.noise_multiplier
        if min_noise_multiplier is not None:
            requested = require_finite_positive(
                min_noise_multiplier, f"{self.site}: refused: min_noise_multiplier",
                error=InvalidRequestError,
            )
            if requested > MAX_NOISE_MULTIPLIER:
                raise InvalidRequestError(
                    f"{self.site}: refused: min_noise_multiplier={requested:g} is absurd (above "
                    f"{MAX_NOISE_MULTIPLIER:g}); the answer would be pure noise"
                )
            z = max(z, requested)
        return z * sensitivity

    def require_answer_size(self, shape: tuple[int, ...]) -> None:
        """Refuse, before anything is allocated for it, a request whose answer has ``shape``
        (the statistic's; a discrete-noise site sends it padded to a power of two) and is
        larger than the site's :class:`~fedpca.algorithms.site_limits.SiteLimits`."""
        entries = math.prod(shape)
        if self.discrete:
            entries = next_power_of_two(entries)
        self.limits.require_answer(shape, entries, self.site)

    def publish(self, release: Release, answer: Callable[[int], np.ndarray]) -> np.ndarray:
        """Work before charge, charge before send: ``answer(index)`` computes the whole
        noisy answer in memory (its noise from the stream of release number ``index``),
        then ``release`` is charged to the ledger (or refused, recording nothing), and only
        then is the answer returned. Whatever fails in ``answer`` fails before the charge."""
        value = answer(self.ledger.count)
        self.ledger.charge(release)
        return value

    def noisy_release(
        self,
        mechanism: str,
        statistic: np.ndarray,
        sensitivity: float,
        min_noise_multiplier: float | None = None,
        *,
        error: float,
        scale: float = 1.0,
    ) -> np.ndarray:
        """One Gaussian release of ``statistic`` (:meth:`publish`): the noisy statistic.

        ``sensitivity`` (replace-one, L2) and ``error`` (a bound on the floating-point error
        of the computed ``statistic``,
        :func:`~fedpca.dp.exact_noise.float_error`) describe the statistic. The noise
        is the site's ``sigma`` (possibly raised by the server). Exact noise: grid points,
        charged as their discrete Gaussian (:mod:`fedpca.dp.exact_noise`). Float
        noise: charged as the Gaussian of ``sigma``. ``scale >= 1``: the noise drawn
        is ``scale`` times the one charged (e.g. the sum of ``n`` records' own views, each
        charged ``sigma``: ``scale = sqrt(n)``).
        """
        sigma = self.sigma(sensitivity, min_noise_multiplier)
        shape = statistic.shape
        if self.exact:
            charged = ExactGaussian.for_release(sigma, sensitivity, statistic.size, error)
            drawn = (charged if scale == 1.0 else
                     ExactGaussian.for_release(scale * sigma, sensitivity, statistic.size, error))
            return self.publish(charged.release(mechanism, shape), lambda index: drawn.noisy(
                statistic, self.noise.generator(index)).reshape(shape))
        return self.publish(Release(mechanism, sensitivity, sigma, shape),
                            lambda index: statistic + self.noise.gaussian(
                                index, scale * sigma, shape))

    def noisy_symmetric_release(
        self, mechanism: str, matrix: np.ndarray, sensitivity: float, sigma: float, *,
        error: float, scale: float = 1.0,
        then: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray:
        """One release (:meth:`publish`) of the upper triangle of symmetric ``matrix`` with
        noise ``sigma``: ``matrix`` plus symmetric noise of ``scale * sigma`` (``scale >= 1``:
        e.g. the sum of ``m`` records' views, each charged ``sigma``), or ``then`` of it (work
        on the noisy matrix alone, done before the charge). Exact noise: a symmetric matrix of
        grid points."""
        shape = matrix.shape
        after = then or (lambda noisy: noisy)
        if not self.exact:
            return self.publish(Release(mechanism, sensitivity, sigma, shape), lambda index: after(
                matrix + self.noise.symmetric(index, scale * sigma, shape[0])))
        coordinates = symmetric_coordinates(shape[0])
        charged = ExactGaussian.for_release(sigma, sensitivity, coordinates, error)
        drawn = ExactGaussian.for_release(scale * sigma, sensitivity, coordinates, error)
        return self.publish(charged.release(mechanism, shape), lambda index: after(
            drawn.noisy_symmetric(matrix, self.noise.generator(index))))

    def discrete_request(
        self, secure: SecureSum | None, min_noise_multiplier: float | None
    ) -> SecureSum:
        """The secure sum a discrete-noise request names, refused (before any charge) when
        it names none or asks for a noise floor (the discrete noise is calibrated once)."""
        if secure is None or min_noise_multiplier is not None:
            raise InvalidRequestError(
                f"{self.site}: refused: this site answers only inside a secure sum with "
                "discrete Gaussian noise: the request must describe the sum and ask for no "
                "min_noise_multiplier"
            )
        return secure

    def discrete_release(
        self, mechanism: str, statistic: np.ndarray, secure: SecureSum, *,
        sensitivity: float, norm_per_record: float,
    ) -> np.ndarray:
        """The site's message (int64 residues; :mod:`fedpca.algorithms.secure_sum`) for one
        distributed discrete Gaussian release of ``statistic``, charged (:meth:`publish`).
        ``sensitivity`` (replace-one, L2) and ``norm_per_record`` describe ``statistic`` as
        this site computes it; the request's sum must name the same values.

        The grid and the noise are the ones the sum names, agreed by every member
        (:mod:`fedpca.algorithms.secure_sum`); the site checks them against its own policy
        (its budget over all its releases, its ``M``) and refuses, before anything is
        charged, a noise below what its policy needs, a sum it cannot take part in or a
        grid whose sum could wrap. The ledger records the agreed noise of a sum of ``M``
        members' shares (the conditional guarantee) and the site's own draws (the
        unconditional one).
        """
        m = self.secure_min_sites
        if m is None:
            raise InvalidRequestError(
                f"{self.site}: refused: a secure-sum release needs the site's policy to set "
                "[secure-aggregation] min-sites (M); this site answers with its own noise only"
            )
        own = SecureSum(sensitivity=sensitivity, max_records=self.n,
                        norm_per_record=norm_per_record, dimension=statistic.size,
                        sites_in_sum=m, rotation_seed=0)
        secure.check_site(self.n, m, self.site, own)
        try:
            cal = secure.agreed_noise(self.policy)
        except ConfigurationError as exc:
            raise self.refuse(f"{exc}; nothing was released") from None
        self.limits.require_draws(cal.draws, cal.padded, self.site)
        residues = self.publish(cal.release(mechanism + f"+ddg(m={m})"), lambda index: encode_site(
            statistic, gamma=secure.grid_step, rotation=secure.rotation(),
            sigma_sq=cal.sigma_sq, modulus=secure.modulus, draws=cal.draws,
            rng=self.noise.generator(index)))
        self.sum_calibration = cal
        return residues

    def respond(self, arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> np.ndarray:
        """The noisy array answering one round's request (``arrays`` and ``config``: the
        coordinator's, UNTRUSTED: each algorithm checks them before anything is computed
        or charged, and refuses with :meth:`refuse`). Subclasses."""
        raise NotImplementedError

    def check_config(self, config: Mapping[str, Any]) -> None:
        """Refuse a request whose config holds a key the algorithm does not know
        (:attr:`CONFIG_KEYS`, and a secure sum's ``sum_*`` keys at a discrete-noise site)."""
        unknown = set(config) - self.CONFIG_KEYS - (SUM_KEYS if self.discrete else set())
        if unknown:
            raise self.refuse(f"unknown config keys {sorted(unknown)}")

    def requested_sum(self, config: Mapping[str, Any]) -> SecureSum | None:
        """The secure sum a request to a discrete-noise site describes (its ``sum_*`` keys;
        the site compares it with its own statistic before anything is charged), else
        ``None``."""
        return SecureSum.from_config(dict(config), self.site) if self.discrete else None

    def require_dim(self, dim: object) -> None:
        """Refuse a request made for ``dim`` features when this site holds another number."""
        if dim != self.dim:
            raise self.refuse(
                f"the server expects d = {dim!r} features but this site holds "
                f"{self.dim}; every site must use the same features in the same order"
            )

    def refuse(self, reason: str) -> InvalidRequestError:
        """An error naming the site, to raise when a request is malformed."""
        return InvalidRequestError(f"{self.site}: refused: {reason}")

    def require_run(self) -> None:
        """Raise unless what is left of this run fits the site's ledger
        (:func:`require_rest_of_run`): reads its policy and ledger, never its data."""
        require_rest_of_run(self.policy, self.ledger)

    def sum_settings(self, config: Mapping[str, Any]) -> tuple[int | None, bool]:
        """``(M, discrete)`` of the release a request's ``config`` asks for: its answer leaves
        only inside secure sums of at least ``M`` sites (``None``: unmasked), as discrete
        Gaussian residues or not. One release policy here: the site's own, whatever the
        request."""
        return self.secure_min_sites, self.discrete

    def guarantee(self) -> SiteGuarantee:
        """This site's public guarantee for the run (:mod:`fedpca.dp.guarantee`): its
        policy's calibration, or that of the last secure sum of discrete Gaussian residues
        it answered; with secure sums, the worst case of its releases in the run."""
        cal = self.sum_calibration or self.calibration
        return SiteGuarantee(
            epsilon=cal.target_epsilon, epsilon_achieved=cal.epsilon, delta=cal.delta,
            accounting=cal.accounting, noise_multiplier=cal.noise_multiplier,
            clip_norm=self.clip_norm, noise_sampler=self.policy.noise_sampler,
            secure_min_sites=self.secure_min_sites,
            epsilon_worst_case=(None if self.secure_min_sites is None
                                else self.ledger.worst_case_spent()),
        )

    def answer(self, value: np.ndarray) -> SiteAnswer:
        """Package a release with this site's public metadata and guarantee."""
        return SiteAnswer(
            self.site, self.n, value, self.ledger.epsilon_spent(), self.ledger.count,
            self.guarantee(),
        )


def build_sites(
    site_cls: type[PrivateSite],
    sites: Sequence[np.ndarray | SiteData],
    policy: SitePrivacyPolicy,
    seed: int | None = None,
) -> list[PrivateSite]:
    """One ``site_cls`` per array, named ``str(i)`` (the names a Flower simulation uses, so
    seeded noise streams agree); raises unless there is a site and all share ``d``."""
    if not sites:
        raise ConfigurationError("the run needs at least one site")
    built = [site_cls(X, policy, site=str(i), seed=seed) for i, X in enumerate(sites)]
    dims = {s.dim for s in built}
    if len(dims) != 1:
        raise ConfigurationError(f"all sites must have the same number of features, got {dims}")
    return built

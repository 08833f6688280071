"""Private centring and scaling: a site's moments release, the server's aggregation, and the
site's centred rows (no Flower import; a strategy calls the same functions).

A centred run has two steps per site:

1. **Moments.** The site releases the column sums of its preprocessed rows (and, to
   standardise, their sums of squares: :func:`~fedpca.dp.moments.moment_statistic`)
   with Gaussian noise, per-site or inside a secure sum (:meth:`CentringSite.release_moments`).
   A column whose scale the contract states (public knowledge) has no square released: its
   scale is the stated one; when every column's is, a standardised run's moments are the
   centring statistic alone, with its sensitivity, its dimension ``d`` (the secure sum's
   too) and the centring share of the budget (:attr:`CentredPolicy.public_scales`).
   Its rows are a data contract's output, so every column lies in ``[0, w_j]`` and the
   sensitivity comes from the contract alone. The sums are taken of the rows divided by the
   public widths (every column in ``[0, 1]``,
   :meth:`~fedpca.dp.moments.ColumnBounds.unit`): each column's noise is then in
   proportion to its width, where with the raw rows the widest column (a follow-up time in
   days next to 0/1 flags) would set the noise of every column. The server adds the sites'
   releases (or decodes their secure sum) and post-processes the total into a mean and a
   scale in the contract's units (:class:`MomentsServer`,
   :func:`~fedpca.dp.moments.column_moments`,
   :meth:`~fedpca.dp.moments.ColumnMoments.rescaled`).
2. **Centred rows.** The server sends the mean and scale back; the site centres (and
   scales) its rows with them and clips every row to its own public norm ``C``
   (:meth:`CentringSite.centre`); every later release of the run (the algorithm's) reads
   only those clipped rows.

**Local moments** (a policy with ``local``, for LDP-PCA, whose unit is one record against
everyone, its own site included): every record releases its own statistic (its row in width
units, and its squares to standardise) with Gaussian noise of multiplier ``z_m`` at the same
sensitivity (one record's statistic moves by at most that much when the record is
replaced); the site sends the sum of its ``n`` views, drawn as the statistic plus noise of
``sqrt(n)`` times the record's standard deviation (the distribution of that sum), and
charges its ledger the record's own ``z_m``. No secure sums: the local model needs none.
Each record's moments view and its algorithm view then compose to the run's (epsilon,
delta) on their own (unit: one record, local; replace-one).

Privacy guarantee (unit: one record at one site, replace-one): the moments release has the
noise multiplier ``z_m`` of the site's budget split and the algorithm's releases ``z_a``
(:mod:`fedpca.dp.budget_split`, :class:`CentredPolicy`); all are charged to the same
ledger (its budget the run's (epsilon, delta), ``1 + T`` releases), so the whole run is
(epsilon, delta)-DP whatever the server does. A site refuses, before its first release, a
run whose planned releases do not fit its ledger (:meth:`CentredPolicy.plan`).

**What a hostile coordinator can do with the mean and scale it sends** (untrusted input,
checked in :func:`require_centring` before anything is computed from them): any values at
all. Each later release's sensitivity assumes only that every row has norm ``<= C``, and the
site clips its transformed rows to ``C`` (its own policy's value, never the coordinator's),
so the sensitivity, the noise and the charge of every later release hold whatever mean and
scale arrive. What a lie can do is ruin the *utility* (a wrong mean makes the components
point at it; a tiny scale blows every row up to the clip norm) and steer which records
are clipped: a different mean per site, or one that singles out a region of the space, is
still post-processing of released values and public choices, and each later release
stays DP with respect to the site's records (adaptive composition). The site refuses
(:class:`~fedpca.errors.InvalidRequestError`, nothing spent) what it cannot compute with: a
wrong shape, a non-finite value, a scale that is not ``> 0``, or values that would put a
coordinate beyond :data:`MAX_REACH` (float64 would overflow on squaring). The checks read
only the coordinator's values and the public widths, never the rows, so a refusal reveals
nothing about the records.

**Public scales and a hostile coordinator.** Which columns have a public scale, and its
value, come from the site's own contract (its hash is checked before anything else), never
from the coordinator: the site releases the sums of squares of exactly the columns its
contract leaves private, at the sensitivity of that statistic. A coordinator that sends
other scales than the public ones is sending a scale like any other (above: utility only);
one that describes the moments' secure sum with another dimension than the site's own
statistic is refused before anything is drawn or charged
(:meth:`~fedpca.algorithms.secure_sum.SecureSum.check_site`).

**The clip norm** ``C`` is public: the site's policy value, or by default
:data:`DEFAULT_CLIP_FACTOR` times a public bound on the root-mean-square norm of the
transformed rows (:func:`default_clip_norm`): ``sqrt(d)`` after standardising (each column
then has unit variance), ``sqrt(sum_j w_j^2 / 4)`` after centring only (a column in
``[0, w_j]`` has variance at most ``w_j^2 / 4``). The box bound
(:meth:`~fedpca.dp.moments.ColumnMoments.box_norm`) never clips but is loose: a larger
``C`` means more noise on everything (the second moment's sensitivity is ``sqrt(2) C^2``).
How many rows the chosen ``C`` clips is logged at the site only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpca.algorithms.secure_sum import SecureSum, agreed_sum
from fedpca.algorithms.server import ordered_answers, weighted_sum
from fedpca.algorithms.site import PrivateSite, SiteAnswer, SiteLedgerLike
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.algorithms.sum_bounds import checked_decode
from fedpca.data.start_basis import StartBasis
from fedpca.errors import ConfigurationError, InvalidDataError, InvalidRequestError
from fedpca.dp.budget_split import (
    ALGORITHM,
    DEFAULT_MOMENTS_SHARE,
    MOMENTS,
    STANDARDIZE_MOMENTS_SHARE,
    BudgetSplit,
    split_budget,
)
from fedpca.dp.calibration import Calibration
from fedpca.dp.clipping import ClipReport
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.dp.exact_noise import FLOAT, NOISE_SAMPLERS, float_error
from fedpca.dp.ledger import PrivacyLedger
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import planned_run
from fedpca.dp.moments import (
    VARIANCE_FLOOR,
    ColumnBounds,
    ColumnMoments,
    column_moments,
    moment_statistic,
)
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import (
    require_choice,
    require_finite_positive,
    require_positive_int,
    validate_site_data,
)

logger = logging.getLogger(__name__)

#: The moments release's name in ledgers.
MOMENTS_MECHANISM = "centring/column-moments"
#: The history phase of a Flower run's moments round (round 0: before the algorithm's).
MOMENTS_PHASE = "moments"
#: The default clip norm, in units of the public bound on the transformed rows'
#: root-mean-square norm (:func:`default_clip_norm`).
DEFAULT_CLIP_FACTOR = 1.0
#: The largest ``|x - mean| / scale`` a coordinator's mean and scale may imply for any value
#: within the contract's bounds: beyond it squares overflow float64.
MAX_REACH = 1e150
#: A released variance is floored at this many standard deviations of its noise (1, 2 and
#: a soft floor, ``max(var, 0) + sd``, were compared on the two clinical tables of
#: ``benchmarks/tables.py``: 2 had the best mean and worst seed).
NOISE_FLOOR = 2.0


#: run_config ``centring``: the run is not centred (``""``), centred (``"centre"``) or
#: standardised (``"standardize"``); the value is whether it standardises.
CENTRING_MODES: dict[str, bool | None] = {"": None, "centre": False, "standardize": True}


def requested_scaling(value: object, site: str = "site") -> bool | None:
    """Whether the run_config ``centring`` value (UNTRUSTED: the coordinator's) asks for a
    standardised run (``True``), a centred one (``False``) or neither (``None``); refuses
    any other value. Either choice is safe for the site: its own policy splits the same
    budget and clips the transformed rows to its own norm."""
    if not isinstance(value, str) or value not in CENTRING_MODES:
        raise InvalidRequestError(
            f"{site}: refused: run_config centring={value!r} must be one of "
            f"{sorted(CENTRING_MODES)}; nothing was released")
    return CENTRING_MODES[value]


def default_clip_norm(bounds: ColumnBounds, standardize: bool,
                      factor: float = DEFAULT_CLIP_FACTOR) -> float:
    """``factor`` times a public bound on the root-mean-square norm of the transformed rows:
    ``sqrt(d)`` when standardised, ``sqrt(variance_bound)`` when only centred (module
    docstring). Public: it reads the contract's bounds only."""
    require_finite_positive(factor, "factor")
    rms = math.sqrt(bounds.dim) if standardize else math.sqrt(bounds.variance_bound())
    return factor * rms


@dataclass(frozen=True)
class SharePolicy:
    """One part of a centred run's budget as a site policy
    (:class:`~fedpca.algorithms.site.SitePrivacyPolicy`): the site that makes those
    releases calibrates them with :attr:`part` and clips its rows to :attr:`clip_norm`;
    :attr:`run` is the whole run's plan (what is left of it must fit the ledger);
    :attr:`explained_variance`: the algorithm's part includes DPS-PCA's Rayleigh-quotient
    release (:meth:`~fedpca.algorithms.dps_pca.DPSPCASite.release_rayleigh` refuses it
    otherwise)."""

    part: Calibration
    releases: int
    clip_norm: float
    secure_min_sites: int | None
    noise_sampler: str
    discrete: bool
    run: tuple[Release, ...]
    explained_variance: bool = False
    #: A table's centred run starts from no public basis (:func:`fedpca.site.plan.plan_run`);
    #: a private-panel genotype run may (:mod:`fedpca.algorithms.genotype_centring`).
    start: StartBasis | None = None

    def calibration(self) -> Calibration:
        """The part's calibration: its noise multiplier and releases."""
        return self.part

    def plan(self) -> list[Release]:
        """The whole centred run's releases (:meth:`CentredPolicy.plan`)."""
        return list(self.run)


@dataclass(frozen=True)
class CentredPolicy:
    """A site's own settings for a centred run: the run's budget, the share of it spent on
    the moments, whether it standardises, its clip norm. The coordinator cannot change them.

    Attributes:
        epsilon, delta: the whole run's budget (moments and algorithm).
        moments_share: the moments' share of the run's ``1/z^2``; ``None``:
            :data:`~fedpca.dp.budget_split.DEFAULT_MOMENTS_SHARE` (0.1) when centring
            only (or standardising with public scales only),
            :data:`~fedpca.dp.budget_split.STANDARDIZE_MOMENTS_SHARE` (0.3) when
            standardising releases sums of squares (why: :mod:`fedpca.dp.budget_split`).
        standardize: release the sums of squares too (of the columns without a public
            scale) and scale every column to unit variance (else: centre only).
        public_scales: the contract gives every column a public scale
            (:attr:`~fedpca.dp.moments.ColumnBounds.all_public`): standardising then
            releases no squares, and the default share is the centring one. Must agree
            with the bounds the policy is used with when standardising
            (:meth:`require_bounds`).
        clip_norm: the public norm ``C`` the transformed rows are clipped to; ``None``:
            :func:`default_clip_norm` of the contract's bounds.
        accounting: ``"pld"`` (default) or ``"rdp"``.
        noise_sampler: ``"float"`` (simulation only) or ``"exact"`` (a real site's).
        secure_min_sites: ``M``: every answer is revealed only inside secure sums of at least
            ``M`` sites (each site adds ``1/M`` of the noise variance).
        discrete: secure sums of distributed discrete Gaussian messages (needs ``M``).
        algorithm_releases: ``T``, the releases the algorithm makes after the moments.
        local: every record releases its own moments view (local DP, LDP-PCA's unit; module
            docstring); no secure sums.
        site_moments: the moments release is every site's own, outside any secure sum and
            with the whole release's noise (``M`` and ``discrete`` apply to the algorithm's
            releases only): the server sees each site's noisy moments. A private-panel
            genotype run's when its panel says ``frequencies = "per-site"``
            (:mod:`fedpca.data.snp_panel`).
        explained_variance: the last of the ``T`` algorithm releases may be DPS-PCA's
            Rayleigh quotients of its final basis (the explained variance of the centred
            rows, :mod:`fedpca.algorithms.dps_pca`); without it the site refuses that
            release. Not with ``discrete`` or ``local``.
    """

    epsilon: float = 1.0
    delta: float = 1e-5
    moments_share: float | None = None
    standardize: bool = False
    clip_norm: float | None = None
    accounting: str = "pld"
    noise_sampler: str = FLOAT
    secure_min_sites: int | None = None
    discrete: bool = False
    algorithm_releases: int = 1
    local: bool = False
    explained_variance: bool = False
    public_scales: bool = False
    site_moments: bool = False

    def __post_init__(self) -> None:
        require_choice(self.noise_sampler, "noise_sampler", NOISE_SAMPLERS)
        require_positive_int(self.algorithm_releases, "algorithm_releases")
        if self.clip_norm is not None:
            require_finite_positive(self.clip_norm, "clip_norm")
        if self.secure_min_sites is not None:
            require_positive_int(self.secure_min_sites, "secure_min_sites", minimum=2)
        if self.discrete and self.secure_min_sites is None:
            raise ConfigurationError(
                "discrete noise is the distributed discrete Gaussian of secure sums: set "
                "secure-min-sites (M >= 2) with discrete = true (a site's policy: "
                "[secure-aggregation] min-sites)")
        if self.local and self.secure_min_sites is not None:
            raise ConfigurationError(
                "local moments are every record's own views: they go into no secure sum; "
                "run ldp-pca with secure-min-sites = 0 (a site's policy: "
                "[secure-aggregation] min-sites = 0), or run another algorithm")
        if self.site_moments and self.local:
            raise ConfigurationError(
                "local moments are already every record's own: site_moments is for a site's "
                "own sums; drop one of the two")
        if self.explained_variance and (self.discrete or self.local):
            raise ConfigurationError(
                "explained-variance (DPS-PCA's Rayleigh-quotient release) is built for "
                "per-site Gaussian noise only: set explained-variance = false, or run without "
                "secure sums (secure-min-sites = 0)")
        self.split()

    @property
    def share(self) -> float:
        """The moments' share of the run's budget (the default for its scaling if unset:
        the standardising share only when sums of squares are released)."""
        if self.moments_share is not None:
            return self.moments_share
        squares = self.standardize and not self.public_scales
        return STANDARDIZE_MOMENTS_SHARE if squares else DEFAULT_MOMENTS_SHARE

    def require_bounds(self, bounds: ColumnBounds) -> None:
        """Refuse to standardise with ``bounds`` whose public scales are not what
        :attr:`public_scales` says (the split would be that of another release)."""
        if self.standardize and self.public_scales != bounds.all_public:
            raise ConfigurationError(
                f"the policy says public_scales={self.public_scales}, but the contract gives "
                f"{len(bounds.public)} of its {bounds.dim} columns a public scale: build the "
                "policy with public_scales=bounds.all_public (every column public: the moments "
                "carry no squares and take the centring share)")

    def split(self) -> BudgetSplit:
        """The run's multipliers (:func:`~fedpca.dp.budget_split.split_budget`)."""
        return split_budget(self.algorithm_releases, self.epsilon, self.delta, self.share,
                            self.accounting)

    def clip_norm_for(self, bounds: ColumnBounds) -> float:
        """``C``: the policy's, or :func:`default_clip_norm` of ``bounds``."""
        if self.clip_norm is not None:
            return self.clip_norm
        return default_clip_norm(bounds, self.standardize)

    def _share(self, name: str, releases: int, clip_norm: float) -> SharePolicy:
        own = self.site_moments and name == MOMENTS  # outside the secure sums
        return SharePolicy(self.split().part(name), releases, clip_norm,
                           None if own else self.secure_min_sites, self.noise_sampler,
                           self.discrete and not own, tuple(self.plan()),
                           self.explained_variance and name == ALGORITHM)

    def moments_policy(self, bounds: ColumnBounds) -> SharePolicy:
        """The moments release's policy: its multiplier; rows within ``bounds`` need no
        clipping (their norm is at most :meth:`~ColumnBounds.row_norm`). Refused when the
        policy's public scales are not ``bounds``' (:meth:`require_bounds`)."""
        self.require_bounds(bounds)
        return self._share(MOMENTS, 1, bounds.row_norm())

    def algorithm_policy(self, bounds: ColumnBounds) -> SharePolicy:
        """The algorithm's releases' policy: their multiplier and the clip norm ``C``."""
        return self._share(ALGORITHM, self.algorithm_releases, self.clip_norm_for(bounds))

    def ledger(self, site: str) -> PrivacyLedger:
        """A fresh in-memory ledger for one run (a simulation's): the run's (epsilon, delta),
        ``1 + T`` releases, inside secure sums its worst case reported, not bounded."""
        return PrivacyLedger.for_run(self.epsilon, self.delta, self.plan(),
                                     1 + self.algorithm_releases, site)

    def plan(self) -> list[Release]:
        """The run's releases as the site calibrates them (what its ledger must fit before
        the first one): the moments' then the algorithm's, at unit sensitivity."""
        split, m = self.split(), self.secure_min_sites or 0
        return (planned_run(MOMENTS_MECHANISM, 1, split.moments_multiplier,
                            0 if self.site_moments else m)
                + planned_run("centred-run", self.algorithm_releases,
                              split.algorithm_multiplier, m))

    def record(self, bounds: ColumnBounds) -> dict[str, Any]:
        """The run's privacy record: the split, and what the moments release is (with the
        columns whose scale is the contract's, ``public_scales``, when a standardised run
        has any: their squares are not released)."""
        record = {
            **self.split().record(),
            "unit": ("one record, replace-one (its own views, local model)" if self.local
                     else "one record at one site (replace-one)"),
            "standardize": self.standardize,
            "moments_sensitivity": bounds.unit().moments_sensitivity(self.standardize),
            "clip_norm": self.clip_norm_for(bounds),
            "noise_sampler": self.noise_sampler,
        }
        if self.standardize and bounds.public:
            record["public_scales"] = list(bounds.public)
        return record


def bounded_rows(rows: np.ndarray, bounds: ColumnBounds, site: str = "site") -> SiteData:
    """A site's preprocessed rows as :class:`SiteData`, refused unless they lie within the
    contract's ``bounds`` (the moments' sensitivity assumes it); nothing is clipped: every
    such row's norm is at most ``bounds.row_norm()``."""
    X = validate_site_data(rows, site=site, dim=bounds.dim)
    if not bounds.contains(X):
        raise InvalidDataError(
            f"{site}: the rows are not within the contract's bounds (columns in [0, w_j], one "
            "1 per one-hot group); preprocess the table with the contract "
            "(Contract.preprocess) before centring")
    report = ClipReport(rows=X.shape[0], clipped_rows=0, clip_norm=bounds.row_norm(),
                        max_norm_before=float(np.sqrt(np.einsum("ij,ij->i", X, X)).max()))
    return SiteData(X, report, site)


def require_centring(mean: object, scale: object, bounds: ColumnBounds,
                     site: str = "site") -> tuple[np.ndarray, np.ndarray]:
    """The coordinator's mean and scale (UNTRUSTED), refused unless a site can centre with
    them: ``d`` finite values each, every scale ``> 0``, and no value within the public
    bounds sent beyond :data:`MAX_REACH`. Reads the values and the public widths only."""
    d = bounds.dim
    try:
        mean, scale = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidRequestError(
            f"{site}: refused: the mean and scale must be {d} numbers each; nothing was "
            "released") from None
    if mean.shape != (d,) or scale.shape != (d,):
        raise InvalidRequestError(
            f"{site}: refused: the mean and scale must have shape ({d},) for the contract's "
            f"{d} columns, got {mean.shape} and {scale.shape}; nothing was released")
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise InvalidRequestError(
            f"{site}: refused: the mean must be finite and the scale finite and > 0 in every "
            "column; nothing was released")
    widths = np.asarray(bounds.widths)
    reach = np.maximum(np.abs(mean), np.abs(widths - mean)) / scale
    if not np.all(reach <= MAX_REACH):
        raise InvalidRequestError(
            f"{site}: refused: this mean and scale would send values within the contract's "
            f"ranges beyond {MAX_REACH:g}; nothing was released")
    return mean, scale


class CentringSite(PrivateSite):
    """A site's preprocessed rows before centring, under its :class:`CentredPolicy`.

    Args:
        rows: the ``n x d`` output of the contract's preprocessing (within ``bounds``).
        bounds: the contract's public bounds (:attr:`fedpca.data.contract.Contract.bounds`).
        policy: the site's :class:`CentredPolicy`.
        site, seed, limits: as :class:`~fedpca.algorithms.site.PrivateSite`.
        ledger: the run's ledger (default: :meth:`CentredPolicy.ledger`); the algorithm's
            site (:meth:`algorithm_site`) charges the same one.
    """

    def __init__(
        self,
        rows: np.ndarray,
        bounds: ColumnBounds,
        policy: CentredPolicy,
        site: str = "site",
        seed: int | None = None,
        ledger: SiteLedgerLike | None = None,
        limits: SiteLimits | None = None,
    ) -> None:
        super().__init__(bounded_rows(rows, bounds, site), policy.moments_policy(bounds), site,
                         seed, policy.ledger(site) if ledger is None else ledger, limits)
        self.bounds = bounds
        self.centred = policy

    def release_moments(self, secure: SecureSum | None = None) -> np.ndarray:
        """The noisy moment statistic of the rows in width units (each column divided by its
        public width, :meth:`~ColumnBounds.unit`), with per-site noise, or its discrete
        Gaussian message for the secure sum ``secure`` (a policy with ``discrete``); charged
        (:meth:`publish`).

        Refused before anything is drawn or charged when the whole run
        (:meth:`CentredPolicy.plan`) does not fit the ledger, or (secure) when the sum
        does not describe this site's statistic.

        Privacy guarantee: one Gaussian release of multiplier ``z_m`` at the replace-one
        sensitivity :meth:`~ColumnBounds.moments_sensitivity` of the unit bounds (the squares
        of the :meth:`~ColumnBounds.squared` columns only; float
        error bounded for exact noise: every row's statistic has norm ``<= record_norm``;
        a division, a square and the sum: ``n + 2`` rounded terms). With a ``local``
        policy, every record's own view has that guarantee (unit: one record, local): the
        sum of the ``n`` views carries ``sqrt(n)`` times the record's noise.
        """
        self.require_run()
        standardize, unit = self.centred.standardize, self.bounds.unit()
        statistic = moment_statistic(self.X / np.asarray(self.bounds.widths), standardize,
                                     unit.squared())
        self.require_answer_size(statistic.shape)
        sensitivity = unit.moments_sensitivity(standardize)
        norm = unit.record_norm(standardize)
        if self.discrete:
            return self.discrete_release(
                MOMENTS_MECHANISM, statistic, self.discrete_request(secure, None),
                sensitivity=sensitivity, norm_per_record=norm)
        views = math.sqrt(self.n) if self.centred.local else 1.0
        return self.noisy_release(MOMENTS_MECHANISM, statistic, sensitivity,
                                  error=float_error(self.n * norm, self.n + 2), scale=views)

    @property
    def algorithm_clip_norm(self) -> float:
        """``C``, the norm the transformed rows are clipped to (the site's policy's)."""
        return self.centred.clip_norm_for(self.bounds)

    def centre(self, mean: object, scale: object) -> SiteData:
        """The rows centred with ``mean`` and divided by ``scale`` (both UNTRUSTED, from the
        coordinator; :func:`require_centring`), then clipped to :attr:`algorithm_clip_norm`
        (how many is logged here, never sent)."""
        mean, scale = require_centring(mean, scale, self.bounds, self.site)
        rows = ColumnMoments(mean, scale, (), ()).transform(self.X)
        return SiteData.prepare(rows, self.algorithm_clip_norm, self.site)

    def algorithm_site(self, site_cls: type[PrivateSite], mean: object,
                       scale: object) -> PrivateSite:
        """The site of the algorithm (e.g. :class:`~fedpca.algorithms.dpdis_pca.DPdisPCASite`)
        over the :meth:`centre`-d rows, calibrated with the algorithm's share of the
        budget and charging this run's ledger."""
        return site_cls(self.centre(mean, scale), self.centred.algorithm_policy(self.bounds),
                        site=self.site, seed=self.noise.seed, ledger=self.ledger,
                        limits=self.limits)


def moments_sum(policy: CentredPolicy, bounds: ColumnBounds, max_records: int,
                sites_in_sum: int, rotation_seed: int) -> tuple[SecureSum, GridChoice]:
    """The public parameters of the secure sum of ``sites_in_sum`` sites' moment statistics
    (each of at most ``max_records`` records; of the released statistic's own dimension,
    :meth:`~ColumnBounds.statistic_dim`, which a site checks against its own) and the grid a
    site with ``policy`` derives."""
    standardize, unit = policy.standardize, bounds.unit()
    secure = SecureSum(
        sensitivity=unit.moments_sensitivity(standardize), max_records=max_records,
        norm_per_record=unit.record_norm(standardize),
        dimension=bounds.statistic_dim(standardize), sites_in_sum=sites_in_sum,
        rotation_seed=rotation_seed,
    )
    return agreed_sum(secure, policy.moments_policy(bounds))


def moments_noise(policy: CentredPolicy, bounds: ColumnBounds, sites: int,
                  secure: tuple[SecureSum, GridChoice] | None = None,
                  sensitivity: float | None = None) -> float:
    """The standard deviation of the noise on each coordinate of the sum of ``sites``
    sites' moments releases under ``policy`` (width units; public): the decoded secure
    sum's, or ``sites`` per-site draws (each ``1/M`` of the variance inside continuous
    secure sums); with a ``local`` policy, one record's view's (the sum of ``N`` views
    has ``sqrt(N)`` times it). ``sensitivity``: the release's, when it is not the moments'
    of ``bounds`` (a genotype run's allele and called counts)."""
    if secure is not None:
        return secure[1].calibration.central_sigma
    if sensitivity is None:
        sensitivity = bounds.unit().moments_sensitivity(policy.standardize)
    sigma = policy.split().moments_multiplier * sensitivity
    if policy.local:
        return sigma
    if policy.site_moments:
        return sigma * math.sqrt(sites)
    return sigma * math.sqrt(sites / (policy.secure_min_sites or 1))


def moments_server(policy: CentredPolicy, bounds: ColumnBounds, sites: int,
                   secure: tuple[SecureSum, GridChoice] | None = None) -> MomentsServer:
    """The moments round's aggregator for ``sites`` sites under ``policy`` (its secure sum
    ``secure``, if any), with the noise level of its variance floor."""
    policy.require_bounds(bounds)
    return MomentsServer(bounds, policy.standardize, secure,
                         moments_noise(policy, bounds, sites, secure), per_record=policy.local)


class MomentsServer:
    """The aggregator of the moments round: one request, one sum, a mean and a scale.

    Args:
        bounds: the contract's public bounds.
        standardize: whether the sites release sums of squares too.
        secure: the sum's public parameters and the sites' grid (:func:`moments_sum`), for
            sites answering with discrete Gaussian messages.
        noise_sigma: the noise's standard deviation on each coordinate of the sum
            (:func:`moments_noise`), for :meth:`variance_floor`.
        per_record: ``noise_sigma`` is one record's view's (local moments): the sum of
            ``N`` views has ``sqrt(N)`` times it.
    """

    def __init__(self, bounds: ColumnBounds, standardize: bool,
                 secure: tuple[SecureSum, GridChoice] | None = None,
                 noise_sigma: float = 0.0, per_record: bool = False) -> None:
        self.bounds = bounds
        self.standardize = standardize
        self.secure = secure
        self.noise_sigma = noise_sigma
        self.per_record = per_record
        self.moments: ColumnMoments | None = None

    def variance_floor(self, records: int) -> float:
        """The smallest variance kept, in width units: :data:`NOISE_FLOOR` times the noise's
        standard deviation on a released second moment (the sum's noise over ``records``),
        at least :data:`~fedpca.dp.moments.VARIANCE_FLOOR` of the largest. A variance
        below the noise is not told apart from it; rounding it *up* only shrinks that
        column in the PCA, where rounding it down would blow the column up."""
        sigma = self.noise_sigma * (math.sqrt(records) if self.per_record else 1.0)
        return max(VARIANCE_FLOOR / 4, NOISE_FLOOR * sigma / records)

    @property
    def answer_shape(self) -> tuple[int, ...]:
        """Shape every site's answer must have."""
        if self.secure is not None:
            return (self.secure[1].calibration.padded,)
        return (self.bounds.statistic_dim(self.standardize),)

    def request(self) -> dict[str, Any]:
        """What every site is asked: the secure sum's parameters, if any."""
        return {} if self.secure is None else self.secure[0].to_config()

    def receive(self, answers: Sequence[SiteAnswer]) -> ColumnMoments:
        """The released mean and scale from the sites' answers (post-processing)."""
        ordered = ordered_answers(answers, self.answer_shape)
        if self.secure is not None:
            total = checked_decode(self.secure[0], ordered, "the centring moments")
        else:
            total = weighted_sum(ordered, weighted=False)
        records = sum(a.n for a in ordered)
        unit_moments = column_moments(total, records, self.bounds.unit(), self.standardize,
                                      floor=self.variance_floor(records))
        self.moments = unit_moments.rescaled(self.bounds)
        if self.moments.clamped_means or self.moments.floored_variances:
            logger.info("centring: noise clamped the means of columns %s and floored the "
                        "variances of columns %s", list(self.moments.clamped_means),
                        list(self.moments.floored_variances))
        return self.moments

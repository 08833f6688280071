"""Private allele frequencies for a genotype run whose SNP panel says ``standardise =
"private"``: a site's allele-count release, the server's frequencies, the site's rows
standardised with them (no Flower import; the rounds are
:mod:`fedpca.algorithms.centred_rounds`', the release :mod:`fedpca.algorithms.centring`'s).

A private-panel run has the two steps of any centred run:

1. **Allele counts and called counts.** Every site releases, per SNP, the sum of its
   individuals' allele counts ``g_ij`` in ``{0, 1, 2}`` over 2 (a missing call adds 0) and
   its number of called individuals ``c_j`` weighted by :data:`CALLED_WEIGHT` ``lambda``:
   the ``2 d`` values ``(S_j / 2, lambda c_j)`` (:meth:`FrequencySite.release_moments`),
   with per-site Gaussian noise or inside the run's secure sum. The server's frequency is
   then ``p_j = (S_j / 2) / c_j`` over the called individuals only, so a SNP's missing calls
   no longer bias it (counting a missing call as 0 of the public ``n`` estimated
   ``p_j (1 - m_j)``: low by ``m_j p_j`` at a share ``m_j`` of missing calls, an error that
   no budget removes). Once standardised a missing call is 0, the SNP's mean (the panel's
   ``missing = "mean"`` rule).
2. **Standardised rows.** The server turns the noisy total ``S_j`` over ``N`` individuals
   into ``p_j = S_j / (2 N)`` clamped into the public interval :data:`FREQUENCY_BOUNDS`
   (``[0.01, 0.99]``: the scale ``sqrt(2 p (1 - p))`` stays at least 0.14, so no noisy
   frequency near 0 or 1 blows a SNP up) and sends back ``2 p`` and ``sqrt(2 p (1 - p))``
   as the run's mean and scale (:class:`FrequencyServer`); every site standardises its
   calls with them, ``(g - 2 p) / sqrt(2 p (1 - p))`` (missing: 0), clips each row to the
   panel's ``row-norm`` (its own copy) and every later release (DPS-PCA's) reads only
   those rows (:meth:`FrequencySite.algorithm_site`).

Privacy guarantee (unit: one individual's genotype row at one site, replace-one):
replacing one individual moves, at each SNP, ``S_j / 2`` by at most 1 and ``lambda c_j`` by
at most ``lambda``, both at once only when one of the two calls is missing (a call of 2
replaced by a missing one: ``(1, lambda)``; two calls: ``(|g - g'| / 2, 0)``, at most
``(1, 0)``). So the released ``2 d`` values have L2 sensitivity ``sqrt((1 + lambda^2) d)``
(:func:`frequency_sensitivity`), attained by an individual homozygous for allele 1 at every
SNP replaced by one with no call; one record's values have at most that norm too (a secure
sum's norm per record). The release has the moments multiplier ``z_m`` of the site's split of
the run's budget and each of DPS-PCA's releases ``z_a`` (:func:`genotype_policy`; the same
ledger, ``1 + T`` releases with a public start, ``1 + T + 1`` without), so the whole run is
(epsilon, delta)-DP whatever the server does; a site refuses, before its first release, a run
whose planned releases do not fit its ledger.

**The weight** ``lambda = 1/2`` **and the shrinkage.** With noise ``sigma`` per value the
called counts cost every sum ``sqrt(1 + lambda^2)`` (12%) more noise and are themselves known
to ``sigma / lambda``; used as they are, the frequency's variance is about ``(1 + lambda^2)
(1 + p^2 / lambda^2) sigma^2 / c^2``, smallest at ``lambda^2 = p``, and ``1/2`` is within 1.5
times of that optimum for every ``p`` in ``[0.05, 0.5]``. But a count's noise (0.7% of
``n = 100,000`` at eps 1) is as large as the missingness it corrects, so the server shrinks
the noisy counts towards their mean over the SNPs (:func:`shrunk_counts`, empirical Bayes,
post-processing): where SNPs miss alike the mean alone, known ``sqrt(d)`` times better,
corrects the bias at almost no noise; where they miss unlike each other each SNP keeps its
own count. The bias removed does not shrink with the budget; the noise added does.

**The share** (:data:`GENOTYPE_MOMENTS_SHARE`, 0.3 of the run's ``1/z^2``). The release is
sums only (no squares), but unlike a table's mean the frequencies set every SNP's centre
*and* scale, and a scale's error enters the components first order (as when standardising
a table, :data:`~fedpca.dp.budget_split.STANDARDIZE_MOMENTS_SHARE`); they also give the
shifted start its direction (:mod:`fedpca.algorithms.shifted_start`), whose noise falls as
``1/sqrt(share)``; 0.3 costs each power step ``1/sqrt(0.7)``, 20% more noise. Measured
(``benchmarks/genomics.py``' development cohort of scenario (b), d = 5,000, Fst 0.01, secure
sums, T = 1, 3 noise seeds, accuracy at eps 1 / 2 / 4): 0.954 / 0.997 / 1.000 at 0.1,
0.958 / 0.996 / 1.000 at 0.3, 0.944 / 0.993 / 1.000 at 0.5 (T = 2: 0.878, 0.867, 0.848 at
eps 1): flat from 0.1 to 0.3, worse beyond (measured with the shifted run's components
then taken as the top left singular vectors of its last step; its Ritz vectors now).

**What a hostile coordinator can do with the frequencies it sends** (checked in
:func:`require_frequencies` before anything is computed from them): any frequencies in the
public interval. The site clips its standardised rows to its own ``row-norm``, so every
later release's sensitivity, noise and charge hold whatever arrives; a lie ruins the utility
only (wrong centres point the components at them; frequencies near the interval's ends
inflate those SNPs until the clip scales the row down) and steers which rows are clipped,
post-processing of released values and public choices. Refused, nothing spent: a wrong
shape, a non-finite value, a frequency outside the interval, or a scale other than
``sqrt(2 p (1 - p))`` of the frequencies sent; the refusal quotes the public interval and
shapes only, never a value read off the genotypes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from fedpca.algorithms.centring import (
    MOMENTS_MECHANISM,
    CentredPolicy,
    MomentsServer,
    moments_noise,
)
from fedpca.algorithms.secure_sum import SecureSum, agreed_sum
from fedpca.algorithms.server import ordered_answers, weighted_sum
from fedpca.algorithms.site import PrivateSite, SiteAnswer, SiteLedgerLike
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.algorithms.sum_bounds import checked_decode
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.start_basis import StartBasis
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.dp.exact_noise import FLOAT, float_error
from fedpca.dp.moments import ColumnBounds, ColumnMoments
from fedpca.errors import ConfigurationError, InvalidRequestError

#: Every site's own individuals and released frequencies, ``(n_i, p_i)``.
SiteFrequencies = list[tuple[int, np.ndarray]]

#: The public range of an allele count (0, 1 or 2 copies of allele 1).
GENOTYPE_WIDTH = 2.0
#: The called counts' weight ``lambda`` in the frequencies' release (module docstring).
CALLED_WEIGHT = 0.5
#: The public interval every released frequency is clamped into (and a site accepts).
FREQUENCY_BOUNDS = (0.01, 0.99)
#: The allele counts' share of the run's ``1/z^2`` (module docstring: why 0.3).
GENOTYPE_MOMENTS_SHARE = 0.3
#: The share when every site releases its own counts (a panel's ``frequencies =
#: "per-site"``): their differences give the shifted start its site directions, whose noise
#: falls as ``1 / sqrt(share)`` (:mod:`fedpca.algorithms.shifted_start`: why 0.7).
PER_SITE_MOMENTS_SHARE = 0.7
#: How far a sent scale may sit from ``sqrt(2 p (1 - p))`` of the sent frequencies.
SCALE_TOLERANCE = 1e-9


def genotype_bounds(dim: int) -> ColumnBounds:
    """The public bounds of ``dim`` allele-count columns: each in ``[0, 2]``, no groups."""
    return ColumnBounds(widths=(GENOTYPE_WIDTH,) * dim)


def frequency_sensitivity(dim: int) -> float:
    """Replace-one L2 sensitivity of the frequencies' release ``(S / 2, lambda c)`` over
    ``dim`` SNPs, and the most one individual adds to its norm: ``sqrt((1 + lambda^2) d)``
    (module docstring)."""
    return math.sqrt((1.0 + CALLED_WEIGHT**2) * dim)


def frequency_sum(policy: CentredPolicy, dim: int, max_records: int, sites_in_sum: int,
                  rotation_seed: int) -> tuple[SecureSum, GridChoice]:
    """The public parameters of the secure sum of ``sites_in_sum`` sites' frequency releases
    (``2 d`` values each, of at most ``max_records`` individuals) and the grid a site with
    ``policy`` derives (the moments share's calibration)."""
    sensitivity = frequency_sensitivity(dim)
    secure = SecureSum(sensitivity=sensitivity, max_records=max_records,
                       norm_per_record=sensitivity, dimension=2 * dim,
                       sites_in_sum=sites_in_sum, rotation_seed=rotation_seed)
    return agreed_sum(secure, policy.moments_policy(genotype_bounds(dim)))


def released_frequencies(total: np.ndarray, records: int, noise_sigma: float
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The raw frequencies ``(S / 2) / c`` and the call rates ``c / N`` from the decoded
    sum ``total`` of the sites' ``(S / 2, lambda c)`` over ``records`` individuals, whose
    values carry Gaussian noise of standard deviation ``noise_sigma`` (public): the noisy
    called counts are shrunk towards their mean over the SNPs (:func:`shrunk_counts`) and
    kept within ``[1, N]`` first (post-processing)."""
    dim = total.size // 2
    called = shrunk_counts(total[dim:] / CALLED_WEIGHT, noise_sigma / CALLED_WEIGHT)
    called = np.clip(called, 1.0, float(records))
    return total[:dim] / called, called / records


def frequency_variance(total: np.ndarray, records: int, noise_sigma: float,
                       released: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Each released frequency's noise variance, per SNP, for the decoded sum ``total`` and
    what :func:`released_frequencies` made of it (``released``: the raw frequencies and call
    rates; the delta method): ``(sigma^2 + p^2 w sigma^2 / lambda^2) / c^2``, the allele
    counts' noise (``noise_sigma`` on each ``S / 2``, public) and the called count's as
    :func:`shrunk_counts` leaves it (``w sigma^2 / lambda^2``, its weight ``w``: 0 where every
    SNP misses alike), over the released called count ``c``; post-processing."""
    raw, rates = released
    p = np.clip(raw, 0.0, 1.0)
    dim = total.size // 2
    weight = count_weight(total[dim:] / CALLED_WEIGHT, noise_sigma / CALLED_WEIGHT)
    return noise_sigma**2 * (1.0 + weight * (p / CALLED_WEIGHT) ** 2) / (rates * records) ** 2


def shrunk_counts(noisy: np.ndarray, noise_sd: float) -> np.ndarray:
    """``noisy`` called counts (noise of standard deviation ``noise_sd`` on each) shrunk
    towards their mean over the SNPs by ``w = v / (v + noise_sd^2)``, ``v`` the spread the
    noise does not explain (their variance less ``noise_sd^2``, at least 0): the empirical
    Bayes estimate of counts spread around a common call rate. The mean is known to
    ``noise_sd / sqrt(d)``, so where every SNP misses alike (``v`` near 0) the counts cost the
    frequencies almost no noise, and where SNPs miss unlike each other (``v`` large) each
    keeps its own count."""
    centre = float(noisy.mean())
    return centre + count_weight(noisy, noise_sd) * (noisy - centre)


def count_weight(noisy: np.ndarray, noise_sd: float) -> float:
    """:func:`shrunk_counts`' weight ``w = v / (v + noise_sd^2)`` (0 when ``v`` is)."""
    spread = max(float(noisy.var()) - noise_sd**2, 0.0)
    return spread / (spread + noise_sd**2) if spread > 0 else 0.0


def genotype_policy(epsilon: float, delta: float, rounds: int, row_norm: float,
                    start: bool, *, accounting: str = "pld", noise_sampler: str = FLOAT,
                    secure_min_sites: int | None = None,
                    discrete: bool = False, per_site: bool = False) -> CentredPolicy:
    """A site's policy for a private-panel DPS-PCA run of ``rounds`` power steps: the
    allele counts' release (:data:`GENOTYPE_MOMENTS_SHARE`) and DPS-PCA's ``T`` releases
    from a public ``start``, ``T + 1`` without (its initialisation), every row clipped to
    the panel's ``row_norm``. ``per_site`` (the panel's ``frequencies = "per-site"``): the
    counts are the site's own release, outside any secure sum, at
    :data:`PER_SITE_MOMENTS_SHARE`."""
    return CentredPolicy(epsilon=epsilon, delta=delta,
                         moments_share=PER_SITE_MOMENTS_SHARE if per_site
                         else GENOTYPE_MOMENTS_SHARE,
                         clip_norm=row_norm, accounting=accounting,
                         noise_sampler=noise_sampler, secure_min_sites=secure_min_sites,
                         discrete=discrete, algorithm_releases=rounds + int(not start),
                         site_moments=per_site)


def standardisation(frequencies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean ``2 p`` and scale ``sqrt(2 p (1 - p))`` of allele counts of frequency
    ``p``."""
    p = np.asarray(frequencies, dtype=np.float64)
    return 2.0 * p, np.sqrt(2.0 * p * (1.0 - p))


def require_frequencies(mean: object, scale: object, dim: int, site: str = "site"
                        ) -> np.ndarray:
    """The frequencies ``mean / 2`` the coordinator sent (UNTRUSTED) with ``scale``,
    refused unless they are ``dim`` finite numbers within :data:`FREQUENCY_BOUNDS` and
    ``scale`` is their ``sqrt(2 p (1 - p))``; reads the sent values only."""
    low, high = FREQUENCY_BOUNDS
    try:
        mean, scale = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
    except (TypeError, ValueError):
        mean = scale = np.empty(0)
    if mean.shape != (dim,) or scale.shape != (dim,):
        raise InvalidRequestError(
            f"{site}: refused: the frequencies' mean and scale must have shape ({dim},) for "
            f"the panel's {dim} SNPs, got {mean.shape} and {scale.shape}; nothing was "
            "released")
    p = mean / GENOTYPE_WIDTH
    if not (np.isfinite(p).all() and ((p >= low) & (p <= high)).all()):
        raise InvalidRequestError(
            f"{site}: refused: every frequency (mean / 2) must be finite and within the "
            f"public interval [{low}, {high}]; nothing was released")
    if not (np.isfinite(scale).all()
            and np.abs(scale - standardisation(p)[1]).max() <= SCALE_TOLERANCE):
        raise InvalidRequestError(
            f"{site}: refused: the scale must be sqrt(2 p (1 - p)) of the frequencies sent "
            "(to 1e-9); nothing was released")
    return p


class FrequencyServer(MomentsServer):
    """The allele counts' aggregator: the sites' releases (or their decoded secure sum)
    into clamped frequencies over the called individuals, sent as the run's mean ``2 p`` and
    scale ``sqrt(2 p (1 - p))`` (post-processing, nothing spent).

    Args:
        dim: the panel's SNPs.
        secure: the sum's public parameters and the sites' grid (:func:`frequency_sum`), for
            discrete messages.
        noise_sigma: the noise's standard deviation on each coordinate of the sum.
        on_release: called with the released frequencies, their noise's variance per SNP
            (:func:`frequency_variance`) and, when every site released its own
            (``site_sigma``), each site's ``(n_i, p_i)`` (else ``None``): e.g. the
            shifted start's :meth:`~fedpca.algorithms.shifted_start.ShiftedStartServer.shift`.
        site_sigma: the noise's standard deviation on each coordinate of one site's own
            release (a policy's ``site_moments``), or ``None``.
    """

    def __init__(self, dim: int, secure: tuple[SecureSum, GridChoice] | None = None,
                 noise_sigma: float = 0.0,
                 on_release: Callable[[np.ndarray, np.ndarray, SiteFrequencies | None],
                                      None] | None = None,
                 site_sigma: float | None = None) -> None:
        super().__init__(genotype_bounds(dim), False, secure, noise_sigma)
        if site_sigma is not None and secure is not None:
            raise ConfigurationError("per-site frequencies are released outside any secure "
                                     "sum: give a site_sigma or a secure sum, not both")
        self.on_release, self.site_sigma = on_release, site_sigma
        #: The released frequencies (``None`` before the round).
        self.frequencies: np.ndarray | None = None
        #: The released share of called individuals per SNP (``None`` before the round).
        self.call_rates: np.ndarray | None = None

    @property
    def answer_shape(self) -> tuple[int, ...]:
        """Shape every site's answer must have: ``2 d`` values, or the secure sum's padded
        message."""
        if self.secure is not None:
            return (self.secure[1].calibration.padded,)
        return (2 * self.bounds.dim,)

    def receive(self, answers: Sequence[SiteAnswer]) -> ColumnMoments:
        """The frequencies ``(S / 2) / c`` clamped into :data:`FREQUENCY_BOUNDS`, as a mean
        and scale (the clamped SNPs listed as ``clamped_means``)."""
        ordered = ordered_answers(answers, self.answer_shape)
        if self.secure is not None:
            total = checked_decode(self.secure[0], ordered, "the allele and called counts")
        else:
            total = weighted_sum(ordered, weighted=False)
        records = sum(a.n for a in ordered)
        released = released_frequencies(total, records, self.noise_sigma)
        raw, self.call_rates = released
        variance = frequency_variance(total, records, self.noise_sigma, released)
        p = np.clip(raw, *FREQUENCY_BOUNDS)
        self.frequencies = p
        mean, scale = standardisation(p)
        clamped = tuple(int(j) for j in np.flatnonzero(p != raw))
        self.moments = ColumnMoments(mean, scale, clamped, (), standardized=True)
        if self.on_release is not None:
            self.on_release(p, variance, self.site_frequencies(ordered))
        return self.moments

    def site_frequencies(self, answers: Sequence[SiteAnswer]) -> SiteFrequencies | None:
        """Every site's own ``(n_i, p_i)``, ``p_i`` from its release alone (clamped as the
        union's), when every site released its own; else ``None`` (post-processing)."""
        if self.site_sigma is None:
            return None
        return [(a.n, np.clip(released_frequencies(a.value, a.n, self.site_sigma)[0],
                              *FREQUENCY_BOUNDS)) for a in answers]


def frequency_server(policy: CentredPolicy, dim: int, sites: int,
                     secure: tuple[SecureSum, GridChoice] | None = None,
                     on_release: Callable[[np.ndarray, np.ndarray, SiteFrequencies | None],
                                          None] | None = None) -> FrequencyServer:
    """The allele counts' aggregator for ``sites`` sites under ``policy`` (its secure sum
    ``secure``, if any; each site's own frequencies too when the policy's are per site)."""
    bounds, sensitivity = genotype_bounds(dim), frequency_sensitivity(dim)
    noise = moments_noise(policy, bounds, sites, secure, sensitivity)
    site_sigma = (moments_noise(policy, bounds, 1, None, sensitivity) if policy.site_moments
                  else None)
    return FrequencyServer(dim, secure, noise, on_release, site_sigma)


class FrequencySite(PrivateSite):
    """A private-panel site before the frequencies: its raw allele counts, under its
    :class:`~fedpca.algorithms.centring.CentredPolicy` (:func:`genotype_policy`).

    Args:
        rows: the site's genotype rows (their raw counts are read; standardised only with
            the released frequencies).
        policy: the site's policy for the run.
        start: the site's own copy of the run's public start basis (``None``: none).
        site, seed, ledger, limits: as :class:`~fedpca.algorithms.site.PrivateSite`.
    """

    STREAMS_ROWS = True

    def __init__(self, rows: GenotypeRows, policy: CentredPolicy,
                 start: StartBasis | None = None, site: str = "site",
                 seed: int | None = None, ledger: SiteLedgerLike | None = None,
                 limits: SiteLimits | None = None) -> None:
        self.bounds = genotype_bounds(rows.d)
        moments = dataclasses.replace(policy.moments_policy(self.bounds),
                                      clip_norm=rows.clip_norm)
        super().__init__(rows, moments, site, seed,
                         policy.ledger(site) if ledger is None else ledger, limits)
        self.genotypes, self.centred, self.start = rows, policy, start

    def release_moments(self, secure: SecureSum | None = None) -> np.ndarray:
        """The noisy ``(S / 2, lambda c)``: the sums of the allele counts over 2 (missing: 0)
        and the called counts weighted by :data:`CALLED_WEIGHT`, per-site noise or the
        discrete Gaussian message for ``secure``; charged. Refused before anything is drawn
        or charged when the run does not fit the ledger or the sum does not describe this
        statistic.

        Privacy guarantee: one Gaussian release of multiplier ``z_m`` at replace-one L2
        sensitivity ``sqrt((1 + lambda^2) d)`` (module docstring); the counts are integers,
        exact in float64, so the float error is that of one multiplication per value."""
        self.require_run()
        sensitivity = frequency_sensitivity(self.dim)
        self.require_answer_size((2 * self.dim,))
        statistic = np.concatenate([self.genotypes.column_sums() / GENOTYPE_WIDTH,
                                    CALLED_WEIGHT * self.genotypes.called_counts()])
        if self.discrete:
            return self.discrete_release(
                MOMENTS_MECHANISM, statistic, self.discrete_request(secure, None),
                sensitivity=sensitivity, norm_per_record=sensitivity)
        return self.noisy_release(MOMENTS_MECHANISM, statistic, sensitivity,
                                  error=float_error(self.n * sensitivity, self.n + 2))

    def algorithm_site(self, site_cls: type[PrivateSite], mean: object,
                       scale: object) -> PrivateSite:
        """The algorithm's site over the rows standardised with the sent frequencies
        (UNTRUSTED: :func:`require_frequencies`) and clipped to the panel's row-norm,
        calibrated with the algorithm's share, holding the run's start, charging this
        run's ledger."""
        p = require_frequencies(mean, scale, self.dim, self.site)
        share = dataclasses.replace(self.centred.algorithm_policy(self.bounds),
                                    start=self.start)
        return site_cls(self.genotypes.with_frequencies(p), share, site=self.site,
                        seed=self.noise.seed, ledger=self.ledger, limits=self.limits)


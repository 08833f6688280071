"""Splitting one run's budget between the column moments and the algorithm's releases.

A centred run (:mod:`fedpca.algorithms.centring`) makes, per site, one release of the column
moments (sums, and sums of squares to standardise) and then the algorithm's ``T`` releases
(DPdisPCA: 1). Each is a Gaussian release, described for accounting by its noise multiplier
``z = sigma / sensitivity``. Gaussian releases compose exactly into one Gaussian whose
``1/z^2`` is the sum of theirs (their privacy loss distributions are Gaussian; in the
language of Gaussian differential privacy, ``mu^2 = sum mu_i^2`` with ``mu = 1/z``). So a
run's budget is one number, ``1/z^2`` of the single Gaussian release that meets (epsilon,
delta), and the split is exact:

* the moments release gets the share ``f`` of it: ``1/z_m^2 = f / z^2``;
* each of the algorithm's ``T`` releases ``(1 - f) / T`` of it: ``1/z_a^2 = (1 - f) / (T z^2)``.

Calibration: ``z`` is the analytic multiplier of one release at (epsilon, delta)
(:func:`~fedpca.dp.calibration.calibrate_gaussian`); then the composition of *these*
releases, with their different multipliers, is evaluated by the accountant
(:func:`~fedpca.dp.calibration.pld_epsilon`; RDP with ``accounting="rdp"``), and when
its discretisation puts it above epsilon every multiplier is raised by the same factor
(:data:`SPLIT_STEP` at a time) until it does not: the share is kept exactly and the run
meets (epsilon, delta) as the site's ledger will evaluate it. The papers' closed forms
(``accounting="paper"``) calibrate equal releases only, and are refused.

Privacy guarantee (unit: one record at one site, replace-one): a site that adds noise of
multiplier ``z_m`` to its moments (sensitivity from the contract's bounds) and ``z_a`` to each
of its ``T`` algorithm releases is (epsilon, delta)-DP over the whole run, whatever the
share.

The default shares. Centring only, :data:`DEFAULT_MOMENTS_SHARE` = 0.1: the algorithm's
noise grows by ``1/sqrt(1 - f)`` (5% at 0.1) while the mean's noise grows by ``1/sqrt(f)``
(3.2x). Centring with a mean off by ``e`` changes the centred second moment only by
``n e e^T`` (second order in ``e``, and ``e`` falls as ``1/n``), whereas the algorithm's noise
enters first order: at the record counts a federation has (thousands) the mean's noise is
the small term, and a small share costs the components little. Standardising,
:data:`STANDARDIZE_MOMENTS_SHARE` = 0.3: a scale's error enters first order (a column whose
variance is under-estimated by a factor ``a`` weighs ``a`` times too much), with relative
error ``~ z_m Delta(Q) / (n var)``, large for a column whose spread is small beside its
public range; 0.3 costs the algorithm 20% more noise. ``benchmarks/tables.py`` measures
Analyze Gauss's captured variance on two public clinical tables at shares 0.1 to 0.5: 0.1
lost up to 0.06 against 0.3 at eps 1, 0.5 gained up to 0.013. Standardising with a public
scale for every column (the contract's) releases no squares, only the sums: the centring
share, 0.1 (:class:`fedpca.algorithms.centring.CentredPolicy` with ``public_scales``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from fedpca.errors import ConfigurationError
from fedpca.dp.calibration import (
    Calibration,
    calibrate_gaussian,
    check_privacy_parameters,
    pld_epsilon,
    rdp_epsilon,
)
from fedpca.dp.ddg_accounting import ddg_pld_epsilon

#: The share of a run's budget (of its ``1/z^2``) spent on the column means by default.
DEFAULT_MOMENTS_SHARE = 0.1
#: The default share when the moments include the sums of squares (to standardise).
STANDARDIZE_MOMENTS_SHARE = 0.3
#: The accountants a split can be calibrated with.
SPLIT_ACCOUNTING = ("pld", "rdp")
#: Every multiplier is raised by this factor at a time while the accountant says the
#: composition exceeds epsilon (its discretisation only; a few steps at most).
SPLIT_STEP = 1e-4
#: Names of the two parts in records.
MOMENTS, ALGORITHM = "moments", "algorithm"


def gaussian_epsilon(multiplier: float, releases: int, delta: float) -> float:
    """Epsilon at ``delta`` of ``releases`` Gaussian releases of multiplier ``multiplier``,
    from the Gaussian's exact (closed-form) privacy loss curve, not a discretised one."""
    return ddg_pld_epsilon([(multiplier, 0.0)] * releases, delta)


@dataclass(frozen=True)
class BudgetSplit:
    """A run's budget split between the moments release and the algorithm's releases.

    Attributes:
        epsilon, delta: the run's target.
        share: ``f``, the moments' share of the run's ``1/z^2``.
        moments_multiplier: ``z_m`` of the one moments release.
        algorithm_multiplier: ``z_a`` of each of the algorithm's releases.
        algorithm_releases: ``T``.
        epsilon_achieved: epsilon of the whole run's composition at ``delta`` (the
            accountant's, ``<= epsilon``).
        accounting: ``"pld"`` or ``"rdp"``.
    """

    epsilon: float
    delta: float
    share: float
    moments_multiplier: float
    algorithm_multiplier: float
    algorithm_releases: int
    epsilon_achieved: float
    accounting: str

    @property
    def multipliers(self) -> tuple[float, ...]:
        """The run's noise multipliers in release order: the moments', then the algorithm's."""
        return (self.moments_multiplier,) + (self.algorithm_multiplier,) * self.algorithm_releases

    def part(self, name: str) -> Calibration:
        """One part (:data:`MOMENTS` or :data:`ALGORITHM`) as a
        :class:`~fedpca.dp.calibration.Calibration`: its multiplier and releases, and as
        its epsilon and target the epsilon its releases have *alone* at ``delta`` (exact
        Gaussian curve). A secure sum's grid calibrated to that target has at least the
        part's noise, so the split's composition still holds."""
        z, releases = ((self.moments_multiplier, 1) if name == MOMENTS
                       else (self.algorithm_multiplier, self.algorithm_releases))
        alone = gaussian_epsilon(z, releases, self.delta)
        return Calibration(
            noise_multiplier=z, releases=releases, epsilon=alone,
            epsilon_rdp=rdp_epsilon((z,) * releases, self.delta), delta=self.delta,
            target_epsilon=alone, accounting=self.accounting,
        )

    def record(self) -> dict[str, float | int | str]:
        """The split as a result's privacy record states it."""
        return {
            "epsilon": self.epsilon,
            "epsilon_achieved": self.epsilon_achieved,
            "delta": self.delta,
            "accounting": self.accounting,
            "moments_share": self.share,
            "moments_noise_multiplier": self.moments_multiplier,
            "algorithm_noise_multiplier": self.algorithm_multiplier,
            "releases_per_site": 1 + self.algorithm_releases,
        }


@functools.lru_cache(maxsize=256)
def split_budget(
    algorithm_releases: int,
    epsilon: float,
    delta: float,
    share: float = DEFAULT_MOMENTS_SHARE,
    accounting: str = "pld",
) -> BudgetSplit:
    """The multipliers of a run of one moments release and ``algorithm_releases`` releases
    that meets (epsilon, delta), the moments taking ``share`` of its ``1/z^2`` (module
    docstring).

    Privacy guarantee: the composition of the returned multipliers is (epsilon, delta)-DP by
    the ``accounting`` accountant (``epsilon_achieved <= epsilon``), per record of a site
    whose releases have these multipliers at their own sensitivities.
    """
    check_privacy_parameters(epsilon, delta)
    if not isinstance(algorithm_releases, int) or algorithm_releases < 1:
        raise ConfigurationError(
            f"algorithm_releases must be an integer >= 1, got {algorithm_releases!r}")
    if not (isinstance(share, (int, float)) and 0 < share < 1):
        raise ConfigurationError(
            f"the moments' share of the budget must be strictly between 0 and 1, got "
            f"{share!r}; the default is {DEFAULT_MOMENTS_SHARE}")
    if accounting not in SPLIT_ACCOUNTING:
        raise ConfigurationError(
            f"a budget split needs accounting 'pld' or 'rdp' (it composes releases of "
            f"different noise), got {accounting!r}; the papers' closed forms calibrate equal "
            "releases only")
    accountant = pld_epsilon if accounting == "pld" else rdp_epsilon
    z = calibrate_gaussian(1, epsilon, delta, accounting).noise_multiplier
    base = (z / math.sqrt(share), z * math.sqrt(algorithm_releases / (1 - share)))
    factor = 1.0
    while True:
        multipliers = (base[0] * factor,) + (base[1] * factor,) * algorithm_releases
        achieved = accountant(multipliers, delta)
        if achieved <= epsilon:
            break
        factor *= 1 + SPLIT_STEP
    return BudgetSplit(
        epsilon=epsilon, delta=delta, share=share, moments_multiplier=multipliers[0],
        algorithm_multiplier=multipliers[1], algorithm_releases=algorithm_releases,
        epsilon_achieved=achieved, accounting=accounting,
    )

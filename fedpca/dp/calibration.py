"""Gaussian noise calibration for the composition of all releases a site makes.

A Gaussian release with L2 sensitivity ``D`` and noise standard deviation ``sigma`` is fully
described, for privacy accounting, by its noise multiplier ``z = sigma / D``: its privacy loss
distribution is that of ``N(0, z^2)`` against ``N(1, z^2)`` whatever the neighbouring relation
that produced ``D``. fedpca computes ``D`` for the *replace-one* relation itself (see
``fedpca.dp.mechanisms``) and hands ``z`` to ``dp-accounting`` as a ``GaussianDpEvent``; the
accountant's add/remove-one relation then means exactly "a shift of one sensitivity unit".

Accounting modes (``accounting=``):

* ``"pld"`` (default): the smallest ``z`` such that ``releases`` compositions meet
  (epsilon, delta), found with dp-accounting's privacy-loss-distribution accountant (tight).
* ``"rdp"``: the same search with the Renyi accountant (looser, kept as a cross-check).
* ``"paper"``: a paper's closed form, for reproducing its figures (``paper_rule``):
  ``"dps-pca"`` is paper 000's ``z = T/eps * sqrt(2 ln(2T/delta))`` (basic composition of T
  classic Gaussian mechanisms; the paper writes ``sigma = 2T/eps sqrt(...)`` with sensitivity
  2, fedpca applies the multiplier to the corrected sensitivity); ``"classic"`` is
  ``z = sqrt(2 ln(1.25/delta)) / eps`` for one release (valid only for eps < 1).

Whatever the mode, the (epsilon, delta) a calibration *achieves* is evaluated with the PLD
accountant and reported, with the RDP figure beside it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fedpca.dp import calibration_cache
from fedpca.errors import ConfigurationError, ParameterError
from fedpca.dp.validation import require_choice

if TYPE_CHECKING:  # dp-accounting (with scipy.signal) takes ~0.4 s to import: only when used
    import dp_accounting
    from dp_accounting import pld

ACCOUNTING_MODES = ("pld", "rdp", "paper")
PAPER_RULES = ("dps-pca", "classic")

#: PLD discretisation of the privacy loss per unit of ``sum 1/z^2`` (at least this fine).
#: The PLD accountant is pessimistic, so a coarser grid only over-states epsilon; 1e-3
#: changes epsilon in the 5th digit and makes a ledger check 10x faster than 1e-4.
PLD_DISCRETISATION = 1e-3
#: Bracket for the noise-multiplier search.
MULTIPLIER_BRACKET = (1e-3, 1e6)


@dataclass(frozen=True)
class Calibration:
    """The noise multiplier for ``releases`` Gaussian releases and what it achieves.

    Attributes:
        noise_multiplier: ``z = sigma / sensitivity`` for every release.
        releases: number of releases composed (initialisation included).
        epsilon: epsilon achieved at ``delta`` by the composition (PLD accountant).
        epsilon_rdp: the same figure from the RDP accountant (an upper bound, cross-check).
        delta: the delta at which epsilon is stated.
        target_epsilon: the epsilon asked for.
        accounting: the mode that chose ``noise_multiplier``.
    """

    noise_multiplier: float
    releases: int
    epsilon: float
    epsilon_rdp: float
    delta: float
    target_epsilon: float
    accounting: str

    def sigma(self, sensitivity: float) -> float:
        """Noise standard deviation for a release of L2 ``sensitivity``."""
        return self.noise_multiplier * sensitivity

    def record(self, sensitivity: float) -> dict[str, float | int | str]:
        """The fields every result's privacy record shares, for releases of ``sensitivity``."""
        return {
            "epsilon": self.target_epsilon,
            "epsilon_achieved": self.epsilon,
            "epsilon_rdp": self.epsilon_rdp,
            "delta": self.delta,
            "accounting": self.accounting,
            "releases_per_site": self.releases,
            "noise_multiplier": self.noise_multiplier,
            "sensitivity": sensitivity,
            "sigma": self.sigma(sensitivity),
        }


def check_privacy_parameters(epsilon: float, delta: float) -> None:
    """Raise ConfigurationError unless 0 < epsilon < inf and 0 < delta < 1."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(
            "{epsilon} must be a finite number > 0", {"epsilon": epsilon},
            hint="pass e.g. {epsilon}=1.0",
        )
    if not (isinstance(delta, (int, float)) and math.isfinite(delta) and 0 < delta < 1):
        raise ParameterError(
            "{delta} must be a number in (0, 1)", {"delta": delta},
            hint="a common choice is 1/n^1.1 or smaller, e.g. {delta}=1e-5",
        )


def composed_gaussian_event(multipliers: tuple[float, ...]) -> dp_accounting.DpEvent:
    """The dp-accounting event for Gaussian releases with these noise multipliers."""
    import dp_accounting

    return dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), count)
        for z, count in sorted(collections.Counter(multipliers).items())
    ])


def _pld_accountant(multipliers: tuple[float, ...]) -> pld.PLDAccountant:
    """A PLD accountant whose grid grows with the privacy loss (bounded memory and time)."""
    from dp_accounting import pld

    loss = sum(1.0 / z**2 for z in multipliers)
    return pld.PLDAccountant(value_discretization_interval=PLD_DISCRETISATION * max(1.0, loss))


@functools.lru_cache(maxsize=4096)
def pld_epsilon(multipliers: tuple[float, ...], delta: float) -> float:
    """Epsilon at ``delta`` of composed Gaussian releases (PLD accountant, cached; kept on
    disk, and checked to be at least their exact epsilon before it is used again, in a
    process that keeps calibrations: :mod:`fedpca.dp.calibration_cache`)."""
    if not multipliers:
        return 0.0
    kept = calibration_cache.load_epsilon(multipliers, delta)
    if kept is not None:
        return kept
    epsilon = _pld_epsilon(multipliers, delta)
    calibration_cache.store_epsilon(multipliers, delta, epsilon)
    return epsilon


def _pld_epsilon(multipliers: tuple[float, ...], delta: float) -> float:
    """:func:`pld_epsilon`'s accountant."""
    accountant = _pld_accountant(multipliers)
    accountant.compose(composed_gaussian_event(multipliers))
    with np.errstate(over="ignore", divide="ignore"):  # overflow means "beyond the grid"
        epsilon = float(accountant.get_epsilon(delta))
    if not math.isfinite(epsilon):
        # The PLD grid cannot represent very small noise (epsilon in the hundreds); RDP is
        # also a valid upper bound, only looser, so the guarantee stays sound.
        epsilon = rdp_epsilon(multipliers, delta)
    return epsilon


@functools.lru_cache(maxsize=4096)
def rdp_epsilon(multipliers: tuple[float, ...], delta: float) -> float:
    """Epsilon at ``delta`` of composed Gaussian releases (RDP accountant, cached)."""
    if not multipliers:
        return 0.0
    from dp_accounting import rdp

    accountant = rdp.RdpAccountant()
    accountant.compose(composed_gaussian_event(multipliers))
    return float(accountant.get_epsilon(delta))


def paper_dps_pca_multiplier(releases: int, epsilon: float, delta: float) -> float:
    """Paper 000's closed form ``T/eps * sqrt(2 ln(2T/delta))`` (basic composition)."""
    if epsilon / releases >= 1:
        raise ParameterError(
            f"the paper's DPS-PCA formula composes {releases} classic Gaussian mechanisms of "
            f"{{epsilon}}/{releases} each, which is only valid below 1 per release",
            {"epsilon": epsilon, "accounting": "paper"},
            hint="set {accounting} to 'pld' or use a smaller {epsilon}",
        )
    return releases / epsilon * math.sqrt(2 * math.log(2 * releases / delta))


def classic_gaussian_multiplier(releases: int, epsilon: float, delta: float) -> float:
    """The classic ``sqrt(2 ln(1.25/delta)) / eps`` for a single release (eps < 1 only)."""
    if releases != 1:
        raise ConfigurationError(
            f"the classic Gaussian formula calibrates one release, got {releases}; "
            "use accounting='pld' for compositions"
        )
    if epsilon >= 1:
        raise ParameterError(
            "{accounting} 'paper' (the classic Gaussian mechanism) is only valid for "
            "{epsilon} < 1", {"epsilon": epsilon, "accounting": "paper"},
            hint="set {accounting} to 'pld' (analytic, valid for any epsilon)",
        )
    return math.sqrt(2 * math.log(1.25 / delta)) / epsilon


_PAPER_FORMULAS = {"dps-pca": paper_dps_pca_multiplier, "classic": classic_gaussian_multiplier}


def _search_multiplier(
    accountant_factory, releases: int, epsilon: float, delta: float, bracket: tuple[float, float]
) -> float:
    import dp_accounting

    return float(
        dp_accounting.calibrate_dp_mechanism(
            accountant_factory,
            lambda z: dp_accounting.SelfComposedDpEvent(
                dp_accounting.GaussianDpEvent(z), releases
            ),
            epsilon,
            delta,
            bracket_interval=dp_accounting.ExplicitBracketInterval(*bracket),
        )
    )


def _pld_multiplier(releases: int, epsilon: float, delta: float, rdp_multiplier: float) -> float:
    """PLD search bracketed by the RDP answer (PLD <= RDP); tiny multipliers would make the
    PLD grid enormous, so the lower end starts at a quarter of the RDP figure."""
    low = rdp_multiplier / 4
    while low > MULTIPLIER_BRACKET[0] and pld_epsilon((low,) * releases, delta) <= epsilon:
        low /= 2
    return _search_multiplier(
        lambda: _pld_accountant((low,) * releases), releases, epsilon, delta,
        (low, rdp_multiplier),
    )


@functools.lru_cache(maxsize=256)
def calibrate_gaussian(
    releases: int,
    epsilon: float,
    delta: float,
    accounting: str = "pld",
    paper_rule: str = "classic",
) -> Calibration:
    """Noise multiplier so that ``releases`` Gaussian releases are (epsilon, delta)-DP.

    Privacy guarantee: every release made with ``sigma = noise_multiplier * D`` (``D`` its
    replace-one L2 sensitivity) composes, over ``releases`` releases, to (epsilon, delta)-DP
    per record of the releasing site; ``Calibration.epsilon`` states what is achieved.

    Args:
        releases: how many releases the site will make in total (>= 1).
        epsilon: target epsilon (> 0).
        delta: target delta in (0, 1).
        accounting: ``"pld"`` (default), ``"rdp"`` or ``"paper"``.
        paper_rule: which closed form ``"paper"`` means: ``"dps-pca"`` or ``"classic"``.

    In a process that keeps calibrations on disk (a real site:
    :mod:`fedpca.dp.calibration_cache`), a kept one is used only once it is checked to meet
    these parameters; otherwise it is computed and kept.
    """
    check_privacy_parameters(epsilon, delta)
    if not isinstance(releases, int) or releases < 1:
        raise ConfigurationError(f"releases must be an integer >= 1, got {releases!r}")
    require_choice(accounting, "accounting", ACCOUNTING_MODES)
    params = {"releases": releases, "epsilon": float(epsilon), "delta": float(delta),
              "accounting": accounting, "paper_rule": paper_rule}
    kept = calibration_cache.load(params)  # checked against params before it is used
    if kept is not None:
        return Calibration(**kept)
    calibration = _calibrate(releases, epsilon, delta, accounting, paper_rule)
    calibration_cache.store(params, dataclasses.asdict(calibration))
    return calibration


def _calibrate(releases: int, epsilon: float, delta: float, accounting: str,
               paper_rule: str) -> Calibration:
    """:func:`calibrate_gaussian`'s search (or closed form) and its check."""
    if accounting in ("pld", "rdp"):
        from dp_accounting import rdp

        z = _search_multiplier(rdp.RdpAccountant, releases, epsilon, delta, MULTIPLIER_BRACKET)
        if accounting == "pld":
            z = _pld_multiplier(releases, epsilon, delta, z)
    else:
        if paper_rule not in _PAPER_FORMULAS:
            raise ConfigurationError(
                f"paper_rule must be one of {PAPER_RULES}, got {paper_rule!r}"
            )
        z = _PAPER_FORMULAS[paper_rule](releases, epsilon, delta)
    multipliers = (z,) * releases
    achieved = pld_epsilon(multipliers, delta)
    if achieved > epsilon * (1 + 1e-6):
        raise ConfigurationError(
            f"calibration failed: multiplier {z:.4g} gives epsilon {achieved:.4g} > {epsilon}"
        )
    return Calibration(
        noise_multiplier=z,
        releases=releases,
        epsilon=achieved,
        epsilon_rdp=rdp_epsilon(multipliers, delta),
        delta=delta,
        target_epsilon=epsilon,
        accounting=accounting,
    )

"""Splitting a central centred run's budget between its Gaussian moments release and an
algorithm whose guarantee is not a Gaussian mechanism's: MOD-SuLQ (the paper's own
calibration, (alpha, delta) by its Theorem 1) and PPCA (the exponential mechanism, pure).

The Gaussian split (:mod:`fedpca.dp.budget_split`) composes releases through their
``1/z^2``; these two algorithms have no noise multiplier to add there, so the run is
composed by *basic composition* (Dwork and Roth, "The Algorithmic Foundations of
Differential Privacy", Theorem 3.16): an (eps_m, delta_m)-DP release followed by an
(eps_a, delta_a)-DP one, chosen with the first one's output (the algorithm runs on rows
centred with the released mean), is (eps_m + eps_a, delta_m + delta_a)-DP.

The split, from the site's :class:`~fedpca.algorithms.centring.CentredPolicy` (its epsilon,
delta and moments share ``f``):

* the moments keep the noise multiplier ``z_m`` the Gaussian split gives them (the share
  ``f`` of the run's ``1/z^2``), so the mean and scale are exactly as noisy as in every
  other centred run under the same policy;
* their epsilon is read off the Gaussian's exact privacy curve at ``delta_m``:
  ``eps_m = eps_G(z_m; delta_m)`` (one release);
* the algorithm gets the rest: ``eps_a = eps - eps_m`` at ``delta_a = delta - delta_m``.
  PPCA is pure: ``delta_m = delta``, ``delta_a = 0``. MOD-SuLQ needs a delta of its own:
  ``delta_m = delta_a = delta / 2``.

Privacy guarantee (unit: one record of the curator's pooled data, replace-one): the two
parts sum to the run's target, ``eps_m + eps_a = eps`` and ``delta_m + delta_a = delta``,
so the run is (eps, delta)-DP. A split that leaves the algorithm nothing (``eps_m >= eps``:
a share close to 1) is refused before anything is released.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedpca.errors import ConfigurationError
from fedpca.dp.budget_split import BudgetSplit, gaussian_epsilon

#: How the parts compose, as the privacy record states it.
BASIC_COMPOSITION = "basic (Dwork and Roth, Theorem 3.16): epsilons and deltas add"


@dataclass(frozen=True)
class BasicSplit:
    """A run's (epsilon, delta) split by basic composition (module docstring).

    Attributes:
        epsilon, delta: the run's target.
        share: ``f``, the moments' share of the Gaussian split's ``1/z^2`` (sets ``z_m``).
        moments_multiplier: ``z_m``, the moments release's noise multiplier.
        moments_epsilon, moments_delta: that release's guarantee.
        algorithm_epsilon, algorithm_delta: the algorithm's budget, the rest.
    """

    epsilon: float
    delta: float
    share: float
    moments_multiplier: float
    moments_epsilon: float
    moments_delta: float
    algorithm_epsilon: float
    algorithm_delta: float

    def record(self) -> dict[str, float | str]:
        """The split as a result's privacy record states it."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "composition": BASIC_COMPOSITION,
            "moments_share": self.share,
            "moments_noise_multiplier": self.moments_multiplier,
            "moments_epsilon": self.moments_epsilon,
            "moments_delta": self.moments_delta,
            "algorithm_epsilon": self.algorithm_epsilon,
            "algorithm_delta": self.algorithm_delta,
        }


def basic_split(gaussian: BudgetSplit, pure_algorithm: bool) -> BasicSplit:
    """The basic-composition split of the run ``gaussian`` describes (its target and its
    moments' multiplier): the algorithm pure (PPCA, ``delta_a = 0``) or not (MOD-SuLQ,
    ``delta_a = delta / 2``).

    Privacy guarantee: the moments release of multiplier ``z_m`` is (eps_m, delta_m)-DP and
    an (eps_a, delta_a)-DP algorithm after it makes the run (epsilon, delta)-DP.
    """
    epsilon, delta = gaussian.epsilon, gaussian.delta
    moments_delta = delta if pure_algorithm else delta / 2
    moments_epsilon = gaussian_epsilon(gaussian.moments_multiplier, 1, moments_delta)
    if moments_epsilon >= epsilon:
        raise ConfigurationError(
            f"the moments share {gaussian.share} of epsilon={epsilon} leaves the algorithm "
            f"nothing under basic composition (the moments alone spend {moments_epsilon:.4g} "
            f"at delta={moments_delta:g}); lower the policy's moments_share")
    return BasicSplit(
        epsilon=epsilon, delta=delta, share=gaussian.share,
        moments_multiplier=gaussian.moments_multiplier, moments_epsilon=moments_epsilon,
        moments_delta=moments_delta, algorithm_epsilon=epsilon - moments_epsilon,
        algorithm_delta=delta - moments_delta,
    )

"""A per-site privacy ledger: every release a site made, and refusal of any that would overspend.

Privacy guarantee enforced: the composition of all recorded releases stays (epsilon,
delta)-DP per record of the site (PLD accountant; for distributed discrete Gaussian
releases also their Renyi-DP bound, whichever is smaller), and no more than ``max_releases`` releases
are made. A refused release leaves the ledger unchanged and nothing is released.

Releases inside secure sums have two guarantees (:class:`~fedpca.dp.events.Release`):
``epsilon`` bounds the conditional one (every sum holds at least ``M`` honest sites' shares),
``worst_case_epsilon``, when set, the unconditional one (the sites' own shares alone, what a
coordinator that bypasses the protocol sees), both at ``delta``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from fedpca.dp.accountant import EPSILON_SLACK, composed_epsilon, worst_case_epsilon
from fedpca.dp.calibration import check_privacy_parameters
from fedpca.dp.events import Release
from fedpca.errors import BudgetExceededError, ConfigurationError

@dataclass
class PrivacyLedger:
    """What one site has released, and what it may still release.

    Args:
        epsilon: the site's total epsilon budget.
        delta: the site's total delta.
        max_releases: hard cap on the number of releases (e.g. ``T + 1`` for DPS-PCA);
            ``None`` means only the (epsilon, delta) budget limits.
        site: a name used in error messages.
        worst_case_epsilon: a bound on the unconditional epsilon of releases inside secure
            sums (:func:`worst_case_epsilon`); ``None``: reported, not bounded.
    """

    epsilon: float
    delta: float
    max_releases: int | None = None
    site: str = "site"
    releases: list[Release] = field(default_factory=list)
    worst_case_epsilon: float | None = None

    def __post_init__(self) -> None:
        check_privacy_parameters(self.epsilon, self.delta)
        if self.worst_case_epsilon is not None:
            check_privacy_parameters(self.worst_case_epsilon, self.delta)
        if self.max_releases is not None and self.max_releases < 1:
            raise ConfigurationError(f"max_releases must be >= 1, got {self.max_releases}")

    @property
    def count(self) -> int:
        """Number of releases made so far."""
        return len(self.releases)

    def epsilon_spent(self) -> float:
        """Epsilon spent so far at the ledger's delta (PLD accountant; releases inside secure
        sums at their conditional guarantee)."""
        return composed_epsilon(self.releases, self.delta)

    def worst_case_spent(self) -> float:
        """The unconditional epsilon spent so far (:func:`worst_case_epsilon`)."""
        return worst_case_epsilon(self.releases, self.delta)

    def check(self, release: Release) -> None:
        """Raise BudgetExceededError if ``release`` would overspend; change nothing."""
        refused = f"{self.site}: refused {release.mechanism}"
        if not (math.isfinite(release.sigma) and release.sigma > 0):
            raise BudgetExceededError(
                f"{refused}: noise sigma must be finite and > 0, got {release.sigma!r}"
            )
        reason = self._refusal(release)
        if reason is not None:
            raise BudgetExceededError(f"{refused}: {reason}; nothing was released")

    def _refusal(self, release: Release) -> str | None:
        """Why ``release`` would pass a bound (the release cap, the budget, the worst-case
        bound for a release inside a secure sum), or ``None`` if it passes none."""
        if self.max_releases is not None and self.count >= self.max_releases:
            return (f"this site allows {self.max_releases} releases and has made {self.count}; "
                    "the server asked for more rounds than the site's policy")
        after = composed_epsilon([*self.releases, release], self.delta)
        if after > self.epsilon * (1 + EPSILON_SLACK):
            return (f"it would raise epsilon spent from {self.epsilon_spent():.4g} to "
                    f"{after:.4g}, above the site's budget {self.epsilon} (delta={self.delta})")
        if self.worst_case_epsilon is not None and release.sites_in_sum:
            worst = worst_case_epsilon([*self.releases, release], self.delta)
            if worst > self.worst_case_epsilon * (1 + EPSILON_SLACK):
                return (f"against a coordinator that bypasses the secure sum it would raise "
                        f"epsilon to {worst:.4g}, above the site's worst-case budget "
                        f"{self.worst_case_epsilon} (delta={self.delta})")
        return None

    def charge(self, release: Release) -> None:
        """Record ``release`` after :meth:`check`; raises and records nothing if refused."""
        self.check(release)
        self.releases.append(release)

    def require_run(self, planned: Sequence[Release]) -> None:
        """Raise BudgetExceededError unless the ``planned`` releases (what is left of a run
        as the site calibrates it) would all be charged after those made: within
        ``max_releases``, ``epsilon`` and the worst-case bound; records nothing."""
        trial = dataclasses.replace(self, releases=list(self.releases))
        for release in planned:
            trial.charge(release)

    def summary(self) -> dict[str, float | int]:
        """What has been spent, in a form safe to send in plaintext."""
        return {
            "releases": self.count,
            "epsilon_spent": self.epsilon_spent(),
            "epsilon_worst_case": self.worst_case_spent(),
            "epsilon_budget": self.epsilon,
            "delta": self.delta,
        }

    def to_dict(self) -> dict[str, list]:
        """Flat lists describing the releases (for storage in a Flower ConfigRecord)."""
        return {
            "mechanism": [r.mechanism for r in self.releases],
            "sensitivity": [float(r.sensitivity) for r in self.releases],
            "sigma": [float(r.sigma) for r in self.releases],
            "shape": [",".join(str(s) for s in r.shape) for r in self.releases],
            "summands": [r.summands for r in self.releases],
            "padded": [r.padded for r in self.releases],
            "sites_in_sum": [r.sites_in_sum for r in self.releases],
            "grid_step": [float(r.grid_step) for r in self.releases],
        }

    def restore(self, stored: dict[str, list]) -> None:
        """Load releases saved by :meth:`to_dict` (replacing the current list)."""
        self.releases = [
            Release(m, float(s), float(g), tuple(int(v) for v in sh.split(",") if v),
                    int(k), int(p), int(n), float(step))
            for m, s, g, sh, k, p, n, step in zip(
                stored["mechanism"], stored["sensitivity"], stored["sigma"], stored["shape"],
                stored["summands"], stored["padded"], stored["sites_in_sum"],
                stored["grid_step"], strict=True,
            )
        ]

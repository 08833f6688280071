"""The budget rules every ledger decides by, and a simulated site's in-memory ledger.

Privacy guarantee enforced (unit: one record of the site, replace-one): a release, or a whole
run's planned releases, is refused unless, composed with every release already charged (PLD
accountant; with distributed discrete Gaussian releases among them, the smaller of their two
valid bounds, :func:`fedpca.dp.accountant.composed_epsilon`), the ledger's ``(epsilon,
delta)`` still holds; releases inside secure sums of at least ``M`` sites also keep the
unconditional guarantee of the site's own shares (:func:`~fedpca.dp.accountant.worst_case_epsilon`,
what a coordinator that bypasses the protocol sees) within ``worst_case_epsilon``, and a ledger
without that bound refuses every secure release; the releases charged in the current UTC
calendar day and in the last 7 x 24 hours stay within ``daily_epsilon`` and
``weekly_epsilon``; a run makes at most its cap of releases; every release has finite,
positive noise and sensitivity. A refused release leaves the ledger unchanged and nothing is
released.

:class:`BudgetRules` is the one place these rules are written: :meth:`BudgetRules.refusal` decides
a charge (one new release) and whether a run fits (its planned releases) alike. Two stores
keep the releases it reads: :class:`PrivacyLedger` (one simulated run's, in memory) and the
real site's SQLite lifetime ledger (:class:`fedpca.site.ledger.SiteLedger`), so a simulated and
a real site refuse the same things.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from fedpca.dp.accountant import EPSILON_SLACK, composed_epsilon, worst_case_epsilon
from fedpca.dp.calibration import check_privacy_parameters
from fedpca.dp.events import Release
from fedpca.errors import BudgetExceededError, ConfigurationError

#: Seconds of a calendar day (UTC: Unix time counts no leap seconds) and of a rolling week.
DAY_SECONDS, WEEK_SECONDS = 86_400.0, 7 * 86_400.0
#: What each spending window holds, for refusals and the ledger's report.
WINDOWS = {"daily": "the calendar day in UTC", "weekly": "the last 7 x 24 hours"}

#: The worst-case bound of a simulated site, whose policy states none: its unconditional
#: epsilon is reported (:meth:`PrivacyLedger.worst_case_spent`), not bounded. A real site's
#: policy must state a finite one (``budget.worst-case-epsilon``).
UNBOUNDED = math.inf

#: A release with the time it was (or would be) charged, in Unix seconds.
Dated = tuple[Release, float]


def window_starts(now: float) -> dict[str, float]:
    """When each spending window holding ``now`` began (Unix seconds): ``daily`` at the
    start of its UTC calendar day, ``weekly`` 7 x 24 hours earlier."""
    return {"daily": now - now % DAY_SECONDS, "weekly": now - WEEK_SECONDS}


def utc_text(seconds: float) -> str:
    """``seconds`` (Unix) as ``YYYY-MM-DD HH:MM:SS`` in UTC."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


@dataclass(frozen=True)
class BudgetRules:
    """What a site may release: its budgets, and the one decision every ledger asks.

    Args:
        epsilon, delta: the budget (conditional guarantee of secure releases); a real site's
            lifetime budget, a simulated run's calibrated target.
        worst_case_epsilon: the bound, at ``delta``, on the unconditional guarantee of all
            releases (secure ones at their own share); ``None`` refuses every release inside
            a secure sum; :data:`UNBOUNDED` (a simulation's) reports it, bounding nothing.
        daily_epsilon, weekly_epsilon: ceilings, at ``delta``, on the releases charged in the
            current UTC calendar day and in the last 7 x 24 hours; ``None``: no ceiling.
        site: the site's name, for messages.
        scope: what the budget covers, for messages (``"lifetime"``; ``""``: a simulated
            run's own budget).
    """

    epsilon: float
    delta: float
    worst_case_epsilon: float | None = None
    daily_epsilon: float | None = None
    weekly_epsilon: float | None = None
    site: str = "site"
    scope: str = "lifetime"

    def __post_init__(self) -> None:
        check_privacy_parameters(self.epsilon, self.delta)
        for bound in (self.worst_case_epsilon, self.daily_epsilon, self.weekly_epsilon):
            if bound not in (None, UNBOUNDED):
                check_privacy_parameters(bound, self.delta)

    @property
    def ceilings(self) -> dict[str, float | None]:
        """Each spending window's ceiling (``None``: none)."""
        return {"daily": self.daily_epsilon, "weekly": self.weekly_epsilon}

    def refusal(self, spent: Sequence[Dated], new: Sequence[Release], now: float, *,
                cap: int | None = None, made: int = 0, algorithm: str = "",
                after: str = "this release") -> str | None:
        """Why the ``new`` releases, charged at ``now`` after the ``spent`` ones (``made`` of
        them in this run, which allows ``cap``), would break a rule; ``None`` when they fit.
        One release: a charge; a run's planned releases: whether the run fits. The rules, in
        order: finite positive noise and sensitivity, the run's cap, the budget, the
        worst-case bound (when a new release is inside secure sums), the weekly and daily
        ceilings. Public numbers only (budgets, epsilons of the releases)."""
        for release in new:
            if not all(math.isfinite(v) and v > 0 for v in (release.sigma, release.sensitivity)):
                return "sigma and sensitivity must be finite and > 0"
        if cap is not None and made + len(new) > cap:
            of = f" of {algorithm}" if algorithm else ""
            return (f"this site's policy allows {cap} releases per run{of} and this run has "
                    f"made {made}")
        dated = [*spent, *((release, now) for release in new)]
        return next(self._bounds(dated, now, any(r.sites_in_sum for r in new), after), None)

    def require_run(self, spent: Sequence[Dated], planned: Sequence[Release], now: float, *,
                    cap: int | None = None, made: int = 0, algorithm: str = "") -> None:
        """Refuse (:class:`~fedpca.errors.BudgetExceededError`) a run whose ``planned``
        releases (what is left of it as the site calibrates it) do not all fit
        (:meth:`refusal`, every one of them assumed to land ``now``): a site asks this
        before the run's first release, so that it spends nothing on a run it cannot
        finish."""
        reason = self.refusal(spent, planned, now, cap=cap, made=made, algorithm=algorithm,
                              after="this run")
        if reason is not None:
            of = f" of {algorithm}" if algorithm else ""
            raise BudgetExceededError(
                f"{self.site}: refused this run{of}: the {len(planned)} releases left of it, "
                f"as this site calibrates them, do not fit: {reason}; nothing was released")

    def require_release(self, spent: Sequence[Dated], release: Release, now: float, *,
                        cap: int | None = None, made: int = 0, algorithm: str = "") -> None:
        """Refuse (:class:`~fedpca.errors.BudgetExceededError`) a charge of ``release``
        that breaks a rule (:meth:`refusal`)."""
        reason = self.refusal(spent, [release], now, cap=cap, made=made, algorithm=algorithm)
        if reason is not None:
            raise BudgetExceededError(
                f"{self.site}: refused {release.mechanism}: {reason}; nothing was released")

    def _bounds(self, dated: Sequence[Dated], now: float, secure: bool,
                after: str) -> Iterator[str]:
        """Each bound the ``dated`` releases would pass, the longest-lasting first; each
        reason quotes the epsilon ``after`` (e.g. "this release") they would reach."""
        releases = [release for release, _ in dated]
        budget = f"{self.scope} budget" if self.scope else "budget"
        spent = composed_epsilon(releases, self.delta)
        if spent > self.epsilon * (1 + EPSILON_SLACK):
            yield (f"the site's {budget} epsilon={self.epsilon:g} "
                   f"(delta={self.delta:g}) would be exceeded ({spent:.4g} after {after})")
        if secure and self.worst_case_epsilon is None:
            yield ("it is revealed only inside secure sums, and this site's policy sets no "
                   "budget.worst-case-epsilon for what a coordinator that bypasses the secure "
                   "sum would see; set one (fedpca site init suggests values)")
        elif secure and self.worst_case_epsilon != UNBOUNDED:
            worst = worst_case_epsilon(releases, self.delta)
            if worst > self.worst_case_epsilon * (1 + EPSILON_SLACK):
                yield (f"against a coordinator that bypasses the secure sum, the site's "
                       f"worst-case {budget} epsilon={self.worst_case_epsilon:g} "
                       f"(delta={self.delta:g}) would be exceeded ({worst:.4g} after {after})")
        for window, since in reversed(window_starts(now).items()):
            ceiling = self.ceilings[window]
            if ceiling is None:
                continue
            inside = composed_epsilon([r for r, t in dated if t >= since], self.delta)
            if inside > ceiling * (1 + EPSILON_SLACK):
                reopens = (f"the day ends at {utc_text(since + DAY_SECONDS)} UTC"
                           if window == "daily" else
                           "a release leaves it 7 days after it was made")
                yield (f"the site's {window} ceiling epsilon={ceiling:g} (delta={self.delta:g}) "
                       f"over {WINDOWS[window]} would be exceeded ({inside:.4g} after {after}); "
                       f"{reopens}")


@dataclass
class PrivacyLedger:
    """One simulated run's releases at one site, in memory, under :class:`BudgetRules`.

    Args:
        epsilon: the run's epsilon budget.
        delta: its delta.
        max_releases: the run's cap on releases (e.g. ``T + 1`` for DPS-PCA); ``None``
            means only the (epsilon, delta) budget limits.
        site: a name used in error messages.
        worst_case_epsilon: a bound on the unconditional epsilon of releases inside secure
            sums (:func:`worst_case_epsilon`); ``None`` refuses every secure release, as a
            real site's ledger does; :data:`UNBOUNDED` reports it only.
    """

    epsilon: float
    delta: float
    max_releases: int | None = None
    site: str = "site"
    releases: list[Release] = field(default_factory=list)
    worst_case_epsilon: float | None = None

    def __post_init__(self) -> None:
        self.rules = BudgetRules(self.epsilon, self.delta, self.worst_case_epsilon,
                                 site=self.site, scope="")
        if self.max_releases is not None and self.max_releases < 1:
            raise ConfigurationError(f"max_releases must be >= 1, got {self.max_releases}")

    @classmethod
    def for_run(cls, epsilon: float, delta: float, planned: Sequence[Release],
                max_releases: int, site: str = "site") -> PrivacyLedger:
        """A fresh ledger for one simulated run of the ``planned`` releases: its budget
        ``(epsilon, delta)``, at most ``max_releases`` releases and, when the run is inside
        secure sums, the :data:`UNBOUNDED` worst case of a site whose policy states none."""
        secure = any(release.sites_in_sum for release in planned)
        return cls(epsilon, delta, max_releases=max_releases, site=site,
                   worst_case_epsilon=UNBOUNDED if secure else None)

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
        """Raise BudgetExceededError if ``release`` would break a rule; change nothing."""
        self.rules.require_release(self._dated(), release, 0.0, cap=self.max_releases,
                                   made=self.count)

    def charge(self, release: Release) -> None:
        """Record ``release`` after :meth:`check`; raises and records nothing if refused."""
        self.check(release)
        self.releases.append(release)

    def require_run(self, planned: Sequence[Release]) -> None:
        """Raise BudgetExceededError unless the ``planned`` releases (what is left of a run
        as the site calibrates it) fit after those made (:meth:`BudgetRules.require_run`);
        records nothing."""
        self.rules.require_run(self._dated(), planned, 0.0, cap=self.max_releases,
                               made=self.count)

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

    def _dated(self) -> list[Dated]:
        """The releases made, as the rules read them (an in-memory run has no spending
        windows, so every release is dated 0)."""
        return [(release, 0.0) for release in self.releases]

"""A secure sum with the distributed discrete Gaussian: its public parameters, the grid and noise
the members agree on, a site's check of that noise against its own policy, the run's agreed
description of every round's sum, and the server's decoding (no Flower import).

Privacy guarantee (unit: one record of one site, replace-one; trust model
:data:`VERIFIED_TRUST`: the coordinator learns only sums over at least ``M`` honest sites,
``M`` the site's own ``secure_min_sites``, and each message alone is DP at the site's
worst-case epsilon): a site's message is its statistic rounded on the grid, rotated,
plus discrete Gaussian noise calibrated so that every sum of at least ``M`` messages is
(epsilon, delta)-DP for the site's records over its policy's releases
(:mod:`fedpca.dp.distributed_gaussian`, Kairouz, Liu, Steinke, "The Distributed
Discrete Gaussian Mechanism for Federated Learning with Secure Aggregation").

**One noise for every member.** A sum decodes only if every member rounds on the same grid, and
its noise is what the members really add, not what one of them assumes. So the grid step, the
per-draw variance and the draws per member are part of the sum's public description
(:class:`SecureSum`), proposed by the coordinator (the honest one derives them from the
consortium's common policy, :func:`agreed_sum`) and fixed for the whole run in the run's
:class:`SumDescription`, which every member signs in its key advertisement
(:mod:`fedpca.secure.authenticated`): a member shown another description derives another
session and its peers' signatures fail. Each member checks the agreed noise against its *own*
policy (:meth:`SecureSum.agreed_noise`: the noise of ``M`` members' shares, ``M`` its own,
must meet its budget over its releases) and refuses a noise below it before anything is
charged; it records exactly that noise. A member with a laxer policy adds the agreed noise,
never less; a stricter one refuses a description whose noise is below its need.

What a coordinator that sends each member different values could do with each field, and what
stops it: ``sensitivity``, ``norm_per_record``, ``dimension`` (a smaller sensitivity, a shorter
statistic): the site compares them with its own statistic (:meth:`SecureSum.check_site`);
``max_records`` (how many records a member may hold), ``sites_in_sum`` (the wrap bound's
``N``), ``grid_step``, ``sigma_sq``, ``draws`` (the noise), ``modulus`` and ``rotation_seed``
(whether the members' residues add up): a per-member value is caught by the signatures over
the description before the site sends any share, and a round's request must name exactly the
description's sum for that round (:mod:`fedpca.site.secure_stage`) before the site computes
anything.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from fedpca.errors import ConfigurationError, InvalidRequestError, quoted
from fedpca.dp.ddg_encoding import decode_sum, modular_sum
from fedpca.dp.distributed_gaussian import (
    DEFAULT_MODULUS,
    DEFAULT_WRAP_PROBABILITY,
    DDGCalibration,
    GridChoice,
    agreed_calibration,
    choose_grid,
    wrap_probability,
)
from fedpca.dp.hadamard import RandomizedHadamard

#: The trust model of every distributed discrete Gaussian secure sum (``{m}``: the sites' M).
VERIFIED_TRUST = (
    "secure sum (distributed discrete Gaussian) through fedpca's verifiable secure "
    "aggregation: the coordinator can unmask only sums holding at least m={m} honest sites' "
    "messages unless more members collude with it than the sites assume; against any "
    "coordinator each site's own share is epsilon_worst_case-DP"
)

#: The prefix of the request config keys that describe a secure sum.
SUM_PREFIX = "sum_"


@dataclass(frozen=True)
class SecureSum:
    """The public parameters of one secure sum of site statistics.

    Attributes:
        sensitivity: replace-one L2 sensitivity of one site's statistic.
        max_records: a public bound on every site's record count (a site holding more
            refuses); with the clip norm it bounds the statistic's norm.
        norm_per_record: the statistic's norm grows by at most this per record (``C^2`` for a
            second moment), so ``max_records * norm_per_record`` bounds it.
        dimension: the statistic's length.
        sites_in_sum: how many sites' messages the server sums (the wrap bound's ``N``).
        rotation_seed: the public seed of the randomized Hadamard rotation.
        modulus: the modular group of the sum (a power of two, at most ``2^31``).
        grid_step: ``gamma``, data units per grid unit, that every member rounds on (0: not
            agreed yet, :meth:`with_grid`).
        sigma_sq: the variance (grid units^2) of each discrete Gaussian draw every member adds.
        draws: the draws per coordinate every member adds (its share's variance is
            ``draws * sigma_sq`` grid units^2).
    """

    sensitivity: float
    max_records: int
    norm_per_record: float
    dimension: int
    sites_in_sum: int
    rotation_seed: int
    modulus: int = DEFAULT_MODULUS
    grid_step: float = 0.0
    sigma_sq: int = 0
    draws: int = 0

    def to_config(self) -> dict[str, int | float]:
        """The request config keys describing this sum (``sum_*``)."""
        return {SUM_PREFIX + f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_config(cls, config: dict[str, Any], site: str) -> SecureSum:
        """The sum a request's ``sum_*`` keys describe (untrusted: refused unless every key
        is there with a finite number of the right type; the site then compares it with its
        own statistic, :meth:`check_site`)."""
        values = {}
        for f in fields(cls):
            value = config.get(SUM_PREFIX + f.name)
            kind = float if f.type == "float" else int
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or (kind is int and value != int(value)):
                raise InvalidRequestError(
                    f"{site}: refused: a secure-sum request must carry {SUM_PREFIX + f.name} "
                    f"as a finite {kind.__name__}, got {quoted(value)}; nothing was released"
                )
            values[f.name] = kind(value)
        return cls(**values)

    @property
    def norm_bound(self) -> float:
        """A public bound on a site's statistic's L2 norm."""
        return self.max_records * self.norm_per_record

    def rotation(self) -> RandomizedHadamard:
        """The public rotation every site applies and the server undoes."""
        return RandomizedHadamard(self.dimension, self.rotation_seed)

    @property
    def agreed(self) -> bool:
        """Whether the sum names the grid and noise every member adds."""
        return self.grid_step > 0 and self.sigma_sq >= 1 and self.draws >= 1

    def public_part(self) -> SecureSum:
        """The sum without its rotation seed and agreed noise (what a grid is chosen from)."""
        return replace(self, rotation_seed=0, grid_step=0.0, sigma_sq=0, draws=0)

    def grid(self, epsilon: float, delta: float, releases: int, min_sites: int) -> GridChoice:
        """The grid, noise and modulus of a site whose policy gives ``(epsilon, delta)`` over
        ``releases`` releases, each revealed only in sums of at least ``min_sites`` sites.
        Raises (quoting public quantities only) when no grid meets the wrap bound. The
        rotation and any agreed noise play no part in it (cached without them)."""
        return _grid(self.public_part(), epsilon, delta, releases, min_sites)

    def with_grid(self, grid: GridChoice) -> SecureSum:
        """This sum with ``grid``'s step and noise as the noise every member adds."""
        cal = grid.calibration
        return replace(self, modulus=grid.modulus, grid_step=grid.gamma,
                       sigma_sq=cal.sigma_sq, draws=cal.draws)

    def agreed_noise(self, policy: Any) -> DDGCalibration:
        """The agreed noise of this sum (:attr:`grid_step`, :attr:`sigma_sq`, :attr:`draws`)
        as a release of a site with ``policy``: the noise of ``M`` members' shares (``M`` the
        policy's ``secure_min_sites``) at the policy's calibration target over its releases.

        Raises:
            ConfigurationError: the sum names no agreed noise, that noise is below what the
                policy needs (quoting public numbers only), or its modular sum could wrap.
        """
        if not self.agreed:
            raise ConfigurationError(
                "the secure sum names no agreed grid and noise (sum_grid_step, sum_sigma_sq, "
                "sum_draws); every member must add the noise the run's description fixes")
        cal = policy.calibration()
        return _agreed(replace(self, rotation_seed=0), cal.target_epsilon, cal.delta,
                       policy.releases, policy.secure_min_sites)

    def grid_for(self, policy: Any) -> GridChoice:
        """:meth:`grid` for a site policy (its calibration's target (epsilon, delta), its
        releases and its ``secure_min_sites``)."""
        cal = policy.calibration()
        return self.grid(cal.target_epsilon, cal.delta, policy.releases, policy.secure_min_sites)

    def check_site(self, records: int, min_sites: int, site: str, statistic: SecureSum) -> None:
        """Refuse, before anything is charged, a sum this site cannot take part in.

        ``statistic`` is the site's own description of what it sums (sensitivity, norm per
        record and length from its clip norm and data shape): the request must name exactly
        these, so a coordinator cannot make a site calibrate for a smaller sensitivity."""
        own = (statistic.sensitivity, statistic.norm_per_record, statistic.dimension,
               statistic.modulus)
        if (self.sensitivity, self.norm_per_record, self.dimension, self.modulus) != own:
            raise InvalidRequestError(
                f"{site}: refused: the request describes a sum of sensitivity "
                f"{self.sensitivity:g}, norm per record {self.norm_per_record:g}, length "
                f"{self.dimension} and modulus {self.modulus}, but this site's statistic has "
                f"{own[0]:g}, {own[1]:g}, {own[2]} and {own[3]} (from its own clip norm, "
                "data shape and modulus); nothing was released"
            )
        if records > self.max_records:
            raise InvalidRequestError(
                f"{site}: refused: the secure sum bounds every site at max_records="
                f"{self.max_records} records and this site holds more; raise max_records"
            )
        if self.sites_in_sum < min_sites:
            raise InvalidRequestError(
                f"{site}: refused: the sum would hold {self.sites_in_sum} sites, fewer than "
                f"this site's minimum M={min_sites}; nothing was released"
            )

    def decode(self, messages: list[np.ndarray]) -> np.ndarray:
        """The (noisy) sum of the sites' statistics from their messages on the agreed grid:
        the modular sum, centred, un-rotated and rescaled (the verifiable secure aggregation
        hands the server only the modular sum; a reference run adds the messages itself)."""
        if not self.agreed:
            raise ConfigurationError("a secure sum decodes only on its agreed grid (with_grid)")
        total = modular_sum([np.asarray(m, dtype=np.int64) for m in messages], self.modulus)
        return decode_sum(total, gamma=self.grid_step, rotation=self.rotation(),
                          modulus=self.modulus)


#: Every request config key describing a secure sum.
SUM_KEYS = frozenset(SUM_PREFIX + f.name for f in fields(SecureSum))


#: The format of a run's description (:meth:`SumDescription.to_text`).
DESCRIPTION_FORMAT = "fedpca-sum-description/1"


@dataclass(frozen=True)
class SumDescription:
    """The agreed description of a run's secure sums: every value that sets a member's grid,
    noise or decoding in any round, fixed at the run's setup and signed by every member
    (:class:`~fedpca.secure.messages.SetupRequest`'s ``description``).

    Attributes:
        min_sites: ``M``, the fewest honest members in any sum the run's threshold keeps.
        colluders: ``c``, the members the threshold assumes may collude with the coordinator.
        sums: round ``r``'s sum at index ``r - 1`` (``None``: round ``r`` has no secure sum).
    """

    min_sites: int
    colluders: int
    sums: tuple[SecureSum | None, ...]

    @property
    def rounds(self) -> int:
        """The rounds the description covers."""
        return len(self.sums)

    def round_sum(self, round_number: int) -> SecureSum | None:
        """Round ``round_number``'s sum (1-based; ``None`` outside the rounds)."""
        return self.sums[round_number - 1] if 1 <= round_number <= len(self.sums) else None

    def to_text(self) -> str:
        """The canonical JSON text every member signs: the distinct sums once, then each
        round's index into them (-1: none)."""
        distinct = list(dict.fromkeys(s for s in self.sums if s is not None))
        return json.dumps({
            "format": DESCRIPTION_FORMAT, "min_sites": self.min_sites,
            "colluders": self.colluders,
            "sums": [{f.name: getattr(s, f.name) for f in fields(SecureSum)} for s in distinct],
            "rounds": [-1 if s is None else distinct.index(s) for s in self.sums],
        }, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str, site: str) -> SumDescription:
        """The description ``text`` states (UNTRUSTED: refused, quoting no value of it,
        unless it is exactly such a text with every sum's fields of the right type)."""
        def refuse(what: str) -> InvalidRequestError:
            return InvalidRequestError(f"{site}: refused: the run's description of its secure "
                                       f"sums {what}; nothing was sent")

        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise refuse("is not JSON") from None
        if not isinstance(data, dict) or set(data) != {"format", "min_sites", "colluders",
                                                       "sums", "rounds"}:
            raise refuse("is not a fedpca sum description (missing or unexpected keys)")
        if data["format"] != DESCRIPTION_FORMAT:
            raise refuse(f"has another format than {DESCRIPTION_FORMAT}")
        counts = (data["min_sites"], data["colluders"])
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts):
            raise refuse("states min_sites or colluders that are not integers >= 0")
        sums, rounds = data["sums"], data["rounds"]
        if not isinstance(sums, list) or not isinstance(rounds, list) or not all(
                isinstance(s, dict) for s in sums):
            raise refuse("holds no list of sums and rounds")
        names = {f.name for f in fields(SecureSum)}
        if any(set(s) != names for s in sums):
            raise refuse("holds a sum with missing or unexpected fields")
        public = [SecureSum.from_config({SUM_PREFIX + k: v for k, v in s.items()}, site)
                  for s in sums]
        if not all(isinstance(i, int) and not isinstance(i, bool) and -1 <= i < len(public)
                   for i in rounds):
            raise refuse("names a sum it does not hold for a round")
        description = cls(counts[0], counts[1],
                          tuple(None if i < 0 else public[i] for i in rounds))
        if description.to_text() != text:
            raise refuse("is not in its canonical form")
        return description


def public_seed(seed: int | None = None) -> int:
    """The rotation's public seed (its randomness protects no one): ``seed`` when given (a
    reproducible simulation's), else a fresh one."""
    return seed if seed is not None else int(np.random.SeedSequence().entropy % 2**32)


def agreed_sum(public: SecureSum, policy: Any) -> tuple[SecureSum, GridChoice]:
    """The sum ``public`` with the grid and noise a site with ``policy`` derives
    (:meth:`SecureSum.grid_for`) as the noise every member adds, and that grid: what the
    honest coordinator proposes when every member holds ``policy``."""
    grid = public.grid_for(policy)
    return public.with_grid(grid), grid


@functools.lru_cache(maxsize=256)
def _agreed(secure: SecureSum, epsilon: float, delta: float, releases: int,
            min_sites: int) -> DDGCalibration:
    wrap = wrap_probability(norm_bound=secure.norm_bound, sites_in_sum=secure.sites_in_sum,
                            dimension=secure.dimension, gamma=secure.grid_step,
                            sigma_sq=secure.sigma_sq, draws=secure.draws,
                            modulus=secure.modulus)
    if wrap > DEFAULT_WRAP_PROBABILITY:
        raise ConfigurationError(
            f"a modular sum can wrap: on the agreed grid (step {secure.grid_step:.4g}) with "
            f"the agreed noise the sum of {secure.sites_in_sum} sites wraps with probability "
            f"{wrap:.3g} (at most "
            f"{DEFAULT_WRAP_PROBABILITY:g} allowed); the run's description must use a "
            "coarser grid or fewer sites per sum")
    return agreed_calibration(
        epsilon, delta, releases=releases, sensitivity=secure.sensitivity,
        dimension=secure.dimension, sites=min_sites, gamma=secure.grid_step,
        norm_bound=secure.norm_bound, sigma_sq=secure.sigma_sq, draws=secure.draws)


@functools.lru_cache(maxsize=64)
def _grid(secure: SecureSum, epsilon: float, delta: float, releases: int,
          min_sites: int) -> GridChoice:
    return choose_grid(
        epsilon, delta, releases=releases, sensitivity=secure.sensitivity,
        norm_bound=secure.norm_bound, dimension=secure.dimension, sites=min_sites,
        sites_in_sum=secure.sites_in_sum, modulus=secure.modulus,
    )

"""A secure sum with the distributed discrete Gaussian: its public parameters, the grid every
site derives from them and its own policy, and the server's decoding (no Flower import).

Privacy guarantee (unit: one record of one site, replace-one; trust model
:data:`VERIFIED_TRUST`: the coordinator learns only sums over at least ``M`` honest sites,
``M`` the site's own ``secure_min_sites``, and each message alone is DP at the site's
worst-case epsilon): a site's message is its statistic rounded on the grid, rotated,
plus discrete Gaussian noise calibrated so that every sum of at least ``M`` messages is
(epsilon, delta)-DP for the site's records over its policy's releases
(:mod:`fedpca.dp.distributed_gaussian`, Kairouz, Liu, Steinke, "The Distributed
Discrete Gaussian Mechanism for Federated Learning with Secure Aggregation"). The grid, the
noise and the modulus are computed by the site from public quantities and its own policy;
the coordinator only proposes the public quantities (a site refuses one that does not fit).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from fedpca.errors import InvalidRequestError
from fedpca.dp.ddg_encoding import decode_sum, modular_sum
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS, GridChoice, choose_grid
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
    """

    sensitivity: float
    max_records: int
    norm_per_record: float
    dimension: int
    sites_in_sum: int
    rotation_seed: int
    modulus: int = DEFAULT_MODULUS

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
                    f"as a finite {kind.__name__}, got {value!r}; nothing was released"
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

    def grid(self, epsilon: float, delta: float, releases: int, min_sites: int) -> GridChoice:
        """The grid, noise and modulus of a site whose policy gives ``(epsilon, delta)`` over
        ``releases`` releases, each revealed only in sums of at least ``min_sites`` sites.
        Raises (quoting public quantities only) when no grid meets the wrap bound. The
        rotation plays no part in it (cached without its seed)."""
        return _grid(replace(self, rotation_seed=0), epsilon, delta, releases, min_sites)

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

    def decode(self, messages: list[np.ndarray], grid: GridChoice) -> np.ndarray:
        """The (noisy) sum of the sites' statistics from their messages: the modular sum,
        centred, un-rotated and rescaled. Over Flower's SecAgg+ the server receives the
        modular sum only; here (simulation, reference) it adds the messages itself."""
        total = modular_sum([np.asarray(m, dtype=np.int64) for m in messages], grid.modulus)
        return decode_sum(total, gamma=grid.gamma, rotation=self.rotation(),
                          modulus=grid.modulus)


@dataclass(frozen=True)
class SecAggPlusEmbedding:
    """How a site's residues modulo ``m`` pass through Flower's SecAgg+ unchanged, so that
    the server learns their sum modulo ``m`` and nothing else (no Flower import: this is
    arithmetic on Flower's published quantisation).

    SecAgg+ scales a site's floats by ``round(w / max_weight * q) / q``, clips them to
    ``[-c, c]``, maps them to ``(x + c) q / (2c)``, rounds stochastically, adds masks and sums
    modulo its ``modulus_range``. With ``c = (m - 1) / 2``, ``q = m - 1``,
    ``modulus_range = m`` and ``w = max_weight = 1`` every step is exact on the half-integers
    ``r - (m - 1) / 2`` (``0 <= r < m``, ``m <= 2^31``): the quantised value is ``r`` itself
    and the server's unmasked sum is ``sum_i r_i mod m``. Any other setting could round,
    clip, scale or reveal more than the sum modulo ``m`` (e.g. a larger ``modulus_range``
    reveals how many sites' residues wrapped), so a site refuses it (:meth:`matches`).
    """

    modulus: int

    @property
    def clipping_range(self) -> float:
        """SecAgg+'s ``clipping_range``: ``(m - 1) / 2``."""
        return (self.modulus - 1) / 2

    @property
    def quantization_range(self) -> int:
        """SecAgg+'s ``quantization_range``: ``m - 1`` (Flower needs it below the modulus)."""
        return self.modulus - 1

    #: SecAgg+'s ``max_weight`` and every site's reported weight (``num_examples``).
    weight = 1

    def settings(self) -> dict[str, float | int]:
        """The SecAgg+ parameters, by the names Flower's workflow takes."""
        return {"clipping_range": self.clipping_range,
                "quantization_range": self.quantization_range,
                "modulus_range": self.modulus, "max_weight": float(self.weight)}

    def matches(self, clipping_range: float, quantization_range: int, modulus_range: int,
                max_weight: float) -> bool:
        """Whether SecAgg+ parameters proposed by the coordinator are exactly these."""
        return (clipping_range, quantization_range, modulus_range, max_weight) == (
            self.clipping_range, self.quantization_range, self.modulus, float(self.weight))

    def encode(self, residues: np.ndarray) -> np.ndarray:
        """The floats a site hands to SecAgg+ for its residues in ``[0, m)``."""
        return np.asarray(residues, dtype=np.int64).astype(np.float64) - self.clipping_range

    def residue_sum(self, aggregate: np.ndarray, sites: int) -> np.ndarray:
        """``sum_i r_i mod m`` from the vector Flower's SecAgg+ workflow hands the strategy
        after summing ``sites`` sites (its dequantisation inverted; exact for
        ``sites < m``)."""
        m, q = self.modulus, self.quantization_range
        total = (np.asarray(aggregate, dtype=np.float64) * ((m - sites) / q)
                 + sites * self.clipping_range)
        return np.mod(np.rint(total).astype(np.int64), m)


#: Every request config key describing a secure sum.
SUM_KEYS = frozenset(SUM_PREFIX + f.name for f in fields(SecureSum))


def public_seed() -> int:
    """A fresh public seed (for the rotation, whose randomness protects no one)."""
    return int(np.random.SeedSequence().entropy % 2**32)


@functools.lru_cache(maxsize=64)
def _grid(secure: SecureSum, epsilon: float, delta: float, releases: int,
          min_sites: int) -> GridChoice:
    return choose_grid(
        epsilon, delta, releases=releases, sensitivity=secure.sensitivity,
        norm_bound=secure.norm_bound, dimension=secure.dimension, sites=min_sites,
        sites_in_sum=secure.sites_in_sum, modulus=secure.modulus,
    )

"""A secure sum with the distributed discrete Gaussian: its public parameters, the grid every
site derives from them and its own policy, and the server's decoding (no Flower import).

Privacy guarantee (unit: one record of one site, replace-one; trust model: an
honest-but-curious server that learns only sums over at least ``M`` sites, ``M`` the site's
own ``secure_min_sites``): a site's message is its statistic rounded on the grid, rotated,
plus discrete Gaussian noise calibrated so that every sum of at least ``M`` messages is
(epsilon, delta)-DP for the site's records over its policy's releases
(:mod:`fedpca.privacy.distributed_gaussian`, Kairouz, Liu, Steinke, "The Distributed
Discrete Gaussian Mechanism for Federated Learning with Secure Aggregation"). The grid, the
noise and the modulus are computed by the site from public quantities and its own policy;
the coordinator only proposes the public quantities (a site refuses one that does not fit).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpca.errors import InvalidRequestError
from fedpca.privacy.ddg_encoding import decode_sum, modular_sum
from fedpca.privacy.distributed_gaussian import DEFAULT_MODULUS, GridChoice, choose_grid
from fedpca.privacy.hadamard import RandomizedHadamard


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
        Raises (quoting public quantities only) when no grid meets the wrap bound."""
        return _grid(self, epsilon, delta, releases, min_sites)

    def grid_for(self, policy: Any) -> GridChoice:
        """:meth:`grid` for a site policy (its calibration's target (epsilon, delta), its
        releases and its ``secure_min_sites``)."""
        cal = policy.calibration()
        return self.grid(cal.target_epsilon, cal.delta, policy.releases, policy.secure_min_sites)

    def check_site(self, records: int, min_sites: int, site: str) -> None:
        """Refuse, before anything is charged, a sum this site cannot take part in."""
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

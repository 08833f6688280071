"""A release as plain data: everything an accountant needs of it, nothing it computes.

Like dp-accounting's ``DpEvent`` objects, a :class:`Release` only describes what a site
released (mechanism, sensitivity, noise, shape, and for a distributed discrete Gaussian its
summands and padded length, for a release inside secure sums their minimum ``M``): mechanisms
produce releases, ledgers store them and the one accountant (:mod:`fedpca.dp.accountant`)
composes them. Nothing here imports an accountant or a ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """One release a site made: all the ledger needs to account for it.

    A continuous Gaussian release (``summands = 0``) or a distributed discrete Gaussian one
    (:mod:`fedpca.dp.distributed_gaussian`): then ``sensitivity`` and ``sigma`` are in
    grid units, ``sigma^2 = summands s^2`` is the noise variance of every revealed sum of
    ``summands`` i.i.d. ``N_Z(0, s^2)`` draws (at least ``M`` sites times the draws per
    site), ``padded`` is the rotated statistic's length and ``grid_step`` the grid's step
    ``gamma`` (data units per grid unit: the noise in the data's units is ``sigma * gamma``).
    A site's exact noise (:mod:`fedpca.dp.exact_noise`) is such a release of one draw
    per coordinate (``summands = 1``). The accounting never reads ``grid_step``: the
    noise multiplier ``sigma / sensitivity`` is the same in either unit.

    A release inside a secure sum of at least ``M`` sites (``sites_in_sum = M``) has two
    guarantees (Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving
    Machine Learning", for why the second one is needed): the *conditional* one, of the
    sum's noise ``sigma`` described by this record, which holds only when every sum holds at
    least ``M`` honest sites' shares and the protocol is followed; and the *unconditional*
    one, of the site's own share alone (:meth:`own_share`: ``sigma / sqrt(M)``, one site's
    draws of a discrete release), which holds against any coordinator.

    Attributes:
        mechanism: a name such as ``"dps-pca/power"``.
        sensitivity: replace-one L2 sensitivity of the released statistic.
        sigma: standard deviation of the noise on each entry (of every revealed sum).
        shape: shape of the released array.
        summands: discrete Gaussian draws in every revealed sum (0: continuous Gaussian).
        padded: the padded dimension of a discrete release (0: continuous Gaussian).
        sites_in_sum: ``M`` when the release is revealed only inside secure sums of at least
            ``M`` sites, each adding ``1/M`` of the noise variance (0: the site's own
            noise, seen on its own).
        grid_step: ``gamma`` of a release on a grid (``sensitivity`` and ``sigma`` in grid
            units); 0: a continuous Gaussian, ``sensitivity`` and ``sigma`` in data units.
    """

    mechanism: str
    sensitivity: float
    sigma: float
    shape: tuple[int, ...]
    summands: int = 0
    padded: int = 0
    sites_in_sum: int = 0
    grid_step: float = 0.0

    def __post_init__(self) -> None:
        if self.sites_in_sum and self.summands % self.sites_in_sum:
            raise ValueError(
                f"a discrete release of {self.summands} draws is not shared by "
                f"{self.sites_in_sum} sites"
            )

    def own_share(self) -> Release:
        """What one site sends, seen on its own: the release a coordinator that bypasses
        the secure sum gets (itself for a release outside secure sums)."""
        if not self.sites_in_sum:
            return self
        return Release(
            self.mechanism + "/own-share", self.sensitivity,
            self.sigma / math.sqrt(self.sites_in_sum), self.shape,
            self.summands // self.sites_in_sum, self.padded, grid_step=self.grid_step,
        )

    @property
    def discrete(self) -> bool:
        """Whether this is a distributed discrete Gaussian release."""
        return self.summands > 0

    @property
    def noise_multiplier(self) -> float:
        """``sigma / sensitivity``: what the accountant composes."""
        return self.sigma / self.sensitivity

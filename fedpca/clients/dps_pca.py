"""DPSPCAClient: one site of DPS-PCA as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record of this site, replace-one): everything the client sends
over the whole run is (epsilon, delta)-DP under the site's own :class:`SitePolicy`. The noise
is added here, before anything leaves the site; the server can raise the noise level
(``min_noise_multiplier`` in the fit config) but never lower it, and any request the ledger
would not allow, or that is malformed, is refused with an exception and nothing is released.
"""

from __future__ import annotations

import math

import numpy as np

from fedpca.algorithms.dps_pca import PHASE_INIT, PHASE_POWER, PHASE_VARIANCE, DPSPCASite
from fedpca.clients.base import PrivateSiteClient, client_factory
from fedpca.dp.mechanisms import gaussian_tail_bound, power_step_sensitivity


class DPSPCAClient(PrivateSiteClient):
    """A DPS-PCA site behind Flower: answers ``init`` with its noisy diagonal, ``power``
    (one orthonormal basis ``Q``) with ``H_i`` and ``variance`` (the final ``Q``) with its
    noisy Rayleigh quotients and trace, if its policy agreed to that release.

    Constructed like :class:`~fedpca.clients.base.PrivateSiteClient`, for a
    :class:`DPSPCASite`.
    """

    config_keys = frozenset({"phase", "round", "min_noise_multiplier"})

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """The noisy diagonal (``phase=init``), ``H_i`` (``phase=power``) or the Rayleigh
        quotients (``phase=variance``)."""
        phase = config.get("phase")
        floor = config.get("min_noise_multiplier")
        if phase == PHASE_INIT:
            if parameters:
                raise self.refuse(f"the init request must carry no arrays, got {len(parameters)}")
            return self.site.release_diagonal(floor, secure=self.requested_sum(config))
        if phase not in (PHASE_POWER, PHASE_VARIANCE):
            raise self.refuse(f"unknown phase {phase!r}; expected {PHASE_INIT!r}, "
                              f"{PHASE_POWER!r} or {PHASE_VARIANCE!r}")
        if len(parameters) != 1:
            raise self.refuse(
                f"a {phase} request carries exactly one basis Q, got {len(parameters)} arrays")
        if phase == PHASE_VARIANCE:
            return self.site.release_rayleigh(parameters[0], floor)
        return self.site.release_power(parameters[0], floor, secure=self.requested_sum(config))

    def answer_bound(self, config: dict) -> float:
        """Every entry of ``diag(X^T X) / n``, of ``X^T X Q / n`` (orthonormal ``Q``) and of
        the Rayleigh quotients and trace over ``n`` is at most ``C^2``; the noise adds
        ``sigma / sqrt(m) / n`` per entry, bounded by its tail over the ``d x k`` (at most
        ``d x d``) entries."""
        site = self.site
        # Every release has sensitivity sqrt(2) C^2 (see fedpca.dp.mechanisms).
        share = site.sigma(power_step_sensitivity(site.clip_norm), config.get("min_noise_multiplier"))
        if site.secure_min_sites is not None:
            share /= math.sqrt(site.secure_min_sites)
        return site.clip_norm**2 + gaussian_tail_bound(share / site.n, site.dim * site.dim)


#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(DPSPCAClient, DPSPCASite)

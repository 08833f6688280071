"""DPSPCAClient: one site of DPS-PCA as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record of this site, replace-one): everything the client sends
over the whole run is (epsilon, delta)-DP under the site's own :class:`SitePolicy`. The noise
is added here, before anything leaves the site; the server can raise the noise level
(``min_noise_multiplier`` in the fit config) but never lower it, and any request the ledger
would not allow, or that is malformed, is refused with an exception and nothing is released.
"""

from __future__ import annotations

import numpy as np
from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.dps_pca import PHASE_INIT, PHASE_POWER, DPSPCASite, SitePolicy
from fedpca.clients.base import PrivateSiteClient, site_client
from fedpca.site_data import SiteData


class DPSPCAClient(PrivateSiteClient):
    """A DPS-PCA site behind Flower: answers ``init`` with its noisy diagonal and ``power``
    (one orthonormal basis ``Q``) with ``H_i``.

    Args:
        site: the :class:`DPSPCASite` holding the clipped data, calibration and ledger.
        on_release: called with the ledger after every accepted release.
    """

    config_keys = frozenset({"phase", "round", "min_noise_multiplier"})

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """The noisy diagonal (``phase=init``) or ``H_i`` (``phase=power``)."""
        phase = config.get("phase")
        floor = config.get("min_noise_multiplier")
        if phase == PHASE_INIT:
            if parameters:
                raise self.refuse(f"the init request must carry no arrays, got {len(parameters)}")
            return self.site.release_diagonal(floor)
        if phase == PHASE_POWER:
            if len(parameters) != 1:
                raise self.refuse(
                    f"a power request carries exactly one basis Q, got {len(parameters)} arrays"
                )
            return self.site.release_power(parameters[0], floor)
        raise self.refuse(f"unknown phase {phase!r}; expected {PHASE_INIT!r} or {PHASE_POWER!r}")


def client_for_site(
    context: Context,
    data: np.ndarray | SiteData,
    policy: SitePolicy,
    site: str,
    seed: int | None = None,
) -> Client:
    """A Flower ``Client`` for one DPS-PCA site whose ledger lives in ``context.state``."""
    return site_client(context, DPSPCAClient, DPSPCASite(data, policy, site=site, seed=seed))

"""DPdisPCAClient: one site of DPdisPCA as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record of this site, replace-one): the site answers exactly one
request, with its partial square root ``P_s`` (or, in the comparison variant, its whole
noisy ``A^_s``), and that release is (epsilon, delta)-DP under the site's own
:class:`DPdisPCAPolicy`. The noise is added here, before anything leaves the site; the server
can raise the noise level (``min_noise_multiplier``) but never lower it. A malformed request
(unknown keys, arrays attached, a ``d`` other than the site's, ``r`` not an integer in
``1..d``) or a second request is refused with an exception and nothing is released.
"""

from __future__ import annotations


import numpy as np
from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, DPdisPCASite
from fedpca.clients.base import PrivateSiteClient, site_client
from fedpca.site_data import SiteData


class DPdisPCAClient(PrivateSiteClient):
    """A DPdisPCA site behind Flower: answers the one request with ``P_s`` or ``A^_s``.

    Args:
        site: the :class:`DPdisPCASite` holding the clipped data, calibration and ledger.
        on_release: called with the ledger after the accepted release.
    """

    config_keys = frozenset({"variant", "dim", "r", "min_noise_multiplier"})

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """Check the request's ``d`` and arrays, then release (the site checks ``r``)."""
        if parameters:
            raise self.refuse(f"the request must carry no arrays, got {len(parameters)}")
        self.require_dim(config.get("dim"))
        return self.site.release(
            config.get("variant"), config.get("r"), config.get("min_noise_multiplier")
        )


def client_for_site(
    context: Context,
    data: np.ndarray | SiteData,
    policy: DPdisPCAPolicy,
    site: str,
    seed: int | None = None,
) -> Client:
    """A Flower ``Client`` for one DPdisPCA site whose ledger lives in ``context.state``."""
    return site_client(context, DPdisPCAClient, DPdisPCASite(data, policy, site=site, seed=seed))

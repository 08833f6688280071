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

from fedpca.algorithms.dpdis_pca import DPdisPCASite
from fedpca.clients.base import PrivateSiteClient, client_factory


class DPdisPCAClient(PrivateSiteClient):
    """A DPdisPCA site behind Flower: answers the one request with ``P_s``, ``A^_s`` or (a
    ``secure_min_sites`` site, inside SecAgg+ only) its secure-sum message of ``X_s^T X_s``.

    Constructed like :class:`~fedpca.clients.base.PrivateSiteClient`, for a
    :class:`DPdisPCASite`.
    """

    config_keys = frozenset({"variant", "dim", "r", "min_noise_multiplier"})

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """Check the request's ``d`` and arrays, then release (the site checks ``r``)."""
        if parameters:
            raise self.refuse(f"the request must carry no arrays, got {len(parameters)}")
        self.require_dim(config.get("dim"))
        return self.site.release(
            config.get("variant"), config.get("r"), config.get("min_noise_multiplier"),
            secure=self.requested_sum(config),
        )


#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(DPdisPCAClient, DPdisPCASite)

"""DPSPCAClient: one site of DPS-PCA as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record of this site, replace-one): everything the client sends
over the whole run is (epsilon, delta)-DP under the site's own :class:`SitePolicy`. The noise
is added here, before anything leaves the site; the server can raise the noise level
(``min_noise_multiplier`` in the fit config) but never lower it, and any request the ledger
would not allow, or that is malformed, is refused with an exception and nothing is released.
"""

from __future__ import annotations

from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.flower.site_client import PrivateSiteClient, client_factory

#: DPS-PCA's site behind Flower: the one client of every algorithm, over a :class:`DPSPCASite`
#: (:meth:`~fedpca.algorithms.dps_pca.DPSPCASite.respond` checks each request and releases).
DPSPCAClient = PrivateSiteClient

#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(DPSPCASite)

"""KPlaneClient: one site of SuLQ k-plane subspace clustering as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record of this site, replace-one; the record may change
cluster): everything the client sends over the whole run is (epsilon, delta)-DP under the
site's own :class:`~fedpca.algorithms.kplane.KPlanePolicy`. The noise is added here, before
anything leaves the site; the server can raise the noise level (``min_noise_multiplier``)
but never lower it. A request with the wrong number of bases, a basis of the wrong shape,
non-finite or not orthonormal, or one the ledger would not allow (more than ``T`` rounds) is
refused with an exception and nothing is released. The records' clusters never leave.
"""

from __future__ import annotations

from fedpca.algorithms.kplane import KPlaneSite
from fedpca.flower.site_client import PrivateSiteClient, client_factory

#: SuLQ k-plane's site behind Flower: the one client of every algorithm, over a :class:`KPlaneSite`
#: (:meth:`~fedpca.algorithms.kplane.KPlaneSite.respond` checks each request and releases).
KPlaneClient = PrivateSiteClient

#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(KPlaneSite)

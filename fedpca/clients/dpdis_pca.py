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

from fedpca.algorithms.dpdis_pca import DPdisPCASite
from fedpca.flower.site_client import PrivateSiteClient, client_factory

#: DPdisPCA's site behind Flower: the one client of every algorithm, over a :class:`DPdisPCASite`
#: (:meth:`~fedpca.algorithms.dpdis_pca.DPdisPCASite.respond` checks each request and releases).
DPdisPCAClient = PrivateSiteClient

#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(DPdisPCASite)

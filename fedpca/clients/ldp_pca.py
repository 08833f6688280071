"""LDPCovarianceClient: one LDP-PCA site as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record, replace-one; local model): every record's view
``x x^T + Z`` is (epsilon, delta)-DP under the site's own :class:`LDPPolicy`; the client
sends the sum of its records' views once. The noise is added here, before anything leaves
the site; the server can raise the noise level (``min_noise_multiplier`` in the fit config)
but never lower it, and a second request, or a malformed one, is refused with an exception
and nothing is released. Rows clipped to the policy's norm are counted in the metrics.
"""

from __future__ import annotations

from fedpca.algorithms.ldp_pca import LDPCovarianceSite
from fedpca.flower.site_client import PrivateSiteClient, client_factory

#: LDP-PCA's site behind Flower: the one client of every algorithm, over a :class:`LDPCovarianceSite`
#: (:meth:`~fedpca.algorithms.ldp_pca.LDPCovarianceSite.respond` checks each request and releases).
LDPCovarianceClient = PrivateSiteClient

#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(LDPCovarianceSite)

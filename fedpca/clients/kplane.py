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

import numpy as np

from fedpca.algorithms.kplane import KPlaneSite
from fedpca.clients.base import PrivateSiteClient, client_factory


class KPlaneClient(PrivateSiteClient):
    """A SuLQ k-plane site behind Flower: answers ``k`` orthonormal bases (one array each,
    ``config["clusters"] = k``, ``config["dim"] = d``) with its noisy per-cluster moments.

    Constructed like :class:`~fedpca.clients.base.PrivateSiteClient`, for a
    :class:`KPlaneSite`.
    """

    config_keys = frozenset({"round", "dim", "clusters", "min_noise_multiplier"})

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """The noisy ``(k, d (d+1)/2 + 1)`` message for the ``k`` bases in ``parameters``."""
        self.require_dim(config.get("dim"))
        clusters = config.get("clusters")
        if isinstance(clusters, bool) or not isinstance(clusters, int) or clusters < 1:
            raise self.refuse(f"config 'clusters' must be a positive integer, got {clusters!r}")
        if len(parameters) != clusters:
            raise self.refuse(
                f"the request announces {clusters} clusters but carries {len(parameters)} bases"
            )
        return self.site.release_clusters(
            parameters, config.get("min_noise_multiplier"), secure=self.requested_sum(config)
        )


#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(KPlaneClient, KPlaneSite)

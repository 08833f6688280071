"""LDPCovarianceClient: one LDP-PCA site as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record, replace-one; local model): every record's view
``x x^T + Z`` is (epsilon, delta)-DP under the site's own :class:`LDPPolicy`; the client
sends the sum of its records' views once. The noise is added here, before anything leaves
the site; the server can raise the noise level (``min_noise_multiplier`` in the fit config)
but never lower it, and a second request, or a malformed one, is refused with an exception
and nothing is released. Rows clipped to the policy's norm are counted in the metrics.
"""

from __future__ import annotations

import numpy as np

from fedpca.algorithms.ldp_pca import PHASE, LDPCovarianceSite
from fedpca.clients.base import PrivateSiteClient, client_factory


class LDPCovarianceClient(PrivateSiteClient):
    """An LDP-PCA site behind Flower: answers the single ``covariance`` request (no arrays)
    with ``X^T X + Z_m``.

    Constructed like :class:`~fedpca.clients.base.PrivateSiteClient`, for a
    :class:`LDPCovarianceSite`.
    """

    config_keys = frozenset({"phase", "dim", "min_noise_multiplier"})

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """The sum of the site's private views (``phase=covariance``, ``dim``, no arrays)."""
        phase = config.get("phase")
        if phase != PHASE:
            raise self.refuse(f"unknown phase {phase!r}; expected {PHASE!r}")
        self.require_dim(config.get("dim"))
        if parameters:
            raise self.refuse(
                f"the covariance request must carry no arrays, got {len(parameters)}"
            )
        return self.site.release_covariance(config.get("min_noise_multiplier"))


#: ``client_for_site(context, data, policy, site, seed=None, ledger=None, limits=None)
#: -> Client``.
client_for_site = client_factory(LDPCovarianceClient, LDPCovarianceSite)

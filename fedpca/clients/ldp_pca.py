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
from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.ldp_pca import PHASE, LDPCovarianceSite, LDPPolicy
from fedpca.clients.base import PrivateSiteClient, site_client
from fedpca.site_data import SiteData


class LDPCovarianceClient(PrivateSiteClient):
    """An LDP-PCA site behind Flower: answers the single ``covariance`` request (no arrays)
    with ``X^T X + Z_m``.

    Args:
        site: the :class:`LDPCovarianceSite` holding the clipped data, calibration and ledger.
        on_release: called with the ledger after the accepted release.
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


def client_for_site(
    context: Context,
    data: np.ndarray | SiteData,
    policy: LDPPolicy,
    site: str,
    seed: int | None = None,
) -> Client:
    """A Flower ``Client`` for one LDP-PCA site whose ledger lives in ``context.state``."""
    return site_client(context, LDPCovarianceClient, LDPCovarianceSite(data, policy, site=site, seed=seed))

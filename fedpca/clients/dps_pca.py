"""DPSPCAClient: one site of DPS-PCA as a Flower ``NumPyClient``.

Privacy guarantee (unit: one record of this site, replace-one): everything the client sends
over the whole run is (epsilon, delta)-DP under the site's own :class:`SitePolicy`. The noise
is added here, before anything leaves the site; the server can raise the noise level
(``min_noise_multiplier`` in the fit config) but never lower it, and any request the ledger
would not allow, or that is malformed, is refused with an exception and nothing is released.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.client import Client, NumPyClient
from flwr.common import Context

from fedpca.algorithms.dps_pca import PHASE_INIT, PHASE_POWER, DPSPCASite, SitePolicy
from fedpca.clients.ledger_state import load_ledger, store_ledger
from fedpca.errors import InvalidRequestError
from fedpca.ledger import PrivacyLedger

#: Fit-config keys the client understands; anything else is refused.
CONFIG_KEYS = frozenset({"phase", "round", "min_noise_multiplier"})


class DPSPCAClient(NumPyClient):
    """A DPS-PCA site behind Flower.

    Args:
        site: the :class:`DPSPCASite` holding the clipped data, calibration and ledger.
        on_release: called with the ledger after every accepted release (before the answer
            is returned), e.g. to persist it in ``context.state``.
    """

    def __init__(
        self, site: DPSPCASite, on_release: Callable[[PrivacyLedger], None] | None = None
    ) -> None:
        self.site = site
        self.on_release = on_release

    def get_parameters(self, config: dict) -> list[np.ndarray]:
        """A site holds no global parameters: nothing is sent."""
        return []

    def fit(
        self, parameters: list[np.ndarray], config: dict
    ) -> tuple[list[np.ndarray], int, dict]:
        """Answer one DPS-PCA request: the noisy diagonal (init) or ``H_i`` (power)."""
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise InvalidRequestError(
                f"{self.site.site}: refused: unknown config keys {sorted(unknown)}"
            )
        phase = config.get("phase")
        floor = config.get("min_noise_multiplier")
        if phase == PHASE_INIT:
            if parameters:
                raise InvalidRequestError(
                    f"{self.site.site}: refused: the init request must carry no arrays, "
                    f"got {len(parameters)}"
                )
            value = self.site.release_diagonal(floor)
        elif phase == PHASE_POWER:
            if len(parameters) != 1:
                raise InvalidRequestError(
                    f"{self.site.site}: refused: a power request carries exactly one basis Q, "
                    f"got {len(parameters)} arrays"
                )
            value = self.site.release_power(parameters[0], floor)
        else:
            raise InvalidRequestError(
                f"{self.site.site}: refused: unknown phase {phase!r}; expected "
                f"{PHASE_INIT!r} or {PHASE_POWER!r}"
            )
        if self.on_release is not None:
            self.on_release(self.site.ledger)
        metrics = {
            "site": self.site.site,
            "epsilon_spent": self.site.ledger.epsilon_spent(),
            "releases": self.site.ledger.count,
            "clipped_rows": self.site.clip_report.clipped_rows,
        }
        return [value], self.site.n, metrics


def client_for_site(
    context: Context, data: np.ndarray, policy: SitePolicy, site: str, seed: int | None = None
) -> Client:
    """A Flower ``Client`` for one site whose ledger lives in ``context.state``."""
    site_obj = DPSPCASite(data, policy, site=site, seed=seed)
    load_ledger(context, site_obj.ledger)
    return DPSPCAClient(
        site_obj, on_release=lambda ledger: store_ledger(context, ledger)
    ).to_client()

"""The Flower side every fedpca site shares: request checks, ledger persistence, metrics.

A :class:`PrivateSiteClient` wraps a Flower-free :class:`~fedpca.algorithms.site.PrivateSite`.
Subclasses say which config keys they accept and implement :meth:`release`; everything a
client returns is the site's noisy release, its public record count and plaintext metrics
that are public under the site's policy (site name, epsilon spent, releases made), nothing
else. In particular the number of clipped rows is data-dependent and not DP: it is logged
for the site's own operator (see :class:`~fedpca.site_data.SiteData`) and never sent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from flwr.client import Client, NumPyClient
from flwr.common import Context

from fedpca.algorithms.site import PrivateSite
from fedpca.clients.ledger_state import load_ledger, store_ledger
from fedpca.clients.secure_aggregation import is_masked
from fedpca.errors import InvalidRequestError
from fedpca.ledger import PrivacyLedger

#: ``(context, data, policy, site name, seed=...) -> Client``: each algorithm's factory.
ClientFactory = Callable[..., Client]


class PrivateSiteClient(NumPyClient):
    """Base NumPyClient of a private site.

    Args:
        site: the Flower-free site object (data, calibration, ledger, noise).
        on_release: called with the ledger after every accepted release (before the answer
            is returned), e.g. to persist it in ``context.state``.
        masked: whether this request is answered inside secure-aggregation masking; a site
            whose policy relies on secure aggregation refuses unmasked requests.
    """

    #: Fit-config keys this client understands; any other key is refused.
    config_keys: frozenset[str] = frozenset()

    def __init__(
        self,
        site: PrivateSite,
        on_release: Callable[[PrivacyLedger], None] | None = None,
        masked: bool = False,
    ) -> None:
        self.site = site
        self.on_release = on_release
        self.masked = masked

    def get_parameters(self, config: dict) -> list[np.ndarray]:
        """A site holds no global parameters: nothing is sent."""
        return []

    def fit(
        self, parameters: list[np.ndarray], config: dict
    ) -> tuple[list[np.ndarray], int, dict]:
        """Check the request, make the release, persist the ledger, answer."""
        unknown = set(config) - self.config_keys
        if unknown:
            raise self.refuse(f"unknown config keys {sorted(unknown)}")
        if self.site.secure_min_sites is not None and not self.masked:
            raise self.refuse(
                "this site answers only inside a secure sum over at least "
                f"{self.site.secure_min_sites} sites (SecAgg+), and this request is not masked"
            )
        value = self.release(parameters, config)
        if self.on_release is not None:
            self.on_release(self.site.ledger)
        metrics = {
            "site": self.site.site,
            "epsilon_spent": self.site.ledger.epsilon_spent(),
            "releases": self.site.ledger.count,
        }
        return [value], self.site.n, metrics

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """The noisy array answering this request (subclasses); raise to refuse."""
        raise NotImplementedError

    def require_dim(self, dim: object) -> None:
        """Refuse a request made for ``dim`` features when this site holds another number."""
        if dim != self.site.dim:
            raise self.refuse(
                f"the server expects d = {dim!r} features but this site holds "
                f"{self.site.dim}; every site must use the same features in the same order"
            )

    def refuse(self, reason: str) -> InvalidRequestError:
        """An error naming the site, to raise when a request is malformed."""
        return InvalidRequestError(f"{self.site.site}: refused: {reason}")


def site_client(
    context: Context, client_cls: type[PrivateSiteClient], site: PrivateSite
) -> Client:
    """A Flower ``Client`` for ``site``: its ledger restored from and saved to
    ``context.state`` (so restarts cannot reset it), and told whether the current request is
    masked by secure aggregation."""
    load_ledger(context, site.ledger)
    return client_cls(
        site, on_release=functools.partial(store_ledger, context), masked=is_masked(context)
    ).to_client()

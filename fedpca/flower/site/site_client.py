"""A fedpca site as a Flower ``NumPyClient``: one thin adapter over its ``SiteService``.

fedpca's own ClientApp answers the Message API (:mod:`fedpca.flower.site.clientapp`); a
:class:`PrivateSiteClient` is the same site on Flower's legacy ``NumPyClient`` interface, for
a ServerApp on Flower's legacy strategy API (:mod:`fedpca.flower.server.legacy_strategy`). Each call
is one request of the site's :class:`~fedpca.site.service.SiteService` (the whole trust
boundary): ``get_properties`` the readiness question, ``fit`` a round's request; a refusal is
raised in the site's public words. Everything a client returns is the site's noisy release,
its public record count and what is public under its policy, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.client import Client, NumPyClient
from flwr.common import Context, Scalar

from fedpca.algorithms.site import PrivateSite, SiteLedgerLike, SitePrivacyPolicy
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.dp.site_data import SiteData
from fedpca.errors import InvalidRequestError
from fedpca.flower.site.run_state import ContextState, node_of
from fedpca.flower.wire import SITE
from fedpca.site.answer import Answer
from fedpca.site.ready import SiteReady
from fedpca.site.secure_stage import RunState
from fedpca.site.service import (
    Ask,
    GivenSite,
    MemoryState,
    Ready,
    Refusal,
    Reply,
    Request,
    SiteService,
    SiteSource,
    site_service,
)

#: ``(context, data, policy, site name, seed=..., ledger=..., limits=...) -> Client``: each
#: algorithm's factory (see :func:`client_factory`).
ClientFactory = Callable[..., Client]


class PrivateSiteClient(NumPyClient):
    """A private site as a Flower ``NumPyClient``, for any algorithm.

    Args:
        service: the site's service (its trust boundary), or a Flower-free site object,
            answered by a service of its own (:func:`~fedpca.site.service.site_service`).
        state: what the site keeps between the run's messages (Flower's ``context.state``
            in a ClientApp; default: this object's memory).
    """

    def __init__(self, service: SiteService | PrivateSite,
                 state: RunState | None = None) -> None:
        self.service = (service if isinstance(service, SiteService)
                        else site_service(service))
        self.state = MemoryState() if state is None else state

    @property
    def site(self) -> PrivateSite:
        """The site the service opened for the run."""
        return self.service.site()

    def handled(self, request: Request) -> Reply:
        """The service's reply to ``request``; its refusal raised (the site's own error, or
        its public words)."""
        reply = self.service.handle(request, self.state)
        if isinstance(reply, Refusal):
            raise reply.cause or InvalidRequestError(reply.reason)
        return reply

    def get_properties(self, config: dict) -> dict[str, Scalar]:
        """The site's answer to the readiness round: its name when what is left of this run
        fits its ledger; else it raises the refusal. Reads no record."""
        ready = self.handled(Ready())
        assert isinstance(ready, SiteReady)
        return {SITE: ready.site}

    def get_parameters(self, config: dict) -> list[np.ndarray]:
        """A site holds no global parameters: nothing is sent."""
        return []

    def fit(self, parameters: list[np.ndarray], config: dict
            ) -> tuple[list[np.ndarray], int, dict]:
        """The site's answer to a round's request (checked, charged, then returned)."""
        answer = self.handled(Ask(parameters, config))
        assert isinstance(answer, Answer)
        return answer.values, answer.weight, answer.metrics


def source_client(context: Context, source: SiteSource) -> Client:
    """The Flower ``Client`` of the message's node answering from ``source`` through its
    service, what it keeps between messages in ``context.state``; the site is opened now
    (a site that will not take part refuses here, nothing charged)."""
    service = SiteService(node_of(context), source)
    service.site()
    return PrivateSiteClient(service, ContextState(context)).to_client()


def client_factory(site_cls: type[PrivateSite]) -> ClientFactory:
    """The ``client_for_site(context, data, policy, site, seed=None, ledger=None,
    limits=None)`` of one algorithm: a client answering for a ``site_cls`` built from the
    site's data and its own policy (``ledger``: a durable ledger to charge instead of an
    in-memory one, which the run's ``context.state`` keeps between messages; ``limits``:
    the most one answer may hold, else the public defaults)."""

    def client_for_site(
        context: Context,
        data: np.ndarray | SiteData,
        policy: SitePrivacyPolicy,
        site: str,
        seed: int | None = None,
        ledger: SiteLedgerLike | None = None,
        limits: SiteLimits | None = None,
    ) -> Client:
        return source_client(context, GivenSite(
            site_cls(data, policy, site=site, seed=seed, ledger=ledger, limits=limits)))

    client_for_site.__doc__ = f"A Flower ``Client`` for one {site_cls.__name__}."
    return client_for_site

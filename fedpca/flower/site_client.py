"""A fedpca site as a Flower ``NumPyClient``: for Flower's legacy API and SecAgg+ workflow.

fedpca's own ClientApp answers the Message API through the site's
:class:`~fedpca.site.service.SiteService` (:mod:`fedpca.flower.clientapp`); a
:class:`PrivateSiteClient` is the same site on Flower's legacy ``NumPyClient`` interface:
Flower's SecAgg+ (legacy only) drives it, and :func:`client_factory` builds one for any
algorithm's site, e.g. in a ``client_fn`` given to
:func:`~fedpca.flower.clientapp.site_client_app`. Every request is
:func:`fedpca.site.answer.answer_request` (the algorithm's checks, the masking's, then the
release); everything a client returns is the site's noisy release, its public record count
and what is public under its policy, nothing else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from flwr.client import Client, NumPyClient
from flwr.common import Context, Scalar

from fedpca.algorithms.site import PrivateSite, SiteLedgerLike, SitePrivacyPolicy
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.dp.ledger import PrivacyLedger
from fedpca.dp.site_data import SiteData
from fedpca.flower.run_state import load_ledger, store_ledger
from fedpca.flower.secagg_plus import masked_settings
from fedpca.flower.wire import SITE
from fedpca.site.answer import Masking, answer_request

#: ``(context, data, policy, site name, seed=..., ledger=..., limits=...) -> Client``: each
#: algorithm's factory (see :func:`client_factory`).
ClientFactory = Callable[..., Client]


class PrivateSiteClient(NumPyClient):
    """A private site as a Flower ``NumPyClient``, for any algorithm.

    Args:
        site: the Flower-free site object (data, calibration, ledger, noise).
        on_release: called with the ledger after every accepted release (before the answer
            is returned), e.g. to keep it in ``context.state``.
        masking: how this request's answer leaves the site (``None``: unmasked; see
            :func:`~fedpca.site.answer.answer_request` for what each is checked against,
            before anything is charged).
    """

    def __init__(self, site: PrivateSite,
                 on_release: Callable[[PrivacyLedger], None] | None = None,
                 masking: Masking = None) -> None:
        self.site, self.on_release, self.masking = site, on_release, masking

    def get_properties(self, config: dict) -> dict[str, Scalar]:
        """The site's answer to the budget round: its name when what is left of this run,
        as its policy calibrates it, fits its ledger; else it raises the refusal. From the
        policy and the ledger alone: the answer depends on no record."""
        self.site.require_run()
        return {SITE: self.site.site}

    def get_parameters(self, config: dict) -> list[np.ndarray]:
        """A site holds no global parameters: nothing is sent."""
        return []

    def fit(self, parameters: list[np.ndarray], config: dict
            ) -> tuple[list[np.ndarray], int, dict]:
        """The site's answer (:func:`~fedpca.site.answer.answer_request`), the ledger kept
        by ``on_release``."""
        answer = answer_request(self.site, parameters, config, self.masking)
        if self.on_release is not None:
            self.on_release(self.site.ledger)
        return answer.values, answer.weight, answer.metrics


def site_client(context: Context, site: PrivateSite) -> Client:
    """A Flower ``Client`` for ``site`` in the current message: told whether the request is
    masked by Flower's SecAgg+; an in-memory ledger (simulation) read from and kept in
    ``context.state``; a durable one (a real site's) has every charge on disk already."""
    on_release = None
    if isinstance(site.ledger, PrivacyLedger):
        load_ledger(context, site.ledger)
        on_release = functools.partial(store_ledger, context)
    return PrivateSiteClient(site, on_release, masked_settings(context)).to_client()


def client_factory(site_cls: type[PrivateSite]) -> ClientFactory:
    """The ``client_for_site(context, data, policy, site, seed=None, ledger=None,
    limits=None)`` of one algorithm: a client answering for a ``site_cls`` built from the
    site's data and its own policy (``ledger``: a durable ledger to charge instead of an
    in-memory one; ``limits``: the most one answer may hold, else the public defaults)."""

    def client_for_site(
        context: Context,
        data: np.ndarray | SiteData,
        policy: SitePrivacyPolicy,
        site: str,
        seed: int | None = None,
        ledger: SiteLedgerLike | None = None,
        limits: SiteLimits | None = None,
    ) -> Client:
        return site_client(context, site_cls(
            data, policy, site=site, seed=seed, ledger=ledger, limits=limits))

    client_for_site.__doc__ = f"A Flower ``Client`` for one {site_cls.__name__}."
    return client_for_site

"""The Flower side every fedpca site shares: request checks, ledger persistence, metrics.

A :class:`PrivateSiteClient` wraps a Flower-free :class:`~fedpca.algorithms.site.PrivateSite`
of any algorithm, whose :meth:`~fedpca.algorithms.site.PrivateSite.respond` checks the
request and makes the release; everything a
client returns is the site's noisy release, its public record count and plaintext metrics
that are public under the site's policy (site name, epsilon spent, releases made, the
guarantee its policy gives: :mod:`fedpca.dp.guarantee`), nothing else. In particular the number of clipped rows is data-dependent and not DP: it is logged
for the site's own operator (see :class:`~fedpca.dp.site_data.SiteData`) and never sent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from flwr.client import Client, NumPyClient
from flwr.common import Context, Scalar

from fedpca.algorithms.secure_sum import SecAggPlusEmbedding
from fedpca.algorithms.site import PrivateSite, SiteLedgerLike, SitePrivacyPolicy
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.flower.ledger_state import load_ledger, store_ledger
from fedpca.flower.wire import RECORDS, SITE
from fedpca.flower.secagg_plus import ProtocolMasking, SecAggMasking, masked_settings
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS
from fedpca.dp.ledger import PrivacyLedger
from fedpca.dp.site_data import SiteData

#: ``(context, data, policy, site name, seed=..., ledger=..., limits=...) -> Client``: each
#: algorithm's factory (see :func:`client_factory`).
ClientFactory = Callable[..., Client]


class PrivateSiteClient(NumPyClient):
    """A private site as a Flower ``NumPyClient``, for any algorithm: every request is the
    site's :meth:`~fedpca.algorithms.site.PrivateSite.respond` (the algorithm's checks and
    release), wrapped in what the Flower transport needs checked.

    Args:
        site: the Flower-free site object (data, calibration, ledger, noise).
        on_release: called with the ledger after every accepted release (before the answer
            is returned), e.g. to persist it in ``context.state``.
        masking: when this request is answered inside SecAgg+ masking, the SecAgg+
            parameters the coordinator chose (``None``: not masked). A site whose policy
            relies on secure aggregation refuses unmasked requests. A site sending
            distributed discrete Gaussian residues refuses any SecAgg+ parameters but the
            exact embedding of its residues (:class:`SecAggPlusEmbedding`); a site with
            continuous shares refuses a clipping range that cannot hold its answer's
            *public* bound (Flower would clip silently and corrupt the sum). Inside
            fedpca's verifiable secure aggregation (:class:`ProtocolMasking`) only a site
            sending residues modulo the protocol's modulus answers. All before anything is
            charged.
    """

    def __init__(
        self,
        site: PrivateSite,
        on_release: Callable[[PrivacyLedger], None] | None = None,
        masking: SecAggMasking | ProtocolMasking | None = None,
    ) -> None:
        self.site = site
        self.on_release = on_release
        self.masking = masking

    @property
    def masked(self) -> bool:
        """Whether this request is answered inside SecAgg+ masking."""
        return self.masking is not None

    @property
    def embedding(self) -> SecAggPlusEmbedding | None:
        """How this site's residues pass SecAgg+ when it sends distributed discrete Gaussian
        messages (its policy's ``discrete``), else ``None``."""
        return SecAggPlusEmbedding(DEFAULT_MODULUS) if self.site.discrete else None

    def get_properties(self, config: dict) -> dict[str, Scalar]:
        """The site's answer to the budget round: its name when what is left of this run,
        as its policy calibrates it, fits its ledger; else it raises the refusal
        (:meth:`~fedpca.algorithms.site.PrivateSite.require_run`). From the policy and the
        ledger alone: the answer depends on no record."""
        self.site.require_run()
        return {SITE: self.site.site}

    def get_parameters(self, config: dict) -> list[np.ndarray]:
        """A site holds no global parameters: nothing is sent."""
        return []

    def fit(
        self, parameters: list[np.ndarray], config: dict
    ) -> tuple[list[np.ndarray], int, dict]:
        """Check the request, make the release (computed in memory, then charged), persist
        the ledger, answer. What follows the charge (the SecAgg+ encoding, Flower's
        serialisation) handles an answer whose size the site bounded before any work
        (:mod:`fedpca.algorithms.site_limits`); should it fail, the budget stays spent and nothing is
        sent."""
        self.site.check_config(config)
        if self.site.secure_min_sites is not None and not self.masked:
            raise self.site.refuse(
                "this site answers only inside a secure sum over at least "
                f"{self.site.secure_min_sites} sites, and this request is not masked"
            )
        if self.masked:
            self.check_masking(config)
        value = self.site.respond(parameters, config)
        if self.on_release is not None:
            self.on_release(self.site.ledger)
        metrics = {
            "site": self.site.site,
            "epsilon_spent": self.site.ledger.epsilon_spent(),
            "releases": self.site.ledger.count,
            **self.site.guarantee().to_metrics(),
        }
        if self.embedding is not None:  # a secure sum's weight is fixed: the count travels apart
            metrics[RECORDS] = self.site.n
            if isinstance(self.masking, ProtocolMasking):  # residues, masked by the protocol
                return [value], self.embedding.weight, metrics
            return [self.embedding.encode(value)], self.embedding.weight, metrics
        return [value], self.site.n, metrics

    def check_masking(self, config: dict) -> None:
        """Refuse, before anything is charged, SecAgg+ parameters this site cannot answer
        under. The message quotes only public quantities."""
        masking, refuse = self.masking, self.site.refuse
        if isinstance(masking, ProtocolMasking):
            if self.embedding is None or masking.modulus != self.embedding.modulus:
                raise refuse(
                    "fedpca's verifiable secure aggregation carries distributed discrete "
                    "Gaussian residues modulo the site's own modulus "
                    f"{DEFAULT_MODULUS}; this site's policy or the protocol's modulus "
                    f"{masking.modulus} does not match; nothing was released"
                )
            return
        if self.embedding is not None:
            if not self.embedding.matches(masking.clipping_range, masking.quantization_range,
                                          masking.modulus_range, masking.max_weight):
                raise refuse(
                    f"this site sends distributed discrete Gaussian residues and answers "
                    f"only under SecAgg+ settings {self.embedding.settings()} (the exact "
                    f"embedding of its residues), not clipping_range={masking.clipping_range:g}"
                    f", quantization_range={masking.quantization_range}, modulus_range="
                    f"{masking.modulus_range}, max_weight={masking.max_weight:g}; nothing was "
                    "released"
                )
            return
        bound = self.site.answer_bound(config)
        if bound is None:
            raise refuse("this algorithm has no secure-aggregation mode at this site")
        if bound > masking.clipping_range:
            raise refuse(
                f"SecAgg+ clipping_range={masking.clipping_range:g} is below the public bound "
                f"{bound:.3g} on the values this site sends (C^2 plus the tail of its noise "
                "over n); they would be clipped silently. Raise clipping_range; nothing was "
                "released"
            )


def site_client(context: Context, site: PrivateSite) -> Client:
    """A Flower ``Client`` for ``site``, told whether the current request is masked by
    secure aggregation.

    A site with an in-memory :class:`PrivacyLedger` (simulation) keeps it in
    ``context.state``, which Flower keeps for the run; a site with a durable ledger (a real
    site's :class:`~fedpca.site.ledger.RunLedger`) has every charge on its disk already.
    """
    return PrivateSiteClient(site, **client_options(context, site)).to_client()


def client_options(context: Context, site: PrivateSite) -> dict:
    """The ``on_release`` and ``masking`` of a :class:`PrivateSiteClient` for ``site`` in
    the current message: an in-memory ledger is loaded from ``context.state`` and stored
    back after every release (:func:`site_client`)."""
    on_release = None
    if isinstance(site.ledger, PrivacyLedger):
        load_ledger(context, site.ledger)
        on_release = functools.partial(store_ledger, context)
    return {"on_release": on_release, "masking": masked_settings(context)}


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

"""A site of a centred run behind Flower: the moments round, then the algorithm's rounds on
its centred (standardised) rows.

A centred run's server (:class:`~fedpca.algorithms.centred_rounds.CentredServer`) names
each request's step in its config key :data:`~fedpca.algorithms.centred_rounds.CENTRING`: ``"moments"`` asks for the site's moments release
(:meth:`~fedpca.algorithms.centring.CentringSite.release_moments`, per-site noise or its
discrete Gaussian message inside a secure sum), ``"centred"`` for the algorithm's release
on the rows centred and scaled with the mean and scale the request carries as its last two
arrays. A real site starts a fresh process per message, so nothing is kept between rounds
but the ledger: the mean and scale come with every algorithm request, the site's rows,
contract bounds, policy and seed from the site itself.

Privacy guarantee (unit: one record of this site, replace-one): the site's
:class:`~fedpca.algorithms.centring.CentredPolicy` sets every multiplier (the moments'
share and the algorithm's) and its clip norm ``C``; every release is charged to the one
ledger of the run, whose plan (the moments' release and the algorithm's) must fit before the
first release. The mean and scale are UNTRUSTED: checked before anything is spent
(:func:`~fedpca.algorithms.centring.require_centring`), then the site clips its centred rows
to its own ``C``, so whatever values a hostile coordinator sends, the sensitivity, noise and
charge of every later release hold (the module docstring of
:mod:`fedpca.algorithms.centring` says what a lie can and cannot do).
"""

from __future__ import annotations

from typing import Any

from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.centred_rounds import CentredSite
from fedpca.algorithms.centring import CentringSite
from fedpca.algorithms.site import PrivateSite
from fedpca.flower.site_client import PrivateSiteClient, client_options


class CentredSiteClient(PrivateSiteClient):
    """One site of a centred run behind Flower: the client of every algorithm over a
    :class:`~fedpca.algorithms.centred_rounds.CentredSite` (the moments round, then the
    algorithm ``site_cls``'s rounds on the centred rows).

    Args:
        centring: the site's rows, bounds, policy, seed and run ledger.
        site_cls: the algorithm's site (e.g. :class:`~fedpca.algorithms.dpdis_pca.DPdisPCASite`).
        options: the client's ``on_release`` and ``masking``
            (:func:`~fedpca.flower.site_client.client_options`).
    """

    def __init__(self, centring: CentringSite, site_cls: type[PrivateSite],
                 options: dict[str, Any]) -> None:
        super().__init__(CentredSite(centring, site_cls), **options)

    @property
    def centring(self) -> CentringSite:
        """The site's rows before centring, its policy and its run ledger."""
        return self.site.centring


def centred_client(context: Context, site_cls: type[PrivateSite],
                   centring: CentringSite) -> Client:
    """A Flower ``Client`` for ``centring``'s site in the current message (its in-memory
    ledger, if any, kept in ``context.state``)."""
    return CentredSiteClient(centring, site_cls, client_options(context, centring)).to_client()

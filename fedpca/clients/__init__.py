"""fedpca's Flower clients (the stable public names; the Flower layer holds them): a site's
ClientApp (:func:`site_client_app`, for the Message-API strategies and the legacy adapters
alike) and each algorithm's ``NumPyClient``, one thin adapter over the site's
``SiteService`` (:class:`~fedpca.flower.site.site_client.PrivateSiteClient`, which every
algorithm's client is), with the factory of an algorithm's client (:func:`client_factory`)."""

from fedpca.flower.site.clientapp import site_client_app
from fedpca.flower.site.site_client import PrivateSiteClient, client_factory

DPSPCAClient = DPdisPCAClient = KPlaneClient = LDPCovarianceClient = PrivateSiteClient

__all__ = ["DPSPCAClient", "DPdisPCAClient", "KPlaneClient", "LDPCovarianceClient",
           "PrivateSiteClient", "client_factory", "site_client_app"]

"""The Flower layer's site half: a site's ClientApp, its ``NumPyClient`` adapter and what it
keeps between a run's messages, each a thin shell over its
:class:`~fedpca.site.service.SiteService`."""

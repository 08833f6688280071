"""Deprecated: fedpca's Flower clients live in :mod:`fedpca.flower` (the ClientApp in
:mod:`fedpca.flower.clientapp`, the one client of every algorithm and its factories in
:mod:`fedpca.flower.site_client`). Importing this package warns."""

from fedpca.algorithms.specs import SPECS
from fedpca.flower.clientapp import site_client_app
from fedpca.flower.deprecated import alias_package
from fedpca.flower.site_client import PrivateSiteClient, client_factory

DPSPCAClient = DPdisPCAClient = KPlaneClient = LDPCovarianceClient = PrivateSiteClient

alias_package(__name__, {
    module: {"client_for_site": client_factory(SPECS[algorithm].site_class())}
    for module, algorithm in (("dps_pca", "dps-pca"), ("dpdis_pca", "dpdis-pca"),
                              ("ldp_pca", "ldp-pca"), ("kplane", "sulq-kplane"))
}, "fedpca.flower.clientapp and fedpca.flower.site_client")

__all__ = ["DPSPCAClient", "DPdisPCAClient", "KPlaneClient", "LDPCovarianceClient",
           "site_client_app"]

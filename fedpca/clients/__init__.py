"""Flower clients: each wraps a Flower-free site object that owns its data, noise and ledger.

:func:`site_client_app` builds the one ClientApp a site runs, answering fedpca's Message-API
strategies and its legacy strategies (with or without SecAgg+) through the same client.
"""

from fedpca.clients.dpdis_pca import DPdisPCAClient
from fedpca.clients.dps_pca import DPSPCAClient
from fedpca.clients.kplane import KPlaneClient
from fedpca.clients.ldp_pca import LDPCovarianceClient
from fedpca.flower.clientapp import site_client_app

__all__ = [
    "DPSPCAClient",
    "DPdisPCAClient",
    "KPlaneClient",
    "LDPCovarianceClient",
    "site_client_app",
]

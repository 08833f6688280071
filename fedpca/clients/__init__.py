"""Flower NumPyClients: each wraps a Flower-free site object that owns its data, noise and ledger."""

from fedpca.clients.dpdis_pca import DPdisPCAClient
from fedpca.clients.dps_pca import DPSPCAClient
from fedpca.clients.ldp_pca import LDPCovarianceClient

__all__ = ["DPSPCAClient", "DPdisPCAClient", "LDPCovarianceClient"]

"""Flower server strategies; each calls a Flower-free server object for every formula."""

from fedpca.strategies.dpdis_pca import DPdisPCAStrategy
from fedpca.strategies.dps_pca import DPSPCAStrategy
from fedpca.strategies.ldp_pca import LDPCovarianceStrategy

__all__ = ["DPSPCAStrategy", "DPdisPCAStrategy", "LDPCovarianceStrategy"]

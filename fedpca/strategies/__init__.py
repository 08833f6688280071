"""Flower server strategies; each calls a Flower-free server object for every formula."""

from fedpca.strategies.dps_pca import DPSPCAStrategy

__all__ = ["DPSPCAStrategy"]

"""Flower NumPyClients: each wraps a Flower-free site object that owns its data, noise and ledger."""

from fedpca.clients.dps_pca import DPSPCAClient

__all__ = ["DPSPCAClient"]

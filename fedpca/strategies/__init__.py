"""Flower server strategies; each calls a Flower-free server object for every formula.

Every algorithm has two twins with the same constructor: a Message-API strategy
(``flwr.serverapp.strategy.Strategy``: ``DPSPCA``, ``DPdisPCA``, ``LDPCovariance``,
``SuLQKPlane``), started like Flower's ``FedAvg``, and a legacy one
(``flwr.server.strategy.Strategy``: ``DPSPCAStrategy``, ``DPdisPCAStrategy``,
``LDPCovarianceStrategy``, ``KPlaneStrategy``), the only kind Flower's SecAgg+ workflow drives.
"""

from fedpca.strategies.dpdis_pca import DPdisPCA, DPdisPCAStrategy
from fedpca.strategies.dps_pca import DPSPCA, DPSPCAStrategy
from fedpca.strategies.kplane import KPlaneStrategy, SuLQKPlane
from fedpca.strategies.ldp_pca import LDPCovariance, LDPCovarianceStrategy

__all__ = [
    "DPSPCA",
    "DPSPCAStrategy",
    "DPdisPCA",
    "DPdisPCAStrategy",
    "KPlaneStrategy",
    "LDPCovariance",
    "LDPCovarianceStrategy",
    "SuLQKPlane",
]

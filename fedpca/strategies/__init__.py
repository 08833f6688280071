"""fedpca's Flower strategies, started like Flower's ``FedAvg``: each algorithm's strategy on
the Message API (:mod:`fedpca.flower.server.strategies`), the one strategy that runs any algorithm's
server, their adapters to Flower's legacy strategy API and the function that runs either in
a ServerApp's ``main`` (the stable public names; the Flower layer holds them)."""

from fedpca.flower.server.legacy_strategy import LegacySiteStrategy
from fedpca.flower.server.strategies import (
    DPSPCA,
    DPdisPCA,
    DPdisPCAStrategy,
    DPSPCAStrategy,
    KPlaneStrategy,
    LDPCovariance,
    LDPCovarianceStrategy,
    SuLQKPlane,
)
from fedpca.flower.server.strategy import MessageSiteStrategy
from fedpca.flower.server.workflow import run_strategy

__all__ = ["DPSPCA", "DPSPCAStrategy", "DPdisPCA", "DPdisPCAStrategy", "KPlaneStrategy",
           "LDPCovariance", "LDPCovarianceStrategy", "LegacySiteStrategy",
           "MessageSiteStrategy", "SuLQKPlane", "run_strategy"]

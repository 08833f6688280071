"""Deprecated: each algorithm's Flower strategy lives in :mod:`fedpca.flower.strategies`.
Importing this package warns."""

from fedpca.flower.deprecated import alias_package
from fedpca.flower.strategies import (
    DPSPCA,
    DPdisPCA,
    DPdisPCAStrategy,
    DPSPCAStrategy,
    KPlaneStrategy,
    LDPCovariance,
    LDPCovarianceStrategy,
    SuLQKPlane,
)

alias_package(__name__, {}, "fedpca.flower.strategies")

__all__ = ["DPSPCA", "DPSPCAStrategy", "DPdisPCA", "DPdisPCAStrategy", "KPlaneStrategy",
           "LDPCovariance", "LDPCovarianceStrategy", "SuLQKPlane"]

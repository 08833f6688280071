"""Deprecated: one simulation runs every algorithm, :func:`fedpca.flower.simulations.simulate`
(``fedpca.simulations.dps_pca.simulate_dps_pca`` and its siblings are that function).
Importing this package warns."""

from fedpca.flower.deprecated import alias_package
from fedpca.flower.simulations import simulate

alias_package(__name__, {
    "dps_pca": {"simulate_dps_pca": simulate}, "dpdis_pca": {"simulate_dpdis_pca": simulate},
    "ldp_pca": {"simulate_ldp_pca": simulate}, "kplane": {"simulate_kplane": simulate},
}, "fedpca.flower.simulations")

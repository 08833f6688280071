"""fedpca's Flower simulations (the stable public names; the Flower layer holds them): any
algorithm's scenario (:func:`simulate`), a centred run over one table per site
(:func:`simulate_tables`), DPS-PCA over PLINK filesets (:func:`simulate_genotypes`), and a
strategy against sites of one's own (:func:`run_federation`)."""

from fedpca.flower.federation import client_sites, run_federation, source_sites
from fedpca.flower.simulations import simulate, simulate_genotypes, simulate_tables

__all__ = ["client_sites", "run_federation", "simulate", "simulate_genotypes",
           "simulate_tables", "source_sites"]

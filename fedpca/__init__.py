"""fedpca: differentially private principal components of the union of several sites' data.

The package is split into a Flower-free core (DP maths ``fedpca.dp``, a real site's trust
boundary ``fedpca.site``, linear algebra, the algorithms' servers and sites, data, scenarios)
and one Flower layer, ``fedpca.flower``: the only code that imports Flower (strategies, the
ClientApp, the Flower App, simulations); docs/layout.md maps every module.

Unit of privacy everywhere: one record at one site, neighbouring datasets differ by replacing
one record. Every guarantee is (epsilon, delta)-DP for the whole transcript a site sends.
"""

__version__ = "0.1.0"

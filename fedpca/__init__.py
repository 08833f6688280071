"""fedpca: differentially private principal components of the union of several sites' data.

The package is split into a Flower-free core (privacy accounting and mechanisms, linear
algebra, reference algorithms, data) and Flower adapters (``fedpca.strategies``,
``fedpca.clients``, ``fedpca.simulations``, ``fedpca.apps``).

Unit of privacy everywhere: one record at one site, neighbouring datasets differ by replacing
one record. Every guarantee is (epsilon, delta)-DP for the whole transcript a site sends.
"""

__version__ = "0.1.0"

"""Paper reproductions: ``fedpca experiment NAME --out DIR`` writes PNG plots, JSON and a
markdown summary. Each module here registers its experiments with
:func:`fedpca.experiments.registry.experiment`; modules are found automatically."""

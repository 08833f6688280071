"""Empirical privacy audit: the Flower-free distinguishing attack
(:mod:`fedpca.audit.attack.attack`) and the audited releases
(:mod:`fedpca.audit.attack.targets`)."""

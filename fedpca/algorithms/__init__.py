"""Reference algorithms: pure numpy/scipy, no Flower import.

Each federated algorithm is split into a *site* object (what one data holder computes and
releases, under its own ledger) and a *server* object (what the coordinator does with the
releases); the reference run loops over both in-process, and the Flower strategies and
clients wrap the very same objects, so both paths use one copy of every formula. The central
baselines (:mod:`fedpca.algorithms.central`, :mod:`fedpca.algorithms.ppca`) run on pooled
data held by a trusted curator.
"""

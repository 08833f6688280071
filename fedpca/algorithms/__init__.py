"""Reference algorithms: pure numpy/scipy, no Flower import.

Each algorithm is split into a *site* object (what one data holder computes and releases,
under its own ledger) and a *server* object (what the coordinator does with the releases).
The reference run loops over both in-process; the Flower strategies and clients wrap the
very same objects, so both paths use one copy of every formula.
"""

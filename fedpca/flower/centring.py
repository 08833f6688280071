"""Private centring and scaling in a Flower run: a moments round before any algorithm's.

A centred strategy (e.g. :class:`~fedpca.strategies.dpdis_pca.CentredDPdisPCA`) runs the
algorithm's server wrapped in a :class:`~fedpca.algorithms.centred_rounds.CentredServer`:
Flower round 1 asks every site for its moments release; every later round is the algorithm's
round ``t - 1``, its request carrying the released mean and scale (the sites keep nothing
between rounds but their ledgers). The sites answer with a
:class:`~fedpca.algorithms.centred_rounds.CentredSite`: each centres and scales its rows with
what arrives and clips them to its own public norm ``C`` before the algorithm's release.

Privacy guarantee: each site's (:mod:`fedpca.algorithms.centred_rounds`): its own policy
splits the run's budget between the moments and the algorithm and is charged to one ledger;
the budget round (:mod:`fedpca.flower.readiness`) asks whether the whole run, moments
included, fits. Nothing here can change a site's noise: the mean and scale it sends are
untrusted at the site and only move which rows are clipped to the site's own ``C``.

The history gains the moments round as round 0 (phase
:data:`~fedpca.algorithms.centring.MOMENTS_PHASE`); the result is a
:class:`~fedpca.results.CentredPCAResult` (columns, mean, scale, explained variance where the
algorithm's server holds a whole noisy matrix).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fedpca.algorithms.centred_rounds import CentredServer
from fedpca.algorithms.centring import MomentsServer

#: An algorithm's server from its strategy's parameters.
ServerBuilder = Callable[..., Any]


def centred(build: ServerBuilder) -> Callable[..., CentredServer]:
    """The builder of a centred run's server: ``build``'s server after the moments round of
    ``centring`` (a :class:`~fedpca.algorithms.centring.MomentsServer`), with the contract's
    output ``columns`` for the result."""

    def centred_build(*, centring: MomentsServer, columns: Sequence[str] | None = None,
                      **params: Any) -> CentredServer:
        return CentredServer(build(**params), centring, columns)

    centred_build.__doc__ = f"A centred run's server: the moments round, then {build.__name__}'s."
    return staticmethod(centred_build)

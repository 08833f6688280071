"""A run's server side, planned once by its scenario for the simulations and the App.

:class:`ServerPlan` is what any Flower strategy needs to run an algorithm's server
(:meth:`~fedpca.scenarios.base.Scenario.server_plan`).
:class:`CentredPlan` derives what every centred run shares from the run's policy (the
request's: each site calibrates with its own), the consortium's contract and the
federation: the public rotation seed of the secure sums, the moments round's
:class:`~fedpca.algorithms.centring.MomentsServer` (its secure sum when the policy's
releases are discrete; every record's own views with a local policy) and the
:class:`~fedpca.algorithms.centred_run.CentredSetup` the algorithm's spec builds its own
part from (:meth:`~fedpca.scenarios.base.Scenario.centred_server`), which
:meth:`CentredPlan.plan` puts after the moments round. No Flower import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fedpca.algorithms.centred_rounds import CentredServer
from fedpca.algorithms.centred_run import CentredAlgorithm, CentredSetup
from fedpca.algorithms.centring import CentredPolicy
from fedpca.algorithms.secure_sum import public_seed
from fedpca.dp.moments import ColumnBounds


@dataclass
class ServerPlan:
    """A run's server side, as any Flower strategy runs it (no Flower import).

    Attributes:
        server: the algorithm's server (its round protocol,
            :class:`~fedpca.algorithms.server.ServerRecord`).
        privacy: the privacy the run was configured with (the request's, for the result).
        after_run: called with each answering site's record count once the rounds ran,
            before the result is made; returns the run's privacy record when it depends
            on them (``None``: :attr:`privacy` stands).
    """

    server: Any
    privacy: dict[str, Any]
    after_run: Callable[[Mapping[str, int]], dict[str, Any] | None] | None = None


class PlannedScenario(Protocol):
    """What a centred plan reads of the algorithm's scenario."""

    seed: int | None
    sites: int


class CentredPlan:
    """What a centred run's server derives from its policy, contract and federation.

    Args:
        scenario: the algorithm's parameters (``k``, ``seed``, ``min_sites``, ...).
        policy: the run's :class:`CentredPolicy` (the request's).
        bounds, columns: the contract's bounds and output column names.
        max_records: a public bound on every site's record count (secure sums only).
    """

    def __init__(self, scenario: PlannedScenario, policy: CentredPolicy, bounds: ColumnBounds,
                 columns: Sequence[str], max_records: int) -> None:
        self.columns = list(columns)
        self.setup = CentredSetup(bounds, policy, scenario.sites, max_records,
                                  public_seed(scenario.seed), scenario.seed)
        self.centring = self.setup.moments()

    def plan(self, part: CentredAlgorithm) -> ServerPlan:
        """The run's server: the moments round, then the algorithm's ``part`` (its server's
        rounds and its privacy record)."""
        return ServerPlan(CentredServer(part.server, self.centring, self.columns), part.privacy)

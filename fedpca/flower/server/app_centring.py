"""A centred run in the Flower App: run_config ``centring = "centre"`` or ``"standardize"``.

The ServerApp runs the moments round, then the algorithm's rounds on the centred
(standardised) rows (:meth:`~fedpca.scenarios.base.Scenario.centred_server`: a
:class:`~fedpca.algorithms.centred_rounds.CentredServer`; every later request carries the
released mean and scale, the sites keep nothing between rounds but their ledgers). It holds no
data: it needs the
consortium's contract only for its public widths (run_config ``contract-file``, the
server's copy, which must have the run's hash ``contract``). Real sites answer from their
own table, contract and policy (:attr:`fedpca.site.real_site.RealSiteSource.opened`); simulated
partitions have no table and refuse a centred run (``fedpca simulate ALGORITHM --tables``
simulates one).
"""

from __future__ import annotations

from typing import Any

from flwr.common import Context
from flwr.server import Grid

from fedpca.algorithms.centring import requested_scaling
from fedpca.flower.server.app_server import finish, server_scenario
from fedpca.data.contract import Contract, load_contract
from fedpca.errors import ConfigurationError
from fedpca.scenarios.base import Scenario
from fedpca.scenarios.tables import WIDTH_CAPPED, requested_policy
from fedpca.scenarios.plans import CentredPlan
from fedpca.flower.server.workflow import run_plan


def is_centred(config: dict[str, Any]) -> bool:
    """Whether run_config asks for a centred run (an unknown ``centring`` is refused)."""
    return requested_scaling(config.get("centring", ""), "the ServerApp") is not None


def server_contract(config: dict[str, Any]) -> Contract:
    """The server's copy of the run's contract (run_config ``contract-file``), refused
    unless its hash is the run's ``contract``."""
    path = str(config.get("contract-file", ""))
    if not path:
        raise ConfigurationError(
            "a centred run needs run_config contract-file: the server's copy of the "
            "consortium's contract (its public widths turn the moments into a mean and scale)")
    contract = load_contract(path)
    if contract.hash != config.get("contract"):
        raise ConfigurationError(
            f"run_config contract-file {path} has hash {contract.hash}, but the run names "
            f"contract {config.get('contract')!r}: name the same contract the sites hold")
    return contract


def run_centred(grid: Grid, context: Context, scenario_cls: type[Scenario]) -> None:
    """Run the run_config's scenario centred (its
    :meth:`~fedpca.scenarios.base.Scenario.centred_server`) over the connected sites; write
    the result if asked."""
    scenario, config, readiness = server_scenario(scenario_cls, grid, context)
    standardize = requested_scaling(config["centring"], "the ServerApp")
    contract = server_contract(config)
    dim = contract.bounds.dim
    capped = {key: min(getattr(scenario, key), dim) for key in WIDTH_CAPPED
              if hasattr(scenario, key)}  # the synthetic model's sizes, for a narrow table
    scenario = scenario_cls.from_run_config(config, sites=scenario.sites, dim=dim, **capped)
    policy = requested_policy(scenario, bool(standardize),
                              public_scales=contract.bounds.all_public)
    plan = CentredPlan(scenario, policy, contract.bounds, contract.output_columns,
                       scenario.max_records(config) or 0)
    strategy = run_plan(grid, context, scenario, scenario.centred_server(plan), readiness)
    finish(strategy.result(config), config)

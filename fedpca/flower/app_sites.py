"""What every algorithm's Flower App entry shares: building this node's client (a real
site from its own policy, or a simulated partition), and writing the result."""

from __future__ import annotations

import logging
from typing import Any

from flwr.client import Client
from flwr.common import Context
from flwr.server import Grid

from fedpca.algorithms.centring import CentringSite
from fedpca.algorithms.site import require_rest_of_run, run_ledger
from fedpca.algorithms.specs import AlgorithmSpec
from fedpca.flower.real_site import (
    is_real_site,
    open_real_site,
    real_site_budget,
    real_site_identity,
)
from fedpca.flower.site_client import ClientFactory, client_factory
from fedpca.flower.centred_client import centred_client
from fedpca.flower.ledger_state import load_ledger
from fedpca.data.memory import require_simulation_memory
from fedpca.errors import ConfigurationError
from fedpca.loadings import loadings_path, write_loadings
from fedpca.report import record_summary
from fedpca.results import PCAResult
from fedpca.run_record import RunResult, run_record, save_run_record
from fedpca.scenarios.base import MAX_WEIGHT, S, Scenario
from fedpca.secure.identity import SecureIdentity, simulation_identity
from fedpca.site.ready import SiteReady
from fedpca.flower.rounds import connected_nodes, require_ready
from fedpca.flower.readiness import Readiness, ask_budget

logger = logging.getLogger(__name__)

#: The fewest sites a ServerApp waits for (a "federation" of one site is its own curator).
DEFAULT_MIN_SITES = 2
#: run_config key of the secure sums' minimum ``M``.
SECURE_MIN_SITES = "secure-min-sites"


def site_client_for(context: Context, spec: AlgorithmSpec) -> Client:
    """This node's client for algorithm ``spec``.

    A real site (node_config names its ``policy``) answers from its own data file with its
    own budget, OS noise and lifetime ledger (:mod:`fedpca.flower.real_site`); the run_config
    supplies only the non-privacy parameters. A simulated site answers from partition
    ``partition-id`` of the scenario's data, with the run_config's policy and seed.
    """
    scenario_cls, client_for_site = spec.scenario_class(), client_factory(spec.site_class())
    if is_real_site(context):
        site = open_real_site(context, spec.name)
        if site.centred is not None:  # the moments round, then the algorithm's
            centring = CentringSite(site.records, site.bounds, site.centred, site=site.name,
                                    ledger=site.ledger, limits=site.limits)
            return centred_client(context, spec.site_class(), centring)
        scenario = scenario_cls.from_run_config(site.config, sites=least_sites(site.config))
        return client_for_site(context, site.records, scenario.policy(), site.name, seed=None,
                               ledger=site.ledger, limits=site.limits)
    return partition_client(client_for_site, partition_scenario(scenario_cls, context), context)


def site_budget_for(context: Context, spec: AlgorithmSpec) -> SiteReady | str:
    """This node's answer to the budget round for algorithm ``spec``: a real site's from its
    policy and lifetime ledger (:func:`~fedpca.flower.real_site.real_site_budget`), a
    simulated partition's from the run's in-memory ledger (:func:`partition_budget`)."""
    if is_real_site(context):
        return real_site_budget(context, spec.name)
    return partition_budget(partition_scenario(spec.scenario_class(), context), context)


def partition_scenario(scenario_cls: type[S], context: Context) -> S:
    """The run_config's scenario, as simulated partition ``partition-id`` of this node
    holds it; refuses a node that is neither a real site nor a simulated partition."""
    if "partition-id" not in context.node_config:
        raise ConfigurationError(
            "this node has no site policy (node_config policy=FILE: a real site) and no "
            "partition-id (a simulated site); a real site's operator starts its SuperNode "
            "with --node-config 'policy=\"/path/policy.toml\"'"
        )
    if context.run_config.get("centring", ""):
        raise ConfigurationError(
            "a simulated partition holds no table: a centred run (run_config centring) needs "
            "real sites with a data contract; simulate one with fedpca simulate ALGORITHM "
            "--tables ... --contract ...")
    return scenario_cls.from_run_config(dict(context.run_config), sites=site_partitions(context))


def partition_budget(scenario: Scenario, context: Context) -> str:
    """Simulated partition ``partition-id``'s answer to the budget round: its name when what
    is left of the run under ``scenario``'s policy fits the run's in-memory ledger (kept in
    ``context.state``); raises otherwise. No record is read or generated."""
    site = str(context.node_config["partition-id"])
    policy = scenario.policy()
    require_rest_of_run(policy, load_ledger(context, run_ledger(policy, site)))
    return site


def site_identity_for(context: Context, spec: AlgorithmSpec) -> SecureIdentity | None:
    """This node's identity in fedpca's verifiable secure aggregation: a real site's from
    its own policy files, a simulated partition's from the run_config's ``secure-min-sites``
    (:func:`partition_identity`); ``None`` when it takes part in no secure sum."""
    if is_real_site(context):
        return real_site_identity(context, spec.name)
    if "partition-id" not in context.node_config:
        return None
    scenario = spec.scenario_class().from_run_config(
        dict(context.run_config), sites=site_partitions(context)
    )
    return partition_identity(scenario, context)


def partition_identity(scenario: Scenario, context: Context) -> SecureIdentity | None:
    """Simulated partition ``partition-id``'s identity for ``scenario``'s secure sums (keys
    derived from public labels: :func:`fedpca.secure.identity.simulation_identity`), or
    ``None`` without secure sums."""
    min_sites = getattr(scenario, "secure_min_sites", None)
    if min_sites is None:
        return None
    return simulation_identity(int(context.node_config["partition-id"]),
                               site_partitions(context), min_sites, scenario.flower_rounds)


def partition_client(
    client_for_site: ClientFactory, scenario: Scenario, context: Context
) -> Client:
    """The client of virtual site ``node_config["partition-id"]`` (data built once per
    process by the scenario's cache, ledger in ``context.state``); a simulation whose
    records would not fit in this machine's memory is refused before any is generated."""
    require_simulation_memory(scenario.samples, scenario.dim, scenario.sites)
    partition = int(context.node_config["partition-id"])
    return client_for_site(
        context, scenario.prepared_site(partition), scenario.policy(), str(partition),
        seed=scenario.seed,
    )


def site_partitions(context: Context) -> int:
    """How many partitions the synthetic/benchmark data are split into (simulation)."""
    return int(context.node_config.get("num-partitions", 1))


def least_sites(config: dict[str, Any], connected: int = 0) -> int:
    """The federation size a node validates a run's shared parameters against: the sites
    connected when the run starts, but never fewer than the run's minimums (a site does not
    know the federation's size; the server waits for the minimum)."""
    minimums = (int(config.get("min-sites", 0)), int(config.get("secure-min-sites", 0)))
    return max(DEFAULT_MIN_SITES, connected, *minimums)


def server_scenario(
    scenario_cls: type[S], grid: Grid, context: Context
) -> tuple[S, dict[str, Any], Readiness]:
    """The ServerApp's scenario, run_config and readiness round, before any release.

    Once at least :func:`least_sites` sites are connected, every connected site is asked
    whether it is ready for the whole run (:mod:`fedpca.flower.readiness`); the run
    stops (:class:`~fedpca.flower.rounds.BudgetRoundError`) when fewer than the run's
    ``min-sites`` are (``0``: all of them). The run_config then takes the privacy settings
    the ready sites state (:func:`with_site_settings`), and the scenario is built over the
    connected sites. The server holds no data: it only validates the shared parameters
    (and rebuilds public synthetic data to evaluate). The config gains the run's id
    (``run_id``, as the sites' ledgers and stored results name the run)."""
    config = {**context.run_config, "run_id": str(context.run_id)}
    nodes = connected_nodes(grid, least_sites(config))
    readiness = ask_budget(grid, nodes)
    require_ready(readiness, int(config.get("min-sites", 0)) or len(nodes), "ServerApp")
    config = with_site_settings(config, readiness)
    sites = least_sites(config, len(nodes))
    return scenario_cls.from_run_config(config, sites=sites), config, readiness


def with_site_settings(config: dict[str, Any], readiness: Readiness) -> dict[str, Any]:
    """``config`` with the privacy settings the ready sites state
    (:class:`~fedpca.site.ready.SiteReady`) in a run of secure sums or a centred run: a
    real site calibrates with its own policy whatever the run_config says, so the server
    derives its side of such a run (a secure sum's grid, a centred run's budget split and
    variance floor) from what the sites use (a run of per-site noise needs none of it). A
    setting on which the sites differ keeps the run_config's value (logged), except in a
    run of secure sums, whose grid every site and the server must share: refused, naming
    each site's value. A secure run without ``secagg-max-weight`` takes the largest record
    count a site states (record counts are public)."""
    stated = {r.site: r for r in readiness.ready.values() if r.settings}
    secure = any(r.settings.get(SECURE_MIN_SITES) for r in stated.values())
    if not (secure or config.get("centring")):
        return config  # each site calibrates its own answers; the server needs none of it
    merged = dict(config)
    for key in sorted({key for r in stated.values() for key in r.settings}):
        values = {site: r.settings.get(key) for site, r in stated.items()}
        distinct = set(values.values())
        if len(distinct) == 1:
            (merged[key],) = distinct
            if key in config and config[key] != merged[key]:
                logger.info("run_config %s=%r replaced by the sites' own %r", key, config[key],
                            merged[key])
        elif secure:
            raise ConfigurationError(
                f"the ready sites' policies set different {key} ({values}); a secure sum "
                "needs one value at every site (the sites and the server derive its grid "
                f"from it): the sites' privacy officers set the same {key} in their policies")
        else:
            logger.warning("the ready sites' policies set different %s (%s); the run_config's "
                           "%r is recorded, each site calibrates with its own", key, values,
                           config.get(key))
    records = [r.records for r in stated.values() if r.records is not None]
    if secure and not int(config.get(MAX_WEIGHT, 0)) and records:
        merged[MAX_WEIGHT] = max(records)
    return merged


def record_path(config: dict[str, Any]) -> str | None:
    """run_config ``output``: where the run's record goes (``None``: nowhere)."""
    return str(config.get("output", "")) or None


def finish(result: RunResult, config: dict[str, Any]) -> None:
    """Log the result and write its run record (the same JSON as ``fedpca simulate
    --output``, :mod:`fedpca.run_record`) to run_config ``output`` when that is set, and a
    PCA result's loadings table next to it (:func:`fedpca.loadings.loadings_path`)."""
    logger.info("%s", record_summary(run_record(result)))
    output = record_path(config)
    if output:
        save_run_record(result, output)
        if isinstance(result, PCAResult):
            write_loadings(result, loadings_path(output))

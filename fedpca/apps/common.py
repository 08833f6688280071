"""What every algorithm's Flower App entry shares: building this node's client (a real
site from its own policy, or a simulated partition), and writing the result."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from flwr.client import Client
from flwr.common import Context

from fedpca.apps.real_site import is_real_site, open_real_site
from fedpca.clients.base import ClientFactory
from fedpca.errors import ConfigurationError
from fedpca.privacy.site_data import SiteData
from fedpca.report import result_summary
from fedpca.results import PCAResult

logger = logging.getLogger(__name__)

#: Sites the ServerApp waits for when run_config ``min-sites`` is 0.
DEFAULT_MIN_SITES = 2


class AppScenario(Protocol):
    """What an algorithm's scenario offers the App: its site policy, seed and partitions."""

    seed: int | None

    def policy(self) -> Any: ...

    def prepared_site(self, site: int) -> SiteData: ...


class ScenarioFactory(Protocol):
    """A scenario class: built from a run_config."""

    def from_run_config(self, config: dict[str, Any], **overrides: Any) -> AppScenario: ...


def site_client_for(
    context: Context, algorithm: str, scenario_cls: ScenarioFactory,
    client_for_site: ClientFactory,
) -> Client:
    """This node's client for ``algorithm``.

    A real site (node_config names its ``policy``) answers from its own data file with its
    own budget, OS noise and lifetime ledger (:mod:`fedpca.apps.real_site`); the run_config
    supplies only the non-privacy parameters. A simulated site answers from partition
    ``partition-id`` of the scenario's data, with the run_config's policy and seed.
    """
    if is_real_site(context):
        site = open_real_site(context, algorithm)
        scenario = scenario_cls.from_run_config(site.config, sites=1)
        return client_for_site(
            context, site.records, scenario.policy(), site.name, seed=None, ledger=site.ledger
        )
    if "partition-id" not in context.node_config:
        raise ConfigurationError(
            "this node has no site policy (node_config policy=FILE: a real site) and no "
            "partition-id (a simulated site); a real site's operator starts its SuperNode "
            "with --node-config 'policy=\"/path/policy.toml\"'"
        )
    scenario = scenario_cls.from_run_config(
        dict(context.run_config), sites=site_partitions(context)
    )
    return partition_client(client_for_site, scenario, context)


def partition_client(
    client_for_site: ClientFactory, scenario: AppScenario, context: Context
) -> Client:
    """The client of virtual site ``node_config["partition-id"]`` (data built once per
    process by the scenario's cache, ledger in ``context.state``)."""
    partition = int(context.node_config["partition-id"])
    return client_for_site(
        context, scenario.prepared_site(partition), scenario.policy(), str(partition),
        seed=scenario.seed,
    )


def site_partitions(context: Context) -> int:
    """How many partitions the synthetic/benchmark data are split into (simulation)."""
    return int(context.node_config.get("num-partitions", 1))


def min_sites(config: dict[str, Any]) -> int:
    """run_config ``min-sites``, or :data:`DEFAULT_MIN_SITES` when it is 0."""
    return int(config.get("min-sites", 0)) or DEFAULT_MIN_SITES


def finish(result: PCAResult, config: dict[str, Any]) -> None:
    """Log the result and write its run record (the same JSON as ``fedpca simulate
    --output``, :mod:`fedpca.run_record`) to run_config ``output`` when that is set."""
    from fedpca.run_record import save_run_record

    logger.info("%s", result_summary(result))
    output = str(config.get("output", ""))
    if output:
        save_run_record(result, output)

"""What every algorithm's Flower App entry shares: the site's own settings, its data, and
writing the result."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from flwr.common import Context

from fedpca.data.files import load_site_file
from fedpca.report import result_summary
from fedpca.results import PCAResult
from fedpca.site_data import SiteData

logger = logging.getLogger(__name__)

#: Sites the ServerApp waits for when run_config ``min-sites`` is 0.
DEFAULT_MIN_SITES = 2
#: node_config keys a site may use to set its own privacy policy: the site, not the
#: coordinator, owns its budget, so these win over the server's run_config.
SITE_POLICY_KEYS = ("epsilon", "delta", "rounds", "accounting", "clip-norm", "secure-min-sites")


class PartitionedScenario(Protocol):
    """A scenario that can build the records of one of its partitions."""

    def prepared_site(self, site: int) -> SiteData: ...


def site_config(context: Context) -> dict[str, Any]:
    """The server's run_config with this site's own policy keys (node_config) on top."""
    node = dict(context.node_config)
    merged = dict(context.run_config)
    merged.update({key: node[key] for key in SITE_POLICY_KEYS if key in node})
    return merged


def site_partitions(context: Context) -> int:
    """How many partitions the synthetic/benchmark data are split into (simulation)."""
    return int(context.node_config.get("num-partitions", 1))


def site_records(context: Context, scenario: PartitionedScenario) -> tuple[str, Any]:
    """``(site name, records)``: the file in node_config ``data-path`` (a real site), else
    partition ``partition-id`` of the scenario's data (simulation and tests)."""
    node = dict(context.node_config)
    if "data-path" in node:
        name = str(node.get("site-name", node.get("partition-id", node["data-path"])))
        return name, load_site_file(str(node["data-path"]), site=name)
    partition = int(node["partition-id"])
    return str(partition), scenario.prepared_site(partition)


def min_sites(config: dict[str, Any]) -> int:
    """run_config ``min-sites``, or :data:`DEFAULT_MIN_SITES` when it is 0."""
    return int(config.get("min-sites", 0)) or DEFAULT_MIN_SITES


def finish(result: PCAResult, config: dict[str, Any]) -> None:
    """Log the result and write it as JSON to run_config ``output`` when that is set."""
    logger.info("%s", result_summary(result))
    output = str(config.get("output", ""))
    if output:
        result.save(output)

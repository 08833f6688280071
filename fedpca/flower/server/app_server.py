"""The ServerApp's side of a Flower App run: the readiness round before the scenario is
built, the sites' stated settings merged into it, and the result written."""

from __future__ import annotations

import logging
from typing import Any

from flwr.common import Context
from flwr.server import Grid

from fedpca.flower.server.readiness import Deadlines, Readiness, ask_readiness
from fedpca.flower.server.rounds import connected_nodes, require_ready
from fedpca.errors import ConfigurationError
from fedpca.loadings import loadings_path, write_loadings
from fedpca.report import record_lines
from fedpca.results import PCAResult
from fedpca.run_record import RunResult, run_record, save_run_record
from fedpca.scenarios.base import MAX_WEIGHT, S, least_sites

logger = logging.getLogger(__name__)

#: run_config key of the secure sums' minimum ``M``.
SECURE_MIN_SITES = "secure-min-sites"


def server_scenario(
    scenario_cls: type[S], grid: Grid, context: Context
) -> tuple[S, dict[str, Any], Readiness]:
    """The ServerApp's scenario, run_config and readiness round, before any release.

    Once at least :func:`least_sites` sites are connected (or the run_config's
    ``connect-seconds`` passed, :class:`~fedpca.flower.server.readiness.Deadlines`), every
    connected site is asked
    whether it is ready for the whole run (:mod:`fedpca.flower.server.readiness`); the run
    stops (:class:`~fedpca.flower.server.rounds.ReadinessRoundError`) when fewer than the run's
    ``min-sites`` are (``0``: all of them). The run_config then takes the privacy settings
    the ready sites state (:func:`with_site_settings`), and the scenario is built over the
    connected sites. The server holds no data: it only validates the shared parameters
    (and rebuilds public synthetic data to evaluate). The config gains the run's id
    (``run_id``, as the sites' ledgers and stored results name the run)."""
    config = {**context.run_config, "run_id": str(context.run_id)}
    deadlines = Deadlines.of(config)
    nodes = connected_nodes(grid, least_sites(config), deadlines.connect)
    readiness = ask_readiness(grid, nodes, deadlines.readiness)
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
    """Print the result as ``fedpca show`` does, after the round table the rounds printed
    (:func:`~fedpca.report.record_lines`: the sites' guarantees, the summary, the floored
    scales, the explained variance) on the coordinator's screen, and write its run record
    (the same JSON as ``fedpca simulate --output``, :mod:`fedpca.run_record`) to run_config
    ``output`` when that is set, and a PCA result's loadings table next to it
    (:func:`fedpca.loadings.loadings_path`)."""
    print("\n".join(record_lines(run_record(result), table=False)), flush=True)
    output = record_path(config)
    if output:
        save_run_record(result, output)
        if isinstance(result, PCAResult):
            write_loadings(result, loadings_path(output))

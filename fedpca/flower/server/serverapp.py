"""The Flower App's ServerApp body (:func:`run_server_app`, what
:data:`fedpca.flower.app.server_app` runs): the configured algorithm's server over the
connected sites (a simulated genotype run's over its PLINK filesets: :func:`genotype_context`),
or a centred run (:func:`~fedpca.flower.server.app_centring.run_centred`), on the
Message API; a run that fails writes a failure record
(:func:`fedpca.run_record.failure_recorded`). Kept apart from :mod:`fedpca.flower.app` so
that a ClientApp process, which imports that module for every message, loads no server
code."""

from __future__ import annotations

from flwr.common import Context
from flwr.server import Grid

from fedpca.algorithms.specs import run_algorithm, spec
from fedpca.dp import calibration_cache
from fedpca.errors import ConfigurationError, ParameterError, RunConfigNames
from fedpca.flower.server.app_centring import is_centred, run_centred
from fedpca.flower.server.app_server import finish, record_path, server_scenario
from fedpca.flower.server.prompt_grid import prompt
from fedpca.flower.server.readiness import Deadlines
from fedpca.flower.server.workflow import run_plan
from fedpca.run_record import failure_recorded
from fedpca.scenarios.genotypes import PLINK, genotype_plan, genotype_run


def run_server_app(grid: Grid, context: Context) -> None:
    """Run the configured algorithm. A run that fails (e.g. fewer than ``min-sites`` sites
    are ready for it) writes a failure record to run_config ``output`` and raises, so Flower
    marks the run failed; a parameter error names the run_config keys to change. The run's
    noise calibrations (public parameters only) are kept in the coordinator's cache, as a
    site's are (:mod:`fedpca.dp.calibration_cache`): a deployment starts a fresh ServerApp
    process for every run."""
    with (calibration_cache.kept_in(calibration_cache.environment_directory()),
          failure_recorded(run_algorithm(context.run_config),
                           record_path(dict(context.run_config)))):
        try:
            deadlines = Deadlines.of(context.run_config)
            server_main(prompt(grid, deadlines.answer, deadlines.restart), context)
        except ParameterError as error:  # named as the coordinator writes them
            raise ConfigurationError(error.render(RunConfigNames())) from None


def server_main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm over the connected sites (a moments round first when
    run_config ``centring`` asks) and write the result if run_config ``output`` is set."""
    scenario_cls = spec(run_algorithm(context.run_config)).scenario_class()
    if context.run_config.get(PLINK):
        context = genotype_context(context)
    if is_centred(dict(context.run_config)):
        run_centred(grid, context, scenario_cls)
        return
    scenario, config, readiness = server_scenario(scenario_cls, grid, context)
    strategy = run_plan(grid, context, scenario, genotype_plan(scenario, config), readiness)
    finish(strategy.result(config), config)


def genotype_context(context: Context) -> Context:
    """``context`` with the run_config of its simulated genotype run
    (:func:`~fedpca.scenarios.genotypes.genotype_run`: the filesets' sites and samples, the
    panel's width, row norm and digest as the contract, the largest site's individuals as
    the secure sums' bound) over the coordinator's keys."""
    run = genotype_run(dict(context.run_config))
    return Context(run_id=context.run_id, node_id=context.node_id,
                   node_config=context.node_config, state=context.state,
                   run_config={**context.run_config, **run.run_config()})

"""The Flower App declared in pyproject.toml: one ServerApp/ClientApp pair for every algorithm.

``run_config["algorithm"]`` picks the algorithm (``dps-pca`` by default) among
:data:`fedpca.algorithms.specs.SPECS`: the ClientApp answers with that algorithm's site
(:func:`fedpca.flower.app_sites.site_client_for`) in one ClientApp that serves the Message-API
strategies and the legacy/SecAgg+ ones (:func:`fedpca.flower.clientapp.site_client_app`); the
ServerApp runs the algorithm's server (:func:`server_main`: the scenario's
:meth:`~fedpca.scenarios.base.Scenario.server_plan`, or a centred run's
:func:`~fedpca.flower.app_centring.run_centred`), on the Message API unless Flower's SecAgg+
is asked, each site answering its budget round from its policy and ledger
(:func:`fedpca.flower.app_sites.site_budget_for`) and taking the released result at the end
(:func:`result_fn`: a real site stores it beside its policy); a run that fails writes a
failure record (:func:`fedpca.run_record.failure_recorded`).
"""

from __future__ import annotations

from flwr.app import RecordDict
from flwr.client import Client
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.algorithms.specs import DEFAULT_ALGORITHM, AlgorithmSpec, spec
from fedpca.flower.app_centring import is_centred, run_centred
from fedpca.flower.app_sites import (
    finish,
    record_path,
    server_scenario,
    site_budget_for,
    site_client_for,
    site_identity_for,
)
from fedpca.flower.workflow import run_plan
from fedpca.flower.real_site import is_real_site, real_site_result, real_site_run_failed
from fedpca.blas import single_thread_blas
from fedpca.errors import ConfigurationError, ParameterError, RunConfigNames
from fedpca.flower.clientapp import client_result, client_run_end, site_client_app
from fedpca.run_record import failure_recorded
from fedpca.flower.prompt_grid import prompt
from fedpca.secure.identity import SecureIdentity


def _algorithm(context: Context) -> str:
    return str(context.run_config.get("algorithm", DEFAULT_ALGORITHM))


def _spec(context: Context) -> AlgorithmSpec:
    return spec(_algorithm(context))


def client_fn(context: Context) -> Client:
    """This node's client for the configured algorithm."""
    single_thread_blas()
    return site_client_for(context, _spec(context))


def identity_fn(context: Context) -> SecureIdentity | None:
    """This node's identity in fedpca's verifiable secure aggregation (or ``None``)."""
    return site_identity_for(context, _spec(context))


def budget_fn(context: Context) -> str:
    """This node's answer to the budget round (its name, or it raises its refusal)."""
    return site_budget_for(context, _spec(context))


def result_fn(context: Context, content: RecordDict) -> str:
    """This node's taking of the run's released result: a real site checks and stores it
    (:func:`~fedpca.flower.real_site.real_site_result`), a simulated one checks it."""
    if is_real_site(context):
        return real_site_result(context, content)
    return client_result(client_fn, context, content)


def end_fn(context: Context, reason: str) -> str:
    """This node's taking of the news that the run failed: a real site's ledger records it
    (:func:`~fedpca.flower.real_site.real_site_run_failed`), a simulated one logs it."""
    if is_real_site(context):
        return real_site_run_failed(context, reason)
    return client_run_end(client_fn, context, reason)


def server_main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm over the connected sites (a moments round first when
    run_config ``centring`` asks) and write the result if run_config ``output`` is set."""
    scenario_cls = _spec(context).scenario_class()
    if is_centred(dict(context.run_config)):
        run_centred(grid, context, scenario_cls)
        return
    scenario, config, readiness = server_scenario(scenario_cls, grid, context)
    strategy = run_plan(grid, context, scenario, scenario.server_plan(config), readiness)
    finish(strategy.result(config), config)


client_app = site_client_app(client_fn, identity_fn, budget_fn, result_fn, end_fn)
server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm. A run that fails (e.g. fewer than ``min-sites`` sites
    can afford it) writes a failure record to run_config ``output`` and raises, so Flower
    marks the run failed; a parameter error names the run_config keys to change."""
    with failure_recorded(_algorithm(context), record_path(dict(context.run_config))):
        try:
            server_main(prompt(grid), context)
        except ParameterError as error:  # named as the coordinator writes them
            raise ConfigurationError(error.render(RunConfigNames())) from None

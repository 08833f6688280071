"""Run a fedpca strategy inside a ServerApp ``main`` (shared by apps and simulations): the
strategy for a run's plan, its secure sums through fedpca's verifiable secure aggregation,
and what the plan does once the rounds ran."""

from __future__ import annotations

import logging
import sys
from typing import Any

from flwr.common import Context
from flwr.server import Grid

from fedpca.blas import single_thread_blas
from fedpca.progress import RoundProgress, log_round
from fedpca.flower.server.rounds import SiteRoundStrategy
from fedpca.flower.server.readiness import Deadlines, Readiness
from fedpca.flower.server.strategy import MessageSiteStrategy
from fedpca.flower.server.secure_server import VerifiedSecureAggregation
from fedpca.scenarios.base import Scenario
from fedpca.scenarios.plans import ServerPlan

logger = logging.getLogger(__name__)


def strategy_for(plan: ServerPlan, scenario: Scenario, wait_for_sites: int | None = None,
                 deadlines: Deadlines | None = None) -> MessageSiteStrategy:
    """The Message-API strategy that runs ``plan``'s server for ``scenario``, its secure sums
    (if any) through fedpca's verifiable secure aggregation; every round needs the scenario's
    :meth:`~fedpca.scenarios.base.Scenario.required_sites` answers and waits for
    ``wait_for_sites`` connected sites (a simulation: all of them), each wait as long as
    ``deadlines`` say (``None``: the App's defaults)."""
    strategy = MessageSiteStrategy(plan.server, min_sites=scenario.required_sites(),
                                   wait_for_sites=wait_for_sites, privacy=plan.privacy,
                                   deadlines=deadlines)
    secure_aggregation(scenario, strategy)
    return strategy


def after_run(plan: ServerPlan, strategy: SiteRoundStrategy) -> None:
    """What ``plan`` does once the rounds ran (:attr:`ServerPlan.after_run`: e.g. a privacy
    record from the sites' reported record counts), before the result is made."""
    if plan.after_run is None:
        return
    privacy = plan.after_run(dict(strategy.site_sizes))
    if privacy is not None:
        strategy.privacy = privacy


def run_plan(grid: Grid, context: Context, scenario: Scenario, plan: ServerPlan,
             readiness: Readiness | None = None) -> SiteRoundStrategy:
    """Run ``plan``'s server for ``scenario`` in a ServerApp ``main`` (:func:`strategy_for`,
    with the run_config's :class:`~fedpca.flower.server.readiness.Deadlines`,
    :func:`run_strategy` and :func:`after_run`); the strategy, whose ``result`` is the
    run's. The coordinator's screen (the ServerApp's standard output, what ``flwr run
    --stream`` and ``flwr log`` show) gets the same round table as a simulation's, each
    round's line as the round completes (:class:`~fedpca.progress.RoundProgress`)."""
    strategy = strategy_for(plan, scenario, deadlines=Deadlines.of(context.run_config))
    with RoundProgress(strategy.server.algorithm, strategy.num_rounds, sys.stdout,
                       tty=False) as screen:
        strategy.add_observer(screen)
        run_strategy(grid, context, strategy, readiness=readiness)
    after_run(plan, strategy)
    return strategy


def secure_aggregation(scenario: Any, strategy: MessageSiteStrategy) -> None:
    """Give ``strategy`` fedpca's verifiable secure aggregation when ``scenario`` has secure
    sums (its ``secure_min_sites``), in groups of its ``secure_group_size`` sites where it
    has one (0: one sum); a scenario without them (LDP-PCA's local model) gets none."""
    min_sites = getattr(scenario, "secure_min_sites", None)
    if min_sites is not None:
        strategy.use_secure_protocol(VerifiedSecureAggregation(
            min_sites=min_sites, timeout=strategy.answer_seconds(),
            group_size=getattr(scenario, "secure_group_size", 0)))


def run_strategy(grid: Grid, context: Context, strategy: Any,
                 num_rounds: int | None = None, readiness: Readiness | None = None) -> None:
    """Drive ``strategy`` (a :class:`~fedpca.flower.server.strategy.MessageSiteStrategy`, or its
    legacy-API adapter :class:`~fedpca.flower.server.legacy_strategy.LegacySiteStrategy`) for
    ``num_rounds`` Flower rounds (default: the strategy's own) through its ``run``; every
    aggregated round is logged (INFO, :func:`fedpca.progress.log_round`) as it ends. The
    readiness round comes first (``readiness``: its answers, when the ServerApp asked
    already), the released result, under run_config ``contract``, goes to every site last;
    the result is ``strategy.result()``."""
    single_thread_blas()
    strategy.add_observer(log_round)
    strategy.run(grid, str(context.run_config.get("contract", "")), readiness,
                 num_rounds=num_rounds, context=context)

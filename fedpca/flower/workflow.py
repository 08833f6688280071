"""Run a fedpca strategy inside a ServerApp ``main`` (shared by apps and simulations): a
Message-API strategy through its own ``start``, a legacy one through Flower's
``DefaultWorkflow``, optionally with SecAgg+ secure aggregation as the fit workflow."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from flwr.app import ArrayRecord
from flwr.common import Context
from flwr.server import Grid, LegacyContext, ServerConfig
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
from flwr.server.workflow.secure_aggregation.secaggplus_workflow import WorkflowState

from fedpca.algorithms.secure_sum import SecAggPlusEmbedding
from fedpca.blas import single_thread_blas
from fedpca.errors import ConfigurationError
from fedpca.progress import log_round
from fedpca.flower.rounds import RoundFailedError, SiteRoundStrategy
from fedpca.flower.readiness import Readiness
from fedpca.flower.legacy_strategy import failure_reason
from fedpca.flower.strategy import MessageSiteStrategy
from fedpca.flower.secure_server import VerifiedSecureAggregation
from fedpca.flower.legacy_strategy import LegacySiteStrategy
from fedpca.scenarios.base import Scenario
from fedpca.scenarios.plans import ServerPlan

logger = logging.getLogger(__name__)

#: Shares per site: Flower's SecAgg+ cost grows sharply with it (all sites: 146 s per round
#: at 100 sites; 11 shares: about 11 s).
DEFAULT_NUM_SHARES = 11


class MinimumSumSecAggPlusWorkflow(SecAggPlusWorkflow):
    """SecAgg+ that never decodes a sum over fewer than ``min_sites`` sites.

    Sites add ``sigma / sqrt(m)`` trusting that every revealed sum has at least ``m``
    contributions. Flower's SecAgg+ checks only each site's neighbourhood; this workflow also
    checks the number of active sites before the unmask stage, so with too many drop-outs
    the server keeps only masked vectors and the run stops.
    """

    def __init__(self, *, min_sites: int, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.min_sites = min_sites

    def __call__(self, grid: Grid, context: Context) -> None:
        """Run SecAgg+'s stages; a halted stage stops the run with the sites' own reasons
        (Flower would log "halted" and go on to the next round without a result)."""
        state = WorkflowState()
        for stage in (self.setup_stage, self.share_keys_stage,
                      self.collect_masked_vectors_stage, self.unmask_stage):
            if not stage(grid, context, state):
                reasons = sorted({failure_reason(failure) for failure in state.failures})
                raise RoundFailedError(
                    f"secure aggregation halted in {stage.__name__}; site failures: "
                    f"{reasons[:5] or 'none reported (too few sites answered)'}",
                    failures=reasons,
                )

    def unmask_stage(self, grid: Grid, context: LegacyContext, state: WorkflowState) -> bool:
        """Refuse to unmask a sum over fewer than ``min_sites`` sites; else unmask."""
        active = len(state.active_node_ids)
        if active < self.min_sites:
            logger.error(
                "SecAgg+: only %d sites are still active, fewer than m=%d; the sum is not "
                "unmasked", active, self.min_sites,
            )
            raise RoundFailedError(
                f"secure aggregation stopped before unmasking: {active} active sites, but "
                f"the sites' noise assumes sums over at least m={self.min_sites}"
            )
        return super().unmask_stage(grid, context, state)


@dataclass(frozen=True)
class SecAggSettings:
    """Flower SecAgg+ parameters (see ``flwr.server.workflow.SecAggPlusWorkflow``).

    Sites weight their answers by their record counts ``n_i``, so ``max_weight`` must be at
    least the largest ``n_i`` (then ``n_i / max_weight <= 1`` keeps quantisation precise).
    ``sites * quantization_range`` must stay below ``modulus_range`` or sums wrap around.
    """

    num_shares: int
    reconstruction_threshold: int
    max_weight: float
    min_sites: int
    clipping_range: float = 8.0
    quantization_range: int = 2**24
    modulus_range: int = 2**40
    timeout: float | None = None
    #: Whether the sites send residues modulo ``modulus_range`` (see :meth:`for_residues`).
    modular: bool = False

    @classmethod
    def for_sites(cls, sites: int, max_weight: float, min_sites: int) -> SecAggSettings:
        """Defaults for ``sites`` sites whose largest record count is ``max_weight``, whose
        noise assumes every revealed sum covers at least ``min_sites`` of them."""
        if sites < 3:
            raise ConfigurationError(
                f"secure aggregation needs at least 3 sites, got {sites}"
            )
        if not 2 <= min_sites <= sites:
            raise ConfigurationError(
                f"the guaranteed minimum m={min_sites} of sites in a sum must be in 2..{sites}"
            )
        shares = min(DEFAULT_NUM_SHARES, sites)
        return cls(
            num_shares=shares,
            reconstruction_threshold=max(2, (2 * shares) // 3),
            max_weight=float(max_weight),
            min_sites=min_sites,
        )

    @classmethod
    def for_residues(
        cls, sites: int, min_sites: int, embedding: SecAggPlusEmbedding
    ) -> SecAggSettings:
        """Settings for sites sending distributed discrete Gaussian residues: the exact
        embedding of residues modulo ``m`` (the sum is meant to wrap modulo ``m``; the sites'
        grid bounds the chance that the true sum leaves ``[-m/2, m/2)``)."""
        shares = cls.for_sites(sites, embedding.weight, min_sites)
        return dataclasses.replace(shares, modular=True, **embedding.settings())

    def check(self, sites: int) -> None:
        """Raise ConfigurationError if these settings would wrap the sum (real-valued
        shares; a sum of residues wraps by design)."""
        if not self.modular and sites * self.quantization_range >= self.modulus_range:
            raise ConfigurationError(
                f"{sites} sites x quantization_range {self.quantization_range} reaches "
                f"modulus_range {self.modulus_range}: the secure sum would wrap around; "
                "raise modulus_range (a power of two)"
            )

    def workflow(self) -> SecAggPlusWorkflow:
        """The SecAgg+ fit workflow (refusing sums over fewer than ``min_sites`` sites)."""
        return MinimumSumSecAggPlusWorkflow(
            min_sites=self.min_sites,
            num_shares=self.num_shares,
            reconstruction_threshold=self.reconstruction_threshold,
            max_weight=self.max_weight,
            clipping_range=self.clipping_range,
            quantization_range=self.quantization_range,
            modulus_range=self.modulus_range,
            timeout=self.timeout,
        )


def strategy_for(plan: ServerPlan, scenario: Scenario,
                 wait_for_sites: int | None = None) -> SiteRoundStrategy:
    """The strategy that runs ``plan``'s server for ``scenario`` on the Message API, or on
    the legacy API when its secure sums are Flower's SecAgg+ shares; every round needs the
    scenario's :meth:`~fedpca.scenarios.base.Scenario.required_sites` answers and waits for
    ``wait_for_sites`` connected sites (a simulation: all of them)."""
    strategy_cls = LegacySiteStrategy if plan.legacy else MessageSiteStrategy
    return strategy_cls(plan.server, min_sites=scenario.required_sites(),
                        wait_for_sites=wait_for_sites, privacy=plan.privacy)


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
    its secure sums :func:`secure_aggregation`, :func:`run_strategy` and :func:`after_run`);
    the strategy, whose ``result`` is the run's."""
    strategy = strategy_for(plan, scenario)
    run_strategy(grid, context, strategy, readiness=readiness,
                 secure=secure_aggregation(scenario, strategy, plan.max_weight))
    after_run(plan, strategy)
    return strategy


def secure_aggregation(
    scenario: Any, strategy: SiteRoundStrategy, max_weight: float
) -> SecAggSettings | None:
    """Set up the secure sums a run of ``scenario`` needs (``None``: none, or fedpca's
    verifiable secure aggregation, which a Message-API strategy of residues then runs:
    :meth:`MessageSiteStrategy.use_secure_protocol`). A legacy strategy gets Flower's SecAgg+
    settings instead (honest-but-curious simulation only): the exact embedding of residues,
    or continuous shares weighted by record counts of at most ``max_weight``. Checked before
    anything runs. A scenario without secure sums (LDP-PCA's local model) gets none."""
    if getattr(scenario, "secure_min_sites", None) is None:
        return None
    sites = scenario.sites
    if isinstance(strategy, MessageSiteStrategy):
        strategy.use_secure_protocol(VerifiedSecureAggregation(min_sites=scenario.secure_min_sites))
        return None
    if strategy.secagg_embedding is not None:
        settings = SecAggSettings.for_residues(
            sites, scenario.secure_min_sites, strategy.secagg_embedding
        )
    else:
        settings = SecAggSettings.for_sites(sites, max_weight, scenario.secure_min_sites)
    settings.check(sites)
    return settings


def run_strategy(
    grid: Grid,
    context: Context,
    strategy: SiteRoundStrategy,
    num_rounds: int | None = None,
    secure: SecAggSettings | None = None,
    readiness: Readiness | None = None,
) -> None:
    """Drive ``strategy`` for ``num_rounds`` Flower rounds (default: the strategy's own);
    every aggregated round is logged (INFO, :func:`fedpca.progress.log_round`) as it ends.

    A Message-API strategy (e.g. :class:`~fedpca.flower.strategies.DPSPCA`) runs through its
    ``start``; a legacy one (e.g. :class:`~fedpca.flower.strategies.DPSPCAStrategy`) through
    Flower's ``DefaultWorkflow``, with SecAgg+ fit rounds if ``secure`` (legacy only: Flower
    1.41 has no SecAgg+ for the Message API), after its budget round
    (:meth:`~fedpca.flower.rounds.SiteRoundStrategy.budget_round`: a Message-API strategy
    runs its own in ``start``; ``readiness``: its answers, when the ServerApp asked already). The last step sends the released result, under run_config
``contract``, to every site
(:meth:`~fedpca.flower.rounds.SiteRoundStrategy.deliver_result`: a Message-API strategy
in its ``start``, a legacy one here). The result is ``strategy.result()``.
    """
    single_thread_blas()
    strategy.add_observer(log_round)
    num_rounds = strategy.num_rounds if num_rounds is None else num_rounds
    if isinstance(strategy, MessageSiteStrategy) and secure is not None:
        raise ConfigurationError(
            f"{type(strategy).__name__} runs on Flower's Message API, which has no "
            "SecAgg+ in flwr 1.41: use fedpca's verifiable secure aggregation "
            "(use_secure_protocol), or its legacy twin (e.g. DPSPCAStrategy) for SecAgg+"
        )
    strategy.contract = str(context.run_config.get("contract", ""))
    if readiness is not None:  # the ServerApp asked before it built the strategy
        strategy.readiness = readiness
    if isinstance(strategy, MessageSiteStrategy):
        strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=num_rounds)
        return
    strategy.budget_round(grid)  # the legacy API has no hook before round 1 for it
    legacy = LegacyContext(
        context=context, strategy=strategy, config=ServerConfig(num_rounds=num_rounds)
    )
    workflow = DefaultWorkflow(fit_workflow=secure.workflow()) if secure else DefaultWorkflow()
    try:
        workflow(grid, legacy)
    except Exception as error:
        strategy.announce_failure(grid, error)
        raise
    strategy.deliver_result(grid)  # the Message API's start does it

"""Run a legacy Flower strategy inside a ServerApp ``main`` (shared by apps and simulations)."""

from __future__ import annotations

from flwr.common import Context
from flwr.server import Grid, LegacyContext, ServerConfig
from flwr.server.workflow import DefaultWorkflow

from fedpca.blas import single_thread_blas


def run_strategy(grid: Grid, context: Context, strategy, num_rounds: int) -> None:
    """Drive ``strategy`` for ``num_rounds`` Flower rounds with the default workflow."""
    single_thread_blas()
    legacy = LegacyContext(
        context=context, strategy=strategy, config=ServerConfig(num_rounds=num_rounds)
    )
    DefaultWorkflow()(grid, legacy)

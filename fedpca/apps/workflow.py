"""Run a legacy Flower strategy inside a ServerApp ``main`` (shared by apps and simulations),
optionally with Flower's SecAgg+ secure aggregation as the fit workflow."""

from __future__ import annotations

from dataclasses import dataclass

from flwr.common import Context
from flwr.server import Grid, LegacyContext, ServerConfig
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

from fedpca.blas import single_thread_blas
from fedpca.errors import ConfigurationError

#: Shares per site: Flower's SecAgg+ cost grows sharply with it (all sites: 146 s per round
#: at 100 sites; 11 shares: about 11 s).
DEFAULT_NUM_SHARES = 11


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
    clipping_range: float = 8.0
    quantization_range: int = 2**24
    modulus_range: int = 2**40
    timeout: float | None = None

    @classmethod
    def for_sites(cls, sites: int, max_weight: float) -> SecAggSettings:
        """Defaults for ``sites`` sites whose largest record count is ``max_weight``."""
        if sites < 3:
            raise ConfigurationError(
                f"secure aggregation needs at least 3 sites, got {sites}"
            )
        shares = min(DEFAULT_NUM_SHARES, sites)
        return cls(
            num_shares=shares,
            reconstruction_threshold=max(2, (2 * shares) // 3),
            max_weight=float(max_weight),
        )

    def check(self, sites: int) -> None:
        """Raise ConfigurationError if these settings would wrap the modular sum."""
        if sites * self.quantization_range >= self.modulus_range:
            raise ConfigurationError(
                f"{sites} sites x quantization_range {self.quantization_range} reaches "
                f"modulus_range {self.modulus_range}: the secure sum would wrap around; "
                "raise modulus_range (a power of two)"
            )

    def workflow(self) -> SecAggPlusWorkflow:
        """The SecAgg+ fit workflow."""
        return SecAggPlusWorkflow(
            num_shares=self.num_shares,
            reconstruction_threshold=self.reconstruction_threshold,
            max_weight=self.max_weight,
            clipping_range=self.clipping_range,
            quantization_range=self.quantization_range,
            modulus_range=self.modulus_range,
            timeout=self.timeout,
        )


def run_strategy(
    grid: Grid,
    context: Context,
    strategy,
    num_rounds: int,
    secure: SecAggSettings | None = None,
) -> None:
    """Drive ``strategy`` for ``num_rounds`` Flower rounds (SecAgg+ fit rounds if ``secure``)."""
    single_thread_blas()
    legacy = LegacyContext(
        context=context, strategy=strategy, config=ServerConfig(num_rounds=num_rounds)
    )
    workflow = DefaultWorkflow(fit_workflow=secure.workflow()) if secure else DefaultWorkflow()
    workflow(grid, legacy)

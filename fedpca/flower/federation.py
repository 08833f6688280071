"""The one place that starts a Flower simulation.

``flwr.simulation.run_simulation`` still works in flwr 1.41 but is deprecated in favour of
``flwr run``; everything else calls :func:`launch` (or :func:`run_federation`, which builds
the apps around a strategy), so swapping the launcher touches only this module.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from flwr.client import ClientApp
from flwr.common import Context
from flwr.server import Grid, ServerApp
from flwr.simulation import run_simulation

from fedpca.blas import single_thread_blas
from fedpca.flower.site.clientapp import (
    ReadyFn,
    ClientFn,
    IdentityFn,
    SourceFn,
    cached_service,
    service_client_app,
    site_client_app,
)
from fedpca.data.site_store import StoreBound, store_enabled, temporary_store
from fedpca.errors import ConfigurationError, FedPCAError
from fedpca.extras import SIMULATION, require_extra
from fedpca.progress import RoundObserver
from fedpca.flower.server.rounds import SiteRoundStrategy
from fedpca.flower.server.workflow import run_strategy


@dataclass(frozen=True)
class Engine:
    """Where the virtual sites run: this machine (``ray_address=None``: Flower starts Ray
    in-process) or an existing Ray cluster (``"HOST:PORT"`` of its head, or ``"auto"``),
    and what each site reserves there.

    Attributes:
        ray_address: the Ray cluster to join, passed to ``ray.init`` (Flower's simulation
            backend hands ``init_args`` to it); ``None`` starts a local Ray.
        cpus_per_site: CPUs each virtual site reserves (one beat half a CPU on 2 cores).
        memory_per_site_mb: memory each virtual site reserves (``None``: no reservation).
    """

    ray_address: str | None = None
    cpus_per_site: float = 1.0
    memory_per_site_mb: int | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cpus_per_site) and self.cpus_per_site > 0):
            raise ConfigurationError(f"--cpus-per-site must be > 0, got {self.cpus_per_site}")
        if self.memory_per_site_mb is not None and self.memory_per_site_mb < 1:
            raise ConfigurationError(
                f"--memory-per-site must be >= 1 (MB), got {self.memory_per_site_mb}"
            )
        if self.ray_address is not None and not self.ray_address.strip():
            raise ConfigurationError("--ray-address is empty; give the head's HOST:PORT or 'auto'")

    def backend_config(self, verbose: bool) -> dict:
        """Flower's simulation ``backend_config`` for this engine."""
        resources: dict = {"num_cpus": self.cpus_per_site, "num_gpus": 0.0}
        if self.memory_per_site_mb is not None:
            resources["memory"] = self.memory_per_site_mb * 2**20
        # the sites' own log lines (e.g. Flower's actor shutdown notices) reach the console
        # only with verbose; their failures arrive as reply errors anyway
        init_args: dict = {"include_dashboard": False, "log_to_driver": verbose}
        if self.ray_address is not None:
            init_args = {"address": self.ray_address, "log_to_driver": verbose}
        return {"client_resources": resources, "init_args": init_args}


def launch(
    server_app: ServerApp, client_app: ClientApp, num_sites: int, verbose: bool = False,
    engine: Engine | None = None,
) -> None:
    """Run ``server_app`` against ``num_sites`` virtual sites (Ray backend: in-process, or
    on the Ray cluster ``engine`` names).

    Flower's own logs are shown only with ``verbose``: they include ``run_simulation``'s
    deprecation notice (a log record, not a Python warning), which Flower writes whichever
    strategy API runs. BLAS is kept single-threaded in this process and in the Ray workers
    (a multi-threaded BLAS can deadlock the ServerApp).
    """
    require_extra(SIMULATION, "a Flower simulation (Ray runs its virtual sites)")
    single_thread_blas()
    # Ray's notice about GPU visibility is irrelevant to CPU-only sites.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    flwr_logger = logging.getLogger("flwr")
    previous = flwr_logger.level
    if not verbose:
        flwr_logger.setLevel(logging.ERROR)
    try:
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=num_sites,
            backend_config=(engine or Engine()).backend_config(verbose),
            verbose_logging=verbose,
        )
    finally:
        flwr_logger.setLevel(previous)


@contextlib.contextmanager
def site_store_for(engine: Engine) -> Iterator[str | None]:
    """The run's store of prepared sites (:mod:`fedpca.data.site_store`): a temporary
    directory on this machine, removed afterwards, when the sites run here; none on a Ray
    cluster (its other machines could not read this one's directory) or when
    ``FEDPCA_SITE_STORE=0``."""
    if engine.ray_address is not None or not store_enabled():
        yield None
        return
    with temporary_store() as directory:
        yield directory


#: ``store -> ClientApp``: the virtual sites' ClientApp, given the run's store of prepared
#: sites on this machine (``None``: none; :func:`site_store_for`).
SitesApp = Callable[[str | None], ClientApp]


def client_sites(client_fn: ClientFn, identity_fn: IdentityFn | None = None,
                 ready_fn: ReadyFn | None = None) -> SitesApp:
    """Virtual sites given by functions of their context
    (:func:`fedpca.flower.site.clientapp.site_client_app`: ``client_fn`` a site's client,
    ``identity_fn`` its identity in fedpca's verifiable secure aggregation, ``ready_fn`` its
    readiness answer)."""
    return lambda store: site_client_app(StoreBound(client_fn, store), identity_fn, ready_fn)


def source_sites(source_fn: SourceFn) -> SitesApp:
    """Virtual sites each the :class:`~fedpca.site.service.SiteSource` that ``source_fn``
    gives for its node (e.g. a scenario's :class:`~fedpca.simulated_sites.PartitionSource`),
    its service opened once per run in each process
    (:func:`~fedpca.flower.site.clientapp.cached_service`)."""
    return lambda store: service_client_app(functools.partial(
        cached_service, StoreBound(source_fn, store)))


def run_federation(
    strategy: SiteRoundStrategy,
    sites: SitesApp,
    num_sites: int,
    verbose: bool = False,
    observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> None:
    """Simulate ``num_sites`` ``sites`` (:func:`source_sites`, :func:`client_sites`)
    answering ``strategy``
    for ``strategy.num_rounds`` rounds; raise if the run stopped before its last round.

    ``observer`` (e.g. :class:`fedpca.progress.RoundProgress`) is called by the strategy,
    in this process, after every aggregated round. A run that the strategy stops
    (:class:`~fedpca.errors.RunFailedError`, e.g. too few sites are ready for it) raises that
    error here (Flower's ``run_simulation`` re-raises it)."""
    if observer is not None:
        strategy.add_observer(observer)
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        run_strategy(grid, context, strategy, strategy.num_rounds)

    engine = engine or Engine()
    with site_store_for(engine) as store:
        launch(server_app, sites(store), num_sites, verbose=verbose, engine=engine)
    done = len(strategy.server.history)
    if done < strategy.num_rounds:
        raise FedPCAError(
            f"the simulation stopped after {done} of {strategy.num_rounds} rounds; site "
            f"failures: {strategy.failures[:5]}"
        )

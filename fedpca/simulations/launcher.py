"""The one place that starts a Flower simulation.

``flwr.simulation.run_simulation`` still works in flwr 1.41 but is deprecated in favour of
``flwr run``; everything else calls :func:`launch`, so swapping the launcher touches only
this module.
"""

from __future__ import annotations

import logging
import os
import warnings

from flwr.client import ClientApp
from flwr.server import ServerApp
from flwr.simulation import run_simulation

from fedpca.blas import single_thread_blas

#: One CPU per virtual site beat half a CPU on a 2-core machine.
CLIENT_RESOURCES = {"num_cpus": 1, "num_gpus": 0.0}


def launch(
    server_app: ServerApp, client_app: ClientApp, num_sites: int, verbose: bool = False
) -> None:
    """Run ``server_app`` against ``num_sites`` virtual sites in-process (Ray backend).

    Flower's own INFO logs are shown only with ``verbose``; BLAS is kept single-threaded in
    this process and in the Ray workers (a multi-threaded BLAS can deadlock the ServerApp).
    """
    single_thread_blas()
    # Ray's notice about GPU visibility is irrelevant to CPU-only sites.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    flwr_logger = logging.getLogger("flwr")
    previous = flwr_logger.level
    if not verbose:
        flwr_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            run_simulation(
                server_app=server_app,
                client_app=client_app,
                num_supernodes=num_sites,
                backend_config={
                    "client_resources": dict(CLIENT_RESOURCES),
                    "init_args": {"include_dashboard": False},
                },
                verbose_logging=verbose,
            )
    finally:
        flwr_logger.setLevel(previous)

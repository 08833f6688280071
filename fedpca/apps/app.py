"""The Flower App declared in pyproject.toml: one ServerApp/ClientApp pair for every algorithm.

``run_config["algorithm"]`` picks the algorithm (``dps-pca`` by default) among
:data:`fedpca.algorithms.specs.SPECS`: the ClientApp answers with that algorithm's site
(:func:`fedpca.apps.common.site_client_for`), the ServerApp runs its ``server_main``.
"""

from __future__ import annotations

from flwr.client import Client, ClientApp
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.algorithms.specs import DEFAULT_ALGORITHM, AlgorithmSpec, load, spec
from fedpca.apps.common import site_client_for
from fedpca.blas import single_thread_blas
from fedpca.clients.secure_aggregation import secure_aggregation_mod


def _spec(context: Context) -> AlgorithmSpec:
    return spec(str(context.run_config.get("algorithm", DEFAULT_ALGORITHM)))


def client_fn(context: Context) -> Client:
    """This node's client for the configured algorithm."""
    single_thread_blas()
    return site_client_for(context, _spec(context))


client_app = ClientApp(client_fn=client_fn, mods=[secure_aggregation_mod])
server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm."""
    load(_spec(context).server_main)(grid, context)

"""The Flower App declared in pyproject.toml: one ServerApp/ClientApp pair for every algorithm.

``run_config["algorithm"]`` picks the algorithm (``dps-pca`` by default); each algorithm's
module in :mod:`fedpca.apps` provides ``client_fn(context)`` and
``server_main(grid, context)``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from flwr.client import Client, ClientApp
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.clients.secure_aggregation import secure_aggregation_mod
from fedpca.errors import ConfigurationError

#: run_config ``algorithm`` value -> module implementing it.
ALGORITHMS = {
    "dps-pca": "fedpca.apps.dps_pca",
    "dpdis-pca": "fedpca.apps.dpdis_pca",
    "ldp-pca": "fedpca.apps.ldp_pca",
}
DEFAULT_ALGORITHM = "dps-pca"


def _module(context: Context) -> ModuleType:
    name = str(context.run_config.get("algorithm", DEFAULT_ALGORITHM))
    if name not in ALGORITHMS:
        raise ConfigurationError(
            f"run_config algorithm={name!r} is unknown; choose one of {sorted(ALGORITHMS)}"
        )
    return importlib.import_module(ALGORITHMS[name])


def client_fn(context: Context) -> Client:
    """This node's client for the configured algorithm."""
    return _module(context).client_fn(context)


client_app = ClientApp(client_fn=client_fn, mods=[secure_aggregation_mod])
server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm."""
    _module(context).server_main(grid, context)

"""The Flower App's declaration: its components and its run_config keys with defaults.

``pyproject.toml``'s ``[tool.flwr.app]`` tables must say the same (a test checks it); this
copy ships with the installed package, so a coordinator can write the configuration-only App
that real sites accept (:func:`fedpca.deployment.fab_check.write_config_only_app`).
"""

from __future__ import annotations

PUBLISHER = "fedpca"
#: The App's components: the ServerApp and the ClientApp of the installed package.
COMPONENTS = {
    "serverapp": "fedpca.apps.app:server_app",
    "clientapp": "fedpca.apps.app:client_app",
}
#: run_config keys and their defaults (``[tool.flwr.app.config]``).
APP_CONFIG: dict[str, bool | int | float | str] = {
    "algorithm": "dps-pca",
    "dim": 200,
    "samples": 200000,
    "k": 3,
    "sparsity": 10,
    "s-hat": 20,
    "rounds": 10,
    "epsilon": 1.0,
    "delta": 1e-05,
    "accounting": "pld",
    "clip-norm": 1.0,
    "seed": -1,
    "data-seed": 0,
    "min-sites": 0,
    "dataset": "synthetic",
    "r": 0,
    "weighting": "uniform",
    "variant": "factor",
    "alpha": 0.0,
    "sparse": False,
    "spike": 1.0,
    "lam": -1.0,
    "secure-min-sites": 0,
    "secagg-max-weight": 0,
    "output": "",
}

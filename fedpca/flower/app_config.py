"""The Flower App's declaration: its components (its run_config keys and defaults are
derived from the algorithms' scenarios, :func:`fedpca.algorithms.specs.app_config`).

``pyproject.toml``'s ``[tool.flwr.app]`` tables must say the same (a test checks it); this
declaration ships with the installed package, so a coordinator can write the configuration-only App
that real sites accept (:func:`fedpca.deployment.fab_check.write_config_only_app`).
"""

from __future__ import annotations

PUBLISHER = "fedpca"
#: The App's components: the ServerApp and the ClientApp of the installed package.
COMPONENTS = {
    "serverapp": "fedpca.flower.app:server_app",
    "clientapp": "fedpca.flower.app:client_app",
}

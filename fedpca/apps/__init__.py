"""Deprecated: the Flower App's ServerApp and ClientApp live in :mod:`fedpca.flower.app`
(a FAB naming ``fedpca.apps.app:server_app`` still loads them). Importing this package warns."""

from fedpca.flower import app
from fedpca.flower.deprecated import alias_package

alias_package(__name__, {"app": {"server_app": app.server_app, "client_app": app.client_app}},
              "fedpca.flower.app")

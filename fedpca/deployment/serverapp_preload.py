"""What the coordinator's fork server loads before it forks ServerApp tasks
(:data:`fedpca.deployment.coordinator_runtime.SERVERAPP_PRELOAD` names this module as its
one preload: importing it is the loading): Flower's ServerApp runtime and the HTTP transport
of its Runtime API client, fedpca's ServerApp and what a run imports on first use (the
privacy accountant, scipy's linear algebra). The coordinator's SuperExec runs no site's
data and sets no memory limit, so everything is loaded. Last, BLAS is limited to one thread
(:func:`~fedpca.blas.single_thread_blas`, which every ServerApp asks for), which the tasks
inherit."""

from __future__ import annotations

import importlib

from fedpca.blas import single_thread_blas
from fedpca.deployment.flower_internals import SERVERAPP_RUNTIME

MODULES = (
    "fedpca.deployment.coordinator_runtime",
    "fedpca.deployment.task_forks",
    SERVERAPP_RUNTIME,
    "httpcore",
    "fedpca.flower.app",
    "fedpca.flower.server.serverapp",
    "dp_accounting.pld",
    "dp_accounting.rdp",
    "scipy.linalg",
)

for _name in MODULES:
    importlib.import_module(_name)
single_thread_blas()

"""The coordinator's SuperExec: Flower's, with every ServerApp task forked from a warm
process.

A SuperLink started with ``--isolation process`` does not launch ServerApps itself; the
coordinator runs ``fedpca deploy superexec --runtime-api-address HOST:PORT
--root-certificates CA``, which is Flower's SuperExec whose ServerApp tasks (one per run)
are forked from a fork server that has imported Flower's ServerApp runtime and fedpca's
ServerApp (:class:`~fedpca.deployment.task_forks.ForkingExecutor`,
:mod:`~fedpca.deployment.serverapp_preload`) instead of each importing them afresh (about
two seconds of CPU per run). Each task is Flower's ``flwr-serverapp`` with the arguments
Flower's executor would give it, loading the App the run's FAB names as it would; only the
start is warm. ``fedpca deploy local`` starts the coordinator this way.

Nothing here is part of a site's trust boundary: a site's guarantee holds whichever
ServerApp runs and however it is started.
"""

from __future__ import annotations

from fedpca.deployment import flower_internals
from fedpca.deployment.task_forks import ForkingExecutor

#: What the coordinator's fork server imports before it forks ServerApp tasks.
SERVERAPP_PRELOAD = "fedpca.deployment.serverapp_preload"


def run_coordinator_superexec(runtime_api_address: str, root_certificates: str | None,
                              parent_pid: int | None = None) -> None:
    """Flower's SuperExec for the SuperLink's Runtime API at ``runtime_api_address`` (TLS
    with the CA ``root_certificates``; ``None``: insecure), forking ServerApp tasks from a
    warm process; it stops when the process ``parent_pid`` (if given) exits. FABs'
    dependencies are never installed."""
    flower_internals.run_superexec(
        runtime_api_address, root_certificates is None, root_certificates,
        executor=lambda: ForkingExecutor(flower_internals.SERVER_APP,
                                         flower_internals.run_serverapp,
                                         (SERVERAPP_PRELOAD,)),
        parent_pid=parent_pid,
    )

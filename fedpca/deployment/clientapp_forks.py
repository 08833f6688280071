"""A site's ClientApp tasks forked from one warm process instead of started cold.

Flower's SuperExec starts a new process for every ClientApp task (every message of a run),
and each one imports Python's runtime, Flower and fedpca again: about a second of CPU before
it reads its message. :class:`ForkingExecutor` is Flower's subprocess executor with one
change: a ClientApp task is a child of Python's ``multiprocessing`` fork server, started
once with :mod:`~fedpca.deployment.clientapp_preload` imported, so a task begins with the
pinned ClientApp's code already loaded (the entry it is given, :func:`fedpca.deployment.site_runtime.pinned_clientapp_main`,
with the task's token, address and certificates as its arguments, exactly as
``fedpca-site-clientapp`` would get them). Every other task type is launched by Flower's own
executor.

Each task is still a process of its own: the fork server holds only imported modules, never
a message, a context or a site's data, and no task's memory reaches another, so what a task
keeps between messages lives where it did before (Flower's context on the SuperNode, the
site's disk). A hostile coordinator gains nothing: the tasks it causes run the same pinned
code with the same arguments, under the same memory limit (the fork server is started by the
SuperExec after :func:`~fedpca.deployment.memory_limit.apply_memory_limit`, and its children
inherit the limit). The fork server listens on a Unix socket in a private directory of the
site's user (Python's ``multiprocessing``): only processes of that user reach it, and they
can already read the site's ledger and data. A task whose SuperExec dies is stopped with it,
as a daemonic child, where Flower's would stop on its parent-process monitor.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable

from flwr.supercore.constant import TASK_TYPE_TO_APPIO_API_ADDRESS_ARG, TaskType
from flwr.supercore.superexec.executor.subprocess_executor import SubprocessExecutor
from flwr.supercore.superexec.executor.types import ExecutionSpec, LaunchResult

#: The fork server's preload: importing it loads what the tasks import (under the site's
#: memory limit).
PRELOAD = ("fedpca.deployment.clientapp_preload",)


class ForkingExecutor(SubprocessExecutor):
    """Flower's subprocess executor, with ClientApp tasks forked from a warm fork server,
    each running ``task_main`` (the pinned ClientApp's entry) with the task's arguments."""

    def __init__(self, task_main: Callable[[list[str]], None]) -> None:
        self._task_main = task_main
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(PRELOAD))

    def launch(self, spec: ExecutionSpec) -> LaunchResult:
        """Start the task: a ClientApp as a fork of the warm process, any other as Flower
        starts it."""
        if spec.task_type != TaskType.CLIENT_APP:
            return super().launch(spec)
        task = self._context.Process(
            target=_run_task,
            args=(self._task_main, task_arguments(spec), spec.suppress_output),
            name=f"fedpca-site-clientapp task {spec.task_id}", daemon=True,
        )
        task.start()
        return LaunchResult.accepted()

    def reconcile(self) -> None:
        """Collect the exit status of finished tasks (no process is left a zombie)."""
        self._context.active_children()
        super().reconcile()


def task_arguments(spec: ExecutionSpec) -> list[str]:
    """The arguments Flower's executor would give ``fedpca-site-clientapp`` for ``spec``
    (a site never installs a FAB's dependencies, so that flag is never among them)."""
    arguments = [TASK_TYPE_TO_APPIO_API_ADDRESS_ARG[spec.task_type], spec.runtime_api_address,
                 "--token", spec.token]
    if spec.insecure:
        arguments.append("--insecure")
    elif spec.root_certificates_path is not None:
        arguments += ["--root-certificates", spec.root_certificates_path]
    if spec.parent_pid is not None:
        arguments += ["--parent-pid", str(spec.parent_pid)]
    return arguments


def _run_task(task_main: Callable[[list[str]], None], arguments: list[str],
              suppress_output: bool) -> None:
    """A forked task's body: ``task_main(arguments)``."""
    if suppress_output:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.dup2(devnull, sys.stderr.fileno())
    task_main(arguments)

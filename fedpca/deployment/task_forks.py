"""Flower tasks (a site's ClientApps, the coordinator's ServerApps) forked from one warm
process instead of started cold.

Flower's SuperExec starts a new process for every task (every message of a run at a site,
every run at the coordinator), and each one imports Python's runtime, Flower and fedpca
again: a second or more of CPU before it reads its message. :class:`ForkingExecutor` is
Flower's subprocess executor (reached through
:mod:`~fedpca.deployment.flower_internals`) with one change: a task of its type is a child
of Python's ``multiprocessing`` fork server, started once with its preload modules imported
(a site's: :mod:`~fedpca.deployment.clientapp_preload`, and a table site's
:mod:`~fedpca.deployment.table_preload`; the coordinator's:
:mod:`~fedpca.deployment.serverapp_preload`), so a task begins with its code already loaded
(the entry it is given, e.g. :func:`fedpca.deployment.site_runtime.pinned_clientapp_main`,
with the task's token, address and certificates as its arguments, exactly as Flower's
executor would give that command). Every other task type is launched by Flower's own
executor.

Each task is still a process of its own: the fork server holds only imported modules, never
a message, a context or a site's data, and no task's memory reaches another, so what a task
keeps between messages lives where it did before (Flower's context on the SuperNode or
SuperLink, the site's disk). At a site a hostile coordinator gains nothing: the tasks it
causes run the same pinned code with the same arguments, under the same memory limit (the
fork server is started by the SuperExec after
:func:`~fedpca.deployment.memory_limit.apply_memory_limit`, and its children inherit the
limit). The fork server listens on a Unix socket in a private directory of the user who
runs the SuperExec (Python's ``multiprocessing``): only processes of that user reach it, and
they can already read what the tasks read. A task whose SuperExec dies is stopped with it,
as a daemonic child, where Flower's would stop on its parent-process monitor.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fedpca.deployment import flower_internals


class ForkingExecutor:
    """Flower's subprocess executor, with the tasks of ``task_type`` forked from a warm
    fork server that imported the modules ``preloads`` (in order), each running
    ``task_main`` with the task's arguments; a task of any other type as Flower starts
    it, and every other call of the SuperExec (capacity, close) answered by Flower's
    executor."""

    def __init__(self, task_type: str, task_main: Callable[[list[str]], None],
                 preloads: Sequence[str]) -> None:
        self._task_type = task_type
        self._task_main = task_main
        self._flowers = flower_internals.subprocess_executor()
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(preloads))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._flowers, name)

    def launch(self, spec: Any) -> Any:
        """Start the task (Flower's ``ExecutionSpec``): one of this executor's type as a
        fork of the warm process, any other as Flower starts it."""
        if spec.task_type != self._task_type:
            return self._flowers.launch(spec)
        task = self._context.Process(
            target=_run_task,
            args=(self._task_main, task_arguments(spec), spec.suppress_output),
            name=f"fedpca {spec.task_type} task {spec.task_id}", daemon=True,
        )
        task.start()
        return flower_internals.launch_accepted()

    def reconcile(self) -> None:
        """Collect the exit status of finished tasks (no process is left a zombie)."""
        self._context.active_children()
        self._flowers.reconcile()


def task_arguments(spec: Any) -> list[str]:
    """The arguments Flower's executor would give the task's command for ``spec`` (a forked
    task runs the fork server's modules and never installs a FAB's dependencies, so that
    flag is never among them)."""
    arguments = [flower_internals.appio_address_arg(spec.task_type), spec.runtime_api_address,
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

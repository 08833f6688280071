"""Everything fedpca takes from Flower beyond its public API, in one place.

Flower's public API (``flwr.app``, ``flwr.serverapp``, ``flwr.clientapp``, the ``flwr`` and
``flower-*`` commands) is all the rest of fedpca uses. Two things a real site needs are not
in it, and this module is where fedpca reaches into Flower (flwr 1.41-1.43) for them:

* the site's pinned ClientApp runtime (``fedpca site superexec``/``fedpca-site-clientapp``,
  :mod:`fedpca.deployment.site_runtime`): Flower's own ``run_clientapp`` with its FAB
  installer and App loader replaced (:func:`run_pinned_clientapp`), Flower's SuperExec
  launching that command (:func:`run_superexec`) and Flower's SuperNode with the site's FAB
  check in front of its FAB parser (:func:`run_checked_supernode`);
* the warm start of Flower's tasks (:mod:`fedpca.deployment.task_forks`): Flower's
  subprocess executor, the arguments it gives a task's command and its launch result
  (:func:`subprocess_executor`, :func:`appio_address_arg`, :func:`launch_accepted`), and the
  coordinator's ``flwr-serverapp`` entry (:func:`run_serverapp`); plus Flower's telemetry
  switch (:func:`telemetry_off`) and its command line in-process (:func:`flwr_cli`).

Every Flower module attribute this module reads or replaces is listed in
:data:`RELIED_ON`; ``tests/test_flower_internals.py`` fails naming the one a new Flower
release removed. Nothing here changes what a site answers or spends: a site's guarantee is
in :mod:`fedpca.site`, whichever runtime carries its messages. Every import is inside the
function that needs it, so a process imports only the part of Flower it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

#: The modules of Flower's ClientApp and ServerApp runtimes, which the warm processes of
#: :mod:`~fedpca.deployment.task_forks` import before they fork a task.
CLIENTAPP_RUNTIME = "flwr.supernode.runtime.run_clientapp"
SERVERAPP_RUNTIME = "flwr.superlink.cli.flwr_serverapp"
#: Every ``(module, attribute)`` of Flower this module relies on (reads, calls or replaces).
RELIED_ON = (
    ("flwr.cli.app", "app"),
    ("flwr.common.args", "add_args_flwr_app_common"),
    ("flwr.common.args", "try_obtain_flwr_app_token"),
    ("flwr.supercore.constant", "SUPERNODE_DEFAULT_CLIENT_ADDRESS"),
    ("flwr.supercore.constant", "TASK_TYPE_TO_APPIO_API_ADDRESS_ARG"),
    ("flwr.supercore.constant", "TASK_TYPE_TO_COMMAND"),
    ("flwr.supercore.constant", "TaskType"),
    ("flwr.supercore.superexec.executor.subprocess_executor", "SubprocessExecutor"),
    ("flwr.supercore.superexec.executor.types", "LaunchResult"),
    ("flwr.supercore.superexec.run_superexec", "get_executor"),
    ("flwr.supercore.superexec.run_superexec", "run_superexec"),
    ("flwr.supercore.telemetry", "FLWR_TELEMETRY_ENABLED"),
    ("flwr.supercore.tls", "validate_and_resolve_root_certificates"),
    (SERVERAPP_RUNTIME, "flwr_serverapp"),
    ("flwr.supernode.cli.flower_supernode", "flower_supernode"),
    (CLIENTAPP_RUNTIME, "get_load_client_app_fn"),
    (CLIENTAPP_RUNTIME, "install_from_fab"),
    (CLIENTAPP_RUNTIME, "run_clientapp"),
    ("flwr.supernode.start_client_internal", "get_fused_config_from_fab"),
)
#: The keyword parameters fedpca passes to Flower's private functions, by function.
KEYWORDS = {
    (CLIENTAPP_RUNTIME, "run_clientapp"): (
        "runtime_api_address", "token", "insecure", "certificates", "parent_pid",
        "runtime_dependency_install"),
    ("flwr.supercore.superexec.run_superexec", "run_superexec"): (
        "runtime_api_address", "insecure", "root_certificates_path", "parent_pid",
        "runtime_dependency_install"),
}
#: The two kinds of Flower task fedpca starts warm (values of Flower's ``TaskType``).
CLIENT_APP, SERVER_APP = "flwr-clientapp", "flwr-serverapp"


def telemetry_off() -> None:
    """Flower's usage telemetry off in this process, also when Flower read its switch into a
    module constant at an import that came first (the caller sets the environment
    variable for the processes it starts)."""
    from flwr.supercore import telemetry

    telemetry.FLWR_TELEMETRY_ENABLED = "0"


def clientapp_arguments(argv: Sequence[str] | None, description: str) -> argparse.Namespace:
    """A ClientApp task's command line, parsed as Flower's ``flwr-clientapp`` parses it."""
    from flwr.common.args import add_args_flwr_app_common
    from flwr.supercore.constant import SUPERNODE_DEFAULT_CLIENT_ADDRESS

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runtime-api-address", default=SUPERNODE_DEFAULT_CLIENT_ADDRESS)
    add_args_flwr_app_common(parser=parser)
    return parser.parse_args(argv)


def run_pinned_clientapp(args: argparse.Namespace, check_fab: Callable[[bytes], None],
                         client_app: Callable[[], object]) -> None:
    """Flower's ``run_clientapp`` for the task ``args`` (:func:`clientapp_arguments`), with
    ``check_fab(fab_content)`` instead of installing the FAB and ``client_app()`` (the
    installed ClientApp) instead of loading the FAB's; runtime dependency installation
    off."""
    from flwr.common.args import try_obtain_flwr_app_token
    from flwr.supercore.tls import validate_and_resolve_root_certificates
    from flwr.supernode.runtime import run_clientapp as runtime

    def install(fab_content: bytes, *_args: object, **_kwargs: object) -> None:
        check_fab(fab_content)

    def loader(**_: object) -> Callable[..., object]:
        return lambda *_args: client_app()

    runtime.install_from_fab = install
    runtime.get_load_client_app_fn = loader
    runtime.run_clientapp(
        runtime_api_address=args.runtime_api_address,
        token=try_obtain_flwr_app_token(args),
        insecure=args.insecure,
        certificates=validate_and_resolve_root_certificates(args.root_certificates,
                                                            args.insecure),
        parent_pid=args.parent_pid,
        runtime_dependency_install=False,
    )


#: Flower's FAB parser's signature: ``(fab_content, run) -> configuration``.
FabParser = Callable[[bytes, Any], dict[str, Any]]


def run_checked_supernode(argv: Sequence[str],
                          checked: Callable[[FabParser], FabParser]) -> None:
    """Flower's ``flower-supernode ARGV``, its FAB parser replaced by ``checked(parser)``."""
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli.flower_supernode import flower_supernode

    start_client_internal.get_fused_config_from_fab = checked(
        start_client_internal.get_fused_config_from_fab)
    sys.argv = ["flower-supernode", *argv]
    flower_supernode()


def run_superexec(runtime_api_address: str, insecure: bool, root_certificates: str | None,
                  executor: Callable[[], object] | None = None, parent_pid: int | None = None,
                  clientapp_command: str | None = None) -> None:
    """Flower's SuperExec for the Runtime API at ``runtime_api_address`` with the executor
    ``executor()`` (``None``: Flower's choice) and, if given, ``clientapp_command`` as the
    command of a ClientApp task;
    it stops when the process ``parent_pid`` (if given) exits; FABs' dependencies are never
    installed."""
    from flwr.supercore.constant import TASK_TYPE_TO_COMMAND, TaskType
    from flwr.supercore.superexec import run_superexec as superexec

    if clientapp_command is not None:
        TASK_TYPE_TO_COMMAND[TaskType.CLIENT_APP] = clientapp_command
    if executor is not None:
        superexec.get_executor = lambda *_args, **_kwargs: executor()
    superexec.run_superexec(
        runtime_api_address=runtime_api_address,
        insecure=insecure,
        root_certificates_path=root_certificates,
        parent_pid=parent_pid,
        runtime_dependency_install=False,
    )


def subprocess_executor() -> Any:
    """Flower's own executor: every task a fresh process of its command."""
    from flwr.supercore.superexec.executor.subprocess_executor import SubprocessExecutor

    return SubprocessExecutor()


def launch_accepted() -> Any:
    """The result an executor returns for a task it started."""
    from flwr.supercore.superexec.executor.types import LaunchResult

    return LaunchResult.accepted()


def appio_address_arg(task_type: str) -> str:
    """The option that gives a task of ``task_type`` its Runtime API address."""
    from flwr.supercore.constant import TASK_TYPE_TO_APPIO_API_ADDRESS_ARG

    return TASK_TYPE_TO_APPIO_API_ADDRESS_ARG[task_type]


def run_serverapp(argv: Sequence[str]) -> None:
    """Flower's ``flwr-serverapp ARGV`` in this process."""
    from flwr.superlink.cli.flwr_serverapp import flwr_serverapp

    sys.argv = ["flwr-serverapp", *argv]
    flwr_serverapp()


def flwr_cli(argv: Sequence[str]) -> None:
    """Flower's ``flwr ARGV`` in this process (raises ``SystemExit`` as the command exits)."""
    from flwr.cli.app import app

    app(list(argv), prog_name="flwr", standalone_mode=False)

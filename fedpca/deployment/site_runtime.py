"""A site's own ClientApp runtime: Flower's protocol, the site's pinned fedpca code.

A SuperNode started with ``--isolation process`` does not launch ClientApps itself; the
site's operator runs ``fedpca site superexec --runtime-api-address 127.0.0.1:PORT``, which
is Flower's SuperExec launching :func:`pinned_clientapp_main` (console script
``fedpca-site-clientapp``) instead of ``flwr-clientapp`` for every task. That process speaks
Flower's Runtime API unchanged (it *is* Flower's ``run_clientapp``) with two substitutions:

* the FAB is never installed: :func:`~fedpca.deployment.fab_check.check_fab` refuses any FAB
  that carries code or names another ClientApp, and the refusal is the task's error reply;
* the ClientApp is always ``fedpca.apps.app.client_app`` of the installed package, imported
  from the site's environment (nothing of the FAB is on ``sys.path``); runtime dependency
  installation is off.

What remains trusted (see deploy/README.md): the site's own Python environment (fedpca,
flwr, numpy), its operating system, and the operator who starts these processes. Flower
itself does not protect against a coordinator-shipped FAB in a self-hosted federation:
``--trusted-entities`` verifies only FABs carrying Flower-hub verification records.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

from fedpca.deployment.fab_check import check_fab

logger = logging.getLogger(__name__)

#: The command Flower's SuperExec launches for a ClientApp task at a fedpca site.
PINNED_CLIENTAPP_COMMAND = "fedpca-site-clientapp"


def _pinned_loader(**_: object) -> Callable[..., object]:
    """Flower's ``get_load_client_app_fn`` replacement: always the installed ClientApp."""

    def load(*_args: object) -> object:
        from fedpca.apps.app import client_app

        return client_app

    return load


def _check_instead_of_install(fab_content: bytes, *_args: object, **_kwargs: object) -> None:
    """Flower's ``install_from_fab`` replacement: inspect the FAB, install nothing."""
    check_fab(fab_content)


def pinned_clientapp_main(argv: Sequence[str] | None = None) -> None:
    """``fedpca-site-clientapp``: run one ClientApp task with the site's pinned code."""
    from flwr.common.args import add_args_flwr_app_common, try_obtain_flwr_app_token
    from flwr.supercore.constant import SUPERNODE_DEFAULT_CLIENT_ADDRESS
    from flwr.supercore.tls import validate_and_resolve_root_certificates
    from flwr.supernode.runtime import run_clientapp as runtime

    parser = argparse.ArgumentParser(description="A fedpca site's pinned ClientApp task")
    parser.add_argument("--runtime-api-address", default=SUPERNODE_DEFAULT_CLIENT_ADDRESS)
    add_args_flwr_app_common(parser=parser)
    args = parser.parse_args(argv)
    runtime.install_from_fab = _check_instead_of_install
    runtime.get_load_client_app_fn = _pinned_loader
    runtime.run_clientapp(
        runtime_api_address=args.runtime_api_address,
        token=try_obtain_flwr_app_token(args),
        insecure=args.insecure,
        certificates=validate_and_resolve_root_certificates(args.root_certificates, args.insecure),
        parent_pid=args.parent_pid,
        runtime_dependency_install=False,
    )


def run_site_superexec(
    runtime_api_address: str, insecure: bool, root_certificates: str | None = None
) -> None:
    """Flower's SuperExec for a SuperNode in ``--isolation process`` mode, launching
    :data:`PINNED_CLIENTAPP_COMMAND` for ClientApp tasks (never a FAB's code)."""
    from flwr.supercore.constant import TASK_TYPE_TO_COMMAND, TaskType
    from flwr.supercore.superexec.run_superexec import run_superexec

    TASK_TYPE_TO_COMMAND[TaskType.CLIENT_APP] = PINNED_CLIENTAPP_COMMAND
    logger.info("site SuperExec: ClientApp tasks run %s", PINNED_CLIENTAPP_COMMAND)
    run_superexec(
        runtime_api_address=runtime_api_address,
        insecure=insecure,
        root_certificates_path=root_certificates,
        runtime_dependency_install=False,
    )

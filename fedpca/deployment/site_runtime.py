"""A site's own ClientApp runtime: Flower's protocol, the site's pinned fedpca code.

A SuperNode started with ``--isolation process`` does not launch ClientApps itself; the
site's operator runs ``fedpca site superexec --runtime-api-address 127.0.0.1:PORT``, which
is Flower's SuperExec launching :func:`pinned_clientapp_main` (console script
``fedpca-site-clientapp``) instead of ``flwr-clientapp`` for every task. That process speaks
Flower's Runtime API unchanged (it *is* Flower's ``run_clientapp``) with two substitutions:

* the FAB is never installed: :func:`~fedpca.deployment.fab_check.check_fab` refuses any FAB
  that carries code or names another ClientApp, and the refusal is the task's error reply;
* the ClientApp is always ``fedpca.flower.app.client_app`` of the installed package, imported
  from the site's environment (nothing of the FAB is on ``sys.path``); runtime dependency
  installation is off.

The SuperNode itself parses every FAB's ``pyproject.toml`` (Flower's
``get_fused_config_from_fab``) when a run's first message arrives, before any ClientApp
runs. ``fedpca site supernode`` is Flower's SuperNode with :func:`check_fab` in front of that
parser: a FAB the site refuses (code, another ClientApp, members that expand past the
limits) is never decompressed there; the run gets no configuration from it, and its task is
refused by the pinned ClientApp with the reason. Both commands also apply the policy's
memory limit (:mod:`fedpca.deployment.memory_limit`) to themselves and every process they
start.

What remains trusted (see deploy/README.md): the site's own Python environment (fedpca,
flwr, numpy), its operating system, and the operator who starts these processes. Flower
itself does not protect against a coordinator-shipped FAB in a self-hosted federation:
``--trusted-entities`` verifies only FABs carrying Flower-hub verification records.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from fedpca.data.tables import is_table_file
from fedpca.deployment import flower_internals
from fedpca.deployment.fab_check import FabRefusedError, check_fab
from fedpca.deployment.memory_limit import apply_memory_limit
from fedpca.errors import ConfigurationError
from fedpca.site.policy import SitePolicyFile

logger = logging.getLogger(__name__)

#: The command Flower's SuperExec launches for a ClientApp task at a fedpca site.
PINNED_CLIENTAPP_COMMAND = "fedpca-site-clientapp"
#: What a site's fork server imports before it forks ClientApp tasks (under the site's
#: memory limit).
CLIENTAPP_PRELOAD = "fedpca.deployment.clientapp_preload"
#: What a table site's fork server imports after it (:func:`clientapp_preloads`).
TABLE_PRELOAD = "fedpca.deployment.table_preload"


def _installed_client_app() -> object:
    """The ClientApp every task runs: the installed package's, never a FAB's."""
    from fedpca.flower.app import client_app

    return client_app


def pinned_clientapp_main(argv: Sequence[str] | None = None) -> None:
    """``fedpca-site-clientapp``: run one ClientApp task with the site's pinned code."""
    from fedpca.cli import LOG_FORMAT

    args = flower_internals.clientapp_arguments(argv, "A fedpca site's pinned ClientApp task")
    # the site's log shows what its answer did (e.g. each secure-aggregation step) and why
    # it refused, as its SuperNode's and SuperExec's do
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    _site_logging()
    no_flower_telemetry()
    flower_internals.run_pinned_clientapp(args, check_fab, _installed_client_app)


def checked_fab_config(parse: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Flower's ``get_fused_config_from_fab`` (``parse``) behind :func:`check_fab`: a FAB
    the site refuses is never decompressed by Flower; the run gets an empty configuration
    (logged), and the pinned ClientApp refuses its tasks with the reason."""

    def checked(fab_content: bytes, run: object) -> dict[str, Any]:
        try:
            check_fab(fab_content)
        except FabRefusedError as exc:
            logger.error("SuperNode: %s", exc)
            return {}
        return parse(fab_content, run)

    return checked


#: Flower's switch for its usage telemetry (an event sent to Flower's servers when one of its
#: processes starts or runs an app).
TELEMETRY_ENV = "FLWR_TELEMETRY_ENABLED"


def no_flower_telemetry() -> None:
    """Flower's telemetry off in this process and in every process it starts, whatever the
    environment said: a site's processes connect to the SuperLink (the site's replies) and
    to nothing else (deploy/README.md). Flower reads the switch into a module constant when
    it is first imported; that constant is set too, for an import that came first."""
    os.environ[TELEMETRY_ENV] = "0"
    flower_internals.telemetry_off()


def _site_logging() -> None:
    """Flower's log through Flower's own handler only (not again, at DEBUG, through the
    ``fedpca`` command's), and fedpca's from INFO: the memory limit and every refusal."""
    logging.getLogger("flwr").propagate = False
    logging.getLogger("fedpca").setLevel(logging.INFO)


def run_site_supernode(policy: SitePolicyFile, flower_args: Sequence[str]) -> None:
    """Flower's SuperNode (``flower-supernode FLOWER_ARGS``) with the policy's memory limit,
    the policy named in its node_config, and :func:`checked_fab_config` in front of
    Flower's FAB parser."""
    no_flower_telemetry()
    if any(arg.startswith("--node-config") for arg in flower_args):
        raise ConfigurationError(
            "fedpca site supernode sets --node-config itself (policy=the --policy file, the "
            "only key a site needs); remove it from the SuperNode's arguments"
        )
    _site_logging()
    apply_memory_limit(policy.memory_mib)
    flower_internals.run_checked_supernode(
        [*flower_args, "--node-config", f'policy="{policy.path}"'], checked_fab_config)


#: Environment variable: ``off`` makes a site's SuperExec start every ClientApp task as a
#: fresh process, as Flower's does (e.g. to compare, or to rule the fork server out while
#: debugging); ``on`` or unset: forked from a warm process.
FORKS_ENV = "FEDPCA_CLIENTAPP_FORKS"


def forked_tasks() -> bool:
    """Whether :data:`FORKS_ENV` lets the site's ClientApp tasks be forked (the default)."""
    value = os.environ.get(FORKS_ENV, "on")
    if value not in ("on", "off"):
        raise ConfigurationError(f"{FORKS_ENV}={value!r} must be 'on' (the default) or 'off'")
    return value == "on"


def clientapp_preloads(policy: SitePolicyFile) -> tuple[str, ...]:
    """The modules the fork server of the site with ``policy`` imports before it forks
    ClientApp tasks: :data:`CLIENTAPP_PRELOAD`, then :data:`TABLE_PRELOAD` when the site's
    records are a CSV or Parquet table (the modules its tasks import to read it)."""
    if policy.genotypes is None and is_table_file(policy.data):
        return CLIENTAPP_PRELOAD, TABLE_PRELOAD
    return (CLIENTAPP_PRELOAD,)


def run_site_superexec(
    runtime_api_address: str, insecure: bool, root_certificates: str | None,
    policy: SitePolicyFile,
) -> None:
    """Flower's SuperExec for a SuperNode in ``--isolation process`` mode, running
    :data:`PINNED_CLIENTAPP_COMMAND`'s code for ClientApp tasks (never a FAB's), each forked
    from a warm process (:class:`~fedpca.deployment.task_forks.ForkingExecutor`, with
    :func:`clientapp_preloads`), with the address space of itself and every ClientApp
    limited to the ``policy``'s ``memory_mib`` MiB (0: none)."""
    no_flower_telemetry()
    from fedpca.deployment.task_forks import ForkingExecutor

    _site_logging()
    apply_memory_limit(policy.memory_mib)
    forked = forked_tasks()
    preloads = clientapp_preloads(policy)
    logger.info("site SuperExec: ClientApp tasks run %s, %s", PINNED_CLIENTAPP_COMMAND,
                "forked from a warm process" if forked else "each a fresh process")
    flower_internals.run_superexec(
        runtime_api_address, insecure, root_certificates,
        executor=((lambda: ForkingExecutor(flower_internals.CLIENT_APP, pinned_clientapp_main,
                                           preloads))
                  if forked else None),
        clientapp_command=PINNED_CLIENTAPP_COMMAND,
    )

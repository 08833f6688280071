"""The ``fedpca`` command line.

``fedpca simulate ALGORITHM [flags]`` runs a Flower simulation (one module per algorithm in
:mod:`fedpca.commands`); ``fedpca experiment NAME --out DIR`` reproduces a paper's figure or
table (registered in :mod:`fedpca.experiments`); ``fedpca deploy certs|site-key|local``
prepares and runs a real deployment (:mod:`fedpca.deployment`); ``fedpca site
init|ledger|superexec`` is what a real site runs (:mod:`fedpca.commands.site`); ``fedpca audit MECHANISM``
bounds a mechanism's epsilon from below by a distinguishing attack (:mod:`fedpca.audit.attack`);
``fedpca show RESULT.json [--plot FILE.png]`` prints and draws a saved run.
"""

from __future__ import annotations

from fedpca.blas import single_thread_env

single_thread_env()  # before numpy is imported: a multi-threaded BLAS can deadlock Flower

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402

from fedpca.commands import register_all  # noqa: E402
from fedpca.commands.audit import register_audit_command  # noqa: E402
from fedpca.commands.show import register_show_command  # noqa: E402
from fedpca.commands.site import register_site_command  # noqa: E402
from fedpca.deployment.command import add_deployment_commands  # noqa: E402
from fedpca.errors import FedPCAError  # noqa: E402
from fedpca.experiments.registry import register_experiment_command  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fedpca`` command."""
    parser = argparse.ArgumentParser(
        prog="fedpca", description="Differentially private federated PCA on Flower."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    simulate = commands.add_parser("simulate", help="run a Flower simulation")
    register_all(simulate.add_subparsers(dest="algorithm", required=True))
    register_experiment_command(commands)
    register_audit_command(commands)
    deploy = commands.add_parser("deploy", help="certificates, site keys, a loopback deployment")
    add_deployment_commands(deploy.add_subparsers(dest="deploy_command", required=True))
    register_site_command(commands)
    register_show_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fedpca`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except FedPCAError as exc:
        print(f"fedpca: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

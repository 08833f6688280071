"""The ``fedpca`` command line: one sub-command per entry of :data:`COMMANDS` (its help and
the module that builds it). Only the command on the command line is built (and its modules
imported): ``fedpca --help`` imports neither Flower nor numpy.
"""

from __future__ import annotations

from fedpca.blas import single_thread_env

single_thread_env()  # before numpy is imported: a multi-threaded BLAS can deadlock Flower

import argparse
import logging
import os
import sys

from fedpca.algorithms.specs import load
from fedpca.errors import FedPCAError

#: command -> (its one-line help, the function adding its parser to the sub-parsers).
COMMANDS = {
    "simulate": ("run a Flower simulation",
                 "fedpca.commands.simulate:register_simulate_command"),
    "experiment": ("reproduce a paper's figure or table (PNG + JSON + markdown)",
                   "fedpca.experiments.registry:register_experiment_command"),
    "audit": ("empirical privacy audit: a distinguishing attack through the real clients",
              "fedpca.commands.audit:register_audit_command"),
    "deploy": ("certificates, site keys, the config-only App, a loopback deployment",
               "fedpca.deployment.command:register_deploy_command"),
    "site": ("a real site's policy, ledger and pinned runtime",
             "fedpca.commands.site:register_site_command"),
    "show": ("print the per-round table and summary of a saved result (and draw it)",
             "fedpca.commands.show:register_show_command"),
    "contract": ("a consortium's data contract: a template from a table, its hash, a check",
                 "fedpca.commands.contract:register_contract_command"),
    "data": ("public clinical tables split over sites, with their contracts",
             "fedpca.commands.data:register_data_command"),
}

#: How fedpca's commands (and a site's pinned ClientApp) format their log lines.
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
#: The exit code of a command whose output pipe closed early (128 + SIGPIPE, as a shell's).
BROKEN_PIPE = 141


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``fedpca`` command for ``argv``: the chosen command in
    full, every other one by name and help only."""
    parser = argparse.ArgumentParser(
        prog="fedpca", description="Differentially private federated PCA on Flower."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = next((a for a in argv or () if not a.startswith("-")), None)
    for name, (text, register) in COMMANDS.items():
        if name == chosen:
            load(register)(commands)
        else:
            commands.add_parser(name, help=text)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fedpca`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    try:  # building the chosen command imports it: a missing extra is an error too
        args = build_parser(argv).parse_args(argv)
        code = int(args.func(args))
        sys.stdout.flush()  # inside the try: a closed pipe fails here, not at exit
        return code
    except FedPCAError as exc:
        print(f"fedpca: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``fedpca contract show ... | head``)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())

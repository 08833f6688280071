"""``fedpca site init|check|ledger|project|supernode|superexec``: what a site's operator runs
next to its SuperNode (each sub-command's flags and their meaning: its ``--help``).

* ``init``: a commented policy file, an empty ledger and its identity file, then ``check``;
* ``check``: the policy, contract, records and ledger as a run would load them, and the runs
  of each allowed algorithm that still fit; creates nothing; exit code 1 on any problem;
* ``ledger``: the site's spending and its policy's recorded changes, read from its ledger
  once it passes its identity check (creates no ledger; :mod:`fedpca.site.ledger_report`),
  as text, JSON or one HTML page (:mod:`fedpca.site.ledger_page`); or a backup, a restore,
  a new or an adopted ledger, each recorded and dated (:mod:`fedpca.site.ledger_lifecycle`);
* ``project``: the site's own records' scores on a run's released components, written at the
  site, sent nowhere (:mod:`fedpca.site.results`);
* ``supernode``, ``superexec``: Flower's SuperNode (every FAB checked before Flower parses
  it) and SuperExec (running the site's pinned ClientApp, never a FAB's code), under the
  policy's memory limit.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fedpca.site.ledger import SiteLedger
    from fedpca.site.policy import SitePolicyFile


def register_site_command(commands: argparse._SubParsersAction) -> None:
    """Add ``site`` with its sub-commands to ``commands`` (an argparse subparsers)."""
    site = commands.add_parser("site", help="a real site's policy, ledger and pinned runtime")
    actions = site.add_subparsers(dest="site_command", required=True)

    init = actions.add_parser("init", help="write a commented site policy file")
    init.add_argument("--policy", type=Path, required=True, help="the policy file to write")
    init.add_argument("--name", required=True, help="the site's name")
    records = init.add_mutually_exclusive_group(required=True)
    records.add_argument("--data",
                         help="the site's records (.npy, .csv or .parquet), relative to this "
                              "folder")
    records.add_argument("--genotypes", metavar="PATH",
                         help="a genotype site: its PLINK 1 fileset PREFIX (.bed/.bim/.fam), "
                              "PLINK 2 PREFIX.pgen or .vcf, .vcf.gz or .bcf file (with "
                              "--panel; docs/genomics.md), relative to this folder")
    init.add_argument("--panel", default=None, metavar="PANEL.toml",
                      help="with --genotypes: the consortium's SNP panel, relative to this "
                           "folder")
    init.add_argument("--contract", default=None,
                      help="the consortium's data contract (docs/tables.md), relative to this "
                           "folder: the data file is then a table read through it")
    init.add_argument("--ledger", default=None,
                      help="the lifetime ledger to create (relative to this folder, like every "
                           "path here; default: ledger.sqlite beside the policy file)")
    init.set_defaults(func=_init)

    check = actions.add_parser(
        "check", help="check the site's policy, data and ledger before a run (creates nothing)")
    check.add_argument("--policy", type=Path, required=True, help="the site's policy file")
    check.set_defaults(func=_check)

    ledger = actions.add_parser("ledger", help="show the site's lifetime privacy spending")
    ledger.add_argument("--policy", type=Path, required=True, help="the site's policy file")
    shown = ledger.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true",
                       help="every release, as JSON (ISO 8601 times, noise in the data's units)")
    shown.add_argument("--html", type=Path, metavar="FILE",
                       help="write one HTML page (0600) with the runs, the policy's changes "
                            "and a plot of the spending over time against the budgets "
                            "(needs matplotlib: pip install \"fedpca[plots]\")")
    shown.add_argument("--backup", type=Path, metavar="FILE",
                       help="copy the ledger to a new FILE (0600) instead, safely during a run")
    shown.add_argument("--restore", type=Path, metavar="FILE",
                       help="put the backup FILE back as the ledger (the old one moved away "
                            "first); a copy older than the last recorded release needs --reason")
    shown.add_argument("--new", action="store_true",
                       help="start a new, empty ledger (the old one moved away first): the "
                            "population's budget starts again; needs --reason")
    shown.add_argument("--adopt", action="store_true",
                       help="make the existing ledger the site's when its identity file is "
                            "lost or an older fedpca wrote it; needs --reason")
    ledger.add_argument("--reason", metavar="TEXT",
                        help="why (with --restore, --new, --adopt; recorded with the date)")
    ledger.set_defaults(func=_ledger)

    project = actions.add_parser(
        "project", help="the site's own records' scores on a run's released components, "
                        "computed and written here, sent nowhere")
    project.add_argument("--policy", type=Path, required=True, help="the site's policy file")
    project.add_argument("--result", type=Path, default=None,
                         help="the result to use (default: the latest one the site received, "
                              "in results/ beside its policy); also a coordinator's run record")
    project.add_argument("--out", type=Path, required=True,
                         help="the CSV to write (columns PC1..PCk, after the contract's id "
                              "column if it has one; one row per record; 0600)")
    project.set_defaults(func=_project)

    supernode = actions.add_parser(
        "supernode", help="Flower's SuperNode with the site's policy, memory limit and FAB check",
        description="Runs flower-supernode with the arguments after --, adding --node-config "
                    "policy=FILE; every FAB is checked before Flower parses it, and the "
                    "process's address space is limited to the policy's [limits] memory-mib "
                    "(Linux; 0 or another OS: limit it with the OS's own tools)",
    )
    supernode.add_argument("--policy", type=Path, required=True, help="the site's policy file")
    supernode.add_argument("flower_args", nargs=argparse.REMAINDER,
                           help="-- then flower-supernode's arguments (without --node-config)")
    supernode.set_defaults(func=_supernode)

    superexec = actions.add_parser(
        "superexec", help="run ClientApp tasks of an --isolation process SuperNode with the "
                          "site's installed fedpca"
    )
    superexec.add_argument("--policy", type=Path, required=True,
                           help="the site's policy file (its [limits] memory-mib applies to "
                                "every ClientApp)")
    superexec.add_argument("--runtime-api-address", required=True,
                           help="the SuperNode's Runtime API (its --host:--port)")
    tls = superexec.add_mutually_exclusive_group(required=True)
    tls.add_argument("--insecure", action="store_true",
                     help="plain HTTP to a Runtime API on loopback")
    tls.add_argument("--root-certificates", help="CA of the Runtime API's TLS certificate")
    superexec.set_defaults(func=_superexec)


def _init(args: argparse.Namespace) -> int:
    from fedpca.errors import ConfigurationError
    from fedpca.site.policy import load_site_policy
    from fedpca.site.policy_template import write_policy_template

    if args.ledger is None:
        args.ledger = str(args.policy.resolve().parent / "ledger.sqlite")
    if (args.genotypes is None) != (args.panel is None) or (args.genotypes and args.contract):
        raise ConfigurationError("--genotypes needs --panel (and no --contract: the panel is a "
                                 "genotype site's contract); --panel goes with --genotypes")
    data = None if args.data is None else _from_policy_folder(args.data, args.policy)
    contract = None if args.contract is None else _from_policy_folder(args.contract, args.policy)
    genotypes = None if args.genotypes is None else (
        _from_policy_folder(args.genotypes, args.policy),
        _from_policy_folder(args.panel, args.policy))
    ledger = _from_policy_folder(args.ledger, args.policy)
    path = write_policy_template(args.policy, args.name, data, ledger, contract,
                                 genotypes=genotypes).resolve()
    policy = load_site_policy(path)
    print(f"wrote {path} (its ledger {policy.ledger}, identity file "
          f"{policy.witness().path}): read every line, set the budget with your privacy "
          f"officer, then start the SuperNode with --node-config 'policy=\"{path}\"'\n")
    return _report(policy)


def _check(args: argparse.Namespace) -> int:
    from fedpca.site.policy import load_site_policy

    return _report(load_site_policy(args.policy))


def _report(policy: SitePolicyFile) -> int:
    """Print :func:`~fedpca.site.check.check_site`'s report; 1 on any problem."""
    from fedpca.site.check import check_site, report_text

    report = check_site(policy)
    print(report_text(report))
    return 1 if report.problems else 0


def _from_policy_folder(path: str, policy: Path) -> str:
    """``path`` as the operator typed it (relative to the current folder), written so that
    the policy, which reads paths relative to its own folder, finds the same file."""
    if Path(path).is_absolute():
        return path
    return os.path.relpath(Path(path).resolve(), policy.resolve().parent)


def _ledger(args: argparse.Namespace) -> int:
    from fedpca.errors import ConfigurationError
    from fedpca.site.policy import load_site_policy

    policy = load_site_policy(args.policy)
    if args.reason is not None and not (args.restore or args.new or args.adopt):
        raise ConfigurationError("--reason goes with --restore, --new or --adopt")
    if args.restore or args.new or args.adopt:
        print(_change_ledger(args, policy))
        return 0
    ledger = policy.open_ledger()  # checked against its identity file; creates nothing
    if args.backup:
        releases = ledger.backup(args.backup)
        print(f"copied the ledger {ledger.path} ({releases} releases) to {args.backup} (0600); "
              f"to restore it: fedpca site ledger --policy {policy.path} --restore "
              f"{args.backup} (deploy/README.md, Operations)")
        return 0
    _show_ledger(policy, ledger, args)
    return 0


def _change_ledger(args: argparse.Namespace, policy: SitePolicyFile) -> str:
    """``--restore``, ``--new`` or ``--adopt``: the dated line each records."""
    from fedpca.site.ledger_lifecycle import adopt_ledger, restore_ledger, start_new_ledger

    witness = policy.witness()
    if args.restore:
        return restore_ledger(witness, args.restore, args.reason)
    if args.new:
        return start_new_ledger(witness, args.reason)
    return adopt_ledger(witness, args.reason)


def _show_ledger(policy: SitePolicyFile, ledger: SiteLedger, args: argparse.Namespace) -> None:
    """Print the ledger's spending, the runs left and its identity's history (``--json``:
    as JSON), or write them with a plot as one page (``--html FILE``)."""
    from fedpca.site.ledger_report import (
        format_ledger,
        ledger_json,
        spending_series,
        summarize,
    )
    from fedpca.site.offers import offers_summary, site_offers

    if args.html:
        from fedpca.extras import PLOTS, require_extra

        require_extra(PLOTS, "the ledger's page (fedpca site ledger --html)")
    witness = policy.witness()
    record = witness.read()
    summary = {**summarize(ledger), **offers_summary(site_offers(policy, ledger)),
               "identity": {"identity": record.identity, "file": str(witness.path),
                            "history": list(record.history)}}
    if args.html:
        from fedpca.site.ledger_page import write_ledger_page

        path = write_ledger_page(summary, spending_series(ledger, summary), args.html)
        print(f"wrote {path} (0600): {len(summary['runs'])} runs, "
              f"{len(summary['policy_events'])} dated policy rows, the spending after each "
              f"of {summary['releases']} releases")
        return
    print(json.dumps(ledger_json(summary), indent=2) if args.json else format_ledger(summary))


def _project(args: argparse.Namespace) -> int:
    from fedpca.site.policy import load_site_policy
    from fedpca.site.results import latest_result, load_result, site_scores

    policy = load_site_policy(args.policy)
    path = args.result or latest_result(policy.path)
    result = load_result(path)
    scores = site_scores(policy, result)
    scores.write(args.out)
    print(f"wrote {args.out}: {scores.values.shape[0]} records x {result.k} components "
          f"({result.algorithm}, run {result.run_id or '?'}, from {path}); it stays here")
    for line in result.scaling_lines():
        print(line)
    return 0


def _supernode(args: argparse.Namespace) -> int:
    from fedpca.deployment.site_runtime import run_site_supernode
    from fedpca.site.policy import load_site_policy

    flower_args = args.flower_args[1:] if args.flower_args[:1] == ["--"] else args.flower_args
    run_site_supernode(load_site_policy(args.policy), flower_args)
    return 0


def _superexec(args: argparse.Namespace) -> int:
    from fedpca.deployment.site_runtime import run_site_superexec
    from fedpca.site.policy import load_site_policy

    run_site_superexec(args.runtime_api_address, args.insecure, args.root_certificates,
                       load_site_policy(args.policy))
    return 0

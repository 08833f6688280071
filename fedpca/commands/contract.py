"""``fedpca contract init|show|check``: a consortium's data contract (docs/tables.md).

``init`` writes a commented template from a table's columns (numeric ranges left blank for
people to fill in from public knowledge; the observed ranges printed to this terminal only);
``show`` prints its name, hash, output columns and the sensitivities they imply; ``check``
says what is wrong with each table under it and what preprocessing would do (counts, never
a value; this terminal only; exit code 1 on any problem), and names every table it cannot
read (exit code 2), checking the others.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedpca.errors import FedPCAError

#: Printed above the observed ranges.
OBSERVED_WARNING = (
    "Observed in {source} (NOT public: for this terminal only; copy none of these into the "
    "contract without a public source giving the same):"
)


def register_contract_command(commands: argparse._SubParsersAction) -> None:
    """Add ``contract`` with its sub-commands to ``commands`` (an argparse subparsers)."""
    contract = commands.add_parser("contract", help="a consortium's data contract")
    actions = contract.add_subparsers(dest="contract_command", required=True)

    init = actions.add_parser("init", help="write a contract template from a table's columns")
    init.add_argument("--from", dest="source", type=Path, required=True,
                      help="a CSV (with a header) or Parquet table")
    init.add_argument("--out", type=Path, default=Path("contract.toml"),
                      help="the template to write (default: contract.toml; never overwritten)")
    init.add_argument("--name", default=None,
                      help="the contract's name (default: the table's file name, -v1)")
    init.set_defaults(func=_init)

    show = actions.add_parser("show", help="a contract's name, hash and output columns")
    show.add_argument("contract", type=Path, help="the contract file")
    show.set_defaults(func=_show)

    check = actions.add_parser("check", help="check tables against a contract (this terminal "
                                             "only)")
    check.add_argument("contract", type=Path, help="the contract file")
    check.add_argument("tables", type=Path, nargs="+", help="CSV or Parquet tables")
    check.set_defaults(func=_check)


def _init(args: argparse.Namespace) -> int:
    from fedpca.data.contract import ContractError, load_contract
    from fedpca.data.contract_template import contract_template
    from fedpca.data.tables import read_table

    if args.out.exists():
        raise ContractError(f"{args.out} exists; a contract is never overwritten: edit it, or "
                            "give another --out")
    name = args.name or f"{args.source.name.split('.')[0]}-v1"
    template = contract_template(read_table(args.source, site=args.source.name), name,
                                 args.source.name)
    args.out.write_text(template.text, encoding="utf-8")
    try:
        load_contract(args.out)
        unfilled = ""
    except ContractError as exc:
        unfilled = f"\nto fill in before it loads: {exc}"
    print(f"wrote {args.out}: check every column with the consortium, fill in the ranges from "
          f"public knowledge, then give every site the same file{unfilled}")
    for warning in template.warnings:
        print(f"warning: {warning}")
    if template.observed:
        print(OBSERVED_WARNING.format(source=args.source))
        print("\n".join(f"  {line}" for line in template.observed))
    return 0


def _show(args: argparse.Namespace) -> int:
    from fedpca.data.contract import load_contract

    contract = load_contract(args.contract)
    print(f"contract     {contract.name}\nhash         {contract.hash}  (run_config contract)")
    for rule in contract.columns:
        outputs = ", ".join(
            f"{name} [0, {w:.4g}]" + ("" if scale is None else f" scale {scale:.4g}")
            for name, w, scale in zip(rule.outputs, rule.widths, rule.scales))
        print(f"  {rule.name:<16} {rule.kind:<12} -> {outputs or 'never sent (the ids)'}")
    bounds = contract.bounds
    print(f"{len(contract.output_columns)} output columns, {len(bounds.public)} with a public "
          f"scale; replace-one L2 sensitivity of a site's column sums "
          f"{bounds.sum_sensitivity():.4g}, of its sums of squares (of the "
          f"{len(bounds.squared())} columns without a public scale) "
          f"{bounds.square_sum_sensitivity():.4g}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from fedpca.data.contract import load_contract
    from fedpca.data.tables import read_table

    contract = load_contract(args.contract)
    print(f"contract     {contract.name} ({contract.hash})")
    failed = unreadable = 0
    for path in args.tables:
        try:
            table = read_table(path, site=path.name)
        except FedPCAError as exc:  # the next table is still checked
            unreadable += 1
            print(f"fedpca: error: {exc}", file=sys.stderr)
            continue
        report = contract.check(table)
        failed += not report.ok
        print(f"{path}: {report.rows} rows, " + ("ok" if report.ok else report.describe()))
        print("".join(f"  {note}\n" for note in report.notes), end="")
    return 2 if unreadable else 1 if failed else 0

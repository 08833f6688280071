"""``fedpca data split flchain|rotterdam --sites N --format csv|parquet --out DIR``: a public
clinical table split over ``N`` sites, one file per site with the table's real blanks, and
the contract fedpca ships for it (:mod:`fedpca.data.clinical`; needs the ``datasets`` extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedpca.data.clinical import CLINICAL_TABLES, SPLIT_FORMATS


def register_data_command(commands: argparse._SubParsersAction) -> None:
    """Add ``data`` with its sub-commands to ``commands`` (an argparse subparsers)."""
    data = commands.add_parser("data", help="public tables split over sites")
    actions = data.add_subparsers(dest="data_command", required=True)
    split = actions.add_parser(
        "split", help="one file per site of a public clinical table, and its contract")
    split.add_argument("table", choices=tuple(CLINICAL_TABLES))
    split.add_argument("--sites", type=int, required=True, help="how many sites")
    split.add_argument("--format", choices=SPLIT_FORMATS, default="csv")
    split.add_argument("--out", type=Path, required=True, help="the folder to write to")
    split.add_argument("--seed", type=int, default=0, help="which rows go to which site")
    split.set_defaults(func=_split)


def _split(args: argparse.Namespace) -> int:
    from fedpca.data.clinical import split_clinical_table

    files = split_clinical_table(args.table, args.sites, args.out, args.format, args.seed)
    for path in files:
        print(f"wrote {path}")
    print(f"wrote {args.out / f'{args.table}.toml'} (the contract fedpca ships for "
          f"{args.table}: fedpca contract show prints its hash)")
    return 0

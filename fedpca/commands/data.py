"""``fedpca data split flchain|rotterdam --sites N --format csv|parquet --out DIR``: a public
clinical table split over ``N`` sites, one file per site with the table's real blanks, and
the contract fedpca ships for it (:mod:`fedpca.data.clinical`; needs the ``datasets`` extra).

``fedpca data cohort --out DIR --sites N ...``: a simulated multi-population cohort of
genotypes as PLINK files, one fileset per site, with its SNP panel and public start basis
(:mod:`fedpca.data.cohort`; needs the ``genomics`` extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedpca.data.clinical import CLINICAL_TABLES, SPLIT_FORMATS
from fedpca.data.snp_panel import STANDARDISE


def register_data_command(commands: argparse._SubParsersAction) -> None:
    """Add ``data`` with its sub-commands to ``commands`` (an argparse subparsers)."""
    data = commands.add_parser(
        "data", help="public tables split over sites, simulated genotypes as PLINK files")
    actions = data.add_subparsers(dest="data_command", required=True)
    split = actions.add_parser(
        "split", help="one file per site of a public clinical table, and its contract")
    split.add_argument("table", choices=tuple(CLINICAL_TABLES))
    split.add_argument("--sites", type=int, required=True, help="how many sites")
    split.add_argument("--format", choices=SPLIT_FORMATS, default="csv")
    split.add_argument("--out", type=Path, required=True, help="the folder to write to")
    split.add_argument("--seed", type=int, default=0, help="which rows go to which site")
    split.set_defaults(func=_split)
    cohort = actions.add_parser(
        "cohort", help="a simulated multi-population cohort as PLINK files (Balding-Nichols), "
                       "its SNP panel and public start basis")
    cohort.add_argument("--out", type=Path, required=True, help="the folder to write to")
    for flag, kind, default, meaning in COHORT_FLAGS:
        cohort.add_argument(flag, type=kind, default=default, help=meaning if default is None
                            else f"{meaning} (default {default})")
    cohort.add_argument("--absent", type=int, nargs="+", default=None, metavar="POP",
                        help="populations (0..K-1) left out of the public reference: each "
                             "appears only at the sites where it is the main one")
    cohort.add_argument("--isolate-of", type=int, nargs="+", default=None, metavar="POP",
                        help="with --absent: make the absent populations isolates drifted "
                             "from this population of the reference (one for all, or one "
                             "per absent population)")
    cohort.add_argument("--cline", type=int, nargs=2, default=None,
                        metavar=("SOURCE", "TARGET"),
                        help="admix every TARGET individual with SOURCE (a share q ~ U(0, 1) "
                             "of TARGET's ancestry; site{j}.ancestry holds each q)")
    cohort.add_argument("--standardise", choices=STANDARDISE, default="public",
                        help="the panel's standardise: public (its reference frequencies) or "
                             "private (a run releases the union's; the reference's stay in "
                             "the panel for the shifted start) (default public)")
    cohort.set_defaults(func=_cohort)

#: ``fedpca data cohort``'s flags: (flag, type, default, meaning).
COHORT_FLAGS = (
    ("--sites", int, 10, "how many sites"),
    ("--samples-per-site", int, 1000, "individuals per site"),
    ("--snps", int, 5000, "SNPs (the panel's width d)"),
    ("--populations", int, 3, "populations, each site with its own mix"),
    ("--fst", float, 0.01, "the populations' differentiation Fst, in (0, 1)"),
    ("--reference-size", int, 1000, "individuals of the public reference"),
    ("--k", int, 2, "columns of the public start basis"),
    ("--seed", int, 0, "the seed of every file"),
)


def _split(args: argparse.Namespace) -> int:
    from fedpca.data.clinical import split_clinical_table

    files = split_clinical_table(args.table, args.sites, args.out, args.format, args.seed)
    for path in files:
        print(f"wrote {path}")
    print(f"wrote {args.out / f'{args.table}.toml'} (the contract fedpca ships for "
          f"{args.table}: fedpca contract show prints its hash)")
    return 0


def _cohort(args: argparse.Namespace) -> int:
    from fedpca.data.cohort import write_cohort
    from fedpca.data.start_basis import load_start_basis

    files = write_cohort(args.out, sites=args.sites, samples_per_site=args.samples_per_site,
                         snps=args.snps, populations=args.populations, fst=args.fst,
                         absent=args.absent, reference_size=args.reference_size, k=args.k,
                         seed=args.seed, isolate_of=one_or_each(args.isolate_of),
                         standardise=args.standardise,
                         cline=None if args.cline is None else tuple(args.cline))
    absent = ("" if args.absent is None else
              f", population(s) {', '.join(map(str, args.absent))} absent from it")
    if args.isolate_of is not None:
        absent += f" (isolates of population(s) {', '.join(map(str, args.isolate_of))})"
    if args.cline is not None:
        absent += (f"; population {args.cline[1]}'s individuals admixed with "
                   f"{args.cline[0]} (site{{j}}.ancestry)")
    print(f"a cohort of {args.sites} sites x {args.samples_per_site} individuals x "
          f"{args.snps} SNPs, {args.populations} populations at Fst {args.fst}, in "
          f"{files.folder} (seed {args.seed}):")
    for prefix in files.sites:
        sizes = ", ".join(_size(prefix.with_name(prefix.name + s)) for s in (".bed", ".bim",
                                                                             ".fam", ".pop"))
        print(f"  {prefix}.bed/.bim/.fam/.pop: {sizes}")
    print(f"  {files.panel} and its table {files.panel.with_suffix('.tsv').name}: the SNP "
          f"panel (standardise = {args.standardise!r}; reference frequencies from "
          f"{args.reference_size} individuals{absent})")
    print(f"  {files.start}: the public start basis ({args.snps} x {args.k}), "
          f"{_size(files.start)}, SHA-256 {load_start_basis(files.start).digest}")
    print("the .pop files hold each sample's true population: for benchmarks and tests only")
    return 0


def one_or_each(values: list[int] | None) -> int | tuple[int, ...] | None:
    """``--isolate-of``: one parent for every absent population, or one each."""
    if values is None or len(values) > 1:
        return None if values is None else tuple(values)
    return values[0]


def _size(path: Path) -> str:
    """A file's size in readable units."""
    size = float(path.stat().st_size)
    for unit in ("B", "KB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"

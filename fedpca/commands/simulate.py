"""``fedpca simulate ALGORITHM [flags]``: one command for every algorithm of
:data:`fedpca.algorithms.specs.SPECS`.

Each algorithm's flags are its scenario's fields (:mod:`fedpca.scenarios.base`) plus the
display flags of :mod:`fedpca.commands.common`; they are built only for the algorithm on
the command line, so ``fedpca simulate --help`` imports no scenario and no Flower.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from fedpca.algorithms.specs import SPECS, AlgorithmSpec
from fedpca.commands.common import (
    add_engine_flags,
    add_output_flags,
    announce,
    live_rounds,
    seeded_notice,
    with_flag_errors,
    write_outputs,
)
from fedpca.data.memory import require_simulation_memory
from fedpca.errors import ConfigurationError


class LazySubcommands(argparse._SubParsersAction):
    """Sub-commands whose flags are added only when the sub-command is chosen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fillers: dict[str, Any] = {}

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        fill = self.fillers.pop(values[0], None)
        if fill is not None:
            fill(self.choices[values[0]])
        super().__call__(parser, namespace, values, option_string)


class GivenFlag(argparse._StoreAction):
    """Stores the flag's value and adds its ``dest`` to ``namespace.given``: what the
    command line set, as opposed to a default."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        super().__call__(parser, namespace, values, option_string)
        namespace.given = (*getattr(namespace, "given", ()), self.dest)


def register_simulate_command(commands: argparse._SubParsersAction) -> None:
    """Add ``simulate`` with one sub-command per algorithm."""
    simulate = commands.add_parser("simulate", help="run a Flower simulation")
    algorithms = simulate.add_subparsers(
        dest="algorithm", required=True, action=LazySubcommands, metavar="ALGORITHM"
    )
    for spec in SPECS.values():
        algorithms.add_parser(spec.name, help=spec.help, description=spec.description)
        algorithms.fillers[spec.name] = functools.partial(_fill, spec)


def _fill(spec: AlgorithmSpec, parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the flags of ``spec``'s scenario and its run function."""
    from fedpca.audit.malicious import ALGORITHMS as ATTACKED

    scenario_cls = spec.scenario_class()
    for f in scenario_cls.flag_fields():
        options = dict(f.metadata["argparse"])
        names = options.pop("flags", None) or ("--" + f.name.replace("_", "-"),)
        if isinstance(f.default, bool):
            options["action"] = "store_true"
        else:
            options.setdefault("type", type(f.default))
            options["action"] = GivenFlag
        parser.add_argument(*names, dest=f.name, default=f.default, help=f.metadata["help"],
                            **options)
    add_table_flags(parser)
    if spec.genotype_rows:
        add_genotype_flags(parser)
    if spec.name in ATTACKED:
        add_malicious_flag(parser)
    add_output_flags(parser)
    add_engine_flags(parser)
    parser.set_defaults(func=with_flag_errors(functools.partial(run, spec), parser))


def add_table_flags(parser: argparse.ArgumentParser) -> None:
    """``--tables --contract --standardize --moments-share``: a centred run over one table
    per virtual site (:class:`fedpca.scenarios.tables.TableRun`); ``--clip-norm`` then
    defaults to the contract's (:class:`GivenFlag` tells whether it was given)."""
    parser.add_argument("--tables", nargs="+", default=None, metavar="TABLE",
                        help="one CSV or Parquet table per virtual site (with --contract): a "
                             "centred run, its moments round first; --sites, --dim and "
                             "--samples come from the tables, --clip-norm defaults to the "
                             "contract's")
    parser.add_argument("--contract", default=None, metavar="CONTRACT.toml",
                        help="the data contract every site holds (with --tables)")
    parser.add_argument("--standardize", action="store_true",
                        help="with --tables: scale every column to unit variance too")
    parser.add_argument("--moments-share", type=float, default=None, metavar="F",
                        help="with --tables: the share of the budget spent on the means (and "
                             "scales); default 0.1, 0.3 with --standardize")
    parser.set_defaults(given=())


def add_genotype_flags(parser: argparse.ArgumentParser) -> None:
    """``--plink PATH ... --panel PANEL.toml``: one genotype fileset per virtual site (a
    PLINK 1 prefix, a PLINK 2 ``.pgen``, a VCF/BCF), read against the SNP panel
    (:class:`fedpca.scenarios.genotypes.GenotypeRun`)."""
    parser.add_argument("--plink", nargs="+", metavar="PATH", help=(
        "one genotype fileset per virtual site (with --panel): a PLINK 1 PREFIX "
        "(PREFIX.bed/.bim/.fam), a PLINK 2 PREFIX.pgen (.pvar/.psam) or a .vcf, .vcf.gz or "
        ".bcf file (docs/genomics.md), its rows streamed; --sites, --dim, --samples and "
        "--clip-norm come from the filesets and the panel, --s-hat defaults to every SNP"))
    parser.add_argument("--panel", metavar="PANEL.toml", help="the SNP panel (with --plink)")


def add_malicious_flag(parser: argparse.ArgumentParser) -> None:
    """``--malicious-site ATTACK``: simulated site ``"0"`` attacks (experiments only,
    :mod:`fedpca.audit.malicious`)."""
    parser.add_argument("--malicious-site", metavar="ATTACK", default=None, help=(
        "EXPERIMENTS ONLY: simulated site 0 turns malicious with ATTACK: subspace, rank-one, "
        "scale:S (its statistic times S > 1) or in-bound (its records replaced by records "
        "within the contract on one direction); its declared record count stays true, and "
        "the record's history names what the server dropped"))


def file_run_options(scenario_cls: type, values: dict[str, Any], files: int) -> dict[str, Any]:
    """The scenario's options of a run over one file per site: its flags with the data seed,
    less what the files give (``clip_norm``, ``sites``, ``dim``, ``samples``);
    ``--secure-aggregation`` alone means every one of the ``files`` sites."""
    from fedpca.scenarios.base import ALL_SITES

    options = {k: v for k, v in scenario_cls.with_data_seed(values).items()
               if k not in ("clip_norm", "sites", "dim", "samples")}
    if options.get("secure_min_sites") == ALL_SITES:
        options["secure_min_sites"] = files
    return options


def genotype_run(values: dict[str, Any], args: argparse.Namespace) -> Any:
    """The DPS-PCA run over ``--plink`` under ``--panel``
    (:class:`~fedpca.scenarios.genotypes.GenotypeRun`): ``--secure-aggregation`` alone means
    every fileset's site, and always fedpca's verifiable discrete secure sums; the data seed
    is ``--seed``."""
    from fedpca.scenarios.dps_pca import DPSPCAScenario
    from fedpca.scenarios.genotypes import GenotypeRun

    if not args.panel or getattr(args, "tables", None):
        raise ConfigurationError("--plink needs --panel (the SNP panel every site holds) and "
                                 "no --tables")
    options = file_run_options(DPSPCAScenario, values, len(args.plink))
    if options.get("secure_min_sites") is not None:  # secure sums are discrete ones
        options["discrete"] = True
    return GenotypeRun.build(args.plink, args.panel,
                             functools.partial(DPSPCAScenario, **options), set(args.given))


def run(spec: AlgorithmSpec, args: argparse.Namespace) -> int:
    """Build the scenario from the flags, run the simulation with live rounds, print the
    report and the wall time, write the JSON and the plot. A run that fails raises (the
    command exits non-zero) after writing its failure record to ``--output``."""
    from fedpca.report import explained_summary
    from fedpca.run_record import failure_recorded
    from fedpca.flower.federation import Engine
    from fedpca.flower.simulations import simulate, simulate_genotypes, simulate_tables

    engine = Engine(args.ray_address, args.cpus_per_site, args.memory_per_site)
    scenario_cls = spec.scenario_class()
    values = {f.name: getattr(args, f.name) for f in scenario_cls.flag_fields()}
    if getattr(args, "plink", None):
        planned, run_simulation = genotype_run(values, args), simulate_genotypes
    elif getattr(args, "tables", None):
        planned, run_simulation = table_run(scenario_cls, values, args), simulate_tables
    else:
        planned, run_simulation = plain_scenario(scenario_cls, values, args), simulate
    require_outputs(args, planned if run_simulation is simulate else planned.scenario)
    attack = malicious_attack(args, run_simulation is simulate)
    if attack is not None:
        run_simulation = functools.partial(simulate, attack=attack)
        announce(args, f"EXPERIMENT: simulated site 0 is malicious ({attack})")
    for line in planned.header():
        announce(args, line)
    seeded_notice(values.get("seed"))
    with (failure_recorded(spec.name, args.output),
          live_rounds(args, spec.name, planned.flower_rounds) as observer):
        result = run_simulation(planned, verbose=args.verbose, observer=observer,
                                engine=engine)
    for line in planned.report(result):
        print(line)
    explained = explained_summary(getattr(result, "explained_variance", None),
                                  getattr(result, "explained_variance_ratio", None),
                                  getattr(result, "explained_variance_ratio_floored", False))
    if explained is not None:
        print(explained)
    print(f"wall time {result.config['wall_seconds']:.1f} s")
    write_outputs(args, result)
    return 0


def malicious_attack(args: argparse.Namespace, partitions: bool) -> Any:
    """The :class:`~fedpca.audit.malicious.Attack` of ``--malicious-site`` (``None``
    without it), refused unless the run's sites are partitions of a scenario's data
    (``partitions``: no ``--tables`` or ``--plink``)."""
    text = getattr(args, "malicious_site", None)
    if text is None:
        return None
    if not partitions:
        raise ConfigurationError("--malicious-site is built for simulated partitions of a "
                                 "scenario's data: drop --tables and --plink")
    from fedpca.audit.malicious import Attack

    return Attack.parse(text)


def require_outputs(args: argparse.Namespace, scenario: Any) -> None:
    """Refuse, before the run, ``--loadings`` or ``--scree`` that its result cannot give."""
    if args.loadings is not None and not scenario.HAS_LOADINGS:
        raise ConfigurationError(
            f"--loadings: {scenario.ALGORITHM}'s result is clusters of subspaces, not one "
            "basis; drop --loadings")
    if args.scree is not None and not scenario.explains_variance:
        raise ConfigurationError(
            f"--scree: this {scenario.ALGORITHM} run releases no explained variance; add "
            "--explained-variance (one more release, within the same budget)"
            if scenario.HAS_LOADINGS else
            f"--scree: {scenario.ALGORITHM} releases no explained variance; drop --scree")


def plain_scenario(scenario_cls: type, values: dict[str, Any], args: argparse.Namespace
                   ) -> Any:
    """The scenario of the flags, refused when it would not fit this machine's memory or
    table flags come without ``--tables``."""
    given = [flag for flag, value in (("--contract", getattr(args, "contract", None)),
                                      ("--standardize", getattr(args, "standardize", False)),
                                      ("--moments-share", getattr(args, "moments_share", None)),
                                      ("--panel", getattr(args, "panel", None)))
             if value]
    if given:
        raise ConfigurationError(f"{', '.join(given)} need --tables (one table per site) or "
                                 "--plink (--panel: one genotype fileset per site)")
    scenario = scenario_cls.from_flags(values)
    require_simulation_memory(scenario.samples, scenario.dim, scenario.sites)
    return scenario


def table_run(scenario_cls: type, values: dict[str, Any], args: argparse.Namespace) -> Any:
    """The centred run over ``--tables`` under ``--contract``
    (:class:`~fedpca.scenarios.tables.TableRun`): ``--secure-aggregation`` alone means every
    table's site; the data seed is ``--seed``; DPS-PCA's ``--s-hat`` defaults to at most
    the contract's width."""
    from fedpca.scenarios.tables import TableRun, capped_to_width

    if not args.contract:
        raise ConfigurationError("--tables needs --contract: the data contract every site holds")
    options = capped_to_width(file_run_options(scenario_cls, values, len(args.tables)),
                              args.contract, args.given)
    return TableRun.build(scenario_cls, args.tables, args.contract, options,
                          standardize=args.standardize, moments_share=args.moments_share,
                          clip_norm=values["clip_norm"] if "clip_norm" in args.given else None)

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

from fedpca.algorithms.specs import SPECS, AlgorithmSpec, load
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
    scenario_cls = spec.scenario_class()
    for f in scenario_cls.flag_fields():
        options = dict(f.metadata["argparse"])
        names = options.pop("flags", None) or ("--" + f.name.replace("_", "-"),)
        if isinstance(f.default, bool):
            options["action"] = "store_true"
        else:
            options.setdefault("type", type(f.default))
        parser.add_argument(*names, dest=f.name, default=f.default, help=f.metadata["help"],
                            **options)
    add_output_flags(parser)
    add_engine_flags(parser)
    parser.set_defaults(func=with_flag_errors(functools.partial(run, spec), parser))


def run(spec: AlgorithmSpec, args: argparse.Namespace) -> int:
    """Build the scenario from the flags, run the simulation with live rounds, print the
    report and the wall time, write the JSON and the plot. A run that fails raises (the
    command exits non-zero) after writing its failure record to ``--output``."""
    from fedpca.report import explained_summary
    from fedpca.run_record import failure_recorded
    from fedpca.simulations.launcher import Engine

    engine = Engine(args.ray_address, args.cpus_per_site, args.memory_per_site)
    scenario_cls = spec.scenario_class()
    scenario = scenario_cls.from_flags(
        {f.name: getattr(args, f.name) for f in scenario_cls.flag_fields()}
    )
    require_outputs(args, scenario)
    require_simulation_memory(scenario.samples, scenario.dim, scenario.sites)
    for line in scenario.header():
        announce(args, line)
    seeded_notice(scenario.seed)
    simulate = load(spec.simulate)
    with (failure_recorded(spec.name, args.output),
          live_rounds(args, spec.name, scenario.flower_rounds) as observer):
        result = simulate(scenario, verbose=args.verbose, observer=observer, engine=engine)
    for line in scenario.report(result):
        print(line)
    explained = explained_summary(getattr(result, "explained_variance", None),
                                  getattr(result, "explained_variance_ratio", None))
    if explained is not None:
        print(explained)
    print(f"wall time {result.config['wall_seconds']:.1f} s")
    write_outputs(args, result)
    return 0


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

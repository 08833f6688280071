"""The experiment registry and the ``fedpca experiment`` command.

An experiment is a function ``(out: Path, quick: bool, seed: int) -> ExperimentOutput``
decorated with :func:`experiment`. ``quick`` shrinks the sweep (for tests and smoke runs),
never the method.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedpca.errors import ConfigurationError
from fedpca.experiments.output import ExperimentOutput
from fedpca.experiments.progress import silenced

ExperimentFn = Callable[[Path, bool, int], ExperimentOutput]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: its name, a one-line description and its function."""

    name: str
    help: str
    run: ExperimentFn


_REGISTRY: dict[str, Experiment] = {}


def experiment(name: str, help: str) -> Callable[[ExperimentFn], ExperimentFn]:
    """Register the decorated function as ``fedpca experiment NAME``."""

    def wrap(fn: ExperimentFn) -> ExperimentFn:
        if name in _REGISTRY:
            raise ConfigurationError(f"experiment {name!r} is registered twice")
        _REGISTRY[name] = Experiment(name, help, fn)
        return fn

    return wrap


def experiments() -> dict[str, Experiment]:
    """Every registered experiment (importing all modules of the package once)."""
    import fedpca.experiments as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in ("registry", "output", "progress"):
            importlib.import_module(f"{package.__name__}.{info.name}")
    return dict(sorted(_REGISTRY.items()))


def run_experiment(name: str, out: Path, quick: bool = False, seed: int = 0) -> ExperimentOutput:
    """Run experiment ``name`` and write its files into ``out``."""
    known = experiments()
    if name not in known:
        raise ConfigurationError(
            f"unknown experiment {name!r}; choose one of: {', '.join(known) or '(none)'}"
        )
    out.mkdir(parents=True, exist_ok=True)
    result = known[name].run(out, quick, seed)
    result.write(out)
    return result


def register_experiment_command(commands: argparse._SubParsersAction) -> None:
    """Add ``fedpca experiment NAME --out DIR [--quick] [--seed S]``."""
    known = experiments()
    listing = "\n".join(f"  {e.name:<28} {e.help}" for e in known.values())
    p = commands.add_parser(
        "experiment",
        help="reproduce a paper's figure or table (PNG + JSON + markdown)",
        description=f"Experiments:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", help="experiment name (see the list above)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--quick", action="store_true", help="a small sweep for a smoke run")
    p.add_argument("--seed", type=int, default=0, help="seed of data and noise")
    p.add_argument("--quiet", action="store_true",
                   help="for scripts: no step progress on stderr, no markdown summary; only "
                        "the files written")
    p.set_defaults(func=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    with silenced(args.quiet):
        result = run_experiment(args.name, args.out, quick=args.quick, seed=args.seed)
    if not args.quiet:
        print(result.markdown)
    print(f"wrote {', '.join(sorted(result.files(args.out)))}")
    return 0

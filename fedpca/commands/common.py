"""Flags every ``fedpca simulate`` command shares, its errors in terms of those flags, its
live progress, and writing its JSON record and picture."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from fedpca.errors import ConfigurationError, KeywordNames, ParameterError
from fedpca.progress import RoundObserver, RoundProgress

if TYPE_CHECKING:
    from fedpca.run_record import RunResult


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """``--output --loadings --scree --verbose --plot --quiet``."""
    parser.add_argument("--output", type=Path, default=None, help="write the result as JSON")
    parser.add_argument("--loadings", type=Path, default=None, metavar="FILE.csv",
                        help="write the loadings table (column, PC1..PCk) as CSV")
    parser.add_argument("--scree", type=Path, default=None, metavar="FILE.png",
                        help="draw the scree plot: the DP explained-variance ratio per "
                             "component and its cumulative curve")
    parser.add_argument("--verbose", action="store_true", help="show Flower's own logs")
    add_display_flags(parser)


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """``--ray-address --cpus-per-site --memory-per-site``: where the virtual sites run
    (:class:`fedpca.flower.federation.Engine`)."""
    parser.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                        help="run the virtual sites on this existing Ray cluster (its head's "
                             "address, or 'auto'); default: a local Ray started for the run")
    parser.add_argument("--cpus-per-site", type=float, default=1.0,
                        help="CPUs each virtual site reserves")
    parser.add_argument("--memory-per-site", type=int, default=None, metavar="MB",
                        help="memory each virtual site reserves, in MB (default: none)")


def add_display_flags(parser: argparse.ArgumentParser) -> None:
    """``--plot FILE.png`` (a picture of the run) and ``--quiet`` (only the final summary)."""
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw the run's history (metric, epsilon spent, sites answered "
                             "per round) to this PNG")
    parser.add_argument("--quiet", action="store_true",
                        help="for scripts: no header, no round lines, no progress bar; only "
                             "the final summary")


def announce(args: argparse.Namespace, text: str) -> None:
    """Print ``text`` (the run's header) unless ``--quiet``."""
    if not args.quiet:
        print(text, flush=True)


@contextlib.contextmanager
def live_rounds(
    args: argparse.Namespace, algorithm: str, total: int
) -> Iterator[RoundObserver | None]:
    """The run's observer: each round's line as it completes (and a progress bar when
    stdout is a terminal), or None with ``--quiet``."""
    if args.quiet:
        yield None
        return
    with RoundProgress(algorithm, total, sys.stdout) as progress:
        yield progress


def write_record(path: Path | None, result: RunResult) -> None:
    """Write the run record of ``result`` (:mod:`fedpca.run_record`) to ``path``, if given."""
    if path is None:
        return
    from fedpca.run_record import save_run_record

    save_run_record(result, path)
    print(f"wrote {path}")


def write_outputs(args: argparse.Namespace, result: RunResult) -> None:
    """``--output``: the run record; ``--plot``: its picture (:func:`fedpca.plots.plot_run`);
    ``--loadings``: the loadings table (:mod:`fedpca.loadings`); ``--scree``: the scree
    plot (:func:`fedpca.plots.plot_scree`)."""
    write_record(args.output, result)
    if args.plot is not None:
        from fedpca.plots import plot_run
        from fedpca.run_record import run_record

        plot_run(run_record(result), args.plot)
        print(f"wrote {args.plot}")
    if getattr(args, "loadings", None) is not None:
        from fedpca.loadings import write_loadings

        print(f"wrote {write_loadings(result, args.loadings)}")
    if getattr(args, "scree", None) is not None:
        from fedpca.plots import plot_scree
        from fedpca.run_record import run_record

        print(f"wrote {plot_scree(run_record(result), args.scree)}")


class FlagNames:
    """Run parameters spelled as one command's flags (``s_hat`` -> ``--s-hat``); a value
    equal to its flag's default is marked ``(default)``, so an error shows which flags the
    user changed."""

    def __init__(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        self.flags = {
            action.dest: action.option_strings[0]
            for action in reversed(parser._actions) if action.option_strings
        }
        self.parser = parser
        self.args = args

    def name(self, parameter: str) -> str:
        """The parameter's flag, or the parameter itself if the command has no such flag."""
        return self.flags.get(parameter, parameter)

    def assignment(self, parameter: str, value: object) -> str:
        """``--flag=value``, with ``(default)`` when that is the flag's default value."""
        if parameter not in self.flags:
            return KeywordNames().assignment(parameter, value)
        unchanged = getattr(self.args, parameter, None) == self.parser.get_default(parameter)
        return f"{self.flags[parameter]}={value}" + (" (default)" if unchanged else "")


def with_flag_errors(
    run: Callable[[argparse.Namespace], int], parser: argparse.ArgumentParser
) -> Callable[[argparse.Namespace], int]:
    """``run``, with every parameter error re-phrased in terms of ``parser``'s flags."""

    def run_command(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except ParameterError as exc:
            raise ConfigurationError(exc.render(FlagNames(parser, args))) from exc

    return run_command


def seeded_notice(seed: int | None) -> None:
    """Say plainly that a seeded run is not private against whoever knows the seed."""
    if seed is not None:
        print("seeded run: reproducible, not for production", flush=True)

"""Flags every ``fedpca simulate`` command shares, its errors in terms of those flags, its
live progress, and writing its JSON record and picture."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from fedpca.errors import ConfigurationError, KeywordNames, ParameterError
from fedpca.progress import RoundObserver, RoundProgress
from fedpca.run_record import RunResult, run_record, save_run_record

#: Run parameters whose flag is not ``--`` + the parameter with dashes.
FLAG_ALIASES = {"secure_min_sites": "--secure-aggregation"}


def add_common_flags(
    parser: argparse.ArgumentParser, *, sites: int, dim: int, samples: int, k: int,
    epsilon: float = 1.0, delta: float = 1e-5,
) -> None:
    """``--sites --dim --samples --k --epsilon --delta --accounting --clip-norm --seed
    --output --verbose`` with the given defaults."""
    parser.add_argument("--sites", type=int, default=sites, help="virtual sites")
    parser.add_argument("--dim", type=int, default=dim, help="features d")
    parser.add_argument("--samples", type=int, default=samples,
                        help="total records n, split evenly over the sites")
    parser.add_argument("--k", type=int, default=k, help="components")
    parser.add_argument("--epsilon", type=float, default=epsilon,
                        help="per-site epsilon for the whole run")
    parser.add_argument("--delta", type=float, default=delta, help="per-site delta")
    parser.add_argument("--accounting", choices=("pld", "paper"), default="pld",
                        help="pld: tight dp-accounting calibration; paper: the paper's formula")
    parser.add_argument("--clip-norm", type=float, default=1.0, help="public row-norm bound C")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed noise and data for a reproducible run (never in production)")
    parser.add_argument("--output", type=Path, default=None, help="write the result as JSON")
    parser.add_argument("--verbose", action="store_true", help="show Flower's own logs")
    add_display_flags(parser)


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


def data_seed(args: argparse.Namespace) -> int:
    """The synthetic data's seed: ``--seed`` when given (a fully reproducible run), else 0
    (the same public data every time, with fresh OS noise)."""
    return args.seed if args.seed is not None else 0


def write_record(path: Path | None, result: RunResult) -> None:
    """Write the run record of ``result`` (:mod:`fedpca.run_record`) to ``path``, if given."""
    if path is None:
        return
    save_run_record(result, path)
    print(f"wrote {path}")


def write_outputs(args: argparse.Namespace, result: RunResult) -> None:
    """``--output``: the run record; ``--plot``: its picture (:func:`fedpca.plots.plot_run`)."""
    write_record(args.output, result)
    if args.plot is not None:
        from fedpca.plots import plot_run

        plot_run(run_record(result), args.plot)
        print(f"wrote {args.plot}")


class FlagNames:
    """Run parameters spelled as one command's flags (``s_hat`` -> ``--s-hat``); a value
    equal to its flag's default is marked ``(default)``, so an error shows which flags the
    user changed."""

    def __init__(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        self.dests = {
            option: action.dest for action in parser._actions for option in action.option_strings
        }
        self.parser = parser
        self.args = args

    def name(self, parameter: str) -> str:
        """The parameter's flag, or the parameter itself if the command has no such flag."""
        flag = FLAG_ALIASES.get(parameter, "--" + parameter.replace("_", "-"))
        return flag if flag in self.dests else parameter

    def assignment(self, parameter: str, value: object) -> str:
        """``--flag=value``, with ``(default)`` when that is the flag's default value."""
        flag = self.name(parameter)
        if flag not in self.dests:
            return KeywordNames().assignment(parameter, value)
        dest = self.dests[flag]
        unchanged = getattr(self.args, dest, None) == self.parser.get_default(dest)
        return f"{flag}={value}" + (" (default)" if unchanged else "")


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

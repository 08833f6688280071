"""``fedpca show RESULT.json [--plot FILE.png]``: the table, summary and picture of a saved run
(a standardised run's scales at the noise floor, with a warning above a quarter of its
columns, and its explained-variance ratio flagged when it is over such a total).

It reads any run record (:mod:`fedpca.run_record`): ``fedpca simulate ... --output`` and the
Flower App's run_config ``output`` write the same schema (a failed run's record: its error
and each failing site's reason).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fedpca.errors import ConfigurationError
from fedpca.report import record_lines
from fedpca.run_record import FAILED


def register_show_command(commands: argparse._SubParsersAction) -> None:
    """Add the ``show`` command."""
    p = commands.add_parser(
        "show",
        help="print the per-round table and summary of a saved result (and draw it)",
        description="Print the per-round table and summary of a run record written by "
                    "`fedpca simulate ... --output` or the Flower App's run_config output; "
                    "--plot draws the same picture as `fedpca simulate ... --plot`.",
    )
    p.add_argument("result", type=Path, help="a run record (JSON)")
    p.add_argument("--plot", type=Path, default=None, help="draw the run to this PNG")
    p.add_argument("--scree", type=Path, default=None, metavar="FILE.png",
                   help="draw the scree plot (DP explained-variance ratio per component)")
    p.set_defaults(func=run)


def load_record(path: Path) -> dict[str, Any]:
    """The run record in ``path``; a missing file or one that is no run record is an error
    that says what was expected."""
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigurationError(f"no such result file: {path}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"{path} is not JSON ({exc}); pass a file written by `fedpca simulate ... "
            "--output` or the Flower App's run_config output"
        ) from exc
    if not isinstance(record, dict) or "algorithm" not in record or (
        "history" not in record and record.get("status") != FAILED
    ):
        raise ConfigurationError(
            f"{path} is not a fedpca run record (no 'algorithm' and 'history' keys); pass a "
            "file written by `fedpca simulate ... --output` or the Flower App's run_config "
            "output"
        )
    return record


def run(args: argparse.Namespace) -> int:
    """Print the record's header, table, summary and wall time; draw it with ``--plot``."""
    record = load_record(args.result)
    if record.get("status") == FAILED:
        print(f"{record['algorithm']}: the run failed: {record['error']}")
        for reason in record.get("site_failures", []):
            print(f"  {reason}")
        return 0
    print("\n".join(record_lines(record)))
    if args.plot is not None:
        from fedpca.plots import plot_run

        plot_run(record, args.plot)
        print(f"wrote {args.plot}")
    if args.scree is not None:
        from fedpca.plots import plot_scree

        print(f"wrote {plot_scree(record, args.scree)}")
    return 0

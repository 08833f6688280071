"""Running ``fedpca`` commands inside a test (any fixture scope): exit code, printed text,
JSON record."""

import contextlib
import io
import json
from pathlib import Path

from fedpca.cli import main as cli_main


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``fedpca ARGV``: its exit code and what it printed on stdout."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli_main(argv)
    return code, printed.getvalue()


def run_cli_record(argv: list[str], output: Path) -> tuple[str, dict]:
    """``fedpca ARGV --output OUTPUT`` that must succeed: what it printed, and its record."""
    code, printed = run_cli([*argv, "--output", str(output)])
    assert code == 0, printed
    return printed, json.loads(output.read_text())

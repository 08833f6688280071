"""What an experiment produces: JSON data, PNG figures (matplotlib) and markdown."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpca.extras import PLOTS, missing_extra

try:
    import matplotlib
except ModuleNotFoundError as exc:
    raise missing_extra(PLOTS, "fedpca experiment (its figures)") from exc

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

#: How a summary states a paper's claim checked on our numbers.
HOLDS = {True: "holds", False: "does not hold at every point"}


@dataclass
class ExperimentOutput:
    """An experiment's results.

    Attributes:
        name: file stem (``NAME.json``, ``NAME.md``).
        data: JSON-serialisable numbers behind every plot and table.
        markdown: a human summary (tables, and the papers' numbers beside ours).
        figures: ``{file name: matplotlib Figure}``; written as PNG.
    """

    name: str
    data: dict[str, Any]
    markdown: str
    figures: dict[str, Figure] = field(default_factory=dict)

    def files(self, out: Path) -> list[str]:
        """Paths this output writes into ``out``."""
        return [str(out / f"{self.name}.json"), str(out / f"{self.name}.md")] + [
            str(out / name) for name in self.figures
        ]

    def write(self, out: Path) -> None:
        """Write JSON, markdown and every figure as PNG into ``out``."""
        (out / f"{self.name}.json").write_text(json.dumps(self.data, indent=2))
        (out / f"{self.name}.md").write_text(self.markdown)
        for filename, figure in self.figures.items():
            figure.savefig(out / filename, dpi=120, bbox_inches="tight")
            plt.close(figure)


def markdown_document(sections: list[str]) -> str:
    """An experiment's markdown summary: its sections (headings, paragraphs, tables)
    separated by blank lines, ending with a newline."""
    return "\n\n".join(sections) + "\n"


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A markdown table; floats get 4 significant digits."""

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)

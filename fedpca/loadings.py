"""The loadings table of a PCA result: each input column's weight in each component, by
column name (the contract's output columns, or ``x0 .. x{d-1}`` without a contract).

The loadings are the released basis itself, so the table is post-processing and costs no
privacy budget. Columns of the CSV: ``column, PC1, ..., PCk``; the components are in the
result's order (largest explained variance first where the run released it).
"""

from __future__ import annotations

import csv
from pathlib import Path

from fedpca.results import PCAResult


def component_names(k: int) -> list[str]:
    """``PC1 .. PCk``."""
    return [f"PC{j + 1}" for j in range(k)]


def loadings(result: PCAResult) -> dict[str, list[float]]:
    """``{column: [its loading on each of the k components]}``, in the basis's row order."""
    return {name: row.tolist() for name, row in zip(result.column_names(), result.basis)}


def top_loadings(result: PCAResult, count: int = 3) -> list[str]:
    """One line per component naming its ``count`` largest loadings by magnitude, e.g.
    ``PC1: age +0.52, nodes +0.41, er -0.38`` (what a reader looks at first)."""
    names = result.column_names()
    lines = []
    for name, column in zip(component_names(result.k), result.basis.T):
        top = sorted(range(len(names)), key=lambda i: -abs(column[i]))[:count]
        lines.append(f"{name}: " + ", ".join(f"{names[i]} {column[i]:+.2f}" for i in top))
    return lines


def loadings_path(output: str | Path) -> Path:
    """Where the loadings table goes next to a run record: ``run.json`` ->
    ``run.loadings.csv``."""
    return Path(output).with_suffix(".loadings.csv")


def write_loadings(result: PCAResult, path: str | Path) -> Path:
    """Write the loadings table of ``result`` as CSV (``column, PC1, ..., PCk``)."""
    path = Path(path)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["column", *component_names(result.k)])
        for name, row in loadings(result).items():
            writer.writerow([name, *(repr(value) for value in row)])
    return path

"""Seed-averaged parameter sweeps: their summaries, plots and markdown tables.

A sweep measures several methods at each value ``x`` of one parameter, repeated over seeds.
Its raw numbers are ``runs[method][i][j]``: the ``j``-th seed at the ``i``-th ``x``, or None
where a method does not apply (e.g. the classic Gaussian formula at eps >= 1).
:func:`summarize` turns each method's runs into mean and standard deviation over seeds; the
plot and table helpers read those summaries.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes

from fedpca.experiments.output import markdown_table

#: fedpca refuses the classic Gaussian formula (``accounting="paper"``) from this eps on: it
#: is an (eps, delta) bound only below it. Comparisons with it stop there.
CLASSIC_MAX_EPSILON = 1.0

#: ``runs[i][j]``: seed ``j`` at the ``i``-th value of the swept parameter (None: n/a).
Runs = list[list[float | None]]


def empty_runs(keys: Sequence[str], points: int) -> dict[str, Runs]:
    """``{key: [[] per point]}``: where a sweep collects each method's values per seed."""
    return {key: [[] for _ in range(points)] for key in keys}


def summarize(runs: Runs) -> dict[str, Any]:
    """``{"mean": [...], "std": [...], "runs": runs}`` over seeds, None where n/a."""
    means: list[float | None] = []
    stds: list[float | None] = []
    for values in runs:
        present = [v for v in values if v is not None]
        means.append(statistics.fmean(present) if present else None)
        stds.append(statistics.stdev(present) if len(present) > 1 else (0.0 if present else None))
    return {"mean": means, "std": stds, "runs": runs}


def plot_methods(
    ax: Axes,
    x: Sequence[float],
    methods: Mapping[str, Mapping[str, Any]],
    labels: Mapping[str, str],
    styles: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """One line per method (mean, error bars = std over seeds), skipping n/a points.

    ``styles`` optionally gives a method extra ``errorbar`` keywords (colour, line style).
    Returns each drawn method's line colour (for matching reference lines).
    """
    colors = {}
    for key, label in labels.items():
        summary = methods[key]
        points = [(xi, m, s) for xi, m, s in zip(x, summary["mean"], summary["std"], strict=True)
                  if m is not None]
        if points:
            xs, ms, ss = zip(*points, strict=True)
            style = {"marker": "o", **(styles or {}).get(key, {})}
            drawn = ax.errorbar(xs, ms, yerr=ss, markersize=4, capsize=3, label=label, **style)
            colors[key] = drawn.lines[0].get_color()
    return colors


def mean_std_table(
    x_name: str,
    x: Sequence[Any],
    methods: Mapping[str, Mapping[str, Any]],
    labels: Mapping[str, str],
    digits: int = 3,
) -> str:
    """A markdown table: one row per ``x``, one ``mean ± std`` column per method."""

    def cell(mean: float | None, std: float | None) -> str:
        return "n/a" if mean is None else f"{mean:.{digits}f} ± {std:.{digits}f}"

    rows = [
        [xi] + [cell(methods[key]["mean"][i], methods[key]["std"][i]) for key in labels]
        for i, xi in enumerate(x)
    ]
    return markdown_table([x_name, *labels.values()], rows)

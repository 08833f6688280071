"""fedpca's advice before spending beside what the genomics benchmark's size curve measured
(issue 50: "a run whose planned accuracy is below what the panel alone gives says so before
anyone spends").

For every size-curve point (``genomics.curve_points``: a method's row, or the panel's own
PCs', of one cohort and epsilon) :func:`advise` adds what ``fedpca.algorithms.panel_advice``
predicts from public numbers only (the plan's noise, n, d and the panel's reference-size and
reference-variances): the distance the planned noise moves the components by, the panel's
own PCs' distance, whether the run would have been warned and the n named; the other
functions read those rows back (which were warned, which should have been, the table).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from common import md_table
from genomics_methods import PANEL, Method, Union, sigmas_for

from fedpca.algorithms.dps_pca import PHASE_POWER
from fedpca.algorithms.panel_advice import panel_advice, panel_distance
from fedpca.algorithms.shifted_start import SHIFT_COLUMNS
from fedpca.data.cohort import CohortFiles
from fedpca.data.snp_panel import load_panel
from fedpca.data.start_basis import load_start_basis
from fedpca.dp.budget_split import MOMENTS

Row = dict[str, Any]


def advise(points: list[Row], methods: Sequence[Method], files_of: Callable[[Row], CohortFiles],
           sites: int, delta: float) -> None:
    """Adds fedpca's advice to every point of ``methods`` and the panel's own PCs (``points``,
    ``files_of`` a point's cohort files, ``sites`` sites of ``samples / sites`` individuals
    each): ``planned``, ``panel_predicted``, ``warned`` and ``needed`` (the panel's row only
    ``panel_predicted``)."""
    names = {m.name: m for m in methods}
    for row in points:
        files = files_of(row)
        panel, start = load_panel(files.panel), load_start_basis(files.start)
        if row["method"] == PANEL:
            row["panel_predicted"] = panel_distance(panel.reference, panel.d)
            continue
        method, n = names[row["method"]], row["samples"]
        public = Union(start, panel.freq, n, n // sites, sites, panel.row_norm, None, None)
        sigmas = sigmas_for(method, public, row["epsilon"], delta)
        shifted = method.start == "shifted"
        advice = panel_advice(panel.reference, panel.d, n, sigmas[PHASE_POWER],
                              start.shape[1] + SHIFT_COLUMNS if shifted else None,
                              sigmas[MOMENTS] if shifted else None,
                              panel.freq if shifted else None)
        row.update(planned=advice.planned, panel_predicted=advice.panel,
                   warned=advice.worse, needed=advice.needed)


def advised(points: list[Row], scenario: str) -> list[Row]:
    """The points of ``scenario`` with fedpca's advice (:func:`advise`)."""
    return [r for r in points if r["scenario"] == scenario and "warned" in r]


def panel_alone(points: list[Row], row: Row) -> Row | None:
    """The panel's own PCs' point of ``row``'s cohort."""
    return next((r for r in points if r["method"] == PANEL and (
        r["scenario"], r["samples"]) == (row["scenario"], row["samples"])), None)


def advice_misses(points: list[Row], gap: float) -> list[Row] | None:
    """Scenario (a)'s advised points more than ``gap`` below the panel alone's accuracy that
    the advice did not warn (``None``: no advised point)."""
    runs = advised(points, "a")
    if not runs:
        return None
    return [r for r in runs if not r["warned"] and r["mean"] < panel_alone(points, r)["mean"] - gap]


def advice_table(points: list[Row]) -> str:
    """Every advised point: the predicted distance of its noise and the measured distance to
    the union's top k, the warning, its accuracy and the panel alone's."""
    table = []
    for row in sorted((r for s in ("a", "b") for r in advised(points, s)),
                      key=lambda r: (r["scenario"], r["method"], r["samples"], r["epsilon"])):
        alone = panel_alone(points, row)
        table.append([f"({row['scenario']})", row["method"], f"{row['samples']:,}",
                      f"{row['epsilon']:g}", f"{row['planned']:.3f}", f"{row['distance']:.3f}",
                      f"{row['panel_predicted']:.3f} / {alone['distance']:.3f}",
                      "warned" if row["warned"] else "-", f"{row['mean']:.4f}",
                      f"{alone['mean']:.4f}"])
    return md_table(["scenario", "method", "n", "eps", "predicted noise distance",
                     "measured distance", "panel: predicted / measured", "advice",
                     "accuracy", "panel alone"], table)

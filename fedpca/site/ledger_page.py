"""A site's ledger on one self-contained HTML page (``fedpca site ledger --html FILE``).

The page holds the site, its budgets, its runs (the table of ``fedpca site ledger``, one row
per run with its status, run id, what it released, its releases and times), the policy's
recorded changes, and a plot (a PNG drawn with matplotlib, embedded as a ``data:`` URI) of
the spending after every release: the lifetime epsilon against the lifetime budget, and
the epsilon of the UTC day and of the last 7 x 24 hours against their ceilings, each as the
ledger composed it when it charged that release
(:func:`~fedpca.site.ledger_report.spending_series`). Every run is marked and numbered
on the plot as in the table; the plotted points are embedded too, as JSON in
``<script type="application/json" id="fedpca-ledger-data">``, so that a program can check the
page against the ledger.

The page is written 0600 (the ledger's figures are the site's) and loads nothing from
anywhere. Texts a coordinator may have chosen (run ids, a failed run's reason) are escaped,
in the HTML and in the embedded JSON (``<`` as ``\\u003c``), so that they cannot add markup
or script to the page. Matplotlib is the ``plots`` extra (:mod:`fedpca.extras`).
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fedpca.extras import PLOTS, missing_extra
from fedpca.file_modes import replace_owner_only
from fedpca.site.ledger_report import (
    COMPOSITION_NOTE,
    STATUS_NOTE,
    event_sentences,
    format_ledger,
    iso_utc,
    released_text,
    shown_status,
)

try:
    import matplotlib
except ModuleNotFoundError as exc:
    raise missing_extra(PLOTS, "the ledger's page (fedpca site ledger --html)") from exc

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

#: The id of the embedded JSON of the plotted points.
DATA_ID = "fedpca-ledger-data"
#: Figure size in inches and resolution: 1500 x 1050 pixels.
FIGSIZE, DPI = (10.0, 7.0), 150
#: Marker colour of a run by status.
STATUS_COLOURS = {"complete": "tab:green", "failed": "tab:red", "stopped": "tab:orange",
                  "unknown": "tab:gray"}


def write_ledger_page(summary: Mapping[str, Any], series: Mapping[str, Any],
                      path: str | Path) -> Path:
    """Write the page of ``summary`` (:func:`~fedpca.site.ledger_report.summarize`,
    with the command's additions) and its ``series``
    (:func:`~fedpca.site.ledger_report.spending_series`) to ``path`` (0600, replacing a
    file there); the path."""
    target = Path(path)
    replace_owner_only(target, ledger_page(summary, series).encode("utf-8"))
    return target


def ledger_page(summary: Mapping[str, Any], series: Mapping[str, Any]) -> str:
    """The page's HTML (module docstring)."""
    image = base64.b64encode(spending_png(series)).decode("ascii")
    title = f"Privacy ledger of {summary['site']}, population {summary['population']}"
    header = format_ledger(summary).split("\n\n", 1)[0]  # the budgets, as the command prints
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_text(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
        "font-size:90%}pre{white-space:pre-wrap}</style></head><body>",
        f"<h1>{_text(title)}</h1>",
        f"<p>At {_text(iso_utc(summary['now']))} by the site's clock.</p>",
        f"<h2>Budgets</h2><pre>{_text(header)}</pre>",
        "<h2>Spending over time</h2>",
        f'<img alt="spending after every release against the budgets" '
        f'src="data:image/png;base64,{image}" style="max-width:100%">',
        f"<h2>Runs</h2>{_runs_table(summary['runs'])}",
        f"<p>{_text(STATUS_NOTE)}</p><p>{_text(COMPOSITION_NOTE)}</p>",
        f"<h2>Policy changes</h2>{_events_table(summary['policy_events'])}",
        f'<script type="application/json" id="{DATA_ID}">{_json(series)}</script>',
        "</body></html>",
    ])


def _runs_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """The runs as an HTML table (the columns of ``fedpca site ledger``)."""
    head = ("#", "run (the coordinator's id)", "status", "released", "algorithms", "releases",
            "epsilon", "worst case", "lifetime after", "started (UTC)", "last release (UTC)")
    rows = [(run["number"], run["run_id"], shown_status(run),
             "; ".join(filter(None, [released_text(run["description"]) or "not recorded",
                                     run.get("key_list") and f"secure sums: {run['key_list']}"])),
             ",".join(run["algorithms"]), f"{run['releases']}/{run['planned'] or '?'}",
             f"{run['epsilon']:.4f}", f"{run['epsilon_worst_case']:.4f}",
             f"{run['lifetime_epsilon_after']:.4f}", iso_utc(run["started"]),
             iso_utc(run["last"]))
            for run in runs]
    return _table(head, rows)


def _events_table(events: Sequence[Mapping[str, Any]]) -> str:
    """The policy's recorded changes as an HTML table, one dated row each."""
    rows = [(iso_utc(event["time"]), "; ".join(event_sentences(event))) for event in events]
    return _table(("recorded (UTC)", "change"), rows) if rows else "<p>none recorded</p>"


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = "".join(f"<th>{_text(cell)}</th>" for cell in head)
    body = "".join("<tr>" + "".join(f"<td>{_text(cell)}</td>" for cell in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _text(value: Any) -> str:
    return html.escape(str(value))


def _json(value: Any) -> str:
    """``value`` as JSON safe inside a ``<script>`` element (no ``<``, ``>`` or ``&``)."""
    text = json.dumps(value, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def spending_png(series: Mapping[str, Any]) -> bytes:
    """The plot of ``series`` as PNG bytes: the lifetime epsilon after every release against
    the lifetime budget (top), the daily and weekly spending against their ceilings
    (bottom); one marker per release, coloured by its run's status, each run's number at
    its last release, and a dotted line at each change of the policy."""
    fig, (lifetime, windows) = plt.subplots(2, 1, figsize=FIGSIZE, sharex=True,
                                            height_ratios=(3, 2))
    budgets = series["budgets"]
    for number, change in enumerate(series["policy_changes"]):
        for axes in (lifetime, windows):
            axes.axvline(_when(change), color="tab:gray", linestyle=":", linewidth=1,
                         label="policy changed" if number == 0 else None)
    _budget_line(lifetime, budgets["lifetime"], "lifetime budget")
    for name, style, colour in (("daily", "-", "tab:red"), ("weekly", "--", "tab:purple")):
        _budget_line(windows, budgets.get(name), f"{name} ceiling", style, colour)
    _spending(lifetime, windows, series["runs"])
    lifetime.set_ylabel(f"lifetime epsilon (delta {series['delta']:g})")
    windows.set_ylabel("epsilon in the window")
    windows.set_xlabel("time of release (UTC)")
    for axes in (lifetime, windows):
        axes.set_ylim(bottom=0)
        axes.legend(loc="upper left", fontsize=8)
    fig.suptitle(f"{series['site']}, population {series['population']}: spending after "
                 "every release", fontsize=10)
    fig.autofmt_xdate()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def _spending(lifetime: Any, windows: Any, runs: Sequence[Mapping[str, Any]]) -> None:
    """The lines of every release in time order, and each run's markers and number."""
    points = sorted((p for run in runs for p in run["points"]), key=lambda p: p["release"])
    if not points:
        lifetime.text(0.5, 0.5, "no release yet", transform=lifetime.transAxes, ha="center")
        return
    times = [_when(p) for p in points]
    lifetime.plot(times, [p["lifetime_epsilon"] for p in points], drawstyle="steps-post",
                  color="black", linewidth=1, label="spent (lifetime)")
    for name, marker in (("daily", "o"), ("weekly", "x")):  # known at each release only
        windows.plot(times, [p[f"{name}_epsilon"] for p in points], marker, color="tab:blue",
                     markersize=4, linestyle="none", label=f"spent ({name}, at each release)")
    for run in runs:
        if not run["points"]:
            continue
        colour = STATUS_COLOURS.get(run["status"], "tab:gray")
        lifetime.scatter([_when(p) for p in run["points"]],
                         [p["lifetime_epsilon"] for p in run["points"]], color=colour, s=12,
                         zorder=3)
        last = run["points"][-1]
        lifetime.annotate(f"#{run['number']}", (_when(last), last["lifetime_epsilon"]),
                          textcoords="offset points", xytext=(2, 4), fontsize=7, color=colour)
    for status, colour in STATUS_COLOURS.items():
        if any(run["status"] == status for run in runs):
            lifetime.scatter([], [], color=colour, s=12, label=f"run {status}")


def _budget_line(axes: Any, budget: float | None, label: str, style: str = "-",
                 colour: str = "tab:red") -> None:
    if budget is not None:
        axes.axhline(budget, linestyle=style, color=colour, linewidth=1, label=label)


def _when(point: Mapping[str, Any]) -> datetime:
    return datetime.fromtimestamp(point["time_unix"], tz=timezone.utc)

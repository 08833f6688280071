"""A picture of one run, drawn from its run record (:mod:`fedpca.run_record`).

:func:`plot_run` draws three panels over the Flower rounds: the algorithm's metrics
(distance to the truth, captured energy, k-plane cost), the most epsilon any site has spent
so far, and the sites that answered. The title names the algorithm, the federation and the
guarantee, and, for a secure-aggregation run, the trust model. :func:`plot_scree` draws the
DP explained-variance ratio per component and its cumulative curve. Both read only the record's
keys, so a record from ``fedpca simulate --output`` and one from ``flwr run`` draw alike.
Matplotlib runs on its Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fedpca.errors import ConfigurationError
from fedpca.extras import PLOTS, missing_extra
from fedpca.loadings import component_names
from fedpca.report import metric_columns, record_header

try:
    import matplotlib
except ModuleNotFoundError as exc:
    raise missing_extra(PLOTS, "drawing a run (--plot)") from exc

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

#: Figure size in inches and resolution: 1500 x 1050 pixels (the scree plot 1050 x 750).
FIGSIZE = (10.0, 7.0)
SCREE_FIGSIZE = (7.0, 5.0)
#: Components the scree plot names ``PC1 ..``; beyond, its axis is numbered.
LABELLED_COMPONENTS = 12
DPI = 150


def plot_run(record: dict[str, Any], path: str | Path) -> Path:
    """Draw the run in ``record`` (a run record) to the PNG ``path``; return the path."""
    history = record.get("history") or []
    rounds = [entry.get("round", i) for i, entry in enumerate(history)]
    fig, (metrics, epsilon, sites) = plt.subplots(
        3, 1, figsize=FIGSIZE, sharex=True, height_ratios=(2, 1, 1)
    )
    _metrics_panel(metrics, record, rounds, history)
    _epsilon_panel(epsilon, record, rounds, history)
    _sites_panel(sites, record, rounds, history)
    sites.xaxis.set_major_locator(MaxNLocator(integer=True))
    first = " (0 = private initialisation)" if record.get("algorithm") == "dps-pca" else ""
    sites.set_xlabel("Flower round" + first)
    fig.suptitle(title(record), fontsize=10)
    return _save(fig, path)


def plot_scree(record: dict[str, Any], path: str | Path) -> Path:
    """Draw the scree plot of the run in ``record`` to the PNG ``path``: the DP
    explained-variance ratio of each component (bars) and its cumulative curve, or, where
    the run released no total variance (DPdisPCA's factor variant), the explained variance
    itself. Raises ConfigurationError when the record has no explained variance."""
    values = record.get("explained_variance")
    if values is None:
        raise ConfigurationError(
            f"{record.get('algorithm')}: the run released no explained variance, so there is "
            "no scree plot (DPS-PCA releases it with --explained-variance)")
    ratio = record.get("explained_variance_ratio")
    heights = np.asarray(values if ratio is None else ratio, dtype=np.float64)
    components = np.arange(1, heights.size + 1)
    fig, axes = plt.subplots(figsize=SCREE_FIGSIZE)
    axes.bar(components, heights, color="tab:blue", label="each component")
    if ratio is None:
        axes.set_ylabel("DP explained variance (per record)")
    else:
        axes.plot(components, np.cumsum(heights), marker="o", color="tab:red",
                  label="cumulative")
        target = (record.get("config") or {}).get("variance")
        if target:  # k was chosen to reach it
            axes.axhline(float(target), color="grey", linestyle="--",
                         label=f"target share {float(target):g}")
        axes.set_ylim(0, 1.05)
        axes.set_ylabel("DP explained-variance ratio")
        axes.legend(loc="center right")
    if components.size <= LABELLED_COMPONENTS:
        axes.set_xticks(components, component_names(components.size))
    else:
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("component")
    axes.grid(alpha=0.3, axis="y")
    axes.set_title(title(record), fontsize=9)
    return _save(fig, path)


def _save(fig: Any, path: str | Path) -> Path:
    """Lay out ``fig``, write it to the PNG ``path`` and close it."""
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def title(record: dict[str, Any]) -> str:
    """``dps-pca: 100 sites, n=..., d=..., k=...; each site (eps, delta)-DP``, plus the trust
    model on a second line for a secure-aggregation run."""
    text = record_header(record)
    if record.get("secure_min_sites") is not None:
        text += f"\ntrust model: {record.get('trust_model')}"
    return text


def _metrics_panel(axes: Any, record: dict[str, Any], rounds: list[int],
                   history: list[dict[str, Any]]) -> None:
    """The algorithm's metrics per round (a metric never evaluated is left out)."""
    drawn = []
    for key, label in metric_columns(str(record.get("algorithm"))):
        values = [_number(entry.get(key)) for entry in history]
        if any(v is not None for v in values):
            axes.plot(rounds, [float("nan") if v is None else v for v in values],
                      marker="o", label=label)
            drawn.append(label)
    if drawn:
        axes.legend(loc="best")
    else:
        axes.text(0.5, 0.5, "no metric evaluated (no known truth)", ha="center",
                  va="center", transform=axes.transAxes)
    axes.set_ylabel(", ".join(drawn) or "metric")
    axes.grid(alpha=0.3)


def _epsilon_panel(axes: Any, record: dict[str, Any], rounds: list[int],
                   history: list[dict[str, Any]]) -> None:
    """The most epsilon any site had spent after each round, against its budget."""
    spent = [_number(entry.get("epsilon_spent")) for entry in history]
    axes.plot(rounds, [float("nan") if v is None else v for v in spent], marker="o",
              color="tab:red", label="epsilon spent (most by any site)")
    if record.get("epsilon") is not None:
        axes.axhline(float(record["epsilon"]), color="grey", linestyle="--",
                     label="each site's budget")
    axes.set_ylabel("epsilon per site")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(alpha=0.3)


def _sites_panel(axes: Any, record: dict[str, Any], rounds: list[int],
                 history: list[dict[str, Any]]) -> None:
    """Sites answered per round, against the federation's size."""
    answered = [_number(entry.get("sites")) or 0 for entry in history]
    axes.plot(rounds, answered, marker="s", color="tab:green", label="sites answered")
    federation = float(record.get("sites") or max(answered, default=1))
    axes.axhline(federation, color="grey", linestyle="--", label="sites in the federation")
    axes.set_ylabel("sites")
    axes.set_ylim(0, 1.15 * federation)
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(alpha=0.3)


def _number(value: Any) -> float | None:
    """``value`` as a float, or None if it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)

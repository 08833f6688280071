"""Every method's final error against eps (Fig. 4a) and against d (Fig. 4b): paper 000
(Ge, Wang, Wang, Liu, AISTATS 2018), ``fedpca experiment dps-pca-fig4a`` and ``dps-pca-fig4b``.

DPS-PCA with both calibrations beside the central methods (MOD-SuLQ, Analyze Gauss, PPCA)
over the noise seeds, one data draw per ``d``, with the paper's claims checked on our
numbers. The setting, the methods and why our numbers differ from the paper's:
:mod:`fedpca.experiments.paper000`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from fedpca.experiments.central_methods import random_subspace_distance
from fedpca.experiments.output import HOLDS, ExperimentOutput, markdown_document
from fedpca.experiments.paper000 import (
    DIFFERENCES_NOTE,
    METHOD_LABELS,
    PAPER,
    PAPER_VALUES_NOTE,
    QUICK,
    ModelSetting,
    method_errors,
    noise_multipliers,
    setting_record,
)
from fedpca.experiments.progress import progress
from fedpca.experiments.registry import experiment
from fedpca.experiments.sweeps import empty_runs, mean_std_table, plot_methods, summarize


@dataclass(frozen=True)
class Fig4Setting:
    """A comparison of every method over eps (Fig. 4a) or over d (Fig. 4b).

    Attributes:
        model: the data and run parameters (``dim`` is replaced by each of ``dims``).
        epsilons, dims: the swept values (one of them has a single entry).
        delta: every delta-method's delta (MOD-SuLQ, Analyze Gauss, DPS-PCA).
    """

    model: ModelSetting
    epsilons: tuple[float, ...]
    dims: tuple[int, ...]
    delta: float

    def points(self) -> list[tuple[int, float]]:
        """``(d, eps)`` of every point, in sweep order."""
        return [(d, e) for d in self.dims for e in self.epsilons]


FIG4A = Fig4Setting(PAPER, epsilons=(0.8, 1.2, 1.6, 2.0), dims=(1000,), delta=0.3)
FIG4A_QUICK = Fig4Setting(QUICK, epsilons=(0.8, 2.0), dims=(QUICK.spiked.dim,), delta=0.3)
FIG4B = Fig4Setting(replace(PAPER.with_k(3), seeds=3), epsilons=(1.0,),
                    dims=(40, 60, 80, 100, 120, 140, 160), delta=0.1)
FIG4B_QUICK = Fig4Setting(QUICK.with_k(3), epsilons=(1.0,), dims=(40, 100), delta=0.1)


def fig4_runs(setting: Fig4Setting, seed: int, label: str) -> dict[str, Any]:
    """Every method at every point over the noise seeds; data drawn once per ``d``."""
    points = setting.points()
    runs = empty_runs(METHOD_LABELS, len(points))
    data: dict[int, tuple[ModelSetting, np.ndarray, np.ndarray]] = {}
    jobs = [(i, rep) for i in range(len(points)) for rep in range(setting.model.seeds)]
    for i, rep in progress(jobs, label):
        dim, epsilon = points[i]
        if dim not in data:
            m = setting.model.at_dim(dim)
            data[dim] = (m, *m.data(seed))
        m, X, truth = data[dim]
        for key, error in method_errors(X, truth, m, epsilon, setting.delta, seed + rep).items():
            runs[key][i].append(error)
    return {key: summarize(r) for key, r in runs.items()}


def fig4_figure(title: str, x: Sequence[float], xlabel: str, methods: dict[str, Any],
                random_level: Sequence[float]) -> plt.Figure:
    """Error of every method against the swept parameter, with the random-subspace level."""
    fig, ax = plt.subplots(figsize=(11, 5))
    styles = {"dps_paper": {"linestyle": "--"}, "analyze_gauss": {"linestyle": "--"}}
    plot_methods(ax, x, methods, METHOD_LABELS, styles)
    ax.plot(x, random_level, color="gray", linestyle=":", label="random subspace")
    ax.set_xticks(list(x))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("||sin Theta(Q, Q*)||_F")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title)
    fig.tight_layout()
    return fig


def fig4_findings(methods: dict[str, Any]) -> dict[str, Any]:
    """The paper's claim: DPS-PCA (either calibration) beats PPCA and MOD-SuLQ everywhere."""
    mean = {key: np.array(s["mean"]) for key, s in methods.items()}
    return {
        f"{dps}_best_everywhere": bool(
            (mean[dps] <= np.minimum(mean["ppca"], mean["mod_sulq"])).all())
        for dps in ("dps_pld", "dps_paper")
    } | {
        "ppca_beats_mod_sulq_everywhere": bool((mean["ppca"] < mean["mod_sulq"]).all()),
        "analyze_gauss_beats_dps_pld_everywhere": bool(
            (mean["analyze_gauss"] < mean["dps_pld"]).all()),
    }


FIG4_NOTE = """\
MOD-SuLQ runs with its paper's own beta (for eps above 1 that beta is the paper's claim,
not a bound fedpca can check); Analyze Gauss is the same input perturbation with the
corrected sensitivity and PLD calibration. PPCA is pure alpha-DP (no delta) only in the limit
of exact sampling: for k > 1 its frame is the state of a Gibbs chain after {burn_in} sweeps
from a random frame (the paper also stops at 1000 and cannot tell whether it mixed).
"""


def fig4_experiment(name: str, title: str, setting: Fig4Setting, seed: int,
                    swept: str, claims: str) -> ExperimentOutput:
    """Run a Fig. 4 sweep (``swept`` is ``"epsilon"`` or ``"dim"``) and assemble the output."""
    m = setting.model
    methods = fig4_runs(setting, seed, name)
    x = list(setting.epsilons if swept == "epsilon" else setting.dims)
    random_level = [random_subspace_distance(m.k, d) for d, _ in setting.points()]
    found = fig4_findings(methods)
    multipliers = noise_multipliers(m, [(e, setting.delta) for _, e in setting.points()])
    markdown = markdown_document([
        f"# {title}",
        f"`fedpca experiment {name}`: n = {m.samples}, k = {m.k}, s = {m.spiked.sparsity}, "
        f"s_hat = min({m.s_hat}, d), T = {m.rounds}, delta = {setting.delta:g} (MOD-SuLQ, "
        f"Analyze Gauss, DPS-PCA), PPCA alpha = eps with {m.burn_in} Gibbs sweeps; one site; "
        f"rows scaled to norm <= 1 by the model's public constant; mean ± std over {m.seeds} "
        "noise seed(s) on one data draw per d.",
        f"![{name}]({name}.png)",
        mean_std_table("eps" if swept == "epsilon" else "d", x, methods, METHOD_LABELS),
        "Random-subspace level: " + ", ".join(f"{v:.3f}" for v in dict.fromkeys(random_level))
        + ". DPS-PCA noise multipliers z (PLD / paper): "
        + ", ".join(f"{a:.3g} / {b:.3g}" for a, b in zip(multipliers["pld"],
                                                         multipliers["paper"], strict=True))
        + ".",
        FIG4_NOTE.format(burn_in=m.burn_in),
        PAPER_VALUES_NOTE,
        "## The paper's claims on our numbers\n\n" + claims + "\n\n"
        f"* DPS-PCA (PLD) has the smallest error of DPS-PCA, PPCA, MOD-SuLQ at every point: "
        f"{HOLDS[found['dps_pld_best_everywhere']]}; with the paper's calibration: "
        f"{HOLDS[found['dps_paper_best_everywhere']]}.\n"
        f"* PPCA beats MOD-SuLQ at every point: {HOLDS[found['ppca_beats_mod_sulq_everywhere']]}."
        "\n* Not in the paper: Analyze Gauss (MOD-SuLQ's input perturbation, calibrated by "
        "fedpca) beats DPS-PCA (PLD) at every point: "
        f"{HOLDS[found['analyze_gauss_beats_dps_pld_everywhere']]}."
        + (f" With n = {m.samples} records and these large deltas one well-calibrated "
           "release of the d x d matrix carries little noise: where MOD-SuLQ fails, its "
           "published beta fails, not its mechanism."
           if found["analyze_gauss_beats_dps_pld_everywhere"] else ""),
        DIFFERENCES_NOTE,
    ])
    return ExperimentOutput(
        name=name,
        data={"experiment": name,
              "setting": {**setting_record(m, seed, setting.dims), "delta": setting.delta,
                          "epsilons": list(setting.epsilons)},
              "labels": METHOD_LABELS, "x": x, "methods": methods,
              "random_subspace": random_level, "noise_multiplier": multipliers,
              "findings": found},
        markdown=markdown,
        figures={f"{name}.png": fig4_figure(
            title, x, "epsilon" if swept == "epsilon" else "dimension d", methods,
            random_level)},
    )


@experiment("dps-pca-fig4a", "DPS-PCA (paper 000 Fig. 4a): error vs eps, DPS-PCA/PPCA/MOD-SuLQ")
def dps_pca_fig4a(out: Path, quick: bool, seed: int) -> ExperimentOutput:
    """Paper 000 Fig. 4a at d = 1000, delta = 0.3 (Sec. 5.2.1)."""
    setting = FIG4A_QUICK if quick else FIG4A
    return fig4_experiment(
        "dps-pca-fig4a", f"DPS-PCA vs PPCA vs MOD-SuLQ: paper 000 Fig. 4a (d = "
        f"{setting.dims[0]})", setting, seed, "epsilon",
        "* MOD-SuLQ cannot estimate the leading eigenvectors at d = 1000 (its noise grows "
        "like d log d): compare its row with the random-subspace level.")


@experiment("dps-pca-fig4b", "DPS-PCA (paper 000 Fig. 4b): error vs d in 40..160, eps=1")
def dps_pca_fig4b(out: Path, quick: bool, seed: int) -> ExperimentOutput:
    """Paper 000 Fig. 4b: n = 1e5, k = 3, s = 10, eps = 1, delta = 0.1."""
    setting = FIG4B_QUICK if quick else FIG4B
    return fig4_experiment(
        "dps-pca-fig4b", "DPS-PCA vs PPCA vs MOD-SuLQ over d: paper 000 Fig. 4b", setting,
        seed, "dim",
        "* MOD-SuLQ and PPCA perform reasonably in low dimension and MOD-SuLQ deteriorates "
        "quickly as d grows: compare the first and last rows.")

"""MOD-SuLQ and PPCA (paper 001: Chaudhuri, Sarwate, Sinha, NIPS 2012): Fig. 2 and Table 1.

* ``ppca-fig2``: the captured energy ``q_F(V) = tr(V^T A V)`` against alpha on the paper's
  synthetic set: ``n = 5000`` rows of ``N(0, diag(lambda))`` in ``d = 10`` with
  ``lambda = {0.5, 0.30, 0.04, 0.03, 0.02, 0.01, 0.004, 0.003, 0.001, 0.001}``, ``k = 2``,
  MOD-SuLQ with ``delta = 0.05``, PPCA with its alpha, non-private PCA and a random subspace.
* ``ppca-table1``: the paper's classification idea (its Table 1) on the offline real data
  sets: a linear classifier trained on records projected onto each method's ``V``.

Every private method runs on rows of norm ``<= 1``: the synthetic rows are divided by a
public constant computed from the model (:func:`fedpca.data.synthetic.public_row_scale`),
the real data sets come scaled by public constants (:func:`fedpca.data.datasets.load_dataset`).
The paper assumes ``||x|| <= 1`` but draws Gaussian rows without bounding them. Methods and
calibrations: :mod:`fedpca.experiments.central_methods` (MOD-SuLQ with its paper's beta;
Analyze Gauss, the same input perturbation with fedpca's PLD calibration and the corrected
``sqrt(2)`` sensitivity; PPCA with ``alpha = eps``, Gibbs sampler for ``k > 1``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from fedpca.algorithms.central import mod_sulq_beta
from fedpca.algorithms.ppca import DEFAULT_BURN_IN
from fedpca.data.datasets import load_dataset
from fedpca.data.synthetic import public_row_scale
from fedpca.experiments.central_methods import (
    CENTRAL_LABELS,
    central_bases,
    random_subspace_energy,
)
from fedpca.experiments.output import ExperimentOutput, markdown_document, markdown_table
from fedpca.experiments.progress import progress
from fedpca.experiments.registry import experiment
from fedpca.experiments.sweeps import (
    empty_runs,
    mean_std_table,
    plot_methods,
    summarize,
)
from fedpca.linalg.subspace import (
    captured_energy,
    energy_ratio,
    random_subspaces,
    top_eigenvectors,
)

#: Stream keys of the experiments' own randomness (data, record permutations, random frames).
DATA_STREAM = 0xF162
SPLIT_STREAM = 0x7AB1
RANDOM_FRAME_STREAM = 0x2A4D

#: The non-private and data-independent levels the private methods are compared with.
REFERENCE_LABELS = {"nonprivate": "non-private PCA", "random": "random subspace"}

SANITY_NOTE = """\
* **Row bound.** The paper's analysis assumes `||x|| <= 1` and its experiments do not say
  how it is enforced; fedpca scales every row by a public constant first (a private method
  on unbounded rows has no guarantee). That shrinks the data's energy, so at the same alpha
  our private methods see a weaker signal than an unscaled run would.
* **MOD-SuLQ's calibration.** Its beta is the paper's (Theorem 1), kept as published for
  the reproduction; fedpca adds Analyze Gauss, the same release calibrated by the PLD
  accountant for the replace-one sensitivity `sqrt(2)`. The exact epsilon of the paper's
  beta is well below alpha (its beta grows like `(d + 1)/alpha`; it is conservative), which
  is why Analyze Gauss needs far less noise at the same (eps, delta).
* **Gibbs sampling.** For `k > 1` PPCA's frame is the state of Hoff's Gibbs sampler after
  {burn_in} sweeps from a random frame: alpha-DP only in the limit of exact sampling (the
  paper uses the same sampler and says so).
"""


# ---------------------------------------------------------------- ppca-fig2

#: Paper 001 Sec. 4's covariance eigenvalues (largest first).
FIG2_EIGENVALUES = (0.5, 0.30, 0.04, 0.03, 0.02, 0.01, 0.004, 0.003, 0.001, 0.001)


@dataclass(frozen=True)
class Fig2Setting:
    """Fig. 2's synthetic set and sweep.

    Attributes:
        samples, k: ``n`` and ``k``.
        delta: MOD-SuLQ's (and Analyze Gauss's) delta.
        alphas: the privacy levels swept (every method's eps; the paper's axis is unreadable).
        draws: private draws per alpha on the one data set (the paper: 100).
        burn_in: PPCA's Gibbs sweeps before its release.
        norm_sigmas: the public row scale allows this many standard deviations of ``||x||^2``.
    """

    samples: int = 5000
    k: int = 2
    delta: float = 0.05
    alphas: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
    draws: int = 50
    burn_in: int = DEFAULT_BURN_IN
    norm_sigmas: float = 6.0

    @property
    def row_scale(self) -> float:
        """The public constant every row is divided by (from the eigenvalues alone)."""
        return public_row_scale(np.array(FIG2_EIGENVALUES), self.norm_sigmas)

    def data(self, seed: int) -> np.ndarray:
        """``n`` rows of ``N(0, diag(lambda))`` divided by :attr:`row_scale`."""
        rng = np.random.default_rng([seed, DATA_STREAM])
        lam = np.array(FIG2_EIGENVALUES)
        return rng.standard_normal((self.samples, lam.size)) * np.sqrt(lam) / self.row_scale


#: Two means of q_F closer than this fraction of the non-private q_F count as a tie.
TIE_FRACTION = 0.01

FIG2 = Fig2Setting()
FIG2_QUICK = replace(FIG2, alphas=(0.05, 1.0, 10.0), draws=3, burn_in=20)


def fig2_runs(setting: Fig2Setting, seed: int) -> dict[str, Any]:
    """``q_F`` of every private method at every alpha (in the unscaled data's units, i.e.
    ``row_scale^2`` times the scaled data's), with the non-private and random levels."""
    X = setting.data(seed)
    A = setting.row_scale**2 * (X.T @ X) / X.shape[0]
    runs = empty_runs(CENTRAL_LABELS, len(setting.alphas))
    jobs = [(i, draw) for i in range(len(setting.alphas)) for draw in range(setting.draws)]
    for i, draw in progress(jobs, "ppca-fig2"):
        bases = central_bases(X, setting.k, setting.alphas[i], setting.delta, seed + draw,
                              setting.burn_in)
        for key, V in bases.items():
            runs[key][i].append(captured_energy(V, A))
    return {
        "methods": {key: summarize(r) for key, r in runs.items()},
        "nonprivate": captured_energy(top_eigenvectors(A, setting.k), A),
        "random": random_subspace_energy(A, setting.k),
        "trace": float(np.trace(A)),
    }


def fig2_figure(setting: Fig2Setting, runs: dict[str, Any]) -> plt.Figure:
    """``q_F`` against alpha (log scale), with the non-private and random levels."""
    fig, ax = plt.subplots(figsize=(8, 5))
    plot_methods(ax, setting.alphas, runs["methods"], CENTRAL_LABELS,
                 {"analyze_gauss": {"linestyle": "--"}})
    ax.axhline(runs["nonprivate"], color="black", linestyle="-.", label="non-private PCA")
    ax.axhline(runs["random"], color="gray", linestyle=":", label="random subspace (expected)")
    ax.set_xscale("log")
    ax.set_xticks(setting.alphas, [f"{a:g}" for a in setting.alphas])
    ax.minorticks_off()
    ax.set_xlabel("alpha (= eps)")
    ax.set_ylabel("q_F(V) = tr(V^T A V), unscaled data")
    ax.set_ylim(0, 1.05 * runs["nonprivate"])
    ax.set_title(f"Paper 001 Fig. 2: n = {setting.samples}, d = {len(FIG2_EIGENVALUES)}, "
                 f"k = {setting.k}, delta = {setting.delta:g}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def fig2_findings(setting: Fig2Setting, runs: dict[str, Any]) -> dict[str, Any]:
    """The paper's claims on our means: both approach non-private PCA as alpha grows; PPCA
    captures most of the utility at moderate alpha where MOD-SuLQ lags far behind."""
    mean = {key: np.array(s["mean"]) for key, s in runs["methods"].items()}
    useful = runs["random"] + 0.9 * (runs["nonprivate"] - runs["random"])

    def first_alpha(key: str) -> float | None:
        above = np.flatnonzero(mean[key] >= useful)
        return float(setting.alphas[above[0]]) if above.size else None

    tolerance = TIE_FRACTION * runs["nonprivate"]
    return {
        "ppca_at_least_mod_sulq_everywhere": bool(
            (mean["ppca"] >= mean["mod_sulq"] - tolerance).all()),
        "largest_gap_ppca_minus_mod_sulq": float((mean["ppca"] - mean["mod_sulq"]).max()),
        "alpha_of_largest_gap": float(setting.alphas[int(np.argmax(mean["ppca"]
                                                                  - mean["mod_sulq"]))]),
        "analyze_gauss_minus_ppca_at_smallest_alpha": float(
            mean["analyze_gauss"][0] - mean["ppca"][0]),
        "final_fraction_of_nonprivate": {key: float(m[-1] / runs["nonprivate"])
                                         for key, m in mean.items()},
        "first_alpha_with_90_percent": {key: first_alpha(key) for key in mean},
    }


def fig2_markdown(setting: Fig2Setting, runs: dict[str, Any], found: dict[str, Any],
                  seed: int) -> str:
    """Table, the paper's claims on our numbers and the differences."""
    first = found["first_alpha_with_90_percent"]
    final = found["final_fraction_of_nonprivate"]
    n, d = setting.samples, len(FIG2_EIGENVALUES)
    betas = [mod_sulq_beta(d, n, a, setting.delta) for a in setting.alphas]
    return markdown_document([
        "# MOD-SuLQ vs PPCA: paper 001 Fig. 2 (captured energy vs alpha)",
        f"`fedpca experiment ppca-fig2`: one data set of n = {n} rows of N(0, diag(lambda)), "
        f"d = {d}, lambda = {list(FIG2_EIGENVALUES)}, k = {setting.k}, delta = "
        f"{setting.delta:g}; rows divided by the public constant {setting.row_scale:.3f} "
        f"(model only) so ||x|| <= 1; mean ± std of q_F over {setting.draws} draws per "
        f"alpha (the paper: 100), data seed {seed}. q_F is reported on the *unscaled* data "
        f"(row_scale^2 times the scaled data's), the paper's units. PPCA: {setting.burn_in} "
        "Gibbs sweeps.",
        "![ppca-fig2](ppca-fig2.png)",
        mean_std_table("alpha", setting.alphas, runs["methods"], CENTRAL_LABELS),
        f"Non-private PCA: q_F = {runs['nonprivate']:.4f}; random subspace (expected, "
        f"k/d tr A): {runs['random']:.4f}; tr A = {runs['trace']:.4f}. MOD-SuLQ's beta "
        "(on the scaled data): " + ", ".join(f"{b:.3g}" for b in betas) + " (same alphas).",
        "## The paper's numbers\n\n"
        "Fig. 2 is a plot only: the text extraction keeps neither its curves nor its axis "
        "values, so no number of the paper can be set beside ours. Its claims, checked on "
        "ours:\n\n"
        "* \"As alpha increases, both MOD-SuLQ and PPCA approach the utility of PCA without "
        f"privacy constraints\": at alpha = {setting.alphas[-1]:g}, PPCA captures "
        f"{100 * final['ppca']:.1f}% and MOD-SuLQ {100 * final['mod_sulq']:.1f}% of the "
        "non-private q_F.\n"
        "* \"For moderate alpha the PPCA still captures most of the utility, whereas the gap "
        "between MOD-SuLQ and PPCA becomes quite large\": PPCA first reaches 90% of the way "
        f"from the random level to the non-private one at alpha = {first['ppca']}, MOD-SuLQ "
        f"at {first['mod_sulq']} (Analyze Gauss at {first['analyze_gauss']}); the largest "
        f"gap PPCA - MOD-SuLQ is {found['largest_gap_ppca_minus_mod_sulq']:.3f} at alpha = "
        f"{found['alpha_of_largest_gap']:g}; PPCA >= MOD-SuLQ at every alpha (ties within "
        f"{100 * TIE_FRACTION:g}% of the non-private q_F allowed): "
        f"{found['ppca_at_least_mod_sulq_everywhere']}.\n"
        f"* Not in the paper: delta = {setting.delta:g} is far above 1/n = "
        f"{1 / setting.samples:.0e}; at alpha = {setting.alphas[0]:g} Analyze Gauss, an "
        "(eps, delta) method with that delta, captures "
        f"{found['analyze_gauss_minus_ppca_at_smallest_alpha']:+.3f} more than the pure "
        "(delta = 0) PPCA.",
        "## Why our numbers differ from the paper's",
        SANITY_NOTE.format(burn_in=setting.burn_in)
        + "* **Data.** The paper gives only the eigenvalues; fedpca uses the axis-aligned "
          "covariance `diag(lambda)` (every method here is rotation-equivariant up to the "
          "noise's law) and its own draw of the 5000 rows.\n"
          f"* **Scale of alpha.** Rows divided by {setting.row_scale:.3f} put the data's "
          f"energy {setting.row_scale**2:.2f} times lower: our curves sit about that factor "
          "to the right of curves computed on unscaled (and unbounded) rows.",
    ])


@experiment("ppca-fig2", "PPCA/MOD-SuLQ (paper 001 Fig. 2): q_F vs alpha, n=5000, d=10, k=2")
def ppca_fig2(out: Path, quick: bool, seed: int) -> ExperimentOutput:
    """Paper 001 Fig. 2, with Analyze Gauss as MOD-SuLQ's PLD-calibrated counterpart."""
    setting = FIG2_QUICK if quick else FIG2
    runs = fig2_runs(setting, seed)
    found = fig2_findings(setting, runs)
    return ExperimentOutput(
        name="ppca-fig2",
        data={"experiment": "ppca-fig2",
              "setting": {**asdict(setting), "eigenvalues": list(FIG2_EIGENVALUES),
                          "row_scale": setting.row_scale, "seed": seed,
                          "q_f_units": "unscaled data (row_scale^2 x scaled)"},
              "labels": {**CENTRAL_LABELS, **REFERENCE_LABELS}, **runs, "findings": found},
        markdown=fig2_markdown(setting, runs, found, seed),
        figures={"ppca-fig2.png": fig2_figure(setting, runs)},
    )


# ---------------------------------------------------------------- ppca-table1

#: Paper 001 Table 1 (alpha = 0.1, delta = 0.01, linear SVM): accuracy in % as
#: ``(non-private, PPCA, MOD-SuLQ, random)``, mean ± std.
PAPER_TABLE1 = {
    "KDDCUP (k = 4)": ("98.97 ± 0.05", "98.95 ± 0.05", "98.18 ± 0.65", "98.23 ± 0.49"),
    "LOCALIZATION (k = 10)": ("100 ± 0", "100 ± 0", "97.06 ± 2.17", "96.28 ± 2.34"),
}
TABLE1_METHODS = {"nonprivate": "non-private PCA", **CENTRAL_LABELS, "random": "random subspace"}


@dataclass(frozen=True)
class Table1Setting:
    """The classification protocol.

    Attributes:
        datasets: ``(name, k)`` pairs; ``k`` is fixed in advance (a public choice).
        epsilons: every private method's eps (PPCA's alpha).
        delta: MOD-SuLQ's and Analyze Gauss's delta (the paper's 0.01).
        splits: random permutations of the records (the paper: 5).
        train_fraction: share of the classification half used for training.
        burn_in: PPCA's Gibbs sweeps.
    """

    datasets: tuple[tuple[str, int], ...] = (("digits", 10), ("breast-cancer", 5),
                                             ("mnist", 10))
    epsilons: tuple[float, ...] = (0.1, 1.0, 10.0)
    delta: float = 0.01
    splits: int = 5
    train_fraction: float = 0.5
    burn_in: int = DEFAULT_BURN_IN


TABLE1 = Table1Setting()
TABLE1_QUICK = replace(TABLE1, datasets=(("digits", 5), ("breast-cancer", 2)),
                       epsilons=(1.0,), splits=1, burn_in=20)


def projected_accuracy(V: np.ndarray, train: tuple[np.ndarray, np.ndarray],
                       test: tuple[np.ndarray, np.ndarray]) -> float:
    """Test accuracy of a logistic regression on the records projected onto ``V``
    (features standardised on the training records)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(train[0] @ V, train[1])
    return float(model.score(test[0] @ V, test[1]))


def split_records(n: int, train_fraction: float, seed: int) -> tuple[np.ndarray, ...]:
    """Index arrays ``(subspace, train, test)``: half the records compute the subspace, the
    other half is split into training and test records."""
    order = np.random.default_rng([seed, SPLIT_STREAM]).permutation(n)
    half = n // 2
    cut = half + int(train_fraction * (n - half))
    return order[:half], order[half:cut], order[cut:]


def dataset_runs(name: str, k: int, setting: Table1Setting, seed: int) -> dict[str, Any]:
    """Accuracy and ``q / q_o`` (on the subspace half) of every method, every eps, every split.

    ``runs[metric][method][i][j]``: eps ``i``, split ``j`` (the non-private and random
    subspaces do not depend on eps and are repeated).
    """
    dataset = load_dataset(name)
    runs = {metric: empty_runs(TABLE1_METHODS, len(setting.epsilons))
            for metric in ("accuracy", "energy_ratio")}
    for split in progress(range(setting.splits), f"ppca-table1: {name}"):
        fit, train, test = split_records(dataset.shape[0], setting.train_fraction, seed + split)
        X = dataset.X[fit]
        A = X.T @ X / X.shape[0]
        fixed = {"nonprivate": top_eigenvectors(A, k),
                 "random": random_subspaces(np.random.default_rng(
                     [seed + split, RANDOM_FRAME_STREAM]), dataset.shape[1], 1, k)[0]}
        for i, epsilon in enumerate(setting.epsilons):
            bases = fixed | central_bases(X, k, epsilon, setting.delta, seed + split,
                                          setting.burn_in)
            for key, V in bases.items():
                runs["accuracy"][key][i].append(projected_accuracy(
                    V, (dataset.X[train], dataset.y[train]), (dataset.X[test], dataset.y[test])))
                runs["energy_ratio"][key][i].append(energy_ratio(V, A))
    return {
        "k": k, "records": dataset.shape[0], "dim": dataset.shape[1],
        "classes": int(np.unique(dataset.y).size), "scaling": dataset.scaling,
        **{metric: {key: summarize(r) for key, r in by_method.items()}
           for metric, by_method in runs.items()},
    }


def table1_rows(setting: Table1Setting, results: dict[str, Any], metric: str) -> list[list]:
    """One row per (data set, eps): ``mean ± std`` of ``metric`` per method (in %)."""
    rows = []
    for name, result in results.items():
        for i, epsilon in enumerate(setting.epsilons):
            cells = [f"{100 * result[metric][key]['mean'][i]:.1f} ± "
                     f"{100 * result[metric][key]['std'][i]:.1f}" for key in TABLE1_METHODS]
            rows.append([f"{name} (k = {result['k']})", epsilon, *cells])
    return rows


def table1_figure(setting: Table1Setting, results: dict[str, Any]) -> plt.Figure:
    """Accuracy against eps per data set, with the non-private and random levels."""
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4.5), squeeze=False)
    for ax, (name, result) in zip(axes[0], results.items(), strict=True):
        plot_methods(ax, setting.epsilons, result["accuracy"], CENTRAL_LABELS,
                     {"analyze_gauss": {"linestyle": "--"}})
        for key, style in (("nonprivate", "-."), ("random", ":")):
            ax.axhline(result["accuracy"][key]["mean"][0], color="black" if key ==
                       "nonprivate" else "gray", linestyle=style, label=TABLE1_METHODS[key])
        ax.set_xscale("log")
        ax.set_xticks(setting.epsilons, [f"{e:g}" for e in setting.epsilons])
        ax.minorticks_off()
        ax.set_xlabel("eps (PPCA's alpha)")
        ax.set_title(f"{name}: k = {result['k']}, d = {result['dim']}, "
                     f"{result['classes']} classes")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy, logistic regression on V^T x")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=3,
               fontsize=9)
    fig.suptitle(f"Paper 001 Table 1 idea: classification after private PCA (delta = "
                 f"{setting.delta:g})")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def table1_findings(results: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Accuracy gaps (percentage points, per eps) behind the paper's pattern: PPCA close to
    non-private PCA, MOD-SuLQ close to a random projection."""

    def gap(result: dict[str, Any], high: str, low: str) -> list[float]:
        return [100 * (a - b) for a, b in zip(result["accuracy"][high]["mean"],
                                              result["accuracy"][low]["mean"], strict=True)]

    return {name: {"nonprivate_minus_ppca": gap(result, "nonprivate", "ppca"),
                   "ppca_minus_mod_sulq": gap(result, "ppca", "mod_sulq"),
                   "mod_sulq_minus_random": gap(result, "mod_sulq", "random")}
            for name, result in results.items()}


TABLE1_PROTOCOL = """\
Protocol (the paper's, adapted to small data sets): per split, a random half of the records
computes each subspace (the only private step); the other half is projected onto it and
split {train:.0%} / {test:.0%} into training and test records (the paper trains on 10%, which
is too few for these sizes) for a logistic regression on standardised projections (the
paper: a linear SVM). The classifier and the labels are not private: only the subspace is.
k is fixed per data set in advance (the paper picks it from the non-private spectrum).
"""


def table1_markdown(setting: Table1Setting, results: dict[str, Any],
                    found: dict[str, dict[str, list[float]]], seed: int) -> str:
    """Our accuracy and q/q_o tables beside the paper's Table 1."""
    header = ["data set", "eps", *TABLE1_METHODS.values()]
    gaps = "\n".join(
        f"* {name} (eps = {', '.join(f'{e:g}' for e in setting.epsilons)}): "
        + "; ".join(f"{key.replace('_minus_', ' - ').replace('_', '-')} "
                    + ", ".join(f"{v:+.1f}" for v in values) for key, values in gaps.items())
        for name, gaps in found.items())
    paper_rows = [[name, *values] for name, values in PAPER_TABLE1.items()]
    data = "; ".join(f"{name}: {r['records']} records, d = {r['dim']}, {r['scaling']}"
                     for name, r in results.items())
    return markdown_document([
        "# Classification after private PCA: paper 001 Table 1",
        f"`fedpca experiment ppca-table1`: accuracy (%) of a linear classifier on records "
        f"projected onto each method's k-dimensional subspace, mean ± std over "
        f"{setting.splits} random split(s) (seed {seed}); delta = {setting.delta:g} for "
        f"MOD-SuLQ and Analyze Gauss; PPCA {setting.burn_in} Gibbs sweeps.",
        TABLE1_PROTOCOL.format(train=setting.train_fraction, test=1 - setting.train_fraction),
        "![ppca-table1](ppca-table1.png)",
        "## Accuracy (%)",
        markdown_table(header, table1_rows(setting, results, "accuracy")),
        "## q / q_o on the subspace half (%)",
        markdown_table(header, table1_rows(setting, results, "energy_ratio")),
        "## The paper's Table 1 (alpha = 0.1, delta = 0.01, accuracy %)",
        markdown_table(["data set", "non-private PCA", "PPCA", "MOD-SuLQ",
                        "random projections"], paper_rows),
        "The paper's data sets (kddcup99, localization; n of 10^5 records) are not available "
        "offline, so only the pattern can be compared: there, PPCA matches non-private PCA "
        "and MOD-SuLQ is no better than a random projection at alpha = 0.1. Here the "
        "subspace halves are far smaller (" + data + "), so a private method needs a "
        "larger eps for the same signal-to-noise ratio (the exponent of PPCA and the noise "
        "of MOD-SuLQ scale with n alpha). Our accuracy gaps in percentage points (the paper, "
        "KDDCUP and LOCALIZATION at alpha = 0.1: non-private - PPCA 0.02 and 0; PPCA - "
        "MOD-SuLQ 0.77 and 2.94; "
        "MOD-SuLQ - random -0.05 and 0.78):",
        gaps,
        "## Why our numbers differ from the paper's",
        SANITY_NOTE.format(burn_in=setting.burn_in),
    ])


@experiment("ppca-table1", "PPCA/MOD-SuLQ (paper 001 Table 1): classification after private PCA")
def ppca_table1(out: Path, quick: bool, seed: int) -> ExperimentOutput:
    """Paper 001 Table 1's idea on digits, breast-cancer and the MNIST subset."""
    setting = TABLE1_QUICK if quick else TABLE1
    results = {name: dataset_runs(name, k, setting, seed) for name, k in setting.datasets}
    found = table1_findings(results)
    return ExperimentOutput(
        name="ppca-table1",
        data={"experiment": "ppca-table1", "setting": {**asdict(setting), "seed": seed},
              "labels": TABLE1_METHODS, "datasets": results, "findings": found,
              "paper": {"alpha": 0.1, "delta": 0.01, "accuracy_percent": PAPER_TABLE1}},
        markdown=table1_markdown(setting, results, found, seed),
        figures={"ppca-table1.png": table1_figure(setting, results)},
    )

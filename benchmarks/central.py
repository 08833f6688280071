"""(f) Central baselines: PPCA's Gibbs sampler, and paper 000's Table 1 as ratios to DPS-PCA.

* **PPCA sampler**: 100 Gibbs sweeps of :func:`fedpca.linalg.matrix_bingham.sample_matrix_bingham`
  at d = 200, k = 5, on ``B = (alpha/2) X^T X`` of 1e5 rows of paper 000's model (alpha = 1;
  the eigendecomposition of B is included, forming ``X^T X`` is not), CPU seconds
  (``time.process_time``), median of the repetitions after one warm-up. Paper 000 reports
  9.82 s for the same count with R's ``rstiefel``. The end-to-end ``run_ppca`` time (with
  ``X^T X``) comes from the Table 1 rows.
* **Table 1**: :func:`fedpca.experiments.paper000_table1.table1_runs`, the same code as
  ``fedpca experiment dps-pca-table1``: CPU seconds of DPS-PCA (T = 10, PLD), MOD-SuLQ and
  PPCA (100 sweeps) from the raw records (n = 1e5, k = 5) at d = 200, 400, 800, interleaved
  in one run, median of the repeats, and their ratios to DPS-PCA beside the paper's.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from common import md_table, progress, target

from fedpca.experiments.paper000_table1 import (
    PAPER_DIMS,
    PAPER_TABLE1,
    TABLE1,
    TABLE1_QUICK,
    TIMING_LABELS,
    Table1Setting,
    ppca_sampler_seconds,
    table1_runs,
)

FULL = dict(sampler=dict(dim=200, k=5, samples=100_000, epsilon=1.0, sweeps=100,
                         repetitions=9),
            table1=TABLE1)
QUICK = dict(sampler=dict(FULL["sampler"], samples=5000, repetitions=3), table1=TABLE1_QUICK)
#: Target for 100 sweeps at d = 200, k = 5 (CPU seconds, median).
SAMPLER_LIMIT_S = 0.1
#: Paper 000 Table 1's PPCA time at d = 200 (100 sweeps, R's rstiefel).
PAPER_SAMPLER_S = PAPER_TABLE1["ppca"][0]
SEED = 0


def sampler_row(dim: int, k: int, samples: int, epsilon: float, sweeps: int,
                repetitions: int) -> dict[str, Any]:
    """CPU seconds of ``sweeps`` Gibbs sweeps, one warm-up then ``repetitions`` timed."""
    X, _ = replace(TABLE1.model, dim=dim, k=k, samples=samples).data(SEED)
    ppca_sampler_seconds(X, k, epsilon, sweeps, SEED)
    runs = [ppca_sampler_seconds(X, k, epsilon, sweeps, SEED + 1 + i)
            for i in range(repetitions)]
    return {"kind": "sampler", "dim": dim, "k": k, "samples": samples, "epsilon": epsilon,
            "sweeps": sweeps, "repetitions": repetitions, "runs_s": runs,
            "median_s": statistics.median(runs), "min_s": min(runs),
            "paper_s": PAPER_SAMPLER_S}


def table1_rows(setting: Table1Setting) -> list[dict[str, Any]]:
    """One row per d: every method's median CPU seconds and ratio to DPS-PCA."""
    methods = table1_runs(setting, SEED)
    return [
        {"kind": "table1", "dim": dim, "samples": setting.model.samples, "k": setting.model.k,
         "sweeps": setting.sweeps, "repeats": setting.repeats,
         "median_s": {key: methods[key]["median"][i] for key in TIMING_LABELS},
         "ratio_to_dps_pca": {key: methods[key]["ratio_to_dps_pca"][i] for key in TIMING_LABELS},
         "paper_s": ({key: values[PAPER_DIMS.index(dim)]
                      for key, values in PAPER_TABLE1.items()} if dim in PAPER_DIMS
                     else None)}
        for i, dim in enumerate(setting.dims)
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    progress("central: PPCA sampler")
    rows = [sampler_row(**cfg["sampler"])]
    progress("central: paper 000 Table 1 (DPS-PCA, MOD-SuLQ, PPCA side by side)")
    return rows + table1_rows(cfg["table1"])


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    return [target(f"PPCA {r['sweeps']} Gibbs sweeps, d={r['dim']}, k={r['k']} (CPU s, median)",
                   r["median_s"], SAMPLER_LIMIT_S, measured=not quick)
            for r in rows if r["kind"] == "sampler"]


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    parts = []
    for r in (r for r in rows if r["kind"] == "sampler"):
        parts += [
            f"**PPCA sampler**: {r['sweeps']} Gibbs sweeps of `sample_matrix_bingham`, "
            f"d={r['dim']}, k={r['k']}, B = (alpha/2) X^T X from {r['samples']} rows of paper "
            f"000's model, alpha={r['epsilon']:g}; CPU seconds, median of "
            f"{r['repetitions']} after a warm-up (eigendecomposition of B included).",
            md_table(["median s", "min s", "paper 000 (R rstiefel) s", "paper / fedpca"],
                     [[r["median_s"], r["min_s"], r["paper_s"], r["paper_s"] / r["median_s"]]]),
        ]
    table = [r for r in rows if r["kind"] == "table1"]
    if table:
        header = ["d"] + [f"{label} s" for label in TIMING_LABELS.values()] + [
            f"{label} / DPS-PCA" for key, label in TIMING_LABELS.items() if key != "dps_pca"]
        paper_header = ["d"] + [f"paper {key} s" for key in PAPER_TABLE1] + [
            f"paper {key} / DPS-PCA" for key in PAPER_TABLE1 if key != "dps_pca"]
        parts += [
            f"**Paper 000 Table 1** (the `dps-pca-table1` experiment's code): CPU seconds of "
            f"each public API from the raw records, n={table[0]['samples']}, k={table[0]['k']}, "
            f"PPCA {table[0]['sweeps']} sweeps, median of {table[0]['repeats']} interleaved "
            "repeats; ratios to DPS-PCA measured side by side.",
            md_table(header, [[r["dim"]] + [r["median_s"][key] for key in TIMING_LABELS]
                              + [r["ratio_to_dps_pca"][key] for key in TIMING_LABELS
                                 if key != "dps_pca"] for r in table]),
            "The paper's (R, Intel Xeon 3.4 GHz; DPS-PCA \"<1ms\" entered as 0.001, so its "
            "ratios are lower bounds):",
            md_table(paper_header, [
                [r["dim"]] + [r["paper_s"][key] for key in PAPER_TABLE1]
                + [r["paper_s"][key] / r["paper_s"]["dps_pca"] for key in PAPER_TABLE1
                   if key != "dps_pca"]
                for r in table if r["paper_s"] is not None]),
        ]
    return "\n\n".join(parts)

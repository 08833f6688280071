"""Secure aggregation with the distributed discrete Gaussian (issue 13): do the secure modes
reach the trusted-curator accuracy that per-site noise loses?

    OPENBLAS_NUM_THREADS=1 python benchmarks/secure_ddg.py [--quick]

**DPS-PCA** at the paper-000 setting (sparse spiked model, d=1000, n=1e5, k=5, s=10,
s_hat=50, T=10, eps=2, delta=0.01): one site holding all records, 100 sites with per-site
noise, and 100 sites with discrete noise (``DPSPCAPolicy(discrete=True, secure_min_sites=100)``),
mean distance to the true eigenspace over the seeds. Target: discrete <= 1.1 x one site.

**DPdisPCA**, for each data set, side by side with the same seeds: central Analyze Gauss on the pooled
records (a trusted curator), DPdisPCA ``secure-sum`` (every site sends a discrete Gaussian
message of ``X_s^T X_s``; ``M`` = all sites), and DPdisPCA with per-site noise (``full``
variant, sample weighting: the best per-site-noise merge). Captured energy ``q/q_o`` of the
pooled second moment and, on the synthetic model, the distance to the true eigenspace.
Target: central energy / secure energy <= 1.1.

Data: the paper-000 setting (sparse spiked model, d=1000, n=1e5, k=5, s=10; eps=2,
delta=0.01) over 100 sites, and MNIST's offline 5000 x 784 subset over 100 sites. Writes
``benchmarks/results/secure_ddg.{json,md}``; ``--quick`` shrinks d and n and writes
``secure_ddg.quick.*``.
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import machine_info, md_table, progress  # noqa: E402

from fedpca.algorithms.central import run_analyze_gauss  # noqa: E402
from fedpca.algorithms.dpdis_pca import (  # noqa: E402
    VARIANT_FULL,
    VARIANT_SECURE,
    DPdisPCAPolicy,
    pooled_second_moment,
    run_dpdis_pca,
)
from fedpca.algorithms.dps_pca import DPSPCAPolicy, run_dps_pca  # noqa: E402
from fedpca.data.federated import dataset_site  # noqa: E402
from fedpca.data.synthetic import SparseSpikedModel, site_data  # noqa: E402
from fedpca.linalg.subspace import energy_ratio, subspace_distance  # noqa: E402

RATIO_LIMIT = 1.1
FULL = {"synthetic": dict(dim=1000, samples=100_000, k=5, sparsity=10), "sites": 100,
        "epsilon": 2.0, "delta": 0.01, "seeds": (0, 1), "dataset": "mnist", "s_hat": 50,
        "rounds": 10, "dps_seeds": (0, 1, 2)}
QUICK = {**FULL, "synthetic": dict(dim=100, samples=10_000, k=5, sparsity=10), "sites": 20,
         "seeds": (0,), "dataset": "digits", "s_hat": 20, "rounds": 3, "dps_seeds": (0,)}


def dps_rows(cfg: dict) -> list[dict[str, Any]]:
    """DPS-PCA: one site, per-site noise and discrete noise over ``sites`` sites."""
    s = cfg["synthetic"]
    model = SparseSpikedModel(dim=s["dim"], k=s["k"], sparsity=s["sparsity"], seed=0)
    base = dict(epsilon=cfg["epsilon"], delta=cfg["delta"], rounds=cfg["rounds"])
    setups = (("one site", 1, DPSPCAPolicy(**base)),
              ("per-site noise", cfg["sites"], DPSPCAPolicy(**base)),
              ("discrete secure sum", cfg["sites"],
               DPSPCAPolicy(**base, secure_min_sites=cfg["sites"], discrete=True)))
    rows = []
    for label, count, policy in setups:
        sites = [site_data(model, s["samples"], count, i) for i in range(count)]
        for seed in cfg["dps_seeds"]:
            progress(f"DPS-PCA {label}, seed {seed}")
            start = time.perf_counter()
            result = run_dps_pca(sites, s["k"], cfg["s_hat"], policy, seed=seed)
            rows.append({"method": label, "sites": count, "seed": seed,
                         "distance": subspace_distance(result.basis, model.truth),
                         "seconds": time.perf_counter() - start,
                         "epsilon_spent": result.history[-1]["epsilon_spent"]})
    return rows


def dps_summary(rows: list[dict]) -> dict[str, Any]:
    mean = {m: float(np.mean([r["distance"] for r in rows if r["method"] == m]))
            for m in dict.fromkeys(r["method"] for r in rows)}
    ratio = mean["discrete secure sum"] / mean["one site"]
    return {**mean, "discrete_over_one_site": ratio, "passed": ratio <= RATIO_LIMIT}


def data_sets(cfg: dict) -> dict[str, tuple[list[np.ndarray], np.ndarray | None, int]]:
    """name -> (site arrays, true basis or None, k)."""
    s = cfg["synthetic"]
    model = SparseSpikedModel(dim=s["dim"], k=s["k"], sparsity=s["sparsity"], seed=0)
    synthetic = [site_data(model, s["samples"], cfg["sites"], i) for i in range(cfg["sites"])]
    real = [dataset_site(cfg["dataset"], cfg["sites"], i, seed=0).X for i in range(cfg["sites"])]
    return {"synthetic (paper 000)": (synthetic, model.truth, s["k"]),
            cfg["dataset"]: (real, None, s["k"])}


def run_one(sites: list[np.ndarray], truth: np.ndarray | None, k: int, cfg: dict,
            seed: int) -> list[dict[str, Any]]:
    """The three methods on one data set and seed."""
    eps, delta, pooled = cfg["epsilon"], cfg["delta"], pooled_second_moment(sites)
    rows = []

    def row(method: str, basis: np.ndarray, seconds: float, extra: dict | None = None) -> None:
        rows.append({"method": method, "seed": seed, "energy_ratio": energy_ratio(basis, pooled),
                     "distance": None if truth is None else subspace_distance(basis, truth),
                     "seconds": seconds, **(extra or {})})

    start = time.perf_counter()
    central = run_analyze_gauss(np.vstack(sites), k, eps, delta, seed=seed)
    row("central Analyze Gauss", central.basis, time.perf_counter() - start,
        {"sigma": central.privacy["sigma"]})
    start = time.perf_counter()
    secure = run_dpdis_pca(sites, k, seed=seed, variant=VARIANT_SECURE, policy=DPdisPCAPolicy(
        epsilon=eps, delta=delta, secure_min_sites=len(sites)))
    row("DPdisPCA secure-sum (DDG)", secure.basis, time.perf_counter() - start,
        {"sigma": secure.privacy["central_sigma"], "draws": secure.privacy["draws_per_site"],
         "inflation": secure.privacy["grid_sensitivity"] * secure.privacy["grid_step"]
         / secure.privacy["sensitivity"] - 1, "epsilon_achieved":
         secure.privacy["epsilon_achieved"], "bytes_per_site": secure.config["bytes_per_site"]})
    start = time.perf_counter()
    per_site = run_dpdis_pca(sites, k, seed=seed, variant=VARIANT_FULL, weighting="samples",
                             policy=DPdisPCAPolicy(epsilon=eps, delta=delta))
    row("DPdisPCA per-site noise", per_site.basis, time.perf_counter() - start)
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    """Per data set: mean energy of each method and the secure / central ratio."""
    out = []
    for name in dict.fromkeys(r["data"] for r in rows):
        mean = {m: float(np.mean([r["energy_ratio"] for r in rows
                                  if r["data"] == name and r["method"] == m]))
                for m in dict.fromkeys(r["method"] for r in rows)}
        ratio = mean["central Analyze Gauss"] / mean["DPdisPCA secure-sum (DDG)"]
        out.append({"data": name, **mean, "central_over_secure": ratio,
                    "passed": ratio <= RATIO_LIMIT})
    return out


def markdown(doc: dict) -> str:
    m = doc["machine"]
    lines = [
        "# Secure aggregation with the distributed discrete Gaussian"
        + (" (quick mode)" if doc["quick"] else ""), "",
        f"Generated {m['date']} by `python benchmarks/secure_ddg.py"
        + (" --quick" if doc["quick"] else "") + f"` on {m['cores']} cores ({m['cpu']}).", "",
        f"{doc['sites']} sites, eps={doc['epsilon']}, delta={doc['delta']}; secure-sum: "
        "every site a discrete Gaussian message, M = all sites; per-site: DPdisPCA `full` "
        "variant with sample weights. Energy q/q_o of the pooled second moment (1 = "
        "non-private PCA).", "",
        "## DPS-PCA (paper 000 setting): target discrete / one site <= 1.1", "",
        md_table(["one site", "per-site noise", "discrete secure sum", "discrete/one site",
                  "result"],
                 [[doc["dps"]["one site"], doc["dps"]["per-site noise"],
                   doc["dps"]["discrete secure sum"], doc["dps"]["discrete_over_one_site"],
                   "PASS" if doc["dps"]["passed"] else "FAIL"]]), "",
        md_table(["method", "sites", "seed", "distance", "eps spent", "seconds"],
                 [[r["method"], r["sites"], r["seed"], r["distance"], r["epsilon_spent"],
                   r["seconds"]] for r in doc["dps_rows"]]), "",
        "## DPdisPCA: target central energy / secure energy <= 1.1", "",
        md_table(["data", "central AG", "secure-sum", "per-site noise", "central/secure",
                  "result"],
                 [[s["data"], s["central Analyze Gauss"], s["DPdisPCA secure-sum (DDG)"],
                   s["DPdisPCA per-site noise"], s["central_over_secure"],
                   "PASS" if s["passed"] else "FAIL"] for s in doc["summary"]]), "",
        "## Every run", "",
        md_table(["data", "method", "seed", "energy", "distance", "noise sd", "seconds"],
                 [[r["data"], r["method"], r["seed"], r["energy_ratio"], r["distance"],
                   r.get("sigma"), r["seconds"]] for r in doc["rows"]]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    dps = dps_rows(cfg)
    rows = []
    for name, (sites, truth, k) in data_sets(cfg).items():
        for seed in cfg["seeds"]:
            progress(f"{name}, seed {seed}: {len(sites)} sites, d={sites[0].shape[1]}")
            rows += [{"data": name, **r} for r in run_one(sites, truth, k, cfg, seed)]
    doc = {"machine": machine_info(), "quick": args.quick, "sites": cfg["sites"],
           "epsilon": cfg["epsilon"], "delta": cfg["delta"], "rows": rows,
           "summary": summarise(rows), "dps_rows": dps, "dps": dps_summary(dps)}
    stem = str(HERE / "results" / ("secure_ddg.quick" if args.quick else "secure_ddg"))
    Path(stem + ".json").write_text(json.dumps(doc, indent=2))
    Path(stem + ".md").write_text(markdown(doc))
    progress(f"wrote {stem}.json and .md")
    progress(f"DPS-PCA: discrete/one site {doc['dps']['discrete_over_one_site']:.3f}")
    for s in doc["summary"]:
        progress(f"{s['data']}: central/secure {s['central_over_secure']:.3f} "
                 f"({'PASS' if s['passed'] else 'FAIL'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

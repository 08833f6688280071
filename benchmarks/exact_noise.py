"""Exact noise at real sites (issue 24, item 6): what does an exact release cost beside the
float sampler?

    OPENBLAS_NUM_THREADS=1 python benchmarks/exact_noise.py [--quick]

One release's noise, float and exact side by side in one run, each timed as the site makes it
from its computed statistic: **float** ``statistic + sigma * standard_normal`` (DPS-PCA's
power step, :meth:`fedpca.dp.mechanisms.NoiseSource.gaussian`) and the symmetric
matrix of :meth:`~fedpca.dp.mechanisms.NoiseSource.symmetric` (Analyze Gauss, drawn in
row blocks and mirrored); **exact** :class:`fedpca.dp.exact_noise.ExactGaussian`: the
grid, the statistic rounded to it, exact discrete Gaussian noise
(:mod:`fedpca.dp.discrete_gaussian_fast`), grid points released. Cases: DPS-PCA power
steps ``d x k`` = 200 x 3 and 20,000 x 10 (noise multiplier of T = 10 rounds at eps = 1,
delta = 1e-5), Analyze Gauss ``d x d`` = 1,000 and 6,830 (one release at eps = 1, delta =
1e-5), and a site's whole power step (``X^T (X Q)`` of :data:`SITE_RECORDS` records, then
its noise) at both power-step shapes. Each figure is the best of ``repeats`` alternating
runs (the machine is shared).
Targets: exact <= 2x float for the power steps, <= 5x for the matrices.

If OpenDP (``opendp``) is importable, its exact discrete Gaussian
(``make_gaussian`` on integer vectors, the same noise in grid steps) is timed beside them on
at most :data:`OPENDP_DRAWS` values, scaled linearly to the case's size (it takes about
0.1 ms per draw); fedpca does not depend on it. Writes ``benchmarks/results/exact_noise.{json,md}``
(``--quick``: smaller shapes, ``exact_noise.quick.*``).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import machine_info, md_table, progress, quick_option  # noqa: E402

from fedpca.dp.calibration import calibrate_gaussian  # noqa: E402
from fedpca.dp.exact_noise import ExactGaussian, symmetric_coordinates  # noqa: E402
from fedpca.dp.mechanisms import (  # noqa: E402
    NoiseSource,
    power_step_sensitivity,
    upper_triangle_sensitivity,
)

EPSILON, DELTA, ROUNDS = 1.0, 1e-5, 10
LIMITS = {"power step": 2.0, "site power step": 2.0, "matrix": 5.0}
#: Records of the site whose whole power step is timed (as in benchmarks/site_round.py).
SITE_RECORDS = 2_000
FULL = {"power step": [(200, 3), (20_000, 10)], "matrix": [1_000, 6_830], "repeats": 7}
#: Most values OpenDP's sampler is timed on (once; the figure is scaled to the case).
OPENDP_DRAWS = 20_000
QUICK = {"power step": [(200, 3), (2_000, 10)], "matrix": [200, 500], "repeats": 2}


def best_of(repeats: int, runs: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Per name, the fastest of ``repeats`` calls, the names alternating (shared load)."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def opendp_seconds(sigma: int, draws: int) -> float | None:
    """Seconds OpenDP's exact discrete Gaussian would take for ``draws`` integers (timed on
    at most :data:`OPENDP_DRAWS`), or None when OpenDP is not importable."""
    size = min(draws, OPENDP_DRAWS)
    sampler = opendp_sampler(sigma, size)
    if sampler is None:
        return None
    start = time.perf_counter()
    sampler()
    return (time.perf_counter() - start) * draws / size


def opendp_sampler(sigma: int, size: int) -> Callable[[], Any] | None:
    """OpenDP's exact discrete Gaussian on ``size`` integers, if OpenDP is importable."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int), size), dp.l2_distance(T=int)
    measurement = dp.m.make_gaussian(*space, scale=float(sigma))
    values = [0] * size
    return lambda: measurement(values)


def power_case(d: int, k: int, repeats: int) -> dict[str, Any]:
    """DPS-PCA's power-step noise on a ``d x k`` statistic."""
    sensitivity = power_step_sensitivity(1.0)
    sigma = calibrate_gaussian(ROUNDS + 1, EPSILON, DELTA).sigma(sensitivity)
    statistic = np.random.default_rng(0).standard_normal((d, k))
    exact = ExactGaussian.for_release(sigma, sensitivity, d * k, 0.0)
    runs = {
        "float": lambda: statistic + NoiseSource().gaussian(0, sigma, (d, k)),
        "exact": lambda: exact.noisy(statistic, np.random.default_rng()),
    }
    return row("power step", f"DPS-PCA power step d={d}, k={k}", d * k, exact, runs, repeats)


def site_power_case(d: int, k: int, repeats: int, records: int) -> dict[str, Any]:
    """A site's whole DPS-PCA power step, ``X^T (X Q)`` for ``records`` records then its
    noise, float vs exact: what the exact sampler adds to the site's work."""
    rng = np.random.default_rng(0)
    records_ = rng.standard_normal((records, d)) / np.sqrt(d)
    basis = np.linalg.qr(rng.standard_normal((d, k)))[0]
    sensitivity = power_step_sensitivity(1.0)
    sigma = calibrate_gaussian(ROUNDS + 1, EPSILON, DELTA).sigma(sensitivity)
    exact = ExactGaussian.for_release(sigma, sensitivity, d * k, 0.0)

    def statistic() -> np.ndarray:
        return records_.T @ (records_ @ basis)

    runs = {
        "float": lambda: statistic() + NoiseSource().gaussian(0, sigma, (d, k)),
        "exact": lambda: exact.noisy(statistic(), np.random.default_rng()),
    }
    return row("site power step", f"site's power step n={records}, d={d}, k={k}", d * k,
               exact, runs, repeats)


def matrix_case(d: int, repeats: int) -> dict[str, Any]:
    """Analyze Gauss's symmetric noise on a ``d x d`` second moment."""
    sensitivity = upper_triangle_sensitivity(1.0)
    sigma = calibrate_gaussian(1, EPSILON, DELTA).sigma(sensitivity)
    statistic = np.random.default_rng(0).standard_normal((d, d))
    statistic += statistic.T
    exact = ExactGaussian.for_release(sigma, sensitivity, symmetric_coordinates(d), 0.0)
    runs = {
        "float": lambda: statistic + NoiseSource().symmetric(0, sigma, d),
        "exact": lambda: exact.noisy_symmetric(statistic, np.random.default_rng()),
    }
    return row("matrix", f"Analyze Gauss d={d}", symmetric_coordinates(d), exact, runs,
               repeats)


def row(kind: str, case: str, draws: int, exact: ExactGaussian,
        runs: dict[str, Callable[[], Any]], repeats: int) -> dict[str, Any]:
    progress(f"{case}: {draws} draws")
    best = best_of(repeats, runs)
    ratio = best["exact"] / best["float"]
    return {"kind": kind, "case": case, "draws": draws, "float_s": best["float"],
            "exact_s": best["exact"], "ratio": ratio, "limit": LIMITS[kind],
            "passed": ratio <= LIMITS[kind], "opendp_s": opendp_seconds(exact.sigma, draws),
            "exact_ns_per_draw": best["exact"] / draws * 1e9, **exact.record()}


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    return "\n".join([
        "# Exact noise at real sites: float vs exact" + (" (quick mode)" if doc["quick"]
                                                          else ""), "",
        f"Generated {m['date']} by `python benchmarks/exact_noise.py"
        + (" --quick" if doc["quick"] else "") + f"` on {m['cores']} cores ({m['cpu']}), "
        f"numpy {m['numpy']}; best of {doc['repeats']} alternating runs; load average "
        f"{doc['load_average'][0]:.1f} at the start, {doc['load_average'][1]:.1f} at the end "
        "(the machine is shared).", "",
        "One release's noise, from the computed statistic to the released values. Float: "
        "`statistic + sigma * standard_normal` (the matrix: drawn in row blocks, mirrored). "
        "Exact: rounded to the grid, plus exact discrete Gaussian noise (fedpca's numpy "
        "sampler), grid points released. The site's power step: the same, with the "
        f"statistic `X^T (X Q)` of {SITE_RECORDS} records computed inside the timing (what "
        "the exact sampler adds to a site's round). Targets: exact <= 2x float for the "
        "power steps, <= 5x for the matrices. OpenDP: its exact discrete Gaussian at the same scale, "
        f"timed once on at most {OPENDP_DRAWS} values and scaled to the case "
        "(\"-\": not installed).", "",
        md_table(["case", "noisy values", "float ms", "exact ms", "exact/float", "target",
                  "result", "OpenDP ms", "grid step", "sigma (steps)", "inflation"],
                 [[r["case"], r["draws"], 1e3 * r["float_s"], 1e3 * r["exact_s"],
                   r["ratio"], f"<= {r['limit']:g}x", "PASS" if r["passed"] else "FAIL",
                   None if r["opendp_s"] is None else 1e3 * r["opendp_s"], r["grid_step"],
                   r["grid_sigma"], r["sensitivity_inflation"]] for r in doc["rows"]]),
        "", "Inflation: how much the rounding to the grid adds to the sensitivity "
        "(`gamma sqrt(D) / Delta`); the noise grows by the same factor.", "",
    ])


def main() -> int:
    quick = quick_option(__doc__)
    cfg = QUICK if quick else FULL
    load = os.getloadavg()[0]
    rows = [power_case(d, k, cfg["repeats"]) for d, k in cfg["power step"]]
    rows += [site_power_case(d, k, cfg["repeats"], SITE_RECORDS) for d, k in cfg["power step"]]
    rows += [matrix_case(d, cfg["repeats"]) for d in cfg["matrix"]]
    doc = {"machine": machine_info(), "quick": quick, "repeats": cfg["repeats"], "rows": rows,
           "load_average": [load, os.getloadavg()[0]]}
    stem = str(HERE / "results" / ("exact_noise.quick" if quick else "exact_noise"))
    Path(stem + ".json").write_text(json.dumps(doc, indent=2))
    Path(stem + ".md").write_text(markdown(doc))
    for r in rows:
        progress(f"{r['case']}: exact/float {r['ratio']:.2f} "
                 f"({'PASS' if r['passed'] else 'FAIL'}, target <= {r['limit']:g}x)")
    progress(f"wrote {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

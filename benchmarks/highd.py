"""(h) Wide data (issue 14): top-k eigenvectors without d^3 work, dense vs iterative.

    python benchmarks/highd.py                 # ~15 min on 2 cores
    python benchmarks/highd.py --quick         # smoke test, small sizes, ~1 min
    python benchmarks/highd.py --threads 1     # only one BLAS thread (the suite's convention)
    python benchmarks/highd.py --dense-large   # also the dense path at d = 20000 (~10 GB, long)

Writes ``benchmarks/results/highd.json`` (every number) and the "High-dimensional data"
section of ``benchmarks/results/scale.md`` (other sections of that file are kept). ``--quick``
writes ``highd.quick.json`` and ``scale.quick.md`` instead.

* **Data**: a gene-expression-like table, made here (no download): ``r`` latent factors of
  decaying strength, sparse log-normal gene loadings (each gene on a factor with probability
  0.1), heteroscedastic per-gene noise, every row scaled to norm 1 (``data_norm = 1``):
  ``64 x 6830`` (the shape of the user's table, r = 8) and ``2000 x 20000`` (r = 20).
* **Methods**: ``NonPrivatePCA(k).fit``, ``AnalyzeGaussPCA(k).fit`` (eps = 1, delta = 1e-5),
  one DPdisPCA site's ``release("factor", R = 2k)`` (eps = 1, delta = 1e-5),
  ``run_dpdis_pca`` over 4 sites (the rows split in 4), and ``PPCA(k).fit`` (unchanged: its
  Gibbs sampler needs ``B``'s full eigendecomposition), all through the public API, from the
  raw records, with a fixed noise seed.
* **Solvers**: *dense* is the code path before issue 14 (noise drawn as four ``d x d``
  arrays by ``symmetric_gaussian``, the matrix formed, LAPACK ``eigh``); *iterative* is the
  library's rule (:func:`fedpca.linalg.subspace.eigensolver_for`: thin SVD of ``X`` for the
  non-private baseline, Lanczos on ``v -> X^T (X v) / divisor + E v`` with ``E`` drawn in
  blocks). With the same seed both see the same noisy matrix: the table gives the subspace
  distance between their outputs (for a DPdisPCA site, the relative gap between the two
  ``P_s P_s^T``).
* **Measure**: every run is its own process (``OPENBLAS_NUM_THREADS`` set per run): wall
  seconds of the call, the process's peak resident memory (``VmHWM``, which includes the
  interpreter, the imports and the data, listed as "before") and the Lanczos steps (from
  fedpca's debug log). Iterative runs: 3 per setting (1 at d = 20000), dense 1, interleaved
  (iterative, dense, iterative, iterative), median and min. The machine is a shared 2-core VM: compare the
  columns of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SEED = 1
EPSILON, DELTA = 1.0, 1e-5
#: Section markers in scale.md: only the text between them is rewritten.
BEGIN, END = "<!-- BEGIN highd (benchmarks/highd.py) -->", "<!-- END highd -->"
GIB = 2**30

FULL = dict(
    cases=[
        dict(name="wide", samples=64, dim=6830, k=3, factors=8,
             methods=["nonprivate", "analyze_gauss", "dpdis_site", "dpdis_4_sites", "ppca"]),
        dict(name="large", samples=2000, dim=20000, k=10, factors=20, methods=["dpdis_site"],
             repeats=1),
    ],
    repeats=3,
)
QUICK = dict(
    cases=[
        dict(name="wide", samples=32, dim=1500, k=3, factors=4,
             methods=["nonprivate", "analyze_gauss", "dpdis_site", "dpdis_4_sites"]),
        dict(name="large", samples=200, dim=2500, k=5, factors=6, methods=["dpdis_site"]),
    ],
    repeats=1,
)
#: Targets of issue 14 (wall seconds, and GiB for the large site), on this 2-core machine.
TARGETS = {("wide", "nonprivate"): 0.1, ("wide", "analyze_gauss"): 3.0,
           ("wide", "dpdis_site"): 3.0, ("large", "dpdis_site"): 30.0}
LARGE_MEMORY_GIB = 4.0
LABELS = {"nonprivate": "NonPrivatePCA.fit", "analyze_gauss": "AnalyzeGaussPCA.fit",
          "dpdis_site": "DPdisPCA site release (factor, R = 2k)",
          "dpdis_4_sites": "run_dpdis_pca, 4 sites", "ppca": "PPCA.fit (dense in both)"}


# --- the child process: one measured call ---------------------------------------------------


def wide_table(samples: int, dim: int, factors: int, seed: int = 0):
    """Gene-expression-like ``samples x dim`` records with rows of norm 1 (see module doc)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    strength = 1.0 / np.arange(1, factors + 1)
    scores = rng.standard_normal((samples, factors)) * strength
    loadings = rng.lognormal(0.0, 1.0, (factors, dim)) * (rng.random((factors, dim)) < 0.1)
    loadings *= rng.choice([-1.0, 1.0], (factors, dim))
    noise = rng.standard_normal((samples, dim)) * rng.lognormal(-1.5, 0.5, dim)
    X = scores @ loadings + noise
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _peak_rss() -> int:
    """This process's peak resident memory in bytes: ``VmHWM`` (per address space, so it
    starts afresh at exec; ``ru_maxrss`` would carry the parent's peak over)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one method once in this process and report time, memory and the output."""
    import logging

    import numpy as np

    from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, DPdisPCASite, run_dpdis_pca
    from fedpca.estimators import PPCA, AnalyzeGaussPCA, NonPrivatePCA
    from fedpca.linalg import subspace
    from fedpca.dp import mechanisms

    steps: list[int] = []

    class _Steps(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found = re.search(r"in (\d+) steps", record.getMessage())
            if found:
                steps.append(int(found.group(1)))

    log = logging.getLogger("fedpca.linalg.subspace")
    log.setLevel(logging.DEBUG)
    log.addHandler(_Steps())
    noise_seconds: list[float] = []
    if spec["solver"] == "dense":  # the code path before issue 14
        subspace.eigensolver_for = lambda *args, **kwargs: subspace.DENSE
        mechanisms.symmetric_gaussian_in_blocks = (
            lambda rng, dim, sigma, *args: mechanisms.symmetric_gaussian(rng, dim, sigma))
    else:
        blocked = mechanisms.symmetric_gaussian_in_blocks

        def timed_noise(*args, **kwargs):
            start = time.perf_counter()
            out = blocked(*args, **kwargs)
            noise_seconds.append(time.perf_counter() - start)
            return out

        mechanisms.symmetric_gaussian_in_blocks = timed_noise

    X = wide_table(spec["samples"], spec["dim"], spec["factors"])
    k, method = spec["k"], spec["method"]
    calls = {
        "nonprivate": lambda: NonPrivatePCA(k).fit(X).components_.T,
        "analyze_gauss": lambda: AnalyzeGaussPCA(k, EPSILON, DELTA, random_state=SEED)
        .fit(X).components_.T,
        "dpdis_site": lambda: DPdisPCASite(
            X, DPdisPCAPolicy(EPSILON, DELTA), site="0", seed=SEED).release("factor", 2 * k),
        "dpdis_4_sites": lambda: run_dpdis_pca(
            np.array_split(X, 4), k, policy=DPdisPCAPolicy(EPSILON, DELTA), seed=SEED).basis,
        "ppca": lambda: PPCA(k, EPSILON, random_state=SEED).fit(X).components_.T,
    }
    before = _peak_rss()
    start = time.perf_counter()
    out = calls[method]()
    seconds = time.perf_counter() - start
    peak = _peak_rss()
    np.save(spec["output"], out)
    return {"seconds": seconds, "peak_gib": peak / GIB, "before_gib": before / GIB,
            "lanczos_steps": steps, "noise_seconds": sum(noise_seconds) or None}


# --- the parent: schedule, compare, write ---------------------------------------------------


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(spec["threads"])
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _distance(method: str, dense_path: str, iterative_path: str) -> float:
    import numpy as np

    from fedpca.linalg.subspace import subspace_distance

    A, B = np.load(dense_path), np.load(iterative_path)
    if method == "dpdis_site":  # P_s carries the eigenvalues: compare P P^T, never formed:
        # [A B] = Q R gives A A^T - B B^T = Q (R_A R_A^T - R_B R_B^T) Q^T.
        R = np.linalg.qr(np.hstack([A, B]), mode="r")
        RA, RB = R[:, : A.shape[1]], R[:, A.shape[1]:]
        return float(np.linalg.norm(RA @ RA.T - RB @ RB.T) / np.linalg.norm(RA.T @ RA))
    return subspace_distance(A, B)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(quick: bool = False, threads: tuple[int, ...] = (1, 2),
        dense_large: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cfg["cases"]:
            for method in case["methods"]:
                for n_threads in threads:
                    if method == "ppca" and n_threads != threads[0]:
                        continue  # unchanged and slow: one thread setting is enough
                    dense = method == "ppca" or case["name"] != "large" or dense_large or quick
                    repeats = case.get("repeats", cfg["repeats"])
                    solvers = (["dense"] if method == "ppca" else
                               ["iterative", "dense"] + ["iterative"] * (repeats - 1)
                               if dense else ["iterative"] * repeats)
                    runs: dict[str, list[dict[str, Any]]] = {"dense": [], "iterative": []}
                    for i, solver in enumerate(solvers):
                        spec = {key: case[key] for key in ("samples", "dim", "k", "factors")}
                        spec.update(method=method, solver=solver, threads=n_threads,
                                    output=f"{tmp}/{case['name']}-{method}-{solver}-{i}.npy")
                        progress(f"{case['name']} {method} {solver} threads={n_threads}")
                        result = _run_child(spec)
                        result["output"] = spec["output"]
                        runs[solver].append(result)
                        progress(f"   {result['seconds']:.3f} s, peak {result['peak_gib']:.2f} "
                                 f"GiB, Lanczos steps {result['lanczos_steps']}")
                    rows.append(_row(case, method, n_threads, runs))
    return rows


def _row(case: dict[str, Any], method: str, threads: int,
         runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case["name"], "samples": case["samples"], "dim": case["dim"],
                           "k": case["k"], "method": method, "threads": threads}
    for solver, results in runs.items():
        if not results:
            row[solver] = None
            continue
        seconds = [r["seconds"] for r in results]
        row[solver] = {
            "runs_s": seconds, "median_s": statistics.median(seconds), "min_s": min(seconds),
            "peak_gib": max(r["peak_gib"] for r in results),
            "before_gib": max(r["before_gib"] for r in results),
            "lanczos_steps": sorted({s for r in results for s in r["lanczos_steps"]}),
            "noise_s": statistics.median([r["noise_seconds"] for r in results])
            if results[0]["noise_seconds"] is not None else None,
        }
    if runs["dense"] and runs["iterative"] and method != "ppca":
        row["distance"] = _distance(method, runs["dense"][0]["output"],
                                    runs["iterative"][0]["output"])
        row["speedup"] = row["dense"]["median_s"] / row["iterative"]["median_s"]
    return row


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        limit = TARGETS.get((r["case"], r["method"]))
        if limit is None or r["iterative"] is None:
            continue
        name = (f"{LABELS[r['method']]}, d={r['dim']}, n={r['samples']}, k={r['k']}, "
                f"{r['threads']} thread(s) (s, median)")
        value = r["iterative"]["median_s"]
        out.append({"target": name, "value": value, "limit": limit,
                    "passed": None if quick else bool(value <= limit)})
        if r["case"] == "large":
            value = r["iterative"]["peak_gib"]
            out.append({"target": name.replace("(s, median)", "(peak GiB)"), "value": value,
                        "limit": LARGE_MEMORY_GIB,
                        "passed": None if quick else bool(value <= LARGE_MEMORY_GIB)})
    return out


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e4 or abs(value) < 10 ** (-digits)):
            return f"{value:.2g}"
        return f"{value:.{digits}f}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]]) -> str:
    table = []
    for r in rows:
        d, it = r["dense"] or {}, r["iterative"] or {}
        table.append([
            f"{r['samples']} x {r['dim']}, k={r['k']}", LABELS[r["method"]], r["threads"],
            d.get("median_s"), it.get("median_s"), it.get("min_s"), r.get("speedup"),
            d.get("peak_gib"), it.get("peak_gib"), it.get("before_gib") or d.get("before_gib"),
            it.get("noise_s"), it.get("lanczos_steps"), r.get("distance"),
        ])
    headers = ["data (n x d)", "call", "BLAS threads", "dense s", "iterative s (median)",
               "iterative s (min)", "dense / iterative", "dense peak GiB",
               "iterative peak GiB", "before call GiB", "noise draw s (iterative)",
               "Lanczos steps", "dense vs iterative distance"]
    return _table(headers, table)


def _section(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    trows = [[t["target"], t["value"], f"<= {t['limit']}",
              {True: "PASS", False: "FAIL", None: "not judged"}[t["passed"]]]
             for t in doc["targets"]]
    return "\n".join([
        BEGIN,
        "## High-dimensional data: dense vs iterative top-k eigenvectors (issue 14)"
        + (" (quick mode: small sizes, targets not judged)" if doc["quick"] else ""),
        "",
        f"Generated {m['date']} by `{doc['command']}` in {doc['seconds']:.0f} s.",
        "",
        (f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['platform']}; "
         f"Python {m['python']}, numpy {m['numpy']}, scipy {m['scipy']}; BLAS "
         f"{', '.join(m['blas']) or '?'} (threads set per run, column 3)."),
        "",
        ("Each figure is one process running one public call on the raw records (see the "
         "docstring of `benchmarks/highd.py`): *dense* is the pre-issue-14 path (noise as four "
         "d x d arrays, matrix formed, LAPACK `eigh`), *iterative* the library's rule (thin "
         "SVD for the non-private baseline, Lanczos for the noisy matrices). Peak GiB is the "
         "process's `VmHWM` (interpreter, imports and data included: \"before call\"). "
         "The distance column compares the dense and iterative outputs for the same noise "
         "seed (subspace distance; for a DPdisPCA site `||P P^T - P' P'^T||_F / ||P P^T||_F`). "
         "A shared 2-core VM: timings vary by +-30 % between identical runs; compare columns "
         "of one run."),
        "",
        _table(["target", "measured", "limit", "result"], trows) if trows else "(no targets)",
        "",
        markdown(doc["rows"]),
        END,
    ])


def write(doc: dict[str, Any], quick: bool) -> tuple[Path, Path]:
    stem = "highd.quick" if quick else "highd"
    json_path = RESULTS / f"{stem}.json"
    md_path = RESULTS / ("scale.quick.md" if quick else "scale.md")
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    section = _section(doc)
    text = md_path.read_text() if md_path.exists() else "# Scaling benchmarks\n"
    if BEGIN in text and END in text:  # replace our section only
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    md_path.write_text(text)
    return json_path, md_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, targets not judged")
    parser.add_argument("--threads", default="1,2", help="BLAS thread counts, e.g. 1 or 1,2")
    parser.add_argument("--dense-large", action="store_true",
                        help="also run the dense path at d = 20000 (about 10 GB and long)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return 0
    sys.path.insert(0, str(HERE))
    from common import machine_info

    threads = tuple(int(t) for t in args.threads.split(","))
    start = time.perf_counter()
    rows = run(args.quick, threads, args.dense_large)
    command = "python benchmarks/highd.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    doc = {"machine": machine_info(), "quick": args.quick, "command": command,
           "seconds": time.perf_counter() - start, "rows": rows,
           "targets": targets(rows, args.quick)}
    json_path, md_path = write(doc, args.quick)
    for t in doc["targets"]:
        verdict = {True: "PASS", False: "FAIL", None: "not judged"}[t["passed"]]
        progress(f"target {t['target']}: {t['value']:.3g} (limit {t['limit']}) -> {verdict}")
    progress(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

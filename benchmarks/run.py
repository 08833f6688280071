"""Run the benchmark suites and write
benchmarks/results/{dps_pca,dpdis_ldp,central,cli,genomics}.{json,md}.

    OPENBLAS_NUM_THREADS=1 python benchmarks/run.py [--only accuracy,site_round,flower_round,
                                                            dpdis_ldp,central,
                                                            diffprivlib_check,cli_startup,
                                                            genomics]
                                                     [--quick]

``--only`` reruns a subset and merges it into the existing results file; ``--quick`` runs
small versions (targets not judged) and writes ``<suite>.quick.{json,md}`` instead, so a
smoke test never overwrites the real figures. Each benchmark writes into its suite's files
(``SUITES``; DPS-PCA's by default).
"""

from __future__ import annotations

import os

# Before numpy is imported anywhere: one BLAS thread (the suite's timing convention, and the
# setting fedpca's Flower launcher uses).
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import accuracy  # noqa: E402
import central  # noqa: E402
import cli_startup  # noqa: E402
import diffprivlib_check  # noqa: E402
import dpdis_ldp  # noqa: E402
import flower_round  # noqa: E402
import genomics  # noqa: E402
import site_round  # noqa: E402
from common import machine_info, md_table, progress  # noqa: E402

BENCHMARKS = {
    "accuracy": (accuracy, "(a) Accuracy at the paper setting"),
    "site_round": (site_round, "(b) One site round: release_power vs bare numpy"),
    "flower_round": (flower_round, "(c) One Flower round: DPS-PCA vs FedAvg"),
    "dpdis_ldp": (dpdis_ldp, "(d) DPdisPCA bytes and merge, LDP-PCA Fantope ADMM"),
    "central": (central, "(f) Central baselines: PPCA sampler, paper 000 Table 1 timings"),
    "diffprivlib_check": (diffprivlib_check, "(g) diffprivlib PCA beside fedpca (optional)"),
    "cli_startup": (cli_startup, "(h) CLI start-up: fedpca --help"),
    "genomics": (genomics, "(i) Ancestry PCs of PLINK cohorts: accuracy, one site's cost"),
}
#: Benchmarks run only when named by ``--only`` (too long for the default suite).
ON_REQUEST = frozenset({"genomics"})
#: Results file stem and heading of each suite; a benchmark not listed is in ``dps_pca``.
SUITES = {"dps_pca": "DPS-PCA benchmarks", "dpdis_ldp": "DPdisPCA and LDP-PCA benchmarks",
          "central": "Central baselines (MOD-SuLQ, Analyze Gauss, PPCA) benchmarks",
          "cli": "Command-line start-up",
          "genomics": "Genomics: ancestry PCs across biobanks (issue 35)"}
SUITE_OF = {"dpdis_ldp": "dpdis_ldp", "central": "central",
            "diffprivlib_check": "central", "cli_startup": "cli", "genomics": "genomics"}
RESULTS = HERE / "results"


def _json_default(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj)}")


def render_markdown(doc: dict, suite: str = "dps_pca") -> str:
    m = doc["machine"]
    lines = [
        f"# {SUITES[suite]}" + (" (quick mode: small sizes, targets not judged)"
                                if doc.get("quick") else ""),
        "",
        f"Generated {m['date']} by `python benchmarks/run.py"
        + (" --quick" if doc.get("quick") else "") + "`.",
        "",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['platform']}; "
        f"Python {m['python']}, numpy {m['numpy']}, scipy {m['scipy']}, flwr {m['flwr']}, "
        f"dp-accounting {m['dp_accounting']}; BLAS {', '.join(m['blas']) or '?'}; "
        f"OPENBLAS_NUM_THREADS={m['OPENBLAS_NUM_THREADS']}.",
        "",
        "## Targets",
        "",
    ]
    trows = []
    for key, (_, title) in BENCHMARKS.items():
        for t in doc["benchmarks"].get(key, {}).get("targets", []):
            verdict = {True: "PASS", False: "FAIL", None: "not judged"}[t["passed"]]
            trows.append([key, t["target"], t["value"], f"<= {t['limit']}", verdict])
    lines.append(md_table(["benchmark", "target", "measured", "limit", "result"], trows)
                 if trows else "(none run)")
    for key, (module, title) in BENCHMARKS.items():
        section = doc["benchmarks"].get(key)
        if section is None:
            continue
        lines += ["", f"## {title}", "",
                  f"Run {section['finished']}, {section['seconds']:.0f} s.", "",
                  module.markdown(section["rows"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(b for b in BENCHMARKS if b not in ON_REQUEST),
                        help=f"comma-separated subset of {','.join(BENCHMARKS)} (default: all "
                             f"but {','.join(sorted(ON_REQUEST))})")
    parser.add_argument("--quick", action="store_true", help="small smoke-test sizes")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    docs: dict[str, dict] = {}
    written: list[str] = []

    suite_start = time.perf_counter()
    for name in chosen:
        suite = SUITE_OF.get(name, "dps_pca")
        stem = f"{suite}.quick" if args.quick else suite
        json_path, md_path = RESULTS / f"{stem}.json", RESULTS / f"{stem}.md"
        if suite not in docs:
            docs[suite] = (json.loads(json_path.read_text()) if json_path.exists()
                           else {"benchmarks": {}})
            docs[suite].update(machine=machine, quick=args.quick)
            written += [str(json_path), str(md_path)]
        doc = docs[suite]
        module, title = BENCHMARKS[name]
        progress(f"== {name}: {title}")
        start = time.perf_counter()
        rows = module.run(quick=args.quick)
        doc["benchmarks"][name] = {
            "title": title,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
            "seconds": time.perf_counter() - start,
            "quick": args.quick,
            "rows": rows,
            "targets": module.targets(rows, quick=args.quick),
        }
        # Write after every benchmark so a later failure keeps what finished.
        json_path.write_text(json.dumps(doc, indent=2, default=_json_default) + "\n")
        md_path.write_text(render_markdown(doc, suite))
        for t in doc["benchmarks"][name]["targets"]:
            progress(f"   target {t['target']}: {t['value']} (limit {t['limit']}) -> "
                     f"{ {True: 'PASS', False: 'FAIL', None: 'not judged'}[t['passed']] }")
        progress(f"== {name} done in {time.perf_counter() - start:.0f}s")
    progress(f"suite done in {time.perf_counter() - suite_start:.0f}s; wrote "
             f"{', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

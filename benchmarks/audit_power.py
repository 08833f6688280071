"""The audit's power against the deliberately broken mechanisms, over seeds: how many trials
does ``tests/test_audit.py`` need for its checks to hold at every seed?

    OPENBLAS_NUM_THREADS=1 python benchmarks/audit_power.py [--trials 3000]
        [--calibration-trials 200] [--seeds 10] [--quick]

For every mechanism of :data:`fedpca.audit.broken.UNDER_NOISED` and every seed (the audit's
seed: its trials' noise seeds, common to the two datasets and to the three audits of a seed),
three audits at the given trial counts (``run_audit`` with the defaults of
``fedpca audit``: epsilon 3, delta 1e-3, 95% confidence): the shipped mechanism, the one
with half its noise (:func:`~fedpca.audit.broken.halved_noise`) and the one calibrated with
the add/remove-one sensitivity (:func:`~fedpca.audit.broken.add_remove_sensitivity`); then
the secure sum (``dpdis-pca/secure-sum``) shipped and with half its noise. Each seed is
judged by the tests' own checks:

* shipped: passes (``epsilon_lower <= claimed``);
* half the noise: refuted (``epsilon_lower > claimed``) and its separation above 1.7 times
  the shipped one's (2 in expectation);
* add/remove sensitivity: its bound above the shipped one's by more than 0.25 (the same
  seed: a paired difference) and its separation above 1.25 times (``sqrt(2)`` in
  expectation).

The test suite runs one seed at the counts whose every check held at all seeds here. Writes
``benchmarks/results/audit_power.{json,md}`` (``--quick``: 2 seeds and a tenth of the
trials, ``audit_power.quick.*``, checks not judged).
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import machine_info, md_table, progress  # noqa: E402

from fedpca.audit.attack import AuditResult, run_audit  # noqa: E402
from fedpca.audit.broken import (  # noqa: E402
    UNDER_NOISED,
    add_remove_sensitivity,
    halved_noise,
    halved_secure_sum_noise,
)
from fedpca.audit.targets import audit_target  # noqa: E402

RESULTS = HERE / "results"
#: The secure sum whose halved noise tests/test_secure_sum.py catches.
SECURE = "dpdis-pca/secure-sum"


def audit(name: str, trials: int, calibration: int, seed: int) -> AuditResult:
    """``name``'s audit (its target built under whatever bug is in force)."""
    return run_audit(audit_target(name), trials, calibration, seed=seed)


def judged(name: str, seed: int, shipped: AuditResult, bug: str,
           broken: AuditResult) -> dict:
    """One seed's row: the figures and whether the tests' checks held."""
    ratio = broken.separation / shipped.separation
    if bug == "half the noise":
        caught = not broken.passed and ratio > 1.7
    else:
        caught = broken.epsilon_lower > shipped.epsilon_lower + 0.25 and ratio > 1.25
    return {"mechanism": name, "seed": seed, "bug": bug, "claimed": shipped.claimed_epsilon,
            "shipped_bound": shipped.epsilon_lower, "shipped_passed": shipped.passed,
            "broken_bound": broken.epsilon_lower, "separation_ratio": ratio,
            "caught": bool(caught)}


def run(trials: int, calibration: int, seeds: list[int]) -> list[dict]:
    rows = []
    for name in [*UNDER_NOISED, SECURE]:
        for seed in seeds:
            progress(f"{name}, seed {seed}")
            shipped = audit(name, trials, calibration, seed)
            if name == SECURE:
                with halved_secure_sum_noise():
                    rows.append(judged(name, seed, shipped, "half the noise",
                                       audit(name, trials, calibration, seed)))
                continue
            with halved_noise():
                rows.append(judged(name, seed, shipped, "half the noise",
                                   audit(name, trials, calibration, seed)))
            with add_remove_sensitivity(name):
                rows.append(judged(name, seed, shipped, "add/remove sensitivity",
                                   audit(name, trials, calibration, seed)))
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per mechanism and bug: seeds caught, shipped passes, the smallest margins."""
    table = []
    for key in dict.fromkeys((row["mechanism"], row["bug"]) for row in rows):
        group = [row for row in rows if (row["mechanism"], row["bug"]) == key]
        gains = [row["broken_bound"] - (row["claimed"] if row["bug"] == "half the noise"
                                        else row["shipped_bound"]) for row in group]
        table.append({"mechanism": key[0], "bug": key[1], "seeds": len(group),
                      "caught": sum(row["caught"] for row in group),
                      "shipped_passed": sum(row["shipped_passed"] for row in group),
                      "smallest_margin": min(gains),
                      "smallest_separation_ratio": min(r["separation_ratio"] for r in group)})
    return table


def markdown(doc: dict) -> str:
    m = doc["machine"]
    rows = [[s["mechanism"], s["bug"], f"{s['caught']}/{s['seeds']}",
             f"{s['shipped_passed']}/{s['seeds']}", f"{s['smallest_margin']:.3f}",
             f"{s['smallest_separation_ratio']:.3f}"] for s in doc["summary"]]
    return "\n".join([
        "# The audit's power against the broken mechanisms"
        + (" (quick: not judged)" if doc["quick"] else ""), "",
        f"Generated {m['date']} by `python benchmarks/audit_power.py --trials {doc['trials']} "
        f"--calibration-trials {doc['calibration_trials']} --seeds {len(doc['seeds'])}` in "
        f"{doc['seconds']:.0f} s; {m['cores']} cores ({m['cpu']}).", "",
        "Margin: half the noise, the broken bound above the claim; add/remove sensitivity, "
        "the broken bound above the shipped one at the same seed (the test needs > 0.25). "
        "Separation ratio: broken over shipped (the tests need > 1.7 and > 1.25).", "",
        md_table(["mechanism", "bug", "caught", "shipped passed", "smallest margin",
                  "smallest separation ratio"], rows), "",
        f"Every check held at every seed: {doc['all_caught']}.",
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3000)
    parser.add_argument("--calibration-trials", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="2 seeds, a tenth of the trials")
    args = parser.parse_args(argv)
    trials, calibration, count = args.trials, args.calibration_trials, args.seeds
    if args.quick:
        trials, calibration, count = max(100, trials // 10), max(10, calibration // 10), 2
    seeds = list(range(count))
    start = time.perf_counter()
    rows = run(trials, calibration, seeds)
    doc = {"machine": machine_info(), "quick": args.quick, "trials": trials,
           "calibration_trials": calibration, "seeds": seeds, "rows": rows,
           "summary": summary(rows), "seconds": time.perf_counter() - start}
    doc["all_caught"] = all(s["caught"] == s["shipped_passed"] == s["seeds"]
                            for s in doc["summary"])
    stem = "audit_power.quick" if args.quick else "audit_power"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (RESULTS / f"{stem}.md").write_text(markdown(doc))
    progress(f"wrote {RESULTS / stem}.{{json,md}}; every check held: {doc['all_caught']}")
    return 0 if doc["all_caught"] or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())

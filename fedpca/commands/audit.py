"""``fedpca audit MECHANISM``: an empirical lower bound on each mechanism's epsilon.

Runs the distinguishing attack of :mod:`fedpca.audit.attack` on the worst-case neighbouring
datasets, through the real clients (:mod:`fedpca.audit.targets`), and prints, per
mechanism, the claimed (epsilon, delta), the false-positive and false-negative rates with
their Clopper-Pearson intervals, the empirical epsilon lower bound and a verdict: PASS when
the bound does not exceed the claim (which does not prove DP), FAIL when it does (evidence,
at the stated confidence, that the implementation leaks more than it claims). The exit code
is 1 if any mechanism fails.

The defaults (epsilon 3, delta 1e-3, 4000 trials) are chosen so that the audit catches a
mechanism whose noise is half what its calibration claims (see ``tests/test_audit.py``);
at delta 1e-5 that would take far more trials than a quick audit can afford.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from fedpca.audit.attack import AuditResult, Interval, run_audit
from fedpca.audit.targets import MECHANISMS, AuditSettings, audit_target
from fedpca.commands.common import seeded_notice
from fedpca.errors import ConfigurationError
from fedpca.dp.exact_noise import NOISE_SAMPLERS

ALL = "all"
DEFAULT_TRIALS = 4000
DEFAULT_CALIBRATION_TRIALS = 1000
DEFAULT_ALPHA = 0.05
DESCRIPTION = (
    "Distinguishing attack on one release of each mechanism, on two neighbouring datasets "
    "(one record replaced by a worst-case one), through the real clients: an empirical lower "
    "bound on epsilon with Clopper-Pearson intervals. PASS does not prove DP; FAIL is "
    "evidence that the implementation leaks more than it claims (exit code 1)."
)


def register_audit_command(commands: argparse._SubParsersAction) -> None:
    """Add ``fedpca audit MECHANISM [MECHANISM ...] [flags]``."""
    defaults = AuditSettings()
    p = commands.add_parser(
        "audit",
        help="empirical privacy audit: a distinguishing attack through the real clients",
        description=DESCRIPTION,
    )
    p.add_argument("mechanisms", nargs="+", metavar="MECHANISM",
                   help=f"any of: {', '.join(MECHANISMS)}, or {ALL!r}")
    p.add_argument("--epsilon", type=float, default=defaults.epsilon,
                   help="the audited sites' (or curator's) epsilon budget")
    p.add_argument("--delta", type=float, default=defaults.delta, help="their delta")
    p.add_argument("--dim", type=int, default=defaults.dim, help="features d (>= 2)")
    p.add_argument("--samples", type=int, default=defaults.samples,
                   help="records per dataset (the LDP site holds one)")
    p.add_argument("--clip-norm", type=float, default=defaults.clip_norm,
                   help="public row-norm bound C")
    p.add_argument("--noise-sampler", choices=NOISE_SAMPLERS, default=defaults.noise_sampler,
                   help="the sites' noise: exact (what a real site draws) or float (simulation)")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                   help="evaluation releases per dataset")
    p.add_argument("--calibration-trials", type=int, default=DEFAULT_CALIBRATION_TRIALS,
                   help="further releases per dataset that choose the test")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                   help="the bound holds with confidence 1 - alpha")
    p.add_argument("--seed", type=int, default=None,
                   help="seed every trial's noise (a reproducible audit); default: OS randomness")
    p.add_argument("--output", type=Path, default=None, help="write the results as JSON")
    p.add_argument("--quiet", action="store_true",
                   help="for scripts: no step lines or per-mechanism tables; only the summary")
    p.set_defaults(func=run)


def selected(names: list[str]) -> list[str]:
    """The mechanisms named on the command line (``all``: every one), checked first."""
    if ALL in names:
        return list(MECHANISMS)
    unknown = [name for name in names if name not in MECHANISMS]
    if unknown:
        raise ConfigurationError(
            f"unknown mechanism(s) {', '.join(unknown)}; choose from {', '.join(MECHANISMS)} "
            f"or {ALL}"
        )
    return names


def _rate(count: int, trials: int, rate: Interval, confidence: float) -> str:
    return (
        f"{count} / {trials} = {rate.estimate:.4f}  "
        f"{confidence:.0%} CI [{rate.lower:.4f}, {rate.upper:.4f}]"
    )


def result_table(result: AuditResult) -> str:
    """One mechanism's audit as a two-column table."""
    noise = "seeded (reproducible)" if result.seeded else "OS randomness"
    verdict = (
        "PASS (no evidence of a violation; a lower bound cannot prove DP)" if result.passed
        else "FAIL (the mechanism leaks more than it claims)"
    )
    rows = [
        ("claimed", f"eps {result.claimed_epsilon:.3f} at delta {result.delta:g} (one release)"),
        ("trials", (f"{result.trials} per dataset (+{result.calibration_trials} calibration), "
                   f"noise {noise}")),
        ("false positives", _rate(result.false_positives, result.trials, result.fpr,
                                  result.confidence)),
        ("false negatives", _rate(result.false_negatives, result.trials, result.fnr,
                                  result.confidence)),
        ("separation", f"{result.separation:.3f} noise standard deviations"),
        ("eps lower bound", (f"{result.epsilon_lower:.3f} ({result.confidence:.0%} confidence), "
                            f"margin {result.margin:+.3f}")),
        ("verdict", verdict),
    ]
    lines = [f"{result.mechanism}: {result.setup}"]
    lines += [f"  {key:<16} {value}" for key, value in rows]
    return "\n".join(lines)


def summary_table(results: list[AuditResult]) -> str:
    """One line per mechanism: claimed epsilon, lower bound, verdict."""
    header = f"{'mechanism':<15} {'claimed eps':>11} {'eps lower':>9}  verdict"
    lines = [header, "-" * len(header)]
    lines += [
        f"{r.mechanism:<15} {r.claimed_epsilon:>11.3f} {r.epsilon_lower:>9.3f}  "
        f"{'PASS' if r.passed else 'FAIL'}"
        for r in results
    ]
    return "\n".join(lines)


def step_line(step: int, steps: int, name: str, elapsed: float) -> str:
    """``[2/7] auditing dps-pca/power (12 s elapsed)``: printed as each mechanism starts."""
    return f"[{step}/{steps}] auditing {name} ({elapsed:.0f} s elapsed)"


def run(args: argparse.Namespace) -> int:
    """Audit every selected mechanism, print the tables, write the JSON; 1 if any fails."""
    names = selected(args.mechanisms)
    settings = AuditSettings(
        epsilon=args.epsilon, delta=args.delta, dim=args.dim, samples=args.samples,
        clip_norm=args.clip_norm, noise_sampler=args.noise_sampler,
    )
    seeded_notice(args.seed)
    results = []
    start = time.perf_counter()
    for step, name in enumerate(names, start=1):
        if not args.quiet:
            print(step_line(step, len(names), name, time.perf_counter() - start), flush=True)
        result = run_audit(
            audit_target(name, settings), args.trials, args.calibration_trials, args.alpha,
            args.seed,
        )
        if not args.quiet:
            print(result_table(result), end="\n\n", flush=True)
        results.append(result)
    print(summary_table(results))
    if args.output is not None:
        args.output.write_text(json.dumps(
            {"settings": asdict(settings), "results": [r.to_dict() for r in results]}, indent=2
        ))
        print(f"wrote {args.output}")
    return 0 if all(r.passed for r in results) else 1

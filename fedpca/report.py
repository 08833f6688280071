"""Human-readable views of a result: the per-round table and a one-line summary."""

from __future__ import annotations

import math

from fedpca.results import PCAResult


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def round_table(result: PCAResult) -> str:
    """One line per round: round, phase, sites answered, distance to truth, epsilon spent."""
    header = f"{'round':>5}  {'phase':<6} {'sites':>5}  {'distance':>9}  {'eps spent':>9}"
    lines = [header, "-" * len(header)]
    for entry in result.history:
        lines.append(
            f"{entry['round']:>5}  {entry['phase']:<6} {entry['sites']:>5}  "
            f"{_fmt(entry.get('distance', float('nan'))):>9}  "
            f"{_fmt(entry['epsilon_spent']):>9}"
        )
    return "\n".join(lines)


def result_summary(result: PCAResult) -> str:
    """A one-line summary: algorithm, final distance (if known) and the guarantee."""
    p = result.privacy
    final = result.history[-1] if result.history else {}
    distance = f"distance {final['distance']:.4f}, " if "distance" in final else ""
    return (
        f"{result.algorithm}: k={result.n_components}, {distance}"
        f"(eps={p.get('epsilon')}, delta={p.get('delta')})-DP per record per site "
        f"[{p.get('accounting')}, noise multiplier {p.get('noise_multiplier', float('nan')):.3f}, "
        f"{p.get('trust_model')}]"
    )

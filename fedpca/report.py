"""Human-readable views of a result: the per-round table (also printed live, one line per
round, by :mod:`fedpca.progress`), a one-line summary, and for a standardised run how many
column scales sit at the noise floor (:func:`scaling_lines`: a warning naming the fix above
a quarter of the columns; an explained-variance ratio over such a total is flagged by
:func:`explained_summary`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from fedpca.algorithms.specs import SPECS

if TYPE_CHECKING:
    from fedpca.results import ClusteringResult
    from fedpca.run_record import RunResult

#: The metric columns of a table whose algorithm has no spec: (history key, column title).
DEFAULT_COLUMNS = (("distance", "distance"),)
#: The phase column's width: its longest phase ("variance").
PHASE_WIDTH = 8


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def metric_columns(algorithm: str) -> tuple[tuple[str, str], ...]:
    """The metric columns of ``algorithm``'s table (its spec's
    :attr:`~fedpca.algorithms.specs.AlgorithmSpec.columns`; distance without a spec)."""
    spec = SPECS.get(algorithm)
    return DEFAULT_COLUMNS if spec is None else spec.columns


def phased(algorithm: str) -> bool:
    """Whether ``algorithm``'s rounds differ in kind (a phase column; its spec's
    :attr:`~fedpca.algorithms.specs.AlgorithmSpec.phased`: DPS-PCA's initialisation, then
    its power rounds)."""
    spec = SPECS.get(algorithm)
    return spec is not None and spec.phased


def table_header(algorithm: str, elapsed: bool = False) -> str:
    """The table's two header lines (titles and a rule), with an ``elapsed`` column if asked."""
    titles = f"{'round':>5}" + (f"  {'phase':<{PHASE_WIDTH}}" if phased(algorithm) else "")
    titles += f" {'sites':>7}" + "".join(f"  {t:>9}" for _, t in metric_columns(algorithm))
    titles += f"  {'eps spent':>9}" + (f"  {'elapsed':>8}" if elapsed else "")
    return titles + "\n" + "-" * len(titles)


def round_line(
    algorithm: str, entry: dict[str, Any], asked: int | None = None,
    elapsed: float | None = None,
) -> str:
    """One round's line: round, phase (DPS-PCA), sites answered (``of asked`` when known),
    the algorithm's metrics, the most epsilon any site has spent, the elapsed time if
    given; ``-`` where a metric was not evaluated."""
    sites = f"{entry.get('sites', '-')}" + (f"/{asked}" if asked is not None else "")
    line = f"{entry.get('round', '-'):>5}"
    line += f"  {entry.get('phase', '-'):<{PHASE_WIDTH}}" if phased(algorithm) else ""
    line += f" {sites:>7}"
    line += "".join(f"  {_fmt(entry.get(key)):>9}" for key, _ in metric_columns(algorithm))
    line += f"  {_fmt(entry.get('epsilon_spent')):>9}"
    return line + (f"  {elapsed:>6.1f} s" if elapsed is not None else "")


def history_table(algorithm: str, history: list[dict[str, Any]]) -> str:
    """The whole per-round table of a finished run (no elapsed times: they are not saved)."""
    return "\n".join([table_header(algorithm), *(round_line(algorithm, e) for e in history)])


def clustering_round_table(result: ClusteringResult) -> str:
    """One line per round: round, sites, k-means cost, Wasserstein distance, epsilon spent
    (``-`` where a metric was not evaluated)."""
    columns = (("cost", "cost"), ("wasserstein_distance", "W dist"), ("epsilon_spent", "eps spent"))
    header = f"{'round':>5}  {'sites':>5}" + "".join(f"  {title:>9}" for _, title in columns)
    lines = [header, "-" * len(header)]
    for entry in result.history:
        values = [entry.get(key, math.nan) for key, _ in columns]
        lines.append(
            f"{entry['round']:>5}  {entry['sites']:>5}"
            + "".join("  " + ("        -" if math.isnan(v) else f"{v:>9.4f}") for v in values)
        )
    return "\n".join(lines)


def record_header(record: dict[str, Any]) -> str:
    """A run record's shape and guarantee in one line (``fedpca show``, the plot's title)."""
    return (
        f"{record.get('algorithm')}: {record.get('sites')} sites, n={record.get('samples')}, "
        f"d={record.get('dim')}, k={record.get('k')}; each site "
        f"({record.get('epsilon')}, {record.get('delta')})-DP [{record.get('accounting')}]"
    )


#: Sites named on one line of :func:`guarantee_lines` (the rest are counted).
NAMED_SITES = 5


def _guarantee(g: dict[str, Any]) -> str:
    """One guarantee (a site's, or the request) in words."""
    text = (f"(eps={g.get('epsilon')}, delta={g.get('delta')})-DP [{g.get('accounting')}, "
            f"noise multiplier {g.get('noise_multiplier') or float('nan'):.3f}, "
            f"{g.get('noise_sampler')} noise")
    if g.get("secure_min_sites"):
        text += (f", secure sums of >= {g['secure_min_sites']} sites, worst case "
                 f"eps={_fmt(g.get('epsilon_worst_case'))}")
    return text + "]"


def guarantee_lines(record: dict[str, Any]) -> list[str]:
    """What the sites guaranteed, one line per distinct guarantee (naming its sites), then
    what the run requested (in the App: the coordinator, whom a real site overrides)."""
    groups: dict[str, list[str]] = {}
    for site, g in (record.get("site_guarantees") or {}).items():
        groups.setdefault(_guarantee(g), []).append(site)
    lines = ["guaranteed by the sites (each by its own policy):" if groups
             else "guaranteed: no site reported its own (a run without Flower)"]
    for text, sites in groups.items():
        named = ", ".join(sites[:NAMED_SITES]) + (", ..." if len(sites) > NAMED_SITES else "")
        lines.append(f"  {len(sites)} site(s) ({named}): {text}")
    lines.append(f"request (not a guarantee): {_guarantee(record.get('request') or {})}")
    return lines


def record_summary(record: dict[str, Any]) -> str:
    """The final metrics and the guarantee of a run record (:mod:`fedpca.run_record`) in one
    line; for DPS-PCA the same line as :func:`result_summary`."""
    last = record["history"][-1] if record["history"] else {}
    metrics = ", ".join(
        f"{title} {last[key]:.4f}" for key, title in metric_columns(record["algorithm"])
        if isinstance(last.get(key), (int, float))
    )
    return (f"{record['algorithm']}: k={record.get('k')}, {metrics + ', ' if metrics else ''}"
            + _per_site(record))


def result_summary(result: RunResult) -> str:
    """A one-line summary: algorithm, ``k`` (components; a clustering's clusters), final
    distance (if known) and the guarantee (the weakest the sites stated:
    :func:`~fedpca.run_record.guaranteed_privacy`)."""
    from fedpca.run_record import guaranteed_privacy

    p = {**guaranteed_privacy(result), "trust_model": result.privacy.get("trust_model")}
    final = result.history[-1] if result.history else {}
    distance = f"distance {final['distance']:.4f}, " if final.get("distance") is not None else ""
    return f"{result.algorithm}: k={result.k}, {distance}" + _per_site(p)


def _per_site(p: dict[str, Any]) -> str:
    """A summary line's guarantee: ``(eps=.., delta=..)-DP per record per site [..]``."""
    return (f"(eps={p.get('epsilon')}, delta={p.get('delta')})-DP per record per site "
            f"[{p.get('accounting')}, noise multiplier "
            f"{p.get('noise_multiplier') or float('nan'):.3f}, {p.get('trust_model')}]")


#: Components an explained-variance line lists before "...".
LISTED_COMPONENTS = 10
#: Above this share of a standardised run's columns with their scale at the noise floor,
#: :func:`scaling_lines` warns.
FLOOR_WARNING_SHARE = 0.25
#: What lifts a scale off the noise floor, as the warning names it.
FLOOR_FIX = (
    "more epsilon; a larger moments share (a site's [data] moments-share, --moments-share in "
    "a simulation); public scales in the contract (scale = \"range\" or a reference standard "
    "deviation per column, docs/tables.md), which cost no budget; or centring only")
#: What flags an explained-variance ratio over a total with floored scales.
FLOORED_RATIO = ("flagged: over a total in which the columns whose scale sits at the noise "
                 "floor count for almost nothing, so every ratio reads high")


def floor_lines(floored: int, dim: int, public: int = 0) -> list[str]:
    """How many of a standardised run's ``dim`` column scales sit at the noise floor (and how
    many are the contract's ``public`` ones, never floored), with a warning naming the fix
    when more than :data:`FLOOR_WARNING_SHARE` of the columns do."""
    line = f"scales: {floored} of {dim} columns at the noise floor"
    lines = [line + (f", {public} public (the contract's)" if public else "")]
    if floored > FLOOR_WARNING_SHARE * dim:
        lines.append(
            f"warning: standardising failed for {floored} of {dim} columns: their variance is "
            "below the noise of the released sums of squares, so their scale is the floor's "
            "and they weigh almost nothing in the components (an explained-variance ratio "
            f"reads high); fix: {FLOOR_FIX}")
    return lines


def scaling_lines(privacy: dict[str, Any], config: dict[str, Any], dim: int) -> list[str]:
    """:func:`floor_lines` of a result's (or run record's) ``privacy`` and ``config`` when
    it standardised; nothing otherwise."""
    if not privacy.get("standardize"):
        return []
    return floor_lines(len(config.get("floored_variances") or []), dim,
                       len(privacy.get("public_scales") or []))


def explained_summary(values: Any, ratio: Any, floored: bool = False) -> str | None:
    """``DP explained variance: 0.0677, 0.0650; ratio 0.357, 0.342 (cumulative 0.699)``, or
    None when the run released none; ``floored``: the ratio is over a total with scales at
    the noise floor (:data:`FLOORED_RATIO` says so)."""
    if values is None:
        return None

    def listed(numbers: Any, digits: int) -> str:
        shown = ", ".join(f"{float(v):.{digits}g}" for v in list(numbers)[:LISTED_COMPONENTS])
        return shown + (", ..." if len(numbers) > LISTED_COMPONENTS else "")

    line = f"DP explained variance per record: {listed(values, 4)}"
    if ratio is not None:
        line += f"; ratio {listed(ratio, 3)} (cumulative {sum(map(float, ratio)):.3f})"
        line += f" ({FLOORED_RATIO})" if floored else ""
    return line


def dropped_lines(entry: dict[str, Any]) -> list[str]:
    """The secure sum groups or per-site answers one round dropped, each with why (its
    history entry's ``dropped``, :mod:`fedpca.algorithms.sum_groups`), indented under its
    round's line."""
    return [f"  round {entry.get('round')}: {reason}" for reason in entry.get("dropped", ())]


def record_lines(record: dict[str, Any], table: bool = True) -> list[str]:
    """What ``fedpca show`` prints of a completed run record, and a real run's coordinator
    after its last round: the header, the trust model and the sites' guarantees, the round
    table and what its rounds dropped (unless not ``table``: they were printed live), the
    summary, the scaling's floored
    scales, the explained variance and the wall time."""
    lines = [record_header(record), f"trust model: {record.get('trust_model')}",
             *guarantee_lines(record)]
    if table:
        lines.append(history_table(record["algorithm"], record["history"]))
        lines += [line for entry in record["history"] for line in dropped_lines(entry)]
    lines += [record_summary(record),
              *scaling_lines(record.get("privacy") or {}, record.get("config") or {},
                             int(record.get("dim") or 0))]
    explained = explained_summary(record.get("explained_variance"),
                                  record.get("explained_variance_ratio"),
                                  bool(record.get("explained_variance_ratio_floored")))
    if explained is not None:
        lines.append(explained)
    if record.get("wall_seconds") is not None:
        lines.append(f"wall time {record['wall_seconds']:.1f} s")
    return lines

"""A site's lifetime ledger as its privacy officer reads it: spending, runs, policy changes.

:func:`summarize` reads a :class:`~fedpca.site.ledger.SiteLedger` (its releases, runs
and policy events; it writes nothing) into one dict: what the site has spent and has left
over its lifetime and each spending window, and for each run (oldest first) who asked for it
(the coordinator's run id), what it released (algorithm, ``k``, contract hash, centring, as
the site planned it), how many of its planned releases it made, when, its own epsilon, the
lifetime epsilon after it and how it ended:

* ``complete``: the site recorded it complete (e.g. its result came back), or it made all its
  planned releases;
* ``failed``: the site recorded it failed, with the reason (possibly the coordinator's text);
  what it released stays spent;
* ``stopped``: fewer releases than planned and no end recorded (refused part-way, aborted, a
  site stopped, or still running: said when its last release is less than an hour old);
* ``unknown``: a run an older fedpca recorded without the releases it planned.

:func:`format_ledger` prints it (``fedpca site ledger``); :func:`ledger_json` is its JSON
(``--json``: times in ISO 8601 UTC beside their Unix seconds, every release's noise in the
data's units); :func:`spending_series` is the spending after every release, composed as the
ledger composes it, for the page :mod:`fedpca.site.ledger_page` draws (``--html``).

Every epsilon here is at the ledger's delta and composed by the accountant that charges
(:mod:`fedpca.site.ledger`); a report never changes a budget. Texts a coordinator
may have chosen (run ids, a failed run's reason) are kept printable and short by the ledger
(:func:`~fedpca.site.ledger_records.clean_text`) and escaped by the page.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from fedpca.site import policy_changes
from fedpca.dp.ledger import WINDOWS, utc_text, window_starts
from fedpca.site.ledger import MAX_RUNS_COUNTED, SiteLedger

#: A stopped run whose last release is younger than this (seconds) may still be running.
RUNNING_SECONDS = 3600.0
#: Characters of a contract's SHA-256 the table shows.
CONTRACT_SHOWN = 12

#: Why the lifetime epsilon is less than the sum of the runs' (printed under the runs).
COMPOSITION_NOTE = (
    "lifetime: every release of every run composed with the PLD accountant; Gaussian "
    "releases compose roughly with the square root of their number, so the lifetime epsilon "
    "is less than the sum of the runs' epsilons"
)
#: What the worst-case column means, printed under the ledger when it has secure releases.
WORST_CASE_NOTE = (
    "epsilon: if every secure sum held at least M honest sites' shares and the protocol was "
    "followed; worst case: against a coordinator that bypasses the secure sum and sees this "
    "site's own share"
)
#: The worst-case line's meaning, with a bound and without one.
WORST_CASE_MEANING = (
    "  (what every release of this site, composed over its lifetime, reveals to a "
    "coordinator that bypasses the secure sums and sees each secure release through this "
    "site's own share alone; the lifetime epsilon above holds only while every secure sum "
    "holds at least M honest sites' shares)"
)
NO_WORST_CASE_MEANING = (
    "  (budget none: this policy sets no [budget] worst-case-epsilon, so this site refuses "
    "every release inside a secure sum; spent is what its releases already recorded, the "
    "secure ones through this site's own share, reveal to a coordinator that bypasses the "
    "secure sums)"
)
#: What each status means (printed under the runs).
STATUS_NOTE = (
    "status: complete: recorded complete by the site, or made all its planned releases; "
    "failed: recorded failed, with the reason given (its released budget stays spent); "
    "stopped: fewer releases than planned and no end recorded (refused part-way, aborted, a "
    "site stopped, or still running)"
)


def summarize(ledger: SiteLedger) -> dict[str, Any]:
    """Spending per run, per data set and in total, with what remains, each run's status and
    the policy's changes, at the ledger's clock (module docstring); reads, never writes."""
    rows = ledger.rows()
    now = ledger.clock()
    spent, worst = ledger.epsilon_of(rows), ledger.worst_case_of(rows)
    bound = ledger.worst_case_epsilon
    return {
        "site": ledger.site,
        "population": ledger.population,
        "ledger": str(ledger.path),
        "now": now,
        "epsilon_budget": ledger.epsilon,
        "delta": ledger.delta,
        "epsilon_spent": spent,
        "epsilon_remaining": max(0.0, ledger.epsilon - spent),
        "worst_case_epsilon_budget": bound,
        "worst_case_epsilon_spent": worst,
        "worst_case_epsilon_remaining": None if bound is None else max(0.0, bound - worst),
        "releases": len(rows),
        "windows": ledger.windows(rows, now),
        "runs": _runs(ledger, rows, now),
        "datasets": _grouped(ledger, rows, "data_fingerprint"),
        "policy_events": ledger.policy_events(),
        "rows": rows,
    }


def _grouped(ledger: SiteLedger, rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Releases, epsilon (both guarantees) and time span per value of ``key``, in the order
    of their first release."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    return [
        {
            key: value,
            "algorithms": sorted({r["algorithm"] for r in members}),
            "releases": len(members),
            "epsilon": ledger.epsilon_of(members),
            "epsilon_worst_case": ledger.worst_case_of(members),
            "first": min(r["time"] for r in members),
            "last": max(r["time"] for r in members),
        }
        for value, members in groups.items()
    ]


def _runs(ledger: SiteLedger, rows: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """:func:`_grouped` by run, numbered from 1, each with the releases its calibration
    planned (0: an older ledger did not record them), what the site planned to release
    (``description``), when it started and ended, its status (:func:`run_status`) and the
    lifetime epsilon of every release up to its last."""
    records = ledger.run_records()
    runs = _grouped(ledger, rows, "run_id")
    for number, run in enumerate(runs, start=1):
        members = [r for r in rows if r["run_id"] == run["run_id"]]
        record = records.get(run["run_id"], {})
        last = max(r["id"] for r in members)
        run.update(
            number=number,
            planned=max(r.get("planned", 0) for r in members),
            started=record.get("started", run["first"]),
            ended=record.get("ended"),
            reason=record.get("reason") or "",
            description=record.get("description", {}),
            key_list=record.get("key_list"),
        )
        run["status"], run["may_be_running"] = run_status(
            record.get("status"), run["releases"], run["planned"], now - run["last"])
        run["lifetime_epsilon_after"] = ledger.epsilon_of([r for r in rows if r["id"] <= last])
    return runs


def run_status(recorded: str | None, releases: int, planned: int,
               since_last: float) -> tuple[str, bool]:
    """A run's status (``complete``, ``failed``, ``stopped`` or ``unknown``; module
    docstring) from its ``recorded`` end (``None``: none), its ``releases`` of ``planned``
    (0: not recorded) and the seconds ``since_last`` release; and whether a stopped run may
    still be running (its last release younger than :data:`RUNNING_SECONDS`)."""
    if recorded is not None:
        return recorded, False
    if not planned:
        return "unknown", False
    if releases >= planned:
        return "complete", False
    return "stopped", since_last < RUNNING_SECONDS


def format_ledger(summary: dict[str, Any]) -> str:
    """The ledger summary as tables a privacy officer can read (with the worst-case column
    when any release was inside a secure sum); times in ISO 8601 UTC."""
    secure = any(row["sites_in_sum"] for row in summary["rows"])
    lines = [
        f"site {summary['site']}, population {summary['population']} ({summary['ledger']})",
        f"lifetime budget epsilon {summary['epsilon_budget']:g} at delta {summary['delta']:g}: "
        f"spent {summary['epsilon_spent']:.4f}, remaining {summary['epsilon_remaining']:.4f} "
        f"in {summary['releases']} releases",
    ]
    lines += [_window_line(window) for window in summary["windows"]]
    now, releases = summary.get("runs_now", {}), summary.get("releases_per_run", {})
    lines += [f"runs left, {run}: {_runs_left(runs, now.get(run), releases.get(run))}"
              for run, runs in summary.get("runs_left", {}).items()]
    if "identity" in summary:
        identity = summary["identity"]
        lines.append(f"ledger identity {identity['identity']}, recorded in {identity['file']}:")
        lines += [f"  {line}" for line in identity["history"]]
    if secure or summary["worst_case_epsilon_budget"] is not None:
        lines += _worst_case_lines(summary)
    lines += ["", *_run_table(summary["runs"], secure), "", STATUS_NOTE, "", COMPOSITION_NOTE]
    lines += ["", *_policy_lines(summary["policy_events"])]
    lines += ["", f"{'data file (SHA-256)':<24} {'releases':>8} {'epsilon':>9}"]
    for data in summary["datasets"]:
        lines.append(
            f"{data['data_fingerprint'][:24]:<24} {data['releases']:>8} {data['epsilon']:>9.4f}"
        )
    if secure:
        lines += ["", WORST_CASE_NOTE]
    return "\n".join(lines)


def _worst_case_lines(summary: dict[str, Any]) -> list[str]:
    """The worst-case bound, its spending, and one sentence saying what they mean."""
    bound, left = summary["worst_case_epsilon_budget"], summary["worst_case_epsilon_remaining"]
    line = (f"worst case (secure sums bypassed): budget "
            f"{'none' if bound is None else f'{bound:g}'}, spent "
            f"{summary['worst_case_epsilon_spent']:.4f}"
            + ("" if bound is None else f", remaining {left:.4f}"))
    return [line, WORST_CASE_MEANING if bound is not None else NO_WORST_CASE_MEANING]


def _run_table(runs: Sequence[dict[str, Any]], secure: bool) -> list[str]:
    """The runs, one row each (and a line of what each released, when recorded)."""
    worst = f" {'worst case':>10}" if secure else ""
    lines = ["runs (the run id is the coordinator's; times UTC):",
             f"{'#':>3} {'run':<24} {'algorithms':<20} {'releases':>9} {'epsilon':>9}{worst} "
             f"{'lifetime':>9}  {'started':<20}  {'last release':<20}  status"]
    for run in runs:
        worst = f" {run['epsilon_worst_case']:>10.4f}" if secure else ""
        releases = f"{run['releases']}/{run['planned'] or '?'}"
        lines.append(
            f"{run['number']:>3} {run['run_id']:<24} {','.join(run['algorithms']):<20} "
            f"{releases:>9} {run['epsilon']:>9.4f}{worst} {run['lifetime_epsilon_after']:>9.4f}"
            f"  {iso_utc(run['started']):<20}  {iso_utc(run['last']):<20}  {shown_status(run)}"
        )
        released = released_text(run["description"])
        if released:
            lines.append(f"{'':>3} released: {released}")
        if run.get("key_list"):
            lines.append(f"{'':>3} secure sums: {run['key_list']}")
    return lines


def shown_status(run: Mapping[str, Any]) -> str:
    """A run's status as printed: ``failed: REASON`` (its budget stays spent), ``stopped``
    (``may still be running`` when its last release is recent), else the status."""
    if run["status"] == "failed":
        return f"failed: {run['reason'] or 'no reason given'} (its released budget stays spent)"
    if run["status"] == "stopped" and run["may_be_running"]:
        return "stopped (may still be running: its last release is less than an hour old)"
    return run["status"]


def released_text(description: Mapping[str, Any]) -> str:
    """What a run released as the site planned it: algorithm, ``k``, centring, contract
    (first :data:`CONTRACT_SHOWN` hex), from its recorded description (``""``: none)."""
    parts = []
    if description.get("algorithm"):
        parts.append(str(description["algorithm"]))
    if description.get("k") is not None:
        parts.append(f"k={description['k']}")
    if "centring" in description:
        parts.append(f"centring {description['centring'] or 'none'}")
    if "contract" in description:
        contract = str(description["contract"] or "")
        parts.append(f"contract {contract[:CONTRACT_SHOWN]}" if contract else "no contract")
    return ", ".join(parts)


def _policy_lines(events: Sequence[dict[str, Any]]) -> list[str]:
    """The policy's recorded changes, one dated row each."""
    lines = ["policy changes (dated by the site's clock when the ledger was first opened "
             "under them):"]
    if not events:
        return lines + ["  none recorded (the policy is recorded when a run or command "
                        "opens the ledger)"]
    return lines + [f"  {iso_utc(event['time'])}  {sentence}" for event in events
                    for sentence in event_sentences(event)]


def event_sentences(event: Mapping[str, Any]) -> list[str]:
    """What one recorded policy event says (:func:`fedpca.site.policy_changes.sentences`
    for the first recording, one sentence per change after)."""
    if not event["changes"]:
        return policy_changes.sentences(None, event["policy"])
    return [f"{key} {old} -> {new}" for key, old, new in event["changes"]]


def counted_runs(runs: int) -> str:
    """A run count as printed: ``at least N`` at :data:`MAX_RUNS_COUNTED`."""
    return f"at least {runs}" if runs >= MAX_RUNS_COUNTED else str(runs)


def _runs_left(runs: int | str, now: int | str | None, releases: int | None) -> str:
    """How many more full runs (of ``releases`` each) fit the lifetime budget and how many
    of them fit now (the spending windows), or why the site does not offer the run."""
    if isinstance(runs, str):
        return f"not offered ({runs})"
    today = "" if now is None else f" ({counted_runs(int(now))} now, within the spending windows)"
    each = "" if releases is None else f", {releases} releases a run"
    return counted_runs(runs) + today + each


def _window_line(window: dict[str, Any]) -> str:
    """One spending window of the summary: what it holds, its ceiling and its spending."""
    ceiling = window["epsilon_ceiling"]
    return (
        f"{window['window']} ceiling {'none' if ceiling is None else f'{ceiling:g}'} over "
        f"{WINDOWS[window['window']]}, from {utc_text(window['since'])}: spent "
        f"{window['epsilon_spent']:.4f}"
        + ("" if ceiling is None else f", remaining {window['epsilon_remaining']:.4f}")
        + f" in {window['releases']} releases"
    )


def iso_utc(seconds: float) -> str:
    """Unix ``seconds`` in ISO 8601 UTC, to the second: ``2026-11-26T00:51:27Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


#: The summary's times (Unix seconds), shown in ISO 8601 by :func:`ledger_json`.
_TIMES = ("now", "since", "first", "last", "started", "ended", "time")
#: What :func:`ledger_json` shows as recorded (a run's description, a policy's settings).
_AS_RECORDED = ("description", "policy")


def ledger_json(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as ``--json`` prints it: every time in ISO 8601 UTC with its Unix seconds
    beside it (``time`` and ``time_unix``), and every release's noise
    (:func:`release_noise`)."""
    shown = _iso_times(summary)
    shown["rows"] = [{**row, **release_noise(summary["rows"][i])}
                     for i, row in enumerate(shown["rows"])]
    return shown


def _iso_times(value: Any) -> Any:
    """``value`` (dicts and lists within) with each time key ``K`` in ISO 8601 and ``K_unix``."""
    if isinstance(value, list):
        return [_iso_times(item) for item in value]
    if not isinstance(value, dict):
        return value
    shown: dict[str, Any] = {}
    for key, item in value.items():
        if key in _TIMES and isinstance(item, (int, float)):
            shown[key], shown[f"{key}_unix"] = iso_utc(item), item
        else:
            shown[key] = item if key in _AS_RECORDED else _iso_times(item)
    return shown


def release_noise(row: Mapping[str, Any]) -> dict[str, Any]:
    """A release's noise as an auditor reads it: ``noise_multiplier`` (``sigma /
    sensitivity``, what the accountant composes, the same in any unit), ``noise_units``,
    and ``sigma_data_units`` and ``sensitivity_data_units``: the stored values for a
    continuous Gaussian; times the grid step for a release on a grid (a distributed discrete
    Gaussian, whose sigma is that of every revealed sum of ``M`` sites, or a site's exact
    noise); ``None`` for a grid release an older fedpca recorded without its grid step,
    whose data units are not known."""
    noise = {"noise_multiplier": row["sigma"] / row["sensitivity"]}
    step = row.get("grid_step", 0.0)
    if not row["summands"]:
        return {**noise, "noise_units": "data", "sigma_data_units": row["sigma"],
                "sensitivity_data_units": row["sensitivity"]}
    if not step:
        return {**noise, "noise_units": "grid steps of a size not recorded (an older fedpca)",
                "sigma_data_units": None, "sensitivity_data_units": None}
    return {**noise, "noise_units": f"grid steps of {step!r} (sigma and sensitivity as stored)",
            "sigma_data_units": row["sigma"] * step,
            "sensitivity_data_units": row["sensitivity"] * step}


def spending_series(ledger: SiteLedger, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The spending after every release of ``summary`` (:func:`summarize` of ``ledger``),
    per run: the lifetime epsilon of every release up to it, and the epsilon of the releases
    up to it inside the day (UTC) and the 7 x 24 hours that held it, each as the charge of
    that release composed them (the ledger's accountant, at its delta); with the budgets
    they are held to, and when the policy changed (its recorded changes after the first
    recording). One composition per release and window (the accountant caches repeats)."""
    rows = summary["rows"]
    runs = {run["run_id"]: {"run_id": run["run_id"], "number": run["number"],
                            "status": run["status"], "points": []}
            for run in summary["runs"]}
    for row in rows:
        before = [r for r in rows if r["id"] <= row["id"]]
        point = {"release": row["id"], "time": iso_utc(row["time"]), "time_unix": row["time"],
                 "lifetime_epsilon": ledger.epsilon_of(before)}
        for window, since in window_starts(row["time"]).items():
            point[f"{window}_epsilon"] = ledger.epsilon_of(
                [r for r in before if r["time"] >= since])
        runs[row["run_id"]]["points"].append(point)
    return {
        "site": summary["site"], "population": summary["population"],
        "delta": summary["delta"],
        "budgets": {"lifetime": summary["epsilon_budget"],
                    **{w["window"]: w["epsilon_ceiling"] for w in summary["windows"]}},
        "runs": list(runs.values()),
        "policy_changes": [
            {"time": iso_utc(event["time"]), "time_unix": event["time"],
             "changes": event_sentences(event)}
            for event in summary["policy_events"] if event["changes"]],
    }

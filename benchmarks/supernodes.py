"""(i) Many real SuperNodes (issue 14): round latency of the loopback deployment, 3 vs 20 sites,
and a SuperNode killed mid-run.

    python benchmarks/supernodes.py            # ~15 min on 2 cores
    python benchmarks/supernodes.py --quick    # smoke test: 3 vs 5 SuperNodes, ~3 min

Writes ``benchmarks/results/supernodes.json`` (every number) and the "Many SuperNodes
(loopback deployment)" section of ``benchmarks/results/scale.md`` (other sections of that
file are kept). ``--quick`` writes ``supernodes.quick.json`` and ``scale.quick.md`` instead.

* **Deployment**: :class:`fedpca.deployment.local.LocalDeployment`, exactly what ``fedpca
  deploy local`` runs: one ``flower-superlink`` (TLS, ``--enable-supernode-auth``) and per
  site a ``flower-supernode --isolation process`` with its own key, port, policy file and
  SQLite ledger, plus the site's ``fedpca site superexec``; every process on 127.0.0.1.
* **Data**: the DPS-PCA synthetic model of ``tests/test_deployment.py`` (d = 30, k = 2,
  s = 5, s-hat = 8), the same number of records per site (10000) whatever the site count;
  each site's policy is ``fedpca site init``'s (its own budget, OS noise).
* **Runs**: ``flwr run`` of the configuration-only App, DPS-PCA with ``rounds = 3`` (one
  initial round and three power rounds: 4 Flower rounds; ``--quick``: 2 and 3). The 3-site and the 20-site
  deployments are measured one after the other, twice each (3, 20, 3, 20), on the same
  machine; each deployment is started afresh for every run.
* **Round latency**: Flower's fit workflow logs in the ServerApp when all of a round's
  replies are in (``aggregate_fit: received R results and F failures``); ``flwr run
  --stream`` streams that log (Flower sends logs every 0.5 s) and the benchmark stamps each
  such line when it appears (polled every 0.2 s). A round's latency is the time between two
  consecutive round lines, so round 1 (which also
  holds the run's start: FAB upload, ServerApp start-up, waiting for every site) is not
  counted; it is reported as "first round". Start-up is the time from nothing to every
  process started (certificates, SuperLink listening, keys registered, SuperNodes and
  SuperExecs launched).
* **Memory**: about once a second, the sum over every process of the deployment (those
  carrying its ``FEDPCA_DEPLOYMENT`` marker: SuperLink, SuperNodes, SuperExecs, ServerApp and
  ClientApp processes, ``flwr`` CLI) of ``Pss`` (``/proc/PID/smaps_rollup``: shared pages
  split between the processes sharing them) and of ``VmRSS`` (which counts shared pages once
  per process); the peak of each sum.
* **Killed SuperNode**: on the last 20-site deployment, a run with ``min-sites = 15``; once
  the first round's line appears, one site's SuperNode gets SIGKILL by PID
  (:meth:`~fedpca.deployment.local.LocalDeployment.kill_site`; its SuperExec is then
  stopped). Flower's SuperLink declares a node offline when its heartbeat is overdue
  (2 x 30 s in flwr 1.41), then answers the messages addressed to it with "node
  unavailable"; the run must finish with the other sites. Reported: whether it finished,
  the sites that answered each round, and the failures the ServerApp logged.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: Section markers in scale.md: only the text between them is rewritten.
BEGIN = "<!-- BEGIN supernodes (benchmarks/supernodes.py) -->"
END = "<!-- END supernodes -->"
TITLE = "## Many SuperNodes (loopback deployment)"
#: The run as the coordinator sends it (privacy comes from each site's own policy).
RUN_CONFIG = {"dim": 30, "k": 2, "sparsity": 5, "s-hat": 8, "data-seed": 3, "epsilon": 1000.0}
RECORDS_PER_SITE = 10_000
FULL = {"sizes": (3, 20), "repeats": 2, "rounds": 3, "kill": {"sites": 20, "min_sites": 15}}
QUICK = {"sizes": (3, 5), "repeats": 1, "rounds": 2, "kill": {"sites": 5, "min_sites": 3}}
#: What Flower's fit workflow logs in the ServerApp once a round's replies are all in.
ROUND_LINE = re.compile(r"aggregate_fit: received (\d+) results and (\d+) failures")
#: A site failure the strategy logs (fedpca.flower.server.rounds).
FAILURE_LINE = re.compile(r"round (\d+): a site failed: (.*)")
MEMORY_EVERY = 1.0
RUN_TIMEOUT = 900.0
MIB = 2**20


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _proc_kib(path: str, key: str) -> int:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:  # exited meanwhile
        pass
    return 0


class RunWatch:
    """The ``during`` callback of a run: stamps the ServerApp's round lines as they appear,
    samples the deployment's memory, and kills a site after a given round if asked."""

    def __init__(self, deployment, kill_after: int | None = None, victim: str | None = None):
        self.deployment = deployment
        self.kill_after, self.victim = kill_after, victim
        self.started = time.perf_counter()
        self.rounds: dict[int, float] = {}
        self.replies: list[tuple[int, int]] = []
        self.failures: list[tuple[int, str]] = []
        self.killed: dict[str, Any] | None = None
        self.peak = {"pss_mib": 0.0, "rss_mib": 0.0, "processes": 0}
        self._offset = 0
        self._partial = b""
        self._sampled = 0.0

    def __call__(self, flwr) -> None:
        now = time.perf_counter()
        with flwr.log.open("rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace")
            if match := ROUND_LINE.search(line):
                self.rounds[len(self.rounds) + 1] = now - self.started
                self.replies.append((int(match.group(1)), int(match.group(2))))
            elif match := FAILURE_LINE.search(line):
                self.failures.append((int(match.group(1)), match.group(2).strip()))
        if (self.kill_after is not None and self.killed is None
                and self.kill_after in self.rounds):
            pid = self.deployment.kill_site(self.victim)
            self.killed = {"site": self.victim, "pid": pid, "after_round": self.kill_after,
                           "at_s": time.perf_counter() - self.started}
            progress(f"  killed site {self.victim}'s SuperNode (pid {pid}, SIGKILL) after "
                     f"round {self.kill_after}")
        if now - self._sampled >= MEMORY_EVERY:
            self._sampled = now
            self.sample_memory()

    def sample_memory(self) -> None:
        pids = self.deployment.leftovers()
        pss = sum(_proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in pids) / 1024
        rss = sum(_proc_kib(f"/proc/{pid}/status", "VmRSS:") for pid in pids) / 1024
        if pss > self.peak["pss_mib"]:
            self.peak["processes"] = len(pids)
        self.peak["pss_mib"] = max(self.peak["pss_mib"], pss)
        self.peak["rss_mib"] = max(self.peak["rss_mib"], rss)

    def latencies(self) -> list[float]:
        """Seconds between consecutive round lines (rounds 2, 3, ...)."""
        stamps = [self.rounds[r] for r in sorted(self.rounds)]
        return [b - a for a, b in itertools.pairwise(stamps)]


def _sites(work: Path, n: int, rounds: int):
    from fedpca.deployment.local import Site
    from fedpca.site.policy_template import TEMPLATE_EPSILON, write_policy_template
    from fedpca.scenarios.dps_pca import DPSPCAScenario

    scenario = DPSPCAScenario.from_run_config(
        {**RUN_CONFIG, "rounds": rounds, "samples": RECORDS_PER_SITE * n}, sites=n
    )
    sites = []
    for i, records in enumerate(scenario.all_site_data()):
        assert len(records) == RECORDS_PER_SITE
        folder = work / f"site-{i}"
        folder.mkdir()
        data = folder / "records.npy"
        np.save(data, records)
        # two runs within minutes: the day's and the week's ceilings are the lifetime's
        policy = write_policy_template(folder / "policy.toml", str(i), str(data), rounds=rounds,
                                       daily_epsilon=TEMPLATE_EPSILON,
                                       weekly_epsilon=TEMPLATE_EPSILON)
        sites.append(Site(str(i), data, policy))
    return sites


def measure(n: int, rounds: int, kill: dict[str, int] | None = None) -> dict[str, Any]:
    """Start a deployment of ``n`` sites, run DPS-PCA once (and, with ``kill``, once more
    with a site killed after round 1), stop everything; return the figures."""
    from fedpca.deployment.launch import DeploymentError
    from fedpca.deployment.local import LocalDeployment

    config = {**RUN_CONFIG, "rounds": rounds, "samples": RECORDS_PER_SITE * n, "min-sites": n}
    with tempfile.TemporaryDirectory(prefix=f"fedpca-supernodes-{n}-") as tmp:
        work = Path(tmp)
        sites = _sites(work, n, rounds)
        started = time.perf_counter()
        deployment = LocalDeployment(work / "deployment", sites)
        with deployment:
            startup = time.perf_counter() - started
            watch = RunWatch(deployment)
            watch.sample_memory()
            idle = dict(watch.peak)
            result = deployment.run(config, timeout=RUN_TIMEOUT, during=watch)
            run_s = time.perf_counter() - watch.started
            row = {
                "supernodes": n, "records_per_site": RECORDS_PER_SITE,
                "flower_rounds": len(result.history), "startup_s": startup,
                "first_round_s": watch.rounds.get(1), "run_s": run_s,
                "wall_seconds": result.config.get("wall_seconds"),
                "round_latency_s": watch.latencies(), "round_stamps_s": watch.rounds,
                "sites_answered": [len(s) for s in result.sites_answered],
                "distance": result.history[-1].get("distance"),
                "memory_idle": idle, "memory_peak": watch.peak,
                "processes_started": len(deployment.launched),
            }
            if kill is not None:
                victim = sites[-1].name
                watch = RunWatch(deployment, kill_after=1, victim=victim)
                killed = {"supernodes": n, "min_sites": kill["min_sites"]}
                try:
                    result = deployment.run({**config, "min-sites": kill["min_sites"]},
                                            timeout=RUN_TIMEOUT, during=watch)
                except DeploymentError as exc:
                    killed.update(finished=False, error=str(exc)[-2000:])
                else:
                    killed.update(
                        finished=True,
                        sites_answered=[len(s) for s in result.sites_answered],
                        victim_answered=[victim in s for s in result.sites_answered],
                        history_sites=[e.get("sites") for e in result.history],
                        distance=result.history[-1].get("distance"),
                        wall_seconds=result.config.get("wall_seconds"),
                    )
                killed.update(
                    killed_site=watch.killed, run_s=time.perf_counter() - watch.started,
                    round_latency_s=watch.latencies(), round_stamps_s=watch.rounds,
                    failures_logged=[{"round": r, "reason": why[:300]}
                                     for r, why in watch.failures],
                )
                row["killed"] = killed
        row["leftover_processes"] = len(deployment.leftovers())
    return row


def summarise(runs: list[dict[str, Any]], sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """One line per site count: start-up, first round and round latency over every run."""
    lines = []
    for n in sizes:
        mine = [r for r in runs if r["supernodes"] == n]
        latency = [x for r in mine for x in r["round_latency_s"]]
        lines.append({
            "supernodes": n, "runs": len(mine), "rounds_timed": len(latency),
            "startup_s_median": statistics.median(r["startup_s"] for r in mine),
            "first_round_s_median": statistics.median(r["first_round_s"] for r in mine),
            "round_s_median": statistics.median(latency),
            "round_s_min": min(latency), "round_s_max": max(latency),
            "peak_pss_mib": max(r["memory_peak"]["pss_mib"] for r in mine),
            "peak_rss_mib": max(r["memory_peak"]["rss_mib"] for r in mine),
            "idle_pss_mib": max(r["memory_idle"]["pss_mib"] for r in mine),
            "peak_processes": max(r["memory_peak"]["processes"] for r in mine),
        })
    return lines


def run(quick: bool = False) -> dict[str, Any]:
    setting = QUICK if quick else FULL
    sizes, kill = setting["sizes"], setting["kill"]
    runs = []
    order = [n for _ in range(setting["repeats"]) for n in sizes]
    for i, n in enumerate(order):
        last = i == max(j for j, m in enumerate(order) if m == kill["sites"])
        progress(f"{n} SuperNodes (run {i + 1}/{len(order)})"
                 + (f", then a run with min-sites={kill['min_sites']} and one killed" if last else ""))
        row = measure(n, setting["rounds"], kill if last else None)
        progress(f"  start-up {row['startup_s']:.1f} s, rounds "
                 + ", ".join(f"{x:.1f}" for x in row["round_latency_s"])
                 + f" s, peak PSS {row['memory_peak']['pss_mib']:.0f} MiB")
        runs.append(row)
    summary = summarise(runs, sizes)
    small, large = summary[0], summary[-1]
    killed = next(r["killed"] for r in runs if "killed" in r)
    return {"rounds": setting["rounds"], "records_per_site": RECORDS_PER_SITE,
            "run_config": RUN_CONFIG, "runs": runs, "summary": summary,
            "ratio": large["round_s_median"] / small["round_s_median"], "killed": killed}


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _killed_text(killed: dict[str, Any]) -> str:
    who = killed.get("killed_site") or {}
    head = (f"{killed['supernodes']} SuperNodes, `min-sites = {killed['min_sites']}`: site "
            f"{who.get('site', '?')}'s SuperNode (pid {who.get('pid', '?')}) got SIGKILL "
            f"{_fmt(who.get('at_s'))} s into the run, after round {who.get('after_round', '?')}.")
    if not killed.get("finished"):
        return head + f" **The run did not finish**: {killed.get('error', '?')}"
    failures = killed["failures_logged"]
    reasons = sorted({f["reason"] for f in failures})
    return "\n".join([
        head + f" **The run finished** ({_fmt(killed['run_s'])} s); sites that answered, per "
        f"Flower round: {', '.join(map(str, killed['sites_answered']))}; the killed site's "
        f"answer used: {', '.join('yes' if v else 'no' for v in killed['victim_answered'])}; "
        f"final distance {_fmt(killed.get('distance'), 3)}. Round latencies of that run (s): "
        f"{', '.join(_fmt(x) for x in killed['round_latency_s'])}.",
        "",
        (f"Failures the ServerApp logged: {len(failures)}, in rounds "
         f"{sorted({f['round'] for f in failures})}: " + "; ".join(f"`{r}`" for r in reasons))
        if failures else "Failures the ServerApp logged: none.",
    ])


def section(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    rows = [[s["supernodes"], s["runs"], s["rounds_timed"], s["startup_s_median"],
             s["first_round_s_median"], s["round_s_median"], s["round_s_min"], s["round_s_max"],
             s["peak_pss_mib"], s["peak_rss_mib"], s["idle_pss_mib"], s["peak_processes"]]
            for s in doc["summary"]]
    per_run = [[r["supernodes"], _fmt(r["startup_s"]), _fmt(r["first_round_s"]),
                ", ".join(_fmt(x) for x in r["round_latency_s"]), _fmt(r["wall_seconds"]),
                ", ".join(map(str, r["sites_answered"])), _fmt(r["distance"], 3)]
               for r in doc["runs"]]
    small, large = doc["summary"][0], doc["summary"][-1]
    return "\n".join([
        BEGIN,
        TITLE + (" (quick mode: small sizes)" if doc["quick"] else ""),
        "",
        f"Generated {m['date']} by `{doc['command']}` in {doc['seconds']:.0f} s.",
        "",
        (f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['platform']}; "
         f"Python {m['python']}, flwr {m['flwr']}, numpy {m['numpy']}; load average before "
         f"the runs {doc['load_before']}, after {doc['load_after']} (a shared VM: other "
         "engineers' jobs ran meanwhile)."),
        "",
        ("Each site is a real `flower-supernode --isolation process` (TLS, SuperNode "
         "authentication, own key, port, policy file and SQLite ledger) with its own `fedpca "
         "site superexec`; one `flower-superlink`; all on 127.0.0.1 (`LocalDeployment`, what "
         f"`fedpca deploy local` runs). DPS-PCA, d = {doc['run_config']['dim']}, k = "
         f"{doc['run_config']['k']}, {doc['records_per_site']} records per site, rounds = "
         f"{doc['rounds']} ({doc['rounds'] + 1} Flower rounds). Round latency: time between "
         "two consecutive `aggregate_fit: received ...` lines of the ServerApp's streamed log "
         "(rounds 2 and later; "
         "round 1 also holds the run's start and is the \"first round\" column). Start-up: "
         "certificates, SuperLink, key registration, every SuperNode and SuperExec started. "
         "Memory: peak over the run of the sum over all the deployment's processes of Pss "
         "(shared pages split) and of RSS (shared pages counted per process); \"idle\" is "
         "the Pss sum right after start-up. See the docstring of `benchmarks/supernodes.py`."),
        "",
        (f"**Round latency, {large['supernodes']} vs {small['supernodes']} SuperNodes "
         f"(median): {large['round_s_median']:.2f} s vs {small['round_s_median']:.2f} s, "
         f"ratio {doc['ratio']:.2f}.**"),
        "",
        _table(["SuperNodes", "runs", "rounds timed", "start-up s (median)",
                "first round s (median)", "round s (median)", "round s (min)",
                "round s (max)", "peak Pss MiB", "peak RSS MiB", "idle Pss MiB",
                "processes at peak"], rows),
        "",
        _table(["SuperNodes", "start-up s", "first round s", "round latencies s",
                "ServerApp wall s", "sites answered per round", "final distance"], per_run),
        "",
        "**A SuperNode killed mid-run.** " + _killed_text(doc["killed"]),
        END,
    ])


def replace_section(path: Path, text: str, begin: str = BEGIN, end: str = END,
                    title: str = "# Scaling benchmarks") -> None:
    """Write ``text`` (which starts with ``begin`` and ends with ``end``) into ``path`` in
    place of the text between those markers, or at its end; other sections are kept."""
    current = path.read_text() if path.exists() else title + "\n"
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        current = head + text + rest.split(end, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(current)


def write(doc: dict[str, Any], quick: bool) -> tuple[Path, Path]:
    json_path = RESULTS / ("supernodes.quick.json" if quick else "supernodes.json")
    md_path = RESULTS / ("scale.quick.md" if quick else "scale.md")
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    replace_section(md_path, section(doc))
    return json_path, md_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 vs 5 SuperNodes, 2 rounds")
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.path.insert(0, str(HERE))
    from common import machine_info

    start = time.perf_counter()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    doc = run(args.quick)
    command = "python benchmarks/supernodes.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    doc = {"machine": machine_info(), "quick": args.quick, "command": command,
           "seconds": time.perf_counter() - start, "load_before": load_before,
           "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()), **doc}
    json_path, md_path = write(doc, args.quick)
    small, large = doc["summary"][0], doc["summary"][-1]
    progress(f"round latency {large['supernodes']} vs {small['supernodes']} SuperNodes: "
             f"{large['round_s_median']:.2f} s vs {small['round_s_median']:.2f} s "
             f"(ratio {doc['ratio']:.2f}); killed-SuperNode run finished: "
             f"{doc['killed'].get('finished')}")
    progress(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

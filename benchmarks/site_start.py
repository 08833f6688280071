"""A real site's ClientApp start against Flower's own, as whole fresh processes.

At a real site every message starts a fresh ClientApp process (``fedpca site superexec``
launches ``fedpca-site-clientapp``, :mod:`fedpca.deployment.site_runtime`, for each task).
Each side below is one such process, started afresh, alternating (Flower, fedpca, Flower,
...), timed as a whole from the parent (wall time, and CPU time of the child: user + system,
Python's own start-up included):

* **Flower**: Flower's ClientApp entry machinery (``flwr.supernode.runtime.run_clientapp``,
  what ``flwr-clientapp`` runs) and a trivial ClientApp defined in the process, answering
  one QUERY message with one ConfigRecord;
* **fedpca**: the same entry machinery, fedpca's pinned runtime
  (:mod:`fedpca.deployment.site_runtime`) and the real site's ClientApp
  (``fedpca.flower.app:client_app``, pyproject's ``[tool.flwr.app.components] clientapp``),
  answering the readiness question of a DPS-PCA run at a real site (its policy file, records
  and SQLite ledger in a temporary folder written by ``write_policy_template``): the site
  loads its policy, plans the run, calibrates its noise, checks its ledger and reads its
  records, as the first message of a run does.

No network: the message is built in the process (Flower's Runtime API round trip is the
same for both). Then the same at work: an honest secure DPdisPCA run (secure sums, three real
sites, TLS and node authentication on loopback: :mod:`secure_loopback`'s deployment), with
each ClientApp task a fresh process (``FEDPCA_CLIENTAPP_FORKS=off``, as before the fork
server) and forked from the site's warm process (the default), alternating; per run, the
run's wall time and the CPU time of the whole deployment (its start included). fedpca's modules are compiled to bytecode first, as a site's installed
package has them (pip compiles an install's modules, Flower's included): without it, an
editable install run with ``PYTHONDONTWRITEBYTECODE`` set would compile every fedpca
module from source in every process, which no site does. Target (issue 33): fedpca's CPU time <= 1.3 x Flower's, median of the runs.

    OPENBLAS_NUM_THREADS=1 python benchmarks/site_start.py [--quick]

writes ``results/site_start.{json,md}`` (``--quick``: 3 runs each, ``site_start.quick.*``).
"""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import machine_info, md_table, progress, quick_option, target, write_results
from secure_loopback import RUN_CONFIG, deployment
from secure_loopback import SITES as SECURE_SITES  # type: ignore[import-not-found]

import fedpca
from fedpca.deployment.site_runtime import FORKS_ENV
from fedpca.dp.calibration_cache import DIRECTORY_VARIABLE

HERE = Path(__file__).resolve().parent
LIMIT = 1.3
RUNS, QUICK_RUNS = 15, 3
#: Secure loopback runs of each kind (fresh or forked ClientApp tasks).
LOOPBACK_RUNS, QUICK_LOOPBACK_RUNS = 3, 1
#: The two kinds of ClientApp task, by the value of FORKS_ENV.
TASKS = {"off": "a fresh process per task", "on": "forked from the warm process"}
#: fedpca's ClientApp with no calibration kept on the site's disk (a policy's first message).
COLD = "fedpca real-site ClientApp, calibrating (nothing kept)"

#: Both processes: Flower's ClientApp entry, and the run's identity Flower sets in a task.
PRELUDE = """
import flwr.supernode.runtime.run_clientapp
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.supercore.task_identity import TaskIdentity
for attribute in ("_task_id", "_run_id", "_node_id"):
    setattr(TaskIdentity, attribute, 1)
"""

FLOWER = PRELUDE + """
from flwr.clientapp import ClientApp
app = ClientApp()

@app.query()
def query(message, context):
    return Message(RecordDict({"budget": ConfigRecord({"ready": True})}), reply_to=message)

question = RecordDict({"budget": ConfigRecord()})
context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
"""

FEDPCA = PRELUDE + """
import sys
import fedpca.deployment.site_runtime
from fedpca.flower.app import client_app as app
from fedpca.flower.wire import readiness_question

question = readiness_question()
context = Context(run_id=1, node_id=1, node_config={"policy": sys.argv[1]},
                  state=RecordDict(), run_config={"algorithm": "dps-pca", "dim": 20})
"""

ANSWER = """
reply = app(Message(content=question, dst_node_id=1, message_type=MessageType.QUERY), context)
assert not reply.has_error(), reply.error.reason
"""


def real_site(folder: Path) -> Path:
    """A real site's folder: 2,000 records x 20 columns, its policy and empty ledger."""
    import numpy as np

    from fedpca.site.policy_template import write_policy_template

    rng = np.random.default_rng(0)
    np.save(folder / "records.npy", rng.uniform(-0.2, 0.2, size=(2000, 20)))
    return write_policy_template(folder / "policy.toml", "hospital-a", "records.npy",
                                 delta=1e-7)


def one_process(script: str, *args: str) -> tuple[float, float]:
    """``(wall s, CPU s)`` of a fresh ``python -c script args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", script, *args], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run(quick: bool = False) -> list[dict[str, Any]]:
    runs = QUICK_RUNS if quick else RUNS
    compileall.compile_dir(Path(fedpca.__file__).parent, quiet=1)  # as a site's install has it
    with tempfile.TemporaryDirectory(prefix="fedpca-site-start-") as folder:
        policy = str(real_site(Path(folder)))
        kept = Path(folder) / "calibrations"
        os.environ[DIRECTORY_VARIABLE] = str(kept)  # the children's, not the user's cache
        sides = {"Flower ClientApp": (FLOWER + ANSWER, ()),
                 "fedpca real-site ClientApp": (FEDPCA + ANSWER, (policy,)),
                 COLD: (FEDPCA + ANSWER, (policy,))}
        for script, args in sides.values():  # warm the file cache; check each answers
            one_process(script, *args)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for i in range(runs):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for name in order:
                if name == COLD:  # the run's first message: nothing kept yet
                    shutil.rmtree(kept, ignore_errors=True)
                script, args = sides[name]
                times[name].append(one_process(script, *args))
            progress(f"site_start: {i + 1}/{runs}")
    rows = [{"side": name, "runs": runs,
             "median_cpu_s": statistics.median(c for _, c in t),
             "min_cpu_s": min(c for _, c in t),
             "median_wall_s": statistics.median(w for w, _ in t),
             "min_wall_s": min(w for w, _ in t)} for name, t in times.items()]
    flower = rows[0]
    for row in rows:
        row["cpu_ratio"] = row["median_cpu_s"] / flower["median_cpu_s"]
        row["wall_ratio"] = row["median_wall_s"] / flower["median_wall_s"]
    return rows


def loopback_runs(quick: bool = False) -> list[dict[str, Any]]:
    """Median wall time of the secure run and CPU time of its deployment, per kind of task."""
    runs = QUICK_LOOPBACK_RUNS if quick else LOOPBACK_RUNS
    times: dict[str, list[tuple[float, float]]] = {mode: [] for mode in TASKS}
    for i in range(runs):
        for mode in (TASKS if i % 2 == 0 else reversed(TASKS)):
            os.environ[FORKS_ENV] = mode
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            with tempfile.TemporaryDirectory(prefix="fedpca-site-start-") as folder:
                with deployment(Path(folder)) as local:
                    start = time.perf_counter()
                    result = local.run(dict(RUN_CONFIG), timeout=900)
                    wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if result.sites_answered[0] != list(SECURE_SITES):
                raise RuntimeError(f"a site was left out of the sum: {result.sites_answered}")
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            times[mode].append((wall, cpu))
            progress(f"secure loopback run {i + 1}/{runs}, {TASKS[mode]}: {wall:.1f} s, "
                     f"deployment CPU {cpu:.1f} s")
    os.environ.pop(FORKS_ENV)
    return [{"tasks": TASKS[mode], "runs": runs,
             "median_run_wall_s": statistics.median(w for w, _ in t),
             "median_deployment_cpu_s": statistics.median(c for _, c in t)}
            for mode, t in times.items()]


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    return [target("fedpca / Flower ClientApp process, CPU s (median)", rows[1]["cpu_ratio"],
                   LIMIT, measured=not quick)]


def markdown(doc: dict[str, Any]) -> str:
    rows, m = doc["rows"], doc["machine"]
    lines = [
        "# A real site's ClientApp start against Flower's own",
        "",
        f"Generated {m['date']} by `python benchmarks/site_start.py"
        + (" --quick" if doc["quick"] else "") + f"` ({m['cores']} cores, {m['cpu']}, "
        f"flwr {m['flwr']}, numpy {m['numpy']}, scipy {m['scipy']}).",
        "",
        "Each run is a fresh process: Flower's ClientApp entry machinery and a trivial "
        "ClientApp answering one query, against the same plus fedpca's pinned runtime and "
        "real-site ClientApp answering a DPS-PCA run's readiness question (policy, plan, "
        "calibration, ledger, records), fedpca's modules compiled to bytecode as an "
        "install has them. Alternating order; CPU = user + system of the child.",
        "",
        md_table(["side", "runs", "CPU s (median)", "CPU s (min)", "wall s (median)",
                  "wall s (min)", "CPU ratio", "wall ratio"],
                 [[r["side"], r["runs"], r["median_cpu_s"], r["min_cpu_s"],
                   r["median_wall_s"], r["min_wall_s"], r["cpu_ratio"], r["wall_ratio"]]
                  for r in rows]),
        "",
        "A secure run on loopback (three real sites, secure sums), before and after the "
        "fork server: median of the alternated runs.",
        "",
        md_table(["ClientApp tasks", "runs", "run wall s (median)",
                  "deployment CPU s (median)"],
                 [[r["tasks"], r["runs"], r["median_run_wall_s"],
                   r["median_deployment_cpu_s"]] for r in doc["loopback"]]),
        "",
        md_table(["target", "value", "limit", "passed"],
                 [[t["target"], t["value"], t["limit"], t["passed"]]
                  for t in doc["targets"]]),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    quick = quick_option(__doc__)
    rows = run(quick)
    doc = {"quick": quick, "machine": machine_info(), "rows": rows,
           "loopback": loopback_runs(quick), "targets": targets(rows, quick)}
    write_results(HERE / "results", "site_start", quick, doc, markdown)
    print(markdown(doc))


if __name__ == "__main__":
    main()

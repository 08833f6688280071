"""A crafted FAB through a real SuperNode (issue 24, item 2): what does it cost a site?

    python benchmarks/fab_bomb.py [--expanded-mb 100]

A hostile coordinator ships an App whose ``pyproject.toml`` holds a long string: a FAB of
about 100 KB that expands to ``--expanded-mb`` MB. Flower's own ``flwr build`` stores FAB
members uncompressed (and refuses a FAB past 10 MB), so the coordinator patches its copy of
the CLI to deflate them (:data:`DEFLATING_CLI`, a ``sitecustomize`` on the coordinator's
``PYTHONPATH`` only); the SuperLink checks only the compressed size. Flower's SuperNode parses every FAB's
``pyproject.toml`` (``get_fused_config_from_fab``) when a run's first message arrives, before
any ClientApp runs. Measured side by side in one run:

* **Flower's parser alone**, in a fresh process per FAB (what an unprotected SuperNode
  spends): the peak resident memory (``VmHWM``) of parsing the honest FAB and the crafted one;
* **a fedpca site on loopback** (``fedpca site supernode`` and ``fedpca site superexec``,
  TLS, node authentication, ``--isolation process``, the policy's memory limit): ``flwr run``
  with the honest App, then with the crafted one. Every 0.1 s the peak resident memory of the
  SuperNode, the SuperExec and every ClientApp process they start is read from
  ``/proc/PID/status``; the table reports each one's peak during each run, whether the run
  was answered or refused, and that the site's processes are still alive after the crafted
  one.

Linux only (``/proc``). Writes ``benchmarks/results/fab_bomb.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import machine_info, md_table  # noqa: E402

from fedpca.deployment.fab_check import config_only_pyproject  # noqa: E402
from fedpca.deployment.launch import DeploymentError  # noqa: E402
from fedpca.deployment.local import LocalDeployment, Site  # noqa: E402
from fedpca.deployment.processes import descendants, process_table  # noqa: E402

RESULTS = HERE / "results"
#: A small run every site can answer (the honest App).
RUN_CONFIG = {"dim": 10, "samples": 400, "k": 2, "sparsity": 3, "s-hat": 4, "rounds": 1,
              "data-seed": 1, "min-sites": 1}
#: Seconds between two reads of the processes' peak memory.
POLL = 0.1
#: Flower's parser on one FAB file, in a fresh process; prints its peak resident KiB.
PARSE = """
import sys
from pathlib import Path
from types import SimpleNamespace
from flwr.common.config import get_fused_config_from_fab
content = open(sys.argv[1], "rb").read()
run = SimpleNamespace(override_config={})
try:
    get_fused_config_from_fab(content, run)
    outcome = "parsed"
except Exception as exc:
    outcome = type(exc).__name__
status = Path("/proc/self/status").read_text().splitlines()
print(outcome, next(line.split()[1] for line in status if line.startswith("VmHWM:")))
"""


#: The coordinator's patch of its own ``flwr`` CLI: FAB members deflated.
DEFLATING_CLI = """
import zipfile
import flwr.cli.build as build


def _deflated(archive, filename, contents):
    info = zipfile.ZipInfo(filename)
    info.date_time = build.FAB_DATE
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, contents)
    return archive


build.write_to_zip = _deflated
"""


def hostile_cli(folder: Path) -> dict[str, str]:
    """The environment of a coordinator whose ``flwr`` CLI deflates FAB members."""
    folder.mkdir(parents=True)
    (folder / "sitecustomize.py").write_text(DEFLATING_CLI)
    return {"PYTHONPATH": str(folder)}


def crafted_app(folder: Path, expanded_mb: int) -> Path:
    """A configuration-only App whose ``pyproject.toml`` carries ``expanded_mb`` MB more."""
    folder.mkdir(parents=True)
    padding = "a" * (expanded_mb * 1024 * 1024)
    (folder / "pyproject.toml").write_text(
        config_only_pyproject() + f'\n[tool.padding]\nvalue = "{padding}"\n'
    )
    return folder


def peak_kib(pid: int) -> int:
    """Peak resident memory (``VmHWM``) of ``pid`` in KiB, 0 when it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakWatcher:
    """Polls the peak memory of a site's SuperNode, SuperExec and their descendants."""

    def __init__(self, roots: dict[str, int]) -> None:
        self.roots = roots
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> PeakWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._read()
            time.sleep(POLL)

    def _read(self) -> None:
        for name, pid in self.roots.items():
            self._keep(name, peak_kib(pid))
            for child in descendants([pid], process_table()) - {pid}:
                self._keep(f"{name} child", peak_kib(child))

    def _keep(self, name: str, kib: int) -> None:
        self.peaks[name] = max(self.peaks.get(name, 0), kib)


def fab_of(app: Path, work: Path, env: dict[str, str]) -> Path:
    """The FAB the coordinator's ``flwr build`` makes of ``app`` (what ``flwr run`` ships)."""
    subprocess.run(["flwr", "build", "--app", str(app)], cwd=work, check=True,
                   capture_output=True, env={**os.environ, **env})
    return max(work.glob("*.fab"), key=lambda p: p.stat().st_mtime)


def parser_alone(fab: Path) -> dict[str, Any]:
    """Flower's own FAB parser on ``fab`` in a fresh process: outcome and peak MiB."""
    out = subprocess.run([sys.executable, "-c", PARSE, str(fab)], capture_output=True,
                         text=True, check=True).stdout.split()
    return {"outcome": out[0], "peak_mib": int(out[1]) / 1024}


def site_run(deployment: LocalDeployment, app: Path) -> dict[str, Any]:
    """``flwr run`` ``app`` against the deployment's one site, watching its processes."""
    site = deployment.running["site"]
    roots = {"SuperNode": site.supernode.process.pid, "SuperExec": site.superexec.process.pid}
    started = time.monotonic()
    with PeakWatcher(roots) as watcher:
        try:
            deployment.run(RUN_CONFIG, timeout=180, app_dir=app)
            outcome, reason = "answered", ""
        except DeploymentError as exc:
            outcome = "refused"
            reason = str(exc).splitlines()[0]
    alive = all(item.process.poll() is None for item in (site.supernode, site.superexec))
    logged = [line for item in (site.supernode, site.superexec)
              for line in item.log.read_text(errors="replace").splitlines()
              if "refused: the App" in line]
    return {"outcome": outcome, "reason": reason, "seconds": time.monotonic() - started,
            "site_log": logged[-1].split("refused: ", 1)[-1] if logged else "",
            "site_alive": alive,
            **{f"peak_mib {name}": kib / 1024 for name, kib in watcher.peaks.items()}}


def run(expanded_mb: int) -> list[dict[str, Any]]:
    """Every measurement, one row per App and place."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        honest = work / "honest"
        honest.mkdir()
        (honest / "pyproject.toml").write_text(config_only_pyproject())
        crafted = crafted_app(work / "crafted", expanded_mb)
        coordinator = hostile_cli(work / "coordinator")
        for label, app in (("honest", honest), ("crafted", crafted)):
            fab = fab_of(app, work, coordinator)
            rows.append({"app": label, "place": "Flower's parser alone",
                         "fab_kb": fab.stat().st_size / 1024, **parser_alone(fab)})
            fab.unlink()
        data = work / "site.npy"
        np.save(data, np.random.default_rng(0).standard_normal((400, 10)) / 10)
        with LocalDeployment(work / "deployment", [Site("site", data)],
                             coordinator_env=coordinator) as deployment:
            for label, app in (("honest", honest), ("crafted", crafted)):
                rows.append({"app": label, "place": "fedpca site on loopback",
                             **site_run(deployment, app)})
    return rows


def markdown(rows: list[dict[str, Any]], expanded_mb: int, seconds: float) -> str:
    """The results page."""
    parser = [r for r in rows if r["place"] == "Flower's parser alone"]
    site = [r for r in rows if r["place"] != "Flower's parser alone"]
    places = sorted({k for r in site for k in r if k.startswith("peak_mib ")})
    return "\n".join([
        "# A crafted FAB through a real SuperNode",
        "",
        f"Generated {machine_info()['date']} by `python benchmarks/fab_bomb.py "
        f"--expanded-mb {expanded_mb}` in {seconds:.0f} s.",
        "",
        f"The crafted App's `pyproject.toml` expands to {expanded_mb} MB. Peak resident "
        "memory (VmHWM, MiB).",
        "",
        "## Flower's FAB parser alone (what an unprotected SuperNode spends)",
        "",
        md_table(["App", "FAB KB", "outcome", "peak MiB"],
                 [[r["app"], f"{r['fab_kb']:.0f}", r["outcome"], f"{r['peak_mib']:.0f}"]
                  for r in parser]),
        "",
        "## A fedpca site (`fedpca site supernode` + `site superexec`, TLS, node auth)",
        "",
        md_table(["App", "run", "site alive after", "seconds",
                  *[p.removeprefix("peak_mib ") for p in places]],
                 [[r["app"], r["outcome"], str(r["site_alive"]), f"{r['seconds']:.1f}",
                   *[f"{r.get(p, 0):.0f}" for p in places]] for r in site]),
        "",
        *[f"* {r['app']}: the site's log says `{r['site_log']}`; the coordinator's run "
          f"ended with `{r['reason']}`" for r in site if r["outcome"] == "refused"],
        "",
        _verdict(parser, site),
        "",
    ])


def _verdict(parser: list[dict[str, Any]], site: list[dict[str, Any]]) -> str:
    """What the crafted App cost the site's SuperNode beside what Flower's parser costs."""
    by_app = {r["app"]: r for r in site}
    grown = by_app["crafted"]["peak_mib SuperNode"] - by_app["honest"]["peak_mib SuperNode"]
    parsed = {r["app"]: r["peak_mib"] for r in parser}
    alive = ("and its processes are still running" if by_app["crafted"]["site_alive"]
             else "but a site process died")
    return (
        f"VmHWM is a process's lifetime peak: during the crafted run the site's SuperNode "
        f"peak grew by {grown:.0f} MiB, where Flower's parser alone spends "
        f"{parsed['crafted'] - parsed['honest']:.0f} MiB more on the crafted FAB than on the "
        f"honest one; the site refused the run ({alive})."
    )


def main() -> None:
    """Run, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expanded-mb", type=int, default=100)
    args = parser.parse_args()
    started = time.monotonic()
    rows = run(args.expanded_mb)
    seconds = time.monotonic() - started
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fab_bomb.json").write_text(json.dumps(
        {"machine": machine_info(), "expanded_mb": args.expanded_mb, "rows": rows}, indent=2))
    page = markdown(rows, args.expanded_mb, seconds)
    (RESULTS / "fab_bomb.md").write_text(page)
    print(page)


if __name__ == "__main__":
    main()

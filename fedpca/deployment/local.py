"""A real Flower deployment of fedpca on loopback: TLS, SuperNode authentication, one
SuperNode per site, each with its own policy file, lifetime ledger and pinned ClientApp.

:class:`LocalDeployment` runs exactly what a hospital's IT team runs on separate machines
(see ``deploy/README.md``), with every address on ``127.0.0.1``:

1. certificates and keys (:mod:`fedpca.deployment.certs`);
2. ``flower-superlink`` with TLS, ``--enable-supernode-auth`` and ``--isolation process``
   (one HTTPS port serves the Fleet, Control and Runtime APIs in Flower 1.41), and the
   coordinator's ``fedpca deploy superexec`` (:mod:`fedpca.deployment.coordinator_runtime`:
   each run's ServerApp forked from a warm process);
3. a ``config.toml`` in a private ``FLWR_HOME`` naming the SuperLink (address and CA);
4. ``flwr supernode register <site>.pub`` for every site (one process registers a group of
   sites: :mod:`fedpca.deployment.register_keys`);
5. per site: its policy file (``fedpca site init``'s defaults unless the site brings one,
   with the data file and a ledger in the site's folder), ``fedpca site supernode --policy``
   (Flower's SuperNode with the policy's memory limit and FAB check, ``--node-config
   'policy=...'``) with ``--isolation process``, its own ``--port``, ``--root-certificates``
   and ``--auth-supernode-private-key``, and ``fedpca site superexec --policy`` running the
   site's pinned ClientApp for that SuperNode;
6. ``flwr run <app dir> <federation> --stream --run-config ...`` with a configuration-only
   App (:func:`~fedpca.deployment.fab_check.write_config_only_app`), then the ServerApp's
   output JSON is read back.

Sites fail as real ones do: :meth:`LocalDeployment.kill_site` sends a SuperNode SIGKILL (no
goodbye to the SuperLink, as when its machine dies), e.g. from the ``during`` callback of
:meth:`LocalDeployment.run`; a site whose SuperNode or SuperExec exits on its own during a
run is logged and left out; the run goes on if ``min-sites`` allows it, and only the
SuperLink's exit stops everything. :meth:`LocalDeployment.start` returns once every site's
SuperNode is connected, so a run started next asks all of them; sites can also join a
running federation (:meth:`LocalDeployment.add_sites`, as the test suite's loopback
deployment does) and leave it (:meth:`LocalDeployment.stop_site`).

On exit, even after an exception, every process it started and all their descendants are
stopped by PID; every one of them carries ``FEDPCA_DEPLOYMENT=<id>`` in its environment, so
an orphan that lost its parent is found too (:meth:`LocalDeployment.close`). Each process is
started and read back through :mod:`fedpca.deployment.launch`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from fedpca.blas import BLAS_ENV
from fedpca.deployment.certs import (
    LOOPBACK,
    DeploymentFiles,
    SiteKey,
    write_server_files,
    write_site_key,
)
from fedpca.deployment.fab_check import write_config_only_app
from fedpca.deployment.launch import (
    ConfigValue,
    DeploymentError,
    Launched,
    app_config_keys,
    config_pairs,
    free_port,
    listening,
)
from fedpca.deployment.processes import (
    DEFAULT_GRACE,
    processes_with_env,
    signal_processes,
    stop_processes,
)
from fedpca.deployment.site_runtime import TELEMETRY_ENV
from fedpca.errors import ConfigurationError
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.run_record import FAILED, RunResult, load_run_result

logger = logging.getLogger(__name__)

#: Environment variable marking every process a deployment starts (value: its id).
MARKER_ENV = "FEDPCA_DEPLOYMENT"
#: Name of the SuperLink connection in config.toml: never the name of a folder a ``flwr``
#: command may run beside (``fedpca``, the clone's), which Flower reads as an App to migrate.
DEFAULT_FEDERATION = "consortium"
#: Seconds the SuperLink gets to listen, and a ``flwr`` CLI command to finish.
DEFAULT_STARTUP_TIMEOUT = 30.0
#: Seconds a ``flwr run`` gets by default.
DEFAULT_RUN_TIMEOUT = 600.0
#: Seconds to wait for the output file once ``flwr run`` has returned.
OUTPUT_GRACE = 5.0
#: Flower's own SuperExec task poll interval (environment variable, seconds), and the value
#: the deployment gives the SuperLink's and each site's SuperExec on loopback.
SUPEREXEC_POLL_ENV, SUPEREXEC_POLL_SECONDS = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.2"
#: What Flower's SuperNode logs once the SuperLink has activated it, and how many seconds a
#: site's SuperNode gets to get there (its start, TLS and authentication on a loaded machine).
ONLINE_LINE, SITE_ONLINE_TIMEOUT = "SuperNode ID:", 120.0
#: The node id in that line.
_NODE_ID = re.compile(re.escape(ONLINE_LINE) + r"\s*(\d+)")
_POLL = 0.2

#: Called with the ``flwr run`` process while a run is under way (see :meth:`LocalDeployment.run`).
RunWatcher = Callable[["Launched"], None]


@dataclass(frozen=True)
class Site:
    """One site: its ``name`` (its key file's name), its records (``data_path``, ``.npy``,
    ``.csv`` or ``.parquet``) and its ``policy`` file (``None``: the deployment writes ``fedpca site
    init``'s defaults for it, with a ledger in the site's folder)."""

    name: str
    data_path: Path
    policy: Path | None = None


@dataclass
class SiteProcesses:
    """A running site: its SuperNode, its SuperExec (pinned ClientApp) and its policy."""

    supernode: Launched
    superexec: Launched
    policy: Path


class LocalDeployment:
    """A SuperLink with TLS and SuperNode authentication, and one SuperNode per site.

    Use it as a context manager::

        sites = [Site(str(i), path) for i, path in enumerate(files)]
        with LocalDeployment(workdir, sites, app_dir=".") as deployment:
            result = deployment.run({"k": 2, "rounds": 2, "seed": 7})

    Args:
        workdir: folder for certificates (``certs/``), ``FLWR_HOME`` (``flwr-home/``),
            logs (``logs/``) and results.
        sites: the sites, with distinct names (none: the SuperLink alone, for sites that
            join later with :meth:`add_sites`).
        app_dir: the Flower App to run (``None``: a configuration-only App written into
            ``workdir/app``, the only kind the sites accept).
        federation: the SuperLink connection's name in ``config.toml``.
        startup_timeout: seconds the SuperLink gets to listen and a CLI command to finish.
        grace: seconds between SIGTERM and SIGKILL on exit.
        coordinator_env: extra environment variables of the coordinator's processes only:
            the SuperLink (hence the ServerApp processes it starts) and the ``flwr`` CLI
            (``flwr run`` imports the App's components to check them), e.g. ``PYTHONPATH``
            naming the module of a ServerApp of the coordinator's own, which a
            configuration-only FAB's ``serverapp`` may name. The sites' processes never get
            them.
    """

    def __init__(
        self,
        workdir: str | Path,
        sites: Sequence[Site],
        app_dir: str | Path | None = None,
        federation: str = DEFAULT_FEDERATION,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        grace: float = DEFAULT_GRACE,
        coordinator_env: Mapping[str, str] | None = None,
    ) -> None:
        if app_dir is not None and not (Path(app_dir) / "pyproject.toml").is_file():
            raise ConfigurationError(f"app_dir {app_dir} holds no pyproject.toml")
        _check_sites(sites, ())
        self.workdir = Path(workdir).resolve()
        self.sites = tuple(sites)
        self.app_dir = (
            Path(app_dir).resolve() if app_dir is not None
            else write_config_only_app(self.workdir / "app")
        )
        self.federation = federation
        self.startup_timeout = startup_timeout
        self.grace = grace
        self.coordinator_env = dict(coordinator_env or {})
        self.marker = uuid.uuid4().hex
        self.flwr_home = self.workdir / "flwr-home"
        self.logs = self.workdir / "logs"
        self.port = 0
        self._files: DeploymentFiles | None = None
        self.launched: list[Launched] = []
        self._daemons: list[Launched] = []
        self.running: dict[str, SiteProcesses] = {}
        self._runs = 0

    def __enter__(self) -> LocalDeployment:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def address(self) -> str:
        """The SuperLink's address (Fleet and Control API)."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def pids(self) -> list[int]:
        """PIDs of every process this deployment started itself."""
        return [item.process.pid for item in self.launched]

    @property
    def certificates(self) -> DeploymentFiles:
        """The CA, server certificate and site keys (made by :meth:`start`)."""
        if self._files is None:
            raise DeploymentError("the deployment is not started: use it in a with block")
        return self._files

    def start(self) -> None:
        """Certificates, SuperLink, config.toml, then the sites (:meth:`_join`)."""
        for directory in (self.flwr_home, self.logs):
            directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        self._files = DeploymentFiles(write_server_files(self.workdir / "certs"), ())
        self._start_superlink()
        self._write_flwr_config()
        self._join(self.sites)
        logger.info(
            "deployment up in %.1f s: SuperLink %s, %d SuperNodes",
            time.perf_counter() - started, self.address, len(self.sites),
        )

    def add_sites(self, sites: Sequence[Site]) -> tuple[SiteKey, ...]:
        """Let ``sites`` (names new to this deployment) join the running federation as
        :meth:`start` lets the first ones join; returns their keys (e.g. to restart one
        with :meth:`start_site`)."""
        _check_sites(sites, [site.name for site in self.sites])
        self.sites += tuple(sites)
        return self._join(sites)

    def _join(self, sites: Sequence[Site]) -> tuple[SiteKey, ...]:
        """Each site's key pair (in ``workdir/certs``), registered with the SuperLink; then
        every site's SuperNode and SuperExec started at once, and awaited until connected."""
        keys = tuple(write_site_key(self.workdir / "certs", site.name) for site in sites)
        self._files = dataclasses.replace(self.certificates,
                                          sites=self.certificates.sites + keys)
        if keys:
            self.register(keys)
        started = [self.start_site(site, key, wait=False) for site, key in zip(sites, keys)]
        for processes in started:  # all start at once, then all are awaited
            self._wait_online(processes.supernode)
        return keys

    def register(self, keys: Sequence[SiteKey]) -> None:
        """``flwr supernode register`` each site's public key under its name, all in one
        process (:mod:`fedpca.deployment.register_keys`)."""
        self._wait(self._launch(
            "register-" + "-".join(key.name for key in keys),
            [Path(sys.executable).name, "-m", "fedpca.deployment.register_keys",
             self.federation, *(f"{key.name}={key.public}" for key in keys)],
            self.coordinator_env), self.startup_timeout, "flwr supernode register")

    def start_site(self, site: Site, key: SiteKey, wait: bool = True) -> SiteProcesses:
        """Start ``site``'s SuperNode (``--isolation process``, its policy in node_config)
        and its SuperExec running the pinned ClientApp; write a default policy first if the
        site brings none; unless ``wait`` is false, return once the SuperNode is connected
        (:meth:`_wait_online`)."""
        policy = Path(site.policy) if site.policy is not None else self._default_policy(site)
        port = free_port()
        supernode = self._launch(
            f"supernode-{site.name}",
            ["fedpca", "site", "supernode", "--policy", str(policy.resolve()), "--",
             *self.supernode_args(key.private, port=port), "--isolation", "process"],
        )
        superexec = self._launch(
            f"superexec-{site.name}",
            ["fedpca", "site", "superexec", "--policy", str(policy.resolve()),
             "--runtime-api-address", f"{LOOPBACK}:{port}", "--insecure"],
        )
        self._daemons += [supernode, superexec]
        self.running[site.name] = SiteProcesses(supernode, superexec, policy)
        if wait:
            self._wait_online(supernode)
        return self.running[site.name]

    def _wait_online(self, supernode: Launched) -> None:
        """Wait until ``supernode`` is connected to the SuperLink (Flower logs its node id
        once the SuperLink activated it), so that a run started next asks it too: a run
        asks the sites connected when it starts, and a site still connecting would be
        left out of it (seen on a loaded 2-core machine: one site of three joined 10 s
        late and an honest secure run went on with the other two)."""
        _await(supernode, lambda: ONLINE_LINE in supernode.tail(lines=10_000),
               max(self.startup_timeout, SITE_ONLINE_TIMEOUT), "connecting",
               "did not connect to the SuperLink in time")

    def node_names(self) -> dict[int, str]:
        """Each connected site's Flower node id (its SuperNode's log says it once the
        SuperLink activated it; its latest after a restart) -> the site's name in its policy,
        the name its readiness answer and the run's errors give it (``site NAME (node N)``),
        which ``flwr supernode list`` does not show."""
        names = {}
        for processes in self.running.values():
            found = _NODE_ID.findall(processes.supernode.tail(lines=10_000))
            if found:
                names[int(found[-1])] = load_site_policy(processes.policy).name
        return names

    def stop_site(self, name: str) -> None:
        """Stop a site's SuperNode and SuperExec (e.g. to restart it); its ledger stays."""
        processes = self._forget_site(name)
        stop_processes({processes.supernode.process.pid, processes.superexec.process.pid},
                       self.grace)

    def _forget_site(self, name: str) -> SiteProcesses:
        """Site ``name``'s processes, which no longer count as the federation's daemons."""
        processes = self.running.pop(name)
        for item in (processes.supernode, processes.superexec):
            self._daemons.remove(item)
        return processes

    def _site_of(self, daemon: Launched) -> str | None:
        """The site whose SuperNode or SuperExec ``daemon`` is (``None``: the SuperLink)."""
        return next((name for name, p in self.running.items()
                     if daemon in (p.supernode, p.superexec)), None)

    def _lost_site(self, name: str, daemon: Launched, what: str) -> None:
        """A site stopped on its own (its operator stopped it, its machine failed): the
        federation goes on without it, as real sites' would; its other process is stopped
        and the run decides (``min-sites``) whether it can finish without the site."""
        logger.warning("site %s: %s exited with code %s during %s; the federation goes on "
                       "without it", name, daemon.name, daemon.process.returncode, what)
        self.stop_site(name)

    def kill_site(self, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """Make site ``name`` fail: send its SuperNode ``sig`` (SIGKILL by default: it cannot
        deactivate itself at the SuperLink, as when its machine dies; any other signal is
        followed by SIGKILL when the SuperNode has not exited within ``grace``), then stop its
        SuperExec, which has no SuperNode left to serve. Neither counts as a failed daemon
        any more (a run goes on without the site if ``min-sites`` allows it); its ledger
        stays. Returns the SuperNode's PID."""
        processes = self._forget_site(name)
        pid = processes.supernode.process.pid
        signal_processes([pid], sig)
        try:
            processes.supernode.process.wait(timeout=self.grace)
        except subprocess.TimeoutExpired:  # a loaded machine: it did not stop within grace
            signal_processes([pid], signal.SIGKILL)
            processes.supernode.process.wait(timeout=self.grace)
        stop_processes({processes.superexec.process.pid}, self.grace)
        logger.info("killed site %s: SuperNode pid %d (%s)", name, pid, sig.name)
        return pid

    def _default_policy(self, site: Site) -> Path:
        folder = self.workdir / "sites" / site.name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "policy.toml"
        if not path.is_file():
            write_policy_template(path, site.name, str(Path(site.data_path).resolve()))
        return path

    def start_supernode(
        self,
        name: str,
        private_key: Path | None,
        node_config: Mapping[str, ConfigValue],
        insecure: bool = False,
        extra_args: Sequence[str] = (),
    ) -> Launched:
        """Start a plain ``flower-supernode`` dialling this SuperLink (:meth:`supernode_args`)
        with ``node_config`` and ``extra_args``, e.g. an intruder's."""
        argv = ["flower-supernode", *self.supernode_args(private_key, insecure)]
        if node_config:
            argv += ["--node-config", config_pairs(node_config)]
        return self._launch(name, [*argv, *extra_args])

    def supernode_args(
        self, private_key: Path | None, insecure: bool = False, port: int | None = None
    ) -> list[str]:
        """``flower-supernode`` arguments dialling this SuperLink (with TLS unless
        ``insecure``, authenticated with ``private_key`` when given) with its Runtime API on
        ``port`` (a free one by default)."""
        argv = ["--superlink", self.address, "--port", str(port or free_port())]
        if insecure:
            argv.append("--insecure")
        else:
            argv += ["--root-certificates", str(self.certificates.server.ca_cert)]
        if private_key is not None:
            argv += ["--auth-supernode-private-key", str(private_key)]
        return argv

    def run(
        self, run_config: Mapping[str, ConfigValue], timeout: float = DEFAULT_RUN_TIMEOUT,
        app_dir: str | Path | None = None, during: RunWatcher | None = None,
        result: bool = True,
    ) -> RunResult | None:
        """``flwr run`` the App (``app_dir``, default: the deployment's) with ``run_config``
        (plus ``output``, unless given) and return the ServerApp's result (of its kind,
        :func:`~fedpca.run_record.load_run_result`). ``during``, if given, is called with
        the ``flwr run`` process (its log streams the ServerApp's) about every 0.2 s until it
        exits, e.g. to time the rounds or :meth:`kill_site` a
        site. ``result=False``: the ServerApp writes no fedpca result (e.g. a coordinator's
        own ServerApp); return ``None`` as soon as ``flwr run`` has exited (it exits with 0
        even when the ServerApp raised: its log holds the error). Raises DeploymentError if a
        Flower process exits, the run does not finish within ``timeout`` seconds, it writes
        no result when one is expected, or it writes the record of a failed run
        (:func:`fedpca.run_record.failure_record`: e.g. too few sites could afford it), whose
        error the exception quotes."""
        app = Path(app_dir).resolve() if app_dir is not None else self.app_dir
        declared = app_config_keys(app)
        unknown = sorted(set(run_config) - declared)
        if unknown:
            raise ConfigurationError(
                f"run_config keys {unknown} are not declared in [tool.flwr.app.config] of "
                f"{app / 'pyproject.toml'} (flwr run would refuse them); "
                f"declared: {sorted(declared)}"
            )
        self._runs += 1
        output = Path(
            str(run_config.get("output", self.workdir / f"result-{self._runs}.json"))
        ).resolve()
        output.unlink(missing_ok=True)
        config = {**run_config, "output": str(output)}
        flwr = self._launch(
            f"flwr-run-{self._runs}",
            [
                "flwr", "run", str(app), self.federation, "--stream",
                "--run-config", config_pairs(config),
            ],
            extra_env=self.coordinator_env,
        )
        self._wait(flwr, timeout, "flwr run", during)
        if not result:
            return None
        deadline = time.monotonic() + OUTPUT_GRACE
        while not output.is_file() and time.monotonic() < deadline:
            time.sleep(_POLL)
        if not output.is_file():
            raise flwr.failure(f"the run finished but the ServerApp wrote no {output}")
        record = json.loads(output.read_text())
        if record.get("status") == FAILED:
            raise DeploymentError(f"the run failed: {record['error']} (its record: {output})")
        return load_run_result(output)

    def close(self) -> None:
        """Stop every process started here and their descendants, in the order a clean
        shutdown needs: runs and tools first, then the sites (each SuperNode says goodbye
        to the SuperLink), then the SuperLink; reap them."""
        sites = {p.process.pid for s in self.running.values()
                 for p in (s.supernode, s.superexec)}
        superlinks = {d.process.pid for d in self._daemons} - sites
        stopped = stop_processes(set(self.pids) - sites - superlinks, self.grace)
        stopped += stop_processes(sites, self.grace)
        stopped += stop_processes(superlinks | self.leftovers(), self.grace)
        late = self.leftovers()  # started while the others stopped, orphaned at once
        if late:
            stopped += stop_processes(late, self.grace)
        for item in self.launched:
            try:
                item.process.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                logger.error("%s (pid %d) is still running", item.name, item.process.pid)
        if self.leftovers():
            logger.error("processes outlived the deployment: %s", sorted(self.leftovers()))
        if stopped:
            logger.info("stopped %d processes: %s", len(stopped), stopped)

    def leftovers(self) -> set[int]:
        """Live processes carrying this deployment's marker (empty after :meth:`close`)."""
        return processes_with_env(MARKER_ENV, self.marker)

    def _start_superlink(self) -> None:
        self.port = free_port()
        server = self.certificates.server
        superlink = self._launch(
            "superlink",
            [
                "flower-superlink", "--ssl-ca-certfile", str(server.ca_cert),
                "--ssl-certfile", str(server.cert), "--ssl-keyfile", str(server.key),
                "--enable-supernode-auth", "--host", LOOPBACK, "--port", str(self.port),
                "--disable-runtime-dependency-installation", "--isolation", "process",
            ],
            extra_env=self.coordinator_env,
        )
        self._daemons.append(superlink)
        started = time.perf_counter()
        _await(superlink, lambda: listening(self.port), self.startup_timeout, "listening",
               f"not listening on {self.address} within {self.startup_timeout:g} s")
        logger.info("SuperLink listening on %s after %.1f s", self.address,
                    time.perf_counter() - started)
        self._daemons.append(self._launch(
            "superexec", ["fedpca", "deploy", "superexec", "--runtime-api-address",
                          self.address, "--root-certificates", str(server.ca_cert),
                          "--parent-pid", str(superlink.process.pid)],
            extra_env=self.coordinator_env,
        ))

    def _write_flwr_config(self) -> None:
        (self.flwr_home / "config.toml").write_text(
            f'[superlink]\ndefault = "{self.federation}"\n\n'
            f"[superlink.{self.federation}]\n"
            f'address = "{self.address}"\n'
            f'root-certificates = "{self.certificates.server.ca_cert}"\n'
        )

    def _wait(
        self, item: Launched, timeout: float, what: str, during: RunWatcher | None = None
    ) -> None:
        """Wait for ``item`` to exit with code 0, while the daemons keep running; call
        ``during(item)`` at every look."""
        deadline = time.monotonic() + timeout
        while item.process.poll() is None:
            if during is not None:
                during(item)
            for daemon in list(self._daemons):
                if daemon not in self._daemons or daemon.process.poll() is None:
                    continue  # running, or its site was left out a moment ago
                stopped = self._site_of(daemon)
                if stopped is None:  # the SuperLink: nothing runs without it
                    raise daemon.failure(
                        f"exited with code {daemon.process.returncode} during {what}"
                    )
                self._lost_site(stopped, daemon, what)
            if time.monotonic() > deadline:
                raise item.failure(f"{what} did not finish within {timeout:g} s")
            time.sleep(_POLL)
        if item.process.returncode != 0:
            raise item.failure(f"{what} failed with exit code {item.process.returncode}")

    def _launch(
        self, name: str, argv: list[str], extra_env: Mapping[str, str] | None = None
    ) -> Launched:
        env = {**self._environment(), **(extra_env or {})}
        program = shutil.which(argv[0], path=env["PATH"])
        if program is None:
            raise DeploymentError(
                f"{argv[0]} is not on PATH: install fedpca (and with it flwr) in this "
                f"environment ({sys.executable})"
            )
        log = self.logs / f"{name}.log"
        with log.open("wb") as handle:
            process = subprocess.Popen(
                [program, *argv[1:]], stdin=subprocess.DEVNULL, stdout=handle,
                stderr=subprocess.STDOUT, env=env, cwd=self.workdir,
            )
        item = Launched(name, process, log)
        self.launched.append(item)
        logger.debug("started %s (pid %d): %s", name, process.pid, " ".join(argv))
        return item

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({name: "1" for name in BLAS_ENV})
        # SuperExecs (the SuperLink's and each site's) look for new tasks every second by
        # default; on loopback a shorter poll cuts the latency of every round.
        env.setdefault(SUPEREXEC_POLL_ENV, SUPEREXEC_POLL_SECONDS)
        # Flower's usage telemetry off unless asked for (the sites' runtimes turn it off
        # whatever the environment says)
        env.setdefault(TELEMETRY_ENV, "0")
        env.update(
            FLWR_HOME=str(self.flwr_home),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            **{MARKER_ENV: self.marker},
        )
        return env


def _await(item: Launched, ready: Callable[[], bool], seconds: float, before: str,
           late: str) -> None:
    """Look every :data:`_POLL` seconds until ``ready()``; raise ``item``'s failure if it
    exits first (``before``: what it had not done) or ``seconds`` pass first (``late``)."""
    deadline = time.monotonic() + seconds
    while not ready():
        if item.process.poll() is not None:
            raise item.failure(f"exited with code {item.process.returncode} before {before}")
        if time.monotonic() > deadline:
            raise item.failure(late)
        time.sleep(_POLL)


def _check_sites(sites: Sequence[Site], taken: Sequence[str]) -> None:
    """Refuse sites whose names repeat (among themselves or ``taken``) or whose data file
    does not exist."""
    names = [site.name for site in sites]
    repeated = sorted({name for name in names if names.count(name) > 1 or name in taken})
    if repeated:
        raise ConfigurationError(f"site names must be distinct in a deployment: {repeated}")
    missing = [str(site.data_path) for site in sites if not Path(site.data_path).is_file()]
    if missing:
        raise ConfigurationError(f"site data files do not exist: {missing}")

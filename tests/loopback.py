"""A loopback deployment shared by test files, and the groups of sites that take turns on it.

One SuperLink (TLS, SuperNode authentication) serves the loopback tests of one entry of
``LOOPBACK`` in ``tests/conftest.py`` (fixture ``loopback``; those tests run on one xdist
worker, which starts it once; the other entry's tests get their own on another worker):
each test file lets its own sites join (:func:`joined`), runs its runs and stops them
again, so that a run asks only the sites its file's assertions are about (a run asks every
connected site). A site's start costs a few seconds; a SuperLink's start and its key
registration were paid once per file before. Each group of sites leaves nothing running:
every process it started has exited once its sites are stopped, and none names its folder.
"""

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from fedpca.deployment.certs import SiteKey
from fedpca.deployment.launch import DeploymentError
from fedpca.deployment.local import LocalDeployment, Site
from fedpca.deployment.processes import processes_naming

TESTS = Path(__file__).resolve().parent
#: How long a group's processes may take to exit once its sites are stopped.
EXIT_SECONDS = 60


def coordinator_env() -> dict[str, str]:
    """The coordinator's ``PYTHONPATH`` with ``tests/``, for the coordinator's own ServerApps
    (``tests/hostile_secagg.py``) that a configuration-only FAB may name; the sites never
    see it."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS),
                                                       os.environ.get("PYTHONPATH")]))}


@contextlib.contextmanager
def session_deployment(work: Path) -> Iterator[LocalDeployment]:
    """A SuperLink on loopback, no site yet; everything it started is stopped afterwards
    (and checked to be)."""
    local = LocalDeployment(work / "run", [], coordinator_env=coordinator_env())
    try:
        with local:
            yield local
    finally:
        assert all(item.process.poll() is not None for item in local.launched)
        assert not local.leftovers()
        assert not processes_naming(str(work))


class Federation:
    """The session's deployment as one group of sites sees it: ``sites`` are the group's
    (in its order), ``keys`` their key pairs by name and ``launched`` the processes started
    since they joined; everything else (``run``, ``stop_site``, ``start_site``,
    ``running``, ``logs``...) is the deployment's."""

    def __init__(self, deployment: LocalDeployment, sites: Sequence[Site],
                 keys: Sequence[SiteKey], first: int) -> None:
        self.deployment = deployment
        self.sites = tuple(sites)
        self.keys = {key.name: key for key in keys}
        self.first = first

    @property
    def launched(self) -> list:
        return self.deployment.launched[self.first:]

    def __getattr__(self, name: str):
        return getattr(self.deployment, name)


@contextlib.contextmanager
def joined(deployment: LocalDeployment, sites: Sequence[Site],
           folder: Path) -> Iterator[Federation]:
    """``sites`` (their files under ``folder``) connected to ``deployment`` for the block;
    afterwards those still running are stopped, and every process started during the block
    has exited and none names ``folder``."""
    first = len(deployment.launched)
    try:
        yield Federation(deployment, sites, deployment.add_sites(sites), first)
    finally:
        for site in sites:
            if site.name in deployment.running:
                deployment.stop_site(site.name)
        # a site stopped from outside (its SuperNode killed) leaves its runtime to notice
        # and exit on its own, which a loaded machine may take a while to schedule
        deadline = time.monotonic() + EXIT_SECONDS
        for item in deployment.launched[first:]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                item.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        assert all(item.process.poll() is not None for item in deployment.launched[first:])
        assert not processes_naming(str(folder))


#: How long :func:`restart_site` keeps starting a killed site again: the SuperLink counts a
#: SuperNode online for two of its missed heartbeats (Flower's, 30 s apart) after it was
#: killed, and refuses to activate its key again until then.
RESTART_SECONDS = 90
#: Seconds between two starts.
RESTART_RETRY_SECONDS = 3


def restart_site(deployment: LocalDeployment, site: Site, key: SiteKey) -> int:
    """Start ``site`` again after its SuperNode was killed, as its operator (or a service
    manager's ``Restart=on-failure``) would: a SuperNode that exits before it connects
    (Flower: "Failed to activate SuperNode", the SuperLink still counting the killed one
    online) is started again every :data:`RESTART_RETRY_SECONDS`, for at most
    :data:`RESTART_SECONDS`; the number of starts."""
    end, starts = time.monotonic() + RESTART_SECONDS, 0
    while True:
        starts += 1
        try:
            deployment.start_site(site, key)
            return starts
        except DeploymentError:
            if site.name in deployment.running:
                deployment.stop_site(site.name)
            if time.monotonic() >= end:
                raise
            time.sleep(RESTART_RETRY_SECONDS)


class Beside:
    """What a run started by :func:`beside` gave: ``value`` (its return) or ``error`` (what it
    raised), once the block is over."""

    value = None
    error: BaseException | None = None


@contextlib.contextmanager
def beside(deployment: LocalDeployment, run: Callable[[], object],
           timeout: float) -> Iterator[Beside]:
    """``run`` (one ``deployment.run``) in a thread, at the same time as the block's runs: the
    block starts once its ``flwr run`` is launched (so that each run gets its own number),
    and ends once it has returned or raised (within ``timeout`` seconds). A site answers one
    message at a time, so the runs interleave at every site: together they take about as
    long as the longer one, not the sum, on a deployment that polls while they last."""
    outcome = Beside()

    def target() -> None:
        try:
            outcome.value = run()
        except BaseException as exc:  # noqa: BLE001 (the caller asserts on it)
            outcome.error = exc

    started = len(deployment.launched)
    thread = threading.Thread(target=target, name="run beside")
    thread.start()
    try:
        while len(deployment.launched) == started and thread.is_alive():
            time.sleep(0.05)
        yield outcome
    finally:
        thread.join(timeout)
        assert not thread.is_alive(), "the run beside did not end"

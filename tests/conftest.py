"""Shared test setup: fedpca compiled to bytecode once; single-threaded BLAS before numpy
loads (Flower deadlock guard); the suite's Flower processes polling briefly
(:mod:`flower_hooks.poll_waits`); Flower
simulations with their sites in this process unless a file is marked ``ray``
(:mod:`sites_in_process`); the loopback deployments (:mod:`loopback`), one per group of
tests, each group run by one xdist worker, at a higher priority than the other tests; the long
files scheduled first."""

import compileall
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from rewrite_once import rewrite_test_modules

import fedpca
from fedpca.deployment.local import SUPEREXEC_POLL_ENV
from fedpca.dp import calibration_cache
from fedpca.blas import single_thread_env
from flower_hooks.poll_waits import POLL_ENV

single_thread_env()

#: Marks of the test files that take most of the suite's time: federations (Ray start-up,
#: ``flwr run``; ``pytestmark = pytest.mark.federation``) and long computations (``slow``).
LONG = ("federation", "slow")
#: The tests on a loopback deployment (fixture ``loopback``), files or single tests, in two
#: groups of about equal length: one xdist worker runs each group, one test after the other,
#: on the one deployment it starts (two workers: two SuperLinks, side by side).
LOOPBACK = (("test_deployment.py", "test_secure_deployment.py", "test_genotype_deployment.py"),
            ("test_centred_flower.py::test_deploy_local_runs_centred_runs_of_three_algorithms_"
             "from_each_sites_table", "test_tables_deployment.py", "test_restart_deployment.py"))
#: The niceness a worker takes once it runs a test that is not a loopback test.
LATER_NICENESS = 5
#: Whether this worker has taken :data:`LATER_NICENESS`.
NICED = pytest.StashKey[bool]()
#: The longest files after them (about 20-60 s each on 2 cores, mostly waiting on
#: processes), longest first, started before the other long ones so that none of them is
#: the last thing a worker starts.
LONGEST = ("test_ray_cluster.py", "test_flower_app.py", "test_audit.py",
           "test_flower_simulation.py")


def loopback_rank(nodeid: str) -> tuple[int, int] | None:
    """The group of :data:`LOOPBACK` holding the test ``nodeid`` and its position there
    (``None``: not a loopback test)."""
    test = nodeid.rsplit("/", 1)[-1]
    for group, names in enumerate(LOOPBACK):
        for rank, name in enumerate(names):
            if test == name or test.startswith(name + "::") or test.startswith(name + "["):
                return group, rank
    return None


# the suite's Flower processes send Flower no usage telemetry (a site's turn it off anyway)
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
# every Ray the suite starts (a test's own simulation, ``ray start`` in
# tests/test_ray_cluster.py, the simulation runtime behind ``flwr run`` in
# tests/test_flower_app.py) starts its workers at the priority of the suite's other work, not
# Ray's default nice 15 on top of :data:`LATER_NICENESS`: beside the other workers' tests on
# 2 cores the actors got almost no CPU while they imported Flower and fedpca (alone, 35 s and
# 46 s for those two files; in the suite 248 s and 160 s)
os.environ.setdefault("RAY_worker_niceness", "0")
# every process the suite starts runs ``flower_hooks/sitecustomize.py``: the loopback
# deployments' SuperNodes and SuperExecs (Flower's polling loops, patched as they are
# imported: ``flower_hooks/poll_waits.py``) ask for work every 0.5 s while a run is under way
# instead of Flower's 3 s and 1 s (``fedpca deploy local`` sets Flower's own SuperExec
# interval to 0.2 s): on 2 cores every ask costs CPU on both ends of Flower's HTTP API, and a
# shorter wait lets the loopback groups finish sooner, with less time idle while every worker
# waits on them (whole suite, alternated, two runs each: 0.7 s 225.2-227.1 s and 426-427 busy
# core-s, 0.5 s 218.0-222.8 s and 414-423)
FLOWER_HOOKS = Path(__file__).resolve().parent / "flower_hooks"
if str(FLOWER_HOOKS) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(FLOWER_HOOKS), os.environ.get("PYTHONPATH")]))
os.environ.setdefault(POLL_ENV, "0.5")
os.environ.setdefault(SUPEREXEC_POLL_ENV, "0.5")
# a real site's kept calibrations go to a temporary folder, not the user's cache; the
# suite's own processes keep theirs there too (each entry checked on every read, as a
# site's), so a calibration one xdist worker made is read, not searched again, by the others;
# the process that made the folder (the controller) removes it at the end
CALIBRATIONS: Path | None = None
if calibration_cache.DIRECTORY_VARIABLE not in os.environ:
    CALIBRATIONS = Path(tempfile.mkdtemp(prefix="fedpca-test-calibrations-"))
    os.environ[calibration_cache.DIRECTORY_VARIABLE] = str(CALIBRATIONS)
calibration_cache.use_directory(calibration_cache.environment_directory())


def pytest_configure(config):
    """fedpca's modules compiled to bytecode once, as an installed package has them (pip
    compiles an install; an editable one is compiled by its first import, or never where
    ``PYTHONDONTWRITEBYTECODE`` is set): the hundreds of processes the suite starts (sites,
    ClientApps, ServerApps, Ray workers) then read the bytecode instead of each compiling
    the modules it imports; and the test modules' asserts rewritten once, for every worker
    (:mod:`rewrite_once`). Done by the controller only, before the workers start."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(Path(fedpca.__file__).parent, quiet=1)
        rewrite_test_modules(config, Path(__file__).parent)


def pytest_unconfigure(config):
    """The calibrations folder this process made is removed (its sites and workers have
    stopped: the loopback deployments and the workers end before the controller)."""
    if CALIBRATIONS is not None:
        shutil.rmtree(CALIBRATIONS, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """The loopback tests first, then the longest files, then the other long ones, each
    file's tests in their order: on the xdist workers (``--dist loadfile
    --no-loadscope-reorder``) the slow ones then start at once and run beside the many
    fast ones, instead of being left to the end. A test using the ``loopback`` fixture
    that :data:`LOOPBACK` does not name would start a deployment of its own on another worker:
    refused."""
    strays = [item.nodeid for item in items
              if "loopback" in item.fixturenames and loopback_rank(item.nodeid) is None]
    if strays:
        raise pytest.UsageError(f"tests/conftest.py: add {strays} to LOOPBACK")

    def rank(item) -> tuple[int, int, int]:
        loopback = loopback_rank(item.nodeid)
        if loopback is not None:
            return 0, *loopback
        if item.path.name in LONGEST:
            return 1, LONGEST.index(item.path.name), 0
        return (2 if any(item.get_closest_marker(m) for m in LONG) else 3), 0, 0

    items.sort(key=rank)


def pytest_runtest_setup(item):
    """Once a worker runs a test that is not a loopback test, it (and every process it
    starts from then on) yields the CPU to the loopback deployments' processes. Their runs
    wait on one another's polls, and every second a run takes costs every connected site's
    polling: the suite's other work then runs in their gaps (whole suite, two runs each:
    240.6-243.0 -> 235.0-240.4 s, 458-464 -> 445-456 s of CPU)."""
    if loopback_rank(item.nodeid) is None and not item.config.stash.get(NICED, False):
        os.nice(LATER_NICENESS)
        item.config.stash[NICED] = True


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, but with each group of :data:`LOOPBACK` tests in one unit of
    work: one worker, hence one ``loopback`` deployment, runs a whole group."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoopbackTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            loopback = loopback_rank(nodeid)
            if loopback is not None:
                return f"loopback-{loopback[0]}"
            return super()._split_scope(nodeid)

    return LoopbackTogether(config, log)


@pytest.fixture(scope="session")
def loopback(tmp_path_factory):
    """The worker's loopback deployment: a SuperLink that the sites of every loopback test
    of its group join in turn (:func:`loopback.joined`)."""
    from loopback import session_deployment

    with session_deployment(tmp_path_factory.mktemp("loopback")) as deployment:
        yield deployment


@pytest.fixture(scope="module", autouse=True)
def flower_sites(request):
    """The module's Flower simulations run their sites in this process
    (:func:`sites_in_process.sites_in_process`), unless the module is marked
    ``pytest.mark.ray``: then in Ray actors, as ``fedpca simulate`` runs them, at the
    priority of the suite's other work (``RAY_worker_niceness`` above: at Ray's nice 15 a
    10 s simulation took 60-70 s beside the other workers' tests). Either way Flower's
    in-memory runtime in this process waits briefly between its looks
    (:func:`sites_in_process.prompt_waits`). Module scope and autouse: set before the
    module's own fixtures, which start simulations too."""
    from sites_in_process import prompt_waits, sites_in_process

    with sites_in_process() if not request.node.get_closest_marker("ray") else prompt_waits():
        yield

"""Shared test setup: single-threaded BLAS before numpy loads (Flower deadlock guard), and
the files that start Flower federations scheduled first."""

import os
import tempfile

from fedpca.blas import single_thread_env

single_thread_env()

#: Marks of the test files that take most of the suite's time: federations (Ray start-up,
#: ``flwr run``; ``pytestmark = pytest.mark.federation``) and long computations (``slow``).
LONG = ("federation", "slow")
#: The longest files (about 40-150 s each on 2 cores, mostly waiting on processes), longest
#: first, started before the other long ones so that none of them is the last thing a
#: worker starts.
LONGEST = ("test_secure_deployment.py", "test_deployment.py", "test_ray_cluster.py",
           "test_hostile_coordinator.py", "test_centred_flower.py")


# a real site's kept calibrations go to a temporary folder, not the user's cache
os.environ.setdefault("FEDPCA_CALIBRATION_CACHE",
                      tempfile.mkdtemp(prefix="fedpca-test-calibrations-"))


def pytest_collection_modifyitems(items):
    """Longest files first, then the other long ones, each file's tests in their order: on
    the xdist workers (``--dist loadfile --no-loadscope-reorder``) the slow files then start
    at once and run beside the many fast ones, instead of being left to the end."""

    def rank(item) -> tuple[int, int]:
        if item.path.name in LONGEST:
            return 0, LONGEST.index(item.path.name)
        return (1 if any(item.get_closest_marker(m) for m in LONG) else 2), 0

    items.sort(key=rank)

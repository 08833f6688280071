"""Shared test setup: single-threaded BLAS before numpy loads (Flower deadlock guard), and
the files that start Flower federations scheduled first."""

from fedpca.blas import single_thread_env

single_thread_env()

#: Marks of the test files that take most of the suite's time: federations (Ray start-up,
#: ``flwr run``; ``pytestmark = pytest.mark.federation``) and long computations (``slow``).
LONG = ("federation", "slow")
#: The three longest files (about 40-110 s each on 2 cores, mostly waiting on processes),
#: started before the other long ones (one per xdist worker) so that none of them is the
#: last thing a worker starts.
LONGEST = ("test_deployment.py", "test_ray_cluster.py", "test_hostile_coordinator.py")


def pytest_collection_modifyitems(items):
    """Longest files first, then the other long ones, each file's tests in their order: on
    the xdist workers (``--dist loadfile --no-loadscope-reorder``) the slow files then start
    at once and run beside the many fast ones, instead of being left to the end."""

    def rank(item) -> int:
        if item.path.name in LONGEST:
            return 0
        return 1 if any(item.get_closest_marker(m) for m in LONG) else 2

    items.sort(key=rank)

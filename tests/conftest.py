"""Shared test setup: single-threaded BLAS before numpy loads (Flower deadlock guard), and
the files that start Flower federations scheduled first."""

from fedpca.blas import single_thread_env

single_thread_env()

#: Marks of the test files that take most of the suite's time: federations (Ray start-up,
#: ``flwr run``; ``pytestmark = pytest.mark.federation``) and long computations (``slow``).
LONG = ("federation", "slow")


def pytest_collection_modifyitems(items):
    """Long files first, each file's tests in their order: on the xdist workers
    (``--dist loadfile --no-loadscope-reorder``) the slow files then start at once and run
    beside the many fast ones, instead of being left to the end."""
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in LONG))

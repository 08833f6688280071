"""Shared test setup: single-threaded BLAS before numpy loads (Flower deadlock guard), and
the files that start Flower federations scheduled first."""

from fedpca.blas import single_thread_env

single_thread_env()

#: Marks a test file whose federations (Ray start-up, ``flwr run``) take most of the suite's
#: time: ``pytestmark = pytest.mark.federation``.
FEDERATION = "federation"


def pytest_collection_modifyitems(items):
    """Federation files first, each file's tests in their order: on the xdist workers
    (``--dist loadfile --no-loadscope-reorder``) the slow files then start at once and run
    beside the many fast ones, instead of being left to the end."""
    items.sort(key=lambda item: item.get_closest_marker(FEDERATION) is None)

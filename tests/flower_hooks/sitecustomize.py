"""The test suite's hook into every Python process it starts (``tests/conftest.py`` puts this
folder on their ``PYTHONPATH``): with ``FEDPCA_SUPERNODE_POLL_SECONDS`` set, Flower's
SuperNode and SuperExec polling loops wait short while a run is under way
(:mod:`poll_waits`), patched as each of those modules is imported. Unset, or in a process
that never imports them: nothing happens. Only the suite's speed: no product code path
changes, and no site answers differently."""

import os

if os.environ.get("FEDPCA_SUPERNODE_POLL_SECONDS"):
    import poll_waits

    poll_waits.install()

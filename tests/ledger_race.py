"""One process's try at a lifetime ledger's last release (``tests/test_hostile_coordinator.py``
starts two at once, forked from a fork server that preloads this module). Its own module,
importing only the ledger: the fork server imports the module of its target, and the test
module's imports (Flower, the App) would take most of its time."""

import multiprocessing

from fedpca.dp.calibration import calibrate_gaussian
from fedpca.dp.events import Release
from fedpca.errors import BudgetExceededError
from fedpca.site.ledger import RunCharge, SiteLedger


def race(path: str, barrier, results) -> None:
    """Charge a one-release run on the ledger at ``path`` once ``barrier`` lets every racer
    go; put ``"charged"`` or ``"refused"`` on ``results``."""
    ledger = SiteLedger(path, "population", epsilon=1.0, delta=1e-5)
    z = calibrate_gaussian(1, 1.0, 1e-5, "pld", paper_rule="classic").noise_multiplier
    charge = RunCharge(f"run-{multiprocessing.current_process().name}", "dpdis-pca",
                       "fingerprint", max_releases=1)
    barrier.wait()
    try:
        ledger.for_run(charge).charge(Release("dpdis-pca", 1.0, z, (2, 2)))
        results.put("charged")
    except BudgetExceededError:
        results.put("refused")

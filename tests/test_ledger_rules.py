"""A simulated site's in-memory ledger and a real site's SQLite ledger decide alike.

Both keep their releases under :class:`fedpca.dp.ledger.BudgetRules`; each row of the table
is one decision (a charge, or whether a run's planned releases fit) asked of both after the
same releases, and both must accept it, or both refuse it for the same reason, recording
nothing. (A real site's spending windows have no simulated twin: a simulation has no clock.)
"""

import re

import pytest

from fedpca.dp.accountant import worst_case_epsilon
from fedpca.dp.calibration import calibrate_gaussian
from fedpca.dp.events import Release
from fedpca.dp.ledger import PrivacyLedger
from fedpca.errors import BudgetExceededError
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.ledger_store import create_ledger

DELTA = 1e-5
SIGMA = calibrate_gaussian(3, 2.0, DELTA).sigma(1.0)  # three releases spend epsilon 2
GAUSSIAN = Release("t/gauss", 1.0, SIGMA, (3,))
SECURE = Release("t/secure", 1.0, SIGMA, (3,), sites_in_sum=4)
TWO_SECURE = worst_case_epsilon([SECURE] * 2, DELTA) * 1.01  # room for two own shares

BUDGET = r"budget epsilon=2 \(delta=1e-05\) would be exceeded \(\S+ after this release\)"
RUN_BUDGET = r"budget epsilon=2 \(delta=1e-05\) would be exceeded \(\S+ after this run\)"
NO_WORST = r"sets no budget.worst-case-epsilon"
WORST = r"against a coordinator that bypasses the secure sum, the site's worst-case .*budget"
BAD_NOISE = r"sigma and sensitivity must be finite and > 0"
RUN = r"refused this run.*: the {} releases left of it, as this site calibrates them, do not fit: "

#: name: (budget, worst-case bound, cap, releases made, "charge" or "run", new releases,
#: the refusal's reason or None when both accept)
CASES = {
    "a release that fits": (2.0, None, None, [GAUSSIAN], "charge", [GAUSSIAN], None),
    "a release repeated up to the budget": (
        2.0, None, None, [GAUSSIAN] * 2, "charge", [GAUSSIAN], None),
    "over the budget": (2.0, None, None, [GAUSSIAN] * 3, "charge", [GAUSSIAN], BUDGET),
    "over the run's release cap, budget left": (
        2.0, None, 1, [GAUSSIAN], "charge", [GAUSSIAN], r"allows 1 releases per run"),
    "a secure release without a worst-case budget": (
        2.0, None, None, [], "charge", [SECURE], NO_WORST),
    "a secure release within the worst-case budget": (
        10.0, TWO_SECURE, None, [SECURE], "charge", [SECURE], None),
    "a secure release over the worst-case budget": (
        10.0, TWO_SECURE, None, [SECURE] * 2, "charge", [SECURE], WORST),
    "a plain release after secure ones: no worst-case check": (
        10.0, TWO_SECURE, None, [SECURE] * 2, "charge", [GAUSSIAN], None),
    "no noise": (2.0, None, None, [], "charge", [Release("t/none", 1.0, 0.0, (3,))],
                 BAD_NOISE),
    "a sensitivity that is not a number": (
        2.0, None, None, [], "charge", [Release("t/nan", float("nan"), 1.0, (3,))], BAD_NOISE),
    "a run that fits": (2.0, None, 3, [], "run", [GAUSSIAN] * 3, None),
    "a run over the budget": (
        2.0, None, None, [GAUSSIAN], "run", [GAUSSIAN] * 3, RUN.format(3) + ".*" + RUN_BUDGET),
    "a run over its release cap": (
        2.0, None, 2, [GAUSSIAN], "run", [GAUSSIAN] * 2,
        RUN.format(2) + "this site's policy allows 2 releases per run.* has made 1"),
    "a secure run without a worst-case budget": (
        2.0, None, None, [], "run", [SECURE] * 2, RUN.format(2) + ".*" + NO_WORST),
    "a secure run over the worst-case budget": (
        10.0, TWO_SECURE, None, [], "run", [SECURE] * 3, RUN.format(3) + WORST),
    "a run with a release without noise": (
        2.0, None, None, [], "run", [GAUSSIAN, Release("t/none", 1.0, 0.0, (3,))],
        RUN.format(2) + BAD_NOISE),
}


def simulated(epsilon, worst, cap):
    return PrivacyLedger(epsilon, DELTA, max_releases=cap, site="clinic",
                         worst_case_epsilon=worst)


def real(tmp_path, epsilon, worst, cap):
    create_ledger(tmp_path / "ledger.sqlite")
    lifetime = SiteLedger(tmp_path / "ledger.sqlite", "patients", epsilon, DELTA,
                          site="clinic", worst_case_epsilon=worst)
    return lifetime.for_run(RunCharge("run-1", "dps-pca", "f" * 64, cap or 1000))


@pytest.mark.parametrize("case", list(CASES))
def test_the_simulated_and_the_real_ledger_decide_alike(tmp_path, case):
    epsilon, worst, cap, made, action, new, refusal = CASES[case]
    decisions = []
    for ledger in (simulated(epsilon, worst, cap), real(tmp_path, epsilon, worst, cap)):
        for release in made:
            ledger.charge(release)
        spent = ledger.epsilon_spent()
        try:
            if action == "charge":
                (release,) = new
                ledger.charge(release)
            else:
                ledger.require_run(new)
        except BudgetExceededError as refused:
            decisions.append(str(refused))
            assert (ledger.count, ledger.epsilon_spent()) == (len(made), spent)  # nothing kept
        else:
            decisions.append(None)
            assert ledger.count == len(made) + (action == "charge")
    if refusal is None:
        assert decisions == [None, None]
    else:
        for reason in decisions:
            assert reason is not None and reason.startswith("clinic: refused ")
            assert reason.endswith("; nothing was released")
            assert re.search(refusal, reason), reason
        # the same reason in both, up to what the budget covers (a run's or the lifetime's)
        # and the algorithm the real site's run names
        assert decisions[0] == decisions[1].replace("lifetime budget", "budget").replace(
            " of dps-pca", "")

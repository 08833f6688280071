"""A hostile coordinator against a real site, through the real ClientApp code path.

Each test is one attack from the coordinator's side (it controls the run_config, the fit
configs, the number and timing of runs) and shows that it fails: the site's own policy file
and lifetime ledger decide. The attacks that need a network (a FAB with modified code, a
SuperNode restart) run on the loopback deployment in ``tests/test_deployment.py``.
"""

import math
import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from flwr.common import (
    Context,
    FitIns,
    RecordDict,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from ledger_race import race

from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.algorithms.specs import app_config
from fedpca.flower.app import client_fn
from fedpca.flower.site.site_client import client_factory
from fedpca.errors import BudgetExceededError, InvalidDataError, InvalidRequestError
from fedpca.linalg.subspace import thin_qr
from fedpca.dp.calibration import calibrate_gaussian, pld_epsilon
from fedpca.dp.exact_noise import ExactGaussian, float_error
from fedpca.site import ledger as site_ledger
from fedpca.site.ledger import SiteLedger
from fedpca.site.ledger_store import create_ledger
from fedpca.site.ledger_report import summarize
from fedpca.site.policy import PolicyError, load_site_policy
from fedpca.site.policy_template import write_policy_template

#: The algorithm's client factory (the one client of every algorithm, over its site).
client_for_site = client_factory(DPSPCASite)

pytestmark = pytest.mark.federation

D, N = 8, 400
#: The coordinator's run_config: every privacy key set to a value it would like.
GREEDY = {"algorithm": "dpdis-pca", "dim": D, "k": 2, "r": 0, "epsilon": 1e6, "delta": 0.5,
          "rounds": 1, "clip-norm": 100.0, "accounting": "pld", "secure-min-sites": 0,
          "seed": -1, "variant": "factor", "weighting": "uniform", "alpha": 0.0,
          "noise-sampler": "float"}


def records(seed: int = 0, n: int = N) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, D))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def make_site(tmp_path, *, epsilon=4.0, run_epsilon=1.0, daily=None, weekly=None, delta=1e-7,
              extra="", n=N):
    """A real site's folder: records, and a policy written by ``fedpca site init``'s code
    (its daily and weekly ceilings the lifetime ``epsilon`` unless given)."""
    np.save(tmp_path / "records.npy", records(n=n))
    policy = write_policy_template(tmp_path / "policy.toml", "hospital-a", "records.npy",
                                   delta=delta)
    text = policy.read_text().replace("epsilon = 4.0", f"epsilon = {epsilon!r}")
    text = text.replace("run-epsilon = 1.0", f"run-epsilon = {run_epsilon!r}")
    text = text.replace("daily-epsilon = 1.0", f"daily-epsilon = {daily or epsilon!r}")
    text = text.replace("weekly-epsilon = 2.0", f"weekly-epsilon = {weekly or epsilon!r}")
    policy.write_text(text + extra)
    return policy


def context(policy, run_config, run_id=1) -> Context:
    return Context(run_id=run_id, node_id=7, node_config={"policy": str(policy)},
                   state=RecordDict(), run_config=dict(run_config))


def ask(policy, run_config, run_id=1, config=None):
    """One fit request of the coordinator to the real ClientApp's client."""
    client = client_fn(context(policy, run_config, run_id))
    request = config or {"dim": D, "variant": "factor", "r": 4}
    res = client.fit(FitIns(ndarrays_to_parameters([]), request))
    return parameters_to_ndarrays(res.parameters), res.metrics


def ledger_rows(policy):
    p = load_site_policy(policy)
    return SiteLedger(p.ledger, p.population, p.epsilon, p.delta).rows()


def test_a_seeded_run_config_is_refused_at_a_real_site(tmp_path):
    policy = make_site(tmp_path)
    with pytest.raises(InvalidRequestError, match=r"hospital-a: refused: run_config seed=7"):
        ask(policy, {**GREEDY, "seed": 7})
    assert ledger_rows(policy) == []


def test_the_coordinators_budget_is_ignored_and_the_sites_own_applies(tmp_path, caplog):
    caplog.set_level("INFO", logger="fedpca.site.real_site")
    policy = make_site(tmp_path, run_epsilon=0.5)
    (value,), metrics = ask(policy, GREEDY)  # epsilon=1e6, delta=0.5: no crash, no effect
    rows = ledger_rows(policy)
    assert len(rows) == 1 and rows[0]["algorithm"] == "dpdis-pca"
    own = calibrate_gaussian(1, 0.5, 1e-7, "pld", paper_rule="classic")
    sensitivity = math.sqrt(2) / N  # the site's clip norm 1, not the coordinator's 100
    # exact noise (not the float the coordinator asked for), in grid steps of A^_s
    exact = ExactGaussian.for_release(own.sigma(sensitivity), sensitivity, D * (D + 1) // 2,
                                      float_error(1.0, N + 1))
    assert rows[0]["mechanism"].endswith("+exact") and rows[0]["summands"] == 1
    assert rows[0]["sensitivity"] == pytest.approx(exact.grid_sensitivity)
    assert exact.grid_sensitivity * exact.gamma == pytest.approx(sensitivity, rel=1e-3)
    assert rows[0]["sigma"] == exact.sigma
    assert metrics["epsilon_spent"] == pytest.approx(0.5, rel=1e-3)
    assert "ignored" in caplog.text and "epsilon=1000000.0" in caplog.text
    assert "hospital-a: noise sampler exact" in caplog.text


def test_a_site_without_its_own_policy_refuses(tmp_path):
    np.save(tmp_path / "records.npy", records())
    ctx = Context(run_id=1, node_id=7, node_config={"data-path": str(tmp_path / "records.npy")},
                  state=RecordDict(), run_config=GREEDY)
    with pytest.raises(PolicyError, match="names no site policy"):
        client_fn(ctx)


@pytest.mark.parametrize("edit,match", [
    (("delta = 1e-07", "delta = 1.5"), "delta=1.5 must be below 1"),
    (("delta = 1e-07", "delta = 0.999"), "delta=0.999 is not well below 1/n"),
    (("delta = 1e-07", "delta = 0.01"), "not well below 1/n"),
    (("run-epsilon = 1.0", "run-epsilon = 9.0"), "run-epsilon=9 exceeds budget.daily-epsilon=4"),
    (("weekly-epsilon = 4.0", "weekly-epsilon = 5.0"), "weekly-epsilon=5 exceeds budget.epsilon"),
    (("daily-epsilon = 4.0", "# daily-epsilon = 4.0"), r"sets no daily-epsilon: .* no longer per run .* "
                                     r"daily-epsilon = 1 \(one full run a day\)"),
    (("epsilon = 4.0", "epsilon = -1.0"), "budget.epsilon must be a finite number > 0"),
    (("epsilon = 4.0", "epsilon = nan"), "budget.epsilon must be a finite number > 0"),
    (("min-sites = 0", "min-sites = 1"), "min-sites=1 must be 0 or an integer >= 2"),
    (("min-sites = 0", "min-sites = 3"),
     "worst-case-epsilon must be a finite number > 0, got None; secure-aggregation.min-sites=3"),
    (("# worst-case-epsilon = 8", "worst-case-epsilon = 2.0"), "below budget.epsilon=4"),
    (("[algorithms.ldp-pca]", "[algorithms.steal-data]"), "unknown algorithms"),
    (("memory-mib = 4096", "memory-mib = 100"),
     "limits.memory-mib=100 must be 0 \\(no limit\\) or an integer >= 512"),
])
def test_a_policy_that_makes_no_sense_is_refused_in_one_line(tmp_path, edit, match):
    policy = make_site(tmp_path)
    policy.write_text(policy.read_text().replace(*edit))
    with pytest.raises(PolicyError, match=match) as info:
        ask(policy, GREEDY)
    assert "\n" not in str(info.value)
    assert ledger_rows_if_any(policy) == []


def ledger_rows_if_any(policy):
    path = policy.parent / "ledger.sqlite"
    if not path.exists():
        return []
    return sqlite3.connect(path).execute("SELECT * FROM releases").fetchall()


def test_an_algorithm_the_site_does_not_allow_is_refused(tmp_path):
    policy = make_site(tmp_path)
    policy.write_text(policy.read_text().replace("[algorithms.dpdis-pca]\n", ""))
    with pytest.raises(PolicyError, match="'dpdis-pca' is not allowed"):
        ask(policy, GREEDY)


def test_runs_compose_over_the_lifetime_and_the_tenth_is_refused(tmp_path):
    # Each DPdisPCA run is one release at run-epsilon 0.5; the lifetime budget holds nine.
    z = calibrate_gaussian(1, 0.5, 1e-7, "pld", paper_rule="classic").noise_multiplier
    lifetime = pld_epsilon((z,) * 9, 1e-7)
    policy = make_site(tmp_path, epsilon=lifetime * (1 + 1e-9), run_epsilon=0.5)
    assert pld_epsilon((z,) * 2, 1e-7) < 2 * 0.5  # two runs compose to less than 2 x 0.5
    for run in range(1, 10):  # a fresh Context each run: what a new flwr run / restart sees
        ask(policy, GREEDY, run_id=run)
    with pytest.raises(BudgetExceededError, match="lifetime budget .* would be exceeded"):
        ask(policy, GREEDY, run_id=10)
    rows = ledger_rows(policy)
    assert [r["run_id"] for r in rows] == [str(r) for r in range(1, 10)]
    p = load_site_policy(policy)
    summary = summarize(SiteLedger(p.ledger, p.population, p.epsilon, p.delta))
    # the exact releases' Gaussian view composes in closed form: at most the PLD figure
    assert lifetime * (1 - 1e-4) <= summary["epsilon_spent"] <= lifetime
    assert len(summary["runs"]) == 9 and len(summary["datasets"]) == 1


def test_a_run_cannot_exceed_its_ceiling_or_its_release_count(tmp_path):
    policy = make_site(tmp_path)
    first = ask(policy, GREEDY, run_id=3)
    # the same request again (as after a restart): the journaled answer, nothing released
    again = ask(policy, GREEDY, run_id=3)
    np.testing.assert_array_equal(again[0][0], first[0][0])
    with pytest.raises(BudgetExceededError, match="allows 1 releases per run"):
        # the same run asks for another release (another rank): past its one release
        ask(policy, GREEDY, run_id=3, config={"dim": D, "variant": "factor", "r": 3})
    assert len(ledger_rows(policy)) == 1


def test_a_fresh_run_id_per_request_is_stopped_by_the_daily_ceiling(tmp_path, monkeypatch):
    # Each DPdisPCA run is one release calibrated to run-epsilon 0.5; the coordinator starts a
    # new run for every request. The site's clock (injected) decides, not the run ids.
    z = calibrate_gaussian(1, 0.5, 1e-7, "pld", paper_rule="classic").noise_multiplier
    per_day = max(n for n in range(1, 20) if pld_epsilon((z,) * n, 1e-7) <= 1.0)
    assert per_day >= 2  # more than one run fits: the ceiling composes, it does not count
    policy = make_site(tmp_path, epsilon=4.0, run_epsilon=0.5, daily=1.0, weekly=2.0)
    now = [1_740_996_000.0]  # Monday 3 March 2025, 10:00 UTC
    monkeypatch.setattr(site_ledger, "utc_now", lambda: now[0])
    for run_id in range(1, per_day + 1):
        ask(policy, GREEDY, run_id=run_id)
    with pytest.raises(BudgetExceededError, match="daily ceiling epsilon=1 .* the day ends at "
                                                  "2025-03-04 00:00:00 UTC"):
        ask(policy, GREEDY, run_id=per_day + 1)
    assert len(ledger_rows(policy)) == per_day  # no row for the refused release
    now[0] += 14 * 3600  # Tuesday 00:00 UTC: a new day
    ask(policy, GREEDY, run_id=per_day + 2)
    assert [r["time"] for r in ledger_rows(policy)][-1] == now[0]
    summary = summarize(load_site_policy(policy).open_ledger())
    windows = {w["window"]: w for w in summary["windows"]}
    assert windows["daily"]["releases"] == 1 and windows["weekly"]["releases"] == per_day + 1


#: A DPS-PCA run of one power round: two releases (the initialisation and the round).
ONE_ROUND = {**app_config(), "dim": D, "k": 2, "sparsity": 4, "s-hat": 6, "rounds": 1}


def test_a_run_the_site_cannot_finish_is_refused_at_its_first_request(tmp_path):
    # The lifetime holds three releases, one and a half runs of two: run 1 makes both of its
    # releases; run 2's first release alone would fit, the whole run does not.
    z = calibrate_gaussian(2, 1.0, 1e-7, "pld", paper_rule="dps-pca").noise_multiplier
    three = pld_epsilon((z,) * 3, 1e-7) * (1 + 1e-6)
    policy = make_site(tmp_path, epsilon=three)
    policy.write_text(policy.read_text().replace("rounds = 10", "rounds = 1"))
    basis = thin_qr(np.random.default_rng(1).standard_normal((D, 2)))
    for arrays, request in (([], {"phase": "init"}), ([basis], {"phase": "power", "round": 1})):
        client_fn(context(policy, ONE_ROUND, run_id=1)).fit(
            FitIns(ndarrays_to_parameters(arrays), request))
    assert len(ledger_rows(policy)) == 2
    (tmp_path / "records.npy").write_bytes(b"not records")  # the check reads no data
    with pytest.raises(BudgetExceededError, match=r"hospital-a: refused this run of dps-pca: "
                       r"the 2 releases left of it, as this site calibrates them, do not fit: "
                       r"the site's lifetime budget .* would be exceeded \(\S+ after this run"):
        client_fn(context(policy, ONE_ROUND, run_id=2))
    assert len(ledger_rows(policy)) == 2


def test_a_changed_data_file_keeps_the_populations_budget(tmp_path):
    z = calibrate_gaussian(1, 1.0, 1e-7, "pld", paper_rule="classic").noise_multiplier
    one_run = pld_epsilon((z,), 1e-7) * (1 + 1e-9)
    policy = make_site(tmp_path, epsilon=one_run, run_epsilon=one_run)
    ask(policy, GREEDY, run_id=1)
    np.save(tmp_path / "records.npy", records(seed=5))  # re-exported: same people
    with pytest.raises(BudgetExceededError, match="lifetime"):
        ask(policy, GREEDY, run_id=2)


def test_a_bad_data_file_is_refused_without_quoting_the_data(tmp_path, caplog):
    policy = make_site(tmp_path)
    X = records()
    X[3, 2] = np.nan
    np.save(tmp_path / "records.npy", X)
    with pytest.raises(InvalidDataError) as info:
        ask(policy, GREEDY)
    assert "site's log" in str(info.value) and not any(c.isdigit() for c in str(info.value))
    assert "cannot be used" in caplog.text  # the operator sees the reason locally


def test_two_processes_racing_for_the_last_release_exactly_one_wins(tmp_path):
    # each racer a fresh process forked from one that imported the ledger once (six spawned
    # processes importing it took 9.4 s of CPU in the suite)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["ledger_race"])
    for attempt in range(3):
        path = str(tmp_path / f"ledger-{attempt}.sqlite")
        create_ledger(Path(path))
        barrier, results = ctx.Barrier(2), ctx.Queue()
        workers = [ctx.Process(target=race, args=(path, barrier, results)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=120)
            assert w.exitcode == 0
        outcome = sorted(results.get(timeout=5) for _ in workers)
        assert outcome == ["charged", "refused"]
        assert len(sqlite3.connect(path).execute("SELECT * FROM releases").fetchall()) == 1


def test_site_init_writes_a_policy_that_loads_and_is_never_overwritten(tmp_path):
    policy = make_site(tmp_path)
    loaded = load_site_policy(policy)
    assert loaded.name == "hospital-a" and loaded.data == tmp_path / "records.npy"
    assert loaded.algorithms.keys() == {"dps-pca", "dpdis-pca", "ldp-pca"}
    assert loaded.releases_per_run("dps-pca") == 11 and loaded.secure_min_sites is None
    with pytest.raises(PolicyError, match="never overwritten"):
        write_policy_template(policy, "x", "y.npy")

"""fedpca's verified secure aggregation in a real loopback deployment, against an honest and
a hostile coordinator.

Three real sites join the session's loopback deployment (``tests/loopback.py``; module
fixture: TLS, SuperNode authentication, ``--isolation process`` with each site's ``fedpca
site superexec`` running its pinned ClientApp), each with its own policy (``min-sites = 2``,
``worst-case-epsilon``, the consortium's roster and its own Ed25519 signing key:
:func:`fedpca.deployment.consortium.write_consortium`), and run DPdisPCA's secure-sum
variant:

* with the App's own ServerApp through the verified protocol (the sites draw OS noise, so
  the basis is compared with the pooled non-private PCA loosely; the exact equality of the
  unmasked integer sum with the sites' residues is tested in memory, in
  ``tests/test_secure_protocol.py`` and ``tests/test_verified_secure_site.py``);
* at the same time, with a hostile ServerApp (``tests/hostile_secagg.py``) named by a
  configuration-only FAB whose only change is the ``serverapp`` component, which the sites'
  FAB check accepts: attacks 1-3 and an altered signature are refused before a site sends
  anything the coordinator could unmask (nothing charged), and a split view of the survivor
  sets gets no reveal.

Then a run after the coordinator replaced the sites' roster with its own (one site and
members whose keys it made): every site refuses in the readiness round and spends nothing.
Then a secure DPS-PCA run whose site c is killed at its first input (SIGKILL) and started
again once the SuperLink lets it back (about 30-60 s of Flower's heartbeat patience): the
run awaits it (``restart-seconds``), asks it again, and c goes on from the secure session on
its own disk (``fedpca.site.reply_journal``): every round's sum is the three sites'.
Last, a third honest run survives a site that stops after the key agreement (about 50 s on
the 2-core development machine): the test stops the site's SuperNode from outside as soon
as its log shows the round's input request arriving (its third train message of this run,
after the key advertisement's and the shares' requests; the readiness round's and the result's
messages are query messages, and late messages of the earlier runs are told apart by
their run id): the key agreement is over, and the site's ClientApp (a fresh process) has
not answered yet. Stopping it right after its share bundle is too early: a SuperLink that
sees the node leave may report its last reply as "node unavailable". SIGTERM: the
SuperNode tells the SuperLink it leaves, so the input request addressed to it fails at once
("node unavailable") instead of after a minute of missed heartbeats. The signal comes from
outside the deployment, as when a site's operator stops it: the deployment notices the
SuperNode's exit, leaves the site out and carries on. The other two sites, the threshold, finish the round with the
stopped site's pairwise masks revealed. Other dropout cases (between the consistency and
the unmask stages, a site back in the next round) are tested in memory
(``tests/test_secure_protocol.py``, ``tests/test_secure_rounds.py``).
"""

import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedpca.algorithms.specs import SPECS
from fedpca.flower.app_config import COMPONENTS
from fedpca.deployment.consortium import write_consortium
from fedpca.deployment.fab_check import config_only_pyproject
from fedpca.deployment.launch import DeploymentError
from fedpca.deployment.local import Site
from fedpca.linalg.subspace import subspace_distance
from fedpca.secure.roster import roster_entry, write_roster
from fedpca.site.policy import load_site_policy
from fedpca.results import PCAResult
from hostile_secagg import CONSORTIUM, report_path
from loopback import joined, restart_site

pytestmark = pytest.mark.federation

SITES = ("hospital-a", "hospital-b", "hospital-c")
#: Every site's M (the run's secure-min-sites must equal it: the sites and the server derive
#: the same grid from it); N = 3 sites then give the threshold t = 2.
M = 2
D, K, RECORDS = 8, 2, 400
#: What the coordinator sends. A real site replaces the privacy keys with its policy's; they
#: are the policy template's here, so that the server decodes with the sites' grid.
RUN_CONFIG = {
    "algorithm": "dpdis-pca", "dim": D, "k": K, "variant": "secure-sum",
    "secure-min-sites": M, "secagg-max-weight": 500, "min-sites": M, "samples": 3 * RECORDS,
    "epsilon": 1.0, "delta": 1e-7, "accounting": "pld", "clip-norm": 1.0,
}
#: The secure DPS-PCA run (power rounds every site's policy calibrates for: DPS_ROUNDS).
DPS_ROUNDS = 2
DPS_RUN_CONFIG = {
    "algorithm": "dps-pca", "dim": D, "k": K, "sparsity": D, "s-hat": D, "rounds": DPS_ROUNDS,
    "secure-min-sites": M, "secagg-max-weight": 500, "min-sites": M, "samples": 3 * RECORDS,
    "epsilon": 1.0, "delta": 1e-7, "accounting": "pld", "clip-norm": 1.0,
}
#: Seconds each run may take: about a minute alone on an idle 2-core machine, two runs
#: interleaved at every site (each secure input calibrates the site's discrete noise in a
#: fresh ClientApp process), and several minutes when other test files load the machine.
RUN_TIMEOUT = 600
#: What a SuperNode logs when a train message reaches it (Flower's own line; the budget
#: round's and the result's messages are query messages).
RECEIVING_TRAIN = "Receiving: train message"
SENDING_TRAIN = "Sending: train message"


def site_records(seed: int) -> np.ndarray:
    """Unit-norm rows with a clear top-2 subspace (the same at the three sites)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(np.random.default_rng(99).standard_normal((D, D)))[0]
    scales = np.array([10.0, 7.0] + [1.0] * (D - 2))
    X = (rng.standard_normal((RECORDS, D)) * scales) @ basis.T
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def ledger_rows(site: Site) -> list[dict]:
    return load_site_policy(site.policy).open_ledger().rows()


def ledgers(deployment) -> dict[str, list[dict]]:
    return {site.name: ledger_rows(site) for site in deployment.sites}


def new_rows(before: dict, after: dict) -> dict[str, list[dict]]:
    return {name: rows[len(before[name]):] for name, rows in after.items()}


def pooled_basis(names) -> np.ndarray:
    X = np.vstack([np.load(DATA[name]) for name in names])
    return np.linalg.eigh(X.T @ X)[1][:, ::-1][:, :K]


DATA: dict[str, Path] = {}


@pytest.fixture(scope="module")
def deployment(loopback, tmp_path_factory):
    work = tmp_path_factory.mktemp("secure-deployment")
    for i, name in enumerate(SITES):
        DATA[name] = work / f"{name}.npy"
        np.save(DATA[name], site_records(i))
    # each site's key, policy (min-sites, worst-case epsilon, roster, key) and the roster
    policies = write_consortium(work / "sites", SITES, [DATA[n] for n in SITES], min_sites=M,
                                consortium=CONSORTIUM)
    assert all(load_site_policy(p).secure_min_sites == M for p in policies)
    for policy in policies:  # a short secure DPS-PCA run (its table's rounds)
        policy.write_text(policy.read_text().replace("rounds = 10", f"rounds = {DPS_ROUNDS}"))
    sites = [Site(name, DATA[name], policy) for name, policy in zip(SITES, policies)]
    # the hostile ServerApps' module is on the coordinator's PYTHONPATH (the session's
    # deployment: its ServerApp processes only)
    with joined(loopback, sites, work) as federation:
        yield federation


def hostile_app(folder: Path, component: str) -> Path:
    """A configuration-only App whose only change is its ``serverapp``."""
    folder.mkdir()
    honest = f'serverapp = "{COMPONENTS["serverapp"]}"'
    text = config_only_pyproject()
    assert honest in text
    (folder / "pyproject.toml").write_text(text.replace(honest,
                                                        f'serverapp = "{component}"'))
    return folder


def site_logs(deployment, name: str) -> str:
    return "".join(p.read_text(errors="replace")
                   for p in deployment.logs.glob(f"*-{name}.log"))


def refusal(report: dict, step: str, site: str) -> str:
    """The refusal of ``site``, the one site ``step`` was sent to."""
    (reply,) = report["steps"][step].values()
    assert "error" in reply, reply
    assert reply["error"].startswith(f"{site}: refused: "), reply
    assert "Traceback" not in reply["error"]
    return reply["error"]


@dataclass
class Runs:
    honest: PCAResult
    honest_rows: dict[str, list[dict]]
    report: dict
    hostile_rows: dict[str, list[dict]]
    hostile_log: str


@pytest.fixture(scope="module")
def runs(deployment, tmp_path_factory) -> Runs:
    """The honest run and the hostile one, at the same time (a site answers one message at
    a time, so the runs interleave at every site; run one after the other, they took about
    a minute each on the 2-core development machine)."""
    folder = tmp_path_factory.mktemp("runs")
    before = ledgers(deployment)
    output = folder / "hostile.json"
    app = hostile_app(folder / "app", "hostile_secagg:hostile_app")
    failed: list[BaseException] = []

    def coordinator() -> None:
        try:
            deployment.run({**RUN_CONFIG, "output": str(output)}, timeout=RUN_TIMEOUT,
                           app_dir=app, result=False)
        except BaseException as exc:  # noqa: BLE001 (the assertion below reports it)
            failed.append(exc)

    started = len(deployment.launched)
    thread = threading.Thread(target=coordinator, name="hostile coordinator")
    thread.start()
    try:
        while len(deployment.launched) == started and thread.is_alive():
            time.sleep(0.05)  # its flwr run is launched: the honest one gets the next number
        honest = deployment.run({**RUN_CONFIG, "output": str(folder / "honest.json")},
                                timeout=RUN_TIMEOUT)
    finally:
        thread.join(RUN_TIMEOUT)
    assert not thread.is_alive() and not failed, failed
    report = json.loads(report_path(output).read_text())
    rows = new_rows(before, ledgers(deployment))
    hostile = report["run_id"]
    (hostile_log,) = [text for path in deployment.logs.glob("flwr-run-*.log")
                      if f"started run {hostile}" in (text := path.read_text(errors="replace"))]
    return Runs(honest, {n: [r for r in rs if r["run_id"] != hostile] for n, rs in rows.items()},
                report, {n: [r for r in rs if r["run_id"] == hostile] for n, rs in rows.items()},
                hostile_log)


def test_an_honest_run_through_the_verified_protocol(runs):
    result = runs.honest
    assert result.sites_answered == [list(SITES)]
    assert result.privacy["epsilon"] == pytest.approx(1.0)
    assert result.privacy["epsilon_worst_case"] > result.privacy["epsilon"]
    rows = runs.honest_rows
    assert all(len(r) == 1 and r[0]["sites_in_sum"] == M for r in rows.values()), rows
    assert len({r[0]["run_id"] for r in rows.values()}) == 1
    # OS noise: compared with the pooled non-private PCA (in 100 seeded reference runs,
    # run_dpdis_pca with the same data and policy, the largest distance was 0.087; a random
    # plane is at about 1.4)
    assert subspace_distance(result.basis, pooled_basis(SITES)) < 0.25


def test_attacks_are_refused_before_a_site_sends_anything(deployment, runs):
    report = runs.report
    steps = report["steps"]
    a, b, c = SITES
    assert [r["kind"] for r in steps["setup"].values()] == ["secagg-advertisement"] * 3
    # Attack 1: threshold 1, then a key list of the site alone
    reason = refusal(report, "threshold-1", a)
    assert "threshold t=1" in reason and f"M={M}" in reason
    reason = refusal(report, "alone", a)
    assert "N=1" in reason and "nothing sent" in reason
    # Attack 2: roster names with keys the coordinator made itself
    reason = refusal(report, "fake-neighbours", b)
    assert "is not signed by its roster key" in reason and "nothing sent" in reason
    # another member's real advertisement with an altered signature
    reason = refusal(report, "bad-signature", b)
    assert f"advertisement of {c!r} is not signed by its roster key" in reason
    # Attack 3: Sybils
    reason = refusal(report, "sybils", c)
    assert "'sybil-0', who is not in the roster" in reason
    # the coordinator's error (its ServerApp's, in flwr run's output) and the sites' own
    # logs hold the reasons
    for text in ("threshold t=1", "N=1", "not signed by its roster key", "not in the roster"):
        assert text in runs.hostile_log
    assert "threshold t=1" in site_logs(deployment, a)
    assert "not signed by its roster key" in site_logs(deployment, b)
    assert f"site {c} refused: the key list names 'sybil-0'" in site_logs(deployment, c)
    # nothing was charged before the run's one input request (the split view's, below)
    assert all(row["time"] > report["times"]["input_sent"]
               for site_rows in runs.hostile_rows.values() for row in site_rows)


def test_a_split_view_of_the_survivors_gets_no_reveal(runs):
    steps = runs.report["steps"]
    assert [r["kind"] for r in steps["key-list"].values()] == ["secagg-share-bundle"] * 3
    # the sites masked and charged their answers (once each)
    assert [r["kind"] for r in steps["masked-inputs"].values()] == ["secagg-masked-input"] * 3
    rows = runs.hostile_rows
    assert all(len(r) == 1 and r[0]["sites_in_sum"] == M for r in rows.values()), rows
    assert [r["kind"] for r in steps["split-consistency"].values()] == [
        "secagg-endorsement"] * 3
    a, b, c = SITES  # a and c were shown every survivor, b the set without c
    unmask = list(steps["split-unmask"].values())
    assert all("error" in reply for reply in unmask), unmask  # no reveal
    replies = {reply["error"].split(":", 1)[0]: reply["error"] for reply in unmask}
    assert sorted(replies) == list(SITES)
    assert "another survivor set than this site endorsed" in replies[a]
    assert f"endorsement of {a!r} does not verify" in replies[b]
    assert "another survivor set than this site endorsed" in replies[c]
    assert "does not verify" in runs.hostile_log


def train_messages_by_run(supernode_log: Path, event: str = RECEIVING_TRAIN) -> dict[str, int]:
    """Train messages the SuperNode has received (or, with ``event=SENDING_TRAIN``,
    answered) so far, per run id (by its log: Flower names the run before each)."""
    received: dict[str, int] = {}
    run = ""
    for line in supernode_log.read_text(errors="replace").splitlines():
        if "[RUN " in line:
            run = line.split("[RUN ", 1)[1].split(",")[0].split("]")[0].strip()
        elif event in line:
            received[run] = received.get(run, 0) + 1
    return received


def test_a_roster_the_coordinator_wrote_with_members_it_made_is_refused_end_to_end(
        deployment, tmp_path):
    """The sites' roster replaced by one the coordinator wrote: site c and nine members whose
    keys it made, every entry's proof valid. The members each site vouched for (the
    fingerprints it compared) are not in it: every site refuses the run in its readiness
    round, before any secure stage, and nothing is spent."""
    c = SITES[2]
    roster = Path(load_site_policy(deployment.sites[2].policy).roster)
    honest = roster.read_text()
    keys = {name: Ed25519PrivateKey.generate() for name in (c, *(f"m{i}" for i in range(9)))}
    write_roster(roster, CONSORTIUM, {n: roster_entry(CONSORTIUM, n, k) for n, k in keys.items()})
    before = ledgers(deployment)
    output = tmp_path / "sybil-roster.json"
    try:
        with pytest.raises(DeploymentError, match=r"readiness round: 0 site\(s\) are ready for "
                                                  r"this run, need 2; nothing was released"):
            deployment.run({**RUN_CONFIG, "output": str(output)}, timeout=RUN_TIMEOUT)
    finally:
        roster.write_text(honest)
    failures = json.loads(output.read_text())["site_failures"]
    assert len(failures) == 3
    assert all("which no member of the roster" in failure for failure in failures), failures
    assert ledgers(deployment) == before


def test_a_secure_dps_pca_run_goes_on_with_a_site_that_restarts_at_its_first_input(
        deployment, tmp_path):
    # site c's machine hangs once its key agreement is over, and its SuperNode is killed
    # when the first round's input request has reached it, then started again: the restarted site
    # reads its secure session from its own disk, is asked again, and every round's sum,
    # that one and the later ones, is the three sites'
    a, b, c = SITES
    supernode = deployment.running[c].supernode.log
    earlier_runs = set(train_messages_by_run(supernode))
    before = ledgers(deployment)
    flwr_runs, frozen, restarted = [], [], []

    def restart_c_when_its_input_request_arrives(flwr_run) -> None:
        flwr_runs.append(flwr_run)
        if restarted:
            return
        counts = [{run: n for run, n in train_messages_by_run(supernode, event).items()
                   if run not in earlier_runs} for event in (SENDING_TRAIN, RECEIVING_TRAIN)]
        if not frozen and max(counts[0].values(), default=0) >= 2:
            os.kill(deployment.running[c].superexec.process.pid, signal.SIGSTOP)
            frozen.append(c)
        if frozen and max(counts[1].values(), default=0) >= 3:
            # killed (it cannot tell the SuperLink it leaves), its frozen SuperExec with it,
            # and started again once the SuperLink lets it back (about 30-60 s)
            deployment.kill_site(c, signal.SIGKILL)
            restart_site(deployment, next(s for s in deployment.sites if s.name == c),
                         deployment.keys[c])
            restarted.append(c)

    result = deployment.run({**DPS_RUN_CONFIG, "output": str(tmp_path / "restart.json")},
                            timeout=RUN_TIMEOUT, during=restart_c_when_its_input_request_arrives)
    assert restarted == [c]
    server_log = flwr_runs[-1].log.read_text(errors="replace")
    assert "went away: awaiting it" in server_log and "is connected again" in server_log
    releases = SPECS["dps-pca"].releases_per_run(DPS_ROUNDS)
    assert result.sites_answered == [list(SITES)] * releases
    rows = new_rows(before, ledgers(deployment))
    # charged once per planned release, each inside a sum of all M
    assert [len(rows[name]) for name in SITES] == [releases] * 3, rows
    assert all(row["sites_in_sum"] == M for name in SITES for row in rows[name])
    run_id = str(result.config["run_id"])
    for site in deployment.sites:
        assert load_site_policy(site.policy).open_ledger().run_records()[run_id][
            "status"] == "complete"


def test_an_honest_run_survives_a_site_stopping_after_the_key_agreement(deployment, tmp_path):
    # last in this file: the stopped site stays down
    a, b, c = SITES
    supernode = deployment.running[c].supernode.log
    earlier_runs = set(train_messages_by_run(supernode))  # late messages of those don't count
    before = ledgers(deployment)
    flwr_runs, frozen, stopped = [], [], []

    def stop_c_when_its_input_request_arrives(flwr_run) -> None:
        flwr_runs.append(flwr_run)
        answered = [n for run, n in train_messages_by_run(supernode, SENDING_TRAIN).items()
                    if run not in earlier_runs]
        received = [n for run, n in train_messages_by_run(supernode).items()
                    if run not in earlier_runs]
        site = deployment.running.get(c)
        # its key advertisement's request and its shares' request answered: the key
        # agreement is over. Its machine hangs (its ClientApp launcher frozen before the
        # round's input request can reach it, so it never answers that), then, once the
        # request has arrived, its operator stops it (SIGTERM, from outside the deployment,
        # which must carry on)
        if not frozen and max(answered, default=0) >= 2:
            os.kill(site.superexec.process.pid, signal.SIGSTOP)
            frozen.append(site.superexec.process.pid)
        if frozen and not stopped and max(received, default=0) >= 3:
            os.kill(site.supernode.process.pid, signal.SIGTERM)
            site.supernode.process.wait(timeout=60)
            os.kill(frozen[0], signal.SIGCONT)  # finds its SuperNode gone, and exits
            stopped.append(c)

    # c stays down: the run awaits its return 2 s (restart-seconds), then goes on without it
    result = deployment.run({**RUN_CONFIG, "output": str(tmp_path / "dropout.json"),
                             "restart-seconds": 2},
                            timeout=RUN_TIMEOUT, during=stop_c_when_its_input_request_arrives)
    assert c not in deployment.running  # left out, the federation went on
    assert {a, b} <= set(deployment.running)
    # the key agreement had all three (no failure before the round), the round's input
    # stage lost c, and the sum is a's and b's only
    server_log = flwr_runs[-1].log.read_text(errors="replace")
    assert "secure aggregation, setup: a site failed" not in server_log
    assert "secure aggregation, shares: a site failed" not in server_log
    assert "round 1: a site failed" in server_log and "Node Unavailable" in server_log
    assert result.sites_answered == [[a, b]]
    assert subspace_distance(result.basis, pooled_basis([a, b])) < 0.25
    rows = new_rows(before, ledgers(deployment))
    assert [len(rows[name]) for name in SITES] == [1, 1, 0], rows
    assert all(rows[name][0]["sites_in_sum"] == M for name in (a, b))

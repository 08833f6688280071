"""A per-site run survives a site's restart on a real loopback deployment.

Three real sites (TLS, SuperNode authentication, ``--isolation process`` with each site's
``fedpca site superexec``, each its own policy and lifetime ledger) join the session's
loopback deployment (``tests/loopback.py``) and run DPS-PCA with per-site noise (five
releases: the initialisation and four power rounds). Site r2's machine hangs once it has
answered two rounds (its ClientApp launcher frozen), and its SuperNode is killed (SIGKILL:
it cannot tell the SuperLink it leaves, as when its machine dies) when the third round's
request has reached it: that request is lost with the SuperNode. Its operator starts it
again until the SuperLink, which counts a killed SuperNode online until it missed two
heartbeats (about 30-60 s), lets it connect (:func:`loopback.restart_site`). The
coordinator, which awaits a site that went away for the run's ``restart-seconds``, sends the
request again once the site is back; the site, which had released nothing for it, answers
it and charges it once (about 75 s, 40 of them waiting for the SuperLink). The run
completes with all three sites in every round, and every ledger holds the plan's five
releases. A request answered before the restart and asked again gets the journaled reply
(``tests/test_site_restart.py``, in memory). Last, a site stopped for good: the run awaits
it ``restart-seconds``, then fails, and the coordinator's error, the run record and the
other sites' ledgers name it.
"""

import json
import os
import signal
import time

import pytest
from loopback import joined, restart_site
from test_deployment import RUN_CONFIG, ledger_rows, scenario_sites
from test_secure_deployment import RECEIVING_TRAIN, SENDING_TRAIN, train_messages_by_run

from fedpca.deployment.launch import DeploymentError
from fedpca.site.policy import load_site_policy

pytestmark = pytest.mark.federation

#: Seconds the run may take (about a minute alone on an idle 2-core machine).
RUN_TIMEOUT = 600
#: Each site's lifetime budget: several runs.
LIFETIME = 40.0


@pytest.fixture(scope="module")
def deployment(loopback, tmp_path_factory):
    work = tmp_path_factory.mktemp("restart-deployment")
    sites = scenario_sites(work, ["r0", "r1", "r2"], [LIFETIME] * 3)
    with joined(loopback, sites, work) as federation:
        yield federation


def test_a_per_site_run_goes_on_with_a_site_that_restarts_mid_run(deployment, tmp_path):
    restarting = deployment.sites[2]
    supernode = deployment.running[restarting.name].supernode.log
    flwr_runs, frozen, restarted = [], [], []

    def restart_when_its_third_request_arrives(flwr_run) -> None:
        flwr_runs.append(flwr_run)
        if restarted:
            return
        answered, received = (max(train_messages_by_run(supernode, event).values(), default=0)
                              for event in (SENDING_TRAIN, RECEIVING_TRAIN))
        if not frozen and answered >= 2:
            os.kill(deployment.running[restarting.name].superexec.process.pid, signal.SIGSTOP)
            frozen.append(restarting.name)
        if frozen and received >= 3:
            deployment.kill_site(restarting.name, signal.SIGKILL)
            restart_site(deployment, restarting, deployment.keys[restarting.name])
            restarted.append(restarting.name)

    result = deployment.run({**RUN_CONFIG, "output": str(tmp_path / "run.json")},
                            timeout=RUN_TIMEOUT, during=restart_when_its_third_request_arrives)
    assert restarted == [restarting.name]
    server_log = flwr_runs[-1].log.read_text(errors="replace")
    assert "went away: awaiting it" in server_log and "is connected again" in server_log
    names = [site.name for site in deployment.sites]
    assert [sorted(answered) for answered in result.sites_answered] == [names] * 5
    for site in deployment.sites:  # one complete run, charged once per planned release
        rows = ledger_rows(site)
        assert len(rows) == 5 and len({r["run_id"] for r in rows}) == 1, (site.name, rows)
    assert result.config["result_delivered"] == names


def test_a_site_that_stops_for_good_fails_the_run_within_the_plan_naming_it(deployment,
                                                                             tmp_path):
    # last in this file: the stopped site stays down
    stopping = deployment.sites[2]
    supernode = deployment.running[stopping.name].supernode.log
    earlier = train_messages_by_run(supernode, RECEIVING_TRAIN)
    started, stopped = time.monotonic(), []

    def stop_at_its_second_request(flwr_run) -> None:
        received = {run: n for run, n in train_messages_by_run(supernode).items()
                    if run not in earlier}
        if not stopped and max(received.values(), default=0) >= 2:
            deployment.kill_site(stopping.name, signal.SIGTERM)
            stopped.append(time.monotonic())

    output = tmp_path / "run.json"
    too_few = r"round \d: 2 site\(s\) answered, need 3"
    with pytest.raises(DeploymentError, match=too_few) as failed:
        deployment.run({**RUN_CONFIG, "output": str(output), "restart-seconds": 3},
                       timeout=RUN_TIMEOUT, during=stop_at_its_second_request)
    assert stopped and time.monotonic() - stopped[0] < 60  # the 3 s awaited, not a timeout
    named = f"site {stopping.name} (node "
    assert named in str(failed.value)
    record = json.loads(output.read_text())
    assert record["status"] == "failed" and any(named in f for f in record["site_failures"])
    for site in deployment.sites[:2]:  # the sites still up were told, by name
        runs = load_site_policy(site.policy).open_ledger().run_records().values()
        run = max(runs, key=lambda r: r["started"])  # this run, their latest
        assert run["status"] == "failed" and named in run["reason"], (site.name, run)

"""Secure sums in groups through Flower (``--secure-group-size``): a simulation of secure
DPS-PCA and of DPdisPCA's secure-sum variant sums its sites in the same groups as the
Flower-free reference and gives its basis; each group runs its own key agreement of its own
threshold in the same exchanges, and a group holding a site that scales its statistic is
dropped while the run goes on (the sites in this process, message by message); the CLI
refuses a group size without secure sums or outside M..sites; and a hostile coordinator's
groups are refused by the sites: a second key agreement in a session or in a real site's
run, a key list (a group) smaller than the site's M + c."""

import functools
import logging

import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, RecordDict
from local_grid import RUN_ID, LocalGrid, run_identity  # noqa: F401 (a fixture)
from secure_consortium import (
    ledger_rows,
    make_consortium,
    peers,
    protocol,
    refused,
    send,
    server_for,
    setup,
    site_context,
)
from secure_consortium import run_identity as consortium_identity

from fedpca.algorithms.dpdis_pca import VARIANT_SECURE, run_dpdis_pca
from fedpca.algorithms.dps_pca import DPSPCASite, run_dps_pca
from fedpca.algorithms.site import SiteAnswer
from fedpca.algorithms.sum_groups import answer_groups, assign_groups
from fedpca.audit.malicious import Attack
from fedpca.cli import main as cli_main
from fedpca.flower.secure_wire import PROTOCOL_RECORD
from fedpca.flower.server.rounds import summed_answers
from fedpca.flower.server.workflow import strategy_for
from fedpca.flower.simulations import simulate
from fedpca.flower.site.clientapp import site_client_app
from fedpca.flower.site.site_client import source_client
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.secure.conditions import ProtocolRefusal, smallest_threshold
from fedpca.secure.identity import simulation_identity
from fedpca.secure.messages import Advertisement, KeyList, SetupRequest
from fedpca.secure.site_session import SiteSession
from fedpca.simulated_sites import PartitionSource, partition_of

pytestmark = pytest.mark.federation

SITES, M, GROUP = 7, 2, 2  # seven sites in three groups: of three, two and two (by name)


@functools.cache
def dps_scenario(group_size=GROUP):
    return DPSPCAScenario(sites=SITES, samples=2100, dim=20, k=2, sparsity=5, s_hat=8,
                          rounds=2, secure_min_sites=M, discrete=True, seed=3, data_seed=3,
                          epsilon=2.0, secure_group_size=group_size)


@functools.cache
def dpdis_scenario():
    return DPdisPCAScenario(sites=SITES, samples=1400, dim=10, k=2, variant=VARIANT_SECURE,
                            secure_min_sites=M, seed=4, data_seed=4, secure_group_size=GROUP)


def no_drop_and_every_site(result, rounds):
    """Every round kept every site: no group dropped."""
    assert len(result.history) == rounds
    assert not any("dropped" in entry for entry in result.history)
    assert [sorted(names) for names in result.sites_answered] == [
        sorted(map(str, range(SITES)))] * rounds


def test_a_simulation_of_secure_dps_pca_in_groups_gives_the_references_basis(caplog):
    scenario = dps_scenario()
    with caplog.at_level(logging.INFO, logger="fedpca.flower.server.secure_server"):
        result = simulate(scenario)
    reference = run_dps_pca(scenario.all_site_data(), scenario.k, scenario.s_hat,
                            scenario.policy(), seed=scenario.seed, group_size=GROUP)
    np.testing.assert_allclose(result.basis, reference.basis, atol=1e-9)
    no_drop_and_every_site(result, scenario.flower_rounds)
    # three key agreements, each of its own group's size and threshold
    groups = assign_groups([str(i) for i in range(SITES)], GROUP, M)
    agreed = sorted(r.getMessage() for r in caplog.records if "agreed keys" in r.getMessage())
    assert agreed == sorted(
        f"secure aggregation: {len(g)} sites agreed keys in group {i + 1} of {len(groups)}, "
        f"threshold {smallest_threshold(len(g), 0, M)}" for i, g in enumerate(groups))
    assert [len(g) for g in groups] == [3, 2, 2]


def test_a_simulation_of_dpdis_pca_secure_sum_in_groups_gives_the_references_basis():
    scenario = dpdis_scenario()
    result = simulate(scenario)
    reference = run_dpdis_pca(scenario.all_prepared_sites(), scenario.k,
                              policy=scenario.policy(), seed=scenario.seed,
                              variant=VARIANT_SECURE, group_size=GROUP)
    np.testing.assert_allclose(result.basis, reference.basis, atol=1e-9)
    no_drop_and_every_site(result, 1)


#: Partition 0 scales its statistic by 1e3 (the experiments' malicious site); the others are
#: honest.
MaliciousPartition = functools.partial(PartitionSource, attack=Attack.parse("scale:1e3"))


def partition_grid(scenario, source=PartitionSource) -> LocalGrid:
    """The scenario's virtual sites (node ``i + 1`` is site ``str(i)``) answering from
    ``source`` in this process: every protocol message is seen."""
    def partition(context):
        return source(scenario, *partition_of(context.node_config))

    app = site_client_app(lambda context: source_client(context, partition(context)),
                          lambda context: partition(context).identity())
    contexts = {
        node: Context(run_id=RUN_ID, node_id=node, state=RecordDict(), run_config={},
                      node_config={"partition-id": node - 1, "num-partitions": scenario.sites})
        for node in range(1, scenario.sites + 1)
    }
    return LocalGrid(app, contexts)


def grid_run(scenario, source=PartitionSource):
    grid = partition_grid(scenario, source)
    strategy = strategy_for(scenario.server_plan(), scenario, wait_for_sites=scenario.sites)
    strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=strategy.num_rounds)
    return grid, strategy


@pytest.mark.usefixtures("run_identity")
def test_each_group_agrees_its_own_keys_and_unmasks_with_its_own_threshold():
    grouped, one = grid_run(dps_scenario()), grid_run(dps_scenario(0))
    rounds = dps_scenario().flower_rounds
    for grid, _ in (grouped, one):
        assert grid.sent.count("secagg-setup") == SITES  # one key agreement per site
    # every group's t sites endorse and reveal: t = 2 of each group of 3, 2 and 2 (6 sites),
    # t = 4 of one sum
    groups = assign_groups([str(i) for i in range(SITES)], GROUP, M)
    assert [smallest_threshold(len(g), 0, M) for g in groups] == [2, 2, 2]
    for kind in ("secagg-consistency-request", "secagg-unmask-request"):
        assert grouped[0].sent.count(kind) == 6 * rounds
        assert one[0].sent.count(kind) == smallest_threshold(SITES, 0, M) * rounds == 4 * rounds
    secure = grouped[1].secure_protocol
    assert [sorted(g.members.values()) for g in secure.groups] == [
        ["0", "3", "6"], ["1", "4"], ["2", "5"]]
    assert [secure.group_of(node) for node in range(1, SITES + 1)] == [0, 1, 2, 0, 1, 2, 0]
    assert one[1].secure_protocol.group_of(1) is None
    # the same sums, decoded per group or as one: the same basis up to float additions
    np.testing.assert_allclose(grouped[1].result().basis, one[1].result().basis, atol=1e-9)


def test_each_groups_sum_goes_to_its_first_answer_for_the_servers_decoding():
    answers = [SiteAnswer(name, 10, np.full(4, -1), 0.0) for name in "cabde"]
    totals = [np.full(4, 7), np.full(4, 9)]
    summed = summed_answers(answers, totals, [1, 0, 1, 0, 1])
    assert [a.group for a in summed] == [1, 0, 1, 0, 1]
    assert [int(a.value[0]) for a in summed] == [9, 7, 0, 0, 0]
    assert [[a.site for a in g] for g in answer_groups(summed)] == [["a", "d"], ["c", "b", "e"]]
    one = summed_answers(answers, totals[:1], [None] * 5)  # one sum: no group, as before
    assert [(a.group, int(a.value[0])) for a in one] == [(None, 7)] + [(None, 0)] * 4


@pytest.mark.usefixtures("run_identity")
def test_a_group_holding_a_site_scaling_its_statistic_is_dropped_and_the_run_goes_on():
    _, strategy = grid_run(dps_scenario(), MaliciousPartition)
    result = strategy.result()
    assert len(result.history) == dps_scenario().flower_rounds
    for entry, answered in zip(result.history, result.sites_answered):
        (reason,) = entry["dropped"]  # site "0"'s group, named, in every round
        assert "over sites 0, 3, 6 was dropped" in reason
        assert sorted(answered) == ["1", "2", "4", "5"]


@pytest.mark.parametrize("flags,message", [
    (["--secure-group-size", "2"], "--secure-group-size groups the sites' secure sums, and "
                                   "this run has none, got --secure-group-size=2"),
    (["--secure-aggregation", "3", "--discrete", "--secure-group-size", "2"],
     "need --secure-aggregation <= --secure-group-size <= --sites: every group's secure sum "
     "must hold at least the M sites each site's noise assumes, got --secure-group-size=2, "
     "--secure-aggregation=3, --sites=7"),
    (["--secure-aggregation", "2", "--discrete", "--secure-group-size", "8"],
     "got --secure-group-size=8, --secure-aggregation=2, --sites=7"),
])
def test_the_cli_refuses_a_group_size_without_secure_sums_or_below_m(flags, message, capsys):
    code = cli_main(["simulate", "dps-pca", "--sites", "7", "--samples", "2100", "--dim", "20",
                     "--k", "2", "--sparsity", "5", "--s-hat", "8", "--rounds", "2", *flags])
    assert code == 2
    assert message in capsys.readouterr().err


# A hostile coordinator against a site's session, in memory.

def site_session(partition, partitions=SITES, colluders=0):
    identity = simulation_identity(partition, partitions, M, 3)
    return SiteSession(identity.member, identity.signing_key, identity.roster, min_sites=M,
                       colluders=colluders, max_rounds=3, vouched=identity.vouched)


def test_a_site_refuses_a_second_key_agreement_in_its_session():
    site = site_session(0)
    site.advertise(SetupRequest("run", 2, 2, 2**31))
    with pytest.raises(ProtocolRefusal, match="already advertised a key for the run"):
        site.advertise(SetupRequest("run", 2, 2, 2**31))
    with pytest.raises(ProtocolRefusal, match="already advertised a key for the run"):
        site.advertise(SetupRequest("run", 2, 3, 2**31))  # another group's threshold


def test_a_site_refuses_a_group_smaller_than_its_m_plus_c():
    # c = 1: a group needs M + c = 3 members; the coordinator lists the site with one peer
    sites = [site_session(i, colluders=1) for i in range(3)]
    request = SetupRequest("run", 2, M + 1, 2**31)
    ads = [s.advertise(request) for s in sites]
    with pytest.raises(ProtocolRefusal, match=r"need t <= N\), got N=2 members, t=3, c=1"):
        sites[0].share(KeyList("run", tuple(ads[:2])))
    assert sites[0].share(KeyList("run", tuple(ads))).ciphertexts  # a group of M + c is fine


def test_a_real_site_refuses_the_key_list_of_a_second_key_agreement_in_the_run(
        tmp_path, monkeypatch):
    """A coordinator that agreed the site's keys in one group asks it, in the same run, to
    join another key agreement (another group): the site may advertise a fresh key (nothing
    of its own), but its ledger holds the run's one key list, so it sends no shares for a
    second."""
    consortium_identity(monkeypatch)
    policy, roster, keys = make_consortium(tmp_path)
    context = site_context(policy)
    setup(context, policy, roster, keys)
    second = server_for(policy, 3)
    reply = send(context, protocol(second.setup_request()))
    second.receive_advertisement(Advertisement.from_dict(
        dict(reply.content.config_records[PROTOCOL_RECORD])))
    for session in peers(roster, keys).values():
        second.receive_advertisement(session.advertise(second.setup_request()))
    refused(send(context, protocol(second.key_list())),
            "already recorded its key-list for round 0 of this run")
    assert ledger_rows(policy) == []  # and nothing was released

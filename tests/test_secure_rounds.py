"""The verifiable secure aggregation through the real strategy and ClientApp code, with the
sites called in this process (a grid without Ray): one key agreement per run, every round's
sum exact (the result equals the Flower-free reference bit for bit), and a site that drops
out of a round without stopping the run."""

import functools

import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, RecordDict
from local_grid import RUN_ID, LocalGrid, run_identity  # noqa: F401 (a fixture)

from fedpca.algorithms.dps_pca import privacy_record, run_dps_pca
from fedpca.flower.simulations import partition_client, partition_identity
from fedpca.flower.site.site_client import client_factory
from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.flower.site.clientapp import site_client_app
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.secure.conditions import smallest_threshold
from fedpca.flower.server.strategies import DPSPCA
from fedpca.flower.server.workflow import secure_aggregation

#: The algorithm's client factory (the one client of every algorithm, over its site).
client_for_site = client_factory(DPSPCASite)


@functools.cache
def scenario():
    """The scenario, its policy calibrated when a test first asks, not as each worker collects."""
    return DPSPCAScenario(sites=4, samples=1200, dim=20, k=2, sparsity=5, s_hat=8, rounds=2,
                          secure_min_sites=2, discrete=True, seed=3, epsilon=2.0, min_sites=3)


pytestmark = pytest.mark.usefixtures("run_identity")


def partition_grid(scenario, **options) -> LocalGrid:
    """The scenario's virtual sites, answering in this process."""
    app = site_client_app(functools.partial(partition_client, scenario),
                          functools.partial(partition_identity, scenario))
    contexts = {
        node: Context(run_id=RUN_ID, node_id=node, state=RecordDict(), run_config={},
                      node_config={"partition-id": node - 1, "num-partitions": scenario.sites})
        for node in range(1, scenario.sites + 1)
    }
    return LocalGrid(app, contexts, **options)


def run(grid: LocalGrid):
    sums = scenario().secure_sums()
    strategy = DPSPCA(dim=scenario().dim, k=scenario().k, s_hat=scenario().s_hat,
                      rounds=scenario().rounds, min_sites=scenario().required_sites(),
                      seed=scenario().seed, secure=sums, evaluate_fn=scenario().distance_to_truth,
                      privacy=privacy_record(scenario().policy(), sums))
    secure_aggregation(scenario(), strategy)
    assert strategy.secure_protocol.min_sites == scenario().secure_min_sites
    strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=strategy.num_rounds)
    return strategy.result()


def test_one_key_agreement_per_run_and_every_round_exact():
    grid = partition_grid(scenario())
    result = run(grid)
    reference = run_dps_pca(scenario().all_site_data(), scenario().k, scenario().s_hat,
                            scenario().policy(), seed=scenario().seed)
    np.testing.assert_array_equal(result.basis, reference.basis)
    rounds = scenario().rounds + 1
    assert grid.sent.count("secagg-setup") == scenario().sites  # once per run
    assert grid.sent.count("secagg-key-list") == scenario().sites
    assert grid.sent.count("secagg-input-request") == scenario().sites * rounds
    # nobody dropped: the last two stages go to the threshold's t = 3 sites only
    threshold = smallest_threshold(scenario().sites, 0, scenario().secure_min_sites)
    for kind in ("secagg-consistency-request", "secagg-unmask-request"):
        assert grid.sent.count(kind) == threshold * rounds == 3 * rounds, kind
    assert result.privacy["epsilon_worst_case"] > result.privacy["epsilon_achieved"]
    # each site states the guarantee of the sums it answered: the configured one, here
    for stated in result.config["site_guarantees"].values():
        assert stated["secure_min_sites"] == 2
        assert stated["noise_multiplier"] == result.privacy["noise_multiplier"]
        assert stated["epsilon_worst_case"] == pytest.approx(result.privacy["epsilon_worst_case"])


@pytest.mark.parametrize("stage", ["secagg-input-request", "secagg-unmask-request"])
def test_a_site_dropping_out_of_a_round_within_the_threshold(stage):
    # site "0" (node 1) misses one stage of round 2 (before its input, or before the
    # unmasking, as one of the t sites asked to reveal: the others endorse again with site
    # "3" and it reveals), then takes part again in round 3; every round is decoded
    grid = partition_grid(scenario(), drop=lambda kind, node, round_: (kind, node, round_) == (
        stage, 1, 2))
    result = run(grid)
    answered = [sorted(names) for names in result.sites_answered]
    expected = ["1", "2", "3"] if stage == "secagg-input-request" else ["0", "1", "2", "3"]
    assert answered == [["0", "1", "2", "3"], expected, ["0", "1", "2", "3"]]
    # t = 3 sites endorse per round; the unmask dropout makes round 2 ask "1", "2", "3" again
    retry = 3 if stage == "secagg-unmask-request" else 0
    assert grid.sent.count("secagg-consistency-request") == 3 * 3 + retry
    assert len(result.history) == scenario().rounds + 1
    np.testing.assert_allclose(result.basis.T @ result.basis, np.eye(scenario().k), atol=1e-10)

"""The site's trust boundary without Flower: one SiteService answers every request of a run."""

import functools

import numpy as np
import pytest

from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy
from fedpca.errors import FedPCAError
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.site.answer import Answer
from fedpca.simulated_sites import PartitionSource
from fedpca.site.ready import SiteReady
from fedpca.site.service import (
    LEDGER,
    SITE_FAILURE,
    Ask,
    Node,
    Ready,
    Refusal,
    RunEnd,
    SiteService,
    SiteSource,
)


@functools.cache
def site_policy():
    """The site's policy, calibrated when first asked."""
    return DPSPCAPolicy(epsilon=2.0, delta=1e-5, rounds=2)


ROWS = np.random.default_rng(0).standard_normal((40, 6)) / 3
INIT = {"phase": "init"}
NODE = Node("7", 1, {"partition-id": 0}, {})


class MemoryState:
    """The run's state (what Flower's context.state is to the ClientApp), counting reads."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.loads = 0

    def load(self, key: str) -> bytes | None:
        self.loads += 1
        return self.values.get(key)

    def store(self, key: str, value: bytes) -> None:
        self.values[key] = value


class RowsSource(SiteSource):
    """A site over ``ROWS`` under ``policy`` (or a site that fails to open with ``error``)."""

    def __init__(self, policy=None, error: Exception | None = None) -> None:
        self.policy, self.error = policy or site_policy(), error

    def open(self):
        if self.error is not None:
            raise self.error
        return DPSPCASite(ROWS, self.policy, site="clinic", seed=3)


def power(k: int = 2) -> Ask:
    return Ask([np.linalg.qr(np.eye(6)[:, :k])[0]], {"phase": "power", "round": 1})


def test_an_answer_is_charged_and_says_only_public_numbers():
    service, state = SiteService(NODE, RowsSource()), MemoryState()
    answer = service.handle(Ask([], INIT), state)
    assert isinstance(answer, Answer) and answer.weight == ROWS.shape[0]
    assert answer.values[0].shape == (6,)
    assert answer.metrics["site"] == "clinic" and answer.metrics["releases"] == 1
    assert service.site().ledger.count == 1 and LEDGER in state.values


def test_a_refusal_quotes_the_sites_words_and_charges_nothing():
    service = SiteService(NODE, RowsSource())
    reply = service.handle(Ask([], {"phase": "init", "colour": "red"}), MemoryState())
    assert isinstance(reply, Refusal) and "unknown config keys ['colour']" in reply.reason
    assert service.site().ledger.count == 0


def test_a_failure_that_is_not_a_refusal_reaches_the_coordinator_as_fixed_words(caplog):
    secret = ValueError("mmap length 4512 is greater than file size of /data/patients.npy")
    reply = SiteService(NODE, RowsSource(error=secret)).handle(Ask([], INIT), MemoryState())
    assert reply == Refusal(SITE_FAILURE)
    assert "patients.npy" not in reply.reason
    assert "patients.npy" in caplog.text  # the site's own log has it


def test_a_site_that_relies_on_secure_sums_refuses_an_unmasked_request():
    masked_only = DPSPCAPolicy(epsilon=2.0, delta=1e-5, rounds=2, secure_min_sites=3,
                             discrete=True)
    service = SiteService(NODE, RowsSource(masked_only))
    reply = service.handle(Ask([], INIT), MemoryState())
    assert isinstance(reply, Refusal) and "not masked" in reply.reason
    assert service.site().ledger.count == 0


def test_spending_follows_the_run_state_into_another_process():
    """Two services over one run state are two Ray workers answering the same node: the
    second one starts from what the first one spent, and cannot release past the plan."""
    state = MemoryState()
    first, second = SiteService(NODE, RowsSource()), SiteService(NODE, RowsSource())
    assert isinstance(first.handle(Ask([], INIT), state), Answer)
    assert isinstance(second.handle(power(), state), Answer)
    assert second.site().ledger.count == 2
    assert isinstance(first.handle(power(), state), Answer)  # rereads the changed state
    assert first.site().ledger.count == 3 == site_policy().releases
    refused = second.handle(power(), state)
    assert isinstance(refused, Refusal) and second.site().ledger.count == 3


def test_an_unchanged_run_state_is_not_read_again():
    service, state = SiteService(NODE, RowsSource()), MemoryState()
    service.handle(Ask([], INIT), state)
    restored = []
    service.site().ledger.restore = restored.append  # a re-read would call it
    service.handle(power(), state)
    assert restored == []


def test_readiness_and_the_runs_end_cost_nothing():
    service, state = SiteService(NODE, RowsSource()), MemoryState()
    assert service.handle(Ready(), state) == SiteReady("clinic")
    assert service.handle(RunEnd("coordinator: round 3 failed"), state).site == "clinic"
    assert service.site().ledger.count == 0


def test_a_partition_is_opened_once_per_run_and_refuses_a_release_past_its_plan():
    scenario = DPSPCAScenario(sites=2, samples=80, dim=6, k=2, sparsity=2, s_hat=4, rounds=1,
                              seed=1)
    source = PartitionSource(scenario, 1, 2)
    assert source.site() is source.site()
    service, state = SiteService(NODE, source), MemoryState()
    for request in (Ask([], INIT), power()):
        assert isinstance(service.handle(request, state), Answer)
    assert service.handle(Ready(), state) == SiteReady("1")  # nothing is left to plan
    assert isinstance(service.handle(power(), state), Refusal)
    assert source.site().ledger.count == 2


def test_an_unknown_request_is_refused():
    with pytest.raises(FedPCAError, match="answers no"):
        SiteService(NODE, RowsSource()).reply(object(), MemoryState())


def test_a_nodes_service_is_kept_for_its_run_and_renewed_when_its_configs_change():
    from flwr.app import Context, RecordDict

    from fedpca.flower.site.clientapp import cached_service

    opened = []

    def source_fn(node):
        opened.append(node)
        return RowsSource()

    def context(run_config):
        return Context(run_id=11, node_id=4, node_config={"partition-id": 0},
                       state=RecordDict(), run_config=run_config)

    first = cached_service(source_fn, context({"k": 2}))
    assert cached_service(source_fn, context({"k": 2})) is first
    assert cached_service(source_fn, context({"k": 3})) is not first
    assert [node.run_config for node in opened] == [{"k": 2}, {"k": 3}]


def test_dps_pcas_policys_former_name_still_imports_with_a_deprecation_warning():
    import fedpca.algorithms.dps_pca as dps_pca

    with pytest.warns(DeprecationWarning, match="SitePolicy is now DPSPCAPolicy"):
        assert dps_pca.SitePolicy is dps_pca.DPSPCAPolicy

"""Issue 24: a site a hostile coordinator can neither make spend budget on a crash, nor
exhaust the memory of, nor pass a basis that breaks the sensitivity bound, nor read foreign
error text from.

Each test is one finding of the issue, failing on the code before the fix.
"""

import logging

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.common import FitIns, ndarrays_to_parameters
from flwr.compat.common.recorddict_compat import fitins_to_recorddict
from flwr.supercore.task_identity import TaskIdentity

from fedpca.algorithms import dps_pca as dps_sites
from fedpca.algorithms.dps_pca import SitePolicy
from fedpca.clients import dps_pca as dps_clients
from fedpca.clients import site_client_app
from fedpca.clients.ledger_state import LEDGER_RECORD
from fedpca.clients.site_app import SITE_FAILURE
from fedpca.linalg.subspace import thin_qr

D, K = 8, 2
X = np.random.default_rng(0).uniform(-0.2, 0.2, size=(30, D))
BASIS = thin_qr(np.random.default_rng(1).standard_normal((D, K)))
POWER = {"phase": "power", "round": 1}


@pytest.fixture
def run_identity(monkeypatch):
    """Flower's messages need the run's identity (set by Flower in a real run)."""
    for attribute in ("_task_id", "_run_id", "_node_id"):
        monkeypatch.setattr(TaskIdentity, attribute, 1)


def new_context() -> Context:
    return Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})


def message_request(arrays, config) -> Message:
    content = RecordDict({"arrays": ArrayRecord(list(arrays)), "config": ConfigRecord(config)})
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def legacy_request(arrays, config) -> Message:
    ins = FitIns(ndarrays_to_parameters(list(arrays)), dict(config))
    return Message(content=fitins_to_recorddict(ins, True), dst_node_id=1,
                   message_type=MessageType.TRAIN)


# --- 5. only fedpca's own words leave the site ---------------------------------------------

FOREIGN = [ValueError("mmap length is greater than file size"), EOFError("/data/site.npy"),
           MemoryError("Unable to allocate 916. MiB for an array with shape (300, 400000)")]


@pytest.mark.parametrize("request_for", [message_request, legacy_request])
@pytest.mark.parametrize("error", FOREIGN, ids=lambda e: type(e).__name__)
def test_a_foreign_exception_reaches_the_coordinator_only_as_the_fixed_message(
    run_identity, caplog, monkeypatch, request_for, error
):
    def fail(self, parameters, config):
        raise error

    monkeypatch.setattr(dps_clients.DPSPCAClient, "release", fail)
    app = site_client_app(lambda context: dps_clients.client_for_site(
        context, X, SitePolicy(epsilon=1.0, delta=1e-5, rounds=2), "clinic", seed=4))
    context = new_context()
    with caplog.at_level(logging.ERROR, logger="fedpca.clients.site_app"):
        reply = app(request_for([BASIS], POWER), context)
    assert reply.has_error() and reply.error.reason == SITE_FAILURE
    assert str(error) in caplog.text and type(error).__name__ in caplog.text  # the site's log
    assert "Traceback" in caplog.text
    assert LEDGER_RECORD not in context.state.config_records  # nothing was charged


def test_a_fedpca_refusal_keeps_its_own_words(run_identity):
    app = site_client_app(lambda context: dps_clients.client_for_site(
        context, X, SitePolicy(epsilon=1.0, delta=1e-5, rounds=2), "clinic", seed=4))
    reply = app(message_request([BASIS], {**POWER, "sigma": 0.0}), new_context())
    assert reply.has_error() and "clinic: refused: unknown config keys" in reply.error.reason


# --- 4. exact bases ---------------------------------------------------------------------------

def nearly_orthonormal(d: int, k: int) -> np.ndarray:
    """A basis orthonormal to 1e-6 entry by entry whose spectral norm is 1 + ~k/2 1e-6
    (1.0005 at d = k = 1000): it passes the tolerance but breaks ``||Q||_2 <= 1``."""
    Q = thin_qr(np.random.default_rng(2).standard_normal((d, k)))
    return Q @ (np.eye(k) + np.full((k, k), 0.49e-6))


def worst_pair_gap(Q: np.ndarray) -> float:
    """``||(x x^T - y y^T) Q||_F`` for the unit records that maximise it: ``Q``'s two top
    left singular vectors (``sqrt(s_1^2 + s_2^2)``, ``sqrt(2)`` for an orthonormal ``Q``)."""
    U = np.linalg.svd(Q, full_matrices=False)[0]
    x, y = U[:, 0], U[:, 1]
    return float(np.linalg.norm(np.outer(x, x @ Q) - np.outer(y, y @ Q)))


def test_a_basis_orthonormal_only_to_1e_6_is_made_exact_before_it_is_used(monkeypatch):
    d = k = 1000
    sent = nearly_orthonormal(d, k)
    assert np.abs(sent.T @ sent - np.eye(k)).max() <= 1e-6  # within the tolerance
    assert np.linalg.norm(sent, 2) > 1.0004 and worst_pair_gap(sent) > np.sqrt(2) * 1.0002
    used = []
    gram = dps_sites.gram_product
    monkeypatch.setattr(dps_sites, "gram_product", lambda X, Q: used.append(Q) or gram(X, Q))
    records = np.random.default_rng(3).standard_normal((20, d)) / np.sqrt(d)
    site = dps_sites.DPSPCASite(records, SitePolicy(epsilon=1.0, delta=1e-5, rounds=2))
    site.release_power(sent)
    (Q,) = used
    assert np.linalg.norm(Q, 2) <= 1.0 + 1e-15  # the sensitivity's ||Q||_2 <= 1 holds
    assert worst_pair_gap(Q) <= np.sqrt(2) * (1.0 + 1e-15)
    np.testing.assert_allclose(Q, sent, atol=1e-3)  # the same basis, made exact

"""Issue 24: a site a hostile coordinator can neither make spend budget on a crash, nor
exhaust the memory of, nor pass a basis that breaks the sensitivity bound, nor read foreign
error text from.

Each test is one finding of the issue, failing on the code before the fix.
"""

import functools
import logging

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.common import FitIns, ndarrays_to_parameters
from flwr.compat.common.recorddict_compat import fitins_to_recorddict
from flwr.supercore.task_identity import TaskIdentity

from cli_runs import run_cli
from fedpca.algorithms import site_rows
from fedpca.algorithms import dpdis_pca as dpdis_sites
from fedpca.algorithms import kplane as kplane_sites
from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, DPdisPCASite
from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy
from fedpca.algorithms.kplane import KPlanePolicy, KPlaneSite
from fedpca.algorithms.ldp_pca import LDPCovarianceSite, LDPPolicy
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.flower.app import client_fn
from fedpca.flower.site.site_client import client_factory
from fedpca.flower.site.clientapp import site_client_app
from fedpca.flower.site.run_state import LEDGER_RECORD
from fedpca.site.service import SITE_FAILURE
from fedpca.errors import InvalidRequestError, ParameterError
from fedpca.linalg.subspace import thin_qr
from fedpca.dp import mechanisms
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.ledger_store import create_ledger
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template

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

    monkeypatch.setattr(DPSPCASite, "respond", fail)
    app = site_client_app(lambda context: client_factory(DPSPCASite)(
        context, X, DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=2), "clinic", seed=4))
    context = new_context()
    with caplog.at_level(logging.ERROR, logger="fedpca.flower.site.clientapp"):
        reply = app(request_for([BASIS], POWER), context)
    assert reply.has_error() and reply.error.reason == SITE_FAILURE
    assert str(error) in caplog.text and type(error).__name__ in caplog.text  # the site's log
    assert "Traceback" in caplog.text
    assert LEDGER_RECORD not in context.state.config_records  # nothing was charged


def test_a_fedpca_refusal_keeps_its_own_words(run_identity):
    app = site_client_app(lambda context: client_factory(DPSPCASite)(
        context, X, DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=2), "clinic", seed=4))
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
    gram = site_rows.gram_product
    monkeypatch.setattr(site_rows, "gram_product", lambda X, Q: used.append(Q) or gram(X, Q))
    records = np.random.default_rng(3).standard_normal((20, d)) / np.sqrt(d)
    site = DPSPCASite(records, DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=2))
    site.release_power(sent)
    (Q,) = used
    assert np.linalg.norm(Q, 2) <= 1.0 + 1e-15  # the sensitivity's ||Q||_2 <= 1 holds
    assert worst_pair_gap(Q) <= np.sqrt(2) * (1.0 + 1e-15)
    np.testing.assert_allclose(Q, sent, atol=1e-3)  # the same basis, made exact


def test_an_exact_basis_skips_the_qr_and_still_has_spectral_norm_at_most_one(monkeypatch):
    """A QR's basis (orthonormal to ~1e-15) is used as sent, without a second QR; one
    orthonormal to 1e-13 whose norm exceeds 1 is still divided down to ``||Q||_2 <= 1``."""
    from fedpca.linalg import basis

    qrs = []
    monkeypatch.setattr(basis, "thin_qr", lambda A: qrs.append(A) or thin_qr(A))
    sent = thin_qr(np.random.default_rng(5).standard_normal((300, 4)))
    np.testing.assert_array_equal(basis.validate_basis(sent, 300), sent)
    stretched = sent * (1.0 + 4e-14)  # |Q^T Q - I| = 8e-14: below EXACT_TOLERANCE
    assert basis.ORTHONORMAL_TOLERANCE > basis.EXACT_TOLERANCE > 8e-14
    assert np.linalg.norm(stretched, 2) > 1.0 + 3e-14
    used = basis.validate_basis(stretched, 300)
    assert np.linalg.norm(used, 2) <= 1.0 + 1e-15 and not qrs
    np.testing.assert_allclose(used, sent, atol=1e-13)
    basis.validate_basis(nearly_orthonormal(300, 4), 300)  # farther than EXACT_TOLERANCE
    assert len(qrs) == 1


# --- 1. every size the coordinator chooses is bounded before any allocation ----------------
# --- and work before charge, charge before send ---------------------------------------------

KPLANE = "\n[algorithms.sulq-kplane]\nrounds = 3\n"
KPLANE_RUN = {"algorithm": "sulq-kplane", "dim": D, "clusters": 3, "subspace-dim": 1,
              "seed": -1}


def real_site(tmp_path, extra=KPLANE):
    """A real site's folder (records and the policy ``fedpca site init`` writes, plus
    ``extra``) and the real ClientApp's NumPyClient for one run of its algorithm."""
    np.save(tmp_path / "records.npy", X)
    policy = write_policy_template(tmp_path / "policy.toml", "hospital-a", "records.npy",
                                   delta=1e-7)
    policy.write_text(policy.read_text() + extra)
    return policy


def real_client(policy, run_config):
    context = Context(run_id=1, node_id=7, node_config={"policy": str(policy)},
                      state=RecordDict(), run_config=dict(run_config))
    return client_fn(context).numpy_client


def ledger_rows(policy):
    p = load_site_policy(policy)
    return SiteLedger(p.ledger, p.population, p.epsilon, p.delta).rows()


def test_400000_kplane_clusters_are_refused_with_no_ledger_row(tmp_path):
    policy = real_site(tmp_path)
    client = real_client(policy, KPLANE_RUN)
    bases = [np.eye(D)[:, :1]] * 400_000
    with pytest.raises(InvalidRequestError, match=(
            r"hospital-a: refused: the request asks for 400000 clusters, above this site's "
            r"limit of 100; .* raises limits.max-clusters in its policy")):
        client.fit(bases, {"round": 1, "dim": D, "clusters": 400_000})
    assert ledger_rows(policy) == []
    # the same site answers a request within its limits, and that is charged once
    (value,), _, _ = client.fit(bases[:3], {"round": 1, "dim": D, "clusters": 3})
    assert value.shape == (3, D * (D + 1) // 2 + 1) and len(ledger_rows(policy)) == 1


def test_a_site_policy_sets_its_limits(tmp_path):
    policy = real_site(tmp_path)
    policy.write_text(policy.read_text().replace("max-answer-mb = 512", "max-answer-mb = 1e-4")
                      .replace("max-clusters = 100", "max-clusters = 2"))
    assert load_site_policy(policy).limits == SiteLimits(max_answer_mb=1e-4, max_clusters=2)
    client = real_client(policy, KPLANE_RUN)
    with pytest.raises(InvalidRequestError, match="above this site's limit of 2; "):
        client.fit([BASIS[:, :1]] * 3, {"round": 1, "dim": D, "clusters": 3})
    with pytest.raises(InvalidRequestError, match=r"answer of shape \(2, 37\) .* limits.max-a"):
        client.fit([BASIS[:, :1]] * 2, {"round": 1, "dim": D, "clusters": 2})
    assert ledger_rows(policy) == []


WIDE = 512  # a d x d answer is 2 MB, above the limit of 1 MB below
SITES = {
    "dps-pca": (DPSPCASite, functools.partial(DPSPCAPolicy, rounds=2)),
    "sulq-kplane": (KPlaneSite, functools.partial(KPlanePolicy, rounds=2)),
    "dpdis-pca": (DPdisPCASite, DPdisPCAPolicy),
    "ldp-pca": (LDPCovarianceSite, LDPPolicy),
}


@pytest.mark.parametrize("algorithm,ask", [
    ("dps-pca", lambda site: site.release_power(np.eye(WIDE))),
    ("sulq-kplane", lambda site: site.release_clusters([np.eye(WIDE)[:, :1]] * 2)),
    ("dpdis-pca", lambda site: site.release("full")),
    ("dpdis-pca", lambda site: site.release("factor", r=WIDE)),
    ("ldp-pca", lambda site: site.release_covariance()),
])
def test_every_answer_is_bounded_before_anything_is_computed_or_charged(algorithm, ask):
    site_cls, policy_of = SITES[algorithm]
    site = site_cls(np.full((2, WIDE), 0.01), policy_of(), site="clinic",
                    limits=SiteLimits(max_answer_mb=1.0))
    site.noise.generator = lambda index: pytest.fail("noise was drawn")
    with pytest.raises(InvalidRequestError, match=(
            r"clinic: refused: the request asks for an answer of shape \(.*\) \(2.* MB\), "
            r"above this site's limit of 1 MB per answer; .* limits.max-answer-mb")):
        ask(site)
    assert site.ledger.count == 0


def failing(*args, **kwargs):
    raise MemoryError("Unable to allocate 916. MiB for an array with shape (300, 400000)")


@pytest.mark.parametrize("module,name,ask", [
    (kplane_sites, "cluster_moments", lambda site: site.release_clusters([BASIS[:, :1]] * 3)),
    (site_rows, "gram_product", lambda site: site.release_power(BASIS)),
    (dpdis_sites, "partial_square_root", lambda site: site.release("factor", r=2)),
    (mechanisms, "symmetric_gaussian_in_blocks", lambda site: site.release_covariance()),
])
def test_work_that_fails_fails_before_the_charge(tmp_path, monkeypatch, module, name, ask):
    # the statistic, the solver, the noise: whatever fails, the durable ledger has no row
    algorithm = {kplane_sites: "sulq-kplane", site_rows: "dps-pca",
                 dpdis_sites: "dpdis-pca", mechanisms: "ldp-pca"}[module]
    site_cls, policy_of = SITES[algorithm]
    create_ledger(tmp_path / "ledger.sqlite")
    ledger = SiteLedger(tmp_path / "ledger.sqlite", "clinic", 4.0, 1e-7, site="clinic")
    site = site_cls(X, policy_of(), site="clinic", ledger=ledger.for_run(
        RunCharge("run-1", algorithm, "ab" * 32, 4)))
    monkeypatch.setattr(module, name, failing)
    with pytest.raises(MemoryError):
        ask(site)
    assert ledger.rows() == []


# --- 2. a simulation's size is checked against the memory available --------------------------

@pytest.mark.parametrize("absurd", [{"samples": 10**9}, {"dim": 10**7, "samples": 10**3},
                                    {"sites": 10**9, "samples": 10**9}])
def test_an_absurd_simulation_run_config_is_refused_before_any_data(absurd):
    context = Context(run_id=1, node_id=1, state=RecordDict(),
                      node_config={"partition-id": 0, "num-partitions": 10},
                      run_config={"algorithm": "dps-pca", "sites": 10, **absurd})
    with pytest.raises(ParameterError, match=(
            r"the simulation's records \(samples x dim\) and model \(dim x dim\) over sites "
            r"sites need .* GB on this machine, above the .* GB of memory available now, "
            r"got samples=.*; lower samples or dim")) as refused:
        client_fn(context)
    assert set(refused.value.values) == {"samples", "dim", "sites"}


def test_fedpca_simulate_names_its_flags_when_memory_is_short(capsys):
    code, _ = run_cli(["simulate", "dps-pca", "--samples", "1000000000", "--sites", "10"])
    error = capsys.readouterr().err
    assert code != 0 and "--samples=1000000000" in error and "memory available" in error

"""Flower's Message API: each algorithm's Message-API strategy gives the legacy strategy's
result and the pure-numpy reference's under the same seeds; a Flower user's own ServerApp
(docs/api.md's example, run as is) works; failures arrive as reply errors; the site's ClientApp
answers both formats through the same client and a coordinator gains nothing by switching.

One federation (3 sites) serves every run: the example's ServerApp (DPS-PCA), then each
algorithm's Message-API strategy and legacy strategy (DPS-PCA's again from a public start
basis, whose sites plan no initialisation), then a refused request. Each
(algorithm, format) is answered by its own ``site_client_app`` and keeps its own ledger (under
its own key in ``context.state``), as if each were its own Flower run: every Flower boot
costs seconds.
"""

import functools
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Error,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.common import FitIns, ndarrays_to_parameters
from flwr.compat.common.recorddict_compat import (
    fitins_to_recorddict,
    recorddict_to_fitres,
)
from flwr.serverapp import ServerApp
from flwr.supercore.task_identity import TaskIdentity

from fedpca.algorithms.dpdis_pca import run_dpdis_pca
from fedpca.algorithms.dps_pca import DPSPCAPolicy, privacy_record, run_dps_pca
from fedpca.algorithms.kplane import run_sulq_kplane
from fedpca.algorithms.ldp_pca import run_ldp_pca
from fedpca.flower.simulations import partition_client
from fedpca.flower.site.site_client import client_factory
from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.flower.site.clientapp import site_client_app
from fedpca.flower.site.run_state import LEDGER_RECORD
from fedpca.flower.wire import is_legacy_request
from fedpca.errors import ConfigurationError
from fedpca.linalg.subspace import thin_qr
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.scenarios.kplane import KPlaneScenario
from fedpca.scenarios.ldp_pca import LDPScenario
from fedpca.flower.federation import launch
from fedpca.flower.server.strategies import (
    DPSPCA,
    DPdisPCA,
    DPdisPCAStrategy,
    DPSPCAStrategy,
    KPlaneStrategy,
    LDPCovariance,
    LDPCovarianceStrategy,
    SuLQKPlane,
)
from fedpca.flower.server.rounds import RoundFailedError
from fedpca.flower.server.legacy_strategy import LegacySiteStrategy
from fedpca.flower.server.secure_server import VerifiedSecureAggregation
from fedpca.flower.server.workflow import run_strategy

pytestmark = pytest.mark.federation

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Your own ServerApp (Message API)"


def readme_example() -> dict:
    """docs/api.md's example, executed (not as ``__main__``: nothing runs yet)."""
    section = (ROOT / "docs" / "api.md").read_text().split(SECTION)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace = {"__name__": "readme_example"}
    exec(compile(code, "docs/api.md", "exec"), namespace)  # noqa: S102 (our own docs' code)
    return namespace


EXAMPLE = readme_example()
SITES = EXAMPLE["SITES"]

DPDIS = DPdisPCAScenario(sites=SITES, dim=12, samples=301, k=2, weighting="samples",
                         epsilon=1.0, seed=3, data_seed=3)
LDP = LDPScenario(sites=SITES, dim=10, samples=300, k=2, epsilon=2.0, seed=5, data_seed=5)
#: A public start basis (the simulated sites hold it as their policy's, as the server does).
START_FILE = Path(tempfile.mkdtemp(prefix="fedpca-start-")) / "start.npy"
np.save(START_FILE, thin_qr(np.random.default_rng(13).standard_normal((12, 2))))
DPS_START = DPSPCAScenario(sites=SITES, dim=12, samples=300, k=2, sparsity=4, s_hat=6,
                           rounds=2, epsilon=2.0, seed=13, data_seed=13, start=str(START_FILE))
KPLANE = KPlaneScenario(sites=SITES, dim=5, samples=300, clusters=2, subspace_dim=2,
                        noise=0.01, rounds=2, epsilon=3.0, seed=11, data_seed=11)


def dps_pair():
    kwargs = {"dim": EXAMPLE["DIM"], "k": 2, "s_hat": 10, "rounds": EXAMPLE["ROUNDS"],
              "min_sites": SITES, "seed": EXAMPLE["SEED"],
              "privacy": privacy_record(EXAMPLE["POLICY"])}
    return None, DPSPCAStrategy(**kwargs)  # the Message-API run is the example's own ServerApp


def dps_start_pair():
    kwargs = {"dim": DPS_START.dim, "k": DPS_START.k, "s_hat": DPS_START.s_hat,
              "rounds": DPS_START.rounds, "min_sites": SITES, "seed": DPS_START.seed,
              "evaluate_fn": DPS_START.distance_to_truth, "privacy": DPS_START.privacy(),
              "start": DPS_START.start_basis()}
    return DPSPCA(**kwargs), DPSPCAStrategy(**kwargs)


def dpdis_pair():
    kwargs = {"dim": DPDIS.dim, "k": DPDIS.k, "weighting": DPDIS.weighting,
              "min_sites": SITES, "evaluation": DPDIS.evaluation(), "privacy": DPDIS.privacy()}
    return DPdisPCA(**kwargs), DPdisPCAStrategy(**kwargs)


def ldp_pair():
    kwargs = {"dim": LDP.data_dim, "k": LDP.k, "min_sites": SITES, "evaluate_fn": LDP.evaluate,
              "privacy": LDP.privacy()}
    return LDPCovariance(**kwargs), LDPCovarianceStrategy(**kwargs)


def kplane_pair():
    kwargs = {"dim": KPLANE.dim, "clusters": KPLANE.clusters,
              "subspace_dim": KPLANE.subspace_dim, "rounds": KPLANE.rounds,
              "min_sites": SITES, "seed": KPLANE.seed, "evaluate_fn": KPLANE.evaluate,
              "privacy": KPLANE.privacy()}
    return SuLQKPlane(**kwargs), KPlaneStrategy(**kwargs)


#: Each algorithm's site ClientApp (DPS-PCA's is the example's).
SITE_APPS = {
    "dps-pca": EXAMPLE["client_app"],
    "dps-pca-start": site_client_app(
        functools.partial(partition_client, DPS_START)),
    "dpdis-pca": site_client_app(
        functools.partial(partition_client, DPDIS)),
    "ldp-pca": site_client_app(
        functools.partial(partition_client, LDP)),
    "sulq-kplane": site_client_app(
        functools.partial(partition_client, KPLANE)),
}


def algorithm_of(config: dict) -> str:
    """Which algorithm a request belongs to, from its (public) config keys."""
    if "clusters" in config:
        return "sulq-kplane"
    if "variant" in config:
        return "dpdis-pca"
    if "start" in config:
        return "dps-pca-start"
    return "ldp-pca" if config.get("phase") == "covariance" else "dps-pca"


def move(context: Context, source: str, target: str) -> None:
    """Rename a record of ``context.state`` (if present)."""
    records = context.state.config_records  # a fresh view: it sees every earlier write
    if source in records:
        records[target] = records.pop(source)


def routing_app() -> ClientApp:
    """Answers each request with its algorithm's site ClientApp and the ledger of its
    (algorithm, format) run, so one federation serves eight independent runs (and their
    readiness rounds)."""
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        legacy = is_legacy_request(message.content)
        config = message.content.config_records["fitins.config" if legacy else "config"]
        algorithm = algorithm_of(dict(config))
        key = f"test.{algorithm}.{'legacy' if legacy else 'message'}"
        move(context, key, LEDGER_RECORD)
        reply = SITE_APPS[algorithm](message, context)
        move(context, LEDGER_RECORD, key)
        return reply

    @app.query()
    def query(message: Message, context: Context) -> Message:
        # every run's readiness round: no ledger is under LEDGER_RECORD between requests, so
        # each site answers from a fresh one (the start of its (algorithm, format) run)
        return SITE_APPS["dps-pca"](message, context)

    return app


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Run everything in one simulation; returns what each step produced."""
    out = {"pairs": {"dps-pca": dps_pair(), "dps-pca-start": dps_start_pair(),
                     "dpdis-pca": dpdis_pair(), "ldp-pca": ldp_pair(),
                     "sulq-kplane": kplane_pair()}}
    folder = tmp_path_factory.mktemp("message-api")
    server_app = ServerApp()

    @server_app.main()
    def _main(grid, context):
        EXAMPLE["server_app"](grid, context)  # the user's own ServerApp, as in docs/api.md
        for name, (message, legacy) in out["pairs"].items():
            if message is not None:
                out[name] = message.start(
                    grid=grid, initial_arrays=ArrayRecord(), num_rounds=message.num_rounds
                )
            run_strategy(grid, context, legacy)
        refused = DPSPCA(dim=EXAMPLE["DIM"], k=2, s_hat=10, rounds=1, min_sites=2)
        try:
            refused.start(grid=grid, train_config=ConfigRecord({"epsilon": 100.0}))
        except RoundFailedError as error:
            out["refused"] = (refused, error)

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # the example's main writes dps_pca.json in the working directory
        launch(server_app, routing_app(), SITES)
    out["readme_result"] = folder / "dps_pca.json"
    return out


def reference(name: str):
    if name == "dps-pca":
        sites = [EXAMPLE["site_records"](i) for i in range(SITES)]
        return run_dps_pca(sites, 2, 10, EXAMPLE["POLICY"], seed=EXAMPLE["SEED"])
    if name == "dps-pca-start":  # the same start, as every site's policy holds it
        return run_dps_pca(DPS_START.all_site_data(), DPS_START.k, DPS_START.s_hat,
                           DPS_START.policy(), seed=DPS_START.seed,
                           initial_basis=DPS_START.start_basis().basis,
                           evaluate=DPS_START.distance_to_truth)
    if name == "dpdis-pca":
        return run_dpdis_pca(DPDIS.all_prepared_sites(), DPDIS.k, DPDIS.r, DPDIS.policy(),
                             seed=DPDIS.seed, weighting=DPDIS.weighting,
                             evaluation=DPDIS.evaluation())
    if name == "ldp-pca":
        return run_ldp_pca(LDP.all_sites(), LDP.k, LDP.policy(), seed=LDP.seed,
                           evaluate=LDP.evaluate)
    return run_sulq_kplane(KPLANE.all_site_data(), KPLANE.clusters, KPLANE.subspace_dim,
                           KPLANE.policy(), seed=KPLANE.seed, evaluate=KPLANE.evaluate)


def arrays_of(result) -> list[np.ndarray]:
    return list(result.bases) if hasattr(result, "bases") else [result.basis]


def same_run(got, want):
    for U, V in zip(arrays_of(got), arrays_of(want), strict=True):
        np.testing.assert_allclose(U, V, atol=1e-8, rtol=0)
    assert len(got.history) == len(want.history)
    for g, w in zip(got.history, want.history, strict=True):
        for key, value in w.items():
            if isinstance(value, float):
                assert g[key] == pytest.approx(value, abs=1e-8), key
    assert getattr(got, "sites_answered", None) == getattr(want, "sites_answered", None)


@pytest.mark.parametrize("name", ["dps-pca", "dps-pca-start", "dpdis-pca", "ldp-pca",
                                  "sulq-kplane"])
def test_message_api_run_equals_legacy_run_equals_reference(federation, name):
    message, legacy = federation["pairs"][name]
    want = reference(name)
    same_run(legacy.result(), want)
    if message is None:  # DPS-PCA's Message-API run is the example's ServerApp
        from fedpca.results import PCAResult

        got = PCAResult.load(federation["readme_result"])
    else:
        got = message.result()
        flower = federation[name]  # Flower's own Result: the last array, metrics per round
        assert sorted(flower.train_metrics_clientapp) == list(range(1, message.num_rounds + 1))
        last = flower.arrays.to_numpy_ndarrays()[0]
        np.testing.assert_allclose(last, np.stack(arrays_of(got)).reshape(last.shape))
    same_run(got, want)
    assert legacy.result().privacy == want.privacy
    if message is not None:  # the example passes no privacy record to its strategy
        assert got.privacy == want.privacy
    assert got.config["site_records"] == legacy.result().config["site_records"]
    assert (message or legacy).failures == []
    if name == "dps-pca-start":  # T releases from the start: no initialisation
        assert [h["phase"] for h in got.history] == ["power"] * DPS_START.rounds
        assert got.history[-1]["epsilon_spent"] == pytest.approx(2.0, rel=1e-3)
    if name in ("dps-pca", "sulq-kplane"):  # the legacy run's last step (the query answers
        # are DPS-PCA's sites); k-plane's clusters are not one basis: nothing is sent
        delivered = ["0", "1", "2"] if name == "dps-pca" else []
        assert legacy.result().config["result_delivered"] == delivered


def test_the_readme_example_is_the_user_serverapp_and_saves_a_private_result(federation):
    from fedpca.results import PCAResult

    result = PCAResult.load(federation["readme_result"])
    assert result.algorithm == "dps-pca" and result.basis.shape == (EXAMPLE["DIM"], 2)
    assert result.sites_answered == [["0", "1", "2"]] * (EXAMPLE["ROUNDS"] + 1)
    assert result.history[-1]["epsilon_spent"] == pytest.approx(2.0, rel=1e-3)
    assert result.privacy["epsilon"] == 2.0 and result.privacy["releases_per_site"] == 5
    assert result.config["result_delivered"] == ["0", "1", "2"]  # start's last step


def test_a_refused_request_stops_the_run_with_the_sites_own_reasons(federation):
    strategy, error = federation["refused"]
    # exactly each site's refusal, read from the reply's error: no traceback text around it
    reasons = [f"{i}: refused: unknown config keys ['epsilon']" for i in range(SITES)]
    assert sorted(strategy.failures) == reasons
    assert "0 site(s) answered, need 2" in str(error) and reasons[0] in str(error)
    assert strategy.server.history == []


# --- the ClientApp, message by message (no federation) ------------------------------------

D, K = 8, 2
X = np.random.default_rng(0).uniform(-0.2, 0.2, size=(30, D))
BASIS = thin_qr(np.random.default_rng(1).standard_normal((D, K)))


@pytest.fixture
def run_identity(monkeypatch):
    """Flower's messages need the run's identity (set by Flower in a real run)."""
    for attribute in ("_task_id", "_run_id", "_node_id"):
        monkeypatch.setattr(TaskIdentity, attribute, 1)


def site_app(policy=None):
    policy = policy or DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=2)
    return site_client_app(
        lambda context: client_factory(DPSPCASite)(context, X, policy, "clinic", seed=4)
    )


def new_context() -> Context:
    return Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})


def message_request(arrays, config, extra=None) -> Message:
    content = RecordDict({"arrays": ArrayRecord(list(arrays)), "config": ConfigRecord(config),
                          **(extra or {})})
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def legacy_request(arrays, config) -> Message:
    ins = FitIns(ndarrays_to_parameters(list(arrays)), dict(config))
    return Message(content=fitins_to_recorddict(ins, True), dst_node_id=1,
                   message_type=MessageType.TRAIN)


POWER = {"phase": "power", "round": 1}


def test_both_formats_get_the_same_answer_from_the_same_client(run_identity):
    reply = site_app()(message_request([BASIS], POWER), new_context())
    legacy = recorddict_to_fitres(site_app()(legacy_request([BASIS], POWER), new_context())
                                  .content, False)
    content = reply.content
    assert set(content) == {"arrays", "metrics", "site"}
    (value,) = content.array_records["arrays"].to_numpy_ndarrays()
    np.testing.assert_array_equal(value, ndarrays_from(legacy))
    metrics = content.metric_records["metrics"]
    assert dict(metrics) == {"num-examples": 30, "epsilon_spent": legacy.metrics["epsilon_spent"],
                             "releases": 1}
    assert content.config_records["site"]["site"] == "clinic" == legacy.metrics["site"]


def ndarrays_from(res):
    from flwr.common import parameters_to_ndarrays

    (value,) = parameters_to_ndarrays(res.parameters)
    return value


@pytest.mark.parametrize("extra,config,match", [
    (None, {**POWER, "sigma": 0.0}, "clinic: refused: unknown config keys"),
    (None, {"phase": "power", "round": 1, "min_noise_multiplier": -1.0}, "finite"),
    ({"metrics": MetricRecord({"x": 1})}, POWER, "refused: a request carries exactly"),
    ({"more": ConfigRecord({"sigma": 0.0})}, POWER, "refused: a request carries exactly"),
])
def test_a_malformed_message_is_refused_before_any_charge(run_identity, extra, config, match):
    context = new_context()
    reply = site_app()(message_request([BASIS], config, extra), context)
    assert reply.has_error() and re.search(match, reply.error.reason)
    assert "Traceback" not in reply.error.reason
    assert LEDGER_RECORD not in context.state.config_records  # nothing was charged


def test_switching_format_does_not_reset_the_ledger(run_identity):
    # a coordinator alternating legacy and Message-API requests meets one ledger
    app, context = site_app(), new_context()  # T = 2: init + 2 power releases
    for request in (legacy_request, message_request, legacy_request):
        assert not app(request([BASIS], POWER), context).has_error()
    for request in (message_request, legacy_request):
        reply = app(request([BASIS], POWER), context)
        assert reply.has_error() and "clinic" in reply.error.reason
        assert "allows 3 releases" in reply.error.reason


def test_a_secure_aggregation_site_refuses_unmasked_requests_of_either_format(run_identity):
    app = site_app(DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=2, secure_min_sites=3,
                              discrete=True))
    for request in (message_request([BASIS], POWER), legacy_request([BASIS], POWER)):
        context = new_context()
        reply = app(request, context)
        assert reply.has_error() and "not masked" in reply.error.reason
        assert LEDGER_RECORD not in context.state.config_records


# --- the strategies, without a federation --------------------------------------------------

def test_start_refuses_a_round_count_or_arrays_the_algorithm_cannot_use():
    strategy = DPSPCA(dim=D, k=K, s_hat=4, rounds=3)
    assert strategy.num_rounds == 4 and repr(strategy).startswith("DPSPCA(dim=8")
    with pytest.raises(ConfigurationError, match="exactly 4 Flower rounds, got num_rounds=3"):
        strategy.start(grid=None, initial_arrays=ArrayRecord(), num_rounds=3)
    with pytest.raises(ConfigurationError, match="takes no initial arrays"):
        strategy.start(grid=None, initial_arrays=ArrayRecord([BASIS]))


def test_the_legacy_adapter_carries_no_secure_sums():
    secure = DPSPCA(dim=D, k=K, s_hat=4, rounds=1)
    secure.secure_protocol = VerifiedSecureAggregation(min_sites=3, timeout=60.0)
    with pytest.raises(ConfigurationError, match="only through fedpca's verifiable secure"):
        LegacySiteStrategy(strategy=secure)
    adapter = DPSPCAStrategy(dim=D, k=K, s_hat=4, rounds=1)
    assert adapter.num_rounds == 2 and adapter.rounds.server is adapter.server


def test_reply_errors_are_the_failures_and_too_few_answers_stop_the_round(run_identity):
    strategy = DPdisPCA(dim=D, k=K, min_sites=2)
    (request,) = [Message(content=RecordDict(), dst_node_id=1, message_type=MessageType.TRAIN)]
    strategy.asked = 2
    replies = [Message(Error(code=2, reason="a: refused: budget"), reply_to=request)]
    with pytest.raises(RoundFailedError, match=r"0 site\(s\) answered, need 2; failures: "
                                               r"\['a: refused: budget', '1 site\(s\) sent no"):
        strategy.aggregate_train(1, replies)
    assert strategy.failures == ["a: refused: budget", "1 site(s) sent no reply in time"]

"""One registration per federated algorithm: the only table an algorithm appears in.

An :class:`AlgorithmSpec` names everything the product derives for an algorithm: the
``fedpca simulate NAME`` command and its flags (from the scenario's fields, see
:mod:`fedpca.scenarios.base`), the Flower App's dispatch on run_config ``algorithm`` and
its run_config keys, its named Flower strategy (:mod:`fedpca.flower.server.strategies`), the site
that answers its requests and what a site's policy and plan need to know of it (its extra
releases, a public start, an explained-variance release, whether a genotype site answers
it, whether ``fedpca site init`` writes its table), its centred reference run
(:mod:`fedpca.algorithms.centred_run`), its run record's fields (:mod:`fedpca.run_record`),
its round table's columns (:mod:`fedpca.report`), its ``fedpca audit`` targets and the
sensitivity figures the audit's broken mechanisms understate (:mod:`fedpca.audit.broken`).
Upper layers read the spec (plain data, or ``"package.module:attribute"`` paths loaded only
when used, so that ``fedpca --help`` imports neither Flower nor numpy); no module keeps a
table of algorithms of its own, and no site code compares an algorithm's name.
Adding an algorithm touches three files: its Flower-free module in
:mod:`fedpca.algorithms` (server and site), its scenario in :mod:`fedpca.scenarios` (its
parameters, data and server plan) and one entry here.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedpca.errors import ConfigurationError


def load(path: str) -> Any:
    """The object at ``"package.module:attribute"``."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


#: The trust model of releases a site noises on its own (no secure sums).
PER_SITE_TRUST = "per-site noise: no trusted party; every answer is DP on its own"


@dataclass(frozen=True)
class AlgorithmSpec:
    """A federated algorithm, by name (``"package.module:attribute"`` paths).

    Attributes:
        name: the ``fedpca simulate`` sub-command and the run_config ``algorithm`` value.
        help: one line for ``fedpca simulate --help``.
        description: the sub-command's description.
        scenario: the scenario dataclass (parameters, defaults, help, data, policy).
        site: the Flower-free site class (its data, noise and ledger).
        policy: its site's privacy policy class (a dataclass whose fields are the
            run_config privacy keys with ``_`` for ``-``), built by :meth:`site_policy`.
        strategy: the public names of its Message-API strategy class
            (:data:`fedpca.flower.server.strategies.STRATEGIES`) and of that class's adapter to
            Flower's legacy strategy API, and what the class builds its server with (the
            server class, or a builder taking the strategy first).
        record: its run record's own fields: ``RunResult -> dict``
            (:func:`fedpca.run_record.run_record`, after the headline).
        columns: its round table's metric columns: (history key, column title).
        phased: its rounds differ in kind (a phase column in the round table).
        audit: ``fedpca audit`` mechanism name -> ``AuditSettings -> AuditTarget`` builder.
        sensitivities: audit mechanism -> the sensitivity figure its calibration reads, as
            ``module:attribute`` of the module that reads it (the audit's broken mechanism
            :func:`~fedpca.audit.broken.add_remove_sensitivity` understates it ``sqrt(2)``
            times: the add/remove-one figure instead of the replace-one one).
        extra_releases: ``None`` for one release per site and run; else a run makes
            ``rounds + extra_releases`` releases (DPS-PCA's initialisation: 1).
        public_start: a run may start from a public basis named by its hash
            (:mod:`fedpca.data.start_basis`) instead of its first release (DPS-PCA's
            initialisation): such a run makes one release fewer.
        explained_variance: a site's policy may agree to one more release at the end of a
            run, the final basis's noisy Rayleigh quotients and trace (the policy key
            ``explained-variance``), planned within the same budget.
        genotype_rows: a genotype site answers it (it reads rows only through their
            products, so a site streams them from its PLINK fileset).
        site_template: ``fedpca site init`` writes its ``[algorithms.NAME]`` table.
        paper_rule: the closed form a site's ``accounting = "paper"`` calibrates a run with
            (:data:`fedpca.dp.calibration.PAPER_RULES`: the rounds rule of paper 000 for a
            multi-round algorithm, the classic Gaussian for one release).
        local_dp: the guarantee is local (every record against everyone, its own site
            included): a centred run's moments are then every record's own views
            (:class:`~fedpca.algorithms.centring.CentredPolicy` ``local``).
        centred: its part of a centred reference run: ``(CentredSetup, **params) ->
            CentredAlgorithm`` (:func:`fedpca.algorithms.centred_run.run_centred`).
        unit, trust_model, release_description, record_notes: what its privacy record
            (:func:`fedpca.algorithms.privacy_record.privacy_record`) says of the guarantee's
            unit, of the trust model of per-site noise, of the release (``None``: nothing
            more than the calibration's) and its other public facts (key, text).
        centred_params: the scenario's fields its centred part takes (a Flower run's).
        record_release: the mechanism of :attr:`sensitivities` whose sensitivity the record
            states (``None``: the one named :attr:`name`).
    """

    name: str
    help: str
    description: str
    scenario: str
    site: str
    policy: str
    strategy: tuple[str, str, str]
    record: str
    columns: tuple[tuple[str, str], ...]
    audit: tuple[tuple[str, str], ...]
    sensitivities: tuple[tuple[str, str], ...]
    centred: str
    centred_params: tuple[str, ...]
    phased: bool = False
    extra_releases: int | None = None
    public_start: bool = False
    explained_variance: bool = False
    genotype_rows: bool = False
    site_template: bool = True
    paper_rule: str = "classic"
    local_dp: bool = False
    unit: str = "one record at one site (replace-one)"
    trust_model: str = PER_SITE_TRUST
    release_description: str | None = None
    record_notes: tuple[tuple[str, str], ...] = ()
    record_release: str | None = None

    @property
    def multi_round(self) -> bool:
        """Whether a run has rounds (a policy's ``rounds`` calibrates it), not one release."""
        return self.extra_releases is not None

    def releases_per_run(self, rounds: int, start: bool = False) -> int:
        """The releases one run with ``rounds`` rounds makes at a site (one fewer from a
        public ``start``, which only an algorithm with :attr:`public_start` takes)."""
        if start and not self.public_start:
            raise ConfigurationError(f"{self.name} cannot start from a public basis")
        return (1 if self.extra_releases is None else rounds + self.extra_releases) - int(start)

    def record_sensitivity(self) -> Any:
        """The sensitivity function of the release its privacy record states (of the clip
        norm ``C``, and of the smallest site's record count where it scales with it)."""
        return load(dict(self.sensitivities)[self.record_release or self.name])

    def scenario_class(self) -> Any:
        """The scenario dataclass."""
        return load(self.scenario)

    def site_class(self) -> Any:
        """The Flower-free site class."""
        return load(self.site)

    def site_policy(self, settings: Mapping[str, Any], start: Any = None) -> Any:
        """Its site's privacy policy from a site's own ``settings`` (run_config privacy keys:
        a real site's :meth:`~fedpca.site.policy.SitePolicyFile.privacy_config`, never the
        coordinator's) and the public ``start`` basis its plan holds (``None``: none); keys
        the policy has no field for are not read, ``secure-min-sites = 0`` is none."""
        values = {**settings, "start": start}
        values["secure-min-sites"] = values.get("secure-min-sites") or None
        cls = load(self.policy)
        return cls(**{f.name: values[f.name.replace("_", "-")] for f in dataclasses.fields(cls)
                      if f.name.replace("_", "-") in values})


#: Where the record fields, audit targets and centred parts named below live.
_RECORD, _TARGETS, _CENTRED = ("fedpca.run_record:", "fedpca.audit.targets:",
                               "fedpca.algorithms.centred_run:")
SPECS: dict[str, AlgorithmSpec] = {spec.name: spec for spec in (
    AlgorithmSpec(
        name="dps-pca",
        help="DPS-PCA (noisy truncated power method) on the synthetic sparse model",
        description="Flower simulation of DPS-PCA: every site adds its own calibrated noise.",
        scenario="fedpca.scenarios.dps_pca:DPSPCAScenario",
        site="fedpca.algorithms.dps_pca:DPSPCASite",
        policy="fedpca.algorithms.dps_pca:DPSPCAPolicy",
        strategy=("DPSPCA", "DPSPCAStrategy", "fedpca.algorithms.dps_pca:DPSPCAServer"),
        record=_RECORD + "dps_pca_fields",
        columns=(("distance", "distance"),),
        audit=(("dps-pca/init", _TARGETS + "dps_init"),
               ("dps-pca/power", _TARGETS + "dps_power"),
               ("dps-pca/variance", _TARGETS + "dps_variance")),
        sensitivities=(("dps-pca/init", "fedpca.algorithms.dps_pca:diagonal_sensitivity"),
                       ("dps-pca/power", "fedpca.algorithms.dps_pca:power_step_sensitivity"),
                       ("dps-pca/variance", "fedpca.algorithms.dps_pca:rayleigh_sensitivity")),
        centred=_CENTRED + "centred_dps",
        centred_params=("k", "s_hat"),
        phased=True,
        extra_releases=1,
        paper_rule="dps-pca",
        public_start=True,
        explained_variance=True,
        genotype_rows=True,
        record_release="dps-pca/power",
    ),
    AlgorithmSpec(
        name="dpdis-pca",
        help="DPdisPCA (one round of noisy partial square roots) on synthetic or real data",
        description="Flower simulation of DPdisPCA: every site releases P_s = U_R S_R^(1/2) "
                    "of its noisy second-moment matrix once; the server merges them.",
        scenario="fedpca.scenarios.dpdis_pca:DPdisPCAScenario",
        site="fedpca.algorithms.dpdis_pca:DPdisPCASite",
        policy="fedpca.algorithms.dpdis_pca:DPdisPCAPolicy",
        strategy=("DPdisPCA", "DPdisPCAStrategy", "fedpca.algorithms.dpdis_pca:DPdisPCAServer"),
        record=_RECORD + "dpdis_pca_fields",
        columns=(("energy_ratio", "energy"),),
        audit=(("dpdis-pca", _TARGETS + "dpdis"),
               ("dpdis-pca/secure-sum", _TARGETS + "dpdis_secure")),
        sensitivities=(("dpdis-pca", "fedpca.algorithms.dpdis_pca:second_moment_sensitivity"),),
        centred=_CENTRED + "centred_dpdis",
        centred_params=("k", "variant", "r", "weighting"),
        trust_model="per-site noise",
        release_description="symmetric Gaussian on the upper triangle of X_s^T X_s / N_s",
    ),
    AlgorithmSpec(
        name="ldp-pca",
        help="LDP-PCA (local-DP covariance views; --sparse: Fantope projection and selection)",
        description="Flower simulation of LDP-PCA: every record's view x x^T + Z is "
                    "(eps, delta)-DP on its own; a site sends the sum of its records' views.",
        scenario="fedpca.scenarios.ldp_pca:LDPScenario",
        site="fedpca.algorithms.ldp_pca:LDPCovarianceSite",
        policy="fedpca.algorithms.ldp_pca:LDPPolicy",
        strategy=("LDPCovariance", "LDPCovarianceStrategy",
                  "fedpca.flower.server.strategies:build_ldp"),
        record=_RECORD + "ldp_pca_fields",
        columns=(("distance", "distance"), ("energy_ratio", "energy")),
        audit=(("ldp-pca", _TARGETS + "ldp"),),
        # the site and its policy read the module's figure
        sensitivities=(("ldp-pca", "fedpca.algorithms.ldp_pca:upper_triangle_sensitivity"),),
        centred=_CENTRED + "centred_ldp",
        centred_params=("k", "sparse", "lam"),
        local_dp=True,
        unit="one record, replace-one (its own view, local model)",
        trust_model="local: every record's view x x^T + Z is (epsilon, delta)-DP on its own, "
                    "against the server and every other party; a site sends the sum of its "
                    "records' views",
        release_description="x x^T + symmetric Gaussian per record; a site sends the sum of "
                            "m views (entry variance m sigma^2)",
    ),
    AlgorithmSpec(
        name="sulq-kplane",
        help="SuLQ k-plane private subspace clustering on a synthetic union of subspaces",
        description="Flower simulation of SuLQ k-plane: every site adds its own calibrated "
                    "noise to its per-cluster second moments; the initial subspaces are "
                    "public randomness.",
        scenario="fedpca.scenarios.kplane:KPlaneScenario",
        site="fedpca.algorithms.kplane:KPlaneSite",
        policy="fedpca.algorithms.kplane:KPlanePolicy",
        strategy=("SuLQKPlane", "KPlaneStrategy", "fedpca.algorithms.kplane:KPlaneServer"),
        record=_RECORD + "sulq_kplane_fields",
        columns=(("cost", "cost"), ("wasserstein_distance", "W dist")),
        audit=(("sulq-kplane", _TARGETS + "kplane"),
               ("sulq-kplane/secure-sum", _TARGETS + "kplane_secure")),
        # the within-one-cluster figure sqrt(2) C^2 instead of the 2 C^2 of a record that
        # switches cluster (the same sqrt(2) understatement)
        sensitivities=(("sulq-kplane",
                        "fedpca.algorithms.kplane:cluster_moments_sensitivity"),),
        centred=_CENTRED + "centred_kplane",
        centred_params=("clusters", "subspace_dim"),
        extra_releases=0,
        paper_rule="dps-pca",
        site_template=False,
        unit="one record at one site (replace-one; the record may change cluster)",
        record_notes=(("initialisation",
                       "public randomness from the server's seed (no privacy budget)"),),
    ),
)}
#: The algorithm ``flwr run`` runs when run_config names none.
DEFAULT_ALGORITHM = "dps-pca"


def spec(name: str) -> AlgorithmSpec:
    """The spec of algorithm ``name``; an unknown name is refused with the known ones."""
    if name not in SPECS:
        raise ConfigurationError(
            f"algorithm {name!r} is unknown; choose one of {sorted(SPECS)}"
        )
    return SPECS[name]


def run_algorithm(run_config: Mapping[str, Any]) -> str:
    """The algorithm a run_config names (:data:`DEFAULT_ALGORITHM` when it names none), not
    yet checked (:func:`spec` checks it)."""
    return str(run_config.get("algorithm", DEFAULT_ALGORITHM))


def app_config() -> dict[str, Any]:
    """The Flower App's run_config keys and defaults, derived from the scenarios: every
    algorithm's fields (a key several algorithms share takes the default algorithm's
    default), without ``sites`` (the federation decides) and ``failure_rate`` (the CLI's
    fault simulation), plus the App's own keys."""
    config: dict[str, Any] = {"algorithm": DEFAULT_ALGORITHM}
    ordered = [SPECS[DEFAULT_ALGORITHM],
               *(s for s in SPECS.values() if s.name != DEFAULT_ALGORITHM)]
    for algorithm in ordered:
        cls = algorithm.scenario_class()
        none = cls.run_config_none()
        for name, value in cls.defaults().items():
            if name in CLI_ONLY:
                continue
            config.setdefault(name.replace("_", "-"), none.get(name) if value is None else value)
    return {**config, **APP_KEYS}


#: Scenario fields that are not run_config keys.
CLI_ONLY = frozenset({"sites", "failure_rate"})
#: run_config keys of the App itself: secure sums' public bound on a site's record count, the
#: path the ServerApp writes its run record to ("": none), the hash of the data contract
#: the run is made under ("": none; a real site refuses a run under another,
#: :mod:`fedpca.site.real_site`), a centred run's scaling (``centring``: "", "centre" or
#: "standardize") and the server's copy of the contract (``contract-file``: its public
#: widths turn the moments into a mean and a scale).
#: The SHA-256 of the run's public start basis (``start-sha256``, "": none) is what every site
#: plans with (:mod:`fedpca.site.start`); the scenario's ``start`` is the server's copy.
#: A genotype run's SNP panel (``panel``: the coordinator's copy of the file every site holds,
#: "": none) and a simulated one's PLINK prefixes (``plink``, space-separated, "": none),
#: :mod:`fedpca.scenarios.genotypes`.
#: The coordinator's waits, in seconds (:class:`fedpca.flower.server.readiness.Deadlines`):
#: for the sites to connect, for the readiness round's answers, for a later exchange's
#: answers when no ready site states its own ``answer-seconds``, and for a site whose node
#: went away to come back (``restart-seconds``; 0: not awaited).
APP_KEYS: dict[str, Any] = {"secagg-max-weight": 0, "output": "", "contract": "",
                            "centring": "", "contract-file": "", "start-sha256": "",
                            "panel": "", "plink": "", "connect-seconds": 600.0,
                            "readiness-seconds": 300.0, "answer-seconds": 600.0,
                            "restart-seconds": 120.0}

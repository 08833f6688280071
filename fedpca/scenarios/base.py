"""What every scenario shares: the privacy fields, their CLI flags and run_config keys.

A scenario is a frozen dataclass holding every parameter of one run. Its fields are the one
declaration of those parameters: a field whose metadata was made by :func:`flag` is a
``fedpca simulate`` flag (``s_hat`` -> ``--s-hat``, with the field's default and help text)
and every field is a Flower ``run_config`` key (``s-hat``); :mod:`fedpca.algorithms.specs`
names each algorithm's scenario. No Flower import here.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from fedpca.errors import ConfigurationError, ParameterError
from fedpca.dp.calibration import ACCOUNTING_MODES
from fedpca.dp.exact_noise import EXACT, FLOAT, NOISE_SAMPLERS
from fedpca.dp.mechanisms import NO_SEED
from fedpca.dp.validation import require_site_count

if TYPE_CHECKING:
    from fedpca.scenarios.plans import CentredPlan, ServerPlan

S = TypeVar("S", bound="Scenario")

#: run_config ``dataset`` of a run at real sites: every site reads its own data file (its
#: policy's); the server holds no data, so it evaluates nothing.
SITE_FILES = "files"


def no_site_files(site: int) -> ConfigurationError:
    """The error for a simulated partition asked for ``dataset = "files"``."""
    return ConfigurationError(
        f"partition {site}: dataset {SITE_FILES!r} means every site reads its own data file "
        "(a real site's policy names it); a simulated partition holds none: use dataset "
        "'synthetic' or a public data set")


def flag(help: str, *, none: Any = None, **argparse_options: Any) -> dict[str, Any]:
    """Field metadata making the field a CLI flag with ``help`` (and any further
    ``argparse`` options, e.g. ``choices``, ``type`` for an optional field, ``flags`` for
    other spellings); ``none`` is the run_config value that stands for ``None``."""
    return {"help": help, "none": none, "argparse": argparse_options}


def parameter(default: Any, metadata: dict[str, Any]) -> Any:
    """A dataclass field with ``default`` and the metadata of :func:`flag`."""
    return field(default=default, metadata=metadata)


SITES = flag("virtual sites")
EPSILON = flag("per-site epsilon for the whole run")
DELTA = flag("per-site delta")
ACCOUNTING = flag("pld: tight dp-accounting calibration; paper: the paper's formula",
                  choices=tuple(m for m in ACCOUNTING_MODES if m != "rdp"))
CLIP_NORM = flag("public row-norm bound C")
NOISE_SAMPLER = flag(
    "the sites' noise: float (numpy Gaussians, simulation only: their low bits can leak) or "
    "exact (grid points plus exact discrete Gaussian noise, what a real site always draws)",
    choices=NOISE_SAMPLERS)
#: ``--secure-aggregation`` without a number: every site of the federation.
ALL_SITES = -1
SECURE_MIN_SITES = flag(
    "fedpca's verifiable secure aggregation: each site's noise assumes every secure sum "
    "holds at least M sites (M defaults to all sites)",
    flags=("--secure-aggregation",), nargs="?", type=int, const=ALL_SITES, metavar="M", none=0,
)
SECURE_GROUP_SIZE = flag(
    "with --secure-aggregation M: sum the sites in groups of at least this many (at least M; "
    "0: one sum of every site), one verifiable secure sum per group, each group's sum "
    "checked against the others' and dropped when it stands out",
    type=int, metavar="N")
SEED = flag("seed noise and data for a reproducible run (never in production)", type=int,
            none=NO_SEED)
MIN_SITES = flag("a round proceeds if at least this many sites answer (default: all)",
                 type=int, none=0)
DIM = flag("features d")
SAMPLES = flag("total records n, split evenly over the sites")
#: ``--k auto``: choose ``k`` from the DP explained variance (scenarios with
#: :attr:`Scenario.CHOOSES_K`); held as -1 until the scenario resolves it.
AUTO_K = -1


def components(text: str) -> int:
    """``--k``'s value: a positive integer, or ``auto`` (:data:`AUTO_K`)."""
    if text.strip().lower() == "auto":
        return AUTO_K
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}")
    return int(text)


K = flag("components (auto: the fewest that explain --variance, for the algorithms that can "
         "choose)", type=components)
ROUNDS = flag("rounds T")


#: The fewest sites a ServerApp waits for (a "federation" of one site is its own curator).
DEFAULT_MIN_SITES = 2
#: The ``dataset`` of the synthetic models (public: a server may rebuild it to evaluate).
SYNTHETIC = "synthetic"
#: run_config key of secure sums' public bound on every site's record count.
MAX_WEIGHT = "secagg-max-weight"


@dataclass(frozen=True)
class Scenario:
    """The fields every scenario has; subclasses add theirs and may re-declare one of these
    with another default (it keeps its place and its help).

    ``seed`` seeds the noise and the server's public randomness (``None``: OS randomness,
    the only choice for production), ``data_seed`` the data; ``min_sites`` (``None``: all)
    sites must answer every round.
    """

    #: The name of ``fedpca simulate NAME`` (and of run_config ``algorithm``).
    ALGORITHM: ClassVar[str] = ""

    sites: int = parameter(10, SITES)
    epsilon: float = parameter(1.0, EPSILON)
    delta: float = parameter(1e-5, DELTA)
    accounting: str = parameter("pld", ACCOUNTING)
    clip_norm: float = parameter(1.0, CLIP_NORM)
    noise_sampler: str = parameter(FLOAT, NOISE_SAMPLER)
    seed: int | None = parameter(None, SEED)
    data_seed: int = 0
    min_sites: int | None = parameter(None, MIN_SITES)

    #: Whether the run can choose ``k`` from its DP explained variance (``--k auto``), and
    #: the field that holds ``k``.
    CHOOSES_K: ClassVar[bool] = False
    COMPONENTS: ClassVar[str] = "k"

    def __post_init__(self) -> None:
        # more than the federation's sites would never arrive: a run would wait forever
        require_site_count(self.min_sites, "min_sites", self.sites)
        if getattr(self, self.COMPONENTS, None) == AUTO_K and not self.CHOOSES_K:
            raise ParameterError(
                f"{{{self.COMPONENTS}}} auto needs the whole noisy matrix of a one-shot method "
                f"(dpdis-pca --variant full or secure-sum); {self.ALGORITHM} needs k before "
                "it runs", {self.COMPONENTS: "auto"},
                hint=f"give {{{self.COMPONENTS}}} as a number")

    def server_plan(self, app_config: Mapping[str, Any] | None = None) -> ServerPlan:
        """The run's server (a simulation: ``app_config`` is ``None`` and this process can
        rebuild every site's data, so the server may evaluate against it; the Flower App:
        ``app_config`` is the run_config, and the server evaluates only what it declares
        public, e.g. a synthetic model's truth). Each algorithm's scenario."""
        raise NotImplementedError

    def centred_server(self, plan: CentredPlan) -> ServerPlan:
        """A centred run's server (:meth:`CentredPlan.plan
        <fedpca.scenarios.plans.CentredPlan.plan>`): the spec's centred part
        (:attr:`~fedpca.algorithms.specs.AlgorithmSpec.centred`, the one the reference
        centred run builds) of the plan's setup and the scenario's fields the spec names
        (``centred_params``); refused from a public start (a basis of uncentred rows)."""
        from fedpca.algorithms.specs import load, spec

        if self.start_basis() is not None:
            raise ConfigurationError("a public start basis is not built for a centred run: "
                                     "run with centring=\"\" or without start")
        algorithm = spec(self.ALGORITHM)
        params = {name: getattr(self, name) for name in algorithm.centred_params}
        return plan.plan(load(algorithm.centred)(plan.setup, **params))

    def policy(self) -> Any:
        """Every site's privacy policy in this scenario: its spec's
        :meth:`~fedpca.algorithms.specs.AlgorithmSpec.site_policy` of the scenario's fields
        (their run_config spelling) and its public start basis."""
        from fedpca.algorithms.specs import spec

        settings = {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self)}
        return spec(self.ALGORITHM).site_policy(settings, self.start_basis())

    def start_basis(self) -> Any:
        """The public start basis the run starts from (``None``: none)."""
        return None

    def privacy(self) -> dict[str, Any]:
        """The guarantee each site gives in this scenario, without secure sums
        (:func:`~fedpca.algorithms.privacy_record.privacy_record` of its policy)."""
        from fedpca.algorithms.privacy_record import privacy_record

        return privacy_record(self.ALGORITHM, self.policy())

    def max_records(self, app_config: Mapping[str, Any] | None) -> int | None:
        """A public bound on every site's record count for secure sums: run_config
        ``secagg-max-weight`` (the sites' stated counts fill it in at real sites), required
        with secure sums in the App; in a simulation the largest site's (``None``)."""
        if app_config is None:
            return None
        bound = int(app_config.get(MAX_WEIGHT, 0))
        if getattr(self, "secure_min_sites", None) is not None and bound <= 0:
            raise ConfigurationError(
                f"secure aggregation needs run_config {MAX_WEIGHT}: a public upper bound on every "
                "site's record count (real sites state theirs in the readiness round; simulated "
                f"partitions do not: set {MAX_WEIGHT}=N, N at least the largest site's records)"
            )
        return bound or None

    def simulation_config(self) -> dict[str, Any]:
        """What a simulation's result config adds (each algorithm's: e.g. the clipped rows
        only a simulation can count)."""
        return {}

    @classmethod
    def flag_fields(cls) -> list[Field]:
        """The fields that are CLI flags, in declaration order."""
        return [f for f in fields(cls) if "help" in f.metadata]

    @classmethod
    def run_config_none(cls) -> dict[str, Any]:
        """Optional fields and the run_config value standing for their ``None``."""
        return {
            f.name: f.metadata["none"] for f in fields(cls)
            if f.metadata.get("none") is not None
        }

    @classmethod
    def int_fields(cls) -> frozenset[str]:
        """Fields converted with ``int`` on the way in (annotated ``int`` or ``int | None``)."""
        return frozenset(f.name for f in fields(cls) if str(f.type).startswith("int"))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every field's default value."""
        return {f.name: f.default for f in fields(cls) if f.default is not MISSING}

    def to_run_config(self) -> dict[str, Any]:
        """Flower ``run_config`` keys: field names with dashes, ``None`` encoded."""
        none = self.run_config_none()
        return {
            name.replace("_", "-"): none[name] if value is None else value
            for name, value in asdict(self).items()
        }

    @classmethod
    def from_run_config(cls, config: dict[str, Any], **overrides: Any) -> Self:
        """Build from a Flower ``run_config`` (unknown keys ignored), then apply overrides;
        integer fields are converted with ``int`` (TOML and CLI overrides may give floats or
        strings)."""
        none, ints = cls.run_config_none(), cls.int_fields()
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            key = f.name.replace("_", "-")
            if key not in config:
                continue
            value = config[key]
            if f.name in none and value == none[f.name]:
                value = None
            elif f.name in ints:
                value = int(value)
            kwargs[f.name] = value
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def from_flags(cls, values: dict[str, Any]) -> Scenario:
        """The scenario of ``fedpca simulate``'s parsed flags: the data seed is ``--seed``
        when given (a fully reproducible run), else 0 (the same public data every time,
        with fresh OS noise); ``--secure-aggregation`` alone means all sites."""
        if values.get("secure_min_sites") == ALL_SITES:
            values = {**values, "secure_min_sites": values["sites"]}
        return cls(**cls.with_data_seed(values))

    @staticmethod
    def with_data_seed(values: dict[str, Any]) -> dict[str, Any]:
        """``values`` with the data seed the flags imply: ``--seed``, else 0."""
        seed = values.get("seed")
        return {**values, "data_seed": seed if seed is not None else 0}

    def required_sites(self) -> int:
        """Sites every round needs: ``min_sites`` (all by default), and at least the
        secure-aggregation minimum ``M`` where the scenario has one."""
        return max(self.min_sites or self.sites, getattr(self, "secure_min_sites", None) or 0)

    def check_site(self, site: int) -> None:
        """Refuse a site index outside ``0 .. sites - 1``."""
        if not 0 <= site < self.sites:
            raise ConfigurationError(f"site {site} is outside 0..{self.sites - 1}")

    @property
    def flower_rounds(self) -> int:
        """Flower rounds of the run (what progress counts): one unless overridden."""
        return 1

    #: Whether the result is a basis with a loadings table (not k-plane's clusters).
    HAS_LOADINGS: ClassVar[bool] = True

    @property
    def explains_variance(self) -> bool:
        """Whether the result will carry a DP explained variance (for a scree plot)."""
        return self.HAS_LOADINGS

    #: Who the header says holds the guarantee.
    HOLDER: ClassVar[str] = "each site"

    def header(self) -> list[str]:
        """The lines printed before the run: :meth:`describe`, then ``"HOLDER (eps,
        delta)-DP [accounting: noise multiplier z, ...]"`` (naming exact noise when the
        sites draw it) and any :meth:`notes`."""
        p = self.privacy()
        exact = ", exact noise (grid points)" if p.get("noise_sampler") == EXACT else ""
        return [
            (f"{self.describe()}; {self.HOLDER} ({self.epsilon}, {self.delta})-DP"
            f"{self.release_note()} [{p.get('accounting', self.accounting)}: noise multiplier "
            f"{p['noise_multiplier']:.3f}, {self.noise_detail(p)}{exact}]"),
            *self.notes(p),
        ]

    def describe(self) -> str:
        """The run's data and shape, e.g. ``"DPS-PCA: 100 sites, n=..., d=..."``."""
        raise NotImplementedError

    def release_note(self) -> str:
        """Said after the guarantee, e.g. ``", one release"``."""
        return ""

    def noise_detail(self, privacy: dict[str, Any]) -> str:
        """The noise scale and the number of releases."""
        return f"sigma {privacy['sigma']:.3f}, {privacy['releases_per_site']} releases"

    def notes(self, privacy: dict[str, Any]) -> list[str]:
        """Lines after the guarantee (the trust model, where it needs saying)."""
        return [f"trust model: {privacy['trust_model']}"]

    def report(self, result: Any) -> list[str]:
        """The lines printed after the run, before the wall time."""
        raise NotImplementedError


def require_group_size(group_size: int, min_sites: int | None, sites: int) -> None:
    """Refuse a secure sum's group size (``secure_group_size``; 0: one sum) without secure
    sums (``secure_min_sites`` ``None``), below their ``M`` (a smaller group's sum would
    hold fewer sites than every site's noise assumes) or above the ``sites``."""
    if group_size == 0:
        return
    if min_sites is None:
        raise ParameterError(
            "{secure_group_size} groups the sites' secure sums, and this run has none",
            {"secure_group_size": group_size, "secure_min_sites": None},
            hint="add {secure_min_sites} M (with its secure sums), or drop {secure_group_size}")
    if not min_sites <= group_size <= sites:
        raise ParameterError(
            "need {secure_min_sites} <= {secure_group_size} <= {sites}: every group's secure "
            "sum must hold at least the M sites each site's noise assumes",
            {"secure_group_size": group_size, "secure_min_sites": min_sites, "sites": sites},
            hint="choose {secure_group_size} from M to the sites, or 0 for one sum")


def least_sites(config: dict[str, Any], connected: int = 0) -> int:
    """The federation size a node validates a run's shared parameters against: the sites
    connected when the run starts, but never fewer than the run's minimums (a site does not
    know the federation's size; the server waits for the minimum)."""
    minimums = (int(config.get("min-sites", 0)), int(config.get("secure-min-sites", 0)))
    return max(DEFAULT_MIN_SITES, connected, *minimums)

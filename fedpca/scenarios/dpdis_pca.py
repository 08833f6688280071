"""A DPdisPCA run: every parameter in one place (no Flower import).

The same scenario drives the CLI simulation and the reference run, so both see the same data,
policy and seeds. ``dataset`` is ``"synthetic"`` (:class:`DecayingSpectrumModel`, ``samples``
records split evenly over the sites) or a public data set of :mod:`fedpca.data.datasets`
(all its records, partitioned i.i.d. or, with ``alpha``, by a Dirichlet label skew); build a
data-set scenario with :meth:`DPdisPCAScenario.for_dataset`, which reads ``dim`` and
``samples`` from the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.dpdis_pca import (
    VARIANT_FACTOR,
    VARIANT_SECURE,
    VARIANTS,
    WEIGHTING_UNIFORM,
    WEIGHTINGS,
    DPdisPCAServer,
    default_r,
    message_bytes,
    pooled_second_moment,
    secure_sum_for,
)
from fedpca.algorithms.privacy_record import privacy_record
from fedpca.algorithms.secure_sum import SecureSum, public_seed
from fedpca.data.dpdis_model import DecayingSpectrumModel
from fedpca.data.federated import dataset_pooled
from fedpca.data.synthetic import require_split
from fedpca.errors import FedPCAError, InvalidDataError, ParameterError
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import (
    require_choice,
    require_finite_positive,
    require_ordered,
    require_site_count,
)
from fedpca.results import PCAResult
from fedpca.scenarios.base import (
    AUTO_K,
    DIM,
    SAMPLES,
    SECURE_GROUP_SIZE,
    SECURE_MIN_SITES,
    K,
    SITE_FILES,
    Scenario,
    flag,
    parameter,
    require_group_size,
)
from fedpca.scenarios.datasets import DATASETS, SYNTHETIC, scenario_site

from fedpca.scenarios.plans import ServerPlan


@dataclass(frozen=True)
class DPdisPCAScenario(Scenario):
    """DPdisPCA over ``sites`` sites.

    ``data_seed`` also seeds the partition of a data set.
    """

    ALGORITHM: ClassVar[str] = "dpdis-pca"
    CHOOSES_K: ClassVar[bool] = True

    dataset: str = parameter(SYNTHETIC, flag(
        "synthetic model, or a public data set (--dim and --samples then come from the data)",
        choices=DATASETS))
    dim: int = parameter(200, DIM)
    samples: int = parameter(20_000, SAMPLES)
    k: int = parameter(50, K)
    r: int | None = parameter(None, flag(
        "columns of each site's P_s (default 2k, capped at d)", type=int, none=0))
    weighting: str = parameter(WEIGHTING_UNIFORM, flag(
        "uniform: A_c = mean of P_s P_s^T (the paper); samples: weights N_s/N",
        choices=WEIGHTINGS))
    variant: str = parameter(VARIANT_FACTOR, flag(
        "factor: send P_s (d x r); full: send the noisy d x d matrix; secure-sum: send "
        "X^T X as distributed discrete Gaussian residues in verifiable secure sums (needs M, "
        "below)", choices=VARIANTS))
    secure_min_sites: int | None = parameter(None, SECURE_MIN_SITES)
    secure_group_size: int = parameter(0, SECURE_GROUP_SIZE)
    alpha: float | None = parameter(None, flag(
        "Dirichlet label skew across sites (data sets only; default i.i.d.)", type=float,
        none=0.0))
    variance: float | None = parameter(None, flag(
        "choose k privately: the fewest components (at most --k; --k auto: at most d) whose "
        "cumulative DP explained-variance ratio reaches this share, e.g. 0.9 (full and "
        "secure-sum variants; no extra budget)", type=float, none=0.0))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.resolve_k()
        require_choice(self.dataset, "dataset", DATASETS)
        require_split(self.samples, self.sites)
        if self.alpha is not None:
            if self.dataset == SYNTHETIC:
                raise ParameterError(
                    "{alpha} (Dirichlet label skew) needs a labelled data set, not the "
                    "synthetic model", {"alpha": self.alpha, "dataset": self.dataset},
                    hint="drop {alpha} or choose a data set as {dataset}",
                )
            require_finite_positive(self.alpha, "alpha")
        require_site_count(self.secure_min_sites, "secure_min_sites", self.sites, minimum=2)
        if (self.variant == VARIANT_SECURE) != (self.secure_min_sites is not None):
            raise ParameterError(
                "{variant} secure-sum and {secure_min_sites} go together: a site sends its "
                "secure-sum message only inside sums of at least M sites",
                {"variant": self.variant, "secure_min_sites": self.secure_min_sites},
                hint="use both {variant} secure-sum and {secure_min_sites} M, or neither",
            )
        require_group_size(self.secure_group_size, self.secure_min_sites, self.sites)
        self.policy()
        if self.variant == VARIANT_SECURE:
            require_ordered({"k": self.k, "dim": self.dim})
            return
        server = self.server()
        if server.r is not None and self.sites * server.r < self.k:
            raise ParameterError(
                "need {sites} x {r} >= {k}: the merged A_c has rank at most sites x r",
                {"sites": self.sites, "r": server.r, "k": self.k},
                hint=f"use {{r}} >= {-(-self.k // self.sites)}",
            )

    def resolve_k(self) -> None:
        """``--k auto`` becomes ``k = d`` (the most components) with ``--variance``, which
        must be a share in ``(0, 1]`` of a variant with the whole noisy matrix."""
        if self.k == AUTO_K and self.variance is None:
            raise ParameterError("{k} auto needs {variance}, the share of the variance to "
                                 "explain", {"k": "auto", "variance": None},
                                 hint="e.g. {variance} 0.9")
        if self.variance is None:
            return
        if not 0.0 < self.variance <= 1.0 or self.variant == VARIANT_FACTOR:
            raise ParameterError(
                "{variance} must be a share in (0, 1], of a {variant} with the whole noisy "
                "matrix", {"variance": self.variance, "variant": self.variant},
                hint="use {variant} full or secure-sum, and e.g. {variance} 0.9")
        if self.k == AUTO_K:
            object.__setattr__(self, "k", self.dim)

    @classmethod
    def for_dataset(cls, dataset: str, **options: Any) -> DPdisPCAScenario:
        """A scenario over every record of ``dataset``: ``dim`` and ``samples`` from the data."""
        require_choice(dataset, "dataset", DATASETS)
        if dataset in (SYNTHETIC, SITE_FILES):
            return cls(dataset=dataset, **options)
        X = dataset_pooled(dataset)
        return cls(dataset=dataset, dim=int(X.shape[1]), samples=int(X.shape[0]), **options)

    @classmethod
    def from_flags(cls, values: dict[str, Any]) -> DPdisPCAScenario:
        """As :meth:`Scenario.from_flags`; a data set brings its own ``dim`` and
        ``samples``."""
        if values.get("dataset", SYNTHETIC) in (SYNTHETIC, SITE_FILES):
            return super().from_flags(values)
        options = {k: v for k, v in cls.with_data_seed(values).items()
                   if k not in ("dataset", "dim", "samples")}
        return cls.for_dataset(values["dataset"], **options)

    def describe(self) -> str:
        """The data, sites, shape and weighting."""
        k = (self.k if self.variance is None
             else f"the fewest <= {self.k} explaining {self.variance:g}")
        return (f"DPdisPCA on {self.dataset}: {self.sites} sites, n={self.samples}, "
                f"d={self.dim}, k={k}, r={self.resolved_r or 'full'}, weighting "
                f"{self.weighting}")

    def release_note(self) -> str:
        """Each site releases once."""
        return ", one release"

    def noise_detail(self, privacy: dict[str, Any]) -> str:
        """The noise scale at the smallest site (the largest, as it divides by N_s), or in
        every secure sum."""
        if self.variant == VARIANT_SECURE:
            return (f"noise sd {privacy['sigma']:.3g} in every sum of at least "
                    f"{privacy['min_sites_per_sum']} sites")
        return f"tau {privacy['sigma']:.3g} at the smallest site (N_s={privacy['smallest_site']})"

    def notes(self, privacy: dict[str, Any]) -> list[str]:
        """The secure-sum variant's trust model."""
        return ([f"trust model: {privacy['trust_model']}"] if self.variant == VARIANT_SECURE
                else [])

    def report(self, result: PCAResult) -> list[str]:
        """The energy ratio and the bytes each site sent."""
        ratio = result.history[-1]["energy_ratio"]
        sent = result.config["bytes_per_site"]
        full = message_bytes(self.dim, None)
        return [
            f"energy ratio q/q_o = {ratio:.4f} (1 = non-private PCA of the pooled data)",
            (f"bytes sent per site: {sent:,} (the full d x d matrix: {full:,}; "
            f"{full / sent:.1f}x)"),
        ]

    @property
    def resolved_r(self) -> int | None:
        """The ``r`` sites are asked for (``None`` for the full variant)."""
        if self.variant != VARIANT_FACTOR:
            return None
        return default_r(self.k, self.dim) if self.r is None else self.r

    def model(self) -> DecayingSpectrumModel:
        """The synthetic model (public)."""
        return DecayingSpectrumModel(dim=self.dim, seed=self.data_seed)

    def secure_sum(self, max_records: int | None = None) -> tuple[SecureSum, GridChoice] | None:
        """The secure-sum variant's public sum over every site, each of at most
        ``max_records`` records (default: the largest site's count), and the sites' grid;
        the rotation seeded by the run's seed as in
        :func:`~fedpca.algorithms.dpdis_pca.run_dpdis_pca`."""
        if self.variant != VARIANT_SECURE:
            return None
        largest = max_records or max(s.X.shape[0] for s in self.all_prepared_sites())
        return secure_sum_for(self.policy(), self.dim, largest, self.sites, public_seed(self.seed))

    def server(
        self, evaluation: np.ndarray | None = None,
        secure: tuple[SecureSum, GridChoice] | None = None,
    ) -> DPdisPCAServer:
        """The aggregator this scenario describes (``secure``: the secure-sum variant's)."""
        return DPdisPCAServer(
            self.dim, self.k, self.resolved_r, self.weighting, self.variant, evaluation, secure,
            self.variance,
        )

    def server_plan(self, app_config: Mapping[str, Any] | None = None) -> ServerPlan:
        """DPdisPCA's server. A simulation measures the energy ratio against the pooled
        data it rebuilds; the App does so only when the answering sites turn out to be
        exactly the partitions the run_config describes (:func:`known_evaluation`), and its
        privacy record (per-site noise) uses the record counts the sites reported."""
        secure = self.secure_sum(self.max_records(app_config))
        if app_config is None:
            return ServerPlan(self.server(self.evaluation(), secure), self.privacy(secure))
        server = self.server(None, secure)

        def after_run(site_records: Mapping[str, int]) -> dict[str, Any] | None:
            evaluation = known_evaluation(app_config, site_records)
            if evaluation is not None:
                server.record_energy_ratio(evaluation)
            if secure is not None:
                return None
            return privacy_record(self.ALGORITHM, self.policy(), (), list(site_records.values()))

        return ServerPlan(server, {} if secure is None else self.privacy(secure),
                          after_run=after_run)

    def prepared_site(self, site: int) -> SiteData:
        """Site ``site``'s validated, clipped records, cached per process
        (:func:`~fedpca.scenarios.datasets.scenario_site`)."""
        data = scenario_site(self, site)
        if data.X.shape[1] != self.dim:
            raise InvalidDataError(
                f"{self.dataset} has {data.X.shape[1]} features but the scenario says dim="
                f"{self.dim}; build it with DPdisPCAScenario.for_dataset({self.dataset!r})"
            )
        return data

    def all_prepared_sites(self) -> list[SiteData]:
        """Every site's prepared records, in site order."""
        return [self.prepared_site(i) for i in range(self.sites)]

    def privacy(self, secure: tuple[SecureSum, GridChoice] | None = None) -> dict[str, Any]:
        """The guarantee each site gives in this scenario (``secure``: the secure sum the
        run uses, in the secure-sum variant)."""
        if self.variant == VARIANT_SECURE:
            return privacy_record(self.ALGORITHM, self.policy(), [(secure or self.secure_sum())[1]])
        return privacy_record(self.ALGORITHM, self.policy(), (),
                              [s.X.shape[0] for s in self.all_prepared_sites()])

    def evaluation(self) -> np.ndarray:
        """The pooled second-moment matrix ``q_o`` is measured against (simulation only)."""
        return pooled_second_moment([s.X for s in self.all_prepared_sites()])

    def holds_sites(self, site_records: Mapping[str, int]) -> bool:
        """Whether ``site_records`` (each answering site's name and record count) are
        exactly this scenario's partitions ``"0" .. "sites-1"``: then the sites answered from
        data this process can rebuild (synthetic or public), and an evaluation is valid; never
        with real sites' own files."""
        if self.dataset == SITE_FILES:
            return False
        expected = {str(i): self.prepared_site(i).X.shape[0] for i in range(self.sites)}
        return dict(site_records) == expected


def known_evaluation(config: Mapping[str, Any], site_records: Mapping[str, int]
                     ) -> np.ndarray | None:
    """The pooled second moment of the answering sites' data when a server can rebuild it
    (they are exactly the partitions the run_config describes), else ``None``."""
    try:
        known = DPdisPCAScenario.from_run_config(dict(config), sites=len(site_records))
        return known.evaluation() if known.holds_sites(site_records) else None
    except FedPCAError:  # the run_config does not describe the sites' data
        return None

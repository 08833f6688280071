"""A DPS-PCA run on the synthetic model: every parameter in one place (no Flower import).

The same scenario drives the CLI simulation, the Flower App (from ``run_config``) and the
reference run, so all three see the same data, policy and seeds.

``start`` (``--start FILE``, run_config ``start``) names a public start basis file
(:mod:`fedpca.data.start_basis`): the server starts from it and names it in every request
by its SHA-256, and the policy of the scenario's sites holds it (the simulated sites' own
setting, as their epsilon is; a real site holds its own file and takes the run_config's
path for none of it: :mod:`fedpca.site.start_bases`), so they plan no initialisation.
In the Flower App the run_config must also name it by its hash (``start-sha256``), which
is what real sites plan with.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.dps_pca import (
    DPSPCAServer,
    DPSSecureSums,
    privacy_record,
    secure_sums,
)
from fedpca.algorithms.secure_sum import public_seed
from fedpca.algorithms.site import CONTINUOUS_SHARES_RETIRED
from fedpca.data.start_basis import START_HASH, StartBasis, load_start_basis, start_name
from fedpca.data.synthetic import (
    SparseSpikedModel,
    prepared_site,
    require_split,
    site_data,
    site_size,
)
from fedpca.errors import ConfigurationError, ParameterError
from fedpca.linalg.subspace import subspace_distance
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import (
    require_ordered,
    require_positive_int,
    require_site_count,
)
from fedpca.results import PCAResult
from fedpca.scenarios.base import (
    DIM,
    SAMPLES,
    SECURE_GROUP_SIZE,
    SECURE_MIN_SITES,
    SITES,
    SYNTHETIC,
    K,
    Scenario,
    flag,
    parameter,
    require_group_size,
)

from fedpca.scenarios.plans import ServerPlan

#: The shape parameters' relations, checked in this order: the simplest first, so that an
#: error names the parameters a user set (``k <= dim``) before any left at its default.
SHAPE_RELATIONS = (("k", "dim"), ("sparsity", "dim"), ("s_hat", "dim"), ("k", "sparsity"),
                   ("k", "s_hat"))


@dataclass(frozen=True)
class DPSPCAScenario(Scenario):
    """DPS-PCA over ``sites`` sites holding ``samples`` synthetic records in total.

    ``secure_min_sites = M`` (with ``discrete``): every site adds distributed discrete
    Gaussian noise and answers only inside fedpca's verifiable secure sums of at least ``M``
    sites. ``failure_rate`` (simulation only) makes each
    site fail each round with that probability before it releases anything.
    """

    ALGORITHM: ClassVar[str] = "dps-pca"

    sites: int = parameter(100, SITES)
    dim: int = parameter(200, DIM)
    samples: int = parameter(200_000, SAMPLES)
    k: int = parameter(3, K)
    sparsity: int = parameter(10, flag("true row sparsity s of the leading eigenspace"))
    s_hat: int = parameter(20, flag("rows kept by thresholding"))
    rounds: int = parameter(10, flag("power rounds T"))
    secure_min_sites: int | None = parameter(None, SECURE_MIN_SITES)
    secure_group_size: int = parameter(0, SECURE_GROUP_SIZE)
    discrete: bool = parameter(False, flag(
        "required with --secure-aggregation: sites send distributed discrete Gaussian "
        "residues (exact guarantee for every sum of at least M sites)"))
    explained_variance: bool = parameter(False, flag(
        "one more round: every site releases the Rayleigh quotients of the final basis and "
        "its trace (k + 1 numbers, planned within the same budget), giving the explained "
        "variance and its ratio"))
    start: str = parameter("", flag(
        "a public start basis (.npy, d x k orthonormal, e.g. fedpca data cohort's start.npy, "
        "computed from public data only): the run starts from it instead of its private "
        "initialisation, T releases instead of T + 1; every site holds the same file",
        metavar="FILE"))
    failure_rate: float = parameter(0.0, flag(
        "simulate faults: each site fails each round with this probability"))

    def __post_init__(self) -> None:
        super().__post_init__()
        require_split(self.samples, self.sites)
        for name in ("dim", "k", "sparsity", "s_hat"):
            require_positive_int(getattr(self, name), name)
        for names in SHAPE_RELATIONS:
            require_ordered({name: getattr(self, name) for name in names})
        # secure_min_sites is the guaranteed minimum m of sites in every secure sum.
        require_site_count(self.secure_min_sites, "secure_min_sites", self.sites, minimum=2)
        if self.secure_min_sites is not None and not self.discrete:
            raise ConfigurationError(CONTINUOUS_SHARES_RETIRED)
        require_group_size(self.secure_group_size, self.secure_min_sites, self.sites)
        if not 0.0 <= self.failure_rate < 1.0:
            raise ParameterError("{failure_rate} must be in [0, 1)",
                                 {"failure_rate": self.failure_rate})
        self.model()
        if self.start:  # every process reads the same file, wherever it runs
            object.__setattr__(self, "start", str(Path(self.start).expanduser().resolve()))
        start = self.policy().start
        if start is not None:
            start.require_shape(self.dim, self.k)

    def model(self) -> SparseSpikedModel:
        """The synthetic model (public)."""
        return SparseSpikedModel(
            dim=self.dim, k=self.k, sparsity=self.sparsity, seed=self.data_seed
        )

    def start_basis(self) -> StartBasis | None:
        """The public start basis the run starts from (``None``: its private
        initialisation)."""
        return load_start_basis(self.start) if self.start else None

    def secure_sums(self, max_records: int | None = None) -> DPSSecureSums | None:
        """The run's public secure sums (discrete noise only): over every site, each of at
        most ``max_records`` records (default: the largest site's count), the rotation
        seeded by the run's seed as in :func:`~fedpca.algorithms.dps_pca.run_dps_pca`."""
        if not self.discrete:
            return None
        return secure_sums(self.policy(), self.dim, self.k, max_records or self.largest_site(),
                           self.sites, public_seed(self.seed))

    @property
    def explains_variance(self) -> bool:
        """Only with the explained variance's release."""
        return self.explained_variance

    @property
    def flower_rounds(self) -> int:
        """The initialisation (none from a public start), ``T`` power rounds and the
        explained variance's round."""
        return self.rounds + int(not self.start) + int(self.explained_variance)

    def describe(self) -> str:
        """Sites, records, shape and rounds."""
        start = self.start_basis()
        return (f"DPS-PCA: {self.sites} sites, n={self.samples}, d={self.dim}, k={self.k}, "
                f"s_hat={self.s_hat}, T={self.rounds}"
                + ("" if start is None else f", public start {start.digest[:12]}"))

    def report(self, result: PCAResult) -> list[str]:
        """The summary of the result."""
        from fedpca.report import result_summary

        return [result_summary(result)]

    def server_plan(self, app_config: Mapping[str, Any] | None = None) -> ServerPlan:
        """DPS-PCA's server; it measures the distance to the model's truth where the truth
        is public (a simulation, or the App on the synthetic model). In the App, the run_config's
        ``start-sha256`` must name the server's start (:func:`require_start_named`)."""
        start = self.start_basis()
        if app_config is not None:
            require_start_named(app_config, start)
        max_records = self.max_records(app_config)
        sums = self.secure_sums(max_records)
        public = app_config is None or app_config.get("dataset") == SYNTHETIC
        server = DPSPCAServer(
            dim=self.dim, k=self.k, s_hat=self.s_hat, rounds=self.rounds, seed=self.seed,
            evaluate_fn=self.distance_to_truth if public else None, secure=sums,
            explained_variance=self.explained_variance, start=start,
        )
        return ServerPlan(server, privacy_record(self.policy(), sums))

    def largest_site(self) -> int:
        """The largest site's record count (public; a simulation's bound on the record count
        of its secure sums' members)."""
        return site_size(self.samples, self.sites, 0)

    def privacy(self) -> dict[str, Any]:
        """The guarantee each site gives in this scenario."""
        return privacy_record(self.policy(), self.secure_sums())

    def site_data(self, site: int) -> np.ndarray:
        """Site ``site``'s raw records (regenerated from the seeds on every call)."""
        self.check_site(site)
        return site_data(self.model(), self.samples, self.sites, site)

    def prepared_site(self, site: int) -> SiteData:
        """Site ``site``'s validated, clipped records, cached per process: a virtual site
        creates its data once, not once per round."""
        self.check_site(site)
        return prepared_site(self.model(), self.samples, self.sites, site, self.clip_norm)

    def all_site_data(self) -> list[np.ndarray]:
        """Every site's records, in site order."""
        return [self.site_data(i) for i in range(self.sites)]

    def distance_to_truth(self, Q: np.ndarray) -> dict[str, float]:
        """``{"distance": ||sin Theta(Q, Q*)||_F}`` against the model's sparse eigenspace."""
        return {"distance": subspace_distance(Q, self.model().truth)}


def require_start_named(app_config: Mapping[str, Any], start: StartBasis | None) -> None:
    """Refuse an App run whose run_config ``start-sha256`` is not the SHA-256 of the
    server's start file (run_config ``start``; ``""`` for none): the sites plan the run from
    that name, the server from its file, and they must agree before any release."""
    named = str(app_config.get(START_HASH, ""))
    if named == start_name(start):
        return
    server = "no file" if start is None else f"{start.path}, of SHA-256 {start.digest}"
    fix = (f"set start = \"FILE\" (the server's copy of that start), or {START_HASH} = \"\""
           if start is None else f"set {START_HASH} = \"{start.digest}\"")
    raise ConfigurationError(
        f"run_config {START_HASH} = {named!r} and start names {server}; the sites plan the "
        f"run from {START_HASH} and the server from its file: {fix}")

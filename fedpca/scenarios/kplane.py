"""A SuLQ k-plane run on paper 003's union of subspaces: every parameter in one place.

No Flower import. The same scenario drives the CLI simulation and the reference run, so
both see the same data, policy and seeds. The ``samples`` points of
:class:`~fedpca.data.subspaces.UnionOfSubspaces` (assigned to subspaces at random) are cut
into ``sites`` consecutive blocks as evenly as possible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.kplane import (
    KPlaneServer,
    require_subspace_dim,
    secure_sum_for,
)
from fedpca.algorithms.privacy_record import privacy_record
from fedpca.algorithms.secure_sum import SecureSum, public_seed
from fedpca.clustering.metrics import (
    kmeans_subspace_cost,
    wasserstein_subspace_distance,
)
from fedpca.data.site_cache import bounded_site_cache
from fedpca.data.subspaces import UnionOfSubspaces
from fedpca.data.synthetic import require_split, site_size, split_sizes
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_site_count
from fedpca.results import ClusteringResult
from fedpca.scenarios.base import (
    DIM,
    SAMPLES,
    SECURE_MIN_SITES,
    SYNTHETIC,
    Scenario,
    components,
    flag,
    parameter,
)

from fedpca.scenarios.plans import ServerPlan


@dataclass(frozen=True)
class KPlaneScenario(Scenario):
    """SuLQ k-plane over ``sites`` sites holding ``samples`` synthetic points in total.

    Defaults: the first Fig. 2 setting of "Differentially Private Subspace Clustering"
    (``n=5000, d=5, k=3, q=3, sigma=0.01``). ``seed`` also seeds the server's public
    initial subspaces.
    """

    ALGORITHM: ClassVar[str] = "sulq-kplane"
    HAS_LOADINGS: ClassVar[bool] = False
    COMPONENTS: ClassVar[str] = "clusters"

    dim: int = parameter(5, DIM)
    samples: int = parameter(5000, SAMPLES)
    clusters: int = parameter(3, flag("number of subspaces k", flags=("--clusters", "--k"),
                                      type=components))
    subspace_dim: int = parameter(3, flag("dimension q of each subspace"))
    noise: float = parameter(0.01, flag(
        "std of the Gaussian noise per coordinate of the synthetic points"))
    rounds: int = parameter(10, flag("k-plane rounds T"))
    secure_min_sites: int | None = parameter(None, SECURE_MIN_SITES)

    def __post_init__(self) -> None:
        super().__post_init__()
        require_split(self.samples, self.sites)
        require_site_count(self.secure_min_sites, "secure_min_sites", self.sites, minimum=2)
        self.model()
        require_subspace_dim(self.subspace_dim, self.dim)
        self.policy()

    def model(self) -> UnionOfSubspaces:
        """The synthetic union of subspaces (public)."""
        return UnionOfSubspaces(
            n=self.samples, dim=self.dim, clusters=self.clusters,
            subspace_dim=self.subspace_dim, noise=self.noise, seed=self.data_seed,
        )

    def secure_sum(self, max_records: int | None = None) -> tuple[SecureSum, GridChoice] | None:
        """Every round's public secure sum (``secure_min_sites`` only): over every site,
        each of at most ``max_records`` records (default: the largest site's count), the
        rotation seeded by the run's seed as in
        :func:`~fedpca.algorithms.kplane.run_sulq_kplane`."""
        if self.secure_min_sites is None:
            return None
        return secure_sum_for(self.policy(), self.dim, self.clusters,
                              max_records or site_size(self.samples, self.sites, 0), self.sites,
                              public_seed(self.seed))

    def privacy(self, secure: tuple[SecureSum, GridChoice] | None = None) -> dict[str, Any]:
        """The guarantee each site gives in this scenario (``secure``: the run's secure
        sum, with ``secure_min_sites``)."""
        policy, secure = self.policy(), secure or self.secure_sum()
        grids = () if secure is None else [secure[1]] * policy.releases
        return privacy_record(self.ALGORITHM, policy, grids)

    def server_plan(self, app_config: Mapping[str, Any] | None = None) -> ServerPlan:
        """SuLQ k-plane's server; it records the cost and the distance to the planted
        subspaces where they are public (a simulation, or the App on the synthetic data)."""
        secure = self.secure_sum(self.max_records(app_config))
        public = app_config is None or app_config.get("dataset") == SYNTHETIC
        server = KPlaneServer(
            dim=self.dim, clusters=self.clusters, subspace_dim=self.subspace_dim,
            rounds=self.rounds, clip_norm=self.clip_norm, seed=self.seed,
            evaluate_fn=self.evaluate if public else None, secure=secure,
        )
        return ServerPlan(server, self.privacy(secure))

    @property
    def flower_rounds(self) -> int:
        """One Flower round per k-plane round."""
        return self.rounds

    def describe(self) -> str:
        """Sites, points, shape, noise and rounds."""
        return (f"SuLQ k-plane: {self.sites} sites, n={self.samples}, d={self.dim}, "
                f"k={self.clusters}, q={self.subspace_dim}, noise={self.noise}, T={self.rounds}")

    def notes(self, privacy: dict[str, Any]) -> list[str]:
        """The trust model and the public initialisation."""
        return [(f"trust model: {privacy['trust_model']}; initialisation: "
                f"{privacy['initialisation']}")]

    def report(self, result: ClusteringResult) -> list[str]:
        """The summary of the result's run record."""
        from fedpca.report import record_summary
        from fedpca.run_record import run_record

        return [record_summary(run_record(result))]

    def site_data(self, site: int) -> np.ndarray:
        """Site ``site``'s points (read-only; the cached sample's block)."""
        self.check_site(site)
        return _site_block(self.model(), self.sites, site)

    def prepared_site(self, site: int) -> SiteData:
        """Site ``site``'s validated, clipped records, cached per process."""
        self.check_site(site)
        return _prepared_site(self.model(), self.sites, site, self.clip_norm)

    def all_site_data(self) -> list[np.ndarray]:
        """Every site's points, in site order."""
        return [self.site_data(i) for i in range(self.sites)]

    def evaluate(self, bases: list[np.ndarray]) -> dict[str, float]:
        """``cost`` (eq. 3 on all the points) and ``wasserstein_distance`` (eq. 2 to the
        planted subspaces). Simulation only: it sees every site's data."""
        model = self.model()
        return {
            "cost": kmeans_subspace_cost(model.sample()[0], bases),
            "wasserstein_distance": wasserstein_subspace_distance(bases, model.bases),
        }


def _site_block(model: UnionOfSubspaces, sites: int, site: int) -> np.ndarray:
    bounds = np.cumsum([0, *split_sizes(model.n, sites)])
    return model.sample()[0][bounds[site]:bounds[site + 1]]


@bounded_site_cache
def _prepared_site(model: UnionOfSubspaces, sites: int, site: int, clip_norm: float) -> SiteData:
    return SiteData.prepare(_site_block(model, sites, site), clip_norm, str(site))

"""A SuLQ k-plane run on paper 003's union of subspaces: every parameter in one place.

No Flower import. The same scenario drives the CLI simulation and the reference run, so
both see the same data, policy and seeds. The ``samples`` points of
:class:`~fedpca.data.subspaces.UnionOfSubspaces` (assigned to subspaces at random) are cut
into ``sites`` consecutive blocks as evenly as possible.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.kplane import KPlanePolicy, privacy_record, require_subspace_dim
from fedpca.clustering.metrics import (
    kmeans_subspace_cost,
    wasserstein_subspace_distance,
)
from fedpca.data.subspaces import UnionOfSubspaces
from fedpca.data.synthetic import split_sizes
from fedpca.errors import ConfigurationError
from fedpca.privacy.site_data import SiteData
from fedpca.privacy.validation import require_site_count
from fedpca.run_config import RunConfigFields
from fedpca.scenarios.dps_pca import NO_SEED


@dataclass(frozen=True)
class KPlaneScenario(RunConfigFields):
    """SuLQ k-plane over ``sites`` sites holding ``samples`` synthetic points in total.

    Attributes mirror the CLI flags (defaults: paper 003's first Fig. 2 setting, ``n=5000,
    d=5, k=3, q=3, sigma=0.01``). ``seed`` seeds the noise and the server's public
    initialisation (``None``: OS randomness, the only choice for production), ``data_seed``
    the subspaces and samples. ``min_sites`` (default: all) sites must answer every round.
    """

    RUN_CONFIG_NONE: ClassVar[dict[str, Any]] = {"seed": NO_SEED, "min_sites": 0}
    INT_FIELDS: ClassVar[frozenset[str]] = frozenset({
        "sites", "dim", "samples", "clusters", "subspace_dim", "rounds", "seed", "data_seed",
        "min_sites",
    })

    sites: int = 10
    dim: int = 5
    samples: int = 5000
    clusters: int = 3
    subspace_dim: int = 3
    noise: float = 0.01
    rounds: int = 10
    epsilon: float = 1.0
    delta: float = 1e-5
    accounting: str = "pld"
    clip_norm: float = 1.0
    seed: int | None = None
    data_seed: int = 0
    min_sites: int | None = None

    def __post_init__(self) -> None:
        split_sizes(self.samples, self.sites)
        self.model()
        require_subspace_dim(self.subspace_dim, self.dim)
        self.policy()
        require_site_count(self.min_sites, "min_sites", self.sites)

    def model(self) -> UnionOfSubspaces:
        """The synthetic union of subspaces (public)."""
        return UnionOfSubspaces(
            n=self.samples, dim=self.dim, clusters=self.clusters,
            subspace_dim=self.subspace_dim, noise=self.noise, seed=self.data_seed,
        )

    def policy(self) -> KPlanePolicy:
        """Every site's privacy policy in this scenario."""
        return KPlanePolicy(
            epsilon=self.epsilon, delta=self.delta, rounds=self.rounds,
            accounting=self.accounting, clip_norm=self.clip_norm,
        )

    def privacy(self) -> dict[str, Any]:
        """The guarantee each site gives in this scenario."""
        return privacy_record(self.policy())

    def required_sites(self) -> int:
        """Sites every round needs: ``min_sites``, all by default."""
        return self.min_sites or self.sites

    def site_data(self, site: int) -> np.ndarray:
        """Site ``site``'s points (read-only; the cached sample's block)."""
        if not 0 <= site < self.sites:
            raise ConfigurationError(f"site {site} is outside 0..{self.sites - 1}")
        return _site_block(self.model(), self.sites, site)

    def prepared_site(self, site: int) -> SiteData:
        """Site ``site``'s validated, clipped records, cached per process."""
        if not 0 <= site < self.sites:
            raise ConfigurationError(f"site {site} is outside 0..{self.sites - 1}")
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


@functools.lru_cache(maxsize=None)
def _prepared_site(model: UnionOfSubspaces, sites: int, site: int, clip_norm: float) -> SiteData:
    return SiteData.prepare(_site_block(model, sites, site), clip_norm, str(site))

"""A DPS-PCA run on the synthetic model: every parameter in one place (no Flower import).

The same scenario drives the CLI simulation, the Flower App (from ``run_config``) and the
reference run, so all three see the same data, policy and seeds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.dps_pca import SitePolicy, privacy_record
from fedpca.data.synthetic import SparseSpikedModel, site_data, split_sizes
from fedpca.errors import ConfigurationError, ParameterError
from fedpca.linalg.subspace import subspace_distance
from fedpca.privacy.site_data import SiteData
from fedpca.privacy.validation import (
    require_ordered,
    require_positive_int,
    require_site_count,
)
from fedpca.run_config import RunConfigFields

#: ``run_config`` value meaning "no seed" (run_config cannot hold None).
NO_SEED = -1
#: The shape parameters' relations, checked in this order: the simplest first, so that an
#: error names the parameters a user set (``k <= dim``) before any left at its default.
SHAPE_RELATIONS = (("k", "dim"), ("sparsity", "dim"), ("s_hat", "dim"), ("k", "sparsity"),
                   ("k", "s_hat"))


@dataclass(frozen=True)
class DPSPCAScenario(RunConfigFields):
    """DPS-PCA over ``sites`` sites holding ``samples`` synthetic records in total.

    Attributes mirror the CLI flags; ``seed`` seeds the noise and the server's public
    randomness (``None``: OS randomness, the only choice for production), ``data_seed``
    the synthetic model and samples. ``failure_rate`` (simulation only) makes each site
    fail each round with that probability before it releases anything.
    """

    RUN_CONFIG_NONE: ClassVar[dict[str, Any]] = {
        "seed": NO_SEED, "min_sites": 0, "secure_min_sites": 0,
    }
    INT_FIELDS: ClassVar[frozenset[str]] = frozenset({
        "sites", "dim", "samples", "k", "sparsity", "s_hat", "rounds", "data_seed", "seed",
        "min_sites", "secure_min_sites",
    })

    sites: int = 100
    dim: int = 200
    samples: int = 200_000
    k: int = 3
    sparsity: int = 10
    s_hat: int = 20
    rounds: int = 10
    epsilon: float = 1.0
    delta: float = 1e-5
    accounting: str = "pld"
    clip_norm: float = 1.0
    seed: int | None = None
    data_seed: int = 0
    min_sites: int | None = None
    secure_min_sites: int | None = None
    failure_rate: float = 0.0

    def __post_init__(self) -> None:
        split_sizes(self.samples, self.sites)
        for name in ("dim", "k", "sparsity", "s_hat"):
            require_positive_int(getattr(self, name), name)
        for names in SHAPE_RELATIONS:
            require_ordered({name: getattr(self, name) for name in names})
        # secure_min_sites is the guaranteed minimum m of sites in every secure sum.
        require_site_count(self.secure_min_sites, "secure_min_sites", self.sites, minimum=2)
        if not 0.0 <= self.failure_rate < 1.0:
            raise ParameterError("{failure_rate} must be in [0, 1)",
                                 {"failure_rate": self.failure_rate})
        self.model()
        self.policy()

    def model(self) -> SparseSpikedModel:
        """The synthetic model (public)."""
        return SparseSpikedModel(
            dim=self.dim, k=self.k, sparsity=self.sparsity, seed=self.data_seed
        )

    def policy(self) -> SitePolicy:
        """Every site's privacy policy in this scenario."""
        return SitePolicy(
            epsilon=self.epsilon, delta=self.delta, rounds=self.rounds,
            accounting=self.accounting, clip_norm=self.clip_norm,
            secure_min_sites=self.secure_min_sites,
        )

    def required_sites(self) -> int:
        """Sites every round needs: ``min_sites`` (all by default), at least ``m``."""
        return max(self.min_sites or self.sites, self.secure_min_sites or 0)

    def largest_site(self) -> int:
        """The largest site's record count (public; SecAgg+'s ``max_weight``)."""
        return max(split_sizes(self.samples, self.sites))

    def privacy(self) -> dict[str, Any]:
        """The guarantee each site gives in this scenario."""
        return privacy_record(self.policy())

    def site_data(self, site: int) -> np.ndarray:
        """Site ``site``'s raw records (regenerated from the seeds on every call)."""
        if not 0 <= site < self.sites:
            raise ConfigurationError(f"site {site} is outside 0..{self.sites - 1}")
        return site_data(self.model(), self.samples, self.sites, site)

    def prepared_site(self, site: int) -> SiteData:
        """Site ``site``'s validated, clipped records, cached per process: a virtual site
        creates its data once, not once per round."""
        if not 0 <= site < self.sites:
            raise ConfigurationError(f"site {site} is outside 0..{self.sites - 1}")
        return _prepared_site(self.model(), self.samples, self.sites, site, self.clip_norm)

    def all_site_data(self) -> list[np.ndarray]:
        """Every site's records, in site order."""
        return [self.site_data(i) for i in range(self.sites)]

    def distance_to_truth(self, Q: np.ndarray) -> dict[str, float]:
        """``{"distance": ||sin Theta(Q, Q*)||_F}`` against the model's sparse eigenspace."""
        return {"distance": subspace_distance(Q, self.model().truth)}



@functools.lru_cache(maxsize=None)
def _prepared_site(
    model: SparseSpikedModel, samples: int, sites: int, site: int, clip_norm: float
) -> SiteData:
    return SiteData.prepare(site_data(model, samples, sites, site), clip_norm, str(site))

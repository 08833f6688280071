"""A DPdisPCA run: every parameter in one place (no Flower import).

The same scenario drives the CLI simulation and the reference run, so both see the same data,
policy and seeds. ``dataset`` is ``"synthetic"`` (:class:`DecayingSpectrumModel`, ``samples``
records split evenly over the sites) or a public data set of :mod:`fedpca.data.datasets`
(all its records, partitioned i.i.d. or, with ``alpha``, by a Dirichlet label skew); build a
data-set scenario with :meth:`DPdisPCAScenario.for_dataset`, which reads ``dim`` and
``samples`` from the data.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.dpdis_pca import (
    VARIANT_FACTOR,
    WEIGHTING_UNIFORM,
    DPdisPCAPolicy,
    DPdisPCAServer,
    default_r,
    pooled_second_moment,
    privacy_record,
)
from fedpca.data.datasets import DATASET_NAMES
from fedpca.data.dpdis_model import DecayingSpectrumModel
from fedpca.data.federated import dataset_pooled, dataset_site
from fedpca.data.synthetic import split_sizes
from fedpca.errors import ConfigurationError, InvalidDataError, ParameterError
from fedpca.privacy.site_data import SiteData
from fedpca.privacy.validation import require_choice, require_finite_positive
from fedpca.run_config import RunConfigFields
from fedpca.scenarios.dps_pca import NO_SEED

SYNTHETIC = "synthetic"
#: ``"synthetic"`` and the names :func:`fedpca.data.datasets.load_dataset` knows.
DATASETS = (SYNTHETIC, *DATASET_NAMES)
#: Fields that may be None, and the ``run_config`` value standing for None (it holds no None).


@dataclass(frozen=True)
class DPdisPCAScenario(RunConfigFields):
    """DPdisPCA over ``sites`` sites.

    Attributes mirror the CLI flags. ``r`` is the columns of each ``P_s`` (``None``:
    ``min(2k, dim)``); ``weighting`` ``"uniform"`` or ``"samples"``; ``variant`` ``"factor"``
    (send ``P_s``) or ``"full"`` (send ``A^_s``). ``seed`` seeds the noise (``None``: OS
    randomness, the only choice for production), ``data_seed`` the synthetic model and the
    partition of a data set. ``alpha``: Dirichlet concentration of the label skew (data sets
    only; ``None``: i.i.d. split). ``min_sites``: sites that must answer (``None``: all).
    """

    RUN_CONFIG_NONE: ClassVar[dict[str, Any]] = {
        "r": 0, "seed": NO_SEED, "alpha": 0.0, "min_sites": 0,
    }
    INT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"sites", "dim", "samples", "k", "r", "seed", "data_seed", "min_sites"}
    )

    dataset: str = SYNTHETIC
    sites: int = 10
    dim: int = 200
    samples: int = 20_000
    k: int = 50
    r: int | None = None
    weighting: str = WEIGHTING_UNIFORM
    variant: str = VARIANT_FACTOR
    epsilon: float = 1.0
    delta: float = 1e-5
    accounting: str = "pld"
    clip_norm: float = 1.0
    seed: int | None = None
    data_seed: int = 0
    alpha: float | None = None
    min_sites: int | None = None

    def __post_init__(self) -> None:
        require_choice(self.dataset, "dataset", DATASETS)
        split_sizes(self.samples, self.sites)
        if self.alpha is not None:
            if self.dataset == SYNTHETIC:
                raise ParameterError(
                    "{alpha} (Dirichlet label skew) needs a labelled data set, not the "
                    "synthetic model", {"alpha": self.alpha, "dataset": self.dataset},
                    hint="drop {alpha} or choose a data set as {dataset}",
                )
            require_finite_positive(self.alpha, "alpha")
        self.policy()
        server = self.server()
        if server.r is not None and self.sites * server.r < self.k:
            raise ParameterError(
                "need {sites} x {r} >= {k}: the merged A_c has rank at most sites x r",
                {"sites": self.sites, "r": server.r, "k": self.k},
                hint=f"use {{r}} >= {-(-self.k // self.sites)}",
            )

    @classmethod
    def for_dataset(cls, dataset: str, **options: Any) -> DPdisPCAScenario:
        """A scenario over every record of ``dataset``: ``dim`` and ``samples`` from the data."""
        require_choice(dataset, "dataset", DATASETS)
        if dataset == SYNTHETIC:
            return cls(**options)
        X = dataset_pooled(dataset)
        return cls(dataset=dataset, dim=int(X.shape[1]), samples=int(X.shape[0]), **options)

    @property
    def resolved_r(self) -> int | None:
        """The ``r`` sites are asked for (``None`` for the full variant)."""
        if self.variant != VARIANT_FACTOR:
            return None
        return default_r(self.k, self.dim) if self.r is None else self.r

    def model(self) -> DecayingSpectrumModel:
        """The synthetic model (public)."""
        return DecayingSpectrumModel(dim=self.dim, seed=self.data_seed)

    def policy(self) -> DPdisPCAPolicy:
        """Every site's privacy policy in this scenario."""
        return DPdisPCAPolicy(
            epsilon=self.epsilon, delta=self.delta, accounting=self.accounting,
            clip_norm=self.clip_norm,
        )

    def server(self, evaluation: np.ndarray | None = None) -> DPdisPCAServer:
        """The aggregator this scenario describes."""
        return DPdisPCAServer(
            self.dim, self.k, self.resolved_r, self.weighting, self.variant, evaluation
        )

    def prepared_site(self, site: int) -> SiteData:
        """Site ``site``'s validated, clipped records, cached per process."""
        if not 0 <= site < self.sites:
            raise ConfigurationError(f"site {site} is outside 0..{self.sites - 1}")
        if self.dataset == SYNTHETIC:
            return _synthetic_site(self.model(), self.samples, self.sites, site, self.clip_norm)
        data = dataset_site(
            self.dataset, self.sites, site, seed=self.data_seed, clip_norm=self.clip_norm,
            alpha=self.alpha,
        )
        if data.X.shape[1] != self.dim:
            raise InvalidDataError(
                f"{self.dataset} has {data.X.shape[1]} features but the scenario says dim="
                f"{self.dim}; build it with DPdisPCAScenario.for_dataset({self.dataset!r})"
            )
        return data

    def all_prepared_sites(self) -> list[SiteData]:
        """Every site's prepared records, in site order."""
        return [self.prepared_site(i) for i in range(self.sites)]

    def privacy(self) -> dict[str, Any]:
        """The guarantee each site gives in this scenario."""
        return privacy_record(self.policy(), [s.X.shape[0] for s in self.all_prepared_sites()])

    def evaluation(self) -> np.ndarray:
        """The pooled second-moment matrix ``q_o`` is measured against (simulation only)."""
        return pooled_second_moment([s.X for s in self.all_prepared_sites()])

    def holds_sites(self, site_records: Mapping[str, int]) -> bool:
        """Whether ``site_records`` (each answering site's name and record count) are
        exactly this scenario's partitions ``"0" .. "sites-1"``: then the sites answered from
        data this process can rebuild (synthetic or public), and an evaluation is valid."""
        expected = {str(i): self.prepared_site(i).X.shape[0] for i in range(self.sites)}
        return dict(site_records) == expected



@functools.lru_cache(maxsize=None)
def _synthetic_site(
    model: DecayingSpectrumModel, samples: int, sites: int, site: int, clip_norm: float
) -> SiteData:
    X = model.sample(split_sizes(samples, sites)[site], stream=site)
    return SiteData.prepare(X, clip_norm, str(site))

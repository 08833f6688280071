"""The data a scenario's sites hold (its ``dataset``): the paper's synthetic model, each real
site's own file (a real site's policy names it), or a public data set that
:mod:`fedpca.data.datasets` loads and :mod:`fedpca.data.federated` partitions over the sites.
"""

from __future__ import annotations

from typing import Protocol

from fedpca.data.datasets import DATASET_NAMES
from fedpca.data.federated import dataset_site
from fedpca.data.synthetic import SampledModel, prepared_site
from fedpca.dp.site_data import SiteData
from fedpca.scenarios.base import SITE_FILES, SYNTHETIC, no_site_files

#: Every ``dataset`` a scenario of a named data set may take: :data:`SYNTHETIC`,
#: :data:`~fedpca.scenarios.base.SITE_FILES` and the names
#: :func:`fedpca.data.datasets.load_dataset` knows.
DATASETS = (SYNTHETIC, SITE_FILES, *DATASET_NAMES)


class DatasetScenario(Protocol):
    """A scenario whose sites hold one of :data:`DATASETS` (its ``dataset``), and what its
    sites' records are made from."""

    dataset: str
    sites: int
    samples: int
    clip_norm: float
    data_seed: int
    alpha: float | None

    def check_site(self, site: int) -> None: ...

    def model(self) -> SampledModel: ...


def scenario_site(scenario: DatasetScenario, site: int) -> SiteData:
    """Site ``site``'s validated, clipped records in ``scenario``, cached per process: its
    share of the synthetic model's ``samples``, or its partition of the named data set (IID,
    or Dirichlet label skew ``alpha``, drawn from ``data_seed``); refused for
    :data:`~fedpca.scenarios.base.SITE_FILES`, whose records only a real site holds."""
    scenario.check_site(site)
    if scenario.dataset == SITE_FILES:
        raise no_site_files(site)
    if scenario.dataset == SYNTHETIC:
        return prepared_site(scenario.model(), scenario.samples, scenario.sites, site,
                             scenario.clip_norm)
    return dataset_site(scenario.dataset, scenario.sites, site, seed=scenario.data_seed,
                        clip_norm=scenario.clip_norm, alpha=scenario.alpha)

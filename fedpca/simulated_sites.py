"""Simulated sites: partition ``p`` of a scenario's data, one table of a centred run, or one
PLINK fileset of a genotype run.

A simulated site answers as a real one does (:class:`~fedpca.site.service.SiteService`),
with the run_config's policy and seed instead of its own, and an in-memory ledger that the
run's state keeps between messages. Its records are rebuilt from the scenario's public
seeds, once per process (the scenario's cache and, across processes, the run's store of
prepared sites, :mod:`fedpca.data.site_store`); a simulation whose records would not fit in
this machine's memory is refused before any is generated.

The sources stand above both :mod:`fedpca.site` (whose :class:`~fedpca.site.service.SiteService`
they feed) and :mod:`fedpca.scenarios` (whose data and policy they answer with), so that a
real site's code imports no scenario; they import no Flower.

Privacy guarantee: the scenario's policy's (unit: one record of the partition,
replace-one); the run's in-memory ledger refuses a release past the policy's plan.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from fedpca.algorithms.centred_rounds import CentredSite
from fedpca.algorithms.genotype_run import genotype_site
from fedpca.algorithms.centring import CentringSite
from fedpca.algorithms.site import PrivateSite
from fedpca.algorithms.specs import spec
from fedpca.audit.malicious import Attack, malicious_site_class
from fedpca.data.memory import require_simulation_memory
from fedpca.errors import ConfigurationError, FedPCAError
from fedpca.scenarios.base import Scenario
from fedpca.scenarios.genotypes import GenotypeRun
from fedpca.scenarios.tables import TableRun
from fedpca.secure.identity import SecureIdentity, simulation_identity
from fedpca.site.ready import SiteReady
from fedpca.site.service import SiteSource

logger = logging.getLogger(__name__)

#: node_config keys of a simulated partition (Flower's simulation sets them).
PARTITION, PARTITIONS = "partition-id", "num-partitions"


class PartitionSource(SiteSource):
    """Partition ``partition`` of ``partitions`` of ``scenario``'s data, answering with the
    scenario's algorithm's site; with an ``attack`` (experiments only), site
    :data:`~fedpca.audit.malicious.MALICIOUS_SITE` answers maliciously
    (:func:`~fedpca.audit.malicious.malicious_site_class`)."""

    def __init__(self, scenario: Scenario, partition: int, partitions: int,
                 attack: Attack | None = None) -> None:
        self.scenario, self.partition, self.partitions = scenario, partition, partitions
        self.attack = attack

    def open(self) -> PrivateSite:
        """The algorithm's site over the partition's prepared records, under the scenario's
        policy and seed."""
        scenario = self.scenario
        require_simulation_memory(scenario.samples, scenario.dim, scenario.sites)
        site_cls = spec(scenario.ALGORITHM).site_class()
        if self.attack is not None:
            site_cls = malicious_site_class(site_cls, self.attack, scenario.sites)
        return site_cls(scenario.prepared_site(self.partition), scenario.policy(),
                        site=str(self.partition), seed=scenario.seed)

    def identity(self) -> SecureIdentity | None:
        """Its identity for the scenario's secure sums (keys derived from public labels:
        :func:`~fedpca.secure.identity.simulation_identity`), or ``None`` without them."""
        min_sites = getattr(self.scenario, "secure_min_sites", None)
        if min_sites is None:
            return None
        return simulation_identity(self.partition, self.partitions, min_sites,
                                   self.scenario.flower_rounds)


class TableSource(SiteSource):
    """Table ``partition`` of ``partitions`` of a centred run over tables: the moments
    round, then the algorithm's rounds on its centred (standardised) rows; ``rounds``: the
    run's rounds (its secure sums' count)."""

    def __init__(self, run: TableRun, partition: int, partitions: int, rounds: int) -> None:
        self.run, self.partition, self.partitions, self.rounds = run, partition, partitions, rounds

    def open(self) -> PrivateSite:
        """The centred site over the table's rows, under the run's policy."""
        run = self.run
        centring = CentringSite(run.site_rows(self.partition), run.loaded_contract.bounds,
                                run.policy(), site=str(self.partition), seed=run.scenario.seed)
        return CentredSite(centring, spec(run.scenario.ALGORITHM).site_class())

    def identity(self) -> SecureIdentity | None:
        """Its identity for the run's secure sums (``None`` without them)."""
        min_sites = self.run.policy().secure_min_sites
        if min_sites is None:
            return None
        return simulation_identity(self.partition, self.partitions, min_sites, self.rounds)


class GenotypeSource(SiteSource):
    """Fileset ``partition`` of ``partitions`` of a genotype run: DPS-PCA's site over its
    genotype rows, streamed from the ``.bed`` (never held in float), under the run's
    policy (its clip norm the panel's row norm)."""

    def __init__(self, run: GenotypeRun, partition: int, partitions: int) -> None:
        self.run, self.partition, self.partitions = run, partition, partitions

    def open(self) -> PrivateSite | CentredSite:
        """DPS-PCA's site over the fileset's rows (a private panel's: the frequencies'
        release first, :func:`~fedpca.algorithms.genotype_run.genotype_site`)."""
        scenario, rows = self.run.scenario, self.run.site_rows(self.partition)
        if self.run.private:
            return genotype_site(rows, self.run.policy(), scenario.start_basis(),
                                 site=str(self.partition), seed=scenario.seed)
        return spec(scenario.ALGORITHM).site_class()(
            rows, scenario.policy(), site=str(self.partition), seed=scenario.seed)

    def identity(self) -> SecureIdentity | None:
        """Its identity for the run's secure sums (``None`` without them)."""
        min_sites = self.run.scenario.secure_min_sites
        if min_sites is None:
            return None
        return simulation_identity(self.partition, self.partitions, min_sites,
                                   self.run.flower_rounds)


def genotype_source(run: GenotypeRun, partition: int, partitions: int) -> GenotypeSource:
    """Partition ``partition``'s fileset of ``run``, refused unless the run names one
    fileset per partition."""
    if partitions != run.sites:
        raise ConfigurationError(f"the run names {run.sites} PLINK prefixes for {partitions} "
                                 "partitions: give one prefix per partition")
    return GenotypeSource(run, partition, partitions)


class SimulatedSiteFailure(FedPCAError):
    """A virtual site failed on purpose (a scenario's ``failure_rate``): it released
    nothing."""


class FlakySource:
    """``source``, failing each round's request with probability ``rate`` before anything
    is released (a simulated site that dropped out of the round); its readiness answer and
    everything else are ``source``'s."""

    def __init__(self, source: PartitionSource, rate: float) -> None:
        self.source, self.rate = source, rate

    def site(self) -> PrivateSite:
        """The source's site, or the simulated failure."""
        if np.random.default_rng().random() < self.rate:
            raise SimulatedSiteFailure(
                f"site {self.source.partition}: simulated failure (nothing released)")
        return self.source.site()

    def ready(self) -> SiteReady:
        """The source's site's answer (readiness never fails on purpose)."""
        site = self.source.site()
        site.require_run()
        return SiteReady(site.site)

    def __getattr__(self, name: str) -> Any:
        """Everything else is the source's."""
        return getattr(self.source, name)


def partition_of(node_config: dict, centred: bool = False) -> tuple[int, int]:
    """The partition and the number of partitions a simulated node holds; refuses a node
    that is neither a real site nor a simulated partition, and a centred run at a partition
    (it holds no table)."""
    if PARTITION not in node_config:
        raise ConfigurationError(
            "this node has no site policy (node_config policy=FILE: a real site) and no "
            "partition-id (a simulated site); a real site's operator starts its SuperNode "
            "with --node-config 'policy=\"/path/policy.toml\"'"
        )
    if centred:
        raise ConfigurationError(
            "a simulated partition holds no table: a centred run (run_config centring) needs "
            "real sites with a data contract; simulate one with fedpca simulate ALGORITHM "
            "--tables ... --contract ...")
    return int(node_config[PARTITION]), int(node_config.get(PARTITIONS, 1))

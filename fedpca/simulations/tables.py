"""Simulate a centred run over tables with Flower: one virtual site per table, one contract.

The moments round, then the algorithm's rounds on the centred (standardised) rows
(:mod:`fedpca.strategies.centring`, :mod:`fedpca.clients.centring`); each virtual site
reads and preprocesses its own table in its own process (:class:`~fedpca.scenarios.tables.TableRun`).
The same seeds give the same result as the Flower-free reference run
:func:`fedpca.algorithms.centred_run.run_centred_pca`.
"""

from __future__ import annotations

import functools
import time

from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.centred_run import dpdis_privacy
from fedpca.algorithms.centring import CentringSite, MomentsServer, moments_noise, moments_sum
from fedpca.algorithms.dpdis_pca import VARIANT_SECURE, DPdisPCASite, secure_sum_for
from fedpca.algorithms.secure_sum import public_seed
from fedpca.apps.common import site_partitions
from fedpca.clients.base import PrivateSiteClient
from fedpca.clients.centring import centred_client
from fedpca.clients.dpdis_pca import DPdisPCAClient
from fedpca.progress import RoundObserver
from fedpca.results import CentredPCAResult
from fedpca.scenarios.tables import TableRun
from fedpca.secure.identity import SecureIdentity, simulation_identity
from fedpca.simulations.launcher import Engine, run_federation
from fedpca.strategies.dpdis_pca import CentredDPdisPCA
from fedpca.strategies.workflow import secure_aggregation


def table_client(client_cls: type[PrivateSiteClient], site_cls: type, run: TableRun,
                 context: Context) -> Client:
    """Virtual site ``partition-id``'s centred client over its own table, under the run's
    policy (the algorithm's ``algorithm_releases`` after the moments)."""
    partition = int(context.node_config["partition-id"])
    centring = CentringSite(run.site_rows(partition), run.loaded_contract.bounds, run.policy(),
                            site=str(partition), seed=run.scenario.seed)
    return centred_client(context, client_cls, site_cls, centring)


def table_identity(run: TableRun, rounds: int, context: Context) -> SecureIdentity | None:
    """Virtual site ``partition-id``'s identity for the run's secure sums over ``rounds``
    Flower rounds (``None`` without secure sums)."""
    min_sites = run.policy().secure_min_sites
    if min_sites is None:
        return None
    return simulation_identity(int(context.node_config["partition-id"]),
                               site_partitions(context), min_sites, rounds)


def simulate_dpdis_tables(
    run: TableRun, verbose: bool = False, observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> CentredPCAResult:
    """Centred DPdisPCA (any variant) over ``run``'s tables as a Flower simulation.

    Privacy guarantee: each virtual site's moments release and DPdisPCA release compose to
    (epsilon, delta)-DP per record under its :class:`~fedpca.algorithms.centring.CentredPolicy`
    (per-site noise, or every release inside secure sums of at least ``M`` sites).
    """
    start = time.perf_counter()
    scenario, policy = run.scenario, run.policy()
    bounds, sizes = run.loaded_contract.bounds, run.sizes()
    secure = scenario.variant == VARIANT_SECURE
    rotation_seed = scenario.seed if scenario.seed is not None else public_seed()
    moments_secure = (moments_sum(policy, bounds, max(sizes), run.sites, rotation_seed)
                      if secure else None)
    centring = MomentsServer(bounds, policy.standardize, moments_secure,
                             moments_noise(policy, bounds, run.sites, moments_secure))
    algorithm_secure = (secure_sum_for(policy.algorithm_policy(bounds), bounds.dim, max(sizes),
                                       run.sites, rotation_seed) if secure else None)
    strategy = CentredDPdisPCA(
        centring=centring, columns=run.loaded_contract.output_columns, dim=bounds.dim,
        k=scenario.k, r=scenario.r, weighting=scenario.weighting, variant=scenario.variant,
        min_sites=scenario.required_sites(), wait_for_sites=run.sites,
        secure=algorithm_secure, privacy=dpdis_privacy(policy, bounds),
    )
    client_fn = functools.partial(table_client, DPdisPCAClient, DPdisPCASite, run)
    run_federation(strategy, client_fn, run.sites, verbose=verbose, observer=observer,
                   engine=engine, secure=secure_aggregation(scenario, strategy, 1.0),
                   identity_fn=functools.partial(table_identity, run, strategy.num_rounds))
    config = {**scenario.to_run_config(), "dataset": "tables", "standardize": run.standardize,
              "contract": run.loaded_contract.hash,
              "wall_seconds": time.perf_counter() - start}
    return strategy.result(config)

"""DPS-PCA over genotypes with private allele frequencies (a SNP panel with ``standardise =
"private"``): the run's server and sites, and the reference run in process (no Flower).

The rounds are a centred run's (:mod:`fedpca.algorithms.centred_rounds`): round 1 asks every
site for its allele counts' release
(:class:`~fedpca.algorithms.genotype_centring.FrequencySite`), the server turns them into
frequencies (:class:`~fedpca.algorithms.genotype_centring.FrequencyServer`) and every later
request carries them; then DPS-PCA's rounds on the rows standardised with them: its
initialisation and ``T`` power steps, or from a public start ``T`` power steps (shifted
along the frequencies' difference from the reference's when the panel lists them,
:mod:`fedpca.algorithms.shifted_start`). :func:`genotype_server` builds the server side for
the reference run, the simulation and the Flower App alike; :func:`genotype_site` a site's
side; :func:`run_genotype_dps_pca` runs both in process (what the benchmark and the
equivalence tests call; a Flower run with the same seed gives the same basis).

Privacy guarantee (unit: one individual's genotype row at one site, replace-one): every
site's ``1 + T`` releases (``2 + T`` without a start) are (epsilon, delta)-DP together under
its :func:`~fedpca.algorithms.genotype_centring.genotype_policy`, charged to one ledger; the
shift and the components kept are post-processing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedpca.algorithms.centred_rounds import CentredServer, CentredSite, answer_in_process
from fedpca.algorithms.centred_run import centred_privacy
from fedpca.algorithms.centring import CentredPolicy
from fedpca.algorithms.dps_pca import DPSPCAServer, DPSSecureSums, secure_sums
from fedpca.algorithms.genotype_centring import (
    FrequencySite,
    frequency_sensitivity,
    frequency_server,
    frequency_sum,
    genotype_bounds,
)
from fedpca.algorithms.panel_advice import PanelAdvice, panel_advice, power_sigma
from fedpca.algorithms.secure_sum import SecureSum, public_seed
from fedpca.algorithms.shifted_start import (
    SHIFT_COLUMNS,
    ShiftedStartServer,
    ShiftedStartSite,
    site_columns,
)
from fedpca.algorithms.site import SiteLedgerLike
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.snp_panel import ReferenceSpectrum
from fedpca.data.start_basis import StartBasis
from fedpca.dp.distributed_gaussian import GridChoice
from fedpca.errors import ConfigurationError
from fedpca.results import CentredPCAResult

#: A private-panel run's mechanism, as its privacy record states it.
MECHANISM = ("allele counts' column sums (private frequencies), then DPS-PCA's power steps "
             "on the rows standardised with them")


def genotype_server(policy: CentredPolicy, dim: int, k: int, rounds: int, sites: int,
                    max_records: int, *, s_hat: int | None = None, seed: int | None = None,
                    start: StartBasis | None = None, reference: np.ndarray | None = None
                    ) -> tuple[CentredServer, dict[str, Any]]:
    """The server of a private-panel DPS-PCA run and its privacy record: ``sites`` sites of
    at most ``max_records`` individuals (public), ``T = rounds`` power steps from ``start``
    (shifted when ``reference``, the panel's frequencies, is given; ``s_hat`` must then be
    ``d``) or from DPS-PCA's initialisation; secure sums when ``policy.discrete`` (their
    rotation seeded by ``seed`` as every reference run's), the frequencies' own per site
    outside them when ``policy.site_moments`` (the shifted start then gains site
    directions)."""
    if policy.algorithm_releases != rounds + int(start is None):
        raise ConfigurationError(
            f"the policy plans {policy.algorithm_releases} DPS-PCA releases; {rounds} power "
            f"steps {'from a start' if start else 'and the initialisation'} make "
            f"{rounds + int(start is None)}: build it with genotype_policy")
    s_hat = dim if s_hat is None else s_hat
    shifted = start is not None and reference is not None
    if shifted and s_hat != dim:
        raise ConfigurationError(
            f"the shifted start keeps the top k of the last power step over every SNP: "
            f"s_hat must be d = {dim}, got {s_hat} (or give no reference frequencies)")
    rotation_seed = public_seed(seed)
    moments, power, directions = run_sums(policy, dim, k, sites, max_records, rotation_seed,
                                          shifted)
    inner: DPSPCAServer = (
        ShiftedStartServer(dim, k, rounds, start, reference, seed=seed, secure=power,
                           site_columns=directions)
        if shifted else DPSPCAServer(dim, k, s_hat, rounds, seed=seed, secure=power,
                                     start=start))
    frequencies = frequency_server(policy, dim, sites, moments,
                                   inner.shift if shifted else None)
    privacy = {**centred_privacy(policy, genotype_bounds(dim), MECHANISM),
               "moments_sensitivity": frequency_sensitivity(dim),
               "unit": "one individual's genotype row at one site (replace-one)",
               "frequencies": ("released (the allele counts' column sums over the called "
                               "individuals, and the called counts"
                               + (", each site's own" if policy.site_moments else "") + ")"),
               "start": "" if start is None else start.digest, "start_shift": shifted}
    return CentredServer(inner, frequencies), privacy


def run_sums(policy: CentredPolicy, dim: int, k: int, sites: int, max_records: int,
             rotation_seed: int, shifted: bool
             ) -> tuple[tuple[SecureSum, GridChoice] | None, DPSSecureSums | None, int]:
    """A private-panel run's public secure sums (``None`` without discrete noise): the
    frequencies' (``None`` too when they are per site), the power steps' over the start's
    columns, and the site directions the shifted start gains."""
    moments = (frequency_sum(policy, dim, max_records, sites, rotation_seed)
               if policy.discrete and not policy.site_moments else None)
    directions = site_columns(sites) if shifted and policy.site_moments else 0
    columns = k + (SHIFT_COLUMNS + directions) * int(shifted)
    power = (secure_sums(policy.algorithm_policy(genotype_bounds(dim)), dim, columns,
                         max_records, sites, rotation_seed) if policy.discrete else None)
    return moments, power, directions


def genotype_advice(server: CentredServer, policy: CentredPolicy, sites: int,
                    spectrum: ReferenceSpectrum | None, records: int) -> PanelAdvice | None:
    """What the built private-panel ``server`` (:func:`genotype_server`'s, over ``sites``
    sites under ``policy``) plans for ``records`` individuals, beside the panel's own PCs'
    error (:mod:`fedpca.algorithms.panel_advice`), read from the server's own sums: its
    power step's noise over its Ritz span, its frequencies' noise and the reference
    frequencies its start is shifted from. ``None`` without the panel's reference
    ``spectrum`` or for a run not from a shifted start. Public, before any release."""
    inner = server.inner
    if spectrum is None or not isinstance(inner, ShiftedStartServer):
        return None
    sigma = power_sigma(policy.algorithm_policy(genotype_bounds(inner.dim)), sites,
                        None if inner.secure is None else inner.secure[1])
    return panel_advice(spectrum, inner.dim, records, sigma, inner.k,
                        server.centring.noise_sigma, inner.reference)


def genotype_site(rows: GenotypeRows, policy: CentredPolicy, start: StartBasis | None = None,
                  site: str = "site", seed: int | None = None,
                  ledger: SiteLedgerLike | None = None,
                  limits: SiteLimits | None = None) -> CentredSite:
    """A private-panel site: its allele counts' release, then DPS-PCA's site over its rows
    standardised with the frequencies each request carries."""
    return CentredSite(FrequencySite(rows, policy, start, site, seed, ledger, limits),
                       ShiftedStartSite)


def run_genotype_dps_pca(sites: Sequence[GenotypeRows], k: int, rounds: int,
                         policy: CentredPolicy, *, s_hat: int | None = None,
                         seed: int | None = None, start: StartBasis | None = None,
                         reference: np.ndarray | None = None) -> CentredPCAResult:
    """Reference DPS-PCA over private-panel genotype sites (``sites[i]`` is site ``str(i)``;
    with ``seed`` its noise is the stream ``(seed, i, release)``, as a Flower run's): the
    frequencies' release, then ``rounds`` power steps (module docstring). The result's
    ``mean / 2`` are the released frequencies.

    Privacy guarantee: each site's releases are (policy.epsilon, policy.delta)-DP together
    (unit: one individual's genotype row, replace-one)."""
    clock = time.perf_counter()
    members = [genotype_site(rows, policy, start, str(i), seed) for i, rows in enumerate(sites)]
    dim = sites[0].d
    server, privacy = genotype_server(policy, dim, k, rounds, len(sites),
                                      max(rows.n for rows in sites), s_hat=s_hat, seed=seed,
                                      start=start, reference=reference)
    answer_in_process(server, members)
    config = {"k": k, "rounds": rounds, "sites": len(sites), "seed": seed, "dim": dim,
              "samples": sum(rows.n for rows in sites),
              "epsilon_spent": max(m.ledger.epsilon_spent() for m in members),
              "wall_seconds": time.perf_counter() - clock}
    return server.result(privacy, config)

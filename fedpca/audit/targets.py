"""The audited mechanisms: each one's neighbouring releases, made by the real code.

Every entry of :data:`MECHANISMS` builds an :class:`~fedpca.audit.attack.AuditTarget` from
:class:`AuditSettings`: the two worst-case neighbouring datasets of
:func:`~fedpca.audit.attack.worst_case_neighbours`, a release function that answers one request
through the site's real door (:meth:`fedpca.site.service.SiteService.handle`, which every
transport calls; a fresh site per trial, so a fresh ledger and its own noise stream), and the
epsilon the site itself reports for that one release (``epsilon_spent`` in its answer's
metrics). The central baselines have no site: their
release function is :mod:`fedpca.algorithms.central`'s own.

What is released and audited (the sites' own releases with the noise a real site draws,
grid points plus exact discrete Gaussian noise, unless ``noise_sampler="float"``):

* ``dps-pca/init``: the noisy ``diag(X^T X) / n`` (``phase=init``).
* ``dps-pca/power``: ``H = (X^T X Q + G) / n`` for the curious server's request
  ``Q = [e_1 e_2]``, whose span holds both replaced records. The site's policy allows the
  fewest releases DPS-PCA has (``rounds=1``: two), so the claim is that of one of them.
* ``dps-pca/variance``: the noisy Rayleigh quotients and trace ``(diag(Q^T X^T X Q),
  ||X||_F^2) / n`` for the final basis ``Q = [e_1 e_2]`` (``phase=variance``), whose change
  between the neighbours, ``(-C^2, C^2, 0)``, attains the sensitivity ``sqrt(2) C^2``; the
  site agreed to the release (``rounds=1``: three releases, the claim one of them).
* ``dpdis-pca/secure-sum`` and ``sulq-kplane/secure-sum``: the decoded secure sum of two
  sites' distributed discrete Gaussian messages, the audited site holding the neighbours
  (made by the sites' own release code; through Flower the same residues are masked and
  summed exactly by the verifiable secure aggregation).
* ``dpdis-pca``: the noisy ``A^_s`` (``variant=full``), upper triangle. The default
  ``variant=factor`` sends ``P_s``, computed from the same ``A^_s``: post-processing, which
  can only make the two datasets harder to tell apart.
* ``ldp-pca``: a site holding one record, whose release is exactly that record's view
  ``x x^T + Z`` (the per-record claim); a site with ``m`` records adds ``sqrt(m)`` times the
  noise to the sum, which would only weaken the attack.
* ``analyze-gauss`` and ``mod-sulq``: the curator's noisy second moment, upper triangle.

To audit another mechanism, add a builder ``AuditSettings -> AuditTarget`` here and name it
in the algorithm's spec.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from fedpca.algorithms.central import (
    CentralRelease,
    analyze_gauss_release,
    mod_sulq_release,
)
from fedpca.algorithms.dpdis_pca import (
    VARIANT_FULL,
    VARIANT_SECURE,
    DPdisPCAPolicy,
    DPdisPCASite,
    secure_sum_for,
)
from fedpca.algorithms.dps_pca import (
    PHASE_INIT,
    PHASE_POWER,
    PHASE_VARIANCE,
    DPSPCASite,
    DPSPCAPolicy,
)
from fedpca.algorithms.kplane import KPlanePolicy, KPlaneSite
from fedpca.algorithms.kplane import secure_sum_for as kplane_secure_sum
from fedpca.algorithms.ldp_pca import PHASE, LDPCovarianceSite, LDPPolicy
from fedpca.algorithms.secure_sum import SecureSum
from fedpca.algorithms.site import PrivateSite, SitePrivacyPolicy
from fedpca.algorithms.specs import SPECS, load
from fedpca.audit.attack import (
    AuditTarget,
    NeighbouringDatasets,
    worst_case_basis,
    worst_case_neighbours,
)
from fedpca.site.service import Ask, MemoryState, Refusal, site_service
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.dp.exact_noise import EXACT
from fedpca.dp.mechanisms import triangle_indices
from fedpca.dp.site_data import SiteData

#: The audited site's name (its errors and its noise stream).
SITE = "audit"
#: Records held by the audited LDP site: one, so its release is a single record's view.
LDP_SAMPLES = 1
#: What a DPS-PCA site's claim for one release is.
DPS_CLAIM = "the claim is one of the 2 releases a rounds=1 site makes"


#: A site policy class (:meth:`AuditSettings.site_policy` builds one).
P = TypeVar("P", bound=SitePrivacyPolicy)


@dataclass(frozen=True)
class AuditSettings:
    """The audited configuration (every mechanism gets the same).

    Attributes:
        epsilon, delta: the budget each audited site (or curator) is configured with. A
            single release claims it all, except DPS-PCA's (one of two releases).
        dim: features ``d`` (>= 2; small keeps every trial cheap).
        samples: records per dataset (``n``; the LDP site holds one).
        clip_norm: public row-norm bound ``C``.
        data_seed: draws the fixed records the two datasets share.
        noise_sampler: the audited sites' noise: ``"exact"`` (what a real site draws) or
            ``"float"`` (numpy Gaussians, simulation only).
    """

    epsilon: float = 3.0
    delta: float = 1e-3
    dim: int = 4
    samples: int = 8
    clip_norm: float = 1.0
    data_seed: int = 0
    noise_sampler: str = EXACT

    def neighbours(self, samples: int | None = None) -> NeighbouringDatasets:
        """The worst-case neighbouring datasets (``samples`` records if given)."""
        return worst_case_neighbours(
            samples or self.samples, self.dim, self.clip_norm, self.data_seed
        )

    def site_policy(self, policy_cls: type[P], **options: object) -> P:
        """The audited site's own policy: ``policy_cls`` at this budget, clip norm and noise
        sampler, with the algorithm's ``options`` (e.g. ``rounds=1``)."""
        return policy_cls(self.epsilon, self.delta, clip_norm=self.clip_norm,
                          noise_sampler=self.noise_sampler, **options)

    def setup(self, samples: int, request: str) -> str:
        """The sentence describing the attack's datasets and request."""
        rest = f"the other {samples - 1} fixed" if samples > 1 else "no other record"
        return (
            f"n={samples}, d={self.dim}: one record C e_1 -> C e_2 (C={self.clip_norm}), "
            f"{rest}; {request}"
        )


def upper_triangle(matrix: np.ndarray) -> np.ndarray:
    """The upper triangle (diagonal included) of a symmetric matrix: its i.i.d. entries."""
    return matrix[triangle_indices(np.triu_indices, matrix.shape[0])]


def _prepared(datasets: NeighbouringDatasets, clip_norm: float) -> tuple[SiteData, SiteData]:
    return tuple(SiteData.prepare(datasets.pick(w), clip_norm, SITE) for w in (False, True))


def _client_target(
    name: str,
    settings: AuditSettings,
    policy: SitePrivacyPolicy,
    *,
    site: type[PrivateSite],
    config: dict,
    request: str,
    view: Callable[[np.ndarray], np.ndarray],
    parameters: Sequence[np.ndarray] = (),
    samples: int | None = None,
) -> AuditTarget:
    """A target whose release is the site's answer to ``parameters`` and ``config``
    (:meth:`~fedpca.site.service.SiteService.handle`, as every transport calls it),
    read by ``view``; ``request`` describes it; ``samples`` overrides the settings'."""
    samples = samples or settings.samples
    data = _prepared(settings.neighbours(samples), settings.clip_norm)

    def fit(neighbour: bool, seed: int | None) -> tuple[np.ndarray, dict]:
        private_site = site(data[int(neighbour)], policy, site=SITE, seed=seed)
        answer = site_service(private_site).handle(Ask(list(parameters), dict(config)),
                                                   MemoryState())
        if isinstance(answer, Refusal):
            raise answer.cause or InvalidRequestError(answer.reason)
        return view(answer.values[0]), answer.metrics

    _, metrics = fit(False, None)  # what the client reports having spent on one release
    return AuditTarget(
        name, lambda neighbour, seed: fit(neighbour, seed)[0],
        float(metrics["epsilon_spent"]), settings.delta, settings.setup(samples, request),
    )


def _central_target(
    name: str, settings: AuditSettings, release: Callable[[SiteData, int | None], CentralRelease]
) -> AuditTarget:
    """A target whose release is the curator's noisy matrix (upper triangle)."""
    data = _prepared(settings.neighbours(), settings.clip_norm)
    claimed = release(data[0], None).privacy["epsilon"]
    return AuditTarget(
        name, lambda neighbour, seed: upper_triangle(release(data[int(neighbour)], seed).matrix),
        float(claimed), settings.delta, settings.setup(settings.samples, "the curator's matrix"),
    )


def _dps_policy(settings: AuditSettings) -> DPSPCAPolicy:
    return settings.site_policy(DPSPCAPolicy, rounds=1)


def dps_init(settings: AuditSettings) -> AuditTarget:
    """DPS-PCA's initialisation release ``(diag(X^T X) + noise) / n``."""
    return _client_target(
        "dps-pca/init", settings, _dps_policy(settings), site=DPSPCASite,
        config={"phase": PHASE_INIT, "round": 0}, request=f"request phase=init; {DPS_CLAIM}",
        view=np.ravel,
    )


def dps_power(settings: AuditSettings) -> AuditTarget:
    """DPS-PCA's power step ``(X^T X Q + G) / n`` for ``Q = [e_1 e_2]``."""
    return _client_target(
        "dps-pca/power", settings, _dps_policy(settings), site=DPSPCASite,
        parameters=[worst_case_basis(settings.dim)], config={"phase": PHASE_POWER, "round": 1},
        request=f"request phase=power, Q=[e_1 e_2]; {DPS_CLAIM}", view=np.ravel,
    )


def dps_variance(settings: AuditSettings) -> AuditTarget:
    """DPS-PCA's explained-variance release for the final basis ``Q = [e_1 e_2]``."""
    policy = replace(_dps_policy(settings), explained_variance=True)
    return _client_target(
        "dps-pca/variance", settings, policy, site=DPSPCASite,
        parameters=[worst_case_basis(settings.dim)],
        config={"phase": PHASE_VARIANCE, "round": 2},
        request="request phase=variance, Q=[e_1 e_2]; the claim is one of the 3 releases a "
                "rounds=1 site with explained_variance makes", view=np.ravel,
    )


def dpdis(settings: AuditSettings) -> AuditTarget:
    """DPdisPCA's one release ``A^_s`` (the full variant; ``P_s`` is post-processing)."""
    return _client_target(
        "dpdis-pca", settings, settings.site_policy(DPdisPCAPolicy), site=DPdisPCASite,
        config={"variant": VARIANT_FULL, "dim": settings.dim}, request="request variant=full",
        view=upper_triangle,
    )


#: Sites in the audited secure sum: the audited one and another holding the fixed records.
SECURE_SITES = 2


def dpdis_secure(settings: AuditSettings) -> AuditTarget:
    """DPdisPCA's secure sum as the server sees it: the decoded sum of ``M = 2`` sites'
    distributed discrete Gaussian messages of ``X_s^T X_s`` (upper triangle)."""
    policy = DPdisPCAPolicy(settings.epsilon, settings.delta, clip_norm=settings.clip_norm,
                            secure_min_sites=SECURE_SITES)
    secure, _ = secure_sum_for(policy, settings.dim, settings.samples, SECURE_SITES,
                               rotation_seed=settings.data_seed)
    return _secure_target("dpdis-pca/secure-sum", settings, DPdisPCASite, policy,
                          lambda site: site.release(VARIANT_SECURE, secure=secure), secure)


def kplane_secure(settings: AuditSettings) -> AuditTarget:
    """SuLQ k-plane's secure sum as the server sees it: the decoded sum of ``M = 2`` sites'
    distributed discrete Gaussian messages for bases ``e_1``, ``e_2`` (the replaced record
    ``C e_1 -> C e_2`` switches cluster, attaining the ``2 C^2`` bound)."""
    policy = KPlanePolicy(settings.epsilon, settings.delta, rounds=1,
                          clip_norm=settings.clip_norm, secure_min_sites=SECURE_SITES)
    secure, _ = kplane_secure_sum(policy, settings.dim, 2, settings.samples, SECURE_SITES,
                                  rotation_seed=settings.data_seed)
    axes = np.eye(settings.dim)
    bases = [axes[:, :1], axes[:, 1:2]]
    return _secure_target("sulq-kplane/secure-sum", settings, KPlaneSite, policy,
                          lambda site: site.release_clusters(bases, secure=secure), secure)


def _secure_target(name: str, settings: AuditSettings, site_cls: type[PrivateSite],
                   policy: SitePrivacyPolicy,
                   answer: Callable[[PrivateSite], np.ndarray], secure: SecureSum) -> AuditTarget:
    """A secure sum's audit: the audited site holds the neighbouring records, the other
    :data:`SECURE_SITES` - 1 the fixed ones; the server's view is the decoded sum of their
    ``answer`` messages (the residues a site masks in the verifiable secure aggregation,
    whose unmasked sum is theirs exactly)."""
    data = _prepared(settings.neighbours(), settings.clip_norm)

    def sites(neighbour: bool, seed: int | None) -> list[PrivateSite]:
        audited = site_cls(data[int(neighbour)], policy, site=SITE, seed=seed)
        return [audited, *(site_cls(data[0], policy, site=f"{SITE}-{i}", seed=seed)
                           for i in range(1, SECURE_SITES))]

    def release(neighbour: bool, seed: int | None) -> np.ndarray:
        return secure.decode([answer(site) for site in sites(neighbour, seed)])

    audited = sites(False, None)[0]
    answer(audited)
    return AuditTarget(
        name, release, audited.ledger.epsilon_spent(), settings.delta,
        settings.setup(settings.samples, f"the decoded secure sum of {SECURE_SITES} sites"),
    )


def ldp(settings: AuditSettings) -> AuditTarget:
    """LDP-PCA: one record's view ``x x^T + Z`` (a site holding that record only)."""
    return _client_target(
        "ldp-pca", settings, settings.site_policy(LDPPolicy), site=LDPCovarianceSite,
        config={"phase": PHASE, "dim": settings.dim}, request="request phase=covariance",
        view=upper_triangle, samples=LDP_SAMPLES,
    )


def analyze_gauss(settings: AuditSettings) -> AuditTarget:
    """Analyze Gauss: ``X^T X + E`` released by the curator."""
    return _central_target(
        "analyze-gauss", settings,
        lambda data, seed: analyze_gauss_release(
            data, settings.epsilon, settings.delta, settings.clip_norm, seed=seed
        ),
    )


def mod_sulq(settings: AuditSettings) -> AuditTarget:
    """MOD-SuLQ: ``A + N`` released by the curator, the paper's noise level."""
    return _central_target(
        "mod-sulq", settings,
        lambda data, seed: mod_sulq_release(
            data, settings.epsilon, settings.delta, settings.clip_norm, seed=seed
        ),
    )


def kplane(settings: AuditSettings) -> AuditTarget:
    """SuLQ k-plane's per-round message for bases ``e_1``, ``e_2``: the replaced record
    ``C e_1 -> C e_2`` leaves cluster 1 for cluster 2, attaining the ``2 C^2`` bound."""
    axes = np.eye(settings.dim)
    return _client_target(
        "sulq-kplane", settings, settings.site_policy(KPlanePolicy, rounds=1),
        site=KPlaneSite,
        parameters=[axes[:, :1], axes[:, 1:2]],
        config={"round": 1, "dim": settings.dim, "clusters": 2},
        request="request k=2 bases e_1, e_2 (the record switches cluster)", view=np.ravel,
    )


#: Every audited mechanism: name -> builder; the federated algorithms' come from their
#: specs (:data:`fedpca.algorithms.specs.SPECS`), then the central baselines'.
MECHANISMS: dict[str, Callable[[AuditSettings], AuditTarget]] = {
    **{name: load(path) for spec in SPECS.values() for name, path in spec.audit},
    "analyze-gauss": analyze_gauss,
    "mod-sulq": mod_sulq,
}


def audit_target(name: str, settings: AuditSettings | None = None) -> AuditTarget:
    """The :class:`AuditTarget` of mechanism ``name`` under ``settings`` (defaults if None)."""
    if name not in MECHANISMS:
        raise ConfigurationError(
            f"unknown mechanism {name!r}; choose one of: {', '.join(MECHANISMS)}"
        )
    return MECHANISMS[name](settings or AuditSettings())

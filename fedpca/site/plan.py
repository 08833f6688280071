"""One run as a real site plans it, once: what it will release, in how many rounds, under
which calibration.

A site that counts a run's releases in two places will one day count them differently (a
centred run's moments release counted by the budget check and not by the secure session:
every secure run refused at its last round). So a site turns each request into one
:class:`RunPlan` (:func:`plan_run`), from the coordinator's run_config (UNTRUSTED) and its own
policy file, and every later step reads that plan: the readiness (budget) round's answer,
the check before the run's first release, the release cap and description the ledger
records (:meth:`RunPlan.charge`), the number of rounds its secure-aggregation session agrees
to (:attr:`RunPlan.rounds`), and the guard in :class:`~fedpca.site.ledger.RunLedger`
that refuses an algorithm whose own count disagrees with the plan.

What a hostile coordinator controls here, and what it cannot do with it:

* ``algorithm``: only one the site's policy allows; the policy's table for it sets the rounds
  and the explained-variance release; a local-DP algorithm (LDP-PCA) is refused at a site
  that answers only inside secure sums (``[secure-aggregation] min-sites``): its answers are
  its records' own views, which go into no secure sum (:func:`require_mode`);
* ``centring`` (``""``, ``"centre"``, ``"standardize"``): either scaling is planned under the
  site's own budget split and clip norm (:class:`~fedpca.algorithms.centring.CentredPolicy`);
  any other value, or centring without the site's contract or at a genotype site, is refused;
  a genotype site whose SNP panel says ``standardise = "private"`` plans every run with the
  release of its allele counts first (:data:`PRIVATE_FREQUENCIES`,
  :func:`~fedpca.algorithms.genotype_centring.genotype_policy`: ``1 + T`` releases from a
  public start, ``2 + T`` without), whatever the request says;
* ``contract``: must be the hash of the site's own copy (``""`` when it holds none; a
  genotype site's SNP panel's digest, :mod:`fedpca.site.genotype_site`);
* ``seed``: refused (a real site's noise comes from the operating system);
* ``start-sha256``: a public start basis by its hash, only one the site's policy holds
  (:mod:`fedpca.site.start_bases`): the run is then planned without the algorithm's
  initialisation release, from the site's own copy; not in a centred run;
* ``explained-variance``: refused unless the site's policy makes that release;
* the budget keys (``epsilon``, ``rounds``, ``clip-norm``, ``secure-min-sites``, ...): never
  read: the plan's calibration is the policy's (:data:`~fedpca.site.policy.PRIVACY_KEYS`).

Every refusal happens here, before the site reads its data or charges anything, and quotes
public values only (the site's policy settings and the request's own values).

Privacy guarantee (unit: one record of the site's population, replace-one): the plan's
releases are the run's, each calibrated by the policy so that the whole run is
(``run-epsilon``, ``delta``)-DP (the moments release and the algorithm's releases of a
centred run by their budget split); the ledger charges each release as it is made and
refuses any beyond :attr:`RunPlan.count`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedpca.algorithms.centring import CentredPolicy, requested_scaling
from fedpca.algorithms.genotype_centring import genotype_policy
from fedpca.algorithms.specs import SPECS
from fedpca.errors import InvalidRequestError, quoted
from fedpca.dp.events import Release
from fedpca.dp.exact_noise import EXACT
from fedpca.dp.mechanisms import NO_SEED
from fedpca.data.start_basis import StartBasis, start_name
from fedpca.site.ledger import RunCharge
from fedpca.site.start_bases import planned_start
from fedpca.site.policy import EXPLAINED_VARIANCE, SitePolicyFile
from fedpca.site.policy_reader import PolicyError

logger = logging.getLogger(__name__)

#: The run_config value of each centring mode (``CentredPolicy.standardize`` -> mode).
CENTRING_NAMES = {None: "", False: "centre", True: "standardize"}
#: How a private-panel genotype site's plan names its frequencies' release (the ledger
#: records ``dps-pca+private-frequencies``: no run mixes it with another plan).
PRIVATE_FREQUENCIES = "private-frequencies"


@dataclass(frozen=True)
class RunPlan:
    """One run at one site, planned once from the request and the site's own policy.

    Attributes:
        site: the site's name.
        run_id: the coordinator's run id.
        algorithm: the algorithm the run asks for (allowed by the policy).
        centring: ``""`` (none), ``"centre"`` or ``"standardize"``.
        contract: the hash of the site's data contract (``""``: none).
        releases: every release of the run, in order, as the site calibrates it (what the
            ledger must fit before the first one): a centred run's moments release first.
        rounds: the algorithm's rounds the policy calibrates for (multi-round algorithms),
            else ``None``.
        explained_variance: the run ends with its algorithm's explained-variance release.
        secure_min_sites: ``M`` when every release is revealed only inside secure sums of at
            least ``M`` sites, else ``None``.
        centred: the site's policy for a centred run (``None``: not centred).
        k: the number of components the request asks for (public; for the ledger's
            description only, never a calibration input).
        start: the site's own copy of the public start basis the run names (``None``:
            the run has its initialisation release).
    """

    site: str
    run_id: str
    algorithm: str
    centring: str
    contract: str
    releases: tuple[Release, ...]
    rounds: int | None
    explained_variance: bool
    secure_min_sites: int | None
    centred: CentredPolicy | None = None
    k: int | None = None
    start: StartBasis | None = None

    @property
    def count(self) -> int:
        """How many releases the run makes here (one per Flower round: also the rounds its
        secure-aggregation session agrees to)."""
        return len(self.releases)

    @property
    def charged_algorithm(self) -> str:
        """What the ledger records as each release's algorithm: the algorithm, and for a
        centred run how it was centred (``dpdis-pca+standardize``), so that one run cannot
        mix plans whose calibrations assume different budget splits (the ledger refuses
        it)."""
        return self.algorithm if not self.centring else f"{self.algorithm}+{self.centring}"

    def description(self) -> dict[str, Any]:
        """What the ledger records about the run (public: the request's shape and the
        site's own settings)."""
        return {"algorithm": self.algorithm, "k": self.k, "contract": self.contract,
                "centring": self.centring, "releases": self.count, "rounds": self.rounds,
                "explained_variance": self.explained_variance,
                "secure_min_sites": self.secure_min_sites,
                "start": start_name(self.start)}

    def charge(self, fingerprint: str) -> RunCharge:
        """The ledger's record of this run for releases computed from the data file of
        SHA-256 ``fingerprint``: at most :attr:`count` releases."""
        return RunCharge(run_id=self.run_id, algorithm=self.charged_algorithm,
                         fingerprint=fingerprint, max_releases=self.count,
                         description=self.description())


def plan_run(policy: SitePolicyFile, run_id: str, algorithm: str,
             request: Mapping[str, Any]) -> RunPlan:
    """The site's plan for run ``run_id`` of ``algorithm`` under ``request`` (the run_config:
    UNTRUSTED), refused (:class:`~fedpca.errors.FedPCAError`, nothing read or charged) when
    the site's policy does not allow it (module docstring)."""
    settings = policy.require_algorithm(algorithm)
    require_mode(policy, algorithm)
    require_contract(policy, request.get("contract", ""))
    _refuse_seed(policy, request.get("seed", NO_SEED))
    explains = bool(settings.get(EXPLAINED_VARIANCE, False))
    _refuse_unagreed_variance(policy, request.get(EXPLAINED_VARIANCE), algorithm, explains)
    standardize = requested_scaling(request.get("centring", ""), policy.name)
    if standardize is not None and policy.genotypes is not None:
        raise InvalidRequestError(
            f"{policy.name}: refused: a centred run; this genotype site's rows are standardised "
            "with its SNP panel's public frequencies, never centred by a run: run without "
            "centring")
    start = planned_start(policy, algorithm, request)
    if start is not None and standardize is not None:
        raise InvalidRequestError(
            f"{policy.name}: refused: a public start basis is not built for a centred run "
            "(the start is a basis of uncentred rows): run with centring=\"\" or without "
            "start-sha256; nothing was released")
    private = policy.genotypes is not None and policy.genotypes.panel.standardise == "private"
    centred = (frequency_policy(policy, algorithm, start is not None) if private
               else None if standardize is None
               else policy.centred_policy(algorithm, standardize))
    releases = (policy.planned_run(algorithm, start is not None) if centred is None
                else centred.plan())
    spec = SPECS[algorithm]
    return RunPlan(
        site=policy.name, run_id=str(run_id), algorithm=algorithm,
        centring=PRIVATE_FREQUENCIES if private else CENTRING_NAMES[standardize],
        contract=policy.contract_hash(),
        releases=tuple(releases),
        rounds=policy.rounds(algorithm) if spec.multi_round else None,
        explained_variance=explains and spec.explained_variance,
        secure_min_sites=policy.secure_min_sites, centred=centred, k=_public_int(request.get("k")),
        start=start,
    )


def frequency_policy(policy: SitePolicyFile, algorithm: str, start: bool) -> CentredPolicy:
    """A private-panel genotype site's policy for a run of ``algorithm`` (its allele counts'
    release, then DPS-PCA's ``T`` releases from a public ``start``, ``T + 1`` without): the
    site's run epsilon, delta, accounting and secure sums, exact noise, the panel's
    row-norm; the counts the site's own release when its panel says ``frequencies =
    "per-site"``. Refused with ``paper`` accounting (the split needs the PLD or RDP accountant)
    or the explained-variance release (not built for these runs)."""
    if policy.accounting == "paper" or policy.require_algorithm(algorithm).get(
            EXPLAINED_VARIANCE, False):
        raise InvalidRequestError(
            f"{policy.name}: refused: a private-frequency genotype run splits its budget with "
            "the PLD accountant and makes no explained-variance release; set accounting = "
            f"\"pld\" and explained-variance = false in the policy; nothing was released")
    return genotype_policy(policy.run_epsilon, policy.delta, policy.rounds(algorithm),
                           policy.genotypes.panel.row_norm, start,
                           accounting=policy.accounting, noise_sampler=EXACT,
                           secure_min_sites=policy.secure_min_sites, discrete=policy.discrete,
                           per_site=policy.genotypes.panel.per_site_frequencies)


def require_mode(policy: SitePolicyFile, algorithm: str) -> None:
    """Refuse ``algorithm`` when the site's mode cannot run it: a local-DP algorithm (its
    answers are its records' own views, in no secure sum) at a site whose policy sets
    ``[secure-aggregation] min-sites`` (it answers only inside secure sums)."""
    if SPECS[algorithm].local_dp and policy.secure_min_sites is not None:
        raise PolicyError(
            f"{policy.name}: refused: {algorithm} answers with its records' own views, which "
            "go into no secure sum, and this site answers only inside secure sums "
            f"([secure-aggregation] min-sites = {policy.secure_min_sites}): run {algorithm} "
            "at sites with min-sites = 0")


def _public_int(value: object) -> int | None:
    """An integer the request states (for the ledger's description), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _refuse_seed(policy: SitePolicyFile, seed: object) -> None:
    if seed in (NO_SEED, None, ""):
        return
    raise InvalidRequestError(
        f"{policy.name}: refused: run_config seed={quoted(seed)}. A real site draws its noise from "
        "the operating system; a seed would let whoever knows it remove the noise. Seeds are "
        f"for simulations only: run with seed={NO_SEED}"
    )


def _refuse_unagreed_variance(policy: SitePolicyFile, asked: object, algorithm: str,
                              explains: bool) -> None:
    """Refuse a run (of an algorithm with an explained-variance release) whose run_config
    asks for that release when this site's policy does not make it: the run would fail at
    its last round, after the site had paid for every other release."""
    if not SPECS[algorithm].explained_variance or asked not in (True, "true") or explains:
        return
    raise InvalidRequestError(
        f"{policy.name}: refused: this run asks for the explained-variance release "
        f"(run_config {EXPLAINED_VARIANCE}=true), which this site's policy does not make "
        f"({EXPLAINED_VARIANCE} = false under [algorithms.{algorithm}]); nothing was released")


def require_contract(policy: SitePolicyFile, requested: object) -> None:
    """Refuse a run, or a released result, named under a data contract (UNTRUSTED: a hash)
    other than the site's own (``""`` for none; a genotype site's: its SNP panel's
    digest)."""
    own = policy.contract_hash()
    if requested == own:
        return
    contract = policy.load_contract()
    held = (f"SNP panel {policy.genotypes.panel.name!r}: run with contract=\"{own}\""
            if policy.genotypes is not None else
            "no contract (its data file is a numeric matrix): run with contract=\"\""
            if contract is None else
            f"contract {contract.name!r}: run with contract=\"{contract.hash}\"")
    logger.error("%s: refused a run under contract %s: this site's policy %s names %s",
                 policy.name, quoted(requested), policy.path, held)
    raise InvalidRequestError(
        f"{policy.name}: refused: the run names data contract {quoted(str(requested) or 'none')}; "
        f"this site holds its data under {held}")

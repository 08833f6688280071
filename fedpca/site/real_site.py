"""A real site in the Flower App: its own policy file, noise from the OS, a lifetime ledger.

A SuperNode is a *real site* when its ``node_config`` (set by the site's operator on the
``flower-supernode`` command line; the coordinator cannot change it) names a ``policy`` file
or a ``data-path``. Everything else the ClientApp reads comes from the coordinator and is
untrusted. What a hostile coordinator could try, and what happens:

* **send a run_config ``seed``, an algorithm the site does not allow, a public start basis
  (``start-sha256``) it does not hold, or another data contract** (whose ranges set every
  sensitivity, so the coordinator only names one by its hash): refused by the site's plan of
  the run (:mod:`fedpca.site.plan`), before it reads its data or charges anything; a real
  site always draws its noise from the operating system, and its preprocessing and
  sensitivities come from its own copy of the contract only (logged at the site);
* **send its own budget** (``epsilon``, ``delta``, ``rounds``, ``accounting``, ``clip-norm``,
  ``secure-min-sites``) **or the float sampler** (``noise-sampler``): ignored, the site's
  policy sets them and its noise is always exact (logged at the site);
* **talk to a site with data but no policy**: refused, never the coordinator's values;
* **start run after run, a new run id for every request, or wait for a restart**: every
  release of every run is charged to the population's lifetime ledger on the site's disk,
  dated by the site's clock, so the release that would pass the site's daily, weekly or
  lifetime ceiling is refused (:mod:`fedpca.site.ledger`);
* **hope for a lost ledger**: a ledger that is missing, another one, emptied or older than
  the site's last recorded release is refused before anything is charged, and never
  created again by a run (:mod:`fedpca.site.ledger_identity`); the coordinator is told
  only that the ledger failed its check;
* **start a run the site cannot finish**, so that the others spend and nobody gets a
  result: at the run's first request (and in the readiness round before it), the whole
  plan (:class:`~fedpca.site.plan.RunPlan`) must fit the ledger, or the site refuses before
  reading its data; the readiness round also reads the site's table through its contract,
  so a site whose file cannot be used says so (in fixed, data-free words) before any site
  spends anything;
* **ask for an answer too large to compute**: refused before anything is allocated, by the
  limits of the site's policy (:mod:`fedpca.algorithms.site_limits`);
* **send a wrong released result** (:meth:`RealSiteSource.take_result`): refused and not
  stored, or, well-formed, it makes only the site's own scores wrong; the site answers with
  its name only, spends nothing, sends no score (:mod:`fedpca.site.results`).

Refusals happen before anything is charged, and their text carries no number derived from
the records (a data file that fails validation is reported only in the site's own log).

A :class:`RealSiteSource` holds what it opens for the run: its policy file is read once, the
run planned once, its ledger opened once (each when a request first needs it, so a refusal
of the plan comes before the ledger is opened, and the ledger's check before any record is
read), and the algorithm's site is built from the site's own privacy settings and that plan
(:meth:`~fedpca.algorithms.specs.AlgorithmSpec.site_policy`), never from the coordinator's
scenario.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from fedpca.algorithms.centred_rounds import CentredSite
from fedpca.algorithms.centring import CentredPolicy, CentringSite
from fedpca.algorithms.site import PrivateSite
from fedpca.algorithms.specs import spec
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.data.files import file_fingerprint
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.tables import matrix_width
from fedpca.errors import FedPCAError, InvalidDataError, InvalidRequestError, quoted
from fedpca.site.ledger_identity import LedgerIdentityError, refused_run
from fedpca.dp import calibration_cache
from fedpca.dp.mechanisms import NO_SEED
from fedpca.dp.moments import ColumnBounds
from fedpca.site.ledger import RunLedger, SiteLedger
from fedpca.site.ledger_records import COMPLETE, FAILED
from fedpca.site.policy import (
    PRIVACY_KEYS,
    PolicyError,
    SitePolicyFile,
    load_site_policy,
)
from fedpca.secure.conditions import check_vouched
from fedpca.secure.identity import SecureIdentity
from fedpca.secure.roster import Roster, load_roster, load_signing_key
from fedpca.secure.vouching import load_authority, load_revocation_list, vouched_members
from fedpca.site.plan import RunPlan, plan_run, require_contract
from fedpca.site.ready import SiteReady
from fedpca.site.reply_journal import ReplyJournal
from fedpca.site.start_bases import START
from fedpca.site.results import store_result
from fedpca.site.service import ResultReader, SiteSource

logger = logging.getLogger(__name__)

#: node_config key naming the site's policy file.
POLICY_KEY = "policy"
#: node_config keys that mark a real site (a simulation partition has neither).
REAL_SITE_KEYS = (POLICY_KEY, "data-path")


class NodeLike(Protocol):
    """The node and run a request comes from (:class:`~fedpca.site.service.Node`, or
    Flower's ``Context``)."""

    run_id: Any
    node_config: Mapping[str, Any]
    run_config: Mapping[str, Any]


@dataclass(frozen=True)
class RealSite:
    """What a real site answers one run with: its records, the run's configuration with the
    site's own privacy keys, the run's view of its lifetime ledger, its policy's limits on
    one answer and its plan of the run."""

    name: str
    records: np.ndarray | GenotypeRows
    config: dict[str, Any]
    ledger: RunLedger
    limits: SiteLimits
    plan: RunPlan
    bounds: ColumnBounds | None = None

    @property
    def centred(self) -> CentredPolicy | None:
        """The site's policy for a centred run (``None``: the run is not centred)."""
        return self.plan.centred


class RealSiteSource(SiteSource):
    """A real site's answers in one run of ``algorithm``: its own policy, plan, data and lifetime
    ledger, each opened once for the run when a request first needs it (module docstring);
    the run_config supplies only the non-privacy parameters."""

    def __init__(self, node: NodeLike, algorithm: str) -> None:
        self.node, self.algorithm = node, algorithm

    @cached_property
    def policy(self) -> SitePolicyFile:
        """The site's policy file, read once (refused when the node names none)."""
        return _read_policy(self.node)

    @cached_property
    def plan(self) -> RunPlan:
        """The site's plan of the run (:func:`~fedpca.site.plan.plan_run`), made once:
        refused, nothing read or charged, when the policy does not allow the request."""
        return plan_run(self.policy, str(self.node.run_id), self.algorithm,
                        self.node.run_config)

    @cached_property
    def ledger(self) -> SiteLedger:
        """The site's lifetime ledger once it passes its identity check, opened once; a
        refusal tells the coordinator only that it failed (its counts and paths stay in the
        site's log)."""
        try:
            return self.policy.open_ledger()
        except LedgerIdentityError as error:
            raise refused_run(self.policy.name, error) from None

    @cached_property
    def records(self) -> np.ndarray | GenotypeRows:
        """The site's records, read once, after the plan and the ledger allow the run
        (:func:`_usable`), their count checked against the policy's delta."""
        self.require_affordable()
        records = _usable(self.policy, self.policy.load_records)
        self.policy.check_records(records.shape[0])
        return records

    @cached_property
    def opened(self) -> RealSite:
        """The run as the site answers it, opened once: planned, its whole plan checked
        against the ledger at the run's first request here (:meth:`require_affordable`),
        then its data read and its run's view of the ledger opened. Raises (nothing
        charged) when the site refuses."""
        policy, plan = self.policy, self.plan
        untrusted = dict(self.node.run_config)
        own = policy.privacy_config(self.algorithm)
        overridden = sorted(k for k in PRIVACY_KEYS
                            if k in untrusted and untrusted[k] != own.get(k))
        if overridden:
            logger.warning(
                "%s: run_config %s ignored: this site's policy %s sets its privacy",
                policy.name, ", ".join(f"{k}={quoted(untrusted[k])}" for k in overridden),
                policy.path,
            )
        records = self.records
        # a public start is the site's own file (its plan checked its hash), never the
        # coordinator's
        config = {**untrusted, **own, "seed": NO_SEED,
                  START: "" if plan.start is None else str(plan.start.path)}
        logger.info("%s: noise sampler %s (grid points plus exact discrete Gaussian noise)",
                    policy.name, own["noise-sampler"])
        bounds = (None if plan.centred is None or policy.genotypes is not None
                  else policy.load_contract().bounds)
        run = self.ledger.for_run(plan.charge(file_fingerprint(policy.data)), plan.releases)
        return RealSite(policy.name, records, config, run, policy.limits, plan, bounds)

    def open(self) -> PrivateSite:
        """The site for this run (opened once, :meth:`~fedpca.site.service.SiteSource.site`):
        the algorithm's under the site's own privacy settings and its plan's start, or in a
        centred run the moments round's, then the algorithm's on the centred rows."""
        opened = self.opened
        algorithm = spec(self.algorithm)
        if opened.centred is not None and isinstance(opened.records, GenotypeRows):
            # imported here: the genotype run's module brings the server's centring with it
            # (scipy's linear algebra), which every other site's message would pay to import
            from fedpca.algorithms.genotype_run import genotype_site

            return genotype_site(opened.records, opened.centred, opened.plan.start,
                                 site=opened.name, ledger=opened.ledger, limits=opened.limits)
        if opened.centred is not None:
            centring = CentringSite(opened.records, opened.bounds, opened.centred,
                                    site=opened.name, ledger=opened.ledger,
                                    limits=opened.limits)
            return CentredSite(centring, algorithm.site_class())
        policy = algorithm.site_policy(self.policy.privacy_config(self.algorithm),
                                       opened.plan.start)
        return algorithm.site_class()(opened.records, policy, site=opened.name, seed=None,
                                      ledger=opened.ledger, limits=opened.limits)

    def require_affordable(self) -> None:
        """Before the run's first release at this site, refuse the run unless all of its
        planned releases (:attr:`~fedpca.site.plan.RunPlan.releases`) fit the ledger's
        lifetime budget, worst-case bound and daily and weekly ceilings
        (:meth:`SiteLedger.require_run`): whichever ServerApp the coordinator runs, the
        site spends nothing on a run it cannot finish. A run that has made releases here is
        past that point: each of its releases is checked as it is charged."""
        plan = self.plan
        if not self.ledger.run_releases(plan.run_id):
            self.ledger.require_run(plan.releases, plan.charged_algorithm)

    def ready(self) -> SiteReady:
        """The site's answer to the readiness round (:mod:`fedpca.flower.server.readiness`) when
        its policy allows the request (:attr:`plan`), the whole planned run fits its ledger
        (:meth:`require_affordable`), its secure identity reads (roster, key, vouches:
        enough vouched members for its ``M``) and its data file can be read through its
        contract with enough records for its delta: its name, record count, its policy's
        privacy settings for the run and its answer deadline
        (:class:`~fedpca.site.ready.SiteReady`); raises its refusal otherwise. Nothing is
        charged or written. A refusal about the data is the fixed text of :func:`_usable`
        (its reason, which may quote the records, goes to the site's log only): whether the
        site's file is usable is what its first request would reveal anyway; its record
        count is public under replace-one and travels with every answer."""
        self.require_affordable()
        identity = self.identity()
        if identity is not None:  # its roster, key and vouches, read before any secure stage
            check_vouched(len(identity.vouched), identity.colluders, identity.min_sites)
        policy = self.policy
        return SiteReady(policy.name, self.records.shape[0],
                         policy.privacy_config(self.algorithm), policy.answer_seconds)

    def identity(self) -> SecureIdentity | None:
        """The site's identity in fedpca's verifiable secure aggregation (read once per
        run), from its policy (``None`` when it sets no ``min-sites``); it agrees to as many
        secure rounds as its plan of the run has releases (a centred run's moments round
        included). A real site joins no other secure sum."""
        return self._identity

    @cached_property
    def _identity(self) -> SecureIdentity | None:
        policy, plan = self.policy, self.plan
        if policy.secure_min_sites is None:
            return None
        roster = load_roster(policy.roster)
        return SecureIdentity(
            member=policy.name, signing_key=load_signing_key(policy.signing_key),
            roster=roster, min_sites=policy.secure_min_sites,
            colluders=policy.colluders, max_rounds=plan.count,
            vouched=policy_vouched(policy, roster),
        )

    def take_result(self, read: ResultReader) -> str:
        """Take the run's released result (untrusted, read by ``read`` for the site's width,
        limits and columns: :func:`~fedpca.flower.result_wire.read_result_message`): refuse
        one the site cannot compute scores with, one made under another data contract, or
        one of a run that made no release here (so a coordinator cannot fill the site's
        disk with runs it never took part in); store it in ``results/`` beside the policy
        (:func:`fedpca.site.results.store_result`, 0600), record the run as complete in the
        ledger and answer with the site's name. Costs no budget."""
        policy, run_id = self.policy, str(self.node.run_id)
        if not self.ledger.run_releases(run_id):
            raise InvalidRequestError(
                f"{policy.name}: refused the released result: this site stores the result of "
                f"a run it released in, and made no release in run {run_id!r}; nothing was "
                "stored"
            )
        contract = policy.load_contract()
        columns = None if contract is None else tuple(contract.output_columns)
        result = read(_width(policy) if columns is None else len(columns), policy.limits,
                      columns)
        require_contract(policy, result.contract)
        if result.run_id != run_id:
            raise InvalidRequestError(
                f"{policy.name}: refused the released result: it names run {result.run_id!r} "
                f"and came in run {run_id!r}; nothing was stored"
            )
        store_result(policy.path, result, policy.name)
        self.ledger.end_run(run_id, COMPLETE)
        return policy.name

    def run_failed(self, reason: str) -> str:
        """Take the coordinator's word (UNTRUSTED, :mod:`fedpca.flower.run_end`) that the
        current run failed for ``reason``: the site's ledger records the run as failed (its
        releases stay charged; a run the site released nothing in is not recorded) and the
        site answers with its name. Costs no budget and changes no budget."""
        name = self.policy.name
        if self.ledger.end_run(str(self.node.run_id), FAILED, reason):
            logger.warning("%s: run %s failed (the coordinator says: %s); its releases here "
                           "stay spent", name, self.node.run_id, reason)
        return name

    def journal(self) -> ReplyJournal:
        """The run's journal in the site's ledger file (:mod:`fedpca.site.reply_journal`):
        what the site sent and keeps in this run, so a restarted SuperNode goes on with it."""
        ledger = self.ledger
        return ReplyJournal(ledger.path, ledger.population, str(self.node.run_id))

    def record_step(self, run_id: str, round_number: int, stage: str, note: str) -> None:
        """Record the step in the site's lifetime ledger, once per run and round
        (:meth:`~fedpca.site.ledger.SiteLedger.record_step`)."""
        self.ledger.record_step(run_id, round_number, stage, note)


def is_real_site(node: NodeLike) -> bool:
    """Whether this node is a real site (its node_config names a policy or a data file)."""
    return any(key in node.node_config for key in REAL_SITE_KEYS)


def policy_vouched(policy: SitePolicyFile, roster: Roster) -> frozenset[str]:
    """The roster members ``policy`` vouches for (:mod:`fedpca.secure.vouching`)."""
    authorities = [load_authority(path) for path in policy.vouched_ca]
    return vouched_members(roster, policy.name, policy.vouched, authorities,
                           revoked=policy.revoked,
                           revocation_lists=[load_revocation_list(path, authorities)
                                             for path in policy.revocation_lists])


def _read_policy(node: NodeLike) -> SitePolicyFile:
    node = node.node_config
    if POLICY_KEY not in node:
        raise PolicyError(
            "refused: this SuperNode holds data but names no site policy (node_config "
            "policy=FILE); a real site never takes its budget from the coordinator. Its "
            "operator writes one with: fedpca site init"
        )
    policy = load_site_policy(str(node[POLICY_KEY]))
    # every message is a fresh process: keep its calibrations (public parameters only,
    # checked on every read) in the user's cache
    calibration_cache.use_directory(calibration_cache.environment_directory())
    return policy


def _width(policy: SitePolicyFile) -> int:
    """The width of a site's records without a contract, read without loading them: its
    SNP panel's, or its matrix file's (:func:`~fedpca.data.tables.matrix_width`)."""
    if policy.genotypes is not None:
        return policy.genotypes.panel.d
    return _usable(policy, lambda: matrix_width(policy.data))


def _usable(policy: SitePolicyFile, read: Callable[[], Any]) -> Any:
    """``read()`` of the site's data file; its failure (whose reason may quote values from
    the records) described only in the site's log, the coordinator told the fixed words
    that the data file cannot be used."""
    try:
        return read()
    except FedPCAError as exc:
        logger.error("%s: the data file %s cannot be used: %s", policy.name, policy.data, exc)
        raise InvalidDataError(
            f"{policy.name}: refused: the site's data file cannot be used; the site's operator "
            "finds the reason in the site's log (fedpca site check --policy ... says what to "
            "fix); nothing was released"
        ) from None

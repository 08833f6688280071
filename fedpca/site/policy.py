"""A site's own privacy policy: a TOML file on the site's disk that only the site edits.

Trust model. In a real deployment the coordinator (whoever runs the SuperLink and ``flwr
run``) is untrusted: it controls the run_config, the fit configs, the strategy, the number
and timing of runs. Nothing it sends may choose a site's noise, seed, budget, clip norm or
secure-aggregation minimum ``M``. Those come from this file, which the site's SuperNode names
in its ``node_config`` (``policy=/path/site.toml``); the coordinator may only ask for *more*
noise or *fewer* releases.

Privacy guarantee (unit: one record of the site's population, replace-one): every release
of every run of every algorithm is charged to the site's lifetime ledger
(:mod:`fedpca.site.ledger`) and the composition of all of them (PLD) stays within the
lifetime ``(epsilon, delta)`` below, what the site spends in a calendar day (UTC) within
``daily-epsilon`` and in any 7 x 24 hours within ``weekly-epsilon`` (same delta, same
accountant). Those windows run on the site's clock: unlike a run id, which the coordinator
picks, it cannot reset them. ``run-epsilon`` only calibrates the noise (a full run of an
allowed algorithm spends at most that much); it limits nothing by itself. A site that
answers inside secure sums (``min-sites = M``) adds only ``1/M`` of the noise variance, so
its policy also bounds, with ``worst-case-epsilon`` at the same delta, what a coordinator that
bypasses the secure sum would see: the composition of the site's own shares alone. The budget
belongs to the *population* (the people whose records these are), not to a data file: a
re-exported or changed file holds the same people; a site that really holds a disjoint cohort
declares a new ``population`` here, never the coordinator.

The commented file ``fedpca site init`` writes, with what secure sums' worst case costs at
its budget, is :mod:`fedpca.site.policy_template`'s.
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedpca.algorithms.centring import CentredPolicy
from fedpca.algorithms.site_limits import POLICY_KEYS as LIMIT_KEYS
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.algorithms.specs import SPECS
from fedpca.data.contract import Contract, load_contract
from fedpca.data.files import file_fingerprint, load_site_file
from fedpca.data.tables import read_table
from fedpca.errors import ConfigurationError
from fedpca.dp.calibration import ACCOUNTING_MODES, calibrate_gaussian
from fedpca.dp.exact_noise import EXACT
from fedpca.file_modes import SHARED_ANY, refuse_shared
from fedpca.secure.roster import normal_fingerprint
from fedpca.site.ledger_identity import LedgerWitness
from fedpca.site.policy_reader import PolicyError, PolicyReader
from fedpca.data.genotypes import GenotypeRows
from fedpca.site.genotype_site import GenotypeFiles, genotype_files
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import planned_run
from fedpca.site.ledger import SiteLedger
from fedpca.site.start_bases import start_files

logger = logging.getLogger(__name__)

#: The federated algorithms a site may allow (tables ``[algorithms.NAME]``).
POLICY_ALGORITHMS = tuple(SPECS)
#: A site refuses a delta above this many times ``1/n``: delta must be well below ``1/n``,
#: or a mechanism may publish a whole record with probability delta.
MAX_DELTA_TIMES_N = 0.1
#: Rounds a site calibrates a multi-round algorithm for when its policy does not say.
DEFAULT_ROUNDS = 10
#: Seconds a site may take to answer one request unless its ``[limits] answer-seconds``
#: says otherwise (a secure round at d = 20,000 takes seconds; loopback tests on a loaded
#: 2-core machine took up to a few minutes per message).
DEFAULT_ANSWER_SECONDS = 600.0
#: Address space (MiB) of each process ``fedpca site supernode|superexec`` starts, unless the
#: policy's ``[limits] memory-mib`` says otherwise; the least a policy may set (0: no limit).
DEFAULT_MEMORY_MIB, MIN_MEMORY_MIB = 4096, 512


@dataclass(frozen=True)
class SitePolicyFile:
    """A site's policy as read from its TOML file (see
    :data:`~fedpca.site.policy_template.POLICY_TEMPLATE`).

    Attributes:
        path: the file it was read from.
        name: the site's name.
        data: the records file.
        contract: the consortium's data contract (:mod:`fedpca.data.contract`) the data
            file is read through (a CSV or Parquet table), or ``None``: the data file is a
            numeric matrix. A run made under another contract is refused.
        ledger: the lifetime ledger database.
        population: whose budget this is (the lifetime ledger's key).
        epsilon, delta: lifetime budget (unit: one record of the population, replace-one).
        daily_epsilon, weekly_epsilon: ceilings (at ``delta``) on what the site spends in a
            UTC calendar day and in any 7 x 24 hours.
        run_epsilon: the calibration target: the noise of every release is set so a full
            run spends at most this (at ``delta``); not a ceiling.
        accounting: ``"pld"`` or ``"paper"``.
        clip_norm: public row-norm bound ``C``.
        discrete: whether the site sends distributed discrete Gaussian residues (an exact
            guarantee for every sum of at least ``M`` sites): exactly when it sets
            ``secure_min_sites`` (the verifiable secure aggregation carries nothing else).
        secure_min_sites: ``M`` (>= 2) when the site answers only inside secure sums of at
            least ``M`` sites, else ``None``.
        algorithms: allowed algorithm -> its settings (``rounds``; ``explained-variance``
            and ``start``, its public start files, for DPS-PCA).
        worst_case_epsilon: lifetime bound (at ``delta``) on the unconditional guarantee:
            the site's own shares of its secure releases, seen alone; required with
            ``secure_min_sites``.
        roster, signing_key: the consortium's roster and the site's Ed25519 key for
            fedpca's verifiable secure aggregation (required with ``secure_min_sites``).
        colluders: how many other members the site assumes collude with the coordinator.
        vouched: the key fingerprints of the members the site vouches for, each compared
            with that member out of band (:mod:`fedpca.secure.vouching`).
        vouched_ca: certificate authorities whose member certificates the site accepts as
            its vouching. With ``secure_min_sites``, at least one of the two is required.
        revoked: key fingerprints the site no longer vouches for, however vouched.
        revocation_lists: the vouched CAs' revocation lists (PEM files): a member
            certificate on one does not vouch.
        limits: the most one answer may hold (table ``[limits]``), whatever the
            coordinator asks.
        memory_mib: address space limit (MiB) of the site's processes, 0 for none
            (:mod:`fedpca.deployment.memory_limit` applies it).
        genotypes: a genotype site's files and panel (``data``: the file of its calls).
        answer_seconds: the longest this site may take to answer one request (``[limits]
            answer-seconds``): it states it in the readiness round, and the coordinator's
            fedpca ServerApp waits that long for every answer (a slow site is not dropped).
        moments_share: the share of a centred run's budget its moments release takes
            (``[data] moments-share``; ``None``:
            :class:`~fedpca.algorithms.centring.CentredPolicy`'s default, 0.1, or 0.3 when
            standardising).
        id_column: the name of the site's own record-id column in its export when it is not
            the contract's (``[data] id-column``; it never leaves the site).
    """

    path: Path
    name: str
    data: Path
    ledger: Path
    population: str
    epsilon: float
    delta: float
    daily_epsilon: float
    weekly_epsilon: float
    run_epsilon: float
    accounting: str
    clip_norm: float
    secure_min_sites: int | None
    discrete: bool
    algorithms: dict[str, dict[str, Any]]
    worst_case_epsilon: float | None = None
    roster: Path | None = None
    signing_key: Path | None = None
    colluders: int = 0
    vouched: tuple[str, ...] = ()
    vouched_ca: tuple[Path, ...] = ()
    revoked: tuple[str, ...] = ()
    revocation_lists: tuple[Path, ...] = ()
    limits: SiteLimits = SiteLimits()
    memory_mib: int = DEFAULT_MEMORY_MIB
    contract: Path | None = None
    moments_share: float | None = None
    id_column: str | None = None
    answer_seconds: float = DEFAULT_ANSWER_SECONDS
    genotypes: GenotypeFiles | None = None

    def witness(self) -> LedgerWitness:
        """The identity file beside this policy, of the ledger it names."""
        return LedgerWitness(LedgerWitness.path_for(self.path), self.ledger, self.path)

    def open_ledger(self) -> SiteLedger:
        """The site's lifetime ledger, bounding both guarantees this policy sets, checked
        against its identity file (raises LedgerIdentityError, creating nothing, when it is
        missing, replaced, emptied or older than the site's last recorded release); then
        this policy's :meth:`ledger_settings` are recorded in it, dated, when they differ
        from the last recorded (:meth:`~fedpca.site.ledger.SiteLedger.note_policy`),
        so that every change of the site's own policy shows in its ledger's report."""
        ledger = SiteLedger(self.ledger, self.population, self.epsilon, self.delta,
                            site=self.name, worst_case_epsilon=self.worst_case_epsilon,
                            daily_epsilon=self.daily_epsilon,
                            weekly_epsilon=self.weekly_epsilon, witness=self.witness())
        self._note_policy(ledger)
        return ledger

    def roster_sha256(self) -> str | None:
        """The roster file's SHA-256 (hex), as the ledger records it and ``fedpca site check``
        prints it (``None``: no roster file)."""
        if self.roster is None or not self.roster.is_file():
            return None
        return file_fingerprint(self.roster)

    def ledger_settings(self) -> dict[str, Any]:
        """The settings of this policy that decide what the site spends and releases, by
        their keys in the policy file, as its ledger records them: the budget, the clip
        norm and moments share, the secure sums (the roster by its SHA-256: a new member is a
        change; the signing key by its path), the noise-draw limit, every algorithm allowed
        or not (with its settings), the population, the data file and the contract's hash
        (``none`` without one). Raises ContractError when the contract cannot be read."""
        settings: dict[str, Any] = {
            "site.population": self.population,
            "site.data": str(self.data),
            "site.contract": self.contract_hash() or None,
            "budget.epsilon": self.epsilon,
            "budget.delta": self.delta,
            "budget.daily-epsilon": self.daily_epsilon,
            "budget.weekly-epsilon": self.weekly_epsilon,
            "budget.run-epsilon": self.run_epsilon,
            "budget.worst-case-epsilon": self.worst_case_epsilon,
            "budget.accounting": self.accounting,
            "data.clip-norm": self.clip_norm,
            "data.moments-share": self.moments_share,
            "secure-aggregation.min-sites": self.secure_min_sites or 0,
            "secure-aggregation.colluders": self.colluders,
            "secure-aggregation.discrete": self.discrete,
            # who may be in a secure sum: the roster's content (a new member changes it)
            "secure-aggregation.roster": self.roster_sha256(),
            "secure-aggregation.signing-key": None if self.signing_key is None else str(
                self.signing_key),
            # who the site counts as honest (a new vouch changes its guarantee's footing)
            "secure-aggregation.vouched": sorted(self.vouched),
            "secure-aggregation.vouched-ca": [file_fingerprint(p) if p.is_file() else None
                                              for p in self.vouched_ca],
            "secure-aggregation.revoked": sorted(self.revoked),
            "secure-aggregation.revocation-list": [
                file_fingerprint(p) if p.is_file() else None for p in self.revocation_lists],
            "limits.max-noise-draws": self.limits.max_noise_draws,
        }
        for algorithm in POLICY_ALGORITHMS:
            allowed = self.algorithms.get(algorithm)
            settings[f"algorithms.{algorithm}"] = _allowed(allowed)
        return settings

    def _note_policy(self, ledger: SiteLedger) -> None:
        """Record :meth:`ledger_settings` in ``ledger`` (logging what changed); a contract
        that cannot be read is logged and recorded at the next opening that reads it (the
        run, or ``fedpca site check``, reports it)."""
        try:
            settings = self.ledger_settings()
        except ConfigurationError as exc:
            logger.warning("%s: the policy's settings are not recorded in the ledger this "
                           "time: %s", self.name, exc)
            return
        for change in ledger.note_policy(settings):
            logger.info("%s: policy change recorded in the ledger %s: %s", self.name,
                        self.ledger, change)

    def require_algorithm(self, algorithm: str) -> dict[str, Any]:
        """The site's settings for ``algorithm``; raises unless the policy allows it."""
        if algorithm not in self.algorithms:
            raise PolicyError(
                f"{self.name}: refused: algorithm {algorithm!r} is not allowed by this site's "
                f"policy (allowed: {sorted(self.algorithms)})"
            )
        return self.algorithms[algorithm]

    def rounds(self, algorithm: str) -> int:
        """The rounds this site calibrates a run of ``algorithm`` for (its table's
        ``rounds``; a single-release algorithm ignores it)."""
        return int(self.require_algorithm(algorithm).get("rounds", DEFAULT_ROUNDS))

    def releases_per_run(self, algorithm: str, start: bool = False) -> int:
        """The most releases one run of ``algorithm`` may make at this site (its
        algorithm's releases, one fewer from a public ``start``; a centred run adds its
        moments release: :class:`~fedpca.site.plan.RunPlan`)."""
        return (SPECS[algorithm].releases_per_run(self.rounds(algorithm), start)
                + int(_explains(self.require_algorithm(algorithm))))

    def centred_policy(self, algorithm: str, standardize: bool) -> CentredPolicy:
        """The site's :class:`~fedpca.algorithms.centring.CentredPolicy` for a centred run of
        ``algorithm`` (its moments release, then the algorithm's releases): the run's
        epsilon and delta, its accounting, its moments share, exact noise, its secure sums;
        local moments (every record's own views) for a local-DP algorithm (LDP-PCA), so
        that a coordinator asking for centring cannot weaken its records' unit; the clip
        norm of the centred rows is the contract's default (public). Raises
        :class:`PolicyError` without a contract or with ``paper`` accounting."""
        if self.contract is None:
            raise PolicyError(
                f"{self.name}: refused: a centred run needs the consortium's data contract "
                "(its public ranges set the moments' sensitivity); this site's policy names "
                "none")
        if self.accounting == "paper":
            raise PolicyError(
                f"{self.name}: refused: a centred run splits its budget with the PLD "
                "accountant; this site's policy sets accounting = \"paper\"")
        return CentredPolicy(
            epsilon=self.run_epsilon, delta=self.delta, moments_share=self.moments_share,
            standardize=standardize, accounting=self.accounting, noise_sampler=EXACT,
            secure_min_sites=self.secure_min_sites, discrete=self.discrete,
            algorithm_releases=self.releases_per_run(algorithm),
            local=SPECS[algorithm].local_dp,
            explained_variance=_explains(self.require_algorithm(algorithm)),
            public_scales=self.load_contract().bounds.all_public)

    def privacy_config(self, algorithm: str) -> dict[str, Any]:
        """The run_config privacy keys as this site sets them for one run of ``algorithm``
        (they replace whatever the coordinator sent)."""
        settings = self.require_algorithm(algorithm)
        config: dict[str, Any] = {
            "epsilon": self.run_epsilon,
            "delta": self.delta,
            "accounting": self.accounting,
            "clip-norm": self.clip_norm,
            "secure-min-sites": self.secure_min_sites or 0,
            "discrete": self.discrete,
            "noise-sampler": EXACT,  # never float at a real site: its low bits could leak
        }
        if SPECS[algorithm].multi_round:
            config["rounds"] = self.rounds(algorithm)
        if SPECS[algorithm].explained_variance:
            config[EXPLAINED_VARIANCE] = _explains(settings)
        return config

    def planned_run(self, algorithm: str, start: bool = False) -> list[Release]:
        """The releases of one full run of ``algorithm`` as this site calibrates it (what
        its ledger would charge, :func:`~fedpca.dp.mechanisms.planned_run`), inside
        secure sums of ``min-sites`` when the policy sets it. A site's exact noise is
        charged as the discrete Gaussian replacing each of them, within its grid's rounding
        (:mod:`fedpca.dp.exact_noise`). From a public ``start``: one release fewer."""
        releases = self.releases_per_run(algorithm, start)
        z = calibrate_gaussian(releases, self.run_epsilon, self.delta, self.accounting,
                               paper_rule=SPECS[algorithm].paper_rule).noise_multiplier
        return planned_run(algorithm, releases, z, self.secure_min_sites or 0)

    def load_contract(self) -> Contract | None:
        """The site's data contract (``None`` without one); raises ContractError."""
        return None if self.contract is None else load_contract(self.contract)

    def contract_hash(self) -> str:
        """What a run must name: its contract's hash, its SNP panel's digest, or ``""``."""
        if self.genotypes is not None:
            return self.genotypes.panel.digest
        contract = self.load_contract()
        return "" if contract is None else contract.hash

    def load_records(self) -> np.ndarray | GenotypeRows:
        """The site's records as a run reads them: the data file, validated, its table
        preprocessed by its contract, or its genotype rows (raises InvalidDataError saying
        what is wrong, possibly with counts from the records: for the site's own log)."""
        if self.genotypes is not None:
            return self.genotypes.rows(self.name)
        contract = self.load_contract()
        if contract is None:
            return np.asarray(load_site_file(self.data, site=self.name))
        return contract.preprocess(self.read_table(contract), site=self.name).matrix

    def read_table(self, contract: Contract) -> dict[str, np.ndarray]:
        """The site's table under ``contract``, its own id column named as the contract
        names it (:meth:`~fedpca.data.contract.Contract.site_table`)."""
        return contract.site_table(read_table(self.data, site=self.name), self.id_column)

    def check_records(self, n: int) -> None:
        """Refuse a delta that is not well below ``1/n`` for ``n`` records."""
        if self.delta * n > MAX_DELTA_TIMES_N:
            raise PolicyError(
                f"{self.name}: policy {self.path}: delta={self.delta:g} is not well below "
                f"1/n for the site's records; set delta <= {MAX_DELTA_TIMES_N:g}/n"
            )


#: ``run_config`` keys a real site never takes from the coordinator.
PRIVACY_KEYS = ("epsilon", "delta", "rounds", "accounting", "clip-norm", "secure-min-sites",
                "discrete", "noise-sampler", "explained-variance")
#: The setting of an algorithm with an explained-variance release
#: (:attr:`~fedpca.algorithms.specs.AlgorithmSpec.explained_variance`): one more release.
EXPLAINED_VARIANCE = "explained-variance"


def _allowed(settings: dict[str, Any] | None) -> str:
    """An algorithm's entry as a ledger records it: ``not allowed``, ``allowed`` or
    ``allowed (rounds=10, explained-variance=True)``."""
    if settings is None:
        return "not allowed"
    chosen = ", ".join(f"{key}={value}" for key, value in sorted(settings.items()))
    return f"allowed ({chosen})" if chosen else "allowed"


def _explains(settings: dict[str, Any]) -> bool:
    """Whether an algorithm's settings agree to its explained-variance release."""
    return bool(settings.get(EXPLAINED_VARIANCE, False))


#: Why a policy without spending windows is refused, and what to write (older versions had a
#: per-run ceiling, ``run-epsilon``, which a coordinator reset by starting a new run).
MISSING_WINDOWS = (
    "[budget] sets no {missing}: this site's spending is limited per calendar day (UTC) and "
    "per rolling week, no longer per run (the coordinator picks run ids, so a new run for "
    "every request reset a per-run ceiling); add to [budget], e.g., daily-epsilon = {daily:g} "
    "(one full run a day) and weekly-epsilon = {weekly:g}; run-epsilon now only calibrates "
    "each run's noise (fedpca site init writes all three)"
)


def load_site_policy(path: str | Path) -> SitePolicyFile:
    """Read and check a site policy; every problem is a one-line :class:`PolicyError`."""
    path = Path(path).expanduser().resolve()
    refuse_shared(path, "site policy")
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PolicyError(f"site policy {path} does not exist; write one with fedpca site init")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(f"site policy {path} cannot be read: {exc}") from None
    reader = _Reader(path, raw)
    site, budget = reader.table("site"), reader.table("budget")
    name = reader.text(site, "site", "name")
    epsilon = reader.positive(budget, "budget", "epsilon")
    daily, weekly, run_epsilon = reader.ceilings(budget, epsilon)
    delta = reader.positive(budget, "budget", "delta")
    if delta >= 1:
        raise reader.error(f"budget.delta={delta:g} must be below 1 (and well below 1/n)")
    accounting = reader.text(budget, "budget", "accounting", default="pld")
    if accounting not in ACCOUNTING_MODES:
        raise reader.error(f"budget.accounting={accounting!r} must be one of {ACCOUNTING_MODES}")
    secure = reader.table("secure-aggregation", required=False)
    minimum = secure.get("min-sites", 0)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 0 or minimum == 1:
        raise reader.error(f"secure-aggregation.min-sites={minimum!r} must be 0 or an integer >= 2")
    discrete = secure.get("discrete", bool(minimum))
    if not isinstance(discrete, bool) or discrete != bool(minimum):
        raise reader.error(
            f"secure-aggregation.discrete={discrete!r} with min-sites={minimum}: a real site "
            "answers secure sums only through fedpca's verifiable secure aggregation, which "
            "carries distributed discrete Gaussian residues, so discrete follows min-sites; "
            "remove the discrete line"
        )
    worst_case = None
    if "worst-case-epsilon" in budget or minimum:
        worst_case = reader.positive(budget, "budget", "worst-case-epsilon", hint=(
            f"secure-aggregation.min-sites={minimum} needs it: what a coordinator that "
            "bypasses the secure sum may learn over the site's lifetime (the template "
            "fedpca site init writes lists what each M costs)") if minimum else "")
        if worst_case < epsilon:
            raise reader.error(
                f"budget.worst-case-epsilon={worst_case:g} is below budget.epsilon="
                f"{epsilon:g}; the worst case is never below the guarantee it widens"
            )
    members: dict[str, Any] = {}  # who the site joins secure sums with, and whom it trusts
    colluders = secure.get("colluders", 0)
    if not isinstance(colluders, int) or isinstance(colluders, bool) or colluders < 0:
        raise reader.error(f"secure-aggregation.colluders={colluders!r} must be an integer >= 0")
    if minimum:
        hint = ("min-sites needs it: the site joins only fedpca's verifiable secure "
                "aggregation, which checks every member against the consortium's roster")
        members["roster"] = reader.file_path(secure, "secure-aggregation", "roster", hint)
        members["signing_key"] = reader.file_path(secure, "secure-aggregation", "signing-key",
                                                  hint)
        refuse_shared(members["roster"], "roster")
        members["vouched"], members["vouched_ca"] = reader.vouching(secure)
        members["revoked"], members["revocation_lists"] = reader.fingerprints_and_files(
            secure, "revoked", "revocation-list")
    ledger = reader.file_path(site, "site", "ledger")
    refuse_shared(ledger, "ledger", SHARED_ANY)
    contract = reader.file_path(site, "site", "contract") if "contract" in site else None
    if contract is not None:
        refuse_shared(contract, "data contract")
    data = reader.table("data", required=False)
    genotypes = genotype_files(reader.error, path.parent, site, data, reader.algorithms())
    return SitePolicyFile(
        path=path,
        name=name,
        data=genotypes.data if genotypes else reader.file_path(site, "site", "data"),
        ledger=ledger,
        population=reader.text(site, "site", "population", default=name),
        epsilon=epsilon,
        delta=delta,
        daily_epsilon=daily,
        weekly_epsilon=weekly,
        run_epsilon=run_epsilon,
        accounting=accounting,
        clip_norm=genotypes.panel.row_norm if genotypes else reader.positive(
            data, "data", "clip-norm", default=1.0),
        secure_min_sites=minimum or None,
        discrete=discrete,
        algorithms=reader.algorithms(),
        worst_case_epsilon=worst_case,
        colluders=colluders,
        **members,
        limits=reader.limits(),
        memory_mib=reader.memory_mib(),
        answer_seconds=reader.positive(reader.table("limits", required=False), "limits",
                                       "answer-seconds", default=DEFAULT_ANSWER_SECONDS),
        contract=contract,
        moments_share=reader.share(data, "data", "moments-share"),
        id_column=reader.text(data, "data", "id-column") if "id-column" in data else None,
        genotypes=genotypes,
    )


class _Reader(PolicyReader):
    """A site policy's own keys, read with :class:`PolicyReader`'s typed access."""

    def ceilings(self, budget: dict, epsilon: float) -> tuple[float, float, float]:
        """``daily-epsilon``, ``weekly-epsilon`` and ``run-epsilon`` (default: the daily
        ceiling), each at most the next: run <= daily <= weekly <= lifetime."""
        missing = [key for key in ("daily-epsilon", "weekly-epsilon") if key not in budget]
        if missing:
            run = self.positive(budget, "budget", "run-epsilon", default=epsilon)
            raise self.error(MISSING_WINDOWS.format(
                missing=" and ".join(missing), daily=run, weekly=min(epsilon, 2 * run)))
        daily = self.positive(budget, "budget", "daily-epsilon")
        weekly = self.positive(budget, "budget", "weekly-epsilon")
        run = self.positive(budget, "budget", "run-epsilon", default=daily)
        order = [("run-epsilon", run), ("daily-epsilon", daily), ("weekly-epsilon", weekly),
                 ("epsilon", epsilon)]
        for (small, low), (large, high) in zip(order, order[1:]):
            if low > high:
                raise self.error(
                    f"budget.{small}={low:g} exceeds budget.{large}={high:g}; set "
                    "run-epsilon <= daily-epsilon <= weekly-epsilon <= epsilon"
                )
        return daily, weekly, run

    def memory_mib(self) -> int:
        """``[limits] memory-mib``: 0 or at least :data:`MIN_MEMORY_MIB`."""
        value = self.table("limits", required=False).get("memory-mib", DEFAULT_MEMORY_MIB)
        if (not isinstance(value, int) or isinstance(value, bool)
                or (value != 0 and value < MIN_MEMORY_MIB)):
            raise self.error(
                f"limits.memory-mib={value!r} must be 0 (no limit) or an integer >= "
                f"{MIN_MEMORY_MIB}: a SuperNode alone maps about 450 MiB"
            )
        return value

    def file_path(self, table: dict, where: str, key: str, hint: str = "") -> Path:
        return (self.path.parent / self.text(table, where, key, hint=hint)).resolve()

    def vouching(self, secure: dict[str, Any]) -> tuple[tuple[str, ...], tuple[Path, ...]]:
        """``[secure-aggregation] vouched`` (key fingerprints) and ``vouched-ca`` (CA
        certificate files); a secure site needs one of them."""
        vouched, authorities = self.fingerprints_and_files(secure, "vouched", "vouched-ca")
        if not vouched and not authorities:
            raise self.error(
                "secure-aggregation.min-sites needs vouched = [\"FINGERPRINT\", ...]: the key "
                "fingerprints of the members this site vouches for (fedpca site check lists "
                "the roster's; read each to someone you know at that member, by phone or in "
                "person, never through the coordinator), or vouched-ca = \"ca.pem\", a "
                "certificate authority that is not the coordinator; only vouched members "
                "count toward min-sites"
            )
        return vouched, authorities

    def fingerprints_and_files(self, secure: dict[str, Any], fingerprints_key: str,
                               files_key: str) -> tuple[tuple[str, ...], tuple[Path, ...]]:
        """The key fingerprints under ``fingerprints_key`` (a list) and the files under
        ``files_key`` (a name or a list of them, relative to the policy) of
        ``[secure-aggregation]``."""
        fingerprints = secure.get(fingerprints_key, [])
        files = secure.get(files_key, [])
        files = [files] if isinstance(files, str) else files
        if (not isinstance(fingerprints, list) or not isinstance(files, list)
                or not all(isinstance(v, str) for v in [*fingerprints, *files])):
            raise self.error(f"secure-aggregation.{fingerprints_key} must be a list of key "
                             f"fingerprints and {files_key} a file name or a list of them")
        try:
            normal = tuple(normal_fingerprint(v) for v in fingerprints)
        except ConfigurationError as exc:
            raise self.error(f"secure-aggregation.{fingerprints_key}: {exc}") from None
        return normal, tuple((self.path.parent / name).resolve() for name in files)

    def limits(self) -> SiteLimits:
        """The table ``[limits]`` (absent keys: the public defaults)."""
        table = self.table("limits", required=False)
        known = {*LIMIT_KEYS.values(), "memory-mib", "answer-seconds"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise self.error(f"unknown keys {unknown} in [limits]; known: {sorted(known)}")
        values = {field: table[key] for field, key in LIMIT_KEYS.items() if key in table}
        try:
            return SiteLimits(**values)
        except ConfigurationError as exc:
            raise self.error(str(exc)) from None

    def algorithms(self) -> dict[str, dict[str, Any]]:
        allowed = self.table("algorithms", required=False)
        unknown = sorted(set(allowed) - set(POLICY_ALGORITHMS))
        if unknown:
            raise self.error(f"unknown algorithms {unknown}; known: {list(POLICY_ALGORITHMS)}")
        if not allowed:
            raise self.error("no [algorithms.NAME] table: the site would take part in nothing")
        for name, settings in allowed.items():
            rounds = settings.get("rounds", DEFAULT_ROUNDS)
            if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
                raise self.error(f"algorithms.{name}.rounds must be an integer >= 1")
            explains = settings.get(EXPLAINED_VARIANCE, False)
            if not isinstance(explains, bool) or (explains and not SPECS[name].explained_variance):
                takers = [spec.name for spec in SPECS.values() if spec.explained_variance]
                raise self.error(f"algorithms.{name}.{EXPLAINED_VARIANCE} must be true or "
                                 f"false, and only {', '.join(takers)} takes it")
            try:  # the files are read when a run names one (fedpca.site.start_bases)
                start_files(settings, self.path.parent, name)
            except ConfigurationError as exc:
                raise self.error(str(exc)) from None
        return {name: dict(settings) for name, settings in allowed.items()}

"""The commented policy file ``fedpca site init`` writes, and what secure sums' worst case
costs at its budget.

:data:`POLICY_TEMPLATE` is the file's text and :func:`write_policy_template` writes it (never
over an existing file), checks that it loads (:func:`~fedpca.site.policy.load_site_policy`),
creates the site's empty ledger with its identity file when neither exists, and records the
policy as written in that ledger (its later edits show as changes). Its budget is
:data:`TEMPLATE_EPSILON` over the lifetime, spending windows of
:data:`TEMPLATE_DAILY_EPSILON` a day and :data:`TEMPLATE_WEEKLY_EPSILON` a week, and
:data:`TEMPLATE_RUN_EPSILON` per run's calibration. :func:`worst_cases` is the table the
template lists under ``worst-case-epsilon``: for each secure-sum minimum ``M``, what one run
and the runs the lifetime allows cost against a coordinator that bypasses the secure sum
(one site's share alone, multiplier ``z / sqrt(M)``), so that a site sets its worst-case
bound knowing its price. How the file is read and what each key guarantees:
:mod:`fedpca.site.policy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from fedpca.algorithms.specs import DEFAULT_ALGORITHM, SPECS, AlgorithmSpec
from fedpca.dp.calibration import calibrate_gaussian, pld_epsilon
from fedpca.file_modes import create_owner_only
from fedpca.site.ledger_lifecycle import create_site_ledger
from fedpca.site.policy import (
    DEFAULT_ANSWER_SECONDS,
    DEFAULT_ROUNDS,
    DEFAULT_MEMORY_MIB,
    MIN_MEMORY_MIB,
    PolicyError,
    load_site_policy,
)

__all__ = [
    "POLICY_TEMPLATE",
    "TEMPLATE_DAILY_EPSILON",
    "TEMPLATE_EPSILON",
    "TEMPLATE_MIN_SITES",
    "TEMPLATE_RUN_EPSILON",
    "TEMPLATE_WEEKLY_EPSILON",
    "WorstCase",
    "worst_cases",
    "write_policy_template",
]

#: The policy file ``fedpca site init`` writes (:func:`write_policy_template`).
POLICY_TEMPLATE = """\
# fedpca site policy. This file, not the coordinator, sets this site's privacy.
# The SuperNode names it: flower-supernode ... --node-config 'policy="{path}"'
# Relative paths below are relative to this file's folder.

[site]
name = "{name}"                 # the site's name in results and logs
{records_lines}
ledger = "{ledger}"             # the lifetime privacy ledger (SQLite; fedpca site init
                                # created it; never created again silently: its identity
                                # and last release are in the .ledger-id.json file beside
                                # this one)
# The budget belongs to the people whose records these are, not to a file: a changed or
# re-exported file of the same people keeps this population (and its spent budget).
population = "{name}"

[budget]
epsilon = {epsilon!r}                   # lifetime epsilon: every run and algorithm, PLD-composed
delta = {delta:.0e}                  # lifetime delta; must be <= 0.1 / (number of records)
daily-epsilon = {daily_epsilon!r}             # ceiling on the releases of one UTC calendar day
weekly-epsilon = {weekly_epsilon!r}            # ceiling on the releases of any 7 x 24 hours
run-epsilon = {run_epsilon!r}               # the noise: releases calibrated so a full run spends
                                # at most this (not a limit: the coordinator picks run ids;
                                # the ceilings above hold whatever it does)
accounting = "pld"              # pld (tight) or paper (the papers' looser closed forms)
# worst-case-epsilon: required with secure-aggregation.min-sites = M. Inside a secure sum
# the site adds only its share of the noise (sigma/sqrt(M)): the budget above holds if every
# sum holds >= M honest sites' shares; a coordinator that bypasses the protocol sees the
# share alone. With the values above ({releases} releases a run of {algorithm}), the worst-case
# epsilon is (the recorded one in brackets):
{worst_case_table}
# worst-case-epsilon = {suggestion:g}

[data]
{clip_line}
# moments-share = 0.3           # a centred run (run_config centring): the share of its budget
                                # spent on the column means (and scales); default 0.1, 0.3
                                # when standardising. Its rows are clipped to the contract's C
# id-column = "patient_id"      # your export's record-id column, if the contract's id column
                                # has another name (ids never leave this site)

[secure-aggregation]
min-sites = 0                   # M >= 2: answer only inside secure sums of >= M honest
                                # sites (each site then adds sigma/sqrt(M)), always as
                                # distributed discrete Gaussian residues (an exact guarantee
                                # for every sum of >= M sites); 0: per-site noise
# With min-sites, the site joins fedpca's verifiable secure aggregation only:
# roster = "roster.toml"        # the consortium's members and public keys (from the
                                # consortium, never from the coordinator)
# signing-key = "secagg.pem"    # this site's key (fedpca deploy secagg-key writes it)
# colluders = 0                 # members assumed to collude with the coordinator
# vouched = []                  # key fingerprints of the members this site vouches for (each
                                # read to you by someone you know at that member, never via
                                # the coordinator; fedpca site check lists the roster's):
                                # only they count toward min-sites, any other member of a
                                # run counts as a colluder
# vouched-ca = "ca.pem"         # or: a CA (not the coordinator) whose member certificates
                                # for this consortium count as vouching
# revoked = []                  # key fingerprints this site no longer vouches for
# revocation-list = "crl.pem"   # the vouched CA's revocation list (refused once stale)

[limits]                        # what one answer may hold, whatever the coordinator asks
max-answer-mb = 512             # the answer's size (DPS-PCA: d x k; k-plane: clusters x d^2/2)
max-clusters = 100              # SuLQ k-plane clusters one request may ask for
max-noise-draws = 256           # exact discrete Gaussian draws per coordinate of one secure-sum
                                # release (wide statistics need more: d = 20,000 about 64,
                                # d = 100,000 about 256); each costs ~0.07 us per coordinate
memory-mib = {memory_mib}               # address space of each site process started by fedpca
                                # site supernode / superexec (Linux RLIMIT_AS, inherited by
                                # the ClientApps): a FAB or request that inflates fails there,
                                # not the host; >= {min_memory_mib}, or 0 to leave it to the OS
                                # (systemd MemoryMax=, prlimit, a container's limit)
answer-seconds = {answer_seconds:g}           # the longest this site may take to answer a request:
                                # stated in each run's readiness round, the coordinator's
                                # fedpca ServerApp waits that long before giving up on it

# One table per algorithm this site takes part in; a request for any other is refused.
{algorithm_tables}"""

#: The template's lifetime, weekly, daily and per-run (calibration) epsilon.
TEMPLATE_EPSILON, TEMPLATE_WEEKLY_EPSILON, TEMPLATE_DAILY_EPSILON, TEMPLATE_RUN_EPSILON = (
    4.0, 2.0, 1.0, 1.0)
#: The secure-sum minimums whose worst case the template lists.
TEMPLATE_MIN_SITES = (3, 10, 100)


@dataclass(frozen=True)
class WorstCase:
    """What a secure-sum minimum ``M`` costs against a coordinator that bypasses the sum:
    the unconditional epsilon of one run and of the ``runs`` runs the lifetime allows."""

    min_sites: int
    run_epsilon: float
    runs: int
    lifetime_epsilon: float
    recorded_lifetime: float


def worst_cases(
    epsilon: float, run_epsilon: float, delta: float, releases: int,
    min_sites: tuple[int, ...] = TEMPLATE_MIN_SITES,
) -> list[WorstCase]:
    """For each ``M``: runs of ``releases`` continuous Gaussian releases, each run calibrated
    to ``run_epsilon`` and as many as the lifetime ``epsilon`` allows (PLD), seen through one
    site's share (multiplier ``z / sqrt(M)``) instead of the sum's (``z``)."""
    z = calibrate_gaussian(releases, run_epsilon, delta).noise_multiplier
    runs = 1
    while pld_epsilon((z,) * releases * (runs + 1), delta) <= epsilon:
        runs += 1
    recorded = pld_epsilon((z,) * releases * runs, delta)
    return [
        WorstCase(m, pld_epsilon((z / math.sqrt(m),) * releases, delta), runs,
                  pld_epsilon((z / math.sqrt(m),) * releases * runs, delta), recorded)
        for m in min_sites
    ]


def _worst_case_lines(cases: list[WorstCase], run_epsilon: float) -> str:
    """The template's table: worst-case epsilon per ``M``, the recorded one in brackets."""
    rows = [("", [f"M={c.min_sites}" for c in cases]),
            (f"one run ({run_epsilon:.2f})", [f"{c.run_epsilon:.2f}" for c in cases]),
            (f"{cases[0].runs} runs ({cases[0].recorded_lifetime:.2f})",
             [f"{c.lifetime_epsilon:.2f}" for c in cases])]
    return "\n".join(f"#   {label:<18}" + "".join(f"{cell:>8}" for cell in cells)
                     for label, cells in rows)


#: The template's lines of a genotype site: its genotype files and panel instead of a data
#: file.
GENOTYPE_LINES = ('genotypes = "{prefix}"  # PLINK 1 PREFIX (.bed/.bim/.fam), PLINK 2 '
                  'PREFIX.pgen or a .vcf/.vcf.gz/.bcf (rows: individuals)\n'
                  'panel = "{panel}"  # the consortium\'s SNP panel: its digest '
                  "is the run's contract")
#: The template's clip norm: a table's, or a genotype site's (its panel's row-norm).
CLIP_LINE = "clip-norm = 1.0                 # public bound C: every row is scaled to norm <= C"
GENOTYPE_CLIP_LINE = "# the panel's row-norm bounds every genotype row (no clip-norm here)"
#: A multi-round algorithm's ``rounds`` line in its table.
ROUNDS_LINE = ("rounds = {rounds}                     # rounds calibrated for (the coordinator "
               "may ask fewer)")
#: The commented line of an algorithm with an explained-variance release.
EXPLAINED_VARIANCE_LINES = """\
# explained-variance = true     # one more release: the final basis's Rayleigh quotients and
                                # trace (k + 1 numbers), planned within the same budget"""
#: The commented line of an algorithm that may start from a public basis.
START_LINES = """\
# start = "start.npy"           # public start bases this site holds (a file or a list,
                                # relative to this file): a run naming one by its SHA-256
                                # (run_config start-sha256) starts from this site's own copy,
                                # without the initialisation release (one release fewer).
                                # Only a basis computed from public data alone costs nothing"""


def algorithm_table(spec: AlgorithmSpec, rounds: int) -> str:
    """``spec``'s ``[algorithms.NAME]`` table as the template writes it: its ``rounds``
    (a multi-round algorithm), then its optional settings commented out."""
    lines = [f"[algorithms.{spec.name}]"]
    lines += [ROUNDS_LINE.format(rounds=rounds)] if spec.multi_round else []
    lines += [EXPLAINED_VARIANCE_LINES] if spec.explained_variance else []
    lines += [START_LINES] if spec.public_start else []
    return "\n".join(lines) + "\n"


def algorithm_tables(rounds: int, genotypes: bool) -> str:
    """The tables of the algorithms a new site takes part in
    (:attr:`~fedpca.algorithms.specs.AlgorithmSpec.site_template`; a genotype site's:
    those it answers, :attr:`~fedpca.algorithms.specs.AlgorithmSpec.genotype_rows`)."""
    return "\n".join(algorithm_table(spec, rounds) for spec in SPECS.values()
                     if spec.site_template and (spec.genotype_rows or not genotypes))

#: The policy template's line naming no contract.
NO_CONTRACT_LINE = ('# contract = "contract.toml"  # the consortium\'s data contract: the data '
                    "file is then\n                                # a table read through it "
                    "(a CSV or Parquet header)")


def write_policy_template(
    path: str | Path, name: str, data: str | None, ledger: str = "ledger.sqlite",
    contract: str | None = None,
    delta: float = 1e-7, rounds: int = DEFAULT_ROUNDS,
    genotypes: tuple[str, str] | None = None,
    daily_epsilon: float = TEMPLATE_DAILY_EPSILON,
    weekly_epsilon: float = TEMPLATE_WEEKLY_EPSILON,
) -> Path:
    """Write a commented policy file to ``path`` (refuses to overwrite one), with what the
    worst case of secure sums costs at its budget (:func:`worst_cases`), and its empty
    ledger with the identity file beside the policy when neither exists yet
    (:func:`~fedpca.site.ledger_lifecycle.create_site_ledger`). Its spending windows
    are ``daily_epsilon`` and ``weekly_epsilon`` (a demonstration that runs several times a
    day raises them, up to the lifetime :data:`TEMPLATE_EPSILON`). ``contract`` names the
    consortium's data contract (relative to the policy's folder); ``genotypes``, a genotype
    site's PLINK prefix and SNP panel instead of ``data`` (:mod:`fedpca.site.genotype_site`:
    its clip norm is the panel's, it allows only the algorithms a genotype site answers)."""
    target = Path(path)
    if target.exists():
        raise PolicyError(f"{target} exists; a site policy is never overwritten: edit it")
    releases = SPECS[DEFAULT_ALGORITHM].releases_per_run(rounds)
    cases = worst_cases(TEMPLATE_EPSILON, TEMPLATE_RUN_EPSILON, delta, releases)
    text = POLICY_TEMPLATE.format(
        path=target.resolve(), name=name, ledger=ledger, delta=delta, rounds=rounds,
        records_lines=_records_lines(data, contract, genotypes),
        clip_line=CLIP_LINE if genotypes is None else GENOTYPE_CLIP_LINE,
        algorithm_tables=algorithm_tables(rounds, genotypes is not None),
        epsilon=TEMPLATE_EPSILON, run_epsilon=TEMPLATE_RUN_EPSILON, releases=releases,
        algorithm=DEFAULT_ALGORITHM,
        daily_epsilon=daily_epsilon, weekly_epsilon=weekly_epsilon,
        worst_case_table=_worst_case_lines(cases, TEMPLATE_RUN_EPSILON),
        suggestion=math.ceil(cases[0].lifetime_epsilon),
        memory_mib=DEFAULT_MEMORY_MIB, min_memory_mib=MIN_MEMORY_MIB,
        answer_seconds=DEFAULT_ANSWER_SECONDS,
    )
    create_owner_only(target, text.encode("utf-8"))
    policy = load_site_policy(target)  # what init writes must load
    create_site_ledger(policy.witness())
    policy.open_ledger()  # records the policy as written: its later edits show as changes
    return target


def _records_lines(data: str | None, contract: str | None,
                   genotypes: tuple[str, str] | None) -> str:
    """The ``[site]`` lines naming the records: a data file (and its contract), or a
    genotype site's PLINK prefix and panel."""
    if genotypes is not None:
        return GENOTYPE_LINES.format(prefix=genotypes[0], panel=genotypes[1])
    return (f'data = "{data}"                 # the records: .npy, .csv or .parquet (rows = '
            f'records)\n' + (NO_CONTRACT_LINE if contract is None else
                             f'contract = "{contract}"        # the consortium\'s data contract'))

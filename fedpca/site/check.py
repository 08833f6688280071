"""What ``fedpca site check`` tells a site's operator before the first run, without creating
anything: the paths its policy names, its data contract (name and hash) and what the contract
finds in its table, its records as a run reads them, the delta rule, the clip norm each kind
of run uses and how many rows it clips (plain, and with a contract centred and standardised;
a genotype site's panel, its fileset's check against it and its row-norm's clipping),
whether its ledger is the site's own and complete (its identity and high-water mark:
:mod:`fedpca.site.ledger_identity`), what it has spent and how many runs of each kind it
offers still fit (:mod:`fedpca.site.offers`: what its policy allows in its mode, each with its
plan's releases), and the public start bases it holds (by the hash a run names).

A problem found here would otherwise show up in the middle of a run, after the other sites
have paid for their releases. The report is for the operator's own terminal: it gives
counts from the records (n, d, the share of rows clipped, bad cells) but never a record's
value, and it is never sent anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fedpca.algorithms.centring import default_clip_norm
from fedpca.data.genotypes import GenotypeRows
from fedpca.errors import FedPCAError
from fedpca.secure.roster import load_roster
from fedpca.site.ledger_identity import utc
from fedpca.dp.site_data import SiteData
from fedpca.site.ledger_report import counted_runs, summarize
from fedpca.site.policy import SitePolicyFile
from fedpca.site.offers import Offer, site_offers
from fedpca.site.real_site import policy_vouched
from fedpca.site.start_bases import accepted_starts


@dataclass
class SiteCheck:
    """The report: ``lines`` to print, and the ``problems`` among them (none: ready)."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        """A line of the report."""
        self.lines.append(line)

    def problem(self, line: str) -> None:
        """A line of the report that is a problem."""
        self.lines.append(f"PROBLEM: {line}")
        self.problems.append(line)


def check_site(policy: SitePolicyFile) -> SiteCheck:
    """Check a loaded site ``policy`` as a run would use it; creates nothing (opening the
    ledger records the policy's settings in it when they changed,
    :meth:`~fedpca.site.policy.SitePolicyFile.open_ledger`)."""
    report = SiteCheck()
    _check_paths(policy, report)
    if _check_contract(policy, report):
        _check_records(policy, report)
    _check_roster(policy, report)
    _check_starts(policy, report)
    _check_ledger(policy, report)
    return report


def _check_starts(policy: SitePolicyFile, report: SiteCheck) -> None:
    """Each public start basis the policy holds, by the SHA-256 a run must name
    (:mod:`fedpca.site.start_bases`); a file that cannot be used is a problem."""
    for algorithm in policy.algorithms:
        try:
            starts = accepted_starts(policy, algorithm)
        except FedPCAError as exc:
            report.problem(str(exc))
            continue
        for digest, start in sorted(starts.items()):
            report.add(f"start        {algorithm} from {start.path} ({start.shape[0]} x "
                       f"{start.shape[1]}) sha256 {digest} (a run names it as start-sha256)")


def _check_roster(policy: SitePolicyFile, report: SiteCheck) -> None:
    """The roster's digest, every member's key fingerprint (to compare with the member out
    of band), whom the site vouches for, and the ``M`` it can actually get."""
    if policy.secure_min_sites is None or policy.roster is None or not policy.roster.is_file():
        return
    try:
        roster = load_roster(policy.roster)
        vouched = policy_vouched(policy, roster)
    except FedPCAError as exc:
        report.problem(str(exc))
        return
    report.add(f"roster       {roster.consortium}, {len(roster.names)} members, digest "
               f"{roster.digest} (every member should print the same), file sha256 "
               f"{policy.roster_sha256()} (the ledger's secure-aggregation.roster)")
    revoked = set(policy.revoked)
    for name in roster.names:
        mark = ("vouched" if name in vouched else
                "REVOKED: counts as a colluder" if roster.fingerprint(name) in revoked else
                "NOT vouched: counts as a colluder")
        report.add(f"  member     {name:<20} {roster.fingerprint(name)}  {mark}")
    honest = len(vouched) - policy.colluders
    line = (f"{len(vouched)} vouched members (this site included), colluders={policy.colluders}: "
            f"a sum can keep at most {honest} honest members this site vouched for")
    if honest < policy.secure_min_sites:
        report.problem(f"{line}, fewer than min-sites={policy.secure_min_sites}: every secure "
                       "run would be refused; vouch for more members (compare fingerprints "
                       "with them) or lower min-sites")
    else:
        report.add(f"secure sums  {line} (min-sites={policy.secure_min_sites})")


def _check_paths(policy: SitePolicyFile, report: SiteCheck) -> None:
    """Every file the policy names, resolved, and whether it exists."""
    report.add(f"policy       {policy.path}")
    named = {"data": policy.data, "contract": policy.contract, "ledger": policy.ledger,
             "identity": policy.witness().path, "roster": policy.roster,
             "signing key": policy.signing_key}
    for what, path in named.items():
        if path is None:
            continue
        exists = path.is_file()
        report.add(f"{what:<12} {path} ({'exists' if exists else 'does not exist'})")
        if not exists and what in _MISSING:  # the ledger's check says what to do about it
            report.problem(_MISSING[what].format(path=path, policy=policy.path))


#: What to do about each missing file other than the ledger and its identity file.
_MISSING = {
    "data": "the data file {path} does not exist: fix [site] data in {policy} (relative "
            "to the policy's folder) or put the file there",
    "contract": "the data contract {path} does not exist: fix [site] contract in {policy} "
                "(relative to the policy's folder) or put the consortium's file there",
    "roster": "the roster {path} does not exist: put the consortium's roster there",
    "signing key": "the signing key {path} does not exist: fedpca deploy secagg-key writes it",
}


def _check_contract(policy: SitePolicyFile, report: SiteCheck) -> bool:
    """The contract's name and hash, and what it finds in the site's table (problems and
    notes, with counts); whether the records are worth loading."""
    if policy.contract is None:
        return True
    if not policy.contract.is_file():
        return False
    try:
        contract = policy.load_contract()
        report.add(f"contract     {contract.name} sha256 {contract.hash} (a run must name "
                   "this hash)")
        if not policy.data.is_file():
            return False
        found = contract.check(policy.read_table(contract))
    except FedPCAError as exc:
        report.problem(str(exc))
        return False
    for problem in found.problems:
        report.problem(f"the table does not meet the contract: {problem}")
    for note in found.notes:
        report.add(f"table        {note} (shown here only, never sent)")
    return found.ok


def _check_records(policy: SitePolicyFile, report: SiteCheck) -> None:
    """The records loaded and validated as a run loads them; n, d, the delta rule and the
    share of rows the clip norm clips."""
    if not policy.data.is_file():
        return
    try:
        records = policy.load_records()
    except FedPCAError as exc:
        report.problem(f"the data cannot be used: {exc}")
        return
    n, d = records.shape
    report.add(f"records      n={n} (sent to the coordinator with every answer), d={d}")
    try:
        policy.check_records(n)
        report.add(f"delta        {policy.delta:g} <= 0.1/n: ok")
    except FedPCAError as exc:
        report.problem(str(exc))
    if isinstance(records, GenotypeRows):
        _check_genotypes(records, report)
        return
    for label, clip_norm, rows in _clipped_runs(policy, records):
        share = SiteData.prepare(rows, clip_norm, site=policy.name).clip.clipped_fraction
        advice = ("; most rows lose length: "
                  + ("centre the runs (run_config centring) or raise [data] clip-norm"
                     if label == "plain run" else "the contract's ranges are wide for these "
                     "rows") if share > 0.5 else "")
        report.add(f"clip norm    {label}: {clip_norm:.4g}, clips {share:.1%} of the rows "
                   f"(shown here only, never sent){advice}")


def _check_genotypes(rows: GenotypeRows, report: SiteCheck) -> None:
    """A genotype site's panel (its digest: what a run names as its contract), its fileset's
    check against it (passed: the rows loaded) and the share of rows its row-norm clips."""
    panel = rows.panel
    report.add(f"panel        {panel.name!r}: {panel.d} SNPs, row-norm {panel.row_norm:g}, "
               f"digest {panel.digest} (a run must name it as its contract)")
    report.add(f"genotypes    {rows.fileset.data_file} ({rows.fileset.FORMAT}): every panel SNP "
               "present, alleles as the panel's")
    if rows.frequencies is None:  # a private panel: the run releases the frequencies
        report.add(f"frequencies  private: each run releases them from the sites' allele "
                   f"counts first; the row-norm {panel.row_norm:g} clips rows standardised "
                   "with them")
        return
    share = float((rows.row_scales() < 1).mean())
    report.add(f"clip norm    the panel's row-norm {panel.row_norm:g} clips {share:.1%} of the "
               "rows (shown here only, never sent)")


def _clipped_runs(policy: SitePolicyFile, records: np.ndarray
                  ) -> list[tuple[str, float, np.ndarray]]:
    """Each kind of run the site may be asked for, with the clip norm it uses and the rows
    it clips: a plain run clips the rows as they are to the policy's ``[data] clip-norm``; a
    centred (standardised) run clips the rows centred (and scaled) with the released mean
    (and scale) to the contract's public norm, here approximated with this site's own mean
    and standard deviation (computed here, never sent), or the contract's public scale where
    it states one."""
    runs = [("plain run", policy.clip_norm, records)]
    contract = policy.load_contract()
    if contract is None:
        return runs
    mean, sd = records.mean(axis=0), records.std(axis=0)
    bounds = contract.bounds
    public = np.array([np.nan if s is None else s for s in bounds.scales] or [np.nan] * len(sd))
    for standardize, label in ((False, "centred run"), (True, "standardised run")):
        # a standardised run divides by the contract's public scales where it states them
        scale = np.where(np.isnan(public), np.where(sd > 0, sd, 1.0), public) if (
            standardize) else 1.0
        runs.append((label, default_clip_norm(contract.bounds, standardize),
                     (records - mean) / scale))
    return runs


def _check_ledger(policy: SitePolicyFile, report: SiteCheck) -> None:
    """Whether the ledger passes its identity check; if it does, what it has spent, what
    remains, and how many runs of each kind the site offers the remaining lifetime budget
    allows."""
    try:
        ledger = policy.open_ledger()
    except FedPCAError as exc:
        report.problem(str(exc))
        return
    state = ledger.verify()
    newest = "no release yet" if state.newest is None else (
        f"newest release {utc(state.newest.time)}")
    report.add(f"ledger id    {state.identity}: as recorded beside the policy, no recorded "
               f"release missing ({newest})")
    summary = summarize(ledger)
    report.add(f"lifetime     epsilon {summary['epsilon_budget']:g} at delta "
               f"{summary['delta']:g}: spent {summary['epsilon_spent']:.4f} in "
               f"{summary['releases']} releases, remaining {summary['epsilon_remaining']:.4f}")
    for window in summary["windows"]:
        report.add(f"{window['window']:<12} remaining {window['epsilon_remaining']:.4f} of "
                   f"{window['epsilon_ceiling']:g}")
    _check_offers(site_offers(policy, ledger), policy.run_epsilon, report)


def _check_offers(offers: list[Offer], run_epsilon: float, report: SiteCheck) -> None:
    """Each kind of run the site offers (:mod:`fedpca.site.offers`) with its releases and the
    full runs at ``run_epsilon`` that fit, each it does not offer with its policy's refusal;
    a run that cannot be planned, or a policy that offers none, is a problem."""
    problems: list[str] = []
    for offer in offers:
        if offer.refused:
            report.add(f"not offered  {offer.run}: {offer.refusal}")
            continue
        if not offer.offered:
            if offer.refusal not in problems:  # one missing file fails every plan alike
                problems.append(offer.refusal)
                report.problem(f"{offer.run} cannot be calibrated: {offer.refusal}")
            continue
        report.add(f"runs left    {offer.run}: {counted_runs(offer.runs)} full runs of "
                   f"{offer.releases} releases at run-epsilon {run_epsilon:g} fit the "
                   f"remaining lifetime budget, {counted_runs(offer.now)} of them now (the "
                   "spending windows)")
        if not offer.runs:
            report.problem(f"no full run of {offer.run} fits the remaining lifetime budget")
        elif not offer.now:
            report.add(f"             {offer.run}: no full run fits a spending window now; "
                       "it has room again when its older releases leave it")
    if offers and all(offer.refused for offer in offers):
        report.problem("this site's policy offers no run in its mode: allow an algorithm "
                       "its mode can run under [algorithms.NAME]")


def report_text(report: SiteCheck) -> str:
    """The report as printed, ending with its verdict."""
    verdict = (f"{len(report.problems)} problem(s): a run would fail at this site"
               if report.problems else "ok: this site is ready for a run")
    return "\n".join([*report.lines, verdict])


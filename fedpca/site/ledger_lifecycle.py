"""How a site's ledger comes to be, is started again, put back or adopted: each is an
operator's explicit command, and each leaves a dated line in the identity file's history and
in the site's log (why a ledger is never created silently: :mod:`fedpca.site.ledger_identity`).

* :func:`create_site_ledger` (``fedpca site init``): a policy's first ledger and identity
  file, when it has neither;
* :func:`start_new_ledger` (``fedpca site ledger --new --reason TEXT``): a new, empty ledger
  with a new identity, once the old one has been moved away;
* :func:`restore_ledger` (``fedpca site ledger --restore FILE [--reason TEXT]``): a backup of
  this site's ledger put back with SQLite's backup API; a copy older than the high-water
  mark only with a reason, recorded with the releases lost;
* :func:`adopt_ledger` (``fedpca site ledger --adopt --reason TEXT``): an existing ledger
  made the site's when its identity file is lost, or when an older fedpca wrote it.

What a new ledger means for the guarantee. The lifetime guarantee holds over the releases
one ledger remembers: a new ledger for the same population starts its budget again, so the
population's guarantee is then the composition of both ledgers' spending. Whoever starts one
says why, and lowers the policy's budget by what the old ledger spent if the guarantee is to
hold over the population's whole lifetime (``deploy/README.md``, Operations).
"""

from __future__ import annotations

import logging
from pathlib import Path

from fedpca.site.ledger_identity import (
    LedgerIdentityError,
    LedgerState,
    LedgerWitness,
    Mark,
    behind,
    is_behind,
)
from fedpca.site.ledger_store import (
    WAL_FILES,
    copy_ledger,
    create_ledger,
    give_identity,
    ledger_state,
)


def create_site_ledger(witness: LedgerWitness) -> LedgerState | None:
    """The first ledger of a policy with its identity file, when neither exists (else
    nothing: the check reports what is there)."""
    if witness.ledger.exists() or witness.path.exists():
        return None
    state = create_ledger(witness.ledger)
    witness.record(state, f"created ledger {state.identity} (fedpca site init)", logging.INFO)
    return state


def start_new_ledger(witness: LedgerWitness, reason: str | None) -> str:
    """A new, empty ledger with a new identity where the policy names it, the old one moved
    away first; the history line."""
    _require_reason(reason, "--new")
    _refuse_occupied(witness.ledger, "a new ledger")
    previous = witness.read()
    state = create_ledger(witness.ledger)
    replaced = "" if previous is None else (
        f", replacing ledger {previous.identity} ({_releases(previous.mark)} releases at its "
        "last charge)")
    return witness.record(state, f"started a new, empty ledger {state.identity}{replaced}; "
                                 f"the population's budget starts again; reason: {reason}")


def restore_ledger(witness: LedgerWitness, backup: Path, reason: str | None) -> str:
    """Put the backup ``backup`` of this site's ledger back where the policy names it (the
    old one moved away first); a copy older than the high-water mark only with ``reason``.
    The history line."""
    _refuse_occupied(witness.ledger, "a restore")
    record = witness.read()
    mark = record and record.mark
    found = ledger_state(backup, mark, upgrade=False)
    if found is None:
        raise LedgerIdentityError(f"the backup {backup} does not exist")
    if record is None and not reason:
        raise LedgerIdentityError(
            f"this site has no identity file {witness.path} to check the backup {backup} "
            "against: if it is this site's newest ledger, give --reason TEXT (recorded)"
        )
    if record is not None and found.identity != record.identity:
        raise LedgerIdentityError(
            f"the backup {backup} is a copy of another ledger (identity "
            f"{found.identity or '(none)'}, not this site's {record.identity}): restore a "
            "backup of this site's ledger"
        )
    older = is_behind(found, mark)
    if older and not reason:
        raise LedgerIdentityError(
            f"the backup {backup} is older than this site's last recorded release: "
            f"{behind(found, mark)}; restoring it would give back the budget spent since. "
            "Restore a newer backup, or give --reason TEXT to restore it all the same (the "
            "reason and the releases lost are recorded)"
        )
    state = copy_ledger(backup, witness.ledger, mark)
    if state.identity is None:
        state = give_identity(witness.ledger)
    event = f"restored ledger {state.identity} from {backup} ({state.releases} releases)"
    if older:
        event += (f"; older than the last recorded release: {behind(found, mark)}; "
                  f"releases lost: {max(mark.releases - found.releases, 0)}, their budget "
                  "given back")
    return witness.record(state, event + (f"; reason: {reason}" if reason else ""))


def adopt_ledger(witness: LedgerWitness, reason: str | None) -> str:
    """Make the ledger the policy names the site's (an identity file written for it; an
    identity given to a ledger an older fedpca wrote). The history line."""
    _require_reason(reason, "--adopt")
    if witness.path.exists():
        raise LedgerIdentityError(
            f"{witness.path} exists: the ledger already has an identity file (fedpca site "
            "check says whether it passes); to adopt the ledger all the same, move that "
            "file away first"
        )
    found = ledger_state(witness.ledger)
    if found is None:
        witness.verify(None, None)  # raises: what to do about a missing ledger
    state = give_identity(witness.ledger)
    given = ", given an identity" if found.identity is None else ""
    return witness.record(state, f"adopted ledger {state.identity} ({state.releases} "
                                 f"releases{given}) as this site's; reason: {reason}")


def _require_reason(reason: str | None, option: str) -> None:
    if not (reason and reason.strip()):
        raise LedgerIdentityError(
            f"{option} needs --reason TEXT: why (recorded in the identity file's history and "
            "the site's log)"
        )


def _refuse_occupied(ledger: Path, doing: str) -> None:
    """Refuse to put a ledger where one (or SQLite's files of one) still is."""
    present = [str(path) for path in (ledger, *(Path(f"{ledger}{end}") for end in WAL_FILES))
               if path.exists()]
    if present:
        raise LedgerIdentityError(
            f"{', '.join(present)} exists: {doing} never replaces a ledger; stop the "
            f"SuperNode, move the ledger (with its {' and '.join(WAL_FILES)} files, if any) "
            f"away, e.g. to {ledger}.old, then run this again"
        )


def _releases(mark: Mark | None) -> int:
    return 0 if mark is None else mark.releases


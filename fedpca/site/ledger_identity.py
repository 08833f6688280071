"""A site's ledger has an identity and the site remembers how far it got: a missing,
replaced, emptied or rolled-back ledger is refused, never silently started again.

Why. The lifetime ledger (:mod:`fedpca.site.ledger`) is the site's only memory of
what it has spent for its population. A ledger that is lost and created afresh, or swapped
for an older copy, gives the population back what it had spent: every guarantee the site
made over its lifetime would be void without anyone having decided so.

Design. ``fedpca site init`` creates the ledger with a random *identity* (128 bits from the
operating system, kept in the ledger itself with its creation time) and writes beside the
policy an *identity file* (``POLICY.ledger-id.json``, 0600; :meth:`LedgerWitness.path_for`)
holding that identity and a *high-water mark*: the ledger's newest release (its row id and
its time on the site's clock) and how many releases the ledger then held. The mark is
advanced after every charge is committed, under the ledger's write lock, so it never runs
ahead of the ledger and concurrent charges cannot move it back. Whatever opens the ledger
for a run, every charge, ``fedpca site check`` and ``fedpca site ledger`` compare the two
(:meth:`LedgerWitness.verify`) and refuse, naming the files and the command that fixes it.

What a careless operator, or a hostile coordinator, could do, and what happens:

* **delete or move the ledger, or edit the policy's ledger path** to a file that does not
  exist: refused (the ledger is created only by ``site init`` or by an explicit, logged
  ``fedpca site ledger --new --reason TEXT``); read commands never create it either, as
  ``fedpca site ledger`` once did, handing the next run an empty ledger;
* **empty it** (rows deleted, the file truncated) or **put back an older copy** (``cp``
  from a backup, a snapshot of the ledger alone): it holds fewer releases than the mark, or
  lacks the mark's release: refused. ``fedpca site ledger --restore FILE`` takes an older
  copy only with ``--reason``, and records the reason and the releases lost;
* **put another ledger in its place** (another site's, a test's, a fresh one): its
  identity differs: refused;
* **lose the identity file**: refused while the ledger exists; ``--adopt --reason`` makes
  the ledger the site's again, recorded;
* a **hostile coordinator** cannot touch either file; all it could hope for is a run that
  recreates a lost ledger, which no longer happens. A run at a site whose ledger fails the
  check is refused before anything is charged, and the coordinator is told only a fixed
  reason (:data:`RUN_REFUSAL`): the counts, times and paths are in the site's log.

What it cannot stop: whoever can write the site's files (the account that runs the
SuperNode) can edit the identity file too, or roll the policy's folder back from a file
system backup with its identity file and ledger together; keep the ledger and the policy in
different folders (``deploy/README.md``, Operations) so a restore of one does not roll back
the other. The overrides (``--new``, ``--restore --reason``, ``--adopt``) are explicit, and
each leaves a dated line in the identity file's history and a warning in the site's log.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fedpca.errors import ConfigurationError
from fedpca.file_modes import refuse_shared

logger = logging.getLogger(__name__)

#: What the coordinator is told when a run finds the ledger failing its check (fixed: the
#: detail, with counts, times and paths, stays in the site's log).
RUN_REFUSAL = (
    "{site}: refused: this site's privacy ledger did not pass its identity check; nothing "
    "was released; the site's operator finds the reason and the fix in the site's log"
)
#: The first key of an identity file, for whoever opens it.
ABOUT = ("fedpca ledger identity: written by fedpca (site init, site ledger --new|--restore|"
         "--adopt, every charge); never edit it by hand")


class LedgerIdentityError(ConfigurationError):
    """The site's ledger (or its identity file) is missing, replaced, emptied or older than
    the site's high-water mark; the message names the files and the command that fixes it."""


@dataclass(frozen=True)
class Mark:
    """A ledger's newest release as the identity file remembers it: its row ``id``, its
    ``time`` (Unix seconds on the site's clock) and the ``releases`` the ledger then held."""

    releases: int
    id: int
    time: float


@dataclass(frozen=True)
class LedgerState:
    """What a ledger file holds, for the check: its ``identity`` (``None``: written before
    ledgers had one), its ``releases``, its ``newest`` release, and whether it ``holds`` the
    release a mark names (its id with the mark's time; ``True`` without a mark)."""

    identity: str | None
    releases: int
    newest: Mark | None
    holds: bool = True


@dataclass(frozen=True)
class IdentityRecord:
    """An identity file's content: the ledger's identity, the high-water mark (``None``
    before the first release) and the dated history of explicit changes."""

    identity: str
    mark: Mark | None
    history: tuple[str, ...] = ()


def utc(seconds: float) -> str:
    """Unix ``seconds`` as a UTC date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def is_behind(found: LedgerState, mark: Mark | None) -> bool:
    """Whether the ledger ``found`` lacks a release up to the high-water ``mark`` (emptied,
    or an older copy)."""
    return mark is not None and (found.releases < mark.releases or not found.holds)


def behind(found: LedgerState, mark: Mark) -> str:
    """What the ledger ``found`` holds against the high-water ``mark``."""
    return (f"it holds {found.releases} releases, "
            f"{'with' if found.holds else 'without'} release {mark.id} of {utc(mark.time)}, "
            f"and the ledger held {mark.releases} up to that one")


class LedgerWitness:
    """The identity file of the ledger a policy names, and the check of the one against the
    other.

    Args:
        path: the identity file (:meth:`path_for` the policy).
        ledger: the ledger file the policy names.
        policy: the policy file (for the commands the refusals give).
    """

    def __init__(self, path: Path, ledger: Path, policy: Path) -> None:
        self.path, self.ledger, self.policy = path, ledger, policy

    @staticmethod
    def path_for(policy: Path) -> Path:
        """The identity file beside ``policy``: ``site.toml`` -> ``site.ledger-id.json``."""
        return policy.with_suffix(".ledger-id.json")

    def command(self, action: str) -> str:
        """The ``fedpca site ledger`` command line doing ``action`` for this policy."""
        return f"fedpca site ledger --policy {self.policy} {action}"

    def read(self) -> IdentityRecord | None:
        """The identity file's record, ``None`` if there is none; refuses one group or others
        may write, or one fedpca did not write."""
        refuse_shared(self.path, "ledger identity file")
        try:
            raw = json.loads(self.path.read_text())
            mark = raw["mark"]
            return IdentityRecord(raw["identity"], None if mark is None else Mark(**mark),
                                  tuple(raw["history"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LedgerIdentityError(
                f"the ledger identity file {self.path} cannot be read ({exc}); put it back "
                "from the backup of the policy's folder, or move it away and adopt the ledger: "
                f"{self.command('--adopt --reason TEXT')}"
            ) from None

    def verify(self, record: IdentityRecord | None, found: LedgerState | None) -> None:
        """Refuse the ledger ``found`` (``None``: no file) unless it is the one ``record``
        names, holding every release up to its high-water mark."""
        if found is None:
            raise LedgerIdentityError(self._missing(record))
        if record is None:
            raise LedgerIdentityError(self._unrecorded(found))
        if found.identity != record.identity:
            raise LedgerIdentityError(
                f"the ledger {self.ledger} is not the one this site created: its identity "
                f"{found.identity or '(none)'} is not {record.identity}, recorded in "
                f"{self.path}. Put this site's ledger back, or restore its newest backup: "
                f"{self.command('--restore FILE')}"
            )
        if is_behind(found, record.mark):
            raise LedgerIdentityError(
                f"the ledger {self.ledger} is behind this site's last recorded release "
                f"({self.path}): {behind(found, record.mark)}; it was emptied or an older copy "
                "was put back, which would give back the budget spent since. Restore the "
                f"newest backup: {self.command('--restore FILE')} (a copy older than the "
                "last recorded release only with --reason TEXT)"
            )

    def _missing(self, record: IdentityRecord | None) -> str:
        """Why a missing ledger is refused, and what to do."""
        fix = (f"put it back, or restore its newest backup: {self.command('--restore FILE')}; "
               "only if it is lost for good, start a new one: "
               f"{self.command('--new --reason TEXT')} (the population's budget then starts "
               "again: deploy/README.md, Operations)")
        if record is None:
            return (f"the ledger {self.ledger} named by {self.policy} does not exist: fedpca "
                    f"site init creates it with the policy; if it was moved or deleted, {fix}")
        return (f"the ledger {self.ledger} named by {self.policy} does not exist, though "
                f"{self.path} records it (identity {record.identity}): a ledger is never "
                f"created again silently; {fix}")

    def _unrecorded(self, found: LedgerState) -> str:
        """Why a ledger without an identity file is refused, and what to do."""
        adopt = self.command("--adopt --reason TEXT")
        if found.identity is None:
            return (f"the ledger {self.ledger} was written by an older fedpca, before ledgers "
                    f"had identities, and this site has no identity file {self.path}: if it "
                    f"is this site's ledger, adopt it once: {adopt}")
        return (f"this site's ledger identity file {self.path} does not exist, though the "
                f"ledger {self.ledger} does: put the file back from the backup of the "
                f"policy's folder; only if you are sure the ledger is this site's newest: {adopt}")

    def advance(self, found: LedgerState) -> None:
        """Move the high-water mark up to the ledger's newest release (call under the
        ledger's write lock, after the charge is committed; never moves it back)."""
        record = self.read()
        newest = found.newest
        if record is None or newest is None or (record.mark and record.mark.id >= newest.id):
            return
        self._write(IdentityRecord(record.identity, newest, record.history))

    def record(self, found: LedgerState, event: str, level: int = logging.WARNING) -> str:
        """Make ``found`` the site's ledger (its identity and newest release), adding a
        dated line saying ``event`` to the history and to the site's log (at ``level``);
        the line."""
        if found.identity is None:
            raise ValueError("only a ledger with an identity can be recorded")
        previous = self.read()
        line = f"{utc(time.time())}: {event}"
        history = (previous.history if previous else ()) + (line,)
        self._write(IdentityRecord(found.identity, found.newest, history))
        logger.log(level, "ledger %s (identity file %s): %s", self.ledger, self.path, line)
        return line

    def _write(self, record: IdentityRecord) -> None:
        """Replace the identity file by ``record`` atomically (a new 0600 file, synced, then
        renamed over the old one)."""
        content: dict[str, Any] = {"about": ABOUT, "ledger": str(self.ledger), **asdict(record)}
        content["history"] = list(record.history)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(content, handle, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def refused_run(site: str, error: LedgerIdentityError) -> LedgerIdentityError:
    """Log ``error`` in the site's log; the fixed refusal a run's coordinator gets instead."""
    logger.error("%s: %s", site, error)
    return LedgerIdentityError(RUN_REFUSAL.format(site=site))

"""One site's whole trust boundary: a :class:`SiteService` answers every request of a run.

Everything the coordinator can send a site reaches it as one of five requests, and
:meth:`SiteService.handle` is the one place that answers them: the readiness question before
round 1 (:class:`Ready`), a round's request (:class:`Ask`), a stage of fedpca's verifiable
secure aggregation (:class:`Secure`), the run's released result (:class:`ResultDelivery`) and the
news that the run failed (:class:`RunEnd`). The service is sans-I/O: the Flower ClientApp
(:mod:`fedpca.flower.site.clientapp`) turns each message into a request and the reply into a
message, and nothing else of the site's code sees Flower. Its :class:`SiteSource` opens the
site for the run once (a real site: its own policy, its plan of the run, its lifetime ledger,
:mod:`fedpca.site.real_site`; a simulated partition: its data and the run's in-memory ledger,
:mod:`fedpca.simulated_sites`), and every check, charge and secure step reads what it opened.

What a hostile coordinator could try against the boundary as a whole, and what stops it:

* **learn something from a refusal**: a refusal is fedpca's own words (a
  :class:`~fedpca.errors.FedPCAError`, whose text quotes only public quantities); any other
  failure (``MemoryError``, a library's ``ValueError`` quoting a file, ...), whose text nobody
  vetted and may describe the site's files or data, is answered with the fixed
  :data:`SITE_FAILURE`, its traceback in the site's own log only; a refusal leaves without
  the site's file paths (each absolute path becomes :data:`SITE_FILE`; the site's log keeps
  them) and with at most :data:`MAX_REFUSAL` characters (:func:`public_refusal`);
* **flood the site's log or its reply** with a huge run_config value echoed back: values
  from the coordinator are quoted by :func:`~fedpca.errors.quoted` (at most 80 characters,
  or their hash), and no refusal's log line exceeds :data:`MAX_LOGGED` characters;
* **make a site pay for work that fails**: every check runs before the charge
  (:func:`fedpca.site.answer.answer_request`), the charge before the answer leaves;
* **reset a simulated site's spending** by sending its messages to another process: the
  run's in-memory ledger lives in the run's state, which Flower keeps per node for the run,
  and a cached site re-reads it whenever it changed;
* everything a request may ask, and each refusal, is listed where it is checked: the
  request's (:mod:`fedpca.site.answer`), the secure stages' (:mod:`fedpca.site.secure_stage`),
  a real site's plan, ledger and result (:mod:`fedpca.site.real_site`).

Privacy guarantee (unit: one record of this site, replace-one): every answer is a release
under the site's own policy, charged to its ledger before it is returned; the readiness
answer, the result and the run's end cost nothing.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedpca.algorithms.site import PrivateSite
from fedpca.algorithms.site_limits import SiteLimits
from fedpca.dp.ledger import PrivacyLedger
from fedpca.errors import FedPCAError, InvalidRequestError
from fedpca.secure.identity import SecureIdentity
from fedpca.site.answer import Answer, Masking, answer_request
from fedpca.site.refusal_kinds import with_kind
from fedpca.site.reply_journal import (
    ReplyJournal,
    decode_reply,
    encode_reply,
    is_journaled,
    request_digest,
)
from fedpca.site.ready import SiteReady
from fedpca.site.results import ReleasedResult
from fedpca.site.secure_stage import RunState, protocol_reply

logger = logging.getLogger(__name__)

#: What the coordinator reads when a site failed for a reason that is not one of fedpca's
#: refusals (the exception's own text stays in the site's log).
SITE_FAILURE = "the site could not answer; its operator has the details in its log"
#: The run state's key of a simulated site's in-memory ledger.
LEDGER = "ledger"
#: The most characters of a refusal the coordinator receives, and of its line in the
#: site's own log.
MAX_REFUSAL, MAX_LOGGED = 900, 1800
#: What an absolute path of the site's files reads as in a refusal the coordinator receives.
SITE_FILE = "<a file of the site>"
#: An absolute path (POSIX, home-relative or Windows) standing on its own in a text.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/\\])(?:~|[A-Za-z]:)?[/\\][^\s'\",;()\[\]{}<>]+")


def public_refusal(text: str) -> str:
    """A refusal's text as the coordinator receives it: every absolute path replaced by
    :data:`SITE_FILE`, at most :data:`MAX_REFUSAL` characters."""
    public = _ABSOLUTE_PATH.sub(SITE_FILE, text)
    return public if len(public) <= MAX_REFUSAL else public[:MAX_REFUSAL - 16] + " ... (cut short)"

#: ``(dim, limits, columns) -> result``: reads a result message for a site of width ``dim``
#: with these limits (and column names, when it has a contract), refusing before it
#: allocates anything the site does not expect (:mod:`fedpca.flower.result_wire`).
ResultReader = Callable[[int, SiteLimits, "tuple[str, ...] | None"], ReleasedResult]


@dataclass(frozen=True)
class Node:
    """Who is asked, in which run: the site operator's ``node_config`` (trusted) and the
    coordinator's ``run_config`` (UNTRUSTED)."""

    run_id: str
    node_id: int
    node_config: Mapping[str, Any]
    run_config: Mapping[str, Any]


@dataclass(frozen=True)
class Ready:
    """The readiness round's question: can the site afford the whole run?"""


@dataclass(frozen=True)
class Ask:
    """A round's request (UNTRUSTED arrays and config), answered unmasked or inside a
    secure sum (``masking``)."""

    arrays: Sequence[np.ndarray]
    config: Mapping[str, Any]
    masking: Masking = None


@dataclass(frozen=True)
class Secure:
    """A stage of fedpca's verifiable secure aggregation (UNTRUSTED); at the input stage,
    the round's request (``arrays``, ``config``) to answer masked."""

    message: Mapping[str, Any]
    arrays: Sequence[np.ndarray] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultDelivery:
    """The run's released result, read by ``read`` once the site says what it expects."""

    read: ResultReader


@dataclass(frozen=True)
class RunEnd:
    """The coordinator's word (UNTRUSTED) that the run failed, and why."""

    reason: str


@dataclass(frozen=True)
class Refusal:
    """Why the site answered nothing (public words only); ``cause``: the site's own
    refusal, for a caller in the site's process (never sent)."""

    reason: str
    cause: FedPCAError | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Received:
    """The site took the result or the news of the run's end: its name, nothing else."""

    site: str


@dataclass(frozen=True)
class ProtocolReply:
    """The site's protocol message, and at the input stage its masked answer."""

    message: dict[str, Any]
    answer: Answer | None = None


Request = Ready | Ask | Secure | ResultDelivery | RunEnd
Reply = SiteReady | Answer | ProtocolReply | Received | Refusal


def guarded(what: str, reply: Callable[[], Any]) -> Any:
    """``reply()``, or the :class:`Refusal` saying why the site answered nothing: a refusal's
    own text (a :class:`~fedpca.errors.FedPCAError` quotes only public quantities), any other
    exception's as :data:`SITE_FAILURE` (its traceback in the site's log only). ``what``
    names the request in the log."""
    try:
        return reply()
    except FedPCAError as error:  # a refusal: its text quotes only public quantities
        text = str(error)
        logger.warning("%s", text if len(text) <= MAX_LOGGED else text[:MAX_LOGGED] + " ...")
        return Refusal(public_refusal(text), error)
    except Exception:  # not fedpca's words: they stay in the site's log
        logger.exception("answering a %s request failed; the coordinator is told only %r",
                         what, SITE_FAILURE)
        return Refusal(SITE_FAILURE)


class SiteSource:
    """Where a site's answers come from in one run (a real site, a simulated partition):
    by default all from one site it opens once per run (subclasses :meth:`open` it), its
    readiness answer the opened site's, a released result checked and logged (not stored),
    a run's end logged, no secure aggregation (a real site overrides each,
    :class:`~fedpca.site.real_site.RealSiteSource`)."""

    _site: PrivateSite | None = None

    def site(self) -> PrivateSite:
        """The site answering the run's requests, opened once for the run (raises its
        refusal, nothing charged, when it will not take part)."""
        if self._site is None:
            self._site = self.open()
        return self._site

    def open(self) -> PrivateSite:
        """Open the site (subclasses)."""
        raise NotImplementedError

    def identity(self) -> SecureIdentity | None:
        """Its identity in fedpca's verifiable secure aggregation (``None``: none)."""
        return None

    def ready(self) -> SiteReady | None:
        """Its answer to the readiness round, from its policy and ledger (raises its
        refusal); ``None``: the opened site's (:meth:`SiteService.ready`)."""
        return None

    def take_result(self, read: ResultReader) -> str:
        """Take the run's released result (raises to refuse it); its name: here checked
        against the site's width and limits and logged, stored nowhere. Costs no budget."""
        site = self.site()
        result = read(site.dim, site.limits, None)
        logger.info("%s: received the released result of run %s (%s, k=%d)", site.site,
                    result.run_id, result.algorithm, result.k)
        return site.site

    def journal(self) -> ReplyJournal | None:
        """The site's journal of this run (:mod:`fedpca.site.reply_journal`); here none: a
        simulated site does not restart within a run."""
        return None

    def record_step(self, run_id: str, round_number: int, stage: str, note: str) -> None:
        """Record a secure-aggregation step before its reply leaves (raises to refuse a
        second one; :class:`~fedpca.site.secure_stage.StepJournal`): here nothing, as a
        simulated site keeps no lifetime ledger and its session's once-per-round rule lives
        in the run's state, which Flower keeps for the run."""

    def run_failed(self, reason: str) -> str:
        """Take the news that the run failed for ``reason``; its name: here logged (an
        in-memory ledger ends with the run)."""
        site = self.site().site
        logger.warning("%s: the coordinator says the run failed: %s", site, reason)
        return site


class SiteService:
    """Answers every request of one run at one site (module docstring).

    Args:
        node: who is asked, in which run.
        source: where the answers come from (it opens its site once per run).
    """

    def __init__(self, node: Node, source: SiteSource) -> None:
        self.node, self.source = node, source
        #: The ledger state this service last read or wrote (unchanged state is not re-read).
        self._ledger_state: bytes | None = None

    def handle(self, request: Request, state: RunState) -> Reply:
        """The site's reply to ``request``, or its :class:`Refusal` (never raises); a refusal
        of the readiness round begins with its kind (:mod:`fedpca.site.refusal_kinds`)."""
        reply = guarded(type(request).__name__, lambda: self.reply(request, state))
        if isinstance(request, Ready) and isinstance(reply, Refusal) and reply.cause:
            return Refusal(public_refusal(with_kind(reply.cause, reply.reason)), reply.cause)
        return reply

    def reply(self, request: Request, state: RunState) -> Reply:
        """The reply to ``request``; raises the site's refusal. A request the site's
        journal holds a reply to (:mod:`fedpca.site.reply_journal`: a real site asked again
        after a restart) gets that reply again, nothing released or charged; any other
        journaled kind's reply is journaled before it leaves."""
        journal = self.source.journal() if isinstance(request, (Ask, Secure)) else None
        if journal is None:
            return self.fresh(request, state)
        state = journal.durable(state)
        if not is_journaled(request):  # the setup: asked again, the site advertises anew
            return self.fresh(request, state)
        digest = request_digest(request, self.node.run_config)
        kept = journal.sent(digest)
        if kept is not None:
            logger.warning("asked again in run %s what this site answered already (after a "
                           "restart, or a repeat): its journaled reply goes again; nothing is "
                           "released or charged", self.node.run_id)
            message, answer = decode_reply(kept)
            return answer if message is None else ProtocolReply(message, answer)
        reply = self.fresh(request, state)
        message, answer = ((reply.message, reply.answer) if isinstance(reply, ProtocolReply)
                           else (None, reply))
        journal.keep(digest, encode_reply(message, answer))
        return reply

    def fresh(self, request: Request, state: RunState) -> Reply:
        """The reply to ``request`` made now; raises the site's refusal."""
        if isinstance(request, Ask):
            return self.answer(request.arrays, request.config, request.masking, state)
        if isinstance(request, Ready):
            return self.source.ready() or self.ready(state)
        if isinstance(request, Secure):
            message, answer = protocol_reply(
                self.source.identity(), self.node.run_id, request.message, request.config,
                state, self.source, lambda masking: self.answer(request.arrays,
                                                                request.config, masking, state))
            return ProtocolReply(message, answer)
        if isinstance(request, ResultDelivery):
            return Received(self.source.take_result(request.read))
        if isinstance(request, RunEnd):
            return Received(self.source.run_failed(request.reason))
        raise InvalidRequestError(f"refused: a site answers no {type(request).__name__}")

    def answer(self, arrays: Sequence[np.ndarray], config: Mapping[str, Any],
               masking: Masking, state: RunState) -> Answer:
        """The site's answer to a round's request (:func:`~fedpca.site.answer.answer_request`),
        its in-memory ledger read from and written back to the run's ``state``."""
        site = self.synced_site(state)
        answer = answer_request(site, arrays, config, masking)
        if isinstance(site.ledger, PrivacyLedger):
            self._ledger_state = json.dumps(site.ledger.to_dict()).encode()
            state.store(LEDGER, self._ledger_state)
        return answer

    def ready(self, state: RunState) -> SiteReady:
        """The opened site's answer to the readiness round: its name when what is left of
        the run, as its policy calibrates it, fits its ledger
        (:meth:`~fedpca.algorithms.site.PrivateSite.require_run`, which reads no record)."""
        site = self.synced_site(state)
        site.require_run()
        return SiteReady(site.site)

    def site(self) -> PrivateSite:
        """The site the source opened for this run."""
        return self.source.site()

    def synced_site(self, state: RunState) -> PrivateSite:
        """The opened site, its in-memory ledger (a simulation's) read from the run's
        ``state`` when another process changed it."""
        site = self.site()
        stored = state.load(LEDGER) if isinstance(site.ledger, PrivacyLedger) else None
        if stored is not None and stored != self._ledger_state:
            site.ledger.restore(json.loads(stored))
            self._ledger_state = stored
        return site


class GivenSite(SiteSource):
    """A source answering from a site already built (an audit, a ``NumPyClient`` built from
    a site, an example)."""

    def __init__(self, site: PrivateSite) -> None:
        self._site = site  # open already: :meth:`open` is never called


class MemoryState:
    """A :class:`~fedpca.site.secure_stage.RunState` held in this process's memory: the run
    state of a service that answers one process's run (a site given as an object)."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def load(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or ``None``."""
        return self.values.get(key)

    def store(self, key: str, value: bytes) -> None:
        """Keep ``value`` under ``key``."""
        self.values[key] = value


def site_service(site: PrivateSite, node: Node | None = None) -> SiteService:
    """A service answering from ``site`` (``node``: who is asked, default a local run of
    the site's own; the run_config is empty)."""
    return SiteService(node or Node("local", 0, {}, {}), GivenSite(site))

"""What every fedpca strategy does each round, whichever Flower strategy API drives it.

A :class:`SiteRoundStrategy` asks every connected site for one release per Flower round
(:meth:`~SiteRoundStrategy.request`), refuses to aggregate a round that fewer than
``min_sites`` sites answered (stopping the run with :class:`RoundFailedError` that quotes each
failing site's own reason), hands the decoded :class:`~fedpca.algorithms.site.SiteAnswer`
objects to :meth:`~SiteRoundStrategy.combine` and tells its observers
(:meth:`~SiteRoundStrategy.aggregate`). Each algorithm writes its request and its combination
once, in a subclass of this class (:mod:`fedpca.flower.server.strategies`);
:mod:`fedpca.flower.server.strategy` moves its arrays through Flower's Message API, and
:mod:`fedpca.flower.server.legacy_strategy` adapts that one strategy to Flower's legacy API. The
arithmetic stays in the Flower-free servers of :mod:`fedpca.algorithms`. No federated
evaluation: sites release nothing else.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from flwr.common import Scalar
from flwr.serverapp import Grid

from fedpca.algorithms.site import SiteAnswer
from fedpca.algorithms.sum_bounds import SumBoundError
from fedpca.errors import ConfigurationError, RunFailedError
from fedpca.dp.guarantee import SiteGuarantee, as_guaranteed
from fedpca.progress import RoundEvent, RoundObserver
from fedpca.site.refusal_kinds import KINDS, refusal_kind
from fedpca.site.results import ReleasedResult
from fedpca.flower.server.readiness import Deadlines, Readiness, ask_readiness
from fedpca.flower.server.delivery import announce_failure, deliver

logger = logging.getLogger(__name__)

WARNING_TOO_FEW_SITES = (
    "%s round %s: only %s site(s) answered, fewer than min_sites=%s; the run stops here "
    "rather than aggregate an under-populated round. Failures: %s"
)
WARNING_TOO_FEW_READY = (
    "%s readiness round: only %s site(s) are ready for the whole run, fewer than "
    "min_sites=%s; the run stops before any release, so that no site spends on a run that "
    "cannot finish. Declined: %s"
)

#: A site's reply in one Flower API (a legacy ``(ClientProxy, FitRes)`` or a ``Message``).
Reply = TypeVar("Reply")


#: Seconds before the second look at the connected sites while waiting for
#: ``wait_for_sites`` (a simulation's virtual sites connect within milliseconds); each further
#: wait is twice the last, up to :data:`POLL_SECONDS`.
FIRST_POLL_SECONDS = 0.01
#: The longest wait between two looks at the connected sites.
POLL_SECONDS = 0.25


class RoundFailedError(RunFailedError):
    """Too few sites answered a round; the run was stopped."""


class ReadinessRoundError(RoundFailedError):
    """Fewer than ``min_sites`` sites are ready for the whole run
    (:mod:`fedpca.flower.server.readiness`); the run stopped before any release."""


def connected_nodes(grid: Grid, wanted: int, timeout: float) -> list[int]:
    """Every node connected to ``grid``, once at least ``wanted`` are or ``timeout`` seconds
    passed (the plan's :attr:`~fedpca.flower.server.readiness.Deadlines.connect`; then the
    run goes on with those connected, and ``min_sites`` decides whether it can; logged
    whenever the number connected changes while it waits)."""
    end = time.monotonic() + timeout
    wait, seen = FIRST_POLL_SECONDS, None
    while len(nodes := sorted(grid.get_node_ids())) < wanted:
        if time.monotonic() >= end:
            logger.warning("waiting for sites: %d connected after %g s, %d wanted; going on "
                           "with those connected", len(nodes), timeout, wanted)
            break
        if len(nodes) != seen:
            logger.info("waiting for sites: %d connected, %d wanted", len(nodes), wanted)
            seen = len(nodes)
        time.sleep(max(0.0, min(wait, end - time.monotonic())))
        wait = min(2 * wait, POLL_SECONDS)
    return nodes


#: How a failure names a node (the grid's, the secure aggregation's and Flower's own words).
NODE = re.compile(r"(?<!\()\bnode (\d+)\b")


def named_nodes(reason: str, names: dict[int, str]) -> str:
    """``reason`` with every ``node N`` whose site said its name in the readiness round
    written ``site NAME (node N)``, so that whoever reads a failure (the coordinator, the run
    record, every site's ledger) knows which site it was (a node named already stays as it
    is)."""
    def name(match: re.Match[str]) -> str:
        node = int(match[1])
        return f"site {names[node]} ({match[0]})" if node in names else match[0]

    return NODE.sub(name, reason)


#: A declined site whose reason is none of the sites' refusal kinds (it sent no answer in
#: time, or failed).
NO_READY_ANSWER = "no answer or failed"


def declined_kinds(reasons: Sequence[str]) -> str:
    """How many of ``reasons`` (the declined sites') are of each kind of refusal
    (:mod:`fedpca.site.refusal_kinds`), e.g. ``cannot afford 1, refused: data 1``, so that
    the coordinator looks for the right fix: a budget, a site's export, a site's policy."""
    kinds = [refusal_kind(reason) or NO_READY_ANSWER for reason in reasons]
    return ", ".join(f"{kind} {kinds.count(kind)}" for kind in (*KINDS, NO_READY_ANSWER)
                     if kind in kinds)


def require_ready(readiness: Readiness, min_sites: int, label: str = "fedpca") -> None:
    """Log the readiness round's outcome; raise :class:`ReadinessRoundError`, quoting each
    declining site's reason, when fewer than ``min_sites`` sites are ready (nothing has been
    released yet)."""
    for reason in readiness.declined.values():
        logger.warning("%s readiness round: a site declined: %s", label, reason)
    ready, asked = len(readiness.ready), len(readiness.ready) + len(readiness.declined)
    if ready < min_sites:
        reasons = list(readiness.declined.values())
        logger.error(WARNING_TOO_FEW_READY, label, ready, min_sites, reasons)
        raise ReadinessRoundError(
            f"readiness round: {ready} site(s) are ready for this run, need {min_sites}; nothing "
            f"was released; declined by kind: {declined_kinds(reasons)}; declined: {reasons}",
            failures=reasons)
    logger.info("%s readiness round: %d of %d site(s) are ready for the run", label, ready, asked)


class SiteRoundStrategy:
    """One release per site per round, combined by a Flower-free server of any algorithm.

    Args:
        server: the algorithm's server (:class:`~fedpca.algorithms.server.ServerRecord`'s
            round protocol: its requests, their combination, its history and result); a
            centred run's is a :class:`~fedpca.algorithms.centred_rounds.CentredServer`.
            Omitted, the class's :meth:`build` makes it from ``params``.
        min_sites (int, default 2): a round proceeds only if at least this many sites
            answer.
        wait_for_sites (int | None, default None): a round waits until this many sites are
            connected (default ``min_sites``), then asks every connected site; set it to the
            federation's size so a round never starts with only the first sites to connect.
        min_noise_multiplier (float | None, default None): asks every site for at least this
            noise multiplier (a site never goes below its own).
        privacy (dict | None, default None): the privacy the run was configured with
            (the coordinator's request: a real site replaces it with its own policy), copied
            into the result; what each site guaranteed comes with its answers.
        deadlines (Deadlines | None, default None): how long the run waits for the sites
            to connect and for their answers (``None``: the App's defaults,
            :meth:`Deadlines.of <fedpca.flower.server.readiness.Deadlines.of>` of ``{}``).
        **params: the algorithm's parameters, for :meth:`build`.
    """

    #: The hash of the data contract the run is made under (run_config ``contract``; ``""``:
    #: none), sent to the sites with the released result.
    contract: str = ""

    def __init__(
        self,
        server: Any = None,
        *,
        min_sites: int = 2,
        wait_for_sites: int | None = None,
        min_noise_multiplier: float | None = None,
        privacy: dict[str, Any] | None = None,
        deadlines: Deadlines | None = None,
        **params: Any,
    ) -> None:
        super().__init__()
        self.deadlines = deadlines if deadlines is not None else Deadlines.of({})
        self.min_sites = max(1, int(min_sites))
        self.wait_for_sites = max(self.min_sites, int(wait_for_sites or 0))
        self.min_noise_multiplier = min_noise_multiplier
        self.privacy = dict(privacy or {})
        #: The Flower-free server: it plans the rounds, keeps the history, makes the result.
        self.server = server if server is not None else self.build(**params)
        self.server.noise_floor = min_noise_multiplier
        #: Every failing site's reason, over the whole run.
        self.failures: list[str] = []
        #: The sites (node ids) that declined the run in the readiness round, with their
        #: reasons; they are not asked for releases.
        self.declined: dict[int, str] = {}
        #: Whether the readiness round ran (:meth:`readiness_round`).
        self.readiness_asked = False
        #: The readiness round's answers, if the ServerApp asked before building the strategy
        #: (:func:`fedpca.flower.server.app_server.server_scenario`) or once :meth:`readiness_round`
        #: ran.
        self.readiness: Readiness | None = None
        #: The number of releases each site last reported (its ledger's count).
        self.site_releases: dict[str, int] = {}
        #: Each answering site's record count (public under replace-one neighbouring).
        self.site_sizes: dict[str, int] = {}
        #: Each answering site's own guarantee, as its latest answer stated it.
        self.site_guarantees: dict[str, SiteGuarantee] = {}
        #: When the run started (:meth:`begin`).
        self.started: float | None = None
        #: Sites asked in the current round, and their nodes (set when the round's requests
        #: are sent).
        self.asked, self.asked_nodes = 0, []
        #: Called with a :class:`~fedpca.progress.RoundEvent` after every aggregated round.
        self.observers: list[RoundObserver] = []
        #: The sites that received the released result (:meth:`deliver_result`).
        self.delivered: list[str] = []

    def build(self, **params: Any) -> Any:
        """The algorithm's server from its parameters: each algorithm's strategy class sets
        it to the server's class (or to a function of the strategy and the parameters)."""
        raise ConfigurationError(
            f"{type(self).__name__} runs the server it is given: pass server=... (or use an "
            "algorithm's strategy, e.g. DPSPCA, which builds its own from its parameters)")

    @property
    def label(self) -> str:
        """The algorithm's name in logs and errors."""
        return self.server.label

    @property
    def num_rounds(self) -> int:
        """Flower rounds the run needs: the server's rounds."""
        return self.server.num_rounds

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.server.describe()}, min_sites={self.min_sites})"

    def add_observer(self, observer: RoundObserver) -> None:
        """Call ``observer`` after every aggregated round (live progress, a server log)."""
        self.observers.append(observer)

    def notify(self) -> None:
        """Tell every observer about the round just aggregated (the history's last entry);
        an observer's failure is logged and never stops the run."""
        history = self.server.history
        event = RoundEvent(
            algorithm=self.server.algorithm, entry=dict(history[-1]), asked=self.asked,
            done=len(history), total=self.num_rounds,
        )
        for observer in self.observers:
            try:
                observer(event)
            except Exception:  # a display must not end a private computation
                logger.exception("%s round %s: a progress observer failed", self.label,
                                 event.entry.get("round"))

    def result(self, config: dict[str, Any] | None = None) -> Any:
        """The run's final result (from the server), its privacy record stating what the
        sites guaranteed (:func:`~fedpca.dp.guarantee.as_guaranteed`: a real site
        calibrates with its own policy, whatever the run asked).

        The config gains ``request`` (the privacy the run was asked for: never a
        guarantee), ``site_records`` (each answering site's record count),
        ``site_guarantees`` (each answering site's own guarantee) and, unless the caller
        measured it, ``wall_seconds`` since the run started.
        """
        config = {**(config or {}), **self.result_config(), "request": dict(self.privacy)}
        if self.started is not None:
            config.setdefault("wall_seconds", time.perf_counter() - self.started)
        return self.server.result(as_guaranteed(self.privacy, self.site_guarantees.values()),
                                  config)

    def result_config(self) -> dict[str, Any]:
        """What the strategy adds to the result's config (and the server's own extras)."""
        return {
            **self.server.result_extras(),
            "result_delivered": list(self.delivered),
            "site_records": dict(sorted(self.site_sizes.items())),
            "site_guarantees": {
                site: g.to_dict() for site, g in sorted(self.site_guarantees.items())
            },
        }

    def released_result(self, run_id: str) -> ReleasedResult | None:
        """What the sites receive at the end of run ``run_id``: the result's basis, and its
        mean, scale and column names when it has them, with the run's :attr:`contract`;
        ``None`` for a result without one basis (SuLQ k-plane's clusters)."""
        result = self.result()
        if getattr(result, "basis", None) is None:
            return None
        columns = getattr(result, "columns", None)
        return ReleasedResult(
            run_id=run_id, algorithm=result.algorithm, basis=result.basis,
            mean=getattr(result, "mean", None), scale=getattr(result, "scale", None),
            columns=None if columns is None else tuple(columns), contract=self.contract,
            floored_scales=self.server.floored_scales(),
        )

    def announce_failure(self, grid: Grid, error: BaseException) -> None:
        """After a failure past the readiness round (releases may have been made): tell every
        site that was asked that the run failed, and why
        (:func:`~fedpca.flower.server.delivery.announce_failure`), so that its ledger
        says so. Never raises."""
        if self.readiness is None:
            return
        reason = str(error) or type(error).__name__
        announce_failure(grid, sorted(self.readiness.ready), reason, self.answer_seconds())

    def deliver_result(self, grid: Grid) -> None:
        """The run's last step: send the released result of the grid's run (under the data
        contract :attr:`contract`) to every connected site
        (:mod:`fedpca.flower.server.delivery`); the sites that received it go to the
        result's config (``result_delivered``). A failed delivery is logged, never
        raised."""
        if len(self.server.history) < self.num_rounds:
            logger.warning("%s: the run stopped before its last round; no result to send",
                           self.label)
            return
        released = self.released_result(str(grid.run.run_id))
        if released is None:
            logger.info("%s: the result has no single basis; nothing is sent to the sites",
                        self.label)
            return
        self.delivered = deliver(grid, sorted(grid.get_node_ids()), released,
                                 self.answer_seconds())

    def answer_seconds(self) -> float:
        """How long an exchange of this run waits for the sites' answers: the longest
        ``answer-seconds`` a ready site stated, else the plan's
        :attr:`~fedpca.flower.server.readiness.Deadlines.answer`."""
        if self.readiness is None:
            return self.deadlines.answer
        return self.readiness.answer_seconds(self.deadlines.answer)

    def named(self, reason: str) -> str:
        """``reason`` naming each ready site by its name (:func:`named_nodes`)."""
        if self.readiness is None:
            return reason
        return named_nodes(reason, {node: r.site for node, r in self.readiness.ready.items()})

    def begin(self) -> None:
        """Start the run's clock (the result's ``wall_seconds``)."""
        self.started = time.perf_counter()

    def connected_sites(self, grid: Grid) -> list[int]:
        """Every connected node, once at least ``wait_for_sites`` are."""
        return connected_nodes(grid, self.wait_for_sites, self.deadlines.connect)

    def readiness_round(self, grid: Grid) -> list[int]:
        """Before round 1, ask every connected site whether it is ready for the whole run
        (:mod:`fedpca.flower.server.readiness`), unless the ServerApp asked already
        (:attr:`readiness`); return the node ids of those that are and remember the others,
        which are not asked for releases. Raises :class:`ReadinessRoundError`, before any
        release, quoting each declining site's reason, when fewer than ``min_sites`` are."""
        if self.readiness is None:
            self.readiness = ask_readiness(grid, self.connected_sites(grid),
                                        self.deadlines.readiness)
        self.readiness_asked = True
        self.declined.update(self.readiness.declined)
        self.failures.extend(self.readiness.declined.values())
        require_ready(self.readiness, self.min_sites, self.label)
        return sorted(self.readiness.ready)

    def request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Scalar]]:
        """What every site is asked in ``server_round``: the algorithm's request and, if
        set, the noise floor ``min_noise_multiplier``."""
        arrays, config = self.server.round_request(server_round)
        if self.min_noise_multiplier is not None:
            config["min_noise_multiplier"] = float(self.min_noise_multiplier)
        return arrays, config

    def aggregate(
        self,
        server_round: int,
        replies: Sequence[Reply],
        reasons: list[str],
        decode: Callable[[Reply], SiteAnswer],
        summed: Sequence[np.ndarray] | None = None,
        groups: Sequence[int | None] | None = None,
    ) -> tuple[np.ndarray, dict[str, Scalar]]:
        """Check that at least ``min_sites`` sites answered (``reasons``: why the others did
        not), then decode and combine their answers and tell the observers. ``summed``: each
        group's sum of its answers' residues, unmasked by fedpca's verifiable secure
        aggregation (the answers themselves are masked), and ``groups`` the group of each
        reply's answer (:func:`summed_answers`)."""
        reasons = [self.named(reason) for reason in reasons]
        for reason in reasons:
            logger.warning("%s round %s: a site failed: %s", self.label, server_round, reason)
        self.failures.extend(reasons)
        if len(replies) < self.min_sites:
            logger.error(WARNING_TOO_FEW_SITES, self.label, server_round, len(replies),
                         self.min_sites, reasons)
            raise RoundFailedError(
                f"round {server_round}: {len(replies)} site(s) answered, need "
                f"{self.min_sites}; failures: {reasons}", failures=reasons,
            )
        answers = [decode(reply) for reply in replies]
        if summed is not None:
            answers = summed_answers(answers, summed, groups or [None] * len(answers))
        self.site_releases.update({a.site: a.releases for a in answers})
        self.site_sizes.update({a.site: a.n for a in answers})
        self.site_guarantees.update({a.site: a.guarantee for a in answers if a.guarantee})
        try:
            array, metrics = self.server.round_result(server_round, answers)
        except SumBoundError as error:  # the run record names the round
            logger.error("%s round %s: %s", self.label, server_round, error)
            raise SumBoundError(f"round {server_round}: {error}") from None
        self.notify()
        return array, metrics


def summed_answers(answers: Sequence[SiteAnswer], totals: Sequence[np.ndarray],
                   groups: Sequence[int | None]) -> list[SiteAnswer]:
    """The answers of secure sums as the Flower-free server reads them: each answer marked
    with its group's index (``groups``, one per answer; ``None``: one sum of every answer,
    ``totals[0]``), the group's ``totals`` entry (the sum of its residues modulo ``m``) as
    the message of its first answer (in the answers' order), zeros as the others' (so each
    group's modular sum is its total; :func:`~fedpca.algorithms.sum_groups.robust_decode`
    decodes each group)."""
    summed, seen = [], set()
    for answer, group in zip(answers, groups, strict=True):
        total = totals[0 if group is None else group]
        value = np.zeros_like(total) if group in seen else total
        summed.append(dataclasses.replace(answer, value=value, group=group))
        seen.add(group)
    return summed

"""The readiness round: before any release, every site says whether it is ready for the whole
run (its budget affords it, its policy allows it, its data can answer it).

A run that one site cannot finish costs the other sites their budget for nothing: they pay
for every release up to the round where that site refuses, and nobody gets a result. So
before round 1 a fedpca strategy
(:meth:`~fedpca.flower.server.rounds.SiteRoundStrategy.readiness_round`)
sends every connected site one QUERY message, "are you ready for the whole of this run?"
(:func:`~fedpca.flower.wire.readiness_question`), which carries nothing a site uses. Each
site answers from its own policy and ledger alone, never its data, so its answer depends on
no record: a real site whether all of the run's releases, as its policy calibrates them, fit
its lifetime budget, its worst-case bound and its daily and weekly ceilings
(:meth:`~fedpca.site.real_site.RealSiteSource.ready`); a simulated site whether they fit the run's
in-memory ledger. A site that can says its name; one that cannot answers with its refusal
(public numbers only: budgets and epsilons). When fewer than ``min_sites`` can, the run
stops before any release with
:class:`~fedpca.flower.server.rounds.ReadinessRoundError`, quoting each declining site's own words;
otherwise the sites that declined are not asked for releases in the run.

This round serves honest coordinators. A hostile one may skip it; what binds is each site's
own check at the run's first request
(:meth:`~fedpca.site.real_site.RealSiteSource.require_affordable`).

Both strategy APIs run it through the ServerApp's grid: a Message-API strategy in its
``start``; a legacy one in :func:`fedpca.flower.server.workflow.run_strategy`, before Flower's
``DefaultWorkflow``. The legacy strategy API has no hook before
round 1 that may exchange messages, and the legacy ``get_properties`` exchange
(``GridClientProxy.get_properties``) uses a message type that a Message-API ClientApp (like
fedpca's, :func:`~fedpca.flower.site.clientapp.site_client_app`) does not accept. A legacy strategy
driven by one's own ``DefaultWorkflow`` therefore has no readiness round (it logs so at round 1) and
relies on the sites' own refusal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from flwr.app import Message, MessageType
from flwr.serverapp import Grid

from fedpca.algorithms.specs import APP_KEYS
from fedpca.flower.wire import readiness_question, read_readiness_answer
from fedpca.flower.server.prompt_grid import failure_reason
from fedpca.errors import ConfigurationError, FedPCAError
from fedpca.site.ready import SiteReady


@dataclass(frozen=True)
class Deadlines:
    """How long a run's coordinator waits, in seconds, as the run's plan states it
    (run_config ``connect-seconds``, ``readiness-seconds``, ``answer-seconds``,
    ``restart-seconds``; defaults in :data:`fedpca.algorithms.specs.APP_KEYS`): for
    ``wait_for_sites`` sites to connect (then the run goes on with those connected), for the
    readiness round's answers (then a silent site is left out), for each later exchange's
    answers when no ready site states its own ``answer-seconds`` (then the round goes on
    without the silent), and for a site whose node went away to come back (then it is asked
    again, :mod:`fedpca.flower.server.prompt_grid`; ``0``: not awaited)."""

    connect: float
    readiness: float
    answer: float
    restart: float

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Deadlines:
        """The deadlines of run_config ``config`` (a key it lacks: the App's default);
        refused unless each is a positive number of seconds (``restart-seconds``: or 0)."""
        seconds = {}
        for name in (f.name for f in fields(cls)):
            key = f"{name}-seconds"
            value = config.get(key, APP_KEYS[key])
            number = not isinstance(value, bool) and isinstance(value, (int, float))
            if not number or not (value > 0 or (value == 0 and name == "restart")):
                allowed = "a non-negative" if name == "restart" else "a positive"
                raise ConfigurationError(
                    f"run_config {key} must be {allowed} number of seconds, got {value!r}")
            seconds[name] = float(value)
        return cls(**seconds)


@dataclass(frozen=True)
class Readiness:
    """The readiness round's answers: each ready node's statement, each other node's reason."""

    ready: dict[int, SiteReady] = field(default_factory=dict)
    declined: dict[int, str] = field(default_factory=dict)

    def answer_seconds(self, default: float) -> float:
        """How long a request of this run may wait for its answers: the longest answer
        deadline a ready site stated, ``default`` when none did."""
        stated = [r.answer_seconds for r in self.ready.values() if r.answer_seconds]
        return max(stated, default=default)


def ask_readiness(grid: Grid, nodes: Sequence[int], timeout: float) -> Readiness:
    """Ask every node of ``nodes`` the readiness question: what each node that is ready for
    the whole run states, and why each other node is not (it declined, or sent no valid
    answer within ``timeout`` seconds, the plan's :attr:`Deadlines.readiness`)."""
    messages = [Message(readiness_question(), message_type=MessageType.QUERY, dst_node_id=node)
                for node in nodes]
    ready: dict[int, SiteReady] = {}
    declined: dict[int, str] = {}
    for reply in grid.send_and_receive(messages, timeout=timeout):
        node = reply.metadata.src_node_id
        if reply.has_error():
            declined[node] = failure_reason(reply)
            continue
        try:
            ready[node] = read_readiness_answer(reply.content, str(node))
        except FedPCAError as error:
            declined[node] = str(error)
    for node in nodes:
        if node not in ready and node not in declined:
            declined[node] = f"node {node}: no answer within {timeout:g} s"
    return Readiness(ready, declined)

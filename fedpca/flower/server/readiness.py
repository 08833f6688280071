"""The budget round: before any release, every site says whether it can afford the whole run.

A run that one site cannot finish costs the other sites their budget for nothing: they pay
for every release up to the round where that site refuses, and nobody gets a result. So
before round 1 a fedpca strategy
(:meth:`~fedpca.flower.server.rounds.SiteRoundStrategy.budget_round`)
sends every connected site one QUERY message, "can you afford the whole of this run?"
(:func:`~fedpca.flower.wire.budget_question`), which carries nothing a site uses. Each
site answers from its own policy and ledger alone, never its data, so its answer depends on
no record: a real site whether all of the run's releases, as its policy calibrates them, fit
its lifetime budget, its worst-case bound and its daily and weekly ceilings
(:meth:`~fedpca.site.real_site.RealSiteSource.ready`); a simulated site whether they fit the run's
in-memory ledger. A site that can says its name; one that cannot answers with its refusal
(public numbers only: budgets and epsilons). When fewer than ``min_sites`` can, the run
stops before any release with
:class:`~fedpca.flower.server.rounds.BudgetRoundError`, quoting each declining site's own words;
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
driven by one's own ``DefaultWorkflow`` therefore has no budget round (it logs so at round 1) and
relies on the sites' own refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flwr.app import Message, MessageType
from flwr.serverapp import Grid

from fedpca.flower.wire import budget_question, read_budget_answer
from fedpca.errors import FedPCAError
from fedpca.site.ready import SiteReady

#: Seconds the budget round waits for the sites' answers.
BUDGET_TIMEOUT = 600.0


@dataclass(frozen=True)
class Readiness:
    """The budget round's answers: each ready node's statement, each other node's reason."""

    ready: dict[int, SiteReady] = field(default_factory=dict)
    declined: dict[int, str] = field(default_factory=dict)

    def answer_seconds(self, default: float) -> float:
        """How long a request of this run may wait for its answers: the longest answer
        deadline a ready site stated, ``default`` when none did."""
        stated = [r.answer_seconds for r in self.ready.values() if r.answer_seconds]
        return max(stated, default=default)


def ask_budget(grid: Grid, nodes: Sequence[int], timeout: float | None = None
               ) -> Readiness:
    """Ask every node of ``nodes`` the budget question: what each node that is ready for
    the whole run states, and why each other node is not (it declined, or sent no valid
    answer within ``timeout`` seconds; ``None``: :data:`BUDGET_TIMEOUT`)."""
    timeout = BUDGET_TIMEOUT if timeout is None else timeout
    messages = [Message(budget_question(), message_type=MessageType.QUERY, dst_node_id=node)
                for node in nodes]
    ready: dict[int, SiteReady] = {}
    declined: dict[int, str] = {}
    for reply in grid.send_and_receive(messages, timeout=timeout):
        node = reply.metadata.src_node_id
        if reply.has_error():
            declined[node] = reply.error.reason or f"node {node}: error code {reply.error.code}"
            continue
        try:
            ready[node] = read_budget_answer(reply.content, str(node))
        except FedPCAError as error:
            declined[node] = str(error)
    for node in nodes:
        if node not in ready and node not in declined:
            declined[node] = f"node {node}: no answer within {timeout:g} s"
    return Readiness(ready, declined)

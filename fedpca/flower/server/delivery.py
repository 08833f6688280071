"""The last step of a run: the released result goes to every site (or, when the run failed
after releases, the news that it failed: :func:`announce_failure`).

Until then only the coordinator's output file held the result. After the last round a fedpca
strategy (:meth:`~fedpca.flower.server.rounds.SiteRoundStrategy.deliver_result`, called by
:func:`fedpca.flower.server.workflow.run_strategy` for both strategy APIs) sends every
connected site one QUERY message with the released basis, the released column mean and
scale of a centred run, the algorithm, the column names when known, the run's id and its
data contract's hash (:mod:`fedpca.flower.result_wire`). A real site checks it as
hostile input and stores it beside its policy (:mod:`fedpca.site.results`), so that
``fedpca site project`` computes its records' scores without any file from the coordinator;
a simulated site checks it and logs it.

Sending the result is post-processing of what was released: it costs no site any budget.
A site that cannot be reached or refuses the result is logged here (a warning) and never
fails the run: the result is complete and the coordinator's output file holds it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from flwr.app import Message, MessageType
from flwr.serverapp import Grid

from fedpca.flower.result_wire import read_result_answer, result_message
from fedpca.flower.run_end import run_end_message
from fedpca.errors import FedPCAError
from fedpca.site.results import ReleasedResult

logger = logging.getLogger(__name__)

def deliver(grid: Grid, nodes: Sequence[int], result: ReleasedResult,
            timeout: float) -> list[str]:
    """Send ``result`` to every node of ``nodes``; the names of the sites that received it
    (sorted). Every failure (no answer within ``timeout`` seconds, a refusal, a transport
    error) is logged and none is raised."""
    content = result_message(result)
    messages = [Message(content, message_type=MessageType.QUERY, dst_node_id=node)
                for node in nodes]
    try:
        replies = list(grid.send_and_receive(messages, timeout=timeout))
    except Exception:  # the run's result is complete: a failed delivery must not end it
        logger.exception("run %s: sending the released result to the sites failed",
                         result.run_id)
        return []
    received, answered = [], set()
    for reply in replies:
        node = reply.metadata.src_node_id
        answered.add(node)
        try:
            if reply.has_error():
                raise FedPCAError(reply.error.reason or f"error code {reply.error.code}")
            received.append(read_result_answer(reply.content, str(node)))
        except FedPCAError as error:
            logger.warning("run %s: node %s did not take the released result: %s",
                           result.run_id, node, error)
    for node in sorted(set(nodes) - answered):
        logger.warning("run %s: node %s did not acknowledge the released result within %g s",
                       result.run_id, node, timeout)
    logger.info("run %s: the released result (%s, k=%d) reached %d of %d site(s)",
                result.run_id, result.algorithm, result.k, len(received), len(nodes))
    return sorted(received)


def announce_failure(grid: Grid, nodes: Sequence[int], reason: str, timeout: float) -> None:
    """Tell every node of ``nodes`` that the grid's run failed for ``reason`` (waiting
    ``timeout`` seconds for their acknowledgements)
    (:mod:`fedpca.flower.run_end`: each site's ledger then says so); the run has failed
    already, so nothing here is raised: every failure is logged."""
    messages = [Message(run_end_message(reason), message_type=MessageType.QUERY,
                        dst_node_id=node) for node in nodes]
    try:
        replies = list(grid.send_and_receive(messages, timeout=timeout))
    except Exception:  # the run failed already: telling the sites must not hide why
        logger.exception("run %s: telling the sites that the run failed failed",
                         grid.run.run_id)
        return
    told = sum(not reply.has_error() for reply in replies)
    logger.info("run %s: %d of %d site(s) recorded that the run failed", grid.run.run_id,
                told, len(nodes))

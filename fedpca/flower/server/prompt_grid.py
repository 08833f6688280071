"""A ServerApp's grid that collects the sites' replies as they arrive.

Flower's deployment grid (1.41-1.42) waits 3 s between two looks for replies in
``send_and_receive``; every exchange of a run (the readiness round, each round's requests,
each stage of a secure sum, the result's delivery) then costs up to 3 s beyond the sites'
own time, which a secure run pays seven times per round. :class:`PromptGrid` wraps any
:class:`flwr.serverapp.Grid` and implements ``send_and_receive`` with the grid's own public
``push_messages`` and ``pull_messages``: it looks :data:`FIRST_LOOK_SECONDS` after the
push, then waits twice as long after each look that found nothing new, up to
:data:`POLL_SECONDS`, and looks soon again once a reply came (the others tend to follow).
Replies that come at once are read at once, and a slow exchange costs the SuperLink a few
looks, not one every tenth of a second (each look is a request it answers). It changes
nothing a site receives or sends (same messages, same timeout): only how soon the server
reads the replies.

A site that stops does not hold an exchange until its timeout: at most every
:data:`LIVENESS_SECONDS` while replies are awaited, the grid asks which nodes are still
connected (``get_node_ids``, the SuperLink's online nodes), and a message whose node is gone
gets an error reply in its place (:data:`NODE_GONE`), as Flower 1.41-1.42's SuperLink itself
answers for a node that missed its heartbeats; the run then goes on without that site, or
fails naming it, as for any failed site.

No exchange waits past its deadline: the ``timeout`` its caller passes, which the run's plan
sets (the readiness round's own, then the longest ``answer-seconds`` a ready site stated:
:meth:`fedpca.flower.server.rounds.SiteRoundStrategy.answer_seconds`), and the grid's own
``timeout`` (the plan's :attr:`~fedpca.flower.server.readiness.Deadlines.answer`) when a
caller passes none, as Flower's legacy ``DefaultWorkflow`` does. At the deadline
the exchange ends with the replies that came; the caller names the nodes whose reply did
not, so a site that is connected but silent (its ClientApp blocked, its machine stalled) is
left out, or fails the run by name, as a site that refused.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from flwr.app import Error, Message
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid

#: Seconds from a push, or from a look that found a reply, to the next look.
FIRST_LOOK_SECONDS = 0.05
#: The longest wait between two looks for replies, in seconds.
POLL_SECONDS = 0.4
#: The shortest time between two looks at which nodes are still connected, in seconds.
LIVENESS_SECONDS = 1.0
#: The reason of the error reply a message gets when its node is no longer connected.
NODE_GONE = ("Node Unavailable: node {node} is no longer connected to the SuperLink, so its "
             "reply will not come")


class PromptGrid(Grid):
    """``grid`` with replies pulled after ``first`` seconds, then after waits that double up
    to ``poll`` seconds while none comes, an exchange without a ``timeout`` of its own
    ending after ``timeout`` seconds (everything else is the grid's)."""

    def __init__(self, grid: Grid, timeout: float, poll: float = POLL_SECONDS,
                 first: float = FIRST_LOOK_SECONDS) -> None:
        self.grid, self.timeout, self.poll, self.first = grid, timeout, poll, first

    def set_run(self, run: Any) -> None:
        self.grid.set_run(run)

    @property
    def run(self) -> Any:
        return self.grid.run

    def create_message(self, *args, **kwargs) -> Message:  # noqa: ANN002, ANN003
        return self.grid.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return self.grid.get_node_ids()

    def get_nodes(self) -> Iterable[Any]:
        return self.grid.get_nodes()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> Iterable[Message]:
        """Push ``messages``; pull their replies until all arrived or ``timeout`` seconds
        passed (``None``: the grid's :attr:`timeout`), looking as the class says."""
        messages = list(messages)
        sent = dict(zip(self.push_messages(messages), messages))
        waiting = {message_id for message_id in sent if message_id}  # not pushed: no reply
        end = time.monotonic() + (self.timeout if timeout is None else timeout)
        replies: list[Message] = []
        wait, looked = self.first, time.monotonic()
        while waiting:
            time.sleep(max(0.0, min(wait, end - time.monotonic())))
            arrived = list(self.pull_messages(list(waiting)))
            if not arrived and time.monotonic() - looked >= LIVENESS_SECONDS:
                arrived, looked = self._gone(sent, waiting), time.monotonic()
            replies += arrived
            waiting -= {reply.metadata.reply_to_message_id for reply in arrived}
            if time.monotonic() >= end:
                break
            wait = self.first if arrived else min(2 * wait, self.poll)
        return replies

    def _gone(self, sent: dict[str, Message], waiting: set[str]) -> list[Message]:
        """An error reply (:data:`NODE_GONE`) for each ``waiting`` message whose node is no
        longer connected."""
        connected = set(self.get_node_ids())
        return [Message(Error(code=ErrorCode.NODE_UNAVAILABLE,
                              reason=NODE_GONE.format(node=sent[i].metadata.dst_node_id)),
                        reply_to=sent[i])
                for i in sorted(waiting) if sent[i].metadata.dst_node_id not in connected]


def no_reply(missing: int, asked: Iterable[int], replies: Iterable[Message]) -> str:
    """The failure of ``missing`` sites whose reply did not come by an exchange's deadline,
    naming each node of ``asked`` that sent none of ``replies`` (none named when ``asked``
    is empty: the caller did not keep them)."""
    replied = {reply.metadata.src_node_id for reply in replies}
    silent = [f"node {node}" for node in sorted(set(asked) - replied)]
    named = f": {', '.join(silent)}" if silent else ""
    return f"{missing} site(s) sent no reply in time{named}"


def prompt(grid: object, timeout: float) -> object:
    """``grid`` as a :class:`PromptGrid` whose exchanges without a timeout of their own end
    after ``timeout`` seconds, when it is a Flower grid (a test's stand-in is kept as it
    is)."""
    if isinstance(grid, PromptGrid):
        return PromptGrid(grid.grid, timeout, grid.poll, grid.first)
    return PromptGrid(grid, timeout) if isinstance(grid, Grid) else grid

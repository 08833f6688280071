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
answers for a node that missed its heartbeats (whose reply, which names no node and comes
from the SuperLink's own node id, is replaced by the same, so that the failure names the
site). A site that restarts gets its message again:
for the run's ``restart-seconds`` (:attr:`~fedpca.flower.server.readiness.Deadlines.restart`)
after its node went away, the grid looks for the node to be connected again, and then pushes
a copy of the message it had not answered (a real site answers a request it had answered
already from its journal, so nothing is released twice: :mod:`fedpca.site.reply_journal`);
a node that does not come back in time gets its error reply, and the run goes on without
that site, or fails naming it, as for any failed site.

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

import logging
import time
from collections.abc import Iterable
from typing import Any

from flwr.app import Error, Message
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid

from fedpca.site.service import SITE_FAILURE

logger = logging.getLogger(__name__)

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
    ending after ``timeout`` seconds, and a node that goes away awaited ``restart`` seconds
    (everything else is the grid's)."""

    def __init__(self, grid: Grid, timeout: float, poll: float = POLL_SECONDS,
                 first: float = FIRST_LOOK_SECONDS, restart: float = 0.0) -> None:
        self.grid, self.timeout, self.poll, self.first = grid, timeout, poll, first
        self.restart = restart

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
        passed (``None``: the grid's :attr:`timeout`), looking as the class says; a message
        whose node went away is sent again when the node is back within :attr:`restart`
        seconds (:class:`Exchange`)."""
        exchange = Exchange(self, self.timeout if timeout is None else timeout)
        exchange.push(list(messages))
        wait, looked = self.first, time.monotonic()
        while exchange.open():
            time.sleep(max(0.0, min(wait, exchange.next_end() - time.monotonic())))
            arrived = exchange.pull()
            if not arrived and time.monotonic() - looked >= LIVENESS_SECONDS:
                arrived, looked = exchange.look_at_nodes(), time.monotonic()
            wait = self.first if arrived else min(2 * wait, self.poll)
        return exchange.replies


class Exchange:
    """The messages of one ``send_and_receive`` of ``grid`` (a :class:`PromptGrid`) and
    their replies, each message awaited ``timeout`` seconds from its push.

    A node that goes away (its reply is Flower's or :data:`NODE_GONE`'s "node unavailable")
    is awaited ``grid.restart`` seconds: when it is connected again within them, its
    message goes again, a copy with the same content (the site answers a request it had
    answered from its journal, :mod:`fedpca.site.reply_journal`); otherwise its error
    reply stands. One reply per message is kept, the first."""

    def __init__(self, grid: PromptGrid, timeout: float) -> None:
        self.grid, self.timeout = grid, timeout
        #: Each message by the id it was first pushed under (its key here).
        self.messages: dict[str, Message] = {}
        #: Each pushed id (a copy's too) -> its message's key.
        self.key_of: dict[str, str] = {}
        #: Each awaited pushed id -> when its wait ends.
        self.waiting: dict[str, float] = {}
        #: Each message whose node went away -> its error reply, and when the wait for the
        #: node ends.
        self.away: dict[str, tuple[Message, float]] = {}
        #: The keys of the messages answered (their first reply kept in :attr:`replies`).
        self.answered: set[str] = set()
        self.replies: list[Message] = []

    def push(self, messages: list[Message], keys: list[str] | None = None) -> None:
        """Push ``messages`` (copies of the messages of ``keys``, when given), each awaited
        :attr:`timeout` seconds from now."""
        end = time.monotonic() + self.timeout
        for index, message_id in enumerate(self.grid.push_messages(messages)):
            if not message_id:  # a message not pushed gets no reply
                continue
            key = message_id if keys is None else keys[index]
            self.messages.setdefault(key, messages[index])
            self.key_of[message_id], self.waiting[message_id] = key, end

    def open(self) -> bool:
        """Whether a reply may still come or a node may still come back; at a message's
        end its wait ends (the caller names the silent), at a node's its error stands."""
        now = time.monotonic()
        self.waiting = {i: end for i, end in self.waiting.items() if end > now}
        for key, (error, end) in list(self.away.items()):
            if end <= now:
                del self.away[key]
                self.keep(key, error)
        return bool(self.waiting or self.away)

    def next_end(self) -> float:
        """The soonest end of a wait."""
        return min([*self.waiting.values(), *(end for _, end in self.away.values())])

    def pull(self) -> list[Message]:
        """The replies that arrived (each message's first kept; a gone node's error held
        while it may come back)."""
        arrived = list(self.grid.pull_messages(list(self.waiting)))
        for reply in arrived:
            self.take(reply)
        return arrived

    def take(self, reply: Message) -> None:
        """Keep ``reply`` as its message's first, or hold it while its node may come back."""
        pushed = reply.metadata.reply_to_message_id
        self.waiting.pop(pushed, None)
        key = self.key_of.get(pushed)
        if key is None or key in self.away or key in self.answered:
            return
        for other in [i for i in self.waiting if self.key_of[i] == key]:
            del self.waiting[other]
        if _node_gone(reply):  # Flower's words name no node, and its reply comes from node 1
            reply = _gone_reply(self.messages[key])
            if self.grid.restart > 0:
                logger.warning("node %s went away: awaiting it for %g s (restart-seconds)",
                               self.messages[key].metadata.dst_node_id, self.grid.restart)
                self.away[key] = (reply, time.monotonic() + self.grid.restart)
                return
        self.keep(key, reply)

    def keep(self, key: str, reply: Message) -> None:
        self.answered.add(key)
        self.replies.append(reply)

    def look_at_nodes(self) -> list[Message]:
        """Which nodes are still connected: an error reply (:data:`NODE_GONE`) for each
        awaited message whose node is not, and a copy pushed again of each message whose
        node is back; the error replies."""
        connected = set(self.grid.get_node_ids())
        back = [key for key in self.away
                if self.messages[key].metadata.dst_node_id in connected]
        for key in back:
            del self.away[key]
            logger.warning("node %s is connected again: the message it did not answer goes "
                           "again", self.messages[key].metadata.dst_node_id)
        if back:
            self.push([_copy(self.messages[key]) for key in back], back)
        gone = [_gone_reply(self.messages[self.key_of[i]]) for i in sorted(self.waiting)
                if self.messages[self.key_of[i]].metadata.dst_node_id not in connected]
        for reply in gone:
            self.take(reply)
        return gone


def _node_gone(reply: Message) -> bool:
    """Whether ``reply`` says its node is unavailable (Flower's words or :data:`NODE_GONE`)."""
    return reply.has_error() and reply.error.code == ErrorCode.NODE_UNAVAILABLE


def _gone_reply(message: Message) -> Message:
    """The error reply (:data:`NODE_GONE`, from its node) of ``message`` whose node is gone."""
    return Message(Error(code=ErrorCode.NODE_UNAVAILABLE,
                         reason=NODE_GONE.format(node=message.metadata.dst_node_id)),
                   reply_to=message)


def _copy(message: Message) -> Message:
    """A message with ``message``'s content, type, destination and group, to push again."""
    meta = message.metadata
    return Message(message.content, dst_node_id=meta.dst_node_id,
                   message_type=meta.message_type, group_id=meta.group_id)


def failure_reason(reply: Message) -> str:
    """Why the site of the error ``reply`` released nothing: its own refusal as it wrote it
    (a site's refusal names the site), anything else (Flower's "node unavailable", a
    transport error, a site's unvetted failure :data:`~fedpca.site.service.SITE_FAILURE`) led
    by its node, so that every failure names the site
    (:func:`~fedpca.flower.server.rounds.named_nodes` writes its name beside the node)."""
    node, error = reply.metadata.src_node_id, reply.error
    text = error.reason or f"error code {error.code}"
    own = error.code == ErrorCode.CLIENT_APP_RAISED_EXCEPTION and text != SITE_FAILURE
    return text if own or f"node {node}" in text else f"node {node}: {text}"


def no_reply(missing: int, asked: Iterable[int], replies: Iterable[Message]) -> str:
    """The failure of ``missing`` sites whose reply did not come by an exchange's deadline,
    naming each node of ``asked`` that sent none of ``replies`` (none named when ``asked``
    is empty: the caller did not keep them)."""
    replied = {reply.metadata.src_node_id for reply in replies}
    silent = [f"node {node}" for node in sorted(set(asked) - replied)]
    named = f": {', '.join(silent)}" if silent else ""
    return f"{missing} site(s) sent no reply in time{named}"


def prompt(grid: object, timeout: float, restart: float = 0.0) -> object:
    """``grid`` as a :class:`PromptGrid` whose exchanges without a timeout of their own end
    after ``timeout`` seconds and which awaits a node that went away ``restart`` seconds
    (a prompt grid already keeps its own), when it is a Flower grid (a test's stand-in is
    kept as it is)."""
    if isinstance(grid, PromptGrid):
        return PromptGrid(grid.grid, timeout, grid.poll, grid.first, grid.restart)
    return PromptGrid(grid, timeout, restart=restart) if isinstance(grid, Grid) else grid

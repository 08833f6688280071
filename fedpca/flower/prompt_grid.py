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
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from flwr.app import Message
from flwr.serverapp import Grid

#: Seconds from a push, or from a look that found a reply, to the next look.
FIRST_LOOK_SECONDS = 0.05
#: The longest wait between two looks for replies, in seconds.
POLL_SECONDS = 0.4


class PromptGrid(Grid):
    """``grid`` with replies pulled after ``first`` seconds, then after waits that double up
    to ``poll`` seconds while none comes (everything else is the grid's)."""

    def __init__(self, grid: Grid, poll: float = POLL_SECONDS,
                 first: float = FIRST_LOOK_SECONDS) -> None:
        self.grid, self.poll, self.first = grid, poll, first

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
        passed (``None``: no limit), as Flower's grids do, looking as the class says."""
        waiting = set(self.push_messages(messages))
        end = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        wait = self.first
        while waiting:
            time.sleep(wait if end is None else max(0.0, min(wait, end - time.monotonic())))
            arrived = list(self.pull_messages(list(waiting)))
            replies += arrived
            waiting -= {reply.metadata.reply_to_message_id for reply in arrived}
            if end is not None and time.monotonic() >= end:
                break
            wait = self.first if arrived else min(2 * wait, self.poll)
        return replies


def prompt(grid: object) -> object:
    """``grid`` as a :class:`PromptGrid` when it is a Flower grid (a test's stand-in is kept
    as it is)."""
    return PromptGrid(grid) if isinstance(grid, Grid) and not isinstance(grid, PromptGrid) else grid

"""A ServerApp's grid that collects the sites' replies as they arrive.

Flower's deployment grid (1.41-1.42) waits 3 s between two looks for replies in
``send_and_receive``; every exchange of a run (the readiness round, each round's requests,
each stage of a secure sum, the result's delivery) then costs up to 3 s beyond the sites'
own time, which a secure run pays seven times per round. :class:`PromptGrid` wraps any
:class:`flwr.serverapp.Grid` and implements ``send_and_receive`` with the grid's own public
``push_messages`` and ``pull_messages``, looking every :data:`POLL_SECONDS`. It changes
nothing a site receives or sends (same messages, same timeout): only how soon the server
reads the replies.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from flwr.app import Message
from flwr.serverapp import Grid

#: Seconds between two looks for replies.
POLL_SECONDS = 0.1


class PromptGrid(Grid):
    """``grid`` with replies pulled every ``poll`` seconds (everything else is the grid's)."""

    def __init__(self, grid: Grid, poll: float = POLL_SECONDS) -> None:
        self.grid, self.poll = grid, poll

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
        passed (``None``: no limit), as Flower's grids do, looking every :attr:`poll` s."""
        waiting = set(self.push_messages(messages))
        end = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while waiting:
            arrived = list(self.pull_messages(list(waiting)))
            replies += arrived
            waiting -= {reply.metadata.reply_to_message_id for reply in arrived}
            if not waiting or (end is not None and time.monotonic() >= end):
                break
            time.sleep(self.poll)
        return replies


def prompt(grid: object) -> object:
    """``grid`` as a :class:`PromptGrid` when it is a Flower grid (a test's stand-in is kept
    as it is)."""
    return PromptGrid(grid) if isinstance(grid, Grid) and not isinstance(grid, PromptGrid) else grid

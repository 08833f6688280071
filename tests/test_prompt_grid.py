"""The App's ServerApp grid reads replies soon after they come and looks for them seldom
while they are slow (``fedpca.flower.prompt_grid``)."""

import time
from types import SimpleNamespace

import pytest

from fedpca.flower.prompt_grid import PromptGrid


class SlowSites:
    """A grid stand-in whose reply to message ``i`` comes ``delays[i]`` seconds after the
    push; it counts the looks."""

    def __init__(self, delays: list[float]) -> None:
        self.delays, self.looks, self.pushed = delays, 0, None

    def push_messages(self, messages):
        self.pushed = time.monotonic()
        return [str(i) for i, _ in enumerate(messages)]

    def pull_messages(self, message_ids):
        self.looks += 1
        now = time.monotonic() - self.pushed
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=i))
                for i in message_ids if self.delays[int(i)] <= now]


def exchange(delays: list[float], timeout: float | None = None, poll: float = 0.4,
             first: float = 0.01) -> tuple[list[str], int, float]:
    """The replies' ids, the number of looks and the seconds the exchange took."""
    sites = SlowSites(delays)
    start = time.monotonic()
    replies = PromptGrid(sites, poll=poll, first=first).send_and_receive(
        [object()] * len(delays), timeout=timeout)
    return (sorted(r.metadata.reply_to_message_id for r in replies), sites.looks,
            time.monotonic() - start)


def test_replies_that_come_at_once_are_read_at_once():
    ids, looks, seconds = exchange([0.0, 0.0, 0.0])
    assert ids == ["0", "1", "2"] and looks == 1 and seconds < 0.2


def test_a_slow_exchange_is_looked_at_seldom_and_read_within_the_longest_wait():
    ids, looks, seconds = exchange([0.9, 1.0])
    assert ids == ["0", "1"]
    # 0.01, 0.02, 0.04, ... 0.32, then every 0.4 s: about 8 looks in 1 s, not 100 at 0.01
    assert looks <= 10
    assert 1.0 <= seconds < 1.0 + 0.4 + 0.3  # the longest wait, and a loaded machine


def test_the_timeout_ends_the_exchange_with_the_replies_that_came():
    ids, _, seconds = exchange([0.05, 30.0], timeout=0.5)
    assert ids == ["0"]
    assert seconds == pytest.approx(0.5, abs=0.3)

"""The ServerApp's waits: its grid reads replies soon after they come and looks for them
seldom while they are slow (``fedpca.flower.prompt_grid``), and a run waiting for its sites
to connect sees them soon and looks seldom (``fedpca.flower.rounds.connected_nodes``)."""

import logging
import time
from types import SimpleNamespace

import pytest

from fedpca.flower.prompt_grid import PromptGrid
from fedpca.flower.rounds import connected_nodes


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


class ArrivingSites:
    """A grid stand-in whose node ``i`` connects ``arrivals[i]`` seconds after it is made;
    it counts the looks."""

    def __init__(self, arrivals: list[float]) -> None:
        self.arrivals, self.looks, self.made = arrivals, 0, time.monotonic()

    def get_node_ids(self):
        self.looks += 1
        now = time.monotonic() - self.made
        return [i + 1 for i, at in enumerate(self.arrivals) if at <= now]


def test_a_run_sees_its_sites_soon_and_waits_for_the_last_with_few_looks(caplog):
    caplog.set_level(logging.INFO, logger="fedpca.flower.rounds")
    fast = ArrivingSites([0.0, 0.005, 0.01])
    start = time.monotonic()
    assert connected_nodes(fast, 3) == [1, 2, 3]
    assert time.monotonic() - start < 0.15  # not the longest wait (0.25 s)
    slow = ArrivingSites([0.0, 0.6])
    start = time.monotonic()
    assert connected_nodes(slow, 2) == [1, 2]
    # 0.01, 0.02, 0.04, 0.08, 0.16, then every 0.25 s: about 7 looks, and one log line for
    # each number of sites seen while waiting
    assert slow.looks <= 9 and time.monotonic() - start < 0.6 + 0.25 + 0.3
    waiting = [r.getMessage() for r in caplog.records if "waiting for sites" in r.getMessage()]
    assert waiting[-1] == "waiting for sites: 1 connected, 2 wanted"
    assert len(waiting) == len(set(waiting))

"""The ServerApp's waits: its grid reads replies soon after they come and looks for them
seldom while they are slow (``fedpca.flower.server.prompt_grid``), and a run waiting for its sites
to connect sees them soon and looks seldom (``fedpca.flower.server.rounds.connected_nodes``)."""

import logging
import time
from types import SimpleNamespace

import pytest

from fedpca.flower.server.prompt_grid import PromptGrid
from fedpca.flower.server.rounds import connected_nodes


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
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=i),
                                has_error=lambda: False)
                for i in message_ids if self.delays[int(i)] <= now]

    def get_node_ids(self):
        return list(range(1, len(self.delays) + 1))  # every site stays connected


#: The grids' and the waits' own deadline, in seconds: far longer than any test's wait.
GRID_TIMEOUT = 60.0


def exchange(delays: list[float], timeout: float | None = None, poll: float = 0.4,
             first: float = 0.01, grid_timeout: float = GRID_TIMEOUT
             ) -> tuple[list[str], int, float]:
    """The replies' ids, the number of looks and the seconds the exchange took."""
    sites = SlowSites(delays)
    start = time.monotonic()
    messages = [SimpleNamespace(metadata=SimpleNamespace(dst_node_id=i + 1))
                for i in range(len(delays))]
    replies = PromptGrid(sites, grid_timeout, poll=poll, first=first).send_and_receive(
        messages, timeout=timeout)
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


def test_an_exchange_without_a_timeout_of_its_own_ends_at_the_grids():
    ids, _, seconds = exchange([0.05, 30.0], grid_timeout=0.5)  # as Flower's legacy workflow
    assert ids == ["0"]
    assert seconds == pytest.approx(0.5, abs=0.3)


class LeavingSite(SlowSites):
    """Two sites: node 1 answers at once, node 2 never does and leaves the SuperLink's
    online nodes ``gone`` seconds after the push (its SuperNode stopped)."""

    def __init__(self, gone: float) -> None:
        super().__init__([0.0, 1e9])
        self.gone = gone

    def push_messages(self, messages):
        ids = super().push_messages(messages)
        for message, message_id in zip(messages, ids):  # as Flower's grids set them
            message.metadata.__dict__["_message_id"] = message_id
        return ids

    def get_node_ids(self):
        return [1] if time.monotonic() - self.pushed >= self.gone else [1, 2]


def test_a_site_that_stops_gets_an_error_reply_instead_of_holding_the_exchange(monkeypatch):
    from flwr.app import Message, MessageType, RecordDict
    from flwr.common.constant import ErrorCode
    from flwr.supercore.task_identity import TaskIdentity

    for attribute in ("_task_id", "_run_id", "_node_id"):  # what a ServerApp process sets
        monkeypatch.setattr(TaskIdentity, attribute, 1)
    sites = LeavingSite(gone=0.3)
    messages = [Message(RecordDict(), dst_node_id=node, message_type=MessageType.TRAIN)
                for node in (1, 2)]
    start = time.monotonic()
    replies = PromptGrid(sites, GRID_TIMEOUT, first=0.01).send_and_receive(messages, timeout=60)
    seconds = time.monotonic() - start
    assert seconds < 3, seconds  # not the 60 s timeout
    failed = [r for r in replies if getattr(r, "has_error", lambda: False)()]
    assert len(replies) == 2 and len(failed) == 1
    assert failed[0].error.code == ErrorCode.NODE_UNAVAILABLE
    assert "node 2 is no longer connected" in failed[0].error.reason
    assert failed[0].metadata.src_node_id == 2 and failed[0].metadata.reply_to_message_id == "1"


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
    caplog.set_level(logging.INFO, logger="fedpca.flower.server.rounds")
    fast = ArrivingSites([0.0, 0.005, 0.01])
    start = time.monotonic()
    assert connected_nodes(fast, 3, GRID_TIMEOUT) == [1, 2, 3]
    assert time.monotonic() - start < 0.15  # not the longest wait (0.25 s)
    slow = ArrivingSites([0.0, 0.6])
    start = time.monotonic()
    assert connected_nodes(slow, 2, GRID_TIMEOUT) == [1, 2]
    # 0.01, 0.02, 0.04, 0.08, 0.16, then every 0.25 s: about 7 looks, and one log line for
    # each number of sites seen while waiting
    assert slow.looks <= 9 and time.monotonic() - start < 0.6 + 0.25 + 0.3
    waiting = [r.getMessage() for r in caplog.records if "waiting for sites" in r.getMessage()]
    assert waiting[-1] == "waiting for sites: 1 connected, 2 wanted"
    assert len(waiting) == len(set(waiting))


class RestartingSite:
    """Two sites: node 1 answers at once; node 2's SuperNode stops ``gone`` seconds after
    the first push with its message taken and unanswered, and is connected again ``back``
    seconds after it (``None``: never); a message pushed to it once it is back is answered
    at once. It lists every message pushed to node 2."""

    def __init__(self, gone: float, back: float | None) -> None:
        self.gone, self.back, self.start = gone, back, None
        self.messages: dict[str, object] = {}
        self.to_node_2: list[str] = []

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def push_messages(self, messages):
        self.start = self.start or time.monotonic()
        ids = []
        for message in messages:
            message_id = f"m{len(self.messages)}"
            message.metadata.__dict__["_message_id"] = message_id  # as Flower's grids set it
            self.messages[message_id] = message
            if message.metadata.dst_node_id == 2:
                self.to_node_2.append(message_id)
            ids.append(message_id)
        return ids

    def online(self) -> bool:
        return self.elapsed() < self.gone or (self.back is not None
                                              and self.elapsed() >= self.back)

    def pull_messages(self, message_ids):
        from flwr.app import Message, RecordDict

        return [Message(RecordDict(), reply_to=self.messages[i]) for i in message_ids
                if self.messages[i].metadata.dst_node_id == 1 or i != self.to_node_2[0]]

    def get_node_ids(self):
        return [1, 2] if self.online() else [1]


def restart_exchange(monkeypatch, gone: float, back: float | None, restart: float):
    """The replies of one exchange over :class:`RestartingSite` awaiting a restart
    ``restart`` seconds, the site and the seconds it took."""
    from flwr.app import Message, MessageType, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    for attribute in ("_task_id", "_run_id", "_node_id"):  # what a ServerApp process sets
        monkeypatch.setattr(TaskIdentity, attribute, 1)
    sites = RestartingSite(gone, back)
    messages = [Message(RecordDict(), dst_node_id=node, message_type=MessageType.TRAIN)
                for node in (1, 2)]
    start = time.monotonic()
    replies = PromptGrid(sites, GRID_TIMEOUT, first=0.01, restart=restart).send_and_receive(
        messages, timeout=60)
    return replies, sites, time.monotonic() - start


def test_a_site_that_restarts_within_the_plans_grace_is_asked_again(monkeypatch):
    replies, sites, seconds = restart_exchange(monkeypatch, gone=0.2, back=1.5, restart=10)
    # its message went again, once, when it was back; one reply per message, none an error
    assert len(sites.to_node_2) == 2
    assert sorted(r.metadata.reply_to_message_id for r in replies) == sorted(
        ["m0", sites.to_node_2[1]])
    assert not any(r.has_error() for r in replies)
    assert 1.5 <= seconds < 1.5 + 2.5, seconds  # back at 1.5 s, seen within the next look


def test_a_site_that_does_not_come_back_in_time_gets_its_error_after_the_grace(monkeypatch):
    from flwr.common.constant import ErrorCode

    replies, sites, seconds = restart_exchange(monkeypatch, gone=0.2, back=None, restart=1.0)
    (failed,) = [r for r in replies if r.has_error()]
    assert failed.error.code == ErrorCode.NODE_UNAVAILABLE and len(replies) == 2
    assert len(sites.to_node_2) == 1  # never back: never sent again
    assert 1.0 <= seconds < 1.0 + 2.5, seconds  # gone within about a second, then 1 s
    # no grace: the error stands at once, as before restarts were awaited
    replies, _, seconds = restart_exchange(monkeypatch, gone=0.2, back=None, restart=0)
    assert sum(r.has_error() for r in replies) == 1 and seconds < 2.5

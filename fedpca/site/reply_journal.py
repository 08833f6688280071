"""A real site's journal of one run: the replies it sent and what it keeps between messages,
on its own disk, so that a site whose SuperNode restarts picks the run up where it stopped.

A site that stops in the middle of a run (its machine rebooted, its operator restarted its
SuperNode) loses Flower's memory of the run (``context.state``). When it comes back, the
coordinator asks it again what it was asked last
(:mod:`fedpca.flower.server.prompt_grid`). Two tables of the site's ledger file
(:mod:`fedpca.site.ledger_store`) let it answer without releasing anything twice:

* ``replies``: each reply the site sent to a round's request or to a secure-aggregation step
  after the setup (:func:`is_journaled`), keyed by the SHA-256 of the request as it arrived,
  with the run's run_config (:func:`request_digest`), written once the reply is made (its
  release charged) and before it leaves. The same request asked again gets the same reply,
  read from the journal: no second release, nothing charged. Another request is answered
  as any request is (each release charged and counted against the run's plan; each secure
  step once per round, :class:`~fedpca.site.secure_stage.StepJournal`);
* ``run_state``: what the site keeps between the messages of the run (its secure
  session: its key-agreement secrets and its shares of its peers' secrets), written with
  every change beside Flower's ``context.state`` (:class:`DurableState`) and read from here
  when a restarted SuperNode's memory holds nothing. It is secret: the ledger file is the
  site's own (0600), a backup of the ledger leaves the table out
  (:func:`~fedpca.site.ledger_store.copy_ledger`), and the run's end deletes it with the
  run's replies (:meth:`~fedpca.site.ledger_records.LedgerRecords.end_run`).

What a hostile coordinator could try with the journal, and what it gets:

* **ask a round again, claiming the site restarted, for a second noisy copy of the same
  statistic** (two independent noises average to less noise): the same request gets the
  same bytes back, which it had already; a request that differs in any byte is a new
  request, charged as a new release and refused once the run's plan is spent;
* **fill the site's disk with journaled replies**: only replies to releases (bounded by the
  site's budget and its plan) and to secure steps taken once per run and round are
  journaled; the setup's advertisement, which a coordinator may ask for again, is not;
* **read another run's replies**: the journal is keyed by the run the message arrived in.

The window the journal leaves: the reply is written after its release is charged, so a site
that stops between the two (a few milliseconds) has charged a release it never sent; asked
again, it answers afresh and charges a second release (within its plan, or it refuses):
charged twice, never released twice unaccounted.

Privacy guarantee: unchanged (unit: one record of the site, replace-one); re-sending a
journaled reply is post-processing of a release already charged.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np

from fedpca.secure.messages import SetupRequest
from fedpca.site.answer import Answer, ProtocolMasking
from fedpca.site.ledger_store import connect_ledger, immediate


def request_digest(request: Any, run_config: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of ``request`` (an ``Ask`` or ``Secure`` of
    :mod:`fedpca.site.service`) under the run's ``run_config``, in a canonical encoding of
    its kind, arrays (dtype, shape, bytes), config, masking, protocol message and the
    run_config: two requests have one digest only when they ask the same thing of the same
    run (a run_config changed mid-run is another request, which the site's plan judges)."""
    digest = hashlib.sha256(type(request).__name__.encode())
    for name in ("message", "arrays", "config", "masking"):
        if hasattr(request, name):
            digest.update(name.encode())
            _feed(digest, getattr(request, name))
    digest.update(b"run_config")
    _feed(digest, run_config)
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    """Feed ``value`` to ``digest``, each value tagged with its type and length."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        _tagged(digest, b"a", f"{data.dtype.str}{data.shape}".encode() + data.tobytes())
    elif isinstance(value, Mapping):
        _tagged(digest, b"d", str(len(value)).encode())
        for key in sorted(value, key=str):
            _feed(digest, str(key))
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        _tagged(digest, b"l", str(len(value)).encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, (bytes, bytearray)):
        _tagged(digest, b"b", bytes(value))
    elif isinstance(value, ProtocolMasking):
        _tagged(digest, b"m", str(value.modulus).encode())
    else:
        _tagged(digest, type(value).__name__.encode(), repr(value).encode())


def _tagged(digest: Any, tag: bytes, data: bytes) -> None:
    digest.update(tag + len(data).to_bytes(8, "big") + data)


def is_journaled(request: Any) -> bool:
    """Whether ``request``'s reply goes in the journal: a round's request or a secure stage
    after the setup (the setup's advertisement commits the site to nothing)."""
    message = getattr(request, "message", None)
    return message is None or message.get("kind") != SetupRequest.KIND


def encode_reply(message: Mapping[str, Any] | None, answer: Answer | None) -> bytes:
    """A reply for the journal: a secure stage's protocol ``message`` (``None``: a round's
    answer), and the site's ``answer`` (``None``: a stage without one), as an ``.npz`` of
    the answer's arrays and a JSON header (no pickles)."""
    arrays: dict[str, np.ndarray] = {}
    header: dict[str, Any] = {"message": None if message is None else _plain(message)}
    if answer is not None:
        header["answer"] = {"site": answer.site, "weight": int(answer.weight),
                            "metrics": _plain(answer.metrics), "values": len(answer.values)}
        arrays.update({f"v{i}": np.asarray(v) for i, v in enumerate(answer.values)})
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def decode_reply(data: bytes) -> tuple[dict[str, Any] | None, Answer | None]:
    """The protocol message and answer :func:`encode_reply` wrote."""
    with np.load(io.BytesIO(data), allow_pickle=False) as stored:
        header = json.loads(stored["header"].tobytes())
        described = header.get("answer")
        answer = None if described is None else Answer(
            described["site"], [stored[f"v{i}"] for i in range(described["values"])],
            described["weight"], _restored(described["metrics"]))
    message = header["message"]
    return (None if message is None else _restored(message)), answer


def _plain(value: Any) -> Any:
    """``value`` as JSON: bytes tagged as base64, numpy scalars as Python numbers."""
    if isinstance(value, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, Mapping):
        return {"map": [[str(k), _plain(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _restored(value: Any) -> Any:
    """The value :func:`_plain` wrote."""
    if isinstance(value, dict):
        if "b64" in value:
            return base64.b64decode(value["b64"])
        return {k: _restored(v) for k, v in value["map"]}
    if isinstance(value, list):
        return [_restored(v) for v in value]
    return value


class ReplyJournal:
    """The journal of run ``run_id`` of ``population`` in the site's ledger file ``path``
    (module docstring)."""

    def __init__(self, path: Path, population: str, run_id: str) -> None:
        self.path, self.population, self.run_id = Path(path), population, run_id

    def sent(self, digest: str) -> bytes | None:
        """The reply journaled for the request of ``digest`` in this run, or ``None``."""
        return self._read("SELECT reply FROM replies WHERE population = ? AND run_id = ? AND "
                          "digest = ?", digest)

    def keep(self, digest: str, reply: bytes) -> None:
        """Journal ``reply`` to the request of ``digest`` (before it leaves); the first reply
        to a request stays."""
        self._write("INSERT OR IGNORE INTO replies (population, run_id, digest, reply) "
                    "VALUES (?,?,?,?)", digest, reply)

    def durable(self, state: Any) -> DurableState:
        """``state`` (Flower's memory of the run) kept on the site's disk too."""
        return DurableState(state, self)

    def load(self, key: str) -> bytes | None:
        """What the site kept under ``key`` in this run, or ``None``."""
        return self._read("SELECT value FROM run_state WHERE population = ? AND run_id = ? "
                          "AND key = ?", key)

    def store(self, key: str, value: bytes) -> None:
        """Keep ``value`` under ``key`` for the rest of the run."""
        self._write("INSERT OR REPLACE INTO run_state (population, run_id, key, value) "
                    "VALUES (?,?,?,?)", key, value)

    def _read(self, query: str, key: str) -> bytes | None:
        with closing(connect_ledger(self.path)) as conn:
            row = conn.execute(query, (self.population, self.run_id, key)).fetchone()
        return None if row is None else bytes(row[0])

    def _write(self, statement: str, key: str, value: bytes) -> None:
        with closing(connect_ledger(self.path)) as conn, immediate(conn):
            conn.execute(statement, (self.population, self.run_id, key, sqlite3.Binary(value)))


class DurableState:
    """A run state (:class:`~fedpca.site.secure_stage.RunState`) kept both in Flower's
    memory of the run (``state``) and in the site's ``journal``, read from the journal when
    the memory holds nothing (the SuperNode restarted)."""

    def __init__(self, state: Any, journal: ReplyJournal) -> None:
        self.state, self.journal = state, journal

    def load(self, key: str) -> bytes | None:
        """The bytes stored under ``key`` (Flower's memory first), or ``None``."""
        value = self.state.load(key)
        return self.journal.load(key) if value is None else value

    def store(self, key: str, value: bytes) -> None:
        """Keep ``value`` under ``key`` on the site's disk and in Flower's memory."""
        self.journal.store(key, value)
        self.state.store(key, value)

"""The wire form of a secure-aggregation message's fields, checked as it is read.

A message travels as a dict of ``str``, ``int``, ``bytes`` and lists of them (what a Flower
``ConfigRecord`` carries): member names joined by newlines into one string
(:func:`join_names`, :func:`split_names`), fixed-size MACs, keys and seeds concatenated into
one bytes value (:func:`split_fixed`), int64 vectors as little-endian bytes
(:func:`vector_bytes`, :func:`vector_from`). Everything here reads what the coordinator sent
and is therefore untrusted: a field of the wrong type, size or form raises
:class:`~fedpca.secure.conditions.ProtocolRefusal` (:func:`refuse`) before anything reads
it further.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from fedpca.secure.conditions import ProtocolRefusal
from fedpca.secure.roster import NAME_PATTERN

__all__ = [
    "BLOBS",
    "check_blob",
    "check_blobs",
    "check_description",
    "check_int",
    "check_name",
    "check_names",
    "check_run_id",
    "join_names",
    "paired",
    "read_wire",
    "refuse",
    "set_frozen",
    "split_fixed",
    "split_names",
    "vector_bytes",
    "vector_from",
]

_MAX_RUN_ID = 256
#: The most characters of a run's description (:func:`check_description`).
MAX_DESCRIPTION = 65536


def refuse(message: str) -> NoReturn:
    """Refuse the message (``message`` says what was wrong, never a data-derived number)."""
    raise ProtocolRefusal(message)


def check_int(value: object, what: str, low: int = 0) -> int:
    """``value`` if it is an integer (not a bool) at least ``low``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        refuse(f"{what} must be an integer >= {low}; the message is malformed")
    return value


def check_run_id(value: object) -> str:
    """``value`` if it is a run id: a non-empty string of at most 256 characters."""
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_RUN_ID:
        refuse("run_id must be a non-empty string of at most 256 characters")
    return value


def check_description(value: object) -> str:
    """``value`` if it is a run description: a string of at most :data:`MAX_DESCRIPTION`
    characters (what it says is read by the site's own layer, not here)."""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION:
        refuse(f"the run's description must be a string of at most {MAX_DESCRIPTION} "
               "characters; the message is malformed")
    return value


def check_name(value: object, what: str = "member") -> str:
    """``value`` if it is a valid member name (:data:`~fedpca.secure.roster.NAME_PATTERN`)."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        refuse(f"{what} is not a valid member name; the message is malformed")
    return value


def check_names(values: object, what: str) -> tuple[str, ...]:
    """``values`` as distinct member names, checked in one regular-expression match of the
    names joined by newlines (a list of hundreds arrives in every message of a round); the
    newlines must be exactly the joins (a name holding one is refused)."""
    if not isinstance(values, (list, tuple)):
        refuse(f"{what} must be a list of member names")
    names = tuple(values)
    joined = "\n".join(names) if set(map(type, names)) <= {str} else None
    if joined is None or (names and (joined.count("\n") != len(names) - 1
                                     or not _NAME_LIST.fullmatch(joined))):
        refuse(f"{what} holds an invalid member name; the message is malformed")
    if len(set(names)) != len(names):
        refuse(f"{what} names a member twice; the message is malformed")
    return names


def check_blob(value: object, what: str, length: int | None = None) -> bytes:
    """``value`` if it is bytes (of ``length`` bytes, when given)."""
    if not isinstance(value, bytes) or (length is not None and len(value) != length):
        size = f" of {length} bytes" if length is not None else ""
        refuse(f"{what} must be bytes{size}; the message is malformed")
    return value


def check_blobs(mapping: object, what: str, length: int | None = None) -> dict[str, bytes]:
    """``mapping`` as a dict if it maps distinct member names to bytes (of ``length`` bytes
    each, when given)."""
    if not isinstance(mapping, Mapping):
        refuse(f"{what} must map member names to bytes")
    check_names(list(mapping), what)
    values = mapping.values()
    if not set(map(type, values)) <= {bytes} or (
            length is not None and not set(map(len, values)) <= {length}):
        size = f" of {length} bytes" if length is not None else ""
        refuse(f"{what} must hold bytes{size}; the message is malformed")
    return dict(mapping)


def set_frozen(instance: object, **values: object) -> None:
    """Set fields of a frozen dataclass (a message normalising its fields as it is made)."""
    for key, value in values.items():
        object.__setattr__(instance, key, value)


def read_wire(data: object, kind: str, schema: Mapping[str, type | tuple[type, type]]
              ) -> dict[str, Any]:
    """``data``'s fields after checking its kind, its field names and their wire types."""
    if not isinstance(data, Mapping):
        refuse(f"a {kind} message must be a mapping")
    if data.get("kind") != kind:
        refuse(f"expected a {kind} message; the coordinator sent another kind")
    fields = set(data) - {"kind"}
    if fields != set(schema):
        wrong = sorted(fields ^ set(schema))
        refuse(f"a {kind} message has missing or unexpected fields {wrong}")
    out = {}
    for key, spec in schema.items():
        value = data[key]
        if isinstance(spec, tuple):
            container, item = spec
            ok = isinstance(value, container) and all(isinstance(v, item) for v in value)
        else:
            ok = isinstance(value, spec) and not isinstance(value, bool)
        if not ok:
            refuse(f"field {key!r} of a {kind} message has the wrong type")
        out[key] = list(value) if isinstance(spec, tuple) else value
    return out


def paired(keys: Sequence[str], values: list[bytes], kind: str) -> dict[str, bytes]:
    """``keys`` paired in order with ``values``, one each, the keys distinct."""
    if len(keys) != len(values) or len(set(keys)) != len(keys):
        refuse(f"a {kind} message pairs its names and values wrongly")
    return dict(zip(keys, values))


def vector_bytes(vector: np.ndarray) -> bytes:
    """An integer vector as little-endian int64 bytes."""
    return np.ascontiguousarray(vector, dtype="<i8").tobytes()


def vector_from(data: bytes, what: str) -> np.ndarray:
    """The int64 vector :func:`vector_bytes` made ``data`` from."""
    if len(data) % 8:
        refuse(f"{what} is not a whole number of int64 values")
    return np.frombuffer(data, dtype="<i8").astype(np.int64)


def join_names(names: Sequence[str]) -> str:
    """Member names on the wire: one string, the names joined by newlines (no name holds
    one), so that Flower checks and copies one value, not hundreds, in every message."""
    return "\n".join(names)


def split_names(text: str, what: str) -> tuple[str, ...]:
    """The member names of a :func:`join_names`-ed string (empty: none), checked by
    :func:`check_names`."""
    return check_names(text.split("\n") if text else [], what)


def split_fixed(keys: Sequence[str], data: bytes, size: int, kind: str) -> dict[str, bytes]:
    """``keys`` paired in order with the ``size``-byte values ``data`` concatenates (MACs,
    keys, signatures, seeds travel as one bytes value)."""
    if len(data) != size * len(keys):
        refuse(f"a {kind} message pairs its names and values wrongly")
    return {k: data[size * i:size * (i + 1)] for i, k in enumerate(keys)}


#: The wire type of a list of bytes values (a :func:`read_wire` schema entry).
BLOBS = (list, bytes)
#: Member names joined by newlines (:func:`check_names`).
_NAME_LIST = re.compile(rf"(?:{NAME_PATTERN.pattern}\n)*{NAME_PATTERN.pattern}")

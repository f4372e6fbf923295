"""Messages (frozen dataclasses, warpk.evaluator.protocol) to JSON-ready values and back, every
field checked against its declared type on the way in.

A timed batch of small calls carries thousands of argument and tensor specs per message, so both
directions are per-class plans made once (`_schema`: the resolved type hints and field names),
not `dataclasses.asdict` and `typing.get_type_hints` per value (py-spy on the trusted worker:
~40% of a tiny task's timing phase went there).

Non-goals: no framing or sockets (warpk.evaluator.protocol), no tensors (warpk.evaluator.transport).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing


class ProtocolError(Exception):
    """A frame that is not a valid message of an expected type (or the peer went away)."""


class PeerClosed(ProtocolError):
    """The other side closed the socket (it exited, crashed or was killed)."""


class PeerTimeout(ProtocolError):
    """No complete frame arrived within the time allowed."""


@functools.cache
def _schema(cls) -> tuple[dict, tuple[str, ...]]:
    """(field name -> resolved type hint, field names in order) of a message dataclass."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    hints = typing.get_type_hints(cls)
    return {n: hints[n] for n in names}, names


def plain(value):
    """A message as JSON-ready values: dataclasses as dicts of their fields, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {n: plain(getattr(value, n)) for n in _schema(type(value))[1]}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _at(where) -> str:
    """The path of a value for an error message; built lazily as (parent, index or .name)."""
    if isinstance(where, str):
        return where
    parent, key = where
    return f"{_at(parent)}[{key!r}]" if isinstance(key, int) else f"{_at(parent)}{key}"


@functools.cache
def _shape(hint) -> tuple:
    """(origin, args) of a type hint."""
    return typing.get_origin(hint), typing.get_args(hint)


def check(value, hint, where):
    """`value` converted to `hint` (dataclasses built from dicts), or ProtocolError. `where`: its
    path, a string or (parent, index or ".name") (rendered only for an error)."""
    if hint is typing.Any:
        return value
    origin, args = _shape(hint)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in args:
            try:
                return check(value, option, where)
            except ProtocolError as err:
                errors.append(str(err))
        raise ProtocolError(f"{_at(where)}: {'; '.join(errors)}")
    if hint is type(None):
        if value is not None:
            raise ProtocolError(f"{_at(where)}: expected null")
        return None
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(f"{_at(where)}: expected a list")
        (inner,) = args
        return [check(v, inner, (where, i)) for i, v in enumerate(value)]
    if origin is dict:
        key_hint, value_hint = args
        if not isinstance(value, dict):
            raise ProtocolError(f"{_at(where)}: expected an object")
        return {check(k, key_hint, (where, " key")): check(v, value_hint, (where, f"[{k!r}]"))
                for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float) and isinstance(value, bool):
        raise ProtocolError(f"{_at(where)}: expected {hint.__name__}, got a bool")
    if not isinstance(value, hint):
        raise ProtocolError(f"{_at(where)}: expected {hint.__name__}, got {type(value).__name__}")
    return value


def build(cls, raw, where):
    """An instance of the dataclass `cls` from the dict `raw`, every field checked."""
    if not isinstance(raw, dict):
        raise ProtocolError(f"{_at(where)}: expected an object for {cls.__name__}")
    hints, _ = _schema(cls)
    unknown = set(raw) - hints.keys()
    if unknown:
        raise ProtocolError(f"{_at(where)}: unknown fields {sorted(unknown)} for {cls.__name__}")
    kwargs = {k: check(v, hints[k], (where, f".{k}")) for k, v in raw.items()}
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise ProtocolError(f"{_at(where)}: {err}") from err

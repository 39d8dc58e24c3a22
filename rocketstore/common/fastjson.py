"""fastjson's non-standard JSON: maps whose keys are objects or bare integers.

RocketMQ writes its config files (``consumerOffset.json``, ``topics.json``...) and older name
servers their route bodies with fastjson, whose integer map keys are unquoted (``{0:120}``).
:func:`loads_fastjson` reads that as well as JSON.

RocketMQ's Java side serializes a ``Map<MessageQueue, ...>`` (ConsumeStats, TopicStatsTable,
ResetOffsetBody) with each key written as a JSON object, and older versions write integer keys
unquoted. Neither is JSON, so standard parsers refuse it. :func:`loads_object_keys` reads it:
an object key becomes a tuple of its ``(name, value)`` pairs, sorted (hashable; ``dict(key)``
gives the object back). :func:`dumps_object_keys` writes such maps the way fastjson does, so
RocketMQ's own tools can read what our servers send.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, AnyStr

import orjson

from rocketstore.common.text import quote

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<literal>true|false|null)
    | (?P<punct>[{}\[\]:,])
    )""", re.VERBOSE | re.DOTALL)
# An integer object key written bare by fastjson: `{0:"a"` or `,1:"b"`. Topic names cannot
# hold these characters, so only keys match.
_BARE_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")
_BARE_INT_KEY_BYTES = re.compile(rb"([{,]\s*)(-?\d+)(\s*:)")


def quote_bare_int_keys(text: AnyStr) -> AnyStr:
    """``text`` with fastjson's bare integer keys quoted (``{0:1}`` -> ``{"0":1}``)."""
    if isinstance(text, str):
        return _BARE_INT_KEY.sub(r'\1"\2"\3', text)
    return _BARE_INT_KEY_BYTES.sub(rb'\1"\2"\3', text)


def loads_fastjson(data: bytes | str, *, loads: Callable[[Any], Any] = orjson.loads) -> Any:
    """Parse JSON that may carry fastjson's unquoted integer keys. The keys are quoted only if
    the standard parse fails. ``loads`` parses (orjson's; ``json.loads`` where a caller needs
    Python's limits); its ValueError is raised when the quoted text fails too."""
    try:
        return loads(data)
    except ValueError:
        return loads(quote_bare_int_keys(data))


_LITERALS = {"true": True, "false": False, "null": None}
_MAX_DEPTH = 64


class FastjsonError(ValueError):
    """Text that is neither JSON nor fastjson's extension of it."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def token(self) -> tuple[str, str]:
        match = _TOKEN.match(self.text, self.pos)
        if match is None:
            raise FastjsonError(f"unexpected character at {self.pos}: {self.text[self.pos:self.pos + 20]!r}")
        self.pos = match.end()
        kind = match.lastgroup
        assert kind is not None
        return kind, match.group(kind)

    def peek(self) -> str:
        match = _TOKEN.match(self.text, self.pos)
        return match.group(match.lastgroup) if match and match.lastgroup == "punct" else ""

    def value(self, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise FastjsonError("nested too deeply")
        kind, text = self.token()
        if kind == "string":
            return orjson.loads(text)
        if kind == "number":
            return orjson.loads(text)
        if kind == "literal":
            return _LITERALS[text]
        if text == "{":
            return self.object(depth)
        if text == "[":
            return self.array(depth)
        raise FastjsonError(f"unexpected {quote(text)} at {self.pos}")

    def object(self, depth: int) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        if self.peek() == "}":
            self.token()
            return result
        while True:
            key = self.value(depth + 1)
            if isinstance(key, dict):
                key = tuple(sorted(key.items(), key=lambda item: str(item[0])))
            elif isinstance(key, list):
                raise FastjsonError(f"an array cannot be a map key (at {self.pos})")
            kind, text = self.token()
            if text != ":":
                raise FastjsonError(f"expected ':' at {self.pos}, got {quote(text)}")
            result[key] = self.value(depth + 1)
            kind, text = self.token()
            if text == "}":
                return result
            if text != ",":
                raise FastjsonError(f"expected ',' or '}}' at {self.pos}, got {quote(text)}")

    def array(self, depth: int) -> list[Any]:
        result: list[Any] = []
        if self.peek() == "]":
            self.token()
            return result
        while True:
            result.append(self.value(depth + 1))
            kind, text = self.token()
            if text == "]":
                return result
            if text != ",":
                raise FastjsonError(f"expected ',' or ']' at {self.pos}, got {quote(text)}")


def loads_object_keys(data: bytes | str) -> Any:
    """Parse JSON, or fastjson's output with object or bare-integer map keys."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as exc:
        raise FastjsonError(f"not UTF-8: {exc}") from None
    parser = _Parser(text)
    value = parser.value()
    if text[parser.pos:].strip():
        raise FastjsonError(f"trailing data at {parser.pos}")
    return value


def dumps_object_keys(value: Any) -> bytes:
    """Write ``value`` as fastjson does: dict keys that are tuples of pairs (see
    :func:`loads_object_keys`) or objects with ``to_json()`` become JSON objects; other keys
    are quoted strings; object fields in alphabetical order."""
    out: list[bytes] = []
    _dump(value, out)
    return b"".join(out)


def _dump(value: Any, out: list[bytes]) -> None:
    if isinstance(value, dict):
        out.append(b"{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(b",")
            first = False
            if isinstance(key, tuple):
                _dump(dict(key), out)
            elif hasattr(key, "to_json"):
                _dump(key.to_json(), out)
            else:
                out.append(orjson.dumps(str(key)))
            out.append(b":")
            _dump(item, out)
        out.append(b"}")
    elif isinstance(value, (list, tuple)):
        out.append(b"[")
        for index, item in enumerate(value):
            if index:
                out.append(b",")
            _dump(item, out)
        out.append(b"]")
    elif hasattr(value, "to_json"):
        _dump(value.to_json(), out)
    else:
        out.append(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))

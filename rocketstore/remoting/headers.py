"""Typed reading and writing of a command's ``ext_fields`` (RocketMQ's CommandCustomHeader).

Values travel as strings (the C++ client's numbers arrive as their decimal text). A missing
required field or a value of the wrong form raises :class:`HeaderFieldError`, which names the
field; the transports answer it with SYSTEM_ERROR and that message as the remark, as RocketMQ
answers a ``RemotingCommandException``, and the connection goes on.

Two ways to read: the getters (``require_str(cmd.ext_fields, "topic")``), or a header
dataclass whose snake_case fields map to camelCase keys::

    @dataclass
    class GetRouteInfoRequestHeader:
        topic: str                                   # no default: required
        accept_standard_json_only: bool | None = None

    header = decode_header(cmd.ext_fields, GetRouteInfoRequestHeader)
    ext = encode_header(header)                      # {"topic": "T"}

A field's key can be set with ``field(metadata={"key": "a"})`` (SEND_MESSAGE_V2's one-letter
names). Supported types: ``str``, ``int``, ``bool``, ``float``, each optionally ``| None``.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from rocketstore.remoting.errors import RemotingError

_INTEGER_RE = re.compile(r"[+-]?[0-9]{1,19}")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MISSING: Any = object()

T = TypeVar("T")


class HeaderFieldError(RemotingError, ValueError):
    """A header field is missing or malformed; ``field`` is its wire name."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"header field {field!r} {message}")
        self.field = field


def _value(ext: Mapping[str, Any], name: str, default: Any) -> Any:
    value = ext.get(name)
    if value is None:
        if default is _MISSING:
            raise HeaderFieldError(name, "is missing")
        return default
    return value


def parse_int(name: str, value: Any, minimum: int = _INT64_MIN, maximum: int = _INT64_MAX) -> int:
    """``value`` as Java's ``Long.parseLong`` reads it (ASCII digits, optional sign), in range."""
    if type(value) is int:
        number = value
    elif isinstance(value, str) and _INTEGER_RE.fullmatch(value):
        number = int(value)
    else:
        raise HeaderFieldError(name, f"must be an integer, got {value!r:.60}")
    if not minimum <= number <= maximum:
        raise HeaderFieldError(name, f"must be in [{minimum}, {maximum}], got {number}")
    return number


def parse_bool(name: str, value: Any) -> bool:
    """``"true"``/``"false"`` in any case; ``"1"``/``"0"`` too (the C++ client's batch flag)."""
    if type(value) is bool:
        return value
    if isinstance(value, str):
        lowered = value.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0", ""):
            return False
    raise HeaderFieldError(name, f"must be true or false, got {value!r:.60}")


def require_str(ext: Mapping[str, Any], name: str) -> str:
    return str(_value(ext, name, _MISSING))


def get_str(ext: Mapping[str, Any], name: str, default: str | None = None) -> str | None:
    value = ext.get(name)
    return default if value is None else str(value)


def require_int(
    ext: Mapping[str, Any], name: str, *, minimum: int = _INT64_MIN, maximum: int = _INT64_MAX
) -> int:
    return parse_int(name, _value(ext, name, _MISSING), minimum, maximum)


def get_int(
    ext: Mapping[str, Any],
    name: str,
    default: int | None = None,
    *,
    minimum: int = _INT64_MIN,
    maximum: int = _INT64_MAX,
) -> int | None:
    value = ext.get(name)
    return default if value is None else parse_int(name, value, minimum, maximum)


def require_bool(ext: Mapping[str, Any], name: str) -> bool:
    return parse_bool(name, _value(ext, name, _MISSING))


def get_bool(ext: Mapping[str, Any], name: str, default: bool | None = None) -> bool | None:
    value = ext.get(name)
    return default if value is None else parse_bool(name, value)


def _parse_float(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise HeaderFieldError(name, f"must be a number, got {value!r:.60}") from None


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclasses.dataclass(frozen=True)
class _FieldSpec:
    attribute: str
    key: str
    kind: type
    required: bool


_PARSERS: dict[type, Any] = {
    str: lambda name, value: str(value),
    int: parse_int,
    bool: parse_bool,
    float: _parse_float,
}
_SPEC_CACHE: dict[type, tuple[_FieldSpec, ...]] = {}


def _field_kind(cls: type, attribute: str, hint: Any) -> tuple[type, bool]:
    """The scalar type of a field's annotation and whether it admits None."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(members) == 1 and members[0] in _PARSERS:
            return members[0], True
    elif hint in _PARSERS:
        return hint, False
    raise TypeError(f"{cls.__name__}.{attribute}: header fields must be str, int, bool or float (or | None)")


def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    specs = _SPEC_CACHE.get(cls)
    if specs is None:
        hints = typing.get_type_hints(cls)
        built = []
        for f in dataclasses.fields(cls):
            kind, _optional = _field_kind(cls, f.name, hints[f.name])
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            built.append(_FieldSpec(f.name, f.metadata.get("key", camel_case(f.name)), kind, required))
        specs = _SPEC_CACHE[cls] = tuple(built)
    return specs


def decode_header(ext: Mapping[str, Any], cls: type[T]) -> T:
    """Build the header dataclass ``cls`` from ``ext`` (unknown keys are ignored)."""
    values: dict[str, Any] = {}
    for spec in _specs(cls):
        raw = ext.get(spec.key)
        if raw is None:
            if spec.required:
                raise HeaderFieldError(spec.key, "is missing")
            continue
        values[spec.attribute] = _PARSERS[spec.kind](spec.key, raw)
    return cls(**values)


def encode_header(header: Any) -> dict[str, str]:
    """A header dataclass as ext fields: strings, ``true``/``false``, None fields left out."""
    ext: dict[str, str] = {}
    for spec in _specs(type(header)):
        value = getattr(header, spec.attribute)
        if value is None:
            continue
        if value is True:
            ext[spec.key] = "true"
        elif value is False:
            ext[spec.key] = "false"
        else:
            ext[spec.key] = str(value)
    return ext

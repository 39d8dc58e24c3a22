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

from rocketstore.common.java_properties import camel_case
from rocketstore.remoting._headers import FieldSpec, HeaderDecoder
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


def get_bool(ext: Mapping[str, Any], name: str, default: bool | None = None) -> bool | None:
    value = ext.get(name)
    return default if value is None else parse_bool(name, value)


def _parse_float(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise HeaderFieldError(name, f"must be a number, got {value!r:.60}") from None


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


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False, "": False}
_DECODER_CACHE: dict[type, Any] = {}


_KINDS = {str: 0, int: 1, bool: 2, float: 3}


def _missing(key: str) -> HeaderFieldError:
    return HeaderFieldError(key, "is missing")


def _build_decoder(cls: type) -> Any:
    """``decode(ext) -> cls`` for one header class, native (``_headers``): each field read and
    parsed in C in the common case, the checked parsers below otherwise."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    specs = []
    for spec in _specs(cls):
        f = fields[spec.attribute]
        default = None
        if not spec.required:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        specs.append(FieldSpec(spec.attribute, spec.key, _KINDS[spec.kind], spec.required, default))
    return HeaderDecoder(cls, specs, getattr(cls, "__post_init__", None), _missing, parse_int, parse_bool,
                         _parse_float)


def build_python_decoder(cls: type) -> Any:
    """Generate ``decode(ext) -> cls`` for one header class in Python: straight-line code with
    a fast path per field; anything unusual falls back to the checked parsers, which raise
    HeaderFieldError. The reference the native decoder is tested against."""
    namespace: dict[str, Any] = {
        "cls": cls,
        "HeaderFieldError": HeaderFieldError,
        "parse_int": parse_int,
        "parse_bool": parse_bool,
        "parse_float": _parse_float,
        "BOOL_TEXT": _BOOL_TEXT,
    }
    lines = ["def decode(ext):", "    get = ext.get"]
    arguments = []
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for index, spec in enumerate(_specs(cls)):
        value = f"v{index}"
        key = repr(spec.key)
        lines.append(f"    {value} = get({key})")
        if spec.required:
            lines.append(f"    if {value} is None: raise HeaderFieldError({key}, 'is missing')")
            indent = "    "
        else:
            f = fields[spec.attribute]
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            namespace[f"d{index}"] = default
            lines.append(f"    if {value} is None: {value} = d{index}")
            lines.append("    else:")
            indent = "        "
        if spec.kind is str:
            lines.append(f"{indent}if type({value}) is not str: {value} = str({value})")
        elif spec.kind is int:
            lines.append(
                f"{indent}if type({value}) is str and {value}.isascii() and {value}.isdigit() "
                f"and len({value}) < 19: {value} = int({value})"
            )
            lines.append(f"{indent}else: {value} = parse_int({key}, {value})")
        elif spec.kind is bool:
            lines.append(f"{indent}b = BOOL_TEXT.get({value}) if type({value}) is str else None")
            lines.append(f"{indent}{value} = parse_bool({key}, {value}) if b is None else b")
        else:
            lines.append(f"{indent}{value} = parse_float({key}, {value})")
        arguments.append(f"{spec.attribute}={value}")
    lines.append(f"    return cls({', '.join(arguments)})")
    exec("\n".join(lines), namespace)  # noqa: S102 - code built from the class's own fields
    return namespace["decode"]


def decode_header(ext: Mapping[str, Any], cls: type[T]) -> T:
    """Build the header dataclass ``cls`` from ``ext`` (unknown keys are ignored)."""
    decoder = _DECODER_CACHE.get(cls)
    if decoder is None:
        decoder = _DECODER_CACHE[cls] = _build_decoder(cls)
    return decoder(ext)  # type: ignore[no-any-return]


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

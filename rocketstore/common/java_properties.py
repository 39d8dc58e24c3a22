"""Java's ``.properties`` syntax (``java.util.Properties.load`` and ``store``), the camelCase
keys RocketMQ's configs use for snake_case fields, and the typed conversion of their values."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import IO, Any

from rocketstore.common.text import quote

__all__ = [
    "camel_case", "convert_value", "escape_value", "java_trim", "parse_properties",
    "read_properties_text", "snake_case",
]


def read_properties_text(source: str | os.PathLike[str] | IO[str]) -> str:
    """The text of a ``.properties`` file (ISO 8859-1, as Java reads it) or of an open stream."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="latin-1", newline="") as fh:
            return fh.read()
    return source.read()


def camel_case(name: str, words: Mapping[str, str] | None = None) -> str:
    """snake_case -> camelCase (``flush_disk_type`` -> ``flushDiskType``); ``words`` spells
    some words of the tail otherwise (``{"s": "Seconds"}``: ``duration_s`` -> ``durationSeconds``)."""
    head, *rest = name.split("_")
    if words:
        return head + "".join(words.get(part) or part[:1].upper() + part[1:] for part in rest)
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_UPPER_RE = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """camelCase -> snake_case (``flushDiskType`` -> ``flush_disk_type``)."""
    return _UPPER_RE.sub(r"_\1", name).lower()


_INT_RE = re.compile(r"[+-]?[0-9]+")


def convert_value(kind: Any, text: str) -> Any:
    """A trimmed property value as the field type ``kind`` (a type or its name, as a dataclass
    field's annotation gives it): bool (true/false, any case), int (decimal), float; any other
    kind keeps the text. ValueError saying what was expected."""
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if name == "bool":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"must be true or false, got {quote(text)}")
        return text.lower() == "true"
    if name == "int":
        if not _INT_RE.fullmatch(text):
            raise ValueError(f"must be a decimal integer, got {quote(text)}")
        return int(text)
    if name == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"must be a number, got {quote(text)}") from None
    return text


def java_trim(text: str) -> str:
    """Java ``String.trim()``: strip every char <= U+0020 from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


_PROP_WS = " \t\f"
_NEWLINE_RE = re.compile(r"\r\n|\r|\n")
_HEX4_RE = re.compile(r"[0-9a-fA-F]{4}")
_UNESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text like ``java.util.Properties.load``; later keys win."""
    result: dict[str, str] = {}
    natural = _NEWLINE_RE.split(text)
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_PROP_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        # A logical line goes on while it ends in an odd number of backslashes.
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i].lstrip(_PROP_WS)
            i += 1
        key, value = _split_key_value(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _split_key_value(line: str) -> tuple[str, str]:
    """Split a logical line at its first unescaped ``=``, ``:`` or whitespace (Java rules)."""
    limit = len(line)
    key_len = 0
    value_start = limit
    has_sep = False
    preceding_backslash = False
    while key_len < limit:
        c = line[key_len]
        if not preceding_backslash and c in "=:":
            value_start = key_len + 1
            has_sep = True
            break
        if not preceding_backslash and c in _PROP_WS:
            value_start = key_len + 1
            break
        preceding_backslash = (not preceding_backslash) if c == "\\" else False
        key_len += 1
    while value_start < limit:
        c = line[value_start]
        if c not in _PROP_WS:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_len], line[value_start:]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a lone trailing backslash is dropped, as Java does
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if not _HEX4_RE.fullmatch(digits):
                raise ValueError(f"malformed \\uxxxx escape in properties text {quote(text)}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_UNESCAPES.get(c, c))
    result = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in result):
        # Java strings are UTF-16: join \uD83D\uDE00 style surrogate pairs into one character.
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return result


def escape_value(text: str) -> str:
    """Escape a value like ``Properties.store``: a leading space, specials, non-ASCII."""
    out: list[str] = []
    for idx, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == " ":
            out.append("\\ " if idx == 0 else " ")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif code < 0x20 or code > 0x7E:
            if code > 0xFFFF:
                units = ch.encode("utf-16-be")
                out.append(f"\\u{units[0:2].hex().upper()}\\u{units[2:4].hex().upper()}")
            else:
                out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return "".join(out)


def update_properties_text(text: str, changes: Mapping[str, str]) -> str:
    """``text`` with each key of ``changes`` set to its value: the logical line that defines
    the key last is rewritten as ``key=value`` (earlier ones and every other line, comments
    included, stay as they were: the last wins on reading); keys not in it are appended."""
    natural = _NEWLINE_RE.split(text)
    if natural and natural[-1] == "":
        natural.pop()
    spans: dict[str, tuple[int, int]] = {}   # key -> (first, end) natural line of its last definition
    i = 0
    while i < len(natural):
        first = i
        line = natural[i].lstrip(_PROP_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i < len(natural):
            line = line[:-1] + natural[i].lstrip(_PROP_WS)
            i += 1
        key = _unescape(_split_key_value(line)[0])
        if key in changes:
            spans[key] = (first, i)
    out = list(natural)
    for key, (first, end) in sorted(spans.items(), key=lambda item: -item[1][0]):
        out[first:end] = [f"{key}={escape_value(changes[key])}"]
    out.extend(f"{key}={escape_value(value)}" for key, value in changes.items() if key not in spans)
    return "\n".join(out) + "\n"

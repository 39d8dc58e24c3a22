"""Small text checks shared by every parser, and the quoting of client-supplied text."""
from __future__ import annotations

#: How many characters of a client-supplied value a log line or a message quotes.
QUOTE_LIMIT = 200


def is_ascii_int(text: str, *, signed: bool = False) -> bool:
    """Whether text is a decimal integer in ASCII digits (one leading '-' when signed):
    str.isdigit() also takes digits such as '¹' that int() refuses."""
    if signed and text.startswith("-"):
        text = text[1:]
    return text.isascii() and text.isdigit()


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """repr(value) in at most ``limit`` characters (then "..." and the value's length): how a
    log line or an error message quotes a value a client sent, which may be megabytes."""
    if isinstance(value, (str, bytes, bytearray)) and len(value) > limit:
        unit = "chars" if isinstance(value, str) else "bytes"
        return f"{repr(value[:limit])[:limit]}... ({len(value):,} {unit})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."

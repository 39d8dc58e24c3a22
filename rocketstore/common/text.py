"""Small text checks shared by every parser."""
from __future__ import annotations


def is_ascii_int(text: str, *, signed: bool = False) -> bool:
    """Whether text is a decimal integer in ASCII digits (one leading '-' when signed):
    str.isdigit() also takes digits such as '¹' that int() refuses."""
    if signed and text.startswith("-"):
        text = text[1:]
    return text.isascii() and text.isdigit()

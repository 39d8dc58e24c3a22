"""The checked decoder of JSON headers: what the native frame codec (``_frames``) hands over
when a header is not what a well-behaved peer sends (numbers as strings, a missing field, a
number in extFields): every field checked, defaults filled in, errors naming the field (and
carrying the opaque once it is read, so the request can be answered).
"""

from __future__ import annotations

from typing import Any

import orjson

from rocketstore.common.text import is_ascii_int
from rocketstore.remoting.codes import LanguageCode
from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.errors import HeaderError

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_LANGUAGE_BY_NAME: dict[Any, int] = {member.name: member.value for member in LanguageCode}


def _int32_field(header: dict[str, Any], name: str, default: int, opaque: int | None) -> int:
    value = header.get(name, default)
    if value is None:
        return default
    if type(value) is not int:
        # fastjson reads a numeric string into an int field; so do we, and nothing else.
        if isinstance(value, str) and is_ascii_int(value, signed=True) and len(value) < 12:
            value = int(value)
        else:
            raise HeaderError(f"header field {name!r} must be an integer, got {value!r:.60}", opaque=opaque)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise HeaderError(f"header field {name!r} is out of the int32 range: {value}", opaque=opaque)
    return value


def _ext_value_text(value: Any) -> str | None:
    """An extFields value as the string Java would hold (the C++ client sends numbers)."""
    if type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


def normalize_ext(ext: dict[str, Any]) -> dict[str, str]:
    """The ext fields as strings. Raises HeaderError for a value nested deeper than orjson
    writes back (orjson reads deeper than it writes)."""
    try:
        texts = {key: _ext_value_text(value) for key, value in ext.items()}
    except orjson.JSONEncodeError as exc:
        raise HeaderError(f"header field 'extFields' has a value that cannot be its text: {exc}") from None
    return {key: text for key, text in texts.items() if text is not None}


def decode_json_header_checked(header: Any) -> RemotingCommand:
    """The slow path: every field checked, defaults filled in, errors naming the field."""
    if type(header) is not dict:
        raise HeaderError(f"header is a JSON {type(header).__name__}, not an object")
    # opaque first: every later error can then be answered.
    opaque = _int32_field(header, "opaque", 0, None)
    flag = _int32_field(header, "flag", 0, opaque)
    try:
        code = _int32_field(header, "code", 0, opaque)
        version = _int32_field(header, "version", 0, opaque)
        language_value = header.get("language")
        if language_value is None:
            language = LanguageCode.JAVA.value
        elif type(language_value) is str:
            language = _LANGUAGE_BY_NAME.get(language_value, LanguageCode.OTHER.value)
        elif type(language_value) is int and 0 <= language_value <= 255:
            language = language_value
        else:
            raise HeaderError(f"header field 'language' is not a language: {language_value!r:.60}")
        remark = header.get("remark")
        if remark is not None and type(remark) is not str:
            raise HeaderError(f"header field 'remark' must be a string, got {remark!r:.60}")
        ext = header.get("extFields")
        if ext is None:
            ext = {}
        elif type(ext) is not dict:
            raise HeaderError(f"header field 'extFields' must be an object, got {ext!r:.60}")
        else:
            ext = normalize_ext(ext)
    except HeaderError as exc:
        exc.opaque, exc.flag = opaque, flag
        raise
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, None, 0)

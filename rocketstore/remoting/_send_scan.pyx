# cython: language_level=3, boundscheck=False, wraparound=False
"""SEND headers as RocketMQ's Java producer writes them, read by a bounds-checked scanner.

SEND_MESSAGE 10, SEND_MESSAGE_V2 310 and SEND_BATCH_MESSAGE 320 JSON headers are written by
fastjson the same way every time: ``{"code":310,"extFields":{"a":"PG",...},"flag":0,
"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":...}``, no space, every
ext field a string, control characters as \\u escapes (the properties' \\u0001 and \\u0002).
:func:`scan_send_json` reads exactly that shape (the top-level keys after extFields in any
order, each once; remark a string or null) in one pass over the bytes, every index checked
against the header's length, and returns the command with its SEND field values in
rocketstore.common.send_header's order, as the library decoders would; anything else (an
escaped surrogate, a raw control character, a number where a string goes, whitespace, a key
twice, an unknown top-level key, a required field missing, text that is not UTF-8, an int out
of range) returns None, and the library path (msgspec, then orjson; _frames.pyx) decides: the
reference, which tests/remoting/test_send_scan.py holds this scanner to.

Short field values (producer group, topic, queue id, flags, ...) repeat from one send to the
next: each field keeps its last value's bytes and str, and reuses the str when the bytes match.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport realloc
from libc.string cimport memcmp, memcpy

import msgspec

from rocketstore.remoting._command cimport RemotingCommand, new_lazy_command


from rocketstore.common.send_header import REQUIRED_SEND_HEADER_FIELDS as _REQUIRED_SEND_FIELDS
from rocketstore.common.send_header import SEND_HEADER_FIELDS as _SEND_FIELDS
from rocketstore.remoting.codes import LanguageCode

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)

cdef dict _LANGUAGE_BY_NAME = {member.name: member.value for member in LanguageCode}

cdef enum:
    _FIELD_COUNT = 13
    _CACHED_BELOW = 64          # values up to this many bytes are remembered per field
    _LANGUAGES = 12

cdef enum:
    _HIGH = 1           # what _string_end found in a string
    _ESCAPED = 2

cdef enum:
    _TOP_FLAG = 1
    _TOP_LANGUAGE = 2
    _TOP_OPAQUE = 4
    _TOP_VERSION = 8
    _TOP_REMARK = 16
    _TOP_SERIALIZE = 32

if len(_SEND_FIELDS) != _FIELD_COUNT:
    raise ImportError(f"a SEND header has {len(_SEND_FIELDS)} fields, the scanner knows {_FIELD_COUNT}")

# the wire names, v1 (long) then v2 (one letter), as bytes kept alive here
cdef tuple _NAMES = tuple(f.name.encode() for f in _SEND_FIELDS) + tuple(f.v2_name.encode() for f in _SEND_FIELDS)
cdef const char* _name_p[2 * _FIELD_COUNT]
cdef Py_ssize_t _name_n[2 * _FIELD_COUNT]
for _i, _name in enumerate(_NAMES):
    _name_p[_i] = PyBytes_AS_STRING(_name)
    _name_n[_i] = PyBytes_GET_SIZE(_name)
cdef unsigned int _REQUIRED_MASK = (1 << _REQUIRED_SEND_FIELDS) - 1
# which fields are worth remembering (not the born timestamp nor the properties: they change)
cdef bint _cache_field[_FIELD_COUNT]
for _i, _field in enumerate(_SEND_FIELDS):
    _cache_field[_i] = _field.attribute not in ("born_timestamp", "properties")

cdef tuple _LANGUAGE_NAMES = tuple(member.name.encode() for member in sorted(LanguageCode))
cdef tuple _LANGUAGE_VALUES = tuple(int(member) for member in sorted(LanguageCode))
if len(_LANGUAGE_NAMES) != _LANGUAGES:
    raise ImportError("LanguageCode changed: the SEND scanner's table is out of date")

cdef list _last_raw = [None] * (2 * _FIELD_COUNT)     # per field and spelling: bytes, str
cdef list _last_text = [None] * (2 * _FIELD_COUNT)

cdef const char* _V2_PREFIX = b'{"code":310,"extFields":{'
cdef const char* _BATCH_PREFIX = b'{"code":320,"extFields":{'
cdef const char* _V1_PREFIX = b'{"code":10,"extFields":{'


cdef inline int _hex(char c) noexcept:
    if b'0' <= c <= b'9':
        return c - 48
    if b'a' <= c <= b'f':
        return c - 87
    if b'A' <= c <= b'F':
        return c - 55
    return -1


cdef inline int _escaped_unit(const char* p) noexcept:
    """The code unit of the 4 hex digits at p, or -1."""
    cdef int a = _hex(p[0]), b = _hex(p[1]), c = _hex(p[2]), d = _hex(p[3])
    if a < 0 or b < 0 or c < 0 or d < 0:
        return -1
    return a << 12 | b << 8 | c << 4 | d


cdef inline Py_ssize_t _string_end(const char* p, Py_ssize_t i, Py_ssize_t n, int* flags) noexcept:
    """The index of the quote closing the string whose text starts at p[i], or -1 when it has
    a control character, an escape JSON does not have, a \\u escape of a surrogate (the
    library decides), or no end. flags gets _HIGH (a byte over 127) and _ESCAPED."""
    cdef uint8_t c
    cdef int unit
    while i < n:
        c = <uint8_t>p[i]
        if c == 34:             # '"'
            return i
        if c == 92:             # '\\'
            if i + 1 >= n:
                return -1
            c = <uint8_t>p[i + 1]
            if c == 117:        # 'u'
                if i + 6 > n:
                    return -1
                unit = _escaped_unit(p + i + 2)
                if unit < 0 or 0xD800 <= unit <= 0xDFFF:
                    return -1
                i += 6
            elif c == 34 or c == 92 or c == 47 or c == 98 or c == 102 or c == 110 \
                    or c == 114 or c == 116:     # " \\ / b f n r t
                i += 2
            else:
                return -1
            flags[0] |= _ESCAPED
            continue
        if c < 32:
            return -1
        if c >= 128:
            flags[0] |= _HIGH
        i += 1
    return -1


cdef char* _unescaped = NULL        # the text of an escaped string (grown as needed)
cdef Py_ssize_t _unescaped_cap = 0


cdef object _unescape(const char* p, Py_ssize_t n):
    """The str of a JSON string's text with escapes (checked by _string_end), or None when its
    bytes are not UTF-8."""
    global _unescaped, _unescaped_cap
    cdef Py_ssize_t i = 0, o = 0
    cdef int unit
    cdef char c
    cdef void* grown
    if n > _unescaped_cap:
        grown = realloc(_unescaped, n)
        if grown == NULL:
            raise MemoryError()
        _unescaped = <char*>grown
        _unescaped_cap = n
    while i < n:
        c = p[i]
        if c != b'\\':
            _unescaped[o] = c
            o += 1
            i += 1
            continue
        c = p[i + 1]
        if c == b'u':
            unit = _escaped_unit(p + i + 2)
            if unit < 0x80:
                _unescaped[o] = <char>unit
                o += 1
            elif unit < 0x800:
                _unescaped[o] = <char>(0xC0 | unit >> 6)
                _unescaped[o + 1] = <char>(0x80 | unit & 0x3F)
                o += 2
            else:
                _unescaped[o] = <char>(0xE0 | unit >> 12)
                _unescaped[o + 1] = <char>(0x80 | unit >> 6 & 0x3F)
                _unescaped[o + 2] = <char>(0x80 | unit & 0x3F)
                o += 3
            i += 6
            continue
        if c == b'b':
            c = b'\b'
        elif c == b'f':
            c = b'\f'
        elif c == b'n':
            c = b'\n'
        elif c == b'r':
            c = b'\r'
        elif c == b't':
            c = b'\t'
        _unescaped[o] = c       # and " \\ / as they are
        o += 1
        i += 2
    return _text(_unescaped, o)


cdef inline bint _int32_at(const char* p, Py_ssize_t* at, Py_ssize_t n, int* out) noexcept:
    """A JSON integer (-?(0|[1-9][0-9]*)) within int32 at p[at[0]]; at moved past it."""
    cdef Py_ssize_t i = at[0]
    cdef bint negative = False
    cdef int64_t value = 0
    cdef int digits = 0
    if i < n and p[i] == b'-':
        negative = True
        i += 1
    if i >= n or not (b'0' <= p[i] <= b'9'):
        return False
    if p[i] == b'0':
        i += 1
    else:
        while i < n and b'0' <= p[i] <= b'9':
            digits += 1
            if digits > 10:
                return False
            value = value * 10 + (p[i] - 48)
            i += 1
    if i < n and (b'0' <= p[i] <= b'9' or p[i] == b'.' or p[i] == b'e' or p[i] == b'E'):
        return False
    if negative:
        value = -value
    if value < -2147483648 or value > 2147483647:
        return False
    out[0] = <int>value
    at[0] = i
    return True


cdef inline Py_ssize_t _field_index(const char* key, Py_ssize_t key_n, Py_ssize_t base) noexcept:
    """The SEND field named key (base 0: the v1 names, _FIELD_COUNT: v2's), or -1. The length
    and first byte are compared before the rest: v2's one-letter names need no memcmp."""
    cdef Py_ssize_t k
    cdef const char* name
    if key_n == 0:
        return -1
    for k in range(_FIELD_COUNT):
        name = _name_p[base + k]
        if _name_n[base + k] == key_n and name[0] == key[0] \
                and (key_n == 1 or memcmp(key + 1, name + 1, key_n - 1) == 0):
            return k
    return -1


cdef inline bint _is(const char* p, Py_ssize_t n, const char* name, Py_ssize_t name_n) noexcept:
    return n == name_n and memcmp(p, name, n) == 0


cdef object _text(const char* p, Py_ssize_t n):
    """The str of a JSON string's bytes (no escapes), or None when they are not UTF-8."""
    try:
        return PyUnicode_DecodeUTF8(p, n, NULL)
    except UnicodeDecodeError:
        return None


cdef object _string(const char* p, Py_ssize_t n, int flags):
    return _unescape(p, n) if flags & _ESCAPED else _text(p, n)


cdef object _field_text(Py_ssize_t slot, const char* p, Py_ssize_t n, int flags):
    """_string, the field's last str when its bytes are the same."""
    cdef object raw = _last_raw[slot]
    if raw is not None and PyBytes_GET_SIZE(raw) == n and memcmp(PyBytes_AS_STRING(raw), p, n) == 0:
        return _last_text[slot]
    text = _string(p, n, flags)
    if text is not None and n <= _CACHED_BELOW:
        _last_raw[slot] = PyBytes_FromStringAndSize(p, n)
        _last_text[slot] = text
    return text


cdef RemotingCommand scan_send_json(bytes header):
    """The SEND command of a header in the Java producer's shape, or None (see the module)."""
    cdef const char* p = PyBytes_AS_STRING(header)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(header), i, end, key, key_n, value, k, base
    cdef int code, flag = 0, opaque = 0, version = 0, language = -1
    cdef unsigned int seen = 0, top = 0, bit
    cdef int flags
    cdef object remark = None
    cdef list values
    if n > 25 and memcmp(p, _V2_PREFIX, 25) == 0:
        code, i, base = 310, 25, _FIELD_COUNT
    elif n > 25 and memcmp(p, _BATCH_PREFIX, 25) == 0:
        code, i, base = 320, 25, _FIELD_COUNT
    elif n > 24 and memcmp(p, _V1_PREFIX, 24) == 0:
        code, i, base = 10, 24, 0
    else:
        return None
    values = [None] * _FIELD_COUNT
    # extFields: "name":"value" pairs
    while True:
        if i >= n or p[i] != b'"':
            return None
        flags = 0
        key = i + 1
        end = _string_end(p, key, n, &flags)
        if end < 0 or flags or end + 2 >= n or p[end + 1] != b':' or p[end + 2] != b'"':
            return None
        key_n = end - key
        value = end + 3
        end = _string_end(p, value, n, &flags)
        if end < 0:
            return None
        k = _field_index(p + key, key_n, base)
        if k >= 0:
            bit = 1u << k
            if seen & bit:
                return None
            seen |= bit
            if _cache_field[k]:
                text = _field_text(base + k, p + value, end - value, flags)
            else:
                text = _string(p + value, end - value, flags)
            if text is None:
                return None
            values[k] = text
        elif flags & _HIGH:     # an unknown field's value: its UTF-8 is not read here
            return None
        i = end + 1
        if i < n and p[i] == b',':
            i += 1
        elif i < n and p[i] == b'}':
            i += 1
            break
        else:
            return None
    if seen & _REQUIRED_MASK != _REQUIRED_MASK:
        return None
    # the top-level keys after extFields
    while True:
        if i >= n:
            return None
        if p[i] == b'}':
            i += 1
            break
        if p[i] != b',' or i + 1 >= n or p[i + 1] != b'"':
            return None
        flags = 0
        key = i + 2
        end = _string_end(p, key, n, &flags)
        if end < 0 or flags or end + 1 >= n or p[end + 1] != b':':
            return None
        key_n = end - key
        i = end + 2
        if _is(p + key, key_n, b"flag", 4):
            bit = _TOP_FLAG
            if not _int32_at(p, &i, n, &flag):
                return None
        elif _is(p + key, key_n, b"opaque", 6):
            bit = _TOP_OPAQUE
            if not _int32_at(p, &i, n, &opaque):
                return None
        elif _is(p + key, key_n, b"version", 7):
            bit = _TOP_VERSION
            if not _int32_at(p, &i, n, &version):
                return None
        elif _is(p + key, key_n, b"language", 8):
            bit = _TOP_LANGUAGE
            if i >= n or p[i] != b'"':
                return None
            end = _string_end(p, i + 1, n, &flags)
            if end < 0:
                return None
            for k in range(_LANGUAGES):
                if _is(p + i + 1, end - i - 1, PyBytes_AS_STRING(_LANGUAGE_NAMES[k]),
                       PyBytes_GET_SIZE(_LANGUAGE_NAMES[k])):
                    language = _LANGUAGE_VALUES[k]
                    break
            else:
                return None
            i = end + 1
        elif _is(p + key, key_n, b"remark", 6):
            bit = _TOP_REMARK
            if i + 4 <= n and memcmp(p + i, b"null", 4) == 0:
                remark = None
                i += 4
            elif i < n and p[i] == b'"':
                end = _string_end(p, i + 1, n, &flags)
                if end < 0:
                    return None
                remark = _string(p + i + 1, end - i - 1, flags)
                if remark is None:
                    return None
                i = end + 1
            else:
                return None
        elif _is(p + key, key_n, b"serializeTypeCurrentRPC", 23):
            bit = _TOP_SERIALIZE
            if i >= n or p[i] != b'"':
                return None
            end = _string_end(p, i + 1, n, &flags)
            if end < 0 or flags & _HIGH:
                return None
            i = end + 1
        else:
            return None
        if top & bit:
            return None
        top |= bit
    if i != n or not top & _TOP_LANGUAGE:
        return None
    return new_lazy_command(code, language, version, opaque, flag, remark, header, tuple(values), None)


cdef inline bint _int32_of(PyObject* value, int* out):
    """True and the value when ``value`` is an exact int in the int32 range."""
    cdef int overflow = 0
    cdef long long number
    if value is NULL or not PyLong_CheckExact(<object>value):
        return False
    number = PyLong_AsLongLongAndOverflow(<object>value, &overflow)
    if overflow or number < -2147483648 or number > 2147483647:
        return False
    out[0] = <int>number
    return True


# ---- the library path: msgspec into a typed struct (the scanner's reference) -------------------

def _send_header_decoder(str name, int wire):
    """A decoder of SEND headers whose wire names are column ``wire`` of
    rocketstore.common.send_header.SEND_HEADER_FIELDS (1: the long names, 2: the one-letter
    ones); the values come in that table's order."""
    ext = msgspec.defstruct(
        f"{name}Fields",
        [(f[0], str) for f in _SEND_FIELDS[:_REQUIRED_SEND_FIELDS]]
        + [(f[0], str | None, None) for f in _SEND_FIELDS[_REQUIRED_SEND_FIELDS:]],
        rename={f[0]: f[wire] for f in _SEND_FIELDS}, gc=False)
    header = msgspec.defstruct(
        f"{name}Header",
        [("code", int), ("extFields", ext), ("language", str), ("flag", int, 0), ("opaque", int, 0),
         ("version", int, 0), ("remark", str | None, None)], gc=False)
    return msgspec.json.Decoder(header).decode


cdef object _astuple = msgspec.structs.astuple
cdef object _decode_send_v1 = _send_header_decoder("SendMessage", 1)
cdef object _decode_send_v2 = _send_header_decoder("SendMessageV2", 2)
# msgspec's DecodeError, UnicodeDecodeError (a string not UTF-8), RecursionError (nesting) ...
cdef tuple _MSGSPEC_ERRORS = (msgspec.DecodeError, ValueError, OverflowError, RecursionError)


cdef bint _not_utf8(bytes header) except -1:
    """True when the header is not UTF-8. msgspec checks only the strings it decodes, not an
    unknown field's it skips; orjson refuses the whole header then, and so the reference."""
    cdef const char* p = PyBytes_AS_STRING(header)
    cdef Py_ssize_t i = 0, size = PyBytes_GET_SIZE(header)
    cdef uint64_t word, high = 0
    while i + 8 <= size:                    # ASCII, 8 bytes at a time: the common case
        memcpy(&word, p + i, 8)
        high |= word
        i += 8
    while i < size:
        high |= <uint8_t>p[i]
        i += 1
    if not high & 0x8080808080808080:
        return False
    try:
        PyUnicode_DecodeUTF8(p, size, NULL)
    except UnicodeDecodeError:
        return True
    return False


cdef RemotingCommand _decode_send_header(bytes header, bint v2):
    """A SEND request whose header msgspec takes whole, or None (the orjson path decides)."""
    cdef object language
    cdef tuple values
    cdef int code = 0, opaque = 0, flag = 0, version = 0
    try:
        values = _astuple(_decode_send_v2(header) if v2 else _decode_send_v1(header))
    except _MSGSPEC_ERRORS:
        return None
    if _not_utf8(header):
        return None
    # (code, extFields, language, flag, opaque, version, remark), as _send_header_decoder has them
    language = _LANGUAGE_BY_NAME.get(values[2])
    if language is None \
            or not _int32_of(<PyObject*>values[0], &code) \
            or not _int32_of(<PyObject*>values[3], &flag) \
            or not _int32_of(<PyObject*>values[4], &opaque) \
            or not _int32_of(<PyObject*>values[5], &version):
        return None
    return new_lazy_command(code, <int>language, version, opaque, flag, values[6], header,
                            _astuple(values[1]), None)



cdef RemotingCommand decode_send_json(bytes header, bint scan):
    """A SEND command of a JSON header: the scanner's (``scan``), else msgspec's for a
    SEND_MESSAGE_V2 / SEND_MESSAGE header with code first; None: the orjson path decides."""
    cdef RemotingCommand cmd
    cdef Py_ssize_t size = PyBytes_GET_SIZE(header)
    cdef const char* data = PyBytes_AS_STRING(header)
    if scan:
        cmd = scan_send_json(header)
        if cmd is not None:
            return cmd
    if size > 25 and memcmp(data, _V2_PREFIX, 25) == 0:
        return _decode_send_header(header, True)
    if size > 24 and memcmp(data, _V1_PREFIX, 24) == 0:
        return _decode_send_header(header, False)
    return None


def scan_send_header(bytes header not None):
    """scan_send_json for tests: the command, or None where the library path decides."""
    return scan_send_json(header)

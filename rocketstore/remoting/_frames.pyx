# cython: language_level=3, boundscheck=False, wraparound=False
"""The remoting frame codec's hot path: frames split, headers decoded and encoded natively.

A frame (docs/remoting.md, section 2)::

    int32 length                      bytes that follow this field
    int32 serializeType << 24 | headerLength
    header                            JSON (type 0) or RocketMQ binary (type 1)
    body                              length - 4 - headerLength bytes

Every length read from the network is checked against what is there before it is used. A
frame length that is impossible or over ``max_frame_bytes`` (counted with its length field)
raises FrameError: the stream is lost and the connection must close. A frame with sound
bounds whose header cannot be decoded becomes a HeaderError value in the decoder's output.

JSON headers are parsed by orjson; this module only reads the fields out of the dict it
returns. SEND headers in the Java producer's exact shape are read by _send_scan.pyx's scanner;
the rest of the SEND_MESSAGE_V2 / SEND_MESSAGE headers with code first are decoded by msgspec
into a typed struct; both give the broker's send path the field values without a dict, whose
``ext_fields`` dict is made from the header by the orjson path only if something asks for it.
Any such header msgspec does not take whole goes the orjson way. Anything a well-behaved peer does not send (numbers as strings, a
missing field, a number in extFields) goes to the checked decoder of ``json_header``, which the
plain-Python reference these functions are tested against (tests/reference/frame_codec.py) shares.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

import orjson

from rocketstore.remoting._command cimport RemotingCommand, new_command, new_lazy_command
from rocketstore.remoting._send_scan cimport decode_send_json
from rocketstore.remoting._command import _set_ext_fields_decoder

from rocketstore.remoting.codes import LanguageCode
from rocketstore.remoting.errors import (FOREIGN_QUOTE_BYTES as _QUOTE_BYTES, FrameError, HeaderError,
                                        oversized_frame_text as _oversized)
from rocketstore.remoting.json_header import decode_json_header_checked, normalize_ext

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)
    bint PyUnicode_CheckExact(object o)
    bint PyDict_CheckExact(object o)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL


#: RocketMQ's default frame limit (``com.rocketmq.remoting.frameMaxLength``): 16 MiB.
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: A body up to this size is joined with its header into one buffer (one write, one syscall);
#: a larger one is written as it is, never copied.
JOIN_BODY_BELOW = 16 * 1024

cdef enum:
    _JOIN_BODY_BELOW = 16 * 1024
    _MAX_HEADER_LENGTH = 0xFFFFFF
    _BINARY_FIXED = 2 + 1 + 2 + 4 + 4  # code, language, version, opaque, flag
    _BINARY_MIN_HEADER = _BINARY_FIXED + 4 + 4  # plus the remark and extFields lengths
    _LANGUAGE_COUNT = 12

cdef int64_t _INT32_MIN = -2147483648
cdef int64_t _INT32_MAX = 2147483647

cdef object _loads = orjson.loads
cdef object _dumps = orjson.dumps
cdef object _JSONDecodeError = orjson.JSONDecodeError
cdef dict _LANGUAGE_BY_NAME = {member.name: member.value for member in LanguageCode}
cdef list _LANGUAGE_JSON = [f'"{member.name}"'.encode() for member in sorted(LanguageCode)]

# dict keys, made once (orjson's keys compare equal by value)
cdef str _K_CODE = "code"
cdef str _K_OPAQUE = "opaque"
cdef str _K_FLAG = "flag"
cdef str _K_VERSION = "version"
cdef str _K_LANGUAGE = "language"
cdef str _K_REMARK = "remark"
cdef str _K_EXT = "extFields"


# ---- reading big-endian integers (callers have checked the bounds) ---------------------------

cdef inline uint32_t _u32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline int32_t _i32(const uint8_t* p) noexcept nogil:
    return <int32_t>_u32(p)


cdef inline int16_t _i16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | p[1])


cdef inline void _put_u32(char* p, uint32_t v) noexcept nogil:
    p[0] = <char>(v >> 24)
    p[1] = <char>(v >> 16)
    p[2] = <char>(v >> 8)
    p[3] = <char>v


cdef inline void _put_u16(char* p, uint32_t v) noexcept nogil:
    p[0] = <char>(v >> 8)
    p[1] = <char>v


cdef inline Py_ssize_t _put_text(char* p, const char* text, Py_ssize_t n) noexcept nogil:
    memcpy(p, text, n)
    return n


# ---- decoding --------------------------------------------------------------------------------

cdef inline bint _int32_of(PyObject* value, int* out):
    """True and the value when ``value`` is an exact int in the int32 range."""
    cdef int overflow = 0
    cdef long long number
    if value is NULL or not PyLong_CheckExact(<object>value):
        return False
    number = PyLong_AsLongLongAndOverflow(<object>value, &overflow)
    if overflow or number < _INT32_MIN or number > _INT32_MAX:
        return False
    out[0] = <int>number
    return True


def _ext_fields_of_json(bytes header):
    """The ext fields of a JSON header, as the orjson path reads them."""
    return _decode_json_header_orjson(header).ext_fields


_set_ext_fields_decoder(_ext_fields_of_json)


cdef RemotingCommand _decode_json_header(const char* data, Py_ssize_t size):
    cdef bytes header = PyBytes_FromStringAndSize(data, size)
    cdef RemotingCommand cmd = decode_send_json(header, True)     # a SEND header, typed
    return cmd if cmd is not None else _decode_json_header_orjson(header)


def decode_json_header_library(bytes header not None):
    """A JSON header decoded without the SEND scanner (msgspec, orjson): its reference."""
    cmd = decode_send_json(header, False)
    return cmd if cmd is not None else _decode_json_header_orjson(header)


cdef RemotingCommand _decode_json_header_orjson(bytes data):
    cdef int code = 0, opaque = 0, flag = 0, version = 0
    cdef PyObject* item
    cdef object language
    cdef object remark = None
    cdef object ext
    cdef Py_ssize_t pos = 0
    cdef PyObject* key
    cdef PyObject* value
    try:
        header = _loads(data)
    except _JSONDecodeError as exc:
        raise HeaderError(f"header is not valid JSON: {exc}") from None
    if not PyDict_CheckExact(header):
        return decode_json_header_checked(header)
    # The fast path: what well-behaved peers send. Anything unusual takes the checked path.
    if not _int32_of(PyDict_GetItem(header, _K_CODE), &code):
        return decode_json_header_checked(header)
    item = PyDict_GetItem(header, _K_OPAQUE)
    if item is NULL:
        opaque = 0
    elif not _int32_of(item, &opaque):
        return decode_json_header_checked(header)
    item = PyDict_GetItem(header, _K_FLAG)
    if item is not NULL and not _int32_of(item, &flag):
        return decode_json_header_checked(header)
    item = PyDict_GetItem(header, _K_VERSION)
    if item is not NULL and not _int32_of(item, &version):
        return decode_json_header_checked(header)
    item = PyDict_GetItem(header, _K_LANGUAGE)
    if item is NULL or not PyUnicode_CheckExact(<object>item):
        return decode_json_header_checked(header)
    language = _LANGUAGE_BY_NAME.get(<object>item)
    if language is None:
        return decode_json_header_checked(header)
    item = PyDict_GetItem(header, _K_REMARK)
    if item is not NULL and <object>item is not None:
        if not PyUnicode_CheckExact(<object>item):
            return decode_json_header_checked(header)
        remark = <object>item
    item = PyDict_GetItem(header, _K_EXT)
    if item is NULL or <object>item is None:
        ext = {}  # Java leaves out an empty map
    elif PyDict_CheckExact(<object>item):
        ext = <object>item
        while PyDict_Next(ext, &pos, &key, &value):
            if not PyUnicode_CheckExact(<object>value):
                try:
                    ext = normalize_ext(ext)  # the C++ client's numbers become their text
                except HeaderError:
                    return decode_json_header_checked(header)  # the error with opaque and flag
                break
    else:
        return decode_json_header_checked(header)
    return new_command(code, <int>language, version, opaque, flag, remark, ext, None, 0)


cdef inline str _utf8_text(const char* data, Py_ssize_t size):
    return PyUnicode_DecodeUTF8(data, size, "replace")


cdef RemotingCommand _decode_binary_header(const char* data, Py_ssize_t size):
    """RocketMQ's own header serialization (RocketMQSerializable), every length checked."""
    cdef const uint8_t* p = <const uint8_t*>data
    cdef int code, language, version, opaque, flag
    cdef int32_t remark_length, ext_length, value_length
    cdef int16_t key_length
    cdef Py_ssize_t pos, end
    cdef dict ext = {}
    cdef object remark = None
    if size < _BINARY_MIN_HEADER:
        raise HeaderError(
            f"binary header is {size} bytes, shorter than the {_BINARY_MIN_HEADER} every one has",
            serialize_type=1,
        )
    code = _i16(p)
    language = p[2]
    version = _i16(p + 3)
    opaque = _i32(p + 5)
    flag = _i32(p + 9)
    pos = _BINARY_FIXED
    remark_length = _i32(p + pos)
    pos += 4
    if remark_length < 0 or remark_length > size - pos - 4:
        raise _binary_error(
            f"binary header: remark length {remark_length} does not fit the header ({size} bytes)",
            opaque, flag)
    if remark_length:
        remark = _utf8_text(data + pos, remark_length)
    pos += remark_length
    ext_length = _i32(p + pos)
    pos += 4
    if ext_length < 0 or ext_length > size - pos:
        raise _binary_error(
            f"binary header: extFields length {ext_length} does not fit the header ({size} bytes)",
            opaque, flag)
    end = pos + ext_length
    while pos < end:
        if end - pos < 2:
            raise _binary_error("binary header: extFields entry cut inside its key length", opaque, flag)
        key_length = _i16(p + pos)
        pos += 2
        if key_length < 0 or key_length > end - pos - 4:
            raise _binary_error(f"binary header: extFields key length {key_length} does not fit",
                                opaque, flag)
        key = _utf8_text(data + pos, key_length)
        pos += key_length
        value_length = _i32(p + pos)
        pos += 4
        if value_length < 0 or value_length > end - pos:
            raise _binary_error(
                f"binary header: extFields value length {value_length} of {key!r:.40} does not fit",
                opaque, flag)
        ext[key] = _utf8_text(data + pos, value_length)
        pos += value_length
    return new_command(code, language, version, opaque, flag, remark, ext, None, 1)


cdef object _binary_error(str message, int opaque, int flag):
    return HeaderError(message, opaque=opaque, flag=flag, serialize_type=1)


cdef RemotingCommand _decode_frame(const char* frame, Py_ssize_t size):
    """The frame in ``frame[0:size]`` (after its length field, ``size >= 4``). Raises
    HeaderError. Header and body are copied out: no view of the caller's buffer outlives the
    call, so a command never pins a network buffer."""
    cdef uint32_t word = _u32(<const uint8_t*>frame)
    cdef uint32_t serialize_type = word >> 24
    cdef Py_ssize_t header_length = word & _MAX_HEADER_LENGTH
    cdef RemotingCommand cmd
    if header_length > size - 4:
        raise HeaderError(
            f"header length {header_length} is over the frame's {size - 4} bytes",
            serialize_type=serialize_type if serialize_type <= 1 else 0,
        )
    if serialize_type == 0:
        cmd = _decode_json_header(frame + 4, header_length)
    elif serialize_type == 1:
        cmd = _decode_binary_header(frame + 4, header_length)
    else:
        raise HeaderError(f"unknown serialize type {serialize_type}")
    if 4 + header_length < size:
        cmd.body = PyBytes_FromStringAndSize(frame + 4 + header_length, size - 4 - header_length)
    return cmd


def decode_frame(frame):
    """Decode one frame given without its length field. Raises HeaderError."""
    cdef Py_buffer view
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        if view.len < 4:
            raise HeaderError(f"frame of {view.len} bytes has no header length")
        return _decode_frame(<const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def decode_json_header(header):
    """A JSON header (bytes) as a command without a body. Raises HeaderError."""
    cdef Py_buffer view
    PyObject_GetBuffer(header, &view, PyBUF_SIMPLE)
    try:
        return _decode_json_header(<const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def decode_binary_header(header):
    """A RocketMQ binary header as a command without a body. Raises HeaderError."""
    cdef Py_buffer view
    PyObject_GetBuffer(header, &view, PyBUF_SIMPLE)
    try:
        return _decode_binary_header(<const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef class FrameDecoder:
    """Splits a byte stream into commands: give it whatever ``data_received`` got.

    ``feed`` returns the commands completed by the new bytes, in order, with a HeaderError in
    place of each frame whose header could not be decoded. It raises FrameError when the
    stream itself is corrupt; the decoder is then useless. Partial frames are kept in one
    buffer, never more than one frame's worth, which ``max_frame_bytes`` bounds.
    """

    cdef readonly Py_ssize_t max_frame_bytes
    cdef bytearray _pending

    def __init__(self, Py_ssize_t max_frame_bytes=MAX_FRAME_BYTES):
        if max_frame_bytes < 8:
            raise ValueError(f"max_frame_bytes must be at least 8, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self._pending = bytearray()

    @property
    def buffered(self):
        """Bytes held of a frame not yet complete."""
        return PyByteArray_GET_SIZE(self._pending)

    def feed(self, data):
        cdef bytearray pending = self._pending
        cdef object source
        cdef const char* base
        cdef Py_ssize_t size, pos = 0
        cdef int64_t length, end
        cdef list out = []
        if PyByteArray_GET_SIZE(pending):
            pending += data
            source = pending
            base = PyByteArray_AS_STRING(pending)
            size = PyByteArray_GET_SIZE(pending)
        else:
            source = data if type(data) is bytes else bytes(data)
            base = PyBytes_AS_STRING(source)
            size = PyBytes_GET_SIZE(source)
        while size - pos >= 4:
            length = _u32(<const uint8_t*>base + pos)
            if length < 4:
                raise FrameError(f"frame length {length} is under the 4 bytes of its header length")
            if length + 4 > self.max_frame_bytes:
                raise FrameError(_oversized(length + 4, self.max_frame_bytes, PyBytes_FromStringAndSize(base + pos, min(size - pos, _QUOTE_BYTES))))
            end = pos + 4 + length
            if end > size:
                break
            try:
                out.append(_decode_frame(base + pos + 4, <Py_ssize_t>length))
            except HeaderError as exc:
                out.append(exc.with_traceback(None))
            pos = <Py_ssize_t>end
        if source is pending:
            if pos:
                del pending[:pos]
        elif pos < size:
            pending += source[pos:]
        return out


# ---- encoding --------------------------------------------------------------------------------

cdef inline Py_ssize_t _buffer_length(object buffer) except -1:
    if type(buffer) is bytes:
        return PyBytes_GET_SIZE(buffer)
    if type(buffer) is memoryview:
        return (<memoryview>buffer).nbytes
    if type(buffer) is bytearray:
        return PyByteArray_GET_SIZE(buffer)
    raise TypeError(f"a body is bytes, bytearray, memoryview or a sequence of them, "
                    f"not {type(buffer).__name__}")


cdef struct _JsonHeader:
    # The header is head + [',"extFields":' ext] + middle + [',"remark":' remark] + tail;
    # the int fields are formatted here, the strings by orjson.
    char text[160]
    Py_ssize_t head_length    # '{"code":N'
    Py_ssize_t middle_start
    Py_ssize_t middle_length  # ',"flag":N,"language":"X","opaque":N'
    Py_ssize_t tail_start
    Py_ssize_t tail_length    # ',"serializeTypeCurrentRPC":"JSON","version":N}'


@cython.freelist(8)
cdef class _HeaderBytes:
    """One header, ready to be written: its length and how to write it."""
    cdef _JsonHeader json
    cdef bytes ext        # orjson's extFields, or None
    cdef bytes remark     # orjson's remark, or None
    cdef bytes binary     # a whole binary header, or None
    cdef Py_ssize_t length

    cdef void write(self, char* out) noexcept:
        cdef Py_ssize_t n
        if self.binary is not None:
            memcpy(out, PyBytes_AS_STRING(self.binary), PyBytes_GET_SIZE(self.binary))
            return
        memcpy(out, self.json.text, self.json.head_length)
        out += self.json.head_length
        if self.ext is not None:
            memcpy(out, b',"extFields":', 13)
            out += 13
            n = PyBytes_GET_SIZE(self.ext)
            memcpy(out, PyBytes_AS_STRING(self.ext), n)
            out += n
        memcpy(out, self.json.text + self.json.middle_start, self.json.middle_length)
        out += self.json.middle_length
        if self.remark is not None:
            memcpy(out, b',"remark":', 10)
            out += 10
            n = PyBytes_GET_SIZE(self.remark)
            memcpy(out, PyBytes_AS_STRING(self.remark), n)
            out += n
        memcpy(out, self.json.text + self.json.tail_start, self.json.tail_length)


cdef _HeaderBytes _make_header(RemotingCommand cmd):
    cdef _HeaderBytes header = _HeaderBytes.__new__(_HeaderBytes)
    cdef int n
    cdef char* text
    cdef bytes language
    if cmd.serialize_type == 1:
        header.binary = encode_binary_header(cmd)
        header.length = PyBytes_GET_SIZE(header.binary)
        return header
    if cmd.serialize_type != 0:
        raise ValueError(
            f"serialize_type must be 0 (JSON) or 1 (ROCKETMQ), got {cmd.serialize_type}")
    # fastjson's layout: keys in alphabetical order, null fields left out, the language by name
    # at most 8 + 11 + 8 + 11 + 12 + 12 + 10 + 11 + 44 + 11 + 1 = 139 characters of text
    text = header.json.text
    n = _put_text(text, b'{"code":', 8)
    n += put_decimal(text + n, cmd.code)
    header.json.head_length = n
    header.json.middle_start = n
    n += _put_text(text + n, b',"flag":', 8)
    n += put_decimal(text + n, cmd.flag)
    n += _put_text(text + n, b',"language":', 12)
    if 0 <= cmd.language < _LANGUAGE_COUNT:
        language = <bytes>_LANGUAGE_JSON[cmd.language]
        n += _put_text(text + n, PyBytes_AS_STRING(language), PyBytes_GET_SIZE(language))
    else:
        n += put_decimal(text + n, cmd.language)
    n += _put_text(text + n, b',"opaque":', 10)
    n += put_decimal(text + n, cmd.opaque)
    header.json.middle_length = n - header.json.middle_start
    header.json.tail_start = n
    n += _put_text(text + n, b',"serializeTypeCurrentRPC":"JSON","version":', 44)
    n += put_decimal(text + n, cmd.version)
    text[n] = b'}'
    n += 1
    header.json.tail_length = n - header.json.tail_start
    header.length = n
    if cmd.ext_fields:
        header.ext = _dumps(cmd.ext_fields)
        header.length += 13 + PyBytes_GET_SIZE(header.ext)
    if cmd.remark is not None:
        header.remark = _dumps(cmd.remark)
        header.length += 10 + PyBytes_GET_SIZE(header.remark)
    if header.length > _MAX_HEADER_LENGTH:
        raise ValueError(f"header is {header.length} bytes, over the protocol's 16 MiB - 1")
    return header


def encode_json_header(RemotingCommand cmd not None):
    """The header as RocketMQ's Java side writes it: fastjson's alphabetical key order, null
    fields left out, the language by name."""
    cdef _HeaderBytes header
    if cmd.serialize_type != 0:
        cmd = new_command(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
                          cmd.ext_fields, None, 0)
    header = _make_header(cmd)
    out = PyBytes_FromStringAndSize(NULL, header.length)
    header.write(PyBytes_AS_STRING(out))
    return out


cdef bytes _text_utf8(object value):
    if PyUnicode_CheckExact(value):
        return (<str>value).encode("utf-8")
    return str(value).encode("utf-8")


def encode_binary_header(RemotingCommand cmd not None):
    """RocketMQ's own header serialization (RocketMQSerializable). Raises ValueError for a
    field that does not fit its width (code and version are int16, language a byte)."""
    cdef list entries = []
    cdef Py_ssize_t ext_length = 0, remark_length, size, pos = 0
    cdef bytes remark = (<str>cmd.remark).encode("utf-8") if cmd.remark else b""
    cdef bytes key_bytes, value_bytes
    cdef char* out
    if not -32768 <= cmd.code <= 32767:
        raise ValueError(f"code {cmd.code} does not fit a binary header's int16")
    if not -32768 <= cmd.version <= 32767:
        raise ValueError(f"version {cmd.version} does not fit a binary header's int16")
    if not 0 <= cmd.language <= 255:
        raise ValueError(f"language {cmd.language} does not fit a binary header's byte")
    for key, value in cmd.ext_fields.items():
        if key is None or value is None:
            continue
        key_bytes = _text_utf8(key)
        value_bytes = _text_utf8(value)
        if len(key_bytes) > 0x7FFF:
            raise ValueError(f"extFields key {key[:40]!r}... is over 32767 bytes")
        entries.append(key_bytes)
        entries.append(value_bytes)
        ext_length += 2 + len(key_bytes) + 4 + len(value_bytes)
    remark_length = len(remark)
    size = _BINARY_FIXED + 4 + remark_length + 4 + ext_length
    if size > 0x7FFFFFFF:
        raise ValueError(f"binary header of {size} bytes does not fit its int32 lengths")
    result = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(result)
    _put_u16(out, <uint32_t>cmd.code)
    out[2] = <char>cmd.language
    _put_u16(out + 3, <uint32_t>cmd.version)
    _put_u32(out + 5, <uint32_t>cmd.opaque)
    _put_u32(out + 9, <uint32_t>cmd.flag)
    pos = _BINARY_FIXED
    _put_u32(out + pos, <uint32_t>remark_length)
    pos += 4
    memcpy(out + pos, PyBytes_AS_STRING(remark), remark_length)
    pos += remark_length
    _put_u32(out + pos, <uint32_t>ext_length)
    pos += 4
    for i in range(0, len(entries), 2):
        key_bytes = <bytes>entries[i]
        value_bytes = <bytes>entries[i + 1]
        _put_u16(out + pos, <uint32_t>PyBytes_GET_SIZE(key_bytes))
        pos += 2
        memcpy(out + pos, PyBytes_AS_STRING(key_bytes), PyBytes_GET_SIZE(key_bytes))
        pos += PyBytes_GET_SIZE(key_bytes)
        _put_u32(out + pos, <uint32_t>PyBytes_GET_SIZE(value_bytes))
        pos += 4
        memcpy(out + pos, PyBytes_AS_STRING(value_bytes), PyBytes_GET_SIZE(value_bytes))
        pos += PyBytes_GET_SIZE(value_bytes)
    return result


cdef object _body_parts(object body, Py_ssize_t* length):
    """The body as a tuple of buffers (or a single buffer), and its total length."""
    cdef Py_ssize_t total = 0
    if body is None:
        length[0] = 0
        return None
    if type(body) is bytes or type(body) is memoryview or type(body) is bytearray:
        length[0] = _buffer_length(body)
        return body
    parts = tuple(body)
    for part in parts:
        total += _buffer_length(part)
    length[0] = total
    return parts


cdef int _copy_buffer(char* out, object buffer, Py_ssize_t* written) except -1:
    cdef Py_buffer view
    if type(buffer) is bytes:
        memcpy(out, PyBytes_AS_STRING(buffer), PyBytes_GET_SIZE(buffer))
        written[0] = PyBytes_GET_SIZE(buffer)
        return 0
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)  # a non-contiguous view raises here
    try:
        memcpy(out, view.buf, view.len)
        written[0] = view.len
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int _write_small_frame(char* out, _HeaderBytes header, object body,
                            Py_ssize_t body_length) except -1:
    cdef Py_ssize_t written
    _put_u32(out, <uint32_t>(4 + header.length + body_length))
    _put_u32(out + 4, (<uint32_t>(1 if header.binary is not None else 0) << 24) | <uint32_t>header.length)
    header.write(out + 8)
    out += 8 + header.length
    if body is None:
        return 0
    if type(body) is tuple:
        for part in <tuple>body:
            _copy_buffer(out, part, &written)
            out += written
    else:
        _copy_buffer(out, body, &written)
    return 0


cdef _HeaderBytes _checked_header(RemotingCommand cmd, Py_ssize_t body_length):
    cdef _HeaderBytes header = _make_header(cmd)
    if 4 + header.length + body_length > 0x7FFFFFFF:
        raise ValueError(
            f"frame of {4 + header.length + body_length} bytes does not fit the int32 length field")
    return header


def encode_frame(RemotingCommand cmd not None):
    """The frame as buffers to write in order: prefix and header first, then the body's own
    buffers untouched when it is large (zero-copy), or everything joined when it is small."""
    cdef Py_ssize_t body_length
    body = _body_parts(cmd.body, &body_length)
    cdef _HeaderBytes header = _checked_header(cmd, body_length)
    if body_length < _JOIN_BODY_BELOW:
        out = PyBytes_FromStringAndSize(NULL, 8 + header.length + body_length)
        _write_small_frame(PyBytes_AS_STRING(out), header, body, body_length)
        return [out]
    head = PyBytes_FromStringAndSize(NULL, 8 + header.length)
    _write_small_frame(PyBytes_AS_STRING(head), header, None, body_length)
    if type(body) is tuple:
        return [head, *body]
    return [head, body]


def encode(RemotingCommand cmd not None):
    """The whole frame as one ``bytes`` (tests and small messages)."""
    parts = encode_frame(cmd)
    return parts[0] if len(parts) == 1 else b"".join(parts)


cdef class FrameWriter:
    """Frames waiting for one write: small frames are encoded straight into one buffer, large
    bodies (and bodies given as several buffers that add up to a large one) are queued as
    the caller's own buffers, never copied, for a vectored write.

    ``add(cmd)`` encodes and queues (an encoding error leaves the queue as it was) and
    returns the bytes queued; ``take()`` hands over the buffers in order and empties the
    writer. Buffers handed over are never touched again.
    """

    def __cinit__(self):
        self._parts = []
        self._tail = None
        self.nbytes = 0

    def __len__(self):
        return len(self._parts) + (1 if self._tail is not None else 0)

    cpdef Py_ssize_t add(self, RemotingCommand cmd) except -1:
        cdef Py_ssize_t body_length, start, frame_length
        cdef bytearray tail
        body = _body_parts(cmd.body, &body_length)
        cdef _HeaderBytes header = _checked_header(cmd, body_length)
        if self._tail is None:
            self._tail = bytearray()
        tail = self._tail
        start = PyByteArray_GET_SIZE(tail)
        frame_length = 8 + header.length + (body_length if body_length < _JOIN_BODY_BELOW else 0)
        PyByteArray_Resize(tail, start + frame_length)
        try:
            if body_length < _JOIN_BODY_BELOW:
                _write_small_frame(PyByteArray_AS_STRING(tail) + start, header, body, body_length)
            else:
                _write_small_frame(PyByteArray_AS_STRING(tail) + start, header, None, body_length)
        except BaseException:
            PyByteArray_Resize(tail, start)
            raise
        if body_length >= _JOIN_BODY_BELOW:
            self._parts.append(tail)
            self._tail = None
            if type(body) is tuple:
                self._parts.extend(<tuple>body)
            else:
                self._parts.append(body)
        self.nbytes += 8 + header.length + body_length
        return self.nbytes

    cdef char* reserve(self, Py_ssize_t n) except NULL:
        """``n`` bytes at the end of the small-frame buffer, counted as queued: the caller
        writes one whole frame there before anything else is added (a reply made from a
        template, without a RemotingCommand)."""
        cdef Py_ssize_t start
        if self._tail is None:
            self._tail = bytearray()
        start = PyByteArray_GET_SIZE(self._tail)
        PyByteArray_Resize(self._tail, start + n)
        self.nbytes += n
        return PyByteArray_AS_STRING(self._tail) + start

    cpdef Py_ssize_t add_frame(self, bytes frame) except -1:
        """Queue a whole encoded frame (a reply made from a template earlier); returns the
        bytes queued."""
        cdef Py_ssize_t n = PyBytes_GET_SIZE(frame)
        if n < 8:
            raise ValueError(f"a frame has at least 8 bytes, got {n}")
        memcpy(self.reserve(n), PyBytes_AS_STRING(frame), n)
        return self.nbytes

    def take(self):
        """The queued buffers, in order (small frames joined); the writer is empty after."""
        parts = self._parts
        if self._tail is not None:
            parts.append(self._tail)
            self._tail = None
        self._parts = []
        self.nbytes = 0
        return parts

    def clear(self):
        self._parts = []
        self._tail = None
        self.nbytes = 0

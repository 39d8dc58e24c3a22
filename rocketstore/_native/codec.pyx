# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CommitLog record codec: Message, encoding straight into a MappedFile, decoding and scanning.

Encoding is two-phase: ``_prepare`` (GIL held) validates one message and gathers pointers and
lengths of everything it will write into a RecordSpec; ``_write_record`` (no GIL needed) lays
the record out at its final place in the mapped region, CRC included. A batch prepares every
message first, so a bad one rejects the whole batch before a byte is written.
"""
import ipaddress
import os
import random
import socket
import time

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject
from cpython.pythread cimport (
    NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock, PyThread_free_lock,
    PyThread_release_lock, PyThread_type_lock,
)
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcpy, memset
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rocketstore._native.includes.atomic cimport rs_release_fence
from rocketstore._native.includes.python cimport (
    PyDict_Contains, PyUnicode_DATA, PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8,
    PyUnicode_GET_LENGTH, PyUnicode_IS_COMPACT_ASCII, PyUnicode_KIND, PyUnicode_New,
    PyUnicode_READ,
)
from rocketstore._native.includes.scan cimport rs_has_byte_below3
from rocketstore._native.mapped_file cimport MappedFile

import numpy as np

cimport numpy as cnp

cnp.import_array()

rs_crc32_init()

CRC32_IMPL = rs_crc32_impl().decode()

# PutMessageStatus ordinals (RocketMQ's enum order); rocketstore.message maps them to the enum.
cdef enum:
    PUT_OK = 0
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7

PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
cdef str _UNIQ_KEY = PROPERTY_UNIQ_KEY     # typed: no module-dict lookup on the put path
cdef const char* _UNIQ_KEY_C = b"UNIQ_KEY"

cdef bytes _HEX = b"0123456789ABCDEF"


# ---- checksums and hashes ------------------------------------------------------------------

def crc32(data, unsigned int value=0):
    """CRC-32 (zlib's) of a buffer, continuing from value. GIL released for large buffers."""
    cdef const unsigned char[::1] view = data
    cdef uint32_t crc = value
    cdef size_t n = view.shape[0]
    if n == 0:
        return crc
    if n >= 65536:
        with nogil:
            crc = rs_crc32(crc, &view[0], n)
    else:   # releasing the GIL costs more than hashing a small buffer
        crc = rs_crc32(crc, &view[0], n)
    return crc


def body_crc(data):
    """BODYCRC as RocketMQ stores it: CRC-32 & 0x7FFFFFFF."""
    return crc32(data) & 0x7FFFFFFF


cdef int32_t java_hash_str(str s):
    """Java String.hashCode: over UTF-16 code units, int32 wrap-around."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void* data = PyUnicode_DATA(s)
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(s)
    cdef uint32_t h = 0
    cdef uint32_t c
    for i in range(n):
        c = <uint32_t>PyUnicode_READ(kind, data, i)
        if c >= 0x10000:
            c -= 0x10000
            h = h * 31 + (0xD800 + (c >> 10))
            h = h * 31 + (0xDC00 + (c & 0x3FF))
        else:
            h = h * 31 + c
    return <int32_t>h


def java_hash(str s not None):
    """Java String.hashCode of s (int32)."""
    return java_hash_str(s)


cdef inline bint _cont(int b) noexcept nogil:
    return (b & 0xC0) == 0x80


cdef inline bint _malformed3(int b1, int b2, int b3) noexcept nogil:
    return (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3)


cdef inline bint _malformed3_2(int b1, int b2) noexcept nogil:
    return (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)


cdef inline bint _malformed4_2(int b1, int b2) noexcept nogil:
    return (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF)) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) \
        or not _cont(b2)


cdef uint32_t hash_utf8(uint32_t h, const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """Continue Java's String.hashCode over the UTF-16 units that Java's UTF-8 decoder
    (String(byte[], UTF_8), JDK 8..17, REPLACE) makes of s[0:n]. A port of
    String.decodeUTF8_UTF16: malformed input gives U+FFFD; a truncated sequence at the end
    gives one U+FFFD and ends the text."""
    cdef Py_ssize_t sp = 0
    cdef int b1, b2, b3, b4
    cdef uint32_t c, uc
    while sp < n:
        # ASCII, four bytes a step: h*31^4 + b0*31^3 + b1*31^2 + b2*31 + b3 (mod 2^32)
        while sp + 4 <= n and (s[sp] | s[sp + 1] | s[sp + 2] | s[sp + 3]) < 0x80:
            h = h * 923521 + <uint32_t>s[sp] * 29791 + <uint32_t>s[sp + 1] * 961 \
                + <uint32_t>s[sp + 2] * 31 + <uint32_t>s[sp + 3]
            sp += 4
        if sp >= n:
            break
        b1 = s[sp]
        sp += 1
        if b1 < 0x80:
            h = h * 31 + <uint32_t>b1
        elif (b1 & 0xE0) == 0xC0 and (b1 & 0x1E) != 0:            # 2 bytes
            if sp < n:
                b2 = s[sp]
                sp += 1
                if not _cont(b2):
                    h = h * 31 + 0xFFFD
                    sp -= 1
                else:
                    h = h * 31 + (((<uint32_t>b1 & 0x1F) << 6) | (<uint32_t>b2 & 0x3F))
                continue
            h = h * 31 + 0xFFFD
            break
        elif (b1 & 0xF0) == 0xE0:                                  # 3 bytes
            if sp + 1 < n:
                b2 = s[sp]
                b3 = s[sp + 1]
                sp += 2
                if _malformed3(b1, b2, b3):
                    h = h * 31 + 0xFFFD
                    sp -= 3
                    # malformed3: 1 byte when b2 can not continue b1, else 2
                    sp += 1 if ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)) else 2
                else:
                    c = ((<uint32_t>b1 & 0x0F) << 12) | ((<uint32_t>b2 & 0x3F) << 6) \
                        | (<uint32_t>b3 & 0x3F)
                    if c >= 0xD800 and c <= 0xDFFF:
                        c = 0xFFFD
                    h = h * 31 + c
                continue
            if sp < n and _malformed3_2(b1, s[sp]):
                h = h * 31 + 0xFFFD
                continue
            h = h * 31 + 0xFFFD
            break
        elif (b1 & 0xF8) == 0xF0:                                  # 4 bytes
            if sp + 2 < n:
                b2 = s[sp]
                b3 = s[sp + 1]
                b4 = s[sp + 2]
                sp += 3
                uc = ((<uint32_t>b1 & 0x07) << 18) | ((<uint32_t>b2 & 0x3F) << 12) \
                    | ((<uint32_t>b3 & 0x3F) << 6) | (<uint32_t>b4 & 0x3F)
                if not _cont(b2) or not _cont(b3) or not _cont(b4) \
                        or uc < 0x10000 or uc > 0x10FFFF:
                    h = h * 31 + 0xFFFD
                    sp -= 4
                    # malformed4
                    if b1 > 0xF4 or (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF)) \
                            or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2):
                        sp += 1
                    elif not _cont(b3):
                        sp += 2
                    else:
                        sp += 3
                else:
                    uc -= 0x10000
                    h = h * 31 + (0xD800 + (uc >> 10))
                    h = h * 31 + (0xDC00 + (uc & 0x3FF))
                continue
            if b1 > 0xF4 or (sp < n and _malformed4_2(b1, s[sp])):
                h = h * 31 + 0xFFFD
                continue
            sp += 1
            h = h * 31 + 0xFFFD
            if sp < n and not _cont(s[sp]):
                continue
            break
        else:
            h = h * 31 + 0xFFFD
    return h


cdef int64_t tags_code_of(const char* props, int32_t props_len) noexcept nogil:
    """tagsCode of a record: Java hashCode of its TAGS property value, 0 when absent."""
    cdef KeyProps kp
    find_key_props(props, props_len, &kp)
    return tags_code_in(&kp)


# ---- hosts -----------------------------------------------------------------------------------

cdef dict _host_cache = {}


def parse_host(host):
    """'a.b.c.d:port' or '[v6]:port' (or an (address, port) tuple) -> (raw address bytes, port).

    Raises ValueError naming the text when it is not an IP literal with a port."""
    cached = _host_cache.get(host)
    if cached is not None:
        return cached
    if isinstance(host, tuple) and len(host) == 2:
        addr_text, port = str(host[0]), host[1]
    elif isinstance(host, str):
        text = host.strip()
        if text.startswith("["):
            end = text.find("]")
            if end < 0 or text[end + 1:end + 2] != ":":
                raise ValueError(f"host {host!r} is not '[ipv6]:port'")
            addr_text, port_text = text[1:end], text[end + 2:]
        else:
            addr_text, sep, port_text = text.rpartition(":")
            if not sep:
                raise ValueError(f"host {host!r} has no ':port'")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"host {host!r} has a bad port") from None
    else:
        raise TypeError(f"host must be 'ip:port' text or an (ip, port) tuple, got {type(host).__name__}")
    if not isinstance(port, int) or not 0 <= port <= 0x7FFFFFFF:
        raise ValueError(f"host {host!r} has a bad port")
    try:
        raw = ipaddress.ip_address(addr_text).packed
    except ValueError:
        raise ValueError(f"host {host!r} is not an IP address literal") from None
    result = (raw, port)
    if len(_host_cache) < 4096:
        _host_cache[host] = result
    return result


def format_host(raw, int port):
    """Raw 4- or 16-byte address and port -> 'a.b.c.d:port' or '[v6]:port' (RFC 5952)."""
    addr = ipaddress.ip_address(bytes(raw))
    if addr.version == 6:
        if addr.ipv4_mapped is not None:    # one spelling on every Python version
            return f"[::ffff:{addr.ipv4_mapped}]:{port}"
        return f"[{addr.compressed}]:{port}"
    return f"{addr}:{port}"


cdef inline void _hex_into(const unsigned char* p, Py_ssize_t n, char* out) noexcept:
    cdef const char* digits = _HEX
    cdef Py_ssize_t i
    for i in range(n):
        out[2 * i] = digits[p[i] >> 4]
        out[2 * i + 1] = digits[p[i] & 15]


cdef inline str _hex(const unsigned char* p, Py_ssize_t n):
    cdef object s = PyUnicode_New(n * 2, 127)
    _hex_into(p, n, <char*>PyUnicode_DATA(s))
    return s


cdef str _msg_id(const unsigned char* host, int32_t host_len, int32_t port, int64_t offset):
    """offsetMsgId: store address + port (int32) + CommitLog offset (int64), uppercase hex."""
    cdef unsigned char buf[28]
    memcpy(buf, host, host_len)
    rs_put_u32(<char*>buf + host_len, <uint32_t>port)
    rs_put_u64(<char*>buf + host_len + 4, <unsigned long long>offset)
    return _hex(buf, host_len + 12)


def make_msg_id(store_host, int64_t offset):
    """offsetMsgId of a record at offset stored by store_host ('ip:port')."""
    raw, port = parse_host(store_host)
    return _msg_id(<const unsigned char*>PyBytes_AS_STRING(raw), len(raw), port, offset)


def parse_msg_id(str msg_id not None):
    """offsetMsgId -> (store host 'ip:port', CommitLog offset). ValueError naming msg_id."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"msg_id must be 32 or 56 hex characters, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"msg_id {msg_id!r} is not hexadecimal") from None
    alen = len(raw) - 12
    port = int.from_bytes(raw[alen:alen + 4], "big")
    offset = int.from_bytes(raw[alen + 4:], "big", signed=True)
    return format_host(raw[:alen], port), offset


# ---- UNIQ_KEY (the client's message id, MessageClientIDSetter) ------------------------------

cdef unsigned char _uniq_prefix[16]   # ip (4/16) + pid (2) + random int (4)
cdef int _uniq_prefix_len = 0
cdef int64_t _month_start_ms = 0
cdef int64_t _next_month_ms = 0
cdef unsigned int _uniq_counter = 0


cdef void _init_uniq_prefix():
    global _uniq_prefix_len
    try:
        ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        ip = b"\x7f\x00\x00\x01"
    prefix = ip + (os.getpid() & 0xFFFF).to_bytes(2, "big") + random.getrandbits(32).to_bytes(4, "big")
    memcpy(_uniq_prefix, PyBytes_AS_STRING(prefix), len(prefix))
    _uniq_prefix_len = len(prefix)


cdef void _set_month(int64_t now_ms):
    global _month_start_ms, _next_month_ms
    t = time.localtime(now_ms / 1000.0)
    start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    nxt = time.mktime((t.tm_year + (t.tm_mon == 12), t.tm_mon % 12 + 1, 1, 0, 0, 0, 0, 0, -1))
    _month_start_ms = <int64_t>(start * 1000)
    _next_month_ms = <int64_t>(nxt * 1000)


def _reset_uniq_prefix():
    """Re-derive the per-process prefix (after fork, the pid changes)."""
    _init_uniq_prefix()


_init_uniq_prefix()
os.register_at_fork(after_in_child=_reset_uniq_prefix)


cdef inline int64_t _now_ms() noexcept nogil:
    """Wall-clock ms (the store timestamp), without a Python call."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef enum:
    UNIQ_HEX_MAX = 44     # hex of the longest UNIQ_KEY: a 16-byte prefix, time (4), counter (2)


cdef int _new_uniq_hex(int64_t now_ms, char* out):
    """A fresh UNIQ_KEY's hex text into out (UNIQ_HEX_MAX bytes); returns its length."""
    global _uniq_counter
    cdef unsigned char buf[22]
    if now_ms >= _next_month_ms or now_ms < _month_start_ms:
        _set_month(now_ms)
    memcpy(buf, _uniq_prefix, _uniq_prefix_len)
    rs_put_u32(<char*>buf + _uniq_prefix_len, <uint32_t>(now_ms - _month_start_ms))
    rs_put_u16(<char*>buf + _uniq_prefix_len + 4, <unsigned short>(_uniq_counter & 0xFFFF))
    _uniq_counter += 1
    _hex_into(buf, _uniq_prefix_len + 6, out)
    return 2 * (_uniq_prefix_len + 6)


def new_uniq_key():
    """A fresh UNIQ_KEY as RocketMQ's client makes it (32 hex characters for IPv4)."""
    cdef char out[UNIQ_HEX_MAX]
    cdef int n = _new_uniq_hex(_now_ms(), out)
    return PyUnicode_DecodeASCII(out, n, NULL)


# ---- Message -----------------------------------------------------------------------------------

cdef inline bint _topic_char_ok(Py_UCS4 c) noexcept:
    return (c >= c'a' and c <= c'z') or (c >= c'A' and c <= c'Z') or (c >= c'0' and c <= c'9') \
        or c == c'_' or c == c'-' or c == c'%' or c == c'|'


def validate_topic(topic):
    """RocketMQ's topic rule: 1..127 characters of [%|a-zA-Z0-9_-]. ValueError naming topic."""
    if not isinstance(topic, str):
        raise TypeError(f"topic must be str, got {type(topic).__name__}")
    cdef str t = topic
    cdef Py_ssize_t i, n = len(t)
    if n == 0:
        raise ValueError("topic must not be empty")
    if n > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic is {n} characters long; at most {MAX_TOPIC_LENGTH} are allowed")
    for i in range(n):
        if not _topic_char_ok(t[i]):
            raise ValueError(f"topic {t!r} has an illegal character {t[i]!r}; "
                             "allowed are letters, digits, '%', '|', '_' and '-'")


cdef _check_property_text(str what, object value):
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, got {type(value).__name__}")
    if "\x01" in value or "\x02" in value:
        raise ValueError(f"{what} {value!r} contains a separator character (\\x01 or \\x02)")
    if "\x00" in value:
        raise ValueError(f"{what} {value!r} contains NUL (recovery reads NUL-ended properties "
                         "as a torn record)")


cdef class Message:
    """A message to put. Properties hold every property (user and system, RocketMQ's map);
    tags, keys and uniq_key read and write their well-known entries.

    A UNIQ_KEY the put generates is kept as hex text in the object (no str, no dict insert
    on the put path) and enters the properties dict when they are next read: the message
    keeps that key, as RocketMQ's client keeps the one it sets, so a retried put repeats it."""
    cdef public str topic
    cdef public bytes body
    cdef dict _props
    cdef int _uniq_len                  # > 0: a generated UNIQ_KEY not yet in _props
    cdef char _uniq_hex[UNIQ_HEX_MAX]
    cdef public int flag
    cdef public object born_timestamp
    cdef public object born_host
    cdef public object store_host
    cdef public int sys_flag
    cdef public int reconsume_times
    cdef public long long prepared_transaction_offset

    def __init__(self, topic, body=b"", tags=None, keys=None, properties=None, int flag=0,
                 born_timestamp=None, born_host=None, *, store_host=None, int sys_flag=0,
                 int reconsume_times=0, long long prepared_transaction_offset=0,
                 delay_level=None, uniq_key=None):
        validate_topic(topic)
        self.topic = topic
        if isinstance(body, bytes):
            self.body = body
        elif isinstance(body, (bytearray, memoryview)):
            self.body = bytes(body)
        else:
            raise TypeError(f"body must be bytes-like, got {type(body).__name__}")
        props = {}
        if properties is not None:
            if not isinstance(properties, dict):
                raise TypeError(f"properties must be a dict, got {type(properties).__name__}")
            for name, value in properties.items():
                _check_property_text("property name", name)
                if name == "":
                    raise ValueError("property name must not be empty")
                _check_property_text(f"property {name!r}", value)
                if value == "":
                    raise ValueError(f"property {name!r} has an empty value "
                                     "(RocketMQ drops such pairs when reading)")
                props[name] = value
        self._props = props
        if tags is not None:
            self.tags = tags
        if keys is not None:
            self.keys = keys
        if uniq_key is not None:
            self.uniq_key = uniq_key
        if delay_level is not None:
            if not isinstance(delay_level, int) or isinstance(delay_level, bool) or delay_level < 0:
                raise ValueError(f"delay_level must be a non-negative int, got {delay_level!r}")
            if delay_level > 0:
                props["DELAY"] = str(delay_level)
        self.flag = flag
        if born_timestamp is not None and (not isinstance(born_timestamp, int) or born_timestamp < 0):
            raise ValueError(f"born_timestamp must be a non-negative int (ms), got {born_timestamp!r}")
        self.born_timestamp = born_timestamp
        if born_host is not None:
            parse_host(born_host)
        self.born_host = born_host
        if store_host is not None:
            parse_host(store_host)
        self.store_host = store_host
        if sys_flag & ~0xF:
            raise ValueError(f"sys_flag may only carry the compressed, multi-tags and transaction "
                             f"bits (0xF); the IPv6 bits are set by the store, got {sys_flag:#x}")
        self.sys_flag = sys_flag
        if reconsume_times < 0:
            raise ValueError(f"reconsume_times must be >= 0, got {reconsume_times}")
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset

    @property
    def properties(self):
        if self._uniq_len:
            self._settle_uniq_key()
        return self._props

    @properties.setter
    def properties(self, value):
        if value is not None and not isinstance(value, dict):
            raise TypeError(f"properties must be a dict, got {type(value).__name__}")
        self._props = {} if value is None else value
        self._uniq_len = 0

    cdef int _settle_uniq_key(self) except -1:
        """Put the generated UNIQ_KEY into the dict (unless the caller set one there since)."""
        if _UNIQ_KEY not in self._props:
            self._props[_UNIQ_KEY] = PyUnicode_DecodeASCII(self._uniq_hex, self._uniq_len, NULL)
        self._uniq_len = 0
        return 0

    @property
    def tags(self):
        return self._props.get(PROPERTY_TAGS)

    @tags.setter
    def tags(self, value):
        if value is None or value == "":
            self._props.pop(PROPERTY_TAGS, None)
            return
        _check_property_text("tags", value)
        self._props[PROPERTY_TAGS] = value

    @property
    def keys(self):
        """The KEYS tokens (the property is space-separated)."""
        value = self._props.get(PROPERTY_KEYS)
        return [k for k in value.split(" ") if k] if value else []

    @keys.setter
    def keys(self, value):
        if value is None:
            self._props.pop(PROPERTY_KEYS, None)
            return
        if isinstance(value, str):
            text = value
        elif isinstance(value, (list, tuple)):
            for k in value:
                _check_property_text("keys entry", k)
                if " " in k:
                    raise ValueError(f"keys entry {k!r} contains a space (the KEYS separator)")
            text = " ".join(value)
        else:
            raise TypeError(f"keys must be a str or a list of str, got {type(value).__name__}")
        _check_property_text("keys", text)
        if text.strip(" ") == "":
            self._props.pop(PROPERTY_KEYS, None)
        else:
            self._props[PROPERTY_KEYS] = text

    @property
    def uniq_key(self):
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @uniq_key.setter
    def uniq_key(self, value):
        self._uniq_len = 0
        if value is None:
            self._props.pop(PROPERTY_UNIQ_KEY, None)
            return
        _check_property_text("uniq_key", value)
        if value == "":
            raise ValueError("uniq_key must not be empty")
        self._props[PROPERTY_UNIQ_KEY] = value

    @property
    def delay_level(self):
        value = self._props.get("DELAY")
        return int(value) if value and value.isdigit() else 0

    def __repr__(self):
        return (f"Message(topic={self.topic!r}, body=<{len(self.body)} bytes>, "
                f"properties={self.properties!r}, flag={self.flag})")

    def __reduce__(self):
        return (_rebuild_message, (self.topic, self.body, self.properties, self.flag,
                                   self.born_timestamp, self.born_host, self.store_host,
                                   self.sys_flag, self.reconsume_times,
                                   self.prepared_transaction_offset))


def _rebuild_message(topic, body, properties, flag, born_timestamp, born_host, store_host,
                     sys_flag, reconsume_times, prepared_transaction_offset):
    return Message(topic, body, properties=properties, flag=flag, born_timestamp=born_timestamp,
                   born_host=born_host, store_host=store_host, sys_flag=sys_flag,
                   reconsume_times=reconsume_times,
                   prepared_transaction_offset=prepared_transaction_offset)


# ---- queue offsets (RocketMQ's topicQueueTable) ----------------------------------------------

# Queue ids index a per-topic array; RocketMQ topics have at most a few thousand queues.
cdef enum:
    _MAX_QID = 65535
MAX_QUEUE_ID = _MAX_QID

@cython.final
cdef class _QueueCounters:
    cdef int64_t* next
    cdef int n

    def __dealloc__(self):
        free(self.next)

    cdef int64_t* slot(self, int queue_id) except NULL:
        cdef int new_n, i
        cdef int64_t* grown
        if queue_id < 0 or queue_id > _MAX_QID:
            raise ValueError(f"queue_id must be in [0, {MAX_QUEUE_ID}], got {queue_id}")
        if queue_id >= self.n:
            new_n = max(queue_id + 1, self.n * 2, 8)
            grown = <int64_t*>realloc(self.next, new_n * sizeof(int64_t))
            if grown == NULL:
                raise MemoryError()
            for i in range(self.n, new_n):
                grown[i] = -1      # -1: queue not seen yet
            self.next = grown
            self.n = new_n
        return &self.next[queue_id]


cdef class TopicQueueTable:
    """Next logical offset of every (topic, queue id); only validated topics get an entry."""
    cdef dict topics
    cdef readonly int64_t version    # bumped when a topic's counters are dropped

    def __cinit__(self):
        self.topics = {}
        self.version = 0

    cdef _QueueCounters counters(self, str topic, bint validate=True):
        cdef object c = self.topics.get(topic)
        if c is None:
            if validate:
                validate_topic(topic)
            c = _QueueCounters()
            self.topics[topic] = c
        return <_QueueCounters>c

    def get(self, str topic, int queue_id):
        """Next queue offset of the queue (0 for a queue not seen)."""
        c = self.topics.get(topic)
        if c is None or queue_id >= (<_QueueCounters>c).n:
            return 0
        v = (<_QueueCounters>c).next[queue_id]
        return v if v >= 0 else 0

    def set(self, str topic, int queue_id, int64_t next_offset):
        if queue_id < 0 or next_offset < 0:
            raise ValueError("queue_id and next_offset must be >= 0")
        self.counters(topic).slot(queue_id)[0] = next_offset

    def remove(self, str topic):
        self.topics.pop(topic, None)
        self.version += 1

    def clear(self):
        self.topics.clear()
        self.version += 1

    def items(self):
        """(topic, queue_id, next_offset) of every queue seen, sorted."""
        out = []
        for topic, c in self.topics.items():
            for q in range((<_QueueCounters>c).n):
                if (<_QueueCounters>c).next[q] >= 0:
                    out.append((topic, q, (<_QueueCounters>c).next[q]))
        out.sort()
        return out

    def __len__(self):
        return len(self.items())


# ---- results -----------------------------------------------------------------------------------

cdef tuple _PUT_STATUS = None


cdef object _put_status(int code):
    global _PUT_STATUS
    if _PUT_STATUS is None:
        from rocketstore.message import PutMessageStatus
        _PUT_STATUS = tuple(PutMessageStatus)
    return _PUT_STATUS[code]


@cython.final
cdef class PutMessageResult:
    """Outcome of one put: status, where it went, and its ids."""
    cdef readonly int status_code
    cdef readonly int64_t commitlog_offset
    cdef readonly int64_t queue_offset
    cdef readonly int32_t wrote_bytes
    cdef readonly int64_t store_timestamp
    cdef object _uniq                   # the message's UNIQ_KEY as a str, or:
    cdef int _uniq_len                  # > 0: a generated one, as hex text (made a str on demand)
    cdef char _uniq_hex[UNIQ_HEX_MAX]
    cdef bytes store_host_raw
    cdef int32_t store_port

    @property
    def status(self):
        return _put_status(self.status_code)

    @property
    def ok(self):
        return self.status_code == PUT_OK

    @property
    def uniq_key(self):
        """The message's UNIQ_KEY (the client message id); None when nothing was stored."""
        if self._uniq_len:
            self._uniq = PyUnicode_DecodeASCII(self._uniq_hex, self._uniq_len, NULL)
            self._uniq_len = 0
        return self._uniq

    @property
    def msg_id(self):
        """offsetMsgId (store host:port + CommitLog offset, hex); None when nothing was stored."""
        if self.status_code != PUT_OK or self.store_host_raw is None:
            return None
        return _msg_id(<const unsigned char*>PyBytes_AS_STRING(self.store_host_raw),
                       PyBytes_GET_SIZE(self.store_host_raw), self.store_port,
                       self.commitlog_offset)

    def __repr__(self):
        return (f"PutMessageResult(status={self.status.name}, msg_id={self.msg_id}, "
                f"commitlog_offset={self.commitlog_offset}, queue_offset={self.queue_offset}, "
                f"wrote_bytes={self.wrote_bytes})")


def put_result(int status_code):
    """A result carrying only a status (a put that stored nothing)."""
    return _status_result(status_code)


def with_status(PutMessageResult res not None, int status_code):
    """The same stored message reported with another status (FLUSH_DISK_TIMEOUT ...)."""
    res.status_code = status_code
    return res


def rejected_batch(Py_ssize_t count, int status_code):
    """A batch of count messages of which none was stored."""
    cdef PutMessagesResult res = PutMessagesResult.__new__(PutMessagesResult)
    res.count = count
    res.stored = 0
    res.status_code = status_code
    return res


def fail_batch(PutMessagesResult res not None, int status_code):
    """Mark a batch cut short: res.stored messages went in, the rest get status_code."""
    res.status_code = status_code
    return res


cdef PutMessageResult _status_result(int code):
    cdef PutMessageResult r = PutMessageResult.__new__(PutMessageResult)
    r.status_code = code
    r.commitlog_offset = -1
    r.queue_offset = -1
    return r


@cython.final
cdef class PutMessagesResult:
    """Outcome of a batch put: one status and, per message, offsets and ids (a sequence of
    PutMessageResult built on demand; the offsets are also numpy arrays)."""
    cdef readonly int status_code
    cdef readonly Py_ssize_t count      # messages in the batch
    cdef readonly Py_ssize_t stored     # how many were stored (== count when status is PUT_OK)
    cdef readonly object commitlog_offsets   # int64 array
    cdef readonly object queue_offsets       # int64 array
    cdef readonly object sizes               # int32 array
    cdef readonly int64_t store_timestamp
    cdef list messages      # the batch: UNIQ_KEYs are read from it on demand
    cdef bytes store_host_raw
    cdef int32_t store_port

    @property
    def status(self):
        return _put_status(self.status_code)

    @property
    def ok(self):
        return self.status_code == PUT_OK

    @property
    def wrote_bytes(self):
        return int(self.sizes[:self.stored].sum()) if self.sizes is not None else 0

    @property
    def msg_ids(self):
        return [self[i].msg_id for i in range(self.stored)]

    def __len__(self):
        return self.count

    def __getitem__(self, Py_ssize_t i):
        cdef PutMessageResult r
        if i < 0:
            i += self.count
        if i < 0 or i >= self.count:
            raise IndexError("batch result index out of range")
        if i >= self.stored:
            return _status_result(self.status_code if self.status_code != PUT_OK else 9)
        r = PutMessageResult.__new__(PutMessageResult)
        # stored messages keep PUT_OK unless the batch's status concerns them all (a flush
        # or replication timeout); a batch cut short fails only the unstored rest
        r.status_code = self.status_code if self.stored == self.count else PUT_OK
        r.commitlog_offset = self.commitlog_offsets[i]
        r.queue_offset = self.queue_offsets[i]
        r.wrote_bytes = self.sizes[i]
        r.store_timestamp = self.store_timestamp
        r._uniq = (<Message>self.messages[i]).uniq_key if self.messages is not None else None
        r.store_host_raw = self.store_host_raw
        r.store_port = self.store_port
        return r

    def __iter__(self):
        for i in range(self.count):
            yield self[i]

    def __repr__(self):
        return f"PutMessagesResult(status={self.status.name}, count={self.count}, stored={self.stored})"


# ---- encoding ----------------------------------------------------------------------------------

cdef struct Slice:
    const char* p
    Py_ssize_t n

cdef struct RecordSpec:
    int32_t total
    int32_t queue_id
    int32_t flag
    int32_t sys_flag
    int32_t reconsume
    int64_t born_ts           # -1: the store timestamp
    int64_t prepared_off
    const char* body
    int32_t body_len
    const char* topic
    int32_t topic_len
    int32_t props_len
    Py_ssize_t slice_first
    Py_ssize_t slice_count    # name, value, name, value ...
    unsigned char born_host[16]
    int32_t born_host_len
    int32_t born_port
    unsigned char store_host[16]
    int32_t store_host_len
    int32_t store_port
    bint counted              # gets a queue offset (not prepared/rollback)
    PyObject* counters        # the topic's _QueueCounters (kept alive by the queue table);
                              # not a pointer into its array, which a later spec may grow


cdef inline void _write_record(char* dst, const RecordSpec* s, const Slice* slices,
                               int64_t phy_offset, int64_t queue_offset,
                               int64_t store_ts) noexcept nogil:
    cdef char* p = dst
    cdef Py_ssize_t i
    cdef uint32_t crc = rs_crc32(0, s.body, s.body_len) & 0x7FFFFFFF
    # TOTALSIZE and MAGICCODE go in last (see the end): until then the record reads as
    # "no data" (zeros), never as a valid header over a partial record
    rs_put_u32(p + 8, crc)
    rs_put_u32(p + 12, s.queue_id)
    rs_put_u32(p + 16, s.flag)
    rs_put_u64(p + 20, queue_offset)
    rs_put_u64(p + 28, phy_offset)
    rs_put_u32(p + 36, s.sys_flag)
    rs_put_u64(p + 40, s.born_ts if s.born_ts >= 0 else store_ts)
    p += 48
    memcpy(p, s.born_host, s.born_host_len)
    rs_put_u32(p + s.born_host_len, s.born_port)
    p += s.born_host_len + 4
    rs_put_u64(p, store_ts)
    p += 8
    memcpy(p, s.store_host, s.store_host_len)
    rs_put_u32(p + s.store_host_len, s.store_port)
    p += s.store_host_len + 4
    rs_put_u32(p, s.reconsume)
    rs_put_u64(p + 4, s.prepared_off)
    rs_put_u32(p + 12, s.body_len)
    p += 16
    memcpy(p, s.body, s.body_len)
    p += s.body_len
    p[0] = <char>s.topic_len
    memcpy(p + 1, s.topic, s.topic_len)
    p += 1 + s.topic_len
    rs_put_u16(p, <unsigned short>s.props_len)
    p += 2
    for i in range(s.slice_first, s.slice_first + s.slice_count):
        if i > s.slice_first:
            p[0] = 2 if (i - s.slice_first) % 2 == 0 else 1
            p += 1
        memcpy(p, slices[i].p, slices[i].n)
        p += slices[i].n
    rs_release_fence()
    rs_put_u32(dst + 4, MESSAGE_MAGIC)
    rs_put_u32(dst, s.total)


cdef inline const char* _text(object s, Py_ssize_t* n) except NULL:
    """UTF-8 bytes of a str: ASCII strings are their own UTF-8 (no call, no cache)."""
    if PyUnicode_IS_COMPACT_ASCII(s):
        n[0] = PyUnicode_GET_LENGTH(s)
        return <const char*>PyUnicode_DATA(s)
    return PyUnicode_AsUTF8AndSize(s, n)


cdef str _where(Py_ssize_t index):
    """Error-message prefix naming the batch entry (built only when raising)."""
    return "" if index < 0 else f"messages[{index}]."


@cython.final
cdef class RecordWriter:
    """Encodes messages into CommitLog MappedFiles and owns the topic queue table.

    The CommitLog calls it under its put lock; it never rolls files itself: when a record
    does not fit it writes the END_FILE blank and reports end-of-file."""
    cdef readonly TopicQueueTable queue_table
    cdef readonly int64_t file_size
    cdef readonly int64_t max_message_size
    cdef bytes store_host_raw
    cdef int32_t store_port
    cdef int32_t default_born_port
    cdef Slice* slices
    cdef Py_ssize_t slices_cap
    cdef RecordSpec* specs
    cdef Py_ssize_t specs_cap
    cdef readonly str store_host
    cdef unsigned char store_host_c[16]     # the raw hosts above, for a memcpy per record
    cdef int32_t store_host_len
    cdef unsigned char default_born_c[16]
    cdef int32_t default_born_len
    cdef str last_topic                     # _counters' one-entry cache
    cdef _QueueCounters last_counters
    cdef int64_t last_version

    def __cinit__(self):
        self.slices = NULL
        self.specs = NULL

    def __init__(self, int64_t file_size, int64_t max_message_size, str store_host,
                 TopicQueueTable queue_table=None):
        if file_size < 64:
            raise ValueError(f"file_size must be >= 64 bytes, got {file_size}")
        if max_message_size <= 0:
            raise ValueError(f"max_message_size must be positive, got {max_message_size}")
        self.file_size = file_size
        self.max_message_size = max_message_size
        self.store_host = store_host
        raw, port = parse_host(store_host)
        self.store_host_raw = raw
        self.store_port = port
        self.default_born_port = port
        self.store_host_len = self.default_born_len = <int32_t>len(raw)
        memcpy(self.store_host_c, PyBytes_AS_STRING(raw), self.store_host_len)
        memcpy(self.default_born_c, PyBytes_AS_STRING(raw), self.default_born_len)
        self.queue_table = queue_table if queue_table is not None else TopicQueueTable()
        self._grow_slices(64)
        self._grow_specs(1)

    def __dealloc__(self):
        free(self.slices)
        free(self.specs)

    cdef int _grow_slices(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = max(need, self.slices_cap * 2)
        cdef Slice* s = <Slice*>realloc(self.slices, cap * sizeof(Slice))
        if s == NULL:
            raise MemoryError()
        self.slices = s
        self.slices_cap = cap
        return 0

    cdef int _grow_specs(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = max(need, self.specs_cap * 2)
        cdef RecordSpec* s = <RecordSpec*>realloc(self.specs, cap * sizeof(RecordSpec))
        if s == NULL:
            raise MemoryError()
        self.specs = s
        self.specs_cap = cap
        return 0

    cdef inline int _host(self, object host, unsigned char* raw_out, int32_t* len_out,
                          int32_t* port_out, bint born) except -1:
        cdef bytes raw
        if host is None and born:       # the store's own host (a memcpy: the common case)
            len_out[0] = self.default_born_len
            memcpy(raw_out, self.default_born_c, len_out[0])
            port_out[0] = self.default_born_port
            return 0
        if host is None:
            len_out[0] = self.store_host_len
            memcpy(raw_out, self.store_host_c, len_out[0])
            port_out[0] = self.store_port
            return 0
        raw, port = parse_host(host)
        port_out[0] = port
        len_out[0] = PyBytes_GET_SIZE(raw)
        memcpy(raw_out, PyBytes_AS_STRING(raw), len_out[0])
        return 0

    cdef _QueueCounters _counters(self, str topic):
        """The topic's queue counters; the last topic's are cached (one pointer compare per
        put instead of a dict lookup), invalidated when the table drops counters."""
        if topic is not self.last_topic or self.last_version != self.queue_table.version:
            self.last_counters = self.queue_table.counters(topic)    # validates a new topic
            self.last_topic = topic
            self.last_version = self.queue_table.version
        return self.last_counters

    cdef int _prepare(self, Message msg, int queue_id, RecordSpec* s, Py_ssize_t* slice_pos,
                      int64_t now_ms, Py_ssize_t index) except -1:
        """Fill s for msg; returns PUT_OK or a status code. Raises for bad arguments."""
        cdef Py_ssize_t pos = 0, n, props_len = 0, nprops
        cdef PyObject* key
        cdef PyObject* value
        cdef dict props
        cdef Slice* sl
        cdef _QueueCounters counters
        if queue_id < 0 or queue_id > _MAX_QID:
            raise ValueError(f"{_where(index)}queue_id must be in [0, {_MAX_QID}], "
                             f"got {queue_id}")
        counters = self._counters(msg.topic)
        counters.slot(queue_id)                             # grow it now, while preparing
        s.counters = <PyObject*>counters
        if msg.body is None:
            raise TypeError(f"{_where(index)}body must be bytes, got None")
        s.body = PyBytes_AS_STRING(msg.body)
        s.body_len = <int32_t>PyBytes_GET_SIZE(msg.body)
        if PyBytes_GET_SIZE(msg.body) > self.max_message_size:
            return MESSAGE_ILLEGAL
        s.topic = _text(msg.topic, &n)
        s.topic_len = <int32_t>n
        props = msg._props
        if props is None:
            props = msg._props = {}
        if PyDict_Contains(props, _UNIQ_KEY):
            msg._uniq_len = 0       # set in the dict since one was generated: the dict's wins
        elif msg._uniq_len == 0:    # none yet: generate one, written after the dict's pairs
            msg._uniq_len = _new_uniq_hex(now_ms, msg._uniq_hex)
        nprops = len(props) + (msg._uniq_len > 0)
        if slice_pos[0] + 2 * nprops > self.slices_cap:
            self._grow_slices(slice_pos[0] + 2 * nprops)
        s.slice_first = slice_pos[0]
        s.slice_count = 2 * nprops
        sl = self.slices + slice_pos[0]
        if msg._uniq_len:
            # the pair goes last, where inserting it into the dict used to put it; both
            # texts are ASCII without separators (a constant and hex digits)
            sl[2 * nprops - 2].p = _UNIQ_KEY_C
            sl[2 * nprops - 2].n = 8
            sl[2 * nprops - 1].p = msg._uniq_hex
            sl[2 * nprops - 1].n = msg._uniq_len
            props_len += 8 + msg._uniq_len + 2
        while PyDict_Next(props, &pos, &key, &value):
            if type(<object>key) is not str or type(<object>value) is not str:
                _check_property_text(f"{_where(index)}property name", <object>key)
                _check_property_text(f"{_where(index)}property {<object>key!r}", <object>value)
            sl[0].p = _text(<object>key, &sl[0].n)
            sl[1].p = _text(<object>value, &sl[1].n)
            if sl[0].n == 0:
                raise ValueError(f"{_where(index)}property name must not be empty")
            if sl[1].n == 0:
                raise ValueError(f"{_where(index)}property {<object>key!r} has an empty value")
            if rs_has_byte_below3(sl[0].p, sl[0].n) or rs_has_byte_below3(sl[1].p, sl[1].n):
                raise ValueError(f"{_where(index)}property {<object>key!r} contains a separator "
                                 "character (\\x01 or \\x02) or NUL")
            props_len += sl[0].n + sl[1].n + 2
            sl += 2
        slice_pos[0] += 2 * nprops
        if nprops > 0:
            props_len -= 1      # no trailing \x02, as RocketMQ 4.9.8 writes
        if props_len > MAX_PROPERTIES_LENGTH:
            return PROPERTIES_SIZE_EXCEEDED
        s.props_len = <int32_t>props_len
        s.queue_id = queue_id
        s.flag = msg.flag
        s.reconsume = msg.reconsume_times
        s.prepared_off = msg.prepared_transaction_offset
        if msg.born_timestamp is None:
            s.born_ts = -1
        else:
            s.born_ts = msg.born_timestamp
        self._host(msg.born_host, s.born_host, &s.born_host_len, &s.born_port, True)
        self._host(msg.store_host, s.store_host, &s.store_host_len, &s.store_port, False)
        s.sys_flag = msg.sys_flag & 0xF
        if s.born_host_len == 16:
            s.sys_flag |= SYSFLAG_BORNHOST_V6
        if s.store_host_len == 16:
            s.sys_flag |= SYSFLAG_STOREHOST_V6
        tran = s.sys_flag & SYSFLAG_TRANSACTION_MASK
        s.counted = tran != SYSFLAG_PREPARED and tran != SYSFLAG_ROLLBACK
        s.total = (MIN_RECORD_SIZE + s.body_len + s.topic_len + s.props_len
                   + (s.born_host_len - 4) + (s.store_host_len - 4))
        if s.total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return MESSAGE_ILLEGAL    # larger than a whole CommitLog file
        return PUT_OK

    cdef inline void _write_blank(self, MappedFile mf) noexcept:
        cdef int64_t remaining = mf.file_size - mf.wrote_pos
        if remaining >= 8:
            rs_put_u32(mf.wbase + mf.wrote_pos, <uint32_t>remaining)
            rs_put_u32(mf.wbase + mf.wrote_pos + 4, BLANK_MAGIC)
        elif remaining > 0:
            memset(mf.wbase + mf.wrote_pos, 0, remaining)
        mf.wrote_pos = mf.file_size

    def append(self, MappedFile mf not None, Message message not None, int queue_id):
        """Encode one message at mf's write position.

        Returns a PutMessageResult, or None when it did not fit: the END_FILE blank was
        written and the caller must roll to the next file and call again."""
        return self._append(mf, message, queue_id)

    cdef object _append(self, MappedFile mf, Message message, int queue_id):
        cdef RecordSpec* s = self.specs
        cdef Py_ssize_t slice_pos = 0
        cdef int64_t now_ms = _now_ms()
        cdef int64_t phy, qoff
        cdef int64_t* slot
        cdef int code
        cdef PutMessageResult r
        if mf.read_only or not mf.available:
            raise ValueError(f"mapped file {mf.file_name} is not writable")
        code = self._prepare(message, queue_id, s, &slice_pos, now_ms, -1)
        if code != PUT_OK:
            return _status_result(code)
        if mf.wrote_pos + s.total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            self._write_blank(mf)
            return None
        phy = mf.file_from_offset + mf.wrote_pos
        slot = &(<_QueueCounters>s.counters).next[s.queue_id]
        qoff = 0
        if s.counted:
            qoff = slot[0] if slot[0] >= 0 else 0
        if s.total >= 16384:
            with nogil:
                _write_record(mf.wbase + mf.wrote_pos, s, self.slices, phy, qoff, now_ms)
        else:   # releasing the GIL costs more than copying a small record
            _write_record(mf.wbase + mf.wrote_pos, s, self.slices, phy, qoff, now_ms)
        mf.wrote_pos += s.total
        mf.store_ts = now_ms
        if s.counted:
            slot[0] = qoff + 1
        elif slot[0] < 0:
            slot[0] = 0
        r = PutMessageResult.__new__(PutMessageResult)
        r.status_code = PUT_OK
        r.commitlog_offset = phy
        r.queue_offset = qoff
        r.wrote_bytes = s.total
        r.store_timestamp = now_ms
        if message._uniq_len:
            r._uniq_len = message._uniq_len
            memcpy(r._uniq_hex, message._uniq_hex, message._uniq_len)
        else:
            r._uniq = message._props.get(_UNIQ_KEY)
        r.store_host_raw = self.store_host_raw if message.store_host is None else None
        r.store_port = self.store_port
        if message.store_host is not None:
            raw, port = parse_host(message.store_host)
            r.store_host_raw = raw
            r.store_port = port
        return r

    def prepare_batch(self, list messages not None, queue_ids):
        """Validate a whole batch (nothing is written). Returns a PutMessagesResult that
        write_batch fills; its status is not PUT_OK when the batch is rejected as a whole."""
        cdef Py_ssize_t i, count = len(messages), slice_pos = 0
        cdef int64_t now_ms = _now_ms()
        cdef int code, qid = 0
        cdef bint one_qid = isinstance(queue_ids, int)
        cdef PutMessagesResult res = PutMessagesResult.__new__(PutMessagesResult)
        if not one_qid:
            if not isinstance(queue_ids, (list, tuple)):
                raise TypeError("queue_ids must be an int or a list of int, one per message")
            if len(queue_ids) != count:
                raise ValueError(f"queue_ids has {len(queue_ids)} entries for {count} messages")
        else:
            qid = queue_ids
        if count > self.specs_cap:
            self._grow_specs(count)
        res.count = count
        res.stored = 0
        res.store_timestamp = now_ms
        res.status_code = PUT_OK
        for i in range(count):
            msg = messages[i]
            if not isinstance(msg, Message):
                raise TypeError(f"messages[{i}] must be a Message, got {type(msg).__name__}")
            if not one_qid:
                q = queue_ids[i]
                if not isinstance(q, int):
                    raise TypeError(f"queue_ids[{i}] must be an int")
                qid = q
            code = self._prepare(<Message>msg, qid, &self.specs[i], &slice_pos, now_ms, i)
            if code != PUT_OK:
                res.status_code = code
                return res
        res.commitlog_offsets = np.empty(count, dtype=np.int64)
        res.queue_offsets = np.empty(count, dtype=np.int64)
        res.sizes = np.empty(count, dtype=np.int32)
        res.store_host_raw = self.store_host_raw
        res.store_port = self.store_port
        res.messages = messages
        return res

    def write_batch(self, MappedFile mf not None, PutMessagesResult res not None):
        """Write the prepared batch from res.stored on, as far as mf has room.

        Returns True when the batch is complete, False when the END_FILE blank was written
        and the rest must go into the next file. Must follow prepare_batch with no other
        call of this writer in between (the caller's put lock guarantees it)."""
        cdef Py_ssize_t i, start = res.stored, count = res.count
        cdef int64_t[::1] phys = res.commitlog_offsets
        cdef int64_t[::1] qoffs = res.queue_offsets
        cdef int32_t[::1] sizes = res.sizes
        cdef RecordSpec* s
        cdef int64_t pos = mf.wrote_pos, end_pos, qoff
        cdef int64_t ts = res.store_timestamp
        cdef int64_t* slot
        cdef bint full = False
        cdef Py_ssize_t stop
        if mf.read_only or not mf.available:
            raise ValueError(f"mapped file {mf.file_name} is not writable")
        # Assign positions and queue offsets (cheap, GIL held), then copy without the GIL.
        i = start
        while i < count:
            s = &self.specs[i]
            if pos + s.total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                full = True
                break
            phys[i] = mf.file_from_offset + pos
            sizes[i] = s.total
            slot = &(<_QueueCounters>s.counters).next[s.queue_id]
            if s.counted:
                qoff = slot[0] if slot[0] >= 0 else 0
                slot[0] = qoff + 1
            else:
                qoff = 0
                if slot[0] < 0:
                    slot[0] = 0
            qoffs[i] = qoff
            pos += s.total
            i += 1
        stop = i
        pos = mf.wrote_pos
        with nogil:
            for i in range(start, stop):
                _write_record(mf.wbase + pos, &self.specs[i], self.slices, phys[i], qoffs[i], ts)
                pos += self.specs[i].total
        mf.wrote_pos = pos
        if stop > start:
            mf.store_ts = ts
        res.stored = stop
        if full:
            self._write_blank(mf)
            return False
        return True

    def write_blank(self, MappedFile mf not None):
        """Close mf with an END_FILE blank at its write position."""
        self._write_blank(mf)


# ---- the put path ------------------------------------------------------------------------------

@cython.final
cdef class PutLock:
    """The CommitLog's put lock (RocketMQ's putMessageLock), usable from C and as a Python
    context manager. Blocking waits release the GIL: the holder may be copying a batch
    without it and needs it back to finish."""
    cdef PyThread_type_lock lock

    def __cinit__(self):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError()

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef inline void take(self) noexcept:
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)

    cdef inline void give(self) noexcept:
        PyThread_release_lock(self.lock)

    def acquire(self):
        self.take()
        return True

    def release(self):
        self.give()

    def __enter__(self):
        self.take()
        return self

    def __exit__(self, *exc):
        self.give()
        return False


@cython.final
cdef class PutPath:
    """CommitLog.put_message's fast path: one call takes the put lock, appends to the cached
    last file and builds the result, with no Python frame. The CommitLog supplies the slow
    path (roll to a new file, closed log), called under the lock as slow(message, queue_id),
    and an optional after(result, message) hook run after the lock (SYNC_FLUSH waits there)."""
    cdef readonly PutLock lock
    cdef readonly RecordWriter writer
    cdef public MappedFile file     # where appends go; None: take the slow path
    cdef public object slow
    cdef public object after

    def __init__(self, RecordWriter writer not None, slow):
        self.lock = PutLock()
        self.writer = writer
        self.file = None
        self.slow = slow
        self.after = None

    def __call__(self, Message message not None, int queue_id=0):
        cdef object result = None
        self.lock.take()
        try:
            if self.file is not None:
                result = self.writer._append(self.file, message, queue_id)
            if result is None:          # the file filled up (END_FILE written) or none yet
                result = self.slow(message, queue_id)
        finally:
            self.lock.give()
        if self.after is None:
            return result
        return self.after(result, message)


# ---- decoding ----------------------------------------------------------------------------------

# record_layout and check_record are inline, in codec.pxd (the decoders inline them).


class CorruptRecordError(ValueError):
    """A record that fails validation (bad magic, lengths, CRC); .offset says where."""

    def __init__(self, message, offset=None):
        super().__init__(message if offset is None else f"{message} at offset {offset}")
        self.offset = offset


@cython.final
cdef class MessageExt:
    """A stored message decoded from its record; body and raw fields are zero-copy views."""
    cdef readonly object record        # memoryview of the whole record (pins its file)
    cdef readonly str topic
    cdef readonly int32_t queue_id
    cdef readonly int64_t queue_offset
    cdef readonly int64_t commitlog_offset
    cdef readonly int32_t store_size
    cdef readonly int32_t body_crc
    cdef readonly int32_t flag
    cdef readonly int32_t sys_flag
    cdef readonly int64_t born_timestamp
    cdef readonly int64_t store_timestamp
    cdef readonly int32_t reconsume_times
    cdef readonly int64_t prepared_transaction_offset
    cdef RecordInfo info
    cdef dict _props

    @property
    def body(self):
        return self.record[self.info.body_offset:self.info.body_offset + self.info.body_len]

    @property
    def properties_string(self):
        cdef const unsigned char[::1] v = self.record
        return PyUnicode_DecodeUTF8(<const char*>&v[0] + self.info.props_offset,
                                    self.info.props_len, "replace")

    @property
    def properties(self):
        """Parsed as RocketMQ's string2messageProperties (empty values dropped)."""
        if self._props is None:
            props = {}
            text = self.properties_string
            if text:
                for pair in text.split("\x02"):
                    name, sep, value = pair.partition("\x01")
                    if sep and name and value:
                        props[name] = value
            self._props = props
        return self._props

    @property
    def tags(self):
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self):
        value = self.properties.get(PROPERTY_KEYS)
        return [k for k in value.split(" ") if k] if value else []

    @property
    def uniq_key(self):
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def tags_code(self):
        cdef const unsigned char[::1] v = self.record
        return tags_code_of(<const char*>&v[0] + self.info.props_offset, self.info.props_len)

    cdef tuple _host_at(self, int32_t off, int32_t alen):
        cdef const unsigned char[::1] v = self.record
        cdef const char* p = <const char*>&v[0] + off
        return (PyBytes_FromStringAndSize(p, alen), <int32_t>rs_get_i32(p + alen))

    @property
    def born_host(self):
        raw, port = self._host_at(48, self.info.born_host_len)
        return format_host(raw, port)

    @property
    def store_host(self):
        raw, port = self._host_at(self.info.store_ts_offset + 8, self.info.store_host_len)
        return format_host(raw, port)

    @property
    def msg_id(self):
        raw, port = self._host_at(self.info.store_ts_offset + 8, self.info.store_host_len)
        return _msg_id(<const unsigned char*>PyBytes_AS_STRING(raw), len(raw), port,
                       self.commitlog_offset)

    @property
    def transaction_type(self):
        return self.sys_flag & SYSFLAG_TRANSACTION_MASK

    def to_dict(self, bint body_b64=True):
        """The fields with the names of the RocketMQ fixture's messages.jsonl."""
        import base64
        d = {
            "topic": self.topic, "queueId": self.queue_id, "queueOffset": self.queue_offset,
            "commitLogOffset": self.commitlog_offset, "storeSize": self.store_size,
            "msgId": self.msg_id, "tags": self.tags, "tagsCode": self.tags_code,
            "keys": self.properties.get(PROPERTY_KEYS), "uniqKey": self.uniq_key,
            "properties": dict(sorted(self.properties.items())),
            "propertiesString": self.properties_string, "bodyCRC": self.body_crc,
            "bodyLen": self.info.body_len, "flag": self.flag, "sysFlag": self.sys_flag,
            "reconsumeTimes": self.reconsume_times,
            "preparedTransactionOffset": self.prepared_transaction_offset,
            "bornTimestamp": self.born_timestamp, "bornHost": self.born_host,
            "storeTimestamp": self.store_timestamp, "storeHost": self.store_host,
        }
        if body_b64:
            d["body_b64"] = base64.b64encode(self.body).decode("ascii")
        else:
            d["body"] = bytes(self.body)
        return d

    def __repr__(self):
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, commitlog_offset={self.commitlog_offset}, "
                f"store_size={self.store_size})")


cdef MessageExt _decode(object record, const char* p, RecordInfo info):
    cdef MessageExt m = MessageExt.__new__(MessageExt)
    m.record = record
    m.info = info
    m.topic = PyUnicode_DecodeUTF8(p + info.topic_offset, info.topic_len, "replace")
    m.queue_id = info.queue_id
    m.queue_offset = info.queue_offset
    m.commitlog_offset = info.phy_offset
    m.store_size = info.size
    m.body_crc = rs_get_i32(p + 8)
    m.flag = rs_get_i32(p + 16)
    m.sys_flag = info.sys_flag
    m.born_timestamp = rs_get_i64(p + 40)
    m.store_timestamp = info.store_ts
    m.reconsume_times = rs_get_i32(p + info.store_ts_offset + 8 + info.store_host_len + 4)
    m.prepared_transaction_offset = rs_get_i64(p + info.store_ts_offset + 8 + info.store_host_len + 8)
    return m


def decode_message(buffer, Py_ssize_t pos=0, *, bint check_crc=False):
    """Decode the record at pos of a buffer. Raises CorruptRecordError if it is not a valid
    message record (an END_FILE blank or end of data included)."""
    cdef const unsigned char[::1] v = buffer
    cdef Py_ssize_t n = v.shape[0]
    cdef const char* p
    cdef RecordInfo info
    if pos < 0 or pos > n:
        raise ValueError(f"pos {pos} outside the buffer of {n} bytes")
    if n == pos:
        raise CorruptRecordError("no record (end of data)", pos)
    p = <const char*>&v[0] + pos
    info = check_record(p, n - pos, check_crc, -1)
    if info.status != REC_OK:
        raise CorruptRecordError(_status_text(info), pos)
    mv = memoryview(buffer)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    return _decode(mv[pos:pos + info.size], p, info)


cdef str _status_text(RecordInfo info):
    if info.status == REC_BLANK:
        return "an END_FILE blank, not a message"
    if info.status == REC_END:
        return "no record (end of data)"
    return (<bytes>info.reason).decode() if info.reason != NULL else "corrupt record"


def decode_at(MappedFile mf not None, int64_t pos, *, bint check_crc=False):
    """Decode the record at pos of a MappedFile into a MessageExt whose views pin the file."""
    cdef RecordInfo info
    cdef int64_t limit
    if not mf.hold():
        raise ValueError(f"mapped file {mf.file_name} is being destroyed")
    try:
        limit = mf.read_limit()
        if pos < 0 or pos >= limit:
            raise ValueError(f"position {pos} outside the written part [0, {limit}) "
                             f"of {mf.file_name}")
        info = check_record(mf.base + pos, limit - pos, check_crc, -1)
        if info.status != REC_OK:
            raise CorruptRecordError(_status_text(info), mf.file_from_offset + pos)
        return _decode(mf.view(pos, info.size), mf.base + pos, info)
    finally:
        mf.release()


def record_status(buffer, Py_ssize_t pos=0, *, bint check_crc=True, int64_t expected_phy=-1):
    """(status, size, reason) of the record at pos: status 'ok', 'blank', 'end' or 'corrupt'."""
    cdef const unsigned char[::1] v = buffer
    cdef Py_ssize_t n = v.shape[0]
    cdef RecordInfo info
    if pos < 0 or pos > n:
        raise ValueError(f"pos {pos} outside the buffer of {n} bytes")
    if pos == n:
        return ("end", 0, None)
    info = check_record(<const char*>&v[0] + pos, n - pos, check_crc, expected_phy)
    return (_STATUS_NAMES[info.status], info.size,
            None if info.status == REC_OK else _status_text(info))


_STATUS_NAMES = ("ok", "blank", "end", "corrupt")


@cython.final
cdef class ScanResult:
    """Records found by scan_region: arrays of (file-relative) offsets and sizes, and why and
    where the scan stopped (stop_status: 'end', 'blank', 'corrupt' or 'limit')."""
    cdef readonly object offsets
    cdef readonly object sizes
    cdef readonly object store_timestamps
    cdef readonly str stop_status
    cdef readonly int64_t stop_position
    cdef readonly object reason

    def __len__(self):
        return len(self.offsets)

    def __iter__(self):
        for o, s in zip(self.offsets.tolist(), self.sizes.tolist()):
            yield (o, s, "ok")

    def __repr__(self):
        return (f"ScanResult({len(self.offsets)} records, stop={self.stop_status} "
                f"at {self.stop_position})")


def scan_region(buffer, int64_t start=0, int64_t end=-1, *, bint check_crc=True,
                int64_t base_offset=-1, Py_ssize_t max_records=-1):
    """Walk records from start until end (default: the buffer's end), a blank, the end of
    data, a corrupt record or max_records. With base_offset >= 0 each record's PHYSICALOFFSET
    must equal base_offset + its position. Works on bytes or on MappedFile (up to its
    readable position). Never reads outside the buffer."""
    cdef const unsigned char[::1] v
    cdef const char* p
    cdef int64_t n, pos
    cdef RecordInfo info
    cdef Py_ssize_t count = 0, cap
    cdef MappedFile mf = None
    cdef ScanResult res = ScanResult.__new__(ScanResult)
    if isinstance(buffer, MappedFile):
        mf = <MappedFile>buffer
        if not mf.hold():
            raise ValueError(f"mapped file {mf.file_name} is being destroyed")
        p = mf.base
        n = mf.read_limit()
    else:
        v = buffer
        n = v.shape[0]
        p = <const char*>&v[0] if n > 0 else NULL
    try:
        if end < 0 or end > n:
            end = n
        if start < 0 or start > end:
            raise ValueError(f"start {start} outside [0, {end}]")
        cap = (end - start) // MIN_RECORD_SIZE + 1
        if max_records >= 0 and max_records < cap:
            cap = max_records
        offsets = np.empty(cap, dtype=np.int64)
        sizes = np.empty(cap, dtype=np.int32)
        stamps = np.empty(cap, dtype=np.int64)
        _scan(p, start, end, check_crc, base_offset, cap, offsets, sizes, stamps, &count, &info,
              &pos)
        res.offsets = offsets[:count]
        res.sizes = sizes[:count]
        res.store_timestamps = stamps[:count]
        res.stop_position = pos
        if count == cap and info.status == REC_OK:
            res.stop_status = "limit"
        elif pos >= end and info.status == REC_OK:
            res.stop_status = "end"
        else:
            res.stop_status = _STATUS_NAMES[info.status]
            res.reason = None if info.status in (REC_OK, REC_END) else _status_text(info)
        return res
    finally:
        if mf is not None:
            mf.release()


cdef void _scan(const char* p, int64_t start, int64_t end, bint check_crc, int64_t base_offset,
                Py_ssize_t cap, int64_t[::1] offsets, int32_t[::1] sizes, int64_t[::1] stamps,
                Py_ssize_t* count_out, RecordInfo* info_out, int64_t* pos_out) noexcept:
    cdef int64_t pos = start
    cdef Py_ssize_t count = 0
    cdef RecordInfo info
    info.status = REC_OK
    with nogil:
        while pos < end and count < cap:
            info = check_record(p + pos, end - pos, check_crc,
                                base_offset + pos if base_offset >= 0 else -1)
            if info.status != REC_OK:
                break
            offsets[count] = pos
            sizes[count] = info.size
            stamps[count] = info.store_ts
            count += 1
            pos += info.size
    count_out[0] = count
    info_out[0] = info
    pos_out[0] = pos



# ---- dispatch (ReputMessageService) --------------------------------------------------------

@cython.final
cdef class DispatchBatch:
    """Records decoded for dispatch, as columns: what the ConsumeQueue, IndexFile and arrival
    listeners need, without a Python object per record. Positions are relative to
    mapped_file; topics[topic_ids[i]] is record i's topic."""
    cdef readonly MappedFile mapped_file
    cdef readonly object positions
    cdef readonly object phy_offsets
    cdef readonly object sizes
    cdef readonly object queue_ids
    cdef readonly object queue_offsets
    cdef readonly object tags_codes
    cdef readonly object store_timestamps
    cdef readonly object sys_flags
    cdef readonly object topic_ids
    cdef readonly list topics
    cdef readonly str stop_status      # 'end', 'blank', 'corrupt' or 'limit'
    cdef readonly int64_t stop_position
    cdef readonly object reason

    def __len__(self):
        return len(self.positions)

    @property
    def next_offset(self):
        """CommitLog offset where the next dispatch round starts."""
        if self.stop_status == "blank":
            return self.mapped_file.file_from_offset + self.mapped_file.file_size
        return self.mapped_file.file_from_offset + self.stop_position

    def __repr__(self):
        return (f"DispatchBatch({len(self.positions)} records, topics={self.topics}, "
                f"stop={self.stop_status} at {self.stop_position})")


cdef enum:
    MAX_BATCH_TOPICS = 256     # distinct topics per dispatch batch (a batch stops early)
    # Decode at least this much without the GIL, else keep it. Every GIL-held microsecond of
    # the dispatch thread is one the producers wait (2 cores, one GIL), so only tiny regions
    # keep it.
    RELEASE_GIL_BYTES = 16384


def dispatch_region(MappedFile mf not None, int64_t start, int64_t end=-1, *,
                    Py_ssize_t max_records=4096, bint check_crc=False, bint tags_codes=True):
    """Decode the records of mf from start (up to end / the readable limit) for dispatch.
    The walk runs without the GIL, so dispatch runs beside producers. tags_codes=False
    leaves the tags codes 0 (a walk that does not use them skips the properties)."""
    cdef int64_t limit, pos
    cdef Py_ssize_t cap, n = 0, t, k, ntopics = 0
    cdef RecordInfo info
    cdef const char* p
    cdef const char* rec
    cdef const char* topic_ptr[MAX_BATCH_TOPICS]
    cdef int32_t topic_len[MAX_BATCH_TOPICS]
    cdef Py_ssize_t last_t = -1
    cdef bint topics_full = False
    cdef PyThreadState* _save = NULL
    cdef DispatchBatch b = DispatchBatch.__new__(DispatchBatch)
    cdef int64_t[::1] v_pos, v_phy, v_qoff, v_tags, v_ts
    cdef int32_t[::1] v_size, v_qid, v_flag, v_tid
    if not mf.hold():
        raise ValueError(f"mapped file {mf.file_name} is being destroyed")
    try:
        limit = mf.read_limit()
        if end < 0 or end > limit:
            end = limit
        if start < 0 or start > end:
            raise ValueError(f"start {start} outside [0, {end}] of {mf.file_name}")
        cap = max(0, min(max_records, (end - start) // MIN_RECORD_SIZE + 1))
        positions = np.empty(cap, np.int64)
        phys = np.empty(cap, np.int64)
        sizes = np.empty(cap, np.int32)
        qids = np.empty(cap, np.int32)
        qoffs = np.empty(cap, np.int64)
        tags = np.empty(cap, np.int64)
        stamps = np.empty(cap, np.int64)
        flags = np.empty(cap, np.int32)
        tids = np.empty(cap, np.int32)
        v_pos = positions; v_phy = phys; v_size = sizes; v_qid = qids; v_qoff = qoffs
        v_tags = tags; v_ts = stamps; v_flag = flags; v_tid = tids
        p = mf.base
        pos = start
        info.status = REC_OK
        _save = PyEval_SaveThread() if end - start >= RELEASE_GIL_BYTES else NULL
        try:
            while pos < end and n < cap:
                info = check_record(p + pos, end - pos, check_crc, mf.file_from_offset + pos)
                if info.status != REC_OK:
                    break
                rec = p + pos
                t = -1
                if last_t >= 0 and topic_len[last_t] == info.topic_len and \
                        memcmp_(topic_ptr[last_t], rec + info.topic_offset, info.topic_len):
                    t = last_t
                else:
                    for k in range(ntopics):
                        if topic_len[k] == info.topic_len and \
                                memcmp_(topic_ptr[k], rec + info.topic_offset, info.topic_len):
                            t = k
                            break
                    if t < 0:
                        if ntopics == MAX_BATCH_TOPICS:
                            topics_full = True      # the next round goes on from here
                            break
                        topic_ptr[ntopics] = rec + info.topic_offset
                        topic_len[ntopics] = info.topic_len
                        t = ntopics
                        ntopics += 1
                    last_t = t
                v_pos[n] = pos
                v_phy[n] = info.phy_offset
                v_size[n] = info.size
                v_qid[n] = info.queue_id
                v_qoff[n] = info.queue_offset
                v_tags[n] = tags_code_of(rec + info.props_offset, info.props_len) \
                    if tags_codes else 0
                v_ts[n] = info.store_ts
                v_flag[n] = info.sys_flag
                v_tid[n] = <int32_t>t
                n += 1
                pos += info.size
        finally:
            if _save != NULL:
                PyEval_RestoreThread(_save)
        b.topics = [PyUnicode_DecodeUTF8(topic_ptr[k], topic_len[k], "replace")
                    for k in range(ntopics)]
        b.mapped_file = mf
        b.positions = positions[:n]
        b.phy_offsets = phys[:n]
        b.sizes = sizes[:n]
        b.queue_ids = qids[:n]
        b.queue_offsets = qoffs[:n]
        b.tags_codes = tags[:n]
        b.store_timestamps = stamps[:n]
        b.sys_flags = flags[:n]
        b.topic_ids = tids[:n]
        b.stop_position = pos
        if info.status == REC_OK or topics_full:
            b.stop_status = "limit" if pos < end else "end"
        else:
            b.stop_status = _STATUS_NAMES[info.status]
            if info.status == REC_CORRUPT:
                b.reason = _status_text(info)
        return b
    finally:
        mf.release()


cdef inline bint memcmp_(const char* a, const char* b, int32_t n) noexcept nogil:
    cdef int32_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True



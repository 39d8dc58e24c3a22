# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Message: what a producer puts (topic, body, properties and the header fields it sets), and
the UNIQ_KEY the put generates for it."""
import os
import random
import socket
import time

from cpython.bytes cimport PyBytes_AS_STRING
from libc.stdint cimport int64_t, uint32_t
from libc.string cimport memcpy

from rocketstore._native.includes.byteorder cimport rs_put_u32
from rocketstore._native.includes.hex cimport rs_hex_upper
from rocketstore._native.includes.python cimport PyUnicode_DecodeASCII
from rocketstore._native.includes.record_checks cimport rs_topic_chars
from rocketstore._native.record cimport MAX_TOPIC_LENGTH, MESSAGE_SYS_FLAGS

from rocketstore._native.hosts import parse_host
from rocketstore.common.properties import MessageProperty as _MessageProperty
from rocketstore.common.text import is_ascii_int as _is_ascii_int

PROPERTY_TAGS = _MessageProperty.TAGS
PROPERTY_KEYS = _MessageProperty.KEYS
PROPERTY_UNIQ_KEY = _MessageProperty.UNIQ_KEY
cdef str _UNIQ_KEY = PROPERTY_UNIQ_KEY
cdef str _DELAY = _MessageProperty.DELAY


# UNIQ_KEY: the client's message id (MessageClientIDSetter)

cdef unsigned char _uniq_prefix[16]   # ip (4/16) + pid (2) + random int (4)
cdef char _uniq_prefix_hex[32]        # the same in hex: only the last 6 bytes change per key
cdef int _uniq_prefix_len = 0
cdef int64_t _month_start_ms = 0
cdef int64_t _next_month_ms = 0
cdef UniqKeys _uniq
_uniq.head_len = 0
_uniq.head_ms = -1
_uniq.counter = 0


cdef void _init_uniq_prefix():
    global _uniq_prefix_len
    try:
        ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        ip = b"\x7f\x00\x00\x01"
    prefix = ip + (os.getpid() & 0xFFFF).to_bytes(2, "big") + random.getrandbits(32).to_bytes(4, "big")
    memcpy(_uniq_prefix, PyBytes_AS_STRING(prefix), len(prefix))
    rs_hex_upper(_uniq_prefix_hex, _uniq_prefix, len(prefix))
    _uniq_prefix_len = len(prefix)
    _uniq.head_ms = -1


cdef void _set_month(int64_t now_ms):
    global _month_start_ms, _next_month_ms
    t = time.localtime(now_ms / 1000.0)
    start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    nxt = time.mktime((t.tm_year + (t.tm_mon == 12), t.tm_mon % 12 + 1, 1, 0, 0, 0, 0, 0, -1))
    _month_start_ms = <int64_t>(start * 1000)
    _next_month_ms = <int64_t>(nxt * 1000)


cdef UniqKeys* uniq_keys() noexcept:
    return &_uniq


cdef int set_uniq_head(int64_t now_ms) except -1:
    cdef unsigned char buf[4]
    if now_ms >= _next_month_ms or now_ms < _month_start_ms:
        _set_month(now_ms)
    memcpy(_uniq.head, _uniq_prefix_hex, 2 * _uniq_prefix_len)
    rs_put_u32(<char*>buf, <uint32_t>(now_ms - _month_start_ms))
    rs_hex_upper(_uniq.head + 2 * _uniq_prefix_len, buf, 4)
    _uniq.head_len = 2 * _uniq_prefix_len + 8
    _uniq.head_ms = now_ms
    return 0


def _reset_uniq_prefix():
    """Re-derive the per-process prefix (after fork, the pid changes)."""
    _init_uniq_prefix()


_init_uniq_prefix()
os.register_at_fork(after_in_child=_reset_uniq_prefix)


cdef int new_uniq_hex(int64_t now_ms, char* out) except -1:
    return new_uniq_hex_in(&_uniq, now_ms, out)


def new_uniq_key():
    """A fresh UNIQ_KEY as RocketMQ's client makes it (32 hex characters for IPv4)."""
    cdef char out[UNIQ_HEX_MAX]
    cdef int n = new_uniq_hex(wall_clock_ms(), out)
    return PyUnicode_DecodeASCII(out, n, NULL)


cdef inline bint _topic_char_ok(Py_UCS4 c) noexcept:
    return c < 256 and rs_topic_chars[c] != 0


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


cdef int _check_property_text(str what, object value) except -1:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, got {type(value).__name__}")
    if "\x01" in value or "\x02" in value:
        raise ValueError(f"{what} {value!r} contains a separator character (\\x01 or \\x02)")
    if "\x00" in value:
        raise ValueError(f"{what} {value!r} contains NUL (recovery reads NUL-ended properties "
                         "as a torn record)")
    return 0


cdef class Message:
    """A message the embedded store puts (``rocketstore.Message``); a producer sends a broker
    ``rocketstore.client.Message`` instead.

    Properties hold every property (user and system, RocketMQ's map);
    tags, keys and uniq_key read and write their well-known entries.

    A UNIQ_KEY the put generates is kept as hex text in the object (no str, no dict insert
    on the put path) and enters the properties dict when they are next read: the message
    keeps that key, as RocketMQ's client keeps the one it sets, so a retried put repeats it."""

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
                props[_DELAY] = str(delay_level)
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
        if sys_flag & ~MESSAGE_SYS_FLAGS:
            raise ValueError(f"sys_flag may not carry the IPv6 host bits (0x30): the store sets "
                             f"them from the hosts, got {sys_flag:#x}")
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
        value = self._props.get(_DELAY)
        return int(value) if value and _is_ascii_int(value) else 0

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

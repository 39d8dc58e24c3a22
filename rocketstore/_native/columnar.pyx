# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Columnar decode: CommitLog records -> one pyarrow.RecordBatch, with no Python object per
message.

Two passes over the records, both without the GIL: the first validates every record and sums
what each column needs (rows, string bytes, list items); numpy buffers of exactly those sizes
are allocated (GIL held, once per batch); the second pass fills them. The Arrow arrays are then
assembled from the buffers (``pa.Array.from_buffers``), zero-copy.

Column semantics (``SCHEMA``, the Spark schema of issue 5):

- ``topic``: the TOPIC bytes as UTF-8; invalid bytes become U+FFFD (see below). Never null.
- ``queue_id`` ... ``reconsume_times``: the record's header fields as stored.
  ``commitlog_offset`` = ``base_offset + position`` (checked equal to the record's
  PHYSICALOFFSET field); with ``base_offset=None`` the PHYSICALOFFSET field itself.
- ``born_timestamp``/``store_timestamp``: ms since the epoch as ``timestamp[ms]`` (no time zone).
  With ``spark=True``: ``timestamp[us, tz=UTC]``, the type PySpark's data source reader demands
  for a Spark TimestampType (``to_arrow_schema(..., timezone="UTC")``).
- ``born_host``/``store_host``: ``a.b.c.d:port`` or ``[v6]:port`` with the address in RFC 5952
  text (lower-case hex, longest run of >= 2 zero groups as ``::``, the first on a tie, and
  IPv4-mapped addresses as ``::ffff:a.b.c.d``, as Python >= 3.13's ``ipaddress`` does). The port
  is the stored int32, printed signed.
- ``msg_id``: offsetMsgId, store address + port + commitlog_offset, upper-case hex.
- ``properties``: as RocketMQ's ``MessageDecoder.string2messageProperties`` builds its HashMap:
  pairs split on \\x02, name/value on the first \\x01 (the value keeps any later \\x01); pairs
  with no \\x01, an empty name or an empty value are dropped; a name seen again replaces the
  earlier value (last wins) and keeps the earlier pair's place. So the map has unique keys, in
  first-seen order, and equals ``MessageExt.properties`` item for item; Spark's default
  ``mapKeyDedupPolicy=EXCEPTION`` never sees a duplicate key.
- ``tags``: the TAGS value of that map; null when there is none.
- ``keys``: the KEYS value of that map split on ' ' with empty tokens dropped; an EMPTY LIST
  (never null) when there is no KEYS property, so ``size(keys)``/``array_contains`` need no
  null handling.
- ``body``: the stored body bytes (compressed bodies, sysFlag 0x1, are left compressed).

Invalid UTF-8 (topic, property names and values): each maximal invalid subpart is replaced by
one U+FFFD, exactly what Python's ``bytes.decode("utf-8", "replace")`` (and Java's decoder)
give, so every string column is valid UTF-8 and ``validate(full=True)`` passes.

Size limit: string/binary columns have 32-bit offsets, so no column may hold more than
``MAX_BATCH_BYTES`` (2**31 - 1) bytes of data. ``decode_region`` stops before the record that
would overflow one and reports ``stop_status == "limit"``; the caller continues from
``next_position``. ``decode_positions`` raises ``BatchTooLargeError`` (its ``fits`` attribute
says how many leading positions fit) so the caller can split the positions.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy, memset

cimport numpy as cnp

from rocketstore._native.codec cimport (
    REC_BLANK,
    REC_CORRUPT,
    REC_END,
    REC_OK,
    SYSFLAG_BORNHOST_V6,
    RecordInfo,
    check_record,
    rs_get_i32,
    rs_get_i64,
    rs_get_u32,
)
from rocketstore._native.mapped_file cimport MappedFile

import numpy as np
import pyarrow as pa

from rocketstore._native.codec import CorruptRecordError

cnp.import_array()

MAX_BATCH_BYTES = 2147483647
DEF MAX_BYTES = 2147483647
DEF MAX_PAIRS = 8200            # a kept pair needs >= 4 bytes of the <= 32767-byte properties
DEF PROPS_SCRATCH = 3 * 32768   # sanitized properties: an invalid byte becomes 3 bytes
DEF TOPIC_SCRATCH = 3 * 256
DEF HOST_TEXT = 64              # '[' + 39 + ']:' + 11 fits
DEF MIN_RECORD = 91

# ---- schema ----------------------------------------------------------------------------------


def schema(bint include_body=True, *, bint spark=False):
    """The Arrow schema of the batches: ``SCHEMA``, without ``body`` when include_body is
    False; with ``spark=True`` the timestamps are ``timestamp[us, tz=UTC]``."""
    ts = pa.timestamp("us", tz="UTC") if spark else pa.timestamp("ms")
    fields = [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32()),
        pa.field("queue_offset", pa.int64()),
        pa.field("commitlog_offset", pa.int64()),
        pa.field("store_size", pa.int32()),
        pa.field("sys_flag", pa.int32()),
        pa.field("flag", pa.int32()),
        pa.field("born_timestamp", ts),
        pa.field("store_timestamp", ts),
        pa.field("born_host", pa.string()),
        pa.field("store_host", pa.string()),
        pa.field("reconsume_times", pa.int32()),
        pa.field("msg_id", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.list_(pa.string())),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
    ]
    if include_body:
        fields.append(pa.field("body", pa.binary()))
    return pa.schema(fields)


SCHEMA = schema(True)
_SCHEMAS = {(b, s): schema(b, spark=s) for b in (True, False) for s in (True, False)}


class BatchTooLargeError(ValueError):
    """decode_positions: the records would put more than max_batch_bytes in one column;
    ``fits`` leading positions would fit."""

    def __init__(self, message, fits):
        super().__init__(message)
        self.fits = fits


class RegionResult(tuple):
    """(batch, next_position, stop_status) of decode_region, plus ``reason`` (why a corrupt
    record is corrupt, else None). Unpacks as a 3-tuple."""

    def __new__(cls, batch, next_position, stop_status, reason=None):
        self = tuple.__new__(cls, (batch, next_position, stop_status))
        self.reason = reason
        return self

    @property
    def batch(self):
        return self[0]

    @property
    def next_position(self):
        return self[1]

    @property
    def stop_status(self):
        return self[2]

    def __repr__(self):
        return (f"RegionResult({self[0].num_rows} rows, next_position={self[1]}, "
                f"stop_status={self[2]!r}, reason={self.reason!r})")


# ---- UTF-8 -----------------------------------------------------------------------------------

cdef inline int _utf8_seq(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """Length (1..4) of the valid UTF-8 sequence at p[i], or -k: the k bytes at p[i] are a
    maximal invalid subpart (Unicode's recommended practice, as CPython's decoder) that one
    U+FFFD replaces."""
    cdef unsigned char b0 = p[i], b
    cdef int need, k
    cdef unsigned char lo = 0x80, hi = 0xBF
    if b0 < 0x80:
        return 1
    if b0 < 0xC2:
        return -1
    if b0 < 0xE0:
        need = 1
    elif b0 < 0xF0:
        need = 2
        if b0 == 0xE0:
            lo = 0xA0
        elif b0 == 0xED:
            hi = 0x9F
    elif b0 < 0xF5:
        need = 3
        if b0 == 0xF0:
            lo = 0x90
        elif b0 == 0xF4:
            hi = 0x8F
    else:
        return -1
    if i + 1 >= n:
        return -1
    b = p[i + 1]
    if b < lo or b > hi:
        return -1
    for k in range(2, need + 1):
        if i + k >= n or (p[i + k] & 0xC0) != 0x80:
            return -k
    return need + 1


cdef inline bint _utf8_valid(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint64_t w
    cdef int r
    while i < n:
        if i + 8 <= n:
            memcpy(&w, p + i, 8)
            if (w & 0x8080808080808080ULL) == 0:
                i += 8
                continue
        if p[i] < 0x80:
            i += 1
            continue
        r = _utf8_seq(p, i, n)
        if r < 0:
            return False
        i += r
    return True


cdef Py_ssize_t _utf8_sanitize(const unsigned char* p, Py_ssize_t n, char* out) noexcept nogil:
    """Copy p to out with every maximal invalid subpart replaced by U+FFFD (EF BF BD).
    out must hold 3 * n bytes. Returns the output length."""
    cdef Py_ssize_t i = 0, o = 0
    cdef int r, k
    while i < n:
        r = _utf8_seq(p, i, n)
        if r > 0:
            for k in range(r):
                out[o + k] = <char>p[i + k]
            o += r
            i += r
        else:
            out[o] = <char>0xEF
            out[o + 1] = <char>0xBF
            out[o + 2] = <char>0xBD
            o += 3
            i -= r
    return o


def sanitize_utf8(data):
    """bytes with every maximal invalid UTF-8 subpart replaced by U+FFFD (testing aid:
    equals ``data.decode('utf-8', 'replace').encode()``)."""
    cdef const unsigned char[::1] v = data
    cdef Py_ssize_t n = v.shape[0]
    if n == 0:
        return b""
    out = bytearray(3 * n)
    cdef unsigned char[::1] o = out
    cdef Py_ssize_t m = _utf8_sanitize(&v[0], n, <char*>&o[0])
    return bytes(out[:m])


# ---- hosts and ids ---------------------------------------------------------------------------

cdef char _HEXU[512]     # byte -> two upper-case hex digits
cdef char _HEXL[16]

cdef void _init_tables() noexcept:
    cdef const char* up = b"0123456789ABCDEF"
    cdef const char* low = b"0123456789abcdef"
    cdef int i
    for i in range(256):
        _HEXU[2 * i] = up[i >> 4]
        _HEXU[2 * i + 1] = up[i & 15]
    for i in range(16):
        _HEXL[i] = low[i]

_init_tables()


cdef inline int _put_uint(char* out, uint32_t v) noexcept nogil:
    cdef char tmp[12]
    cdef int n = 0, i
    while True:
        tmp[n] = <char>(48 + v % 10)
        n += 1
        v //= 10
        if v == 0:
            break
    for i in range(n):
        out[i] = tmp[n - 1 - i]
    return n


cdef inline int _put_int(char* out, int32_t v) noexcept nogil:
    if v < 0:
        out[0] = b'-'
        return 1 + _put_uint(out + 1, <uint32_t>(-(<int64_t>v)))
    return _put_uint(out, <uint32_t>v)


cdef inline int _put_ipv4(char* out, const unsigned char* a) noexcept nogil:
    cdef int n = 0, i
    for i in range(4):
        if i:
            out[n] = b'.'
            n += 1
        n += _put_uint(out + n, a[i])
    return n


cdef int _format_host(const unsigned char* a, int alen, int32_t port, char* out) noexcept nogil:
    """'a.b.c.d:port' or '[rfc5952]:port' into out (HOST_TEXT bytes); returns the length."""
    cdef int n = 0, i, j, best_start = -1, best_len = 0, run_start = -1, run_len = 0
    cdef unsigned int g[8]
    cdef unsigned int x
    cdef bint mapped
    if alen == 4:
        n = _put_ipv4(out, a)
    else:
        out[0] = b'['
        n = 1
        mapped = True
        for i in range(10):
            if a[i] != 0:
                mapped = False
                break
        if mapped and a[10] == 0xFF and a[11] == 0xFF:
            memcpy(out + n, b"::ffff:", 7)
            n += 7
            n += _put_ipv4(out + n, a + 12)
        else:
            for i in range(8):
                g[i] = (<unsigned int>a[2 * i] << 8) | a[2 * i + 1]
                if g[i] == 0:
                    if run_start < 0:
                        run_start = i
                        run_len = 0
                    run_len += 1
                    if run_len > best_len:
                        best_len = run_len
                        best_start = run_start
                else:
                    run_start = -1
            if best_len < 2:
                best_start = -1
            i = 0
            while i < 8:
                if i == best_start:
                    out[n] = b':'
                    out[n + 1] = b':'
                    n += 2
                    i += best_len
                    continue
                if i > 0 and i != best_start + best_len:
                    out[n] = b':'
                    n += 1
                elif i > 0 and best_start < 0:
                    out[n] = b':'
                    n += 1
                x = g[i]
                j = 12
                while j > 0 and ((x >> j) & 15) == 0:
                    j -= 4
                while j >= 0:
                    out[n] = _HEXL[(x >> j) & 15]
                    n += 1
                    j -= 4
                i += 1
        out[n] = b']'
        n += 1
    out[n] = b':'
    n += 1
    n += _put_int(out + n, port)
    return n


def format_host(raw, int32_t port):
    """The host text the columns hold (testing aid): raw 4- or 16-byte address and port."""
    cdef const unsigned char[::1] v = raw
    cdef char out[HOST_TEXT]
    if v.shape[0] not in (4, 16):
        raise ValueError(f"address must be 4 or 16 bytes, got {v.shape[0]}")
    cdef int n = _format_host(&v[0], <int>v.shape[0], port, out)
    return out[:n].decode("ascii")


cdef struct HostCache:
    int key_len                 # address length + 4 (port); 0 = empty
    unsigned char key[20]
    int text_len
    char text[HOST_TEXT]


cdef inline const char* _host_text(HostCache* c, const char* raw, int alen,
                                   int* text_len) noexcept nogil:
    """Formatted text of the host at raw (address + port), cached for repeats."""
    if c.key_len != alen + 4 or memcmp(c.key, raw, alen + 4) != 0:
        memcpy(c.key, raw, alen + 4)
        c.key_len = alen + 4
        c.text_len = _format_host(<const unsigned char*>raw, alen, rs_get_i32(raw + alen),
                                  c.text)
    text_len[0] = c.text_len
    return c.text


cdef inline void _put_msg_id(char* out, const char* host, int alen, int64_t offset) noexcept nogil:
    """offsetMsgId hex: address + port as stored, then the offset (big-endian)."""
    cdef int i
    cdef unsigned char b
    for i in range(alen + 4):
        b = <unsigned char>host[i]
        out[2 * i] = _HEXU[2 * b]
        out[2 * i + 1] = _HEXU[2 * b + 1]
    out += 2 * (alen + 4)
    for i in range(8):
        b = <unsigned char>((<uint64_t>offset) >> (56 - 8 * i))
        out[2 * i] = _HEXU[2 * b]
        out[2 * i + 1] = _HEXU[2 * b + 1]


# ---- properties ------------------------------------------------------------------------------

cdef struct Pair:
    const char* name
    const char* value
    int32_t name_len
    int32_t value_len


cdef struct Props:
    # of one record, after sanitizing and string2messageProperties
    int32_t npairs
    int32_t tags                # index in pairs, or -1
    int32_t keys                # index in pairs, or -1
    int32_t key_tokens
    int64_t key_bytes
    int64_t name_bytes
    int64_t value_bytes


cdef inline bint _is_name(const Pair* pr, const char* s) noexcept nogil:
    return pr.name_len == 4 and memcmp(pr.name, s, 4) == 0


cdef void _parse_props(const char* text, int32_t n, Pair* pairs, Props* out) noexcept nogil:
    """string2messageProperties over valid UTF-8 text: pairs (unique names, first-seen order,
    last value wins), the TAGS and KEYS entries and the byte counts."""
    cdef const char* p = text
    cdef const char* end = text + n
    cdef const char* pair_end
    cdef const char* sep
    cdef int32_t name_len, value_len, i, found
    cdef uint64_t seen = 0, bit
    cdef const char* v
    cdef const char* vend
    cdef const char* t
    out.npairs = 0
    out.tags = -1
    out.keys = -1
    out.key_tokens = 0
    out.key_bytes = 0
    out.name_bytes = 0
    out.value_bytes = 0
    while p < end:
        pair_end = <const char*>memchr(p, 2, end - p)
        if pair_end == NULL:
            pair_end = end
        sep = <const char*>memchr(p, 1, pair_end - p)
        if sep != NULL and sep > p and pair_end - sep > 1:
            name_len = <int32_t>(sep - p)
            value_len = <int32_t>(pair_end - sep - 1)
            bit = (<uint64_t>1) << ((<unsigned char>p[0] + <unsigned char>sep[-1] * 7
                                     + <uint32_t>name_len * 13) & 63)
            found = -1
            if seen & bit:
                for i in range(out.npairs):
                    if pairs[i].name_len == name_len and memcmp(pairs[i].name, p, name_len) == 0:
                        found = i
                        break
            if found >= 0:
                pairs[found].value = sep + 1
                pairs[found].value_len = value_len
            elif out.npairs < MAX_PAIRS:
                seen |= bit
                pairs[out.npairs].name = p
                pairs[out.npairs].name_len = name_len
                pairs[out.npairs].value = sep + 1
                pairs[out.npairs].value_len = value_len
                if name_len == 4:
                    if memcmp(p, b"TAGS", 4) == 0:
                        out.tags = out.npairs
                    elif memcmp(p, b"KEYS", 4) == 0:
                        out.keys = out.npairs
                out.npairs += 1
        p = pair_end + 1
    for i in range(out.npairs):
        out.name_bytes += pairs[i].name_len
        out.value_bytes += pairs[i].value_len
    if out.keys >= 0:
        v = pairs[out.keys].value
        vend = v + pairs[out.keys].value_len
        while v < vend:
            t = <const char*>memchr(v, 32, vend - v)
            if t == NULL:
                t = vend
            if t > v:
                out.key_tokens += 1
                out.key_bytes += t - v
            v = t + 1


# ---- the two passes --------------------------------------------------------------------------

cdef struct Totals:
    int64_t rows
    int64_t topic
    int64_t born
    int64_t store
    int64_t msg_id
    int64_t tags
    int64_t key_tokens
    int64_t keys
    int64_t pairs
    int64_t names
    int64_t values
    int64_t body


cdef struct Ctx:
    const char* base
    int64_t limit               # readable bytes of the source
    int64_t base_offset         # -1: take PHYSICALOFFSET from the record, unchecked
    bint include_body
    bint check_crc
    bint ts_us
    int64_t max_bytes
    # scratch
    Pair* pairs
    char* props_buf
    char* topic_buf
    HostCache born_cache
    HostCache store_cache
    # the records: positions in the source
    int64_t* pos
    int64_t npos
    int64_t pos_cap
    # pass 1 outcome
    Totals tot
    RecordInfo stop_info
    int64_t stop_pos
    int64_t bad_index           # decode_positions: the failing position's index, or -1
    int oversize                # 1: stopped for max_bytes
    int oom                     # 1: out of memory


cdef struct Rec:
    # one record's parse, shared by both passes
    RecordInfo info
    const char* topic
    int32_t topic_len
    const char* props
    int32_t props_len
    Props pr


cdef inline void _parse(Ctx* c, const char* p, Rec* r) noexcept nogil:
    cdef const char* props = p + r.info.props_offset
    cdef const char* topic = p + r.info.topic_offset
    if _utf8_valid(<const unsigned char*>topic, r.info.topic_len):
        r.topic = topic
        r.topic_len = r.info.topic_len
    else:
        r.topic_len = <int32_t>_utf8_sanitize(<const unsigned char*>topic, r.info.topic_len,
                                              c.topic_buf)
        r.topic = c.topic_buf
    if _utf8_valid(<const unsigned char*>props, r.info.props_len):
        r.props = props
        r.props_len = r.info.props_len
    else:
        r.props_len = <int32_t>_utf8_sanitize(<const unsigned char*>props, r.info.props_len,
                                              c.props_buf)
        r.props = c.props_buf
    _parse_props(r.props, r.props_len, c.pairs, &r.pr)


cdef inline int _push_pos(Ctx* c, int64_t pos) noexcept nogil:
    cdef int64_t cap
    cdef int64_t* grown
    if c.npos == c.pos_cap:
        cap = c.pos_cap * 2 if c.pos_cap else 1024
        grown = <int64_t*>realloc(c.pos, cap * sizeof(int64_t))
        if grown == NULL:
            c.oom = 1
            return -1
        c.pos = grown
        c.pos_cap = cap
    c.pos[c.npos] = pos
    c.npos += 1
    return 0


cdef inline bint _over(int64_t total, int64_t add, int64_t cap) noexcept nogil:
    return total + add > cap


cdef bint _account(Ctx* c, const char* p, Rec* r) noexcept nogil:
    """Add one validated record to the totals; False (nothing added) when a column would
    pass max_bytes and the batch already has a row."""
    cdef Totals t = c.tot
    cdef int born_len, store_len
    cdef int32_t tags_len = 0
    _parse(c, p, r)
    _host_text(&c.born_cache, p + 48, r.info.born_host_len, &born_len)
    _host_text(&c.store_cache, p + r.info.store_ts_offset + 8, r.info.store_host_len,
               &store_len)
    if r.pr.tags >= 0:
        tags_len = c.pairs[r.pr.tags].value_len
    t.rows += 1
    t.topic += r.topic_len
    t.born += born_len
    t.store += store_len
    t.msg_id += 2 * (r.info.store_host_len + 12)
    t.tags += tags_len
    t.key_tokens += r.pr.key_tokens
    t.keys += r.pr.key_bytes
    t.pairs += r.pr.npairs
    t.names += r.pr.name_bytes
    t.values += r.pr.value_bytes
    if c.include_body:
        t.body += r.info.body_len
    if c.tot.rows > 0 and (
            t.topic > c.max_bytes or t.born > c.max_bytes or t.store > c.max_bytes
            or t.msg_id > c.max_bytes or t.tags > c.max_bytes or t.keys > c.max_bytes
            or t.names > c.max_bytes or t.values > c.max_bytes or t.body > c.max_bytes
            or t.key_tokens > c.max_bytes or t.pairs > c.max_bytes):
        return False
    c.tot = t
    return True


cdef void _pass1_region(Ctx* c, int64_t start, int64_t end, int64_t max_records) noexcept nogil:
    """Walk records starting in [start, end); they may extend to c.limit."""
    cdef int64_t pos = start
    cdef Rec r
    cdef RecordInfo info
    memset(&info, 0, sizeof(RecordInfo))
    info.status = REC_OK
    while pos < end and (max_records < 0 or c.npos < max_records):
        info = check_record(c.base + pos, c.limit - pos, c.check_crc,
                            c.base_offset + pos if c.base_offset >= 0 else -1)
        if info.status != REC_OK:
            break
        r.info = info
        if not _account(c, c.base + pos, &r):
            c.oversize = 1
            break
        if _push_pos(c, pos) < 0:
            break
        pos += info.size
    c.stop_info = info
    c.stop_pos = pos


cdef void _pass1_positions(Ctx* c, const int64_t* positions, int64_t n) noexcept nogil:
    cdef int64_t i, pos
    cdef Rec r
    cdef RecordInfo info
    for i in range(n):
        pos = positions[i]
        if pos < 0 or pos >= c.limit:
            memset(&info, 0, sizeof(RecordInfo))
            info.status = REC_CORRUPT
            info.reason = "position outside the readable data"
        else:
            info = check_record(c.base + pos, c.limit - pos, c.check_crc,
                                c.base_offset + pos if c.base_offset >= 0 else -1)
        if info.status != REC_OK:
            c.stop_info = info
            c.bad_index = i
            return
        r.info = info
        if not _account(c, c.base + pos, &r):
            c.oversize = 1
            c.bad_index = i
            return
        if _push_pos(c, pos) < 0:
            return


cdef struct Out:
    int32_t* queue_id
    int64_t* queue_offset
    int64_t* commitlog_offset
    int32_t* store_size
    int32_t* sys_flag
    int32_t* flag
    int64_t* born_ts
    int64_t* store_ts
    int32_t* reconsume
    int32_t* topic_off
    char* topic
    int32_t* born_off
    char* born
    int32_t* store_off
    char* store
    int32_t* msg_id_off
    char* msg_id
    uint8_t* tags_valid
    int32_t* tags_off
    char* tags
    int32_t* keys_list_off
    int32_t* keys_off
    char* keys
    int32_t* props_off
    int32_t* names_off
    char* names
    int32_t* values_off
    char* values
    int32_t* body_off
    char* body


cdef inline int _put(char* dst, int32_t* off_slot, int64_t* fill, int64_t cap,
                     const char* src, int64_t n) noexcept nogil:
    """Append n bytes to a column's data, bounds-checked against pass 1's size."""
    if fill[0] + n > cap:
        return -1
    memcpy(dst + fill[0], src, n)
    fill[0] += n
    off_slot[0] = <int32_t>fill[0]
    return 0


cdef int _pass2(Ctx* c, Out* o) noexcept nogil:
    """Fill the buffers for the records of pass 1. -1 when a record no longer matches what
    pass 1 measured (the source changed underneath): the buffers are never overrun."""
    cdef int64_t i, pos, ts, phy
    cdef int32_t j, k
    cdef const char* p
    cdef const char* host
    cdef const char* v
    cdef const char* vend
    cdef const char* t
    cdef Rec r
    cdef RecordInfo info
    cdef int text_len
    cdef Totals f       # fill positions (bytes, and items for key_tokens/pairs)
    cdef Pair* pr
    memset(&f, 0, sizeof(Totals))
    o.topic_off[0] = 0
    o.born_off[0] = 0
    o.store_off[0] = 0
    o.msg_id_off[0] = 0
    o.tags_off[0] = 0
    o.keys_list_off[0] = 0
    o.keys_off[0] = 0
    o.props_off[0] = 0
    o.names_off[0] = 0
    o.values_off[0] = 0
    if c.include_body:
        o.body_off[0] = 0
    for i in range(c.npos):
        pos = c.pos[i]
        p = c.base + pos
        info = check_record(p, c.limit - pos, False, -1)
        if info.status != REC_OK:
            return -1
        r.info = info
        _parse(c, p, &r)
        o.queue_id[i] = info.queue_id
        o.queue_offset[i] = info.queue_offset
        phy = c.base_offset + pos if c.base_offset >= 0 else info.phy_offset
        o.commitlog_offset[i] = phy
        o.store_size[i] = info.size
        o.sys_flag[i] = info.sys_flag
        o.flag[i] = rs_get_i32(p + 16)
        host = p + info.store_ts_offset + 8
        o.reconsume[i] = rs_get_i32(host + info.store_host_len + 4)
        if c.ts_us:
            o.born_ts[i] = <int64_t>(<uint64_t>rs_get_i64(p + 40) * 1000u)
            o.store_ts[i] = <int64_t>(<uint64_t>info.store_ts * 1000u)
        else:
            o.born_ts[i] = rs_get_i64(p + 40)
            o.store_ts[i] = info.store_ts
        # strings
        if _put(o.topic, &o.topic_off[i + 1], &f.topic, c.tot.topic, r.topic, r.topic_len):
            return -1
        t = _host_text(&c.born_cache, p + 48, info.born_host_len, &text_len)
        if _put(o.born, &o.born_off[i + 1], &f.born, c.tot.born, t, text_len):
            return -1
        t = _host_text(&c.store_cache, host, info.store_host_len, &text_len)
        if _put(o.store, &o.store_off[i + 1], &f.store, c.tot.store, t, text_len):
            return -1
        text_len = 2 * (info.store_host_len + 12)
        if f.msg_id + text_len > c.tot.msg_id:
            return -1
        _put_msg_id(o.msg_id + f.msg_id, host, info.store_host_len, phy)
        f.msg_id += text_len
        o.msg_id_off[i + 1] = <int32_t>f.msg_id
        # tags (null when absent: offsets repeat, validity bit clear)
        if r.pr.tags >= 0:
            pr = &c.pairs[r.pr.tags]
            if _put(o.tags, &o.tags_off[i + 1], &f.tags, c.tot.tags, pr.value, pr.value_len):
                return -1
            o.tags_valid[i >> 3] |= <uint8_t>(1 << (i & 7))
        else:
            o.tags_off[i + 1] = <int32_t>f.tags
        # keys
        if r.pr.keys >= 0:
            if f.key_tokens + r.pr.key_tokens > c.tot.key_tokens:
                return -1
            pr = &c.pairs[r.pr.keys]
            v = pr.value
            vend = v + pr.value_len
            while v < vend:
                t = <const char*>memchr(v, 32, vend - v)
                if t == NULL:
                    t = vend
                if t > v:
                    if _put(o.keys, &o.keys_off[f.key_tokens + 1], &f.keys, c.tot.keys, v,
                            t - v):
                        return -1
                    f.key_tokens += 1
                v = t + 1
        o.keys_list_off[i + 1] = <int32_t>f.key_tokens
        # properties
        if f.pairs + r.pr.npairs > c.tot.pairs:
            return -1
        for j in range(r.pr.npairs):
            pr = &c.pairs[j]
            k = <int32_t>(f.pairs + j + 1)
            if _put(o.names, &o.names_off[k], &f.names, c.tot.names, pr.name, pr.name_len):
                return -1
            if _put(o.values, &o.values_off[k], &f.values, c.tot.values, pr.value,
                    pr.value_len):
                return -1
        f.pairs += r.pr.npairs
        o.props_off[i + 1] = <int32_t>f.pairs
        if c.include_body:
            if _put(o.body, &o.body_off[i + 1], &f.body, c.tot.body, p + info.body_offset,
                    info.body_len):
                return -1
    if (f.topic != c.tot.topic or f.born != c.tot.born or f.store != c.tot.store
            or f.msg_id != c.tot.msg_id or f.tags != c.tot.tags or f.keys != c.tot.keys
            or f.key_tokens != c.tot.key_tokens or f.pairs != c.tot.pairs
            or f.names != c.tot.names or f.values != c.tot.values
            or (c.include_body and f.body != c.tot.body)):
        return -1
    return 0


# ---- assembly --------------------------------------------------------------------------------

cdef inline void* _data(cnp.ndarray a) noexcept:
    return cnp.PyArray_DATA(a)


cdef object _string_array(object typ, int64_t n, object offs, object data, object valid=None,
                          int64_t nulls=0):
    return pa.Array.from_buffers(
        typ, n, [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offs),
                 pa.py_buffer(data)], null_count=nulls)


cdef object _fixed(object typ, int64_t n, object arr):
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(arr)], null_count=0)


cdef object _fill_batch(Ctx* c):
    """Allocate the buffers pass 1 sized, run pass 2 (no GIL) and build the RecordBatch."""
    cdef int64_t n = c.npos
    cdef Totals t = c.tot
    cdef Out o
    cdef int rc
    i32, i64, u8 = np.int32, np.int64, np.uint8
    queue_id = np.empty(n, i32)
    queue_offset = np.empty(n, i64)
    commitlog_offset = np.empty(n, i64)
    store_size = np.empty(n, i32)
    sys_flag = np.empty(n, i32)
    flag = np.empty(n, i32)
    born_ts = np.empty(n, i64)
    store_ts = np.empty(n, i64)
    reconsume = np.empty(n, i32)
    topic_off = np.empty(n + 1, i32)
    topic = np.empty(t.topic, u8)
    born_off = np.empty(n + 1, i32)
    born = np.empty(t.born, u8)
    store_off = np.empty(n + 1, i32)
    store = np.empty(t.store, u8)
    msg_id_off = np.empty(n + 1, i32)
    msg_id = np.empty(t.msg_id, u8)
    tags_valid = np.zeros((n + 7) // 8, u8)
    tags_off = np.empty(n + 1, i32)
    tags = np.empty(t.tags, u8)
    keys_list_off = np.empty(n + 1, i32)
    keys_off = np.empty(t.key_tokens + 1, i32)
    keys = np.empty(t.keys, u8)
    props_off = np.empty(n + 1, i32)
    names_off = np.empty(t.pairs + 1, i32)
    names = np.empty(t.names, u8)
    values_off = np.empty(t.pairs + 1, i32)
    values = np.empty(t.values, u8)
    body_off = np.empty(n + 1 if c.include_body else 0, i32)
    body = np.empty(t.body if c.include_body else 0, u8)
    o.queue_id = <int32_t*>_data(queue_id)
    o.queue_offset = <int64_t*>_data(queue_offset)
    o.commitlog_offset = <int64_t*>_data(commitlog_offset)
    o.store_size = <int32_t*>_data(store_size)
    o.sys_flag = <int32_t*>_data(sys_flag)
    o.flag = <int32_t*>_data(flag)
    o.born_ts = <int64_t*>_data(born_ts)
    o.store_ts = <int64_t*>_data(store_ts)
    o.reconsume = <int32_t*>_data(reconsume)
    o.topic_off = <int32_t*>_data(topic_off)
    o.topic = <char*>_data(topic)
    o.born_off = <int32_t*>_data(born_off)
    o.born = <char*>_data(born)
    o.store_off = <int32_t*>_data(store_off)
    o.store = <char*>_data(store)
    o.msg_id_off = <int32_t*>_data(msg_id_off)
    o.msg_id = <char*>_data(msg_id)
    o.tags_valid = <uint8_t*>_data(tags_valid)
    o.tags_off = <int32_t*>_data(tags_off)
    o.tags = <char*>_data(tags)
    o.keys_list_off = <int32_t*>_data(keys_list_off)
    o.keys_off = <int32_t*>_data(keys_off)
    o.keys = <char*>_data(keys)
    o.props_off = <int32_t*>_data(props_off)
    o.names_off = <int32_t*>_data(names_off)
    o.names = <char*>_data(names)
    o.values_off = <int32_t*>_data(values_off)
    o.values = <char*>_data(values)
    o.body_off = <int32_t*>_data(body_off)
    o.body = <char*>_data(body)
    with nogil:
        rc = _pass2(c, &o)
    if rc < 0:
        raise RuntimeError("the records changed while they were decoded (the source was "
                           "modified concurrently)")
    sch = _SCHEMAS[(bool(c.include_body), bool(c.ts_us))]
    s = pa.string()
    ts = sch.field("born_timestamp").type
    ntags = int(n - np.unpackbits(tags_valid, count=n).sum()) if n else 0
    keys_child = _string_array(s, t.key_tokens, keys_off, keys)
    entries = pa.StructArray.from_arrays(
        [_string_array(s, t.pairs, names_off, names),
         _string_array(s, t.pairs, values_off, values)],
        fields=list(sch.field("properties").type.value_type))
    columns = [
        _string_array(s, n, topic_off, topic),
        _fixed(pa.int32(), n, queue_id),
        _fixed(pa.int64(), n, queue_offset),
        _fixed(pa.int64(), n, commitlog_offset),
        _fixed(pa.int32(), n, store_size),
        _fixed(pa.int32(), n, sys_flag),
        _fixed(pa.int32(), n, flag),
        _fixed(ts, n, born_ts),
        _fixed(ts, n, store_ts),
        _string_array(s, n, born_off, born),
        _string_array(s, n, store_off, store),
        _fixed(pa.int32(), n, reconsume),
        _string_array(s, n, msg_id_off, msg_id),
        _string_array(s, n, tags_off, tags, tags_valid if ntags else None, ntags),
        pa.Array.from_buffers(sch.field("keys").type, n, [None, pa.py_buffer(keys_list_off)],
                              null_count=0, children=[keys_child]),
        pa.Array.from_buffers(sch.field("properties").type, n,
                              [None, pa.py_buffer(props_off)], null_count=0,
                              children=[entries]),
    ]
    if c.include_body:
        columns.append(pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(body_off),
                                                               pa.py_buffer(body)],
                                             null_count=0))
    return pa.RecordBatch.from_arrays(columns, schema=sch)


cdef int _ctx_init(Ctx* c, int64_t base_offset, bint include_body, bint check_crc, bint spark,
                   int64_t max_bytes) except -1:
    memset(c, 0, sizeof(Ctx))
    if max_bytes <= 0 or max_bytes > MAX_BYTES:
        raise ValueError(f"max_batch_bytes must be in [1, {MAX_BYTES}], got {max_bytes}")
    c.base_offset = base_offset
    c.include_body = include_body
    c.check_crc = check_crc
    c.ts_us = spark
    c.max_bytes = max_bytes
    c.bad_index = -1
    c.pairs = <Pair*>malloc(MAX_PAIRS * sizeof(Pair))
    c.props_buf = <char*>malloc(PROPS_SCRATCH)
    c.topic_buf = <char*>malloc(TOPIC_SCRATCH)
    if c.pairs == NULL or c.props_buf == NULL or c.topic_buf == NULL:
        _ctx_free(c)
        raise MemoryError()
    return 0


cdef void _ctx_free(Ctx* c) noexcept:
    free(c.pairs)
    free(c.props_buf)
    free(c.topic_buf)
    free(c.pos)
    c.pairs = NULL
    c.props_buf = NULL
    c.topic_buf = NULL
    c.pos = NULL


cdef int64_t _base_offset_arg(object base_offset) except? -2:
    if base_offset is None:
        return -1
    if isinstance(base_offset, bool) or not isinstance(base_offset, int):
        raise TypeError(f"base_offset must be an int or None, got {type(base_offset).__name__}")
    if base_offset < 0:
        raise ValueError(f"base_offset must be >= 0 (or None), got {base_offset}")
    return base_offset


cdef str _reason(RecordInfo info):
    if info.status == REC_BLANK:
        return "an END_FILE blank, not a message"
    if info.status == REC_END:
        return "no record (end of data)"
    return (<bytes>info.reason).decode() if info.reason != NULL else "corrupt record"


_STATUS = ("ok", "blank", "end", "corrupt")


def decode_region(source, int64_t start, int64_t end=-1, *, base_offset,
                  bint include_body=True, bint check_crc=False, int64_t max_records=-1,
                  int64_t max_batch_bytes=MAX_BYTES, bint spark=False):
    """Decode the records that START in [start, end) of source into one RecordBatch.

    source: a MappedFile (readable up to its read position, held while decoding) or any
    1-D bytes-like buffer. Positions are relative to source; a record may extend past end
    (up to the readable data), so byte ranges split at arbitrary points partition the
    records by their start. end < 0 or past the data means the end of the data.
    base_offset: the CommitLog offset of position 0 of source; each record's PHYSICALOFFSET
    must equal base_offset + position (else it is corrupt) and commitlog_offset/msg_id use
    it. None: take PHYSICALOFFSET as stored, unchecked (e.g. a pull reply's records).

    Returns a RegionResult ``(batch, next_position, stop_status)``: next_position is where
    the walk stopped (the first position not decoded) and stop_status says why:
    'end' (no record starts before end, or the data ends: zeros or < 8 bytes left),
    'blank' (an END_FILE blank at next_position: continue in the next segment),
    'corrupt' (the record at next_position fails validation; ``.reason`` says why) or
    'limit' (max_records, or max_batch_bytes of data in some column: continue from
    next_position). Never reads outside the buffer; never raises for bad data.
    """
    cdef Ctx c
    cdef MappedFile mf = None
    cdef const unsigned char[::1] view
    cdef int64_t limit
    cdef int64_t bo = _base_offset_arg(base_offset)
    cdef str status
    _ctx_init(&c, bo, include_body, check_crc, spark, max_batch_bytes)
    try:
        if isinstance(source, MappedFile):
            mf = <MappedFile>source
            if not mf.hold():
                raise ValueError(f"mapped file {mf.file_name} is being destroyed")
            c.base = mf.base
            limit = mf.read_limit()
        else:
            view = source
            limit = view.shape[0]
            c.base = <const char*>&view[0] if limit > 0 else NULL
        try:
            c.limit = limit
            if end < 0 or end > limit:
                end = limit
            if start < 0 or start > end:
                raise ValueError(f"start {start} outside [0, {end}]")
            with nogil:
                _pass1_region(&c, start, end, max_records)
            if c.oom:
                raise MemoryError()
            batch = _fill_batch(&c)
        finally:
            if mf is not None:
                mf.release()
        reason = None
        if c.oversize or (c.stop_info.status == REC_OK and c.stop_pos < end):
            status = "limit"
        elif c.stop_info.status == REC_OK:
            status = "end"
        else:
            status = _STATUS[c.stop_info.status]
            if c.stop_info.status == REC_CORRUPT:
                reason = _reason(c.stop_info)
        return RegionResult(batch, c.stop_pos, status, reason)
    finally:
        _ctx_free(&c)


def decode_positions(source, positions, *, base_offset, bint include_body=True,
                     bint check_crc=False, int64_t max_batch_bytes=MAX_BYTES,
                     bint spark=False):
    """Decode the records at the given positions of source (int64 array-like, any order,
    repeats allowed) into one RecordBatch, a row per position in the given order.

    For ConsumeQueue-driven reads: the caller maps CQ units to positions in one CommitLog
    file (position = commitLogOffset - file start) and passes that file and its start as
    base_offset. A position that is not a valid record (outside the data, a blank, end of
    data, a bad record, or PHYSICALOFFSET != base_offset + position) raises
    CorruptRecordError naming its CommitLog offset. More than max_batch_bytes in a column
    raises BatchTooLargeError (``.fits`` leading positions fit): split and retry.
    """
    cdef Ctx c
    cdef MappedFile mf = None
    cdef const unsigned char[::1] view
    cdef int64_t limit
    cdef int64_t bo = _base_offset_arg(base_offset)
    cdef cnp.ndarray pos_arr = np.ascontiguousarray(positions, dtype=np.int64)
    cdef int64_t n
    if pos_arr.ndim != 1:
        raise ValueError(f"positions must be 1-D, got {pos_arr.ndim} dimensions")
    n = pos_arr.shape[0]
    _ctx_init(&c, bo, include_body, check_crc, spark, max_batch_bytes)
    try:
        if isinstance(source, MappedFile):
            mf = <MappedFile>source
            if not mf.hold():
                raise ValueError(f"mapped file {mf.file_name} is being destroyed")
            c.base = mf.base
            limit = mf.read_limit()
        else:
            view = source
            limit = view.shape[0]
            c.base = <const char*>&view[0] if limit > 0 else NULL
        try:
            c.limit = limit
            with nogil:
                _pass1_positions(&c, <const int64_t*>cnp.PyArray_DATA(pos_arr), n)
            if c.oom:
                raise MemoryError()
            if c.bad_index >= 0:
                bad = int(pos_arr[c.bad_index])
                if c.oversize:
                    raise BatchTooLargeError(
                        f"positions[{c.bad_index}] (offset {bad + max(bo, 0)}) would put more "
                        f"than {max_batch_bytes} bytes in a column; decode fewer positions at "
                        f"a time", c.bad_index)
                raise CorruptRecordError(f"positions[{c.bad_index}]: {_reason(c.stop_info)}",
                                         bad + bo if bo >= 0 else bad)
            return _fill_batch(&c)
        finally:
            if mf is not None:
                mf.release()
    finally:
        _ctx_free(&c)


def empty_batch(bint include_body=True, *, bint spark=False):
    """A RecordBatch with no rows and the schema of the decoded batches."""
    return _SCHEMAS[(include_body, spark)].empty_table().to_batches(max_chunksize=1)[0] \
        if False else pa.RecordBatch.from_pylist([], schema=_SCHEMAS[(include_body, spark)])

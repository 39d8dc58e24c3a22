# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Columnar decode: CommitLog records -> one pyarrow.RecordBatch, with no Python object per
message.

One pass over the records, without the GIL: each record is validated (``codec.check_record_into``,
inlined), its properties tokenized once, and every column appended to at once. Each column is
its own buffer that grows on demand (``mremap`` for the large ones: the pages already written
move, nothing is copied); instead of a check per column and record, a budget of headroom
guaranteed in every buffer is spent by a per-record bound (``_bound``) and refilled when it
runs out. The Arrow arrays are assembled from the filled part of each buffer
(``pa.foreign_buffer``, zero-copy). The buffers are recycled when the batch dies
(``set_buffer_cache``): fresh pages cost the kernel a zeroing pass, which was half the decode
time before. ASCII properties without a repeated name (the common case) go straight from a
64-byte separator scan into the name and value columns; any other properties through a pair
table, tokenized 8 bytes at a time with UTF-8 validation. Host text is formatted once per run
of equal hosts; the next records, and the output streams' next lines, are prefetched.

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
- ``body``: the stored body bytes (compressed bodies, sysFlag 0x1, are left compressed), as
  ``binary`` (copied). With ``body_view=True`` (not with ``spark=True``): ``binary_view``
  whose values longer than 12 bytes point into the decoded source itself (no copy; the batch
  holds a MappedFile source as ``MappedFile.view`` does). Same values, other layout.

Invalid UTF-8 (topic, property names and values): each maximal invalid subpart is replaced by
one U+FFFD (Unicode's recommended practice: what Python's ``bytes.decode("utf-8", "replace")``
gives, and Java's decoder follows it too), so every string column is valid UTF-8 and
``validate(full=True)`` passes.

Size limit: string/binary columns have 32-bit offsets, so no column may hold more than
``MAX_BATCH_BYTES`` (2**31 - 1) bytes of data (``max_batch_bytes`` lowers that). The sizes are
checked before taking each record (exactly, except KEYS: by a bound from its length) once the
per-record bounds say the limit could be reached: ``decode_region`` stops before the record
that would overflow a column and reports ``stop_status == "limit"``; the caller continues
from ``next_position``. A batch always takes at least its first record. ``decode_positions``
raises ``BatchTooLargeError`` (its ``fits`` attribute says how many leading positions fit) so
the caller can split the positions.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy, memset
from posix.mman cimport (
    MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_READ, PROT_WRITE, madvise, mmap, munmap,
)

cdef extern from "<sys/mman.h>" nogil:
    enum: MADV_HUGEPAGE
    enum: MREMAP_MAYMOVE
    enum: MREMAP_FIXED
    enum: MAP_NORESERVE
    enum: PROT_NONE
    void* mremap(void* old_address, size_t old_size, size_t new_size, int flags, ...)

cimport numpy as cnp

from rocketstore._native.codec cimport (
    REC_BLANK,
    REC_CORRUPT,
    REC_END,
    REC_OK,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    RecordInfo,
    check_record_into,
    record_layout,
    rs_get_i32,
    rs_get_i64,
    rs_get_u16,
    rs_crc32_init,
)
from rocketstore._native.includes.hex cimport rs_hex16
from rocketstore._native.includes.prefetch cimport rs_prefetch256, rs_prefetch_w
from rocketstore._native.includes.scan cimport (
    rs_ascii16, rs_copy32s, rs_ctz64, rs_find_space, rs_first_byte, rs_load_le64,
    rs_load_raw64, rs_scan64, rs_special,
)
from rocketstore._native.mapped_file cimport MappedFile

import numpy as np
import pyarrow as pa

from rocketstore._native.codec import CorruptRecordError

cnp.import_array()
rs_crc32_init()     # this module's copy of the CRC tables (check_record is inlined here)

MAX_BATCH_BYTES = 2147483647

cdef enum:
    MAX_BYTES = 2147483647
    MAX_PAIRS = 8200            # a kept pair needs >= 4 bytes of the <= 32767-byte properties
    PROPS_SCRATCH = 3 * 32768   # sanitized properties: an invalid byte becomes 3 bytes
    TOPIC_SCRATCH = 3 * 256
    HOST_TEXT = 64              # '[' + 39 + ']:' + 11 fits
    BORN_SLOTS = 64             # host caches (powers of two)
    STORE_SLOTS = 8
    ARENA_ALIGN = 64
    SLACK = 32                  # spare bytes after each buffer for _put's block copies
    ARENA_MMAP_MIN = 64 << 10   # smaller buffers come from malloc and are not cached
    ARENA_GRAIN = 64 << 10      # mappings are multiples of this
    ARENA_HUGE = 4 << 20        # mappings this large are multiples of 2 MiB, on huge pages
    HUGE_GRAIN = 2 << 20
    ARENA_SLOTS = 256
    HEADROOM_MIN = 4096
    HEADROOM_MAX = 16 << 10
    PREFETCH_AHEAD = 2048      # bytes ahead of the record being decoded
    WRITE_AHEAD = 512          # bytes ahead of each output stream's end

# ---- schema ----------------------------------------------------------------------------------


def schema(bint include_body=True, *, bint spark=False, bint body_view=False):
    """The Arrow schema of the batches: ``SCHEMA``, without ``body`` when include_body is
    False; with ``spark=True`` the timestamps are ``timestamp[us, tz=UTC]``; with
    ``body_view=True`` the body is ``binary_view`` (zero-copy views, see decode_region)."""
    if spark and body_view:
        raise ValueError("body_view=True is not for spark=True (Spark reads binary)")
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
        fields.append(pa.field("body", pa.binary_view() if body_view else pa.binary()))
    return pa.schema(fields)


SCHEMA = schema(True)
_SCHEMAS = {(b, s, v): schema(b, spark=s, body_view=v)
            for b in (True, False) for s in (True, False) for v in (True, False)
            if not (s and v)}


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


cdef Py_ssize_t _utf8_text_len(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Length of p once sanitized: n when it is ASCII (checked 8 bytes at a time) or valid
    UTF-8, else what the replacements make of it."""
    cdef Py_ssize_t i = 0, o = 0
    cdef uint64_t w, acc = 0
    cdef int r
    while i + 8 <= n:
        memcpy(&w, p + i, 8)
        acc |= w
        i += 8
    while i < n:
        acc |= p[i]
        i += 1
    if (acc & 0x8080808080808080ULL) == 0 or _utf8_valid(p, n):
        return n
    i = 0
    while i < n:
        r = _utf8_seq(p, i, n)
        if r > 0:
            o += r
            i += r
        else:
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
cdef uint16_t _HEX2[256]  # the same two digits as one 2-byte store

cdef void _init_tables() noexcept:
    cdef const char* up = b"0123456789ABCDEF"
    cdef const char* low = b"0123456789abcdef"
    cdef int i
    for i in range(256):
        _HEXU[2 * i] = up[i >> 4]
        _HEXU[2 * i + 1] = up[i & 15]
    for i in range(16):
        _HEXL[i] = low[i]
    for i in range(256):
        memcpy(&_HEX2[i], &_HEXU[2 * i], 2)

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


cdef inline int _put_hex16(char* out, unsigned int x) noexcept nogil:
    cdef int n = 0, j = 12
    while j > 0 and ((x >> j) & 15) == 0:
        j -= 4
    while j >= 0:
        out[n] = _HEXL[(x >> j) & 15]
        n += 1
        j -= 4
    return n


cdef int _format_host(const unsigned char* a, int alen, int32_t port, char* out) noexcept nogil:
    """'a.b.c.d:port' or '[rfc5952]:port' into out (HOST_TEXT bytes); returns the length."""
    cdef int n = 0, i, j, best_start = -1, best_len = 0, run_start = -1, run_len = 0
    cdef unsigned int g[8]
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
            memcpy(out + n, <const char*>b"::ffff:", 7)
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
            j = 0       # 1: a group was written since the last '::' (needs a ':' before)
            while i < 8:
                if i == best_start:
                    out[n] = b':'
                    out[n + 1] = b':'
                    n += 2
                    i += best_len
                    j = 0
                    continue
                if j:
                    out[n] = b':'
                    n += 1
                n += _put_hex16(out + n, g[i])
                j = 1
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
    int alen                    # address length (4 or 16); 0 = empty
    uint64_t k0                 # the raw address + port, as words
    uint64_t k1
    uint32_t k2
    int text_len
    char text[HOST_TEXT]        # 'ip:port'
    char hex[40]                # upper-case hex of address + port: the msg_id prefix


cdef inline HostCache* _host(HostCache* cache, int slots, const char* raw,
                             int alen) noexcept nogil:
    """The host at raw (address + port), formatted once: a direct-mapped cache of `slots`
    (a power of two) entries, so a few producers' born hosts interleaving stay cached."""
    cdef uint64_t a, b = 0
    cdef uint32_t d = 0
    cdef int i
    cdef unsigned char x
    cdef HostCache* c
    memcpy(&a, raw, 8)
    if alen == 16:
        memcpy(&b, raw + 8, 8)
        memcpy(&d, raw + 16, 4)
    c = &cache[((a ^ (b * 31) ^ d) * 0x9E3779B97F4A7C15ULL) >> 58 & <uint64_t>(slots - 1)]
    if c.alen != alen or c.k0 != a or c.k1 != b or c.k2 != d:
        c.alen = alen
        c.k0 = a
        c.k1 = b
        c.k2 = d
        c.text_len = _format_host(<const unsigned char*>raw, alen, rs_get_i32(raw + alen),
                                  c.text)
        for i in range(alen + 4):
            x = <unsigned char>raw[i]
            c.hex[2 * i] = _HEXU[2 * x]
            c.hex[2 * i + 1] = _HEXU[2 * x + 1]
    return c


cdef inline void _put_msg_id(char* out, const HostCache* store, int64_t offset) noexcept nogil:
    """offsetMsgId hex: store address + port as stored, then the offset (big-endian)."""
    cdef int i
    cdef uint64_t v = <uint64_t>offset
    if store.alen == 4:
        memcpy(out, store.hex, 16)
        out += 16
    else:
        memcpy(out, store.hex, 40)
        out += 40
    rs_hex16(out, v)


# ---- properties ------------------------------------------------------------------------------

cdef struct Pair:
    const char* name
    const char* value
    int32_t name_len
    int32_t value_len


cdef struct PairTable:
    # scratch for one record's pairs, grown on demand
    Pair* items
    int32_t cap
    int oom


cdef struct Props:
    # of one record, after sanitizing and string2messageProperties
    int32_t npairs
    int32_t tags                # index in pairs, or -1
    int32_t keys                # index in pairs, or -1


cdef inline void _add_pair(const char* text, int32_t start, int32_t sep, int32_t end,
                           PairTable* pt, Props* out, uint64_t* seen) noexcept nogil:
    """One `name\x01value` piece: kept when both are non-empty; a repeated name takes the
    new value in the first one's place."""
    cdef int32_t name_len = sep - start, value_len = end - sep - 1, i
    cdef const char* name = text + start
    cdef uint64_t bit
    cdef Pair* pairs = pt.items
    cdef Pair* grown
    if sep < 0 or name_len <= 0 or value_len <= 0:
        return
    bit = (<uint64_t>1) << ((<unsigned char>name[0] + <unsigned char>name[name_len - 1] * 7
                             + <uint32_t>name_len * 13) & 63)
    if seen[0] & bit:
        for i in range(out.npairs):
            if pairs[i].name_len == name_len and memcmp(pairs[i].name, name, name_len) == 0:
                pairs[i].value = text + sep + 1
                pairs[i].value_len = value_len
                return
    if out.npairs >= pt.cap:
        if pt.cap >= MAX_PAIRS:
            return
        grown = <Pair*>realloc(pt.items, 2 * pt.cap * sizeof(Pair))
        if grown == NULL:
            pt.oom = 1
            return
        pt.items = pairs = grown
        pt.cap *= 2
    seen[0] |= bit
    pairs[out.npairs].name = name
    pairs[out.npairs].name_len = name_len
    pairs[out.npairs].value = text + sep + 1
    pairs[out.npairs].value_len = value_len
    if name_len == 4:
        if memcmp(name, <const char*>b"TAGS", 4) == 0:
            out.tags = out.npairs
        elif memcmp(name, <const char*>b"KEYS", 4) == 0:
            out.keys = out.npairs
    out.npairs += 1


cdef bint _parse_props(const char* text, int32_t n, PairTable* pt, Props* out) noexcept nogil:
    """string2messageProperties over text in one scan, 8 bytes at a time: pairs (unique
    names in first-seen order, last value wins) and the TAGS and KEYS entries. False when
    text is not valid UTF-8 (sanitize it and call again)."""
    cdef const unsigned char* u = <const unsigned char*>text
    cdef int32_t i = 0, start = 0, sep = -1, r
    cdef uint64_t m, seen = 0
    cdef bint found
    cdef unsigned char b
    out.npairs = 0
    out.tags = -1
    out.keys = -1
    while True:
        found = False
        while i + 8 <= n:
            m = rs_special(rs_load_le64(text + i))
            if m:
                i += rs_first_byte(m)
                found = True
                break
            i += 8
        if not found:
            while i < n and u[i] >= 3 and u[i] < 0x80:
                i += 1
            if i >= n:
                break
        b = u[i]
        if b >= 0x80:
            while True:         # a run of multi-byte characters
                r = _utf8_seq(u, i, n)
                if r < 0:
                    return False
                i += r
                if i >= n or u[i] < 0x80:
                    break
        elif b == 2:
            _add_pair(text, start, sep, i, pt, out, &seen)
            i += 1
            start = i
            sep = -1
        else:
            if b == 1 and sep < 0:
                sep = i
            i += 1
    _add_pair(text, start, sep, n, pt, out, &seen)
    return True


# ---- output buffers --------------------------------------------------------------------------

# The buffers of a batch: one growable allocation each.
cdef enum:
    B_QUEUE_ID, B_QUEUE_OFFSET, B_COMMITLOG_OFFSET, B_STORE_SIZE, B_SYS_FLAG, B_FLAG,
    B_BORN_TS, B_STORE_TS, B_RECONSUME,
    B_TOPIC_OFF, B_TOPIC, B_BORN_OFF, B_BORN, B_STORE_OFF, B_STORE, B_MSG_ID_OFF, B_MSG_ID,
    B_TAGS_VALID, B_TAGS_OFF, B_TAGS, B_KEYS_LIST_OFF, B_KEYS_OFF, B_KEYS,
    B_PROPS_OFF, B_NAMES_OFF, B_NAMES, B_VALUES_OFF, B_VALUES, B_BODY_OFF, B_BODY,
    B_COUNT


cdef struct Buf:
    char* ptr
    size_t cap                  # allocated bytes
    int mapped                  # 1: an anonymous mapping (grown with mremap, recycled)
    int col                     # which buffer of a batch it is (B_...): its cache key


# bytes per row of the row-indexed buffers (offsets hold one more entry); 0: not row-indexed
cdef int _ROW_WIDTH[B_COUNT]


cdef void _init_widths() noexcept:
    cdef int i
    for i in range(B_COUNT):
        _ROW_WIDTH[i] = 0
    for i in (B_QUEUE_ID, B_STORE_SIZE, B_SYS_FLAG, B_FLAG, B_RECONSUME, B_TOPIC_OFF,
              B_BORN_OFF, B_STORE_OFF, B_MSG_ID_OFF, B_TAGS_OFF, B_KEYS_LIST_OFF, B_PROPS_OFF,
              B_BODY_OFF):
        _ROW_WIDTH[i] = 4
    for i in (B_QUEUE_OFFSET, B_COMMITLOG_OFFSET, B_BORN_TS, B_STORE_TS):
        _ROW_WIDTH[i] = 8
    _ROW_WIDTH[B_TAGS_VALID] = 1        # a byte per row: more than the bits need

_init_widths()


cdef void* _remap_huge(char* old, size_t old_cap, size_t cap) noexcept nogil:
    """mremap old to cap bytes at a 2 MiB boundary (so that huge pages can back it; a plain
    mremap may move it anywhere): a reservation of cap + 2 MiB, the mapping moved onto its
    aligned part, the rest of the reservation unmapped. MAP_FAILED on failure (old intact)."""
    cdef char* r = <char*>mmap(NULL, cap + HUGE_GRAIN, PROT_NONE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    cdef char* a
    cdef void* p
    if <void*>r == MAP_FAILED:
        return MAP_FAILED
    a = <char*>((<size_t>r + HUGE_GRAIN - 1) & ~(<size_t>HUGE_GRAIN - 1))
    p = mremap(old, old_cap, cap, MREMAP_MAYMOVE | MREMAP_FIXED, a)
    if p == MAP_FAILED:
        munmap(r, cap + HUGE_GRAIN)
        return MAP_FAILED
    if a > r:
        munmap(r, a - r)
    if r + cap + HUGE_GRAIN > a + cap:
        munmap(a + cap, (r + cap + HUGE_GRAIN) - (a + cap))
    return p


cdef int _grow(Buf* b, size_t need) noexcept nogil:
    """Make b hold at least need bytes, keeping its content (at least doubling). Mappings
    grow with mremap (no copy, the pages already touched stay); a malloc block that passes
    ARENA_MMAP_MIN moves to a mapping. -1 when out of memory (b unchanged)."""
    cdef size_t cap = b.cap * 2
    cdef void* p
    if cap < need:
        cap = need
    if cap >= ARENA_HUGE:
        cap = (cap + HUGE_GRAIN - 1) // HUGE_GRAIN * HUGE_GRAIN
    elif b.mapped or cap >= ARENA_MMAP_MIN:
        cap = (cap + ARENA_GRAIN - 1) // ARENA_GRAIN * ARENA_GRAIN
    else:
        cap = (cap + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN
    if b.mapped:
        if cap >= ARENA_HUGE:
            p = _remap_huge(b.ptr, b.cap, cap)
        else:
            p = mremap(b.ptr, b.cap, cap, MREMAP_MAYMOVE)
        if p == MAP_FAILED:
            return -1
    elif cap >= ARENA_MMAP_MIN:
        p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if p == MAP_FAILED:
            return -1
        if b.ptr != NULL:
            memcpy(p, b.ptr, b.cap)
            free(b.ptr)
        b.mapped = 1
    else:
        p = realloc(b.ptr, cap)
        if p == NULL:
            return -1
    if cap >= ARENA_HUGE:
        madvise(p, cap, MADV_HUGEPAGE)
    b.ptr = <char*>p
    b.cap = cap
    return 0


cdef inline int _room(Buf* b, int64_t used) noexcept nogil:
    """b holds used bytes and SLACK more (for _put's block copies); -1: out of memory."""
    if <size_t>used + SLACK > b.cap:
        return _grow(b, <size_t>used + SLACK)
    return 0


# Freed mappings kept for reuse (GIL-protected): re-using the pages of earlier batches saves
# the kernel zeroing fresh ones (that was half the decode time with fresh memory per batch).
cdef char* _free_ptr[ARENA_SLOTS]
cdef size_t _free_cap[ARENA_SLOTS]
cdef int _free_col[ARENA_SLOTS]
cdef int _nfree = 0
cdef size_t _free_bytes = 0
cdef size_t _cache_limit = 512 << 20


def set_buffer_cache(size_t max_bytes):
    """How many bytes of freed batch memory to keep for reuse (default 512 MiB; 0 disables).
    Returns the previous limit."""
    global _cache_limit
    cdef size_t old = _cache_limit
    _cache_limit = max_bytes
    while _nfree and _free_bytes > _cache_limit:
        _drop_free(0)
    return old


cdef void _drop_free(int i) noexcept:
    global _nfree, _free_bytes
    munmap(_free_ptr[i], _free_cap[i])
    _free_bytes -= _free_cap[i]
    _nfree -= 1
    _free_ptr[i] = _free_ptr[_nfree]
    _free_cap[i] = _free_cap[_nfree]
    _free_col[i] = _free_col[_nfree]


cdef void _release(Buf* b) noexcept:
    """Give b's memory back: to the cache when it is a mapping and there is room. GIL held."""
    global _nfree, _free_bytes
    if b.ptr == NULL:
        return
    if not b.mapped:
        free(b.ptr)
    elif _nfree < ARENA_SLOTS and _free_bytes + b.cap <= _cache_limit:
        _free_ptr[_nfree] = b.ptr
        _free_cap[_nfree] = b.cap
        _free_col[_nfree] = b.col
        _nfree += 1
        _free_bytes += b.cap
    else:
        munmap(b.ptr, b.cap)
    b.ptr = NULL
    b.cap = 0
    b.mapped = 0


cdef int _acquire(Buf* b, size_t want, int col) except -1:
    """Buffer col of a batch, of about want bytes (it grows on demand): from malloc when
    small, else a cached mapping: the smallest that served the same buffer before and fits,
    or the largest of those (grown; its pages are the ones that buffer touched before, so
    they need no faulting in again), or the smallest other one that fits; else a new
    mapping."""
    global _nfree, _free_bytes
    cdef int i, best = -1, same = -1, other = -1
    b.ptr = NULL
    b.cap = 0
    b.mapped = 0
    b.col = col
    if want < ARENA_MMAP_MIN:
        b.ptr = <char*>malloc(want)
        if b.ptr == NULL:
            raise MemoryError()
        b.cap = want
        return 0
    for i in range(_nfree):
        if _free_col[i] == col:
            if _free_cap[i] >= want:
                if best < 0 or _free_cap[i] < _free_cap[best]:
                    best = i
            elif same < 0 or _free_cap[i] > _free_cap[same]:
                same = i
        elif _free_cap[i] >= want and (other < 0 or _free_cap[i] < _free_cap[other]):
            other = i
    if best < 0:
        best = same if same >= 0 else other
    if best >= 0:
        b.ptr = _free_ptr[best]
        b.cap = _free_cap[best]
        b.mapped = 1
        _free_bytes -= b.cap
        _nfree -= 1
        _free_ptr[best] = _free_ptr[_nfree]
        _free_cap[best] = _free_cap[_nfree]
        _free_col[best] = _free_col[_nfree]
    if b.cap < want and _grow(b, want) < 0:
        _release(b)
        raise MemoryError(f"cannot allocate {want} bytes for a batch")
    return 0


@cython.final
cdef class _Arena:
    """One filled buffer of a batch; the Arrow buffer over it keeps it alive. When that dies,
    the memory goes back to the cache."""
    cdef Buf b

    def __dealloc__(self):
        _release(&self.b)


cdef object _arrow_buffer(Buf* b, int64_t size):
    """The first size bytes of b as a pyarrow Buffer that owns b (b is emptied)."""
    cdef _Arena a = _Arena.__new__(_Arena)
    a.b = b[0]
    b.ptr = NULL
    b.cap = 0
    b.mapped = 0
    return pa.foreign_buffer(<size_t>a.b.ptr, size, base=a)


cdef object _string_array(object typ, int64_t n, object offs, object data, object valid=None,
                          int64_t nulls=0):
    return pa.Array.from_buffers(typ, n, [valid, offs, data], null_count=nulls)


cdef object _fixed(object typ, int64_t n, object arr):
    return pa.Array.from_buffers(typ, n, [None, arr], null_count=0)


# ---- the decode: one pass ----------------------------------------------------------------------

cdef struct Totals:
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
    bint body_view              # body as binary_view into the source (not spark)
    int row_width[B_COUNT]      # _ROW_WIDTH, with 16 for the body views
    int view_shift              # a body view's data buffer: its source offset >> view_shift
    int64_t* extra              # (offset, length) of bodies too long for those buffers
    int64_t nextra
    int64_t extra_cap
    bint check_crc
    bint ts_us
    int64_t max_bytes
    # scratch
    PairTable pt
    char* props_buf             # allocated on the first invalid UTF-8
    char* topic_buf
    HostCache* hosts            # BORN_SLOTS born-host entries, then STORE_SLOTS store-host ones
    HostCache* last_born        # the entries the previous record used (IPv4 fast path)
    HostCache* last_store
    # the output: rows taken, buffers, and how much of each data/item buffer is filled
    int64_t rows
    int64_t row_cap             # the row-indexed buffers hold row_cap + 1 entries
    Buf b[B_COUNT]
    Totals fill
    int64_t tag_nulls           # rows without TAGS
    int64_t budget              # bytes of record bounds that fit without a check (_refresh)
    int64_t headroom            # the next refresh's headroom
    int64_t spent               # the sum of the rows' bounds: no column holds more
    # where and why the walk stopped
    RecordInfo stop_info
    int64_t stop_pos
    int64_t bad_index           # decode_positions: the failing position's index, or -1
    int oversize                # 1: stopped for max_bytes
    int oom                     # 1: out of memory


cdef struct Rec:
    # one record's parse
    RecordInfo info
    const char* topic
    int32_t topic_len
    const char* topic_end       # readable up to here (for the block copies of _put)
    const char* props
    int32_t props_len
    const char* props_end
    Props pr                    # the pair table's parse (taken only when needed)
    const char* tag_v           # the TAGS value, when tag_n >= 0
    int32_t tag_n
    const char* key_v           # the KEYS value, when key_n >= 0
    int32_t key_n


cdef inline void _parse_topic(Ctx* c, const char* p, Rec* r) noexcept nogil:
    """The record's topic, sanitized when it is not valid UTF-8, and where its properties
    are (in the source: _parse_props_table may move them to a sanitized copy)."""
    cdef const char* topic = p + r.info.topic_offset
    r.topic = topic
    r.topic_len = r.info.topic_len
    r.topic_end = c.base + c.limit
    if not (rs_ascii16(topic, r.info.topic_len, r.topic_end)
            or _utf8_valid(<const unsigned char*>topic, r.info.topic_len)):
        if c.topic_buf == NULL:
            c.topic_buf = <char*>malloc(TOPIC_SCRATCH + SLACK)
        if c.topic_buf == NULL:
            c.oom = 1
            r.topic_len = 0
        else:
            r.topic_len = <int32_t>_utf8_sanitize(<const unsigned char*>topic, r.info.topic_len,
                                                  c.topic_buf)
            r.topic = c.topic_buf
            r.topic_end = c.topic_buf + TOPIC_SCRATCH
    r.props = p + r.info.props_offset
    r.props_len = r.info.props_len
    r.props_end = c.base + c.limit


cdef void _parse_props_table(Ctx* c, Rec* r) noexcept nogil:
    """The properties into the pair table (c.pt, r.pr), sanitized first when they are not
    valid UTF-8, and the TAGS and KEYS values from it."""
    cdef const char* props = r.props
    if not _parse_props(props, r.props_len, &c.pt, &r.pr):
        if c.props_buf == NULL:
            c.props_buf = <char*>malloc(PROPS_SCRATCH + SLACK)
        if c.props_buf == NULL:
            c.oom = 1
            r.props_len = 0
        else:
            r.props_len = <int32_t>_utf8_sanitize(<const unsigned char*>props,
                                                  r.info.props_len, c.props_buf)
            r.props = c.props_buf
            r.props_end = c.props_buf + PROPS_SCRATCH
        _parse_props(r.props, r.props_len, &c.pt, &r.pr)
    if c.pt.oom:
        c.oom = 1
    r.tag_n = r.key_n = -1
    if r.pr.tags >= 0:
        r.tag_v = c.pt.items[r.pr.tags].value
        r.tag_n = c.pt.items[r.pr.tags].value_len
    if r.pr.keys >= 0:
        r.key_v = c.pt.items[r.pr.keys].value
        r.key_n = c.pt.items[r.pr.keys].value_len


cdef struct Emit:
    # where _emit_ascii_props writes the pairs
    char* names
    char* values
    int32_t* names_off          # the record's first pair's end offsets
    int32_t* values_off
    int64_t names_start         # the record's first name (the repeated-name check)
    int64_t fn                  # the names' and values' fill
    int64_t fv
    int32_t np                  # pairs written
    uint64_t seen               # a bit per name hash seen


cdef inline void _emit_put(Emit* e, const char* name, int32_t name_len, const char* value,
                           int32_t value_len, const char* src_end) noexcept nogil:
    """Append one pair to the names and values columns."""
    _copy(e.names + e.fn, name, name_len, src_end)
    e.fn += name_len
    e.names_off[e.np] = <int32_t>e.fn
    _copy(e.values + e.fv, value, value_len, src_end)
    e.fv += value_len
    e.values_off[e.np] = <int32_t>e.fv
    e.np += 1


cdef inline int _emit_pair(Emit* e, Rec* r, const char* text, int32_t start, int32_t sep,
                           int32_t end) noexcept nogil:
    """One `name\x01value` piece of _emit_ascii_props (kept when both are non-empty): 0, or
    -1 when its name repeats an earlier one (the pair table then keeps the first place and
    the last value)."""
    cdef int32_t name_len = sep - start, value_len = end - sep - 1, j
    cdef const char* name = text + start
    cdef int64_t prev
    cdef uint64_t bit
    if sep < 0 or name_len <= 0 or value_len <= 0:
        return 0
    bit = (<uint64_t>1) << ((<unsigned char>name[0] + <uint32_t>name_len * 13) & 63)
    if e.seen & bit:
        prev = e.names_start
        for j in range(e.np):
            if (e.names_off[j] - prev == name_len
                    and memcmp(e.names + prev, name, name_len) == 0):
                return -1
            prev = e.names_off[j]
    e.seen |= bit
    _emit_put(e, name, name_len, name + name_len + 1, value_len, r.props_end)
    if name_len == 4:
        if memcmp(name, <const char*>b"TAGS", 4) == 0:
            r.tag_v = name + 5
            r.tag_n = value_len
        elif memcmp(name, <const char*>b"KEYS", 4) == 0:
            r.key_v = name + 5
            r.key_n = value_len
    return 0


cdef inline void _emit_init(Emit* e, Ctx* c, int64_t names, int64_t values,
                            int64_t pairs) noexcept nogil:
    """e writes after the given fill of the names, values and pairs."""
    e.names = c.b[B_NAMES].ptr
    e.values = c.b[B_VALUES].ptr
    e.names_off = <int32_t*>c.b[B_NAMES_OFF].ptr + pairs + 1
    e.values_off = <int32_t*>c.b[B_VALUES_OFF].ptr + pairs + 1
    e.names_start = e.fn = names
    e.fv = values
    e.np = 0
    e.seen = 0


cdef bint _emit_ascii_props(Rec* r, Emit* e) noexcept nogil:
    """The properties' pairs straight into the names and values columns as they are found,
    for the common record: ASCII text without a repeated name, scanned 64 bytes at a time
    (a bit mask of the separators, walked bit by bit). False otherwise: the caller then
    takes the pair table's way (_parse_props_table), which overwrites what this wrote."""
    cdef const char* text = r.props
    cdef int32_t n = r.props_len, at = 0, start = 0, sep = -1, k, left
    cdef uint64_t seps, high
    cdef char tail[64]
    cdef const char* block
    r.tag_n = r.key_n = -1
    while at < n:
        left = n - at
        if text + at + 64 <= r.props_end:
            block = text + at
        else:
            if left > 64:
                left = 64
            memset(tail, 0, 64)
            memcpy(tail, text + at, left)
            block = tail
        rs_scan64(block, &seps, &high)
        if left < 64:
            seps &= ((<uint64_t>1) << left) - 1
            high &= ((<uint64_t>1) << left) - 1
        if high:
            return False
        while seps:
            k = at + rs_ctz64(seps)
            seps &= seps - 1
            if text[k] == 2:
                if _emit_pair(e, r, text, start, sep, k) < 0:
                    return False
                start = k + 1
                sep = -1
            elif sep < 0:
                sep = k
        at += 64
    return _emit_pair(e, r, text, start, sep, n) == 0


cdef void _emit_table(Ctx* c, Rec* r, Emit* e) noexcept nogil:
    """The pair table's pairs (_parse_props_table) into the names and values columns."""
    cdef Pair* pr
    cdef int32_t j
    for j in range(r.pr.npairs):
        pr = &c.pt.items[j]
        _emit_put(e, pr.name, pr.name_len, pr.value, pr.value_len, r.props_end)


cdef inline void _copy(char* dst, const char* src, int64_t n, const char* src_end) noexcept nogil:
    """Copy n bytes to a column's data (the caller made room for them plus SLACK). Strings
    of up to 256 bytes are copied as 16- or 32-byte blocks when the source has that much
    readable: the overshoot (< 32 bytes) lands in the column's unwritten space or its SLACK."""
    if n <= 16 and src + 16 <= src_end:
        memcpy(dst, src, 16)
    elif n <= 256 and src + ((n + 31) & ~31) <= src_end:
        rs_copy32s(dst, src, n)
    else:
        memcpy(dst, src, n)


cdef int _grow_rows(Ctx* c) noexcept nogil:
    """Room for at least one more row in every row-indexed buffer; -1: out of memory."""
    cdef int64_t cap = c.row_cap * 2 if c.row_cap >= 64 else 64
    cdef int i
    for i in range(B_COUNT):
        if c.row_width[i]:
            if _room(&c.b[i], (cap + 1) * c.row_width[i]) < 0:
                return -1
    c.row_cap = cap
    return 0


cdef int _refresh(Ctx* c, int64_t bound) noexcept nogil:
    """Make every data and item buffer hold its fill plus a headroom h >= bound and set the
    budget to h: records whose bounds sum to at most the budget then fit without a check
    per column (a record of size s adds at most _bound(s) bytes to any buffer). The headroom
    doubles on each refresh, from HEADROOM_MIN up to HEADROOM_MAX."""
    cdef Totals f = c.fill
    cdef int64_t h = c.headroom if c.headroom > bound else bound
    if (_room(&c.b[B_TOPIC], f.topic + h) < 0
            or _room(&c.b[B_BORN], f.born + h) < 0
            or _room(&c.b[B_STORE], f.store + h) < 0
            or _room(&c.b[B_MSG_ID], f.msg_id + h) < 0
            or _room(&c.b[B_TAGS], f.tags + h) < 0
            or _room(&c.b[B_KEYS], f.keys + h) < 0
            or _room(&c.b[B_KEYS_OFF], 4 * (f.key_tokens + 1) + h) < 0
            or _room(&c.b[B_NAMES], f.names + h) < 0
            or _room(&c.b[B_VALUES], f.values + h) < 0
            or _room(&c.b[B_NAMES_OFF], 4 * (f.pairs + 1) + h) < 0
            or _room(&c.b[B_VALUES_OFF], 4 * (f.pairs + 1) + h) < 0
            or (c.include_body and not c.body_view
                and _room(&c.b[B_BODY], f.body + h) < 0)):
        return -1
    c.budget = h
    if c.headroom < HEADROOM_MAX:
        c.headroom *= 2
    return 0


cdef inline int64_t _bound(int32_t size) noexcept nogil:
    """At most how many bytes a record of size bytes adds to any one data or item buffer
    (topic <= 3 * 127 sanitized, hosts <= 64, msg_id <= 56, body < size, a property-derived
    column <= 3 * the properties' length, KEYS tokens and pairs <= 4 offset bytes per 2 and
    per 4 property bytes): and so also how much it adds to any column's size or item count."""
    return 4 * <int64_t>size + 512


cdef bint _over(Ctx* c, Rec* r, HostCache* bh, HostCache* sh) noexcept nogil:
    """Would the record put more than max_bytes in some column (KEYS by a bound: its bytes
    and at most len / 2 + 1 tokens)?"""
    cdef Totals f = c.fill
    cdef int64_t names = 0, values = 0, tags_len = 0, keys_len = 0, m = c.max_bytes
    cdef int32_t j
    for j in range(r.pr.npairs):
        names += c.pt.items[j].name_len
        values += c.pt.items[j].value_len
    if r.pr.tags >= 0:
        tags_len = c.pt.items[r.pr.tags].value_len
    if r.pr.keys >= 0:
        keys_len = c.pt.items[r.pr.keys].value_len
    return (f.topic + r.topic_len > m or f.born + bh.text_len > m
            or f.store + sh.text_len > m or f.msg_id + 2 * (sh.alen + 12) > m
            or f.tags + tags_len > m or f.keys + keys_len > m
            or f.key_tokens + keys_len // 2 + 1 > m
            or f.pairs + r.pr.npairs > m or f.names + names > m or f.values + values > m
            or (c.include_body and f.body + r.info.body_len > m))


cdef int _put_view(Ctx* c, char* v, const char* data, int64_t offset, int32_t n) noexcept nogil:
    """The binary_view of the n bytes at data (offset in the source) into v: inline when
    n <= 12, else pointing into the data buffer offset >> view_shift (a 1 GiB step of the
    source, 2 GiB - 1 long, or the whole source when it is shorter); a body that does not
    fit its step's buffer gets a buffer of its own (c.extra). -1: out of memory."""
    cdef int32_t idx, rel
    cdef int64_t at, cap
    cdef int64_t* grown
    memset(v, 0, 16)
    memcpy(v, &n, 4)
    if n <= 12:
        memcpy(v + 4, data, n)
        return 0
    memcpy(v + 4, data, 4)
    at = offset >> c.view_shift
    if (offset - (at << c.view_shift)) + n <= MAX_BYTES:
        idx = <int32_t>at
        rel = <int32_t>(offset - (at << c.view_shift))
    else:
        if c.nextra == c.extra_cap:
            cap = 2 * c.extra_cap if c.extra_cap else 8
            grown = <int64_t*>realloc(c.extra, 2 * cap * sizeof(int64_t))
            if grown == NULL:
                return -1
            c.extra = grown
            c.extra_cap = cap
        c.extra[2 * c.nextra] = offset
        c.extra[2 * c.nextra + 1] = n
        idx = <int32_t>(((c.limit - 1) >> c.view_shift) + 1 + c.nextra)
        rel = 0
        c.nextra += 1
    memcpy(v + 8, &idx, 4)
    memcpy(v + 12, &rel, 4)
    return 0


cdef int _take(Ctx* c, const char* p, int64_t pos, Rec* r) noexcept nogil:
    """Append the validated record at p (position pos) as a row: 0, or 1 when a column would
    pass max_bytes and the batch already has a row (nothing appended), or -1 when out of
    memory."""
    cdef Totals f
    cdef HostCache* bh
    cdef HostCache* sh
    cdef int64_t i = c.rows, phy, bound = _bound(r.info.size)
    cdef int32_t n
    cdef bint tabled = False
    cdef Emit e
    cdef const char* v
    cdef const char* q
    cdef const char* v_end
    _parse_topic(c, p, r)
    if c.oom:
        return -1
    bh = c.last_born
    if bh == NULL or r.info.born_host_len != 4 or bh.alen != 4 or bh.k0 != rs_load_raw64(p + 48):
        bh = c.last_born = _host(c.hosts, BORN_SLOTS, p + 48, r.info.born_host_len)
    sh = c.last_store
    if (sh == NULL or r.info.store_host_len != 4 or sh.alen != 4
            or sh.k0 != rs_load_raw64(p + r.info.store_ts_offset + 8)):
        sh = c.last_store = _host(c.hosts + BORN_SLOTS, STORE_SLOTS,
                                  p + r.info.store_ts_offset + 8, r.info.store_host_len)
    # the size limit: checked exactly (on the pair table's parse) only once the bounds say
    # it could be reached
    if c.spent + bound > c.max_bytes and i > 0:
        _parse_props_table(c, r)
        if c.oom:
            return -1
        tabled = True
        if _over(c, r, bh, sh):
            return 1
    if (bound > c.budget and _refresh(c, bound) < 0) or (
            i + 1 >= c.row_cap and _grow_rows(c) < 0):
        return -1
    c.budget -= bound
    c.spent += bound
    f = c.fill
    # the output streams' next lines, ahead of the stores (too many streams for the hardware
    # prefetcher to follow); streams that grow a few bytes a row only every 2nd or 4th row
    if (i & 3) == 0:
        rs_prefetch_w(c.b[B_TOPIC].ptr + f.topic + WRITE_AHEAD)
        rs_prefetch_w(c.b[B_BORN].ptr + f.born + WRITE_AHEAD)
        rs_prefetch_w(c.b[B_STORE].ptr + f.store + WRITE_AHEAD)
        rs_prefetch_w(c.b[B_TAGS].ptr + f.tags + WRITE_AHEAD)
        rs_prefetch_w(c.b[B_KEYS].ptr + f.keys + WRITE_AHEAD)
        rs_prefetch_w(<char*>c.b[B_KEYS_OFF].ptr + 4 * f.key_tokens + WRITE_AHEAD)
    rs_prefetch_w(c.b[B_MSG_ID].ptr + f.msg_id + WRITE_AHEAD)
    rs_prefetch_w(c.b[B_NAMES].ptr + f.names + WRITE_AHEAD)
    rs_prefetch_w(c.b[B_VALUES].ptr + f.values + WRITE_AHEAD)
    if (i & 1) == 0:
        rs_prefetch_w(<char*>c.b[B_NAMES_OFF].ptr + 4 * f.pairs + WRITE_AHEAD)
        rs_prefetch_w(<char*>c.b[B_VALUES_OFF].ptr + 4 * f.pairs + WRITE_AHEAD)
    if c.include_body and not c.body_view:
        rs_prefetch_w(c.b[B_BODY].ptr + f.body + WRITE_AHEAD)
        rs_prefetch_w(c.b[B_BODY].ptr + f.body + WRITE_AHEAD + 64)
    # the fixed-width values
    (<int32_t*>c.b[B_QUEUE_ID].ptr)[i] = r.info.queue_id
    (<int64_t*>c.b[B_QUEUE_OFFSET].ptr)[i] = r.info.queue_offset
    phy = c.base_offset + pos if c.base_offset >= 0 else r.info.phy_offset
    (<int64_t*>c.b[B_COMMITLOG_OFFSET].ptr)[i] = phy
    (<int32_t*>c.b[B_STORE_SIZE].ptr)[i] = r.info.size
    (<int32_t*>c.b[B_SYS_FLAG].ptr)[i] = r.info.sys_flag
    (<int32_t*>c.b[B_FLAG].ptr)[i] = rs_get_i32(p + 16)
    (<int32_t*>c.b[B_RECONSUME].ptr)[i] = rs_get_i32(
        p + r.info.store_ts_offset + 8 + r.info.store_host_len + 4)
    if c.ts_us:
        (<int64_t*>c.b[B_BORN_TS].ptr)[i] = <int64_t>(<uint64_t>rs_get_i64(p + 40) * 1000u)
        (<int64_t*>c.b[B_STORE_TS].ptr)[i] = <int64_t>(<uint64_t>r.info.store_ts * 1000u)
    else:
        (<int64_t*>c.b[B_BORN_TS].ptr)[i] = rs_get_i64(p + 40)
        (<int64_t*>c.b[B_STORE_TS].ptr)[i] = r.info.store_ts
    # strings
    _copy(c.b[B_TOPIC].ptr + f.topic, r.topic, r.topic_len, r.topic_end)
    f.topic += r.topic_len
    (<int32_t*>c.b[B_TOPIC_OFF].ptr)[i + 1] = <int32_t>f.topic
    _copy(c.b[B_BORN].ptr + f.born, bh.text, bh.text_len, bh.text + HOST_TEXT)
    f.born += bh.text_len
    (<int32_t*>c.b[B_BORN_OFF].ptr)[i + 1] = <int32_t>f.born
    _copy(c.b[B_STORE].ptr + f.store, sh.text, sh.text_len, sh.text + HOST_TEXT)
    f.store += sh.text_len
    (<int32_t*>c.b[B_STORE_OFF].ptr)[i + 1] = <int32_t>f.store
    _put_msg_id(c.b[B_MSG_ID].ptr + f.msg_id, sh, phy)
    f.msg_id += 2 * (sh.alen + 12)
    (<int32_t*>c.b[B_MSG_ID_OFF].ptr)[i + 1] = <int32_t>f.msg_id
    # properties: straight from the text in the common case, else through the pair table
    _emit_init(&e, c, f.names, f.values, f.pairs)
    if tabled or not _emit_ascii_props(r, &e):
        if not tabled:
            _parse_props_table(c, r)
            if c.oom:
                return -1
        _emit_init(&e, c, f.names, f.values, f.pairs)
        _emit_table(c, r, &e)
    f.names = e.fn
    f.values = e.fv
    f.pairs += e.np
    (<int32_t*>c.b[B_PROPS_OFF].ptr)[i + 1] = <int32_t>f.pairs
    # tags (null when absent: offsets repeat, validity bit clear)
    if (i & 7) == 0:
        (<uint8_t*>c.b[B_TAGS_VALID].ptr)[i >> 3] = 0
    if r.tag_n >= 0:
        _copy(c.b[B_TAGS].ptr + f.tags, r.tag_v, r.tag_n, r.props_end)
        f.tags += r.tag_n
        (<uint8_t*>c.b[B_TAGS_VALID].ptr)[i >> 3] |= <uint8_t>(1 << (i & 7))
    else:
        c.tag_nulls += 1
    (<int32_t*>c.b[B_TAGS_OFF].ptr)[i + 1] = <int32_t>f.tags
    # keys: the KEYS value split on ' ', empty tokens dropped
    if r.key_n >= 0:
        v = r.key_v
        v_end = v + r.key_n
        while True:
            q = rs_find_space(v, v_end, r.props_end)
            if q > v:
                _copy(c.b[B_KEYS].ptr + f.keys, v, q - v, r.props_end)
                f.keys += q - v
                f.key_tokens += 1
                (<int32_t*>c.b[B_KEYS_OFF].ptr)[f.key_tokens] = <int32_t>f.keys
            if q == v_end:
                break
            v = q + 1
    (<int32_t*>c.b[B_KEYS_LIST_OFF].ptr)[i + 1] = <int32_t>f.key_tokens
    if c.body_view:
        n = r.info.body_len
        if _put_view(c, c.b[B_BODY_OFF].ptr + 16 * i, p + r.info.body_offset,
                     pos + r.info.body_offset, n) < 0:
            return -1
        f.body += n
    elif c.include_body:
        n = r.info.body_len
        _copy(c.b[B_BODY].ptr + f.body, p + r.info.body_offset, n, c.base + c.limit)
        f.body += n
        (<int32_t*>c.b[B_BODY_OFF].ptr)[i + 1] = <int32_t>f.body
    c.fill = f
    c.rows = i + 1
    return 0


cdef void _walk_region(Ctx* c, int64_t start, int64_t end, int64_t max_records) noexcept nogil:
    """Decode the records starting in [start, end); they may extend to c.limit."""
    cdef int64_t pos = start
    cdef Rec r
    cdef int rc
    memset(&r.info, 0, sizeof(RecordInfo))
    r.info.status = REC_OK
    while pos < end and (max_records < 0 or c.rows < max_records):
        if pos + PREFETCH_AHEAD + 256 <= c.limit:
            rs_prefetch256(c.base + pos + PREFETCH_AHEAD)
        if check_record_into(c.base + pos, c.limit - pos, c.check_crc,
                             c.base_offset + pos if c.base_offset >= 0 else -1,
                             &r.info) != REC_OK:
            break
        rc = _take(c, c.base + pos, pos, &r)
        if rc:
            if rc > 0:
                c.oversize = 1
            else:
                c.oom = 1
            r.info.status = REC_OK
            break
        pos += r.info.size
    c.stop_info = r.info
    c.stop_pos = pos


cdef void _walk_positions(Ctx* c, const int64_t* positions, int64_t n) noexcept nogil:
    cdef int64_t i, pos
    cdef Rec r
    cdef int rc
    for i in range(n):
        pos = positions[i]
        if pos < 0 or pos >= c.limit:
            memset(&r.info, 0, sizeof(RecordInfo))
            r.info.status = REC_CORRUPT
            r.info.reason = b"position outside the readable data"
        else:
            check_record_into(c.base + pos, c.limit - pos, c.check_crc,
                              c.base_offset + pos if c.base_offset >= 0 else -1, &r.info)
        if r.info.status != REC_OK:
            c.stop_info = r.info
            c.bad_index = i
            return
        rc = _take(c, c.base + pos, pos, &r)
        if rc:
            if rc > 0:
                c.oversize = 1
                c.bad_index = i
            else:
                c.oom = 1
            return


# ---- assembly --------------------------------------------------------------------------------


# How big the last batches' buffers were, to size the next ones (GIL-protected; only the
# capacities depend on them, never the content): bytes per row of each data and item buffer,
# and rows per byte of CommitLog.
cdef double _per_row[B_COUNT]
cdef double _rows_per_byte = 1.0 / 200


cdef void _init_hints() noexcept:
    cdef int i
    for i in range(B_COUNT):
        _per_row[i] = 0 if _ROW_WIDTH[i] else 32
    _per_row[B_BODY] = 256

_init_hints()


cdef int _ctx_buffers(Ctx* c, int64_t rows) except -1:
    """The output buffers, sized for about rows records like the last batch's (they grow)."""
    cdef size_t want
    cdef int i
    if rows < 63:
        rows = 63
    for i in range(B_COUNT):
        if ((i == B_BODY or i == B_BODY_OFF) and not c.include_body) or (
                i == B_BODY and c.body_view):
            continue
        if c.row_width[i]:
            want = (rows + 1) * c.row_width[i]
        else:
            want = <size_t>(_per_row[i] * 1.125 * rows)
            if rows >= 1024:        # room for the refreshes' headroom (_refresh)
                want += HEADROOM_MAX
        _acquire(&c.b[i], want + SLACK, i)
    c.row_cap = rows
    return 0


cdef object _build_batch(Ctx* c, object source):
    """The RecordBatch of the rows taken; hands the buffers to Arrow. source: a pa.Buffer
    over the decoded bytes, the data of the body views (None without them)."""
    cdef int64_t n = c.rows
    cdef Totals f = c.fill
    cdef int64_t size[B_COUNT]
    cdef int i
    for i in range(B_COUNT):
        size[i] = c.row_width[i] * n
    for i in (B_TOPIC_OFF, B_BORN_OFF, B_STORE_OFF, B_MSG_ID_OFF, B_TAGS_OFF, B_KEYS_LIST_OFF,
              B_PROPS_OFF, B_BODY_OFF):
        if c.b[i].ptr != NULL and not (i == B_BODY_OFF and c.body_view):
            size[i] = 4 * (n + 1)
            (<int32_t*>c.b[i].ptr)[0] = 0
    size[B_TAGS_VALID] = (n + 7) // 8
    size[B_TOPIC] = f.topic
    size[B_BORN] = f.born
    size[B_STORE] = f.store
    size[B_MSG_ID] = f.msg_id
    size[B_TAGS] = f.tags
    size[B_KEYS_OFF] = 4 * (f.key_tokens + 1)
    size[B_KEYS] = f.keys
    size[B_NAMES_OFF] = size[B_VALUES_OFF] = 4 * (f.pairs + 1)
    size[B_NAMES] = f.names
    size[B_VALUES] = f.values
    size[B_BODY] = f.body
    if n > 0:
        for i in range(B_COUNT):
            if not _ROW_WIDTH[i] and c.b[i].ptr != NULL:
                _per_row[i] = <double>size[i] / n
    (<int32_t*>c.b[B_KEYS_OFF].ptr)[0] = 0
    (<int32_t*>c.b[B_NAMES_OFF].ptr)[0] = 0
    (<int32_t*>c.b[B_VALUES_OFF].ptr)[0] = 0
    b = [None if c.b[i].ptr == NULL else _arrow_buffer(&c.b[i], size[i])
         for i in range(B_COUNT)]
    sch = _SCHEMAS[(bool(c.include_body), bool(c.ts_us), bool(c.body_view))]
    s = pa.string()
    ts = sch.field("born_timestamp").type
    props_type = sch.field("properties").type
    i32 = pa.int32()
    i64 = pa.int64()
    entries = pa.StructArray.from_arrays(
        [_string_array(s, f.pairs, b[B_NAMES_OFF], b[B_NAMES]),
         _string_array(s, f.pairs, b[B_VALUES_OFF], b[B_VALUES])],
        fields=[props_type.key_field, props_type.item_field])
    columns = [
        _string_array(s, n, b[B_TOPIC_OFF], b[B_TOPIC]),
        _fixed(i32, n, b[B_QUEUE_ID]),
        _fixed(i64, n, b[B_QUEUE_OFFSET]),
        _fixed(i64, n, b[B_COMMITLOG_OFFSET]),
        _fixed(i32, n, b[B_STORE_SIZE]),
        _fixed(i32, n, b[B_SYS_FLAG]),
        _fixed(i32, n, b[B_FLAG]),
        _fixed(ts, n, b[B_BORN_TS]),
        _fixed(ts, n, b[B_STORE_TS]),
        _string_array(s, n, b[B_BORN_OFF], b[B_BORN]),
        _string_array(s, n, b[B_STORE_OFF], b[B_STORE]),
        _fixed(i32, n, b[B_RECONSUME]),
        _string_array(s, n, b[B_MSG_ID_OFF], b[B_MSG_ID]),
        _string_array(s, n, b[B_TAGS_OFF], b[B_TAGS],
                      b[B_TAGS_VALID] if c.tag_nulls else None, c.tag_nulls),
        pa.Array.from_buffers(sch.field("keys").type, n, [None, b[B_KEYS_LIST_OFF]],
                              null_count=0,
                              children=[_string_array(s, f.key_tokens, b[B_KEYS_OFF],
                                                      b[B_KEYS])]),
        pa.Array.from_buffers(props_type, n, [None, b[B_PROPS_OFF]], null_count=0,
                              children=[entries]),
    ]
    if c.body_view:
        data = [source.slice(k << c.view_shift, min(c.limit - (k << c.view_shift), MAX_BYTES))
                for k in range(((c.limit - 1) >> c.view_shift) + 1 if c.limit > 0 else 1)]
        data += [source.slice(c.extra[2 * k], c.extra[2 * k + 1]) for k in range(c.nextra)]
        columns.append(pa.Array.from_buffers(pa.binary_view(), n, [None, b[B_BODY_OFF], *data],
                                             null_count=0))
    elif c.include_body:
        columns.append(_string_array(pa.binary(), n, b[B_BODY_OFF], b[B_BODY]))
    return pa.RecordBatch.from_arrays(columns, schema=sch)


cdef int _ctx_init(Ctx* c, int64_t base_offset, bint include_body, bint check_crc, bint spark,
                   int64_t max_bytes, bint body_view) except -1:
    memset(c, 0, sizeof(Ctx))
    if spark and body_view:
        raise ValueError("body_view=True is not for spark=True (Spark reads binary)")
    if max_bytes <= 0 or max_bytes > MAX_BYTES:
        raise ValueError(f"max_batch_bytes must be in [1, {MAX_BYTES}], got {max_bytes}")
    c.base_offset = base_offset
    c.include_body = include_body
    c.body_view = include_body and body_view
    for i in range(B_COUNT):
        c.row_width[i] = _ROW_WIDTH[i]
    if not include_body:
        c.row_width[B_BODY_OFF] = 0
    elif c.body_view:
        c.row_width[B_BODY_OFF] = 16
    c.check_crc = check_crc
    c.ts_us = spark
    c.max_bytes = max_bytes
    c.bad_index = -1
    c.headroom = HEADROOM_MIN
    c.pt.cap = 32
    c.pt.items = <Pair*>malloc(c.pt.cap * sizeof(Pair))
    c.hosts = <HostCache*>calloc(BORN_SLOTS + STORE_SLOTS, sizeof(HostCache))
    if c.pt.items == NULL or c.hosts == NULL:
        _ctx_free(c)
        raise MemoryError()
    return 0


cdef void _ctx_free(Ctx* c) noexcept:
    cdef int i
    free(c.pt.items)
    free(c.extra)
    c.extra = NULL
    free(c.hosts)
    c.hosts = NULL
    free(c.props_buf)
    free(c.topic_buf)
    c.pt.items = NULL
    c.props_buf = NULL
    c.topic_buf = NULL
    for i in range(B_COUNT):        # the buffers not handed to Arrow
        _release(&c.b[i])


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


@cython.final
cdef class _Source:
    """The bytes being decoded: a held MappedFile (up to its read position) or a buffer."""
    cdef MappedFile mf
    cdef object obj
    cdef const unsigned char[::1] view
    cdef const char* base
    cdef int64_t limit

    def __cinit__(self, source):
        self.obj = source
        if isinstance(source, MappedFile):
            mf = <MappedFile>source
            if not mf.hold():
                raise ValueError(f"mapped file {mf.file_name} is being destroyed")
            self.mf = mf
            self.base = mf.base
            self.limit = mf.read_limit()
        else:
            self.view = source
            self.limit = self.view.shape[0]
            self.base = <const char*>&self.view[0] if self.limit > 0 else NULL

    cdef void release(self):
        if self.mf is not None:
            self.mf.release()
            self.mf = None

    cdef object arrow(self):
        """A pa.Buffer over the readable bytes that keeps them (a MappedFile: held) alive."""
        if self.mf is not None:
            return pa.py_buffer(self.mf.view(0, self.limit))
        return pa.py_buffer(self.obj)


def decode_region(source, int64_t start, int64_t end=-1, *, base_offset,
                  bint include_body=True, bint check_crc=False, int64_t max_records=-1,
                  int64_t max_batch_bytes=MAX_BYTES, bint spark=False, bint body_view=False):
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

    body_view=True: the body column is ``binary_view`` whose values (longer than 12 bytes)
    point into source itself instead of copies: no body bytes are copied. The batch then
    keeps source alive (a MappedFile: held, as ``MappedFile.view`` does, until the batch and
    every array sliced from it are gone; a mutable buffer's later changes show through).
    pyarrow (26) lacks take/filter/sort kernels for binary_view: ``.cast(pa.binary())`` when
    needed. Not with spark=True.
    """
    global _rows_per_byte
    cdef Ctx c
    cdef _Source src
    cdef int64_t bo = _base_offset_arg(base_offset)
    cdef str status
    _ctx_init(&c, bo, include_body, check_crc, spark, max_batch_bytes, body_view)
    try:
        src = _Source(source)
        try:
            c.base = src.base
            c.limit = src.limit
            c.view_shift = 62 if c.limit <= MAX_BYTES else 30
            if bo > 0x7FFFFFFFFFFFFFFF - c.limit:
                raise ValueError(f"base_offset {bo} + {c.limit} bytes overflows int64")
            if end < 0 or end > c.limit:
                end = c.limit
            if start < 0 or start > end:
                raise ValueError(f"start {start} outside [0, {end}]")
            _ctx_buffers(&c, <int64_t>((end - start) * _rows_per_byte * 1.125) + 64)
            with nogil:
                _walk_region(&c, start, end, max_records)
            if c.oom:
                raise MemoryError()
            batch = _build_batch(&c, src.arrow() if c.body_view else None)
            if c.rows > 0 and c.stop_pos > start:
                _rows_per_byte = <double>c.rows / (c.stop_pos - start)
        finally:
            src.release()
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
                     bint spark=False, bint body_view=False):
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
    cdef _Source src
    cdef int64_t bo = _base_offset_arg(base_offset)
    cdef cnp.ndarray pos_arr = np.ascontiguousarray(positions, dtype=np.int64)
    cdef int64_t n
    if pos_arr.ndim != 1:
        raise ValueError(f"positions must be 1-D, got {pos_arr.ndim} dimensions")
    n = pos_arr.shape[0]
    _ctx_init(&c, bo, include_body, check_crc, spark, max_batch_bytes, body_view)
    try:
        src = _Source(source)
        try:
            c.base = src.base
            c.limit = src.limit
            c.view_shift = 62 if c.limit <= MAX_BYTES else 30
            if bo > 0x7FFFFFFFFFFFFFFF - c.limit:
                raise ValueError(f"base_offset {bo} + {c.limit} bytes overflows int64")
            _ctx_buffers(&c, n)
            with nogil:
                _walk_positions(&c, <const int64_t*>cnp.PyArray_DATA(pos_arr), n)
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
            return _build_batch(&c, src.arrow() if c.body_view else None)
        finally:
            src.release()
    finally:
        _ctx_free(&c)


def empty_batch(bint include_body=True, *, bint spark=False, bint body_view=False):
    """A RecordBatch with no rows and the schema of the decoded batches."""
    return pa.RecordBatch.from_pylist([], schema=schema(include_body, spark=spark,
                                                        body_view=body_view))


def buffer_cache_info():
    """(arenas, bytes) of freed batch memory kept for reuse."""
    return _nfree, _free_bytes

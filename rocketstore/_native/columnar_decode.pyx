# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The columnar decode's one pass over the records, without the GIL: each record is
validated (record.pxd's check_record_into, inlined), its properties tokenized once, and every
column's buffer appended to at once. columnar.pyx's module docstring states the columns'
semantics; columnar.pyx turns the filled buffers into a RecordBatch."""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

from rocketstore._native.columnar_buffers cimport (
    B_BODY, B_BODY_OFF, B_BORN, B_BORN_OFF, B_BORN_TS, B_COMMITLOG_OFFSET, B_COUNT, B_FLAG,
    B_KEYS, B_KEYS_LIST_OFF, B_KEYS_OFF, B_MSG_ID, B_MSG_ID_OFF, B_NAMES, B_NAMES_OFF,
    B_PROPS_OFF, B_QUEUE_ID, B_QUEUE_OFFSET, B_RECONSUME, B_STORE, B_STORE_OFF, B_STORE_SIZE,
    B_STORE_TS, B_SYS_FLAG, B_TAGS, B_TAGS_OFF, B_TAGS_VALID, B_TOPIC, B_TOPIC_OFF,
    B_VALUES, B_VALUES_OFF, SLACK, release, room, row_width,
)
from rocketstore._native.hosts cimport HOST_TEXT, format_host_into
from rocketstore._native.includes.byteorder cimport rs_get_i32, rs_get_i64
from rocketstore._native.includes.crc32 cimport rs_crc32_init
from rocketstore._native.includes.hex cimport rs_hex16, rs_hex_upper
from rocketstore._native.includes.prefetch cimport rs_prefetch256, rs_prefetch_w
from rocketstore._native.includes.scan cimport (
    rs_ascii16, rs_copy32s, rs_ctz64, rs_find_space, rs_load_raw64, rs_scan64,
)
from rocketstore._native.includes.vocabulary cimport (
    PROPERTY_KEYS, PROPERTY_KEYS_LEN, PROPERTY_TAGS, PROPERTY_TAGS_LEN,
)
from rocketstore._native.properties cimport Pair, parse_props, utf8_sanitize, utf8_valid
from rocketstore._native.record cimport (
    REC_CORRUPT, REC_OK, RecordInfo, TopicCache, check_record_cached, check_record_into,
)

rs_crc32_init()     # this module's copy of the CRC tables (check_record is inlined here)

cdef enum:
    PROPS_SCRATCH = 3 * 32768   # sanitized properties: an invalid byte becomes 3 bytes
    TOPIC_SCRATCH = 3 * 256
    HEADROOM_MIN = 4096
    PREFETCH_AHEAD = 2048       # bytes ahead of the record being decoded
    WRITE_AHEAD = 512           # bytes ahead of each output stream's end


cdef inline HostCache* _host(HostCache* cache, int slots, const char* raw,
                             int alen) noexcept nogil:
    """The host at raw (address + port), formatted once: a direct-mapped cache of `slots`
    (a power of two) entries, so a few producers' born hosts interleaving stay cached."""
    cdef uint64_t a, b = 0
    cdef uint32_t d = 0
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
        c.text_len = format_host_into(<const unsigned char*>raw, alen, rs_get_i32(raw + alen),
                                      c.text)
        rs_hex_upper(c.hex, <const unsigned char*>raw, alen + 4)
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


cdef inline void _parse_topic(Ctx* c, const char* p, Rec* r) noexcept nogil:
    """The record's topic, sanitized when it is not valid UTF-8, and where its properties
    are (in the source: _parse_props_table may move them to a sanitized copy)."""
    cdef const char* topic = p + r.info.topic_offset
    r.topic = topic
    r.topic_len = r.info.topic_len
    r.topic_end = c.base + c.limit
    if not (rs_ascii16(topic, r.info.topic_len, r.topic_end)
            or utf8_valid(<const unsigned char*>topic, r.info.topic_len)):
        if c.topic_buf == NULL:
            c.topic_buf = <char*>malloc(TOPIC_SCRATCH + SLACK)
        if c.topic_buf == NULL:
            c.oom = 1
            r.topic_len = 0
        else:
            r.topic_len = <int32_t>utf8_sanitize(<const unsigned char*>topic, r.info.topic_len,
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
    if not parse_props(props, r.props_len, &c.pt, &r.pr):
        if c.props_buf == NULL:
            c.props_buf = <char*>malloc(PROPS_SCRATCH + SLACK)
        if c.props_buf == NULL:
            c.oom = 1
            r.props_len = 0
        else:
            r.props_len = <int32_t>utf8_sanitize(<const unsigned char*>props,
                                                  r.info.props_len, c.props_buf)
            r.props = c.props_buf
            r.props_end = c.props_buf + PROPS_SCRATCH
        parse_props(r.props, r.props_len, &c.pt, &r.pr)
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
    if name_len == PROPERTY_TAGS_LEN and memcmp(name, PROPERTY_TAGS, PROPERTY_TAGS_LEN) == 0:
        r.tag_v = name + PROPERTY_TAGS_LEN + 1
        r.tag_n = value_len
    elif name_len == PROPERTY_KEYS_LEN and memcmp(name, PROPERTY_KEYS, PROPERTY_KEYS_LEN) == 0:
        r.key_v = name + PROPERTY_KEYS_LEN + 1
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
            if room(&c.b[i], (cap + 1) * c.row_width[i]) < 0:
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
    if (room(&c.b[B_TOPIC], f.topic + h) < 0
            or room(&c.b[B_BORN], f.born + h) < 0
            or room(&c.b[B_STORE], f.store + h) < 0
            or room(&c.b[B_MSG_ID], f.msg_id + h) < 0
            or room(&c.b[B_TAGS], f.tags + h) < 0
            or room(&c.b[B_KEYS], f.keys + h) < 0
            or room(&c.b[B_KEYS_OFF], 4 * (f.key_tokens + 1) + h) < 0
            or room(&c.b[B_NAMES], f.names + h) < 0
            or room(&c.b[B_VALUES], f.values + h) < 0
            or room(&c.b[B_NAMES_OFF], 4 * (f.pairs + 1) + h) < 0
            or room(&c.b[B_VALUES_OFF], 4 * (f.pairs + 1) + h) < 0
            or (c.include_body and not c.body_view
                and room(&c.b[B_BODY], f.body + h) < 0)):
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


cdef void walk_region(Ctx* c, int64_t start, int64_t end, int64_t max_records) noexcept nogil:
    """Decode the records starting in [start, end); they may extend to c.limit."""
    cdef int64_t pos = start
    cdef Rec r
    cdef int rc
    cdef TopicCache topics
    topics.ptr = NULL
    topics.len = -1
    memset(&r.info, 0, sizeof(RecordInfo))
    r.info.status = REC_OK
    while pos < end and (max_records < 0 or c.rows < max_records):
        if pos + PREFETCH_AHEAD + 256 <= c.limit:
            rs_prefetch256(c.base + pos + PREFETCH_AHEAD)
        if check_record_cached(c.base + pos, c.limit - pos, c.check_crc,
                               c.base_offset + pos if c.base_offset >= 0 else -1,
                               &r.info, &topics) != REC_OK:
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


cdef void walk_positions(Ctx* c, const int64_t* positions, int64_t n) noexcept nogil:
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


cdef int ctx_init(Ctx* c, int64_t base_offset, bint include_body, bint check_crc, bint spark,
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
        c.row_width[i] = row_width(i)
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
        ctx_free(c)
        raise MemoryError()
    return 0


cdef void ctx_free(Ctx* c) noexcept:
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
        release(&c.b[i])

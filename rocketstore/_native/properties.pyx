# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A record's properties as RocketMQ's MessageDecoder.string2messageProperties reads them:
pairs split on \\x02, name and value on the first \\x01 (the value keeps any later \\x01);
pairs with no \\x01, an empty name or an empty value are dropped; a name seen again takes the
new value in the first one's place. Invalid UTF-8 is replaced: each maximal invalid subpart
becomes one U+FFFD (Unicode's recommended practice, as Python's decoder and Java's)."""
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp

from rocketstore._native.includes.python cimport PyUnicode_DecodeUTF8
from rocketstore._native.includes.scan cimport rs_first_byte, rs_load_le64, rs_special
from rocketstore._native.includes.vocabulary cimport (
    PROPERTY_KEYS, PROPERTY_KEYS_LEN, PROPERTY_TAGS, PROPERTY_TAGS_LEN,
)


cdef Py_ssize_t utf8_sanitize(const unsigned char* p, Py_ssize_t n, char* out) noexcept nogil:
    cdef Py_ssize_t i = 0, o = 0
    cdef int r, k
    while i < n:
        r = utf8_seq(p, i, n)
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
    cdef Py_ssize_t m = utf8_sanitize(&v[0], n, <char*>&o[0])
    return bytes(out[:m])


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
    if name_len == PROPERTY_TAGS_LEN and memcmp(name, PROPERTY_TAGS, PROPERTY_TAGS_LEN) == 0:
        out.tags = out.npairs
    elif name_len == PROPERTY_KEYS_LEN and memcmp(name, PROPERTY_KEYS, PROPERTY_KEYS_LEN) == 0:
        out.keys = out.npairs
    out.npairs += 1


cdef bint parse_props(const char* text, int32_t n, PairTable* pt, Props* out) noexcept nogil:
    """8 bytes at a time; see properties.pxd."""
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
                r = utf8_seq(u, i, n)
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


cdef dict properties_dict(const char* text, int32_t n):
    cdef PairTable pt
    cdef Props pr
    cdef char* clean = NULL
    cdef dict out = {}
    cdef Pair* p
    cdef int32_t j
    pt.cap = 32
    pt.oom = 0
    pt.items = <Pair*>malloc(pt.cap * sizeof(Pair))
    if pt.items == NULL:
        raise MemoryError()
    try:
        if not parse_props(text, n, &pt, &pr):
            clean = <char*>malloc(3 * <size_t>n)
            if clean == NULL:
                raise MemoryError()
            n = <int32_t>utf8_sanitize(<const unsigned char*>text, n, clean)
            parse_props(clean, n, &pt, &pr)
        if pt.oom:
            raise MemoryError()
        for j in range(pr.npairs):
            p = &pt.items[j]
            out[PyUnicode_DecodeUTF8(p.name, p.name_len, NULL)] = \
                PyUnicode_DecodeUTF8(p.value, p.value_len, NULL)
        return out
    finally:
        free(pt.items)
        free(clean)

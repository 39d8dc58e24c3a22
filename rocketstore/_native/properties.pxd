# A record's properties (RocketMQ's string2messageProperties): the three names the dispatch
# reads (TAGS, KEYS, UNIQ_KEY), the whole map as a pair table, and the UTF-8 checks the
# decoders share.
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcmp, memcpy

from rocketstore._native.hashes cimport hash_text
from rocketstore._native.includes.scan cimport rs_find_pair_end
from rocketstore._native.includes.vocabulary cimport (
    NAME_VALUE_SEPARATOR, PROPERTY_KEYS, PROPERTY_KEYS_LEN, PROPERTY_TAGS, PROPERTY_TAGS_LEN,
    PROPERTY_UNIQ_KEY, PROPERTY_UNIQ_KEY_LEN,
)

cdef enum:
    MAX_PAIRS = 8200            # a kept pair needs >= 4 bytes of the <= 32767-byte properties


cdef struct KeyProps:
    const char* tags        # each value, NULL when absent
    const char* keys
    const char* uniq
    int32_t tags_len
    int32_t keys_len
    int32_t uniq_len


cdef inline void find_key_props(const char* props, int32_t props_len, KeyProps* out) noexcept nogil:
    """TAGS, KEYS and UNIQ_KEY in one walk of a record's properties, as RocketMQ's
    string2messageProperties reads them: pairs split on \x02, name and value on the first
    \x01, both non-empty; a later pair with the same name wins (HashMap.put). Only the pair
    ends are searched for: a pair is one of the three when it starts with the name and a
    \x01 (a name holds no \x01, so that is its first). Reads only [props, props_len)."""
    cdef const char* p = props
    cdef const char* end = props + props_len
    cdef const char* q
    cdef Py_ssize_t n
    out.tags = out.keys = out.uniq = NULL
    out.tags_len = out.keys_len = out.uniq_len = 0
    while p < end:
        q = rs_find_pair_end(p, end)
        n = q - p
        if (n > PROPERTY_TAGS_LEN + 1 and p[PROPERTY_TAGS_LEN] == NAME_VALUE_SEPARATOR
                and memcmp(p, PROPERTY_TAGS, PROPERTY_TAGS_LEN) == 0):
            out.tags = p + PROPERTY_TAGS_LEN + 1
            out.tags_len = <int32_t>(n - PROPERTY_TAGS_LEN - 1)
        elif (n > PROPERTY_KEYS_LEN + 1 and p[PROPERTY_KEYS_LEN] == NAME_VALUE_SEPARATOR
                and memcmp(p, PROPERTY_KEYS, PROPERTY_KEYS_LEN) == 0):
            out.keys = p + PROPERTY_KEYS_LEN + 1
            out.keys_len = <int32_t>(n - PROPERTY_KEYS_LEN - 1)
        elif (n > PROPERTY_UNIQ_KEY_LEN + 1 and p[PROPERTY_UNIQ_KEY_LEN] == NAME_VALUE_SEPARATOR
                and memcmp(p, PROPERTY_UNIQ_KEY, PROPERTY_UNIQ_KEY_LEN) == 0):
            out.uniq = p + PROPERTY_UNIQ_KEY_LEN + 1
            out.uniq_len = <int32_t>(n - PROPERTY_UNIQ_KEY_LEN - 1)
        p = q + 1


cdef inline int64_t tags_code_in(const KeyProps* kp) noexcept nogil:
    """tagsCode from the properties find_key_props read: hashCode of TAGS, 0 when absent."""
    if kp.tags == NULL:
        return 0
    return <int32_t>hash_text(0, <const unsigned char*>kp.tags, kp.tags_len)


cdef inline int64_t tags_code_of(const char* props, int32_t props_len) noexcept nogil:
    """tagsCode of a record: Java hashCode of its TAGS property value, 0 when absent."""
    cdef KeyProps kp
    find_key_props(props, props_len, &kp)
    return tags_code_in(&kp)


# ---- UTF-8 -----------------------------------------------------------------------------------

cdef inline int utf8_seq(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
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


cdef inline bint utf8_valid(const unsigned char* p, Py_ssize_t n) noexcept nogil:
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
        r = utf8_seq(p, i, n)
        if r < 0:
            return False
        i += r
    return True


# Copy p to out with every maximal invalid subpart replaced by U+FFFD (EF BF BD); out must
# hold 3 * n bytes. Returns the output length.
cdef Py_ssize_t utf8_sanitize(const unsigned char* p, Py_ssize_t n, char* out) noexcept nogil


# ---- the pair table --------------------------------------------------------------------------

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


# string2messageProperties over text in one scan: pairs (unique names in first-seen order,
# last value wins) and the TAGS and KEYS entries. False when text is not valid UTF-8
# (sanitize it and call again).
cdef bint parse_props(const char* text, int32_t n, PairTable* pt, Props* out) noexcept nogil
# The whole map as a dict of str (invalid UTF-8 replaced), as MessageExt.properties gives it
cdef dict properties_dict(const char* text, int32_t n)

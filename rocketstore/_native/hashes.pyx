# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Checksums and hashes: CRC-32 (BODYCRC) and Java's String.hashCode (tagsCode, index keys)."""
from libc.stdint cimport int32_t, uint32_t

from rocketstore._native.includes.crc32 cimport rs_crc32, rs_crc32_impl, rs_crc32_init
from rocketstore._native.includes.python cimport (
    PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ,
)

rs_crc32_init()

CRC32_IMPL = rs_crc32_impl().decode()


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


def utf8_java_hash(data, int hash_from=0):
    """Java hashCode of new String(data, UTF_8), continuing from hash_from (for tests)."""
    cdef const unsigned char[::1] v = data
    cdef uint32_t h = <uint32_t>hash_from
    if v.shape[0] > 0:
        h = hash_utf8(h, &v[0], v.shape[0])
    return <int32_t>h


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

# Checksums and Java's String.hashCode, shared with the decoders and the index.
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef int32_t java_hash_str(str s)
# Java String.hashCode continued over the UTF-16 units Java's UTF-8 decoder makes of s[0:n]
cdef uint32_t hash_utf8(uint32_t h, const unsigned char* s, Py_ssize_t n) noexcept nogil


cdef inline uint32_t hash_text(uint32_t h, const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """hash_utf8, with ASCII text hashed here, eight bytes a step (Java's h*31 + c, unrolled:
    the eight bytes' terms do not wait on h); from the first non-ASCII byte on, hash_utf8."""
    cdef uint64_t w
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        if w & 0x8080808080808080ULL:
            return hash_utf8(h, s + i, n - i)
        h = (h * 2487512833u                                    # 31^8 mod 2^32
             + <uint32_t>s[i] * 1742810335u + <uint32_t>s[i + 1] * 887503681u
             + <uint32_t>s[i + 2] * 28629151u + <uint32_t>s[i + 3] * 923521u
             + <uint32_t>s[i + 4] * 29791u + <uint32_t>s[i + 5] * 961u
             + <uint32_t>s[i + 6] * 31u + <uint32_t>s[i + 7])
        i += 8
    while i < n and s[i] < 0x80:
        h = h * 31 + s[i]
        i += 1
    return hash_utf8(h, s + i, n - i) if i < n else h

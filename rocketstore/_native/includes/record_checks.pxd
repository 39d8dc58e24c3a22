# src/rs_record.h: record fields the body CRC does not cover, and the resync search.
from libc.stdint cimport int32_t, int64_t


cdef extern from "rs_record.h" nogil:
    const unsigned char rs_topic_chars[256]
    bint rs_topic_legal(const char* p, int32_t n)
    bint rs_short_equal(const char* a, const char* b, int32_t n)
    int64_t rs_find_either_byte(const char* p, int64_t n, unsigned char a, unsigned char b)

# src/rs_scan.h: word-at-a-time byte scans over text fields.
from libc.stdint cimport int32_t, int64_t, uint64_t


cdef extern from "rs_scan.h" nogil:
    uint64_t rs_load_le64(const char* p)
    uint64_t rs_load_raw64(const char* p)
    int rs_ctz64(uint64_t m)
    int rs_first_byte(uint64_t m)
    uint64_t rs_special(uint64_t w)
    bint rs_has_byte_below3(const char* p, size_t n)
    const char* rs_find_pair_end(const char* p, const char* end)
    const char* rs_find_space(const char* s, const char* e, const char* readable_end)
    void rs_scan64(const char* p, uint64_t* seps, uint64_t* high)
    bint rs_ascii16(const char* p, int32_t n, const char* readable_end)
    void rs_copy32s(char* dst, const char* src, int64_t n)

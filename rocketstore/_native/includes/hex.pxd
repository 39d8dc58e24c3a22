# src/rs_hex.h: hex text of ids.
from libc.stdint cimport uint64_t


cdef extern from "rs_hex.h" nogil:
    const char* rs_hex_lower_digits
    const char* rs_hex_upper_digits
    void rs_hex_upper(char* out, const unsigned char* p, size_t n)
    void rs_hex16(char* out, uint64_t v)

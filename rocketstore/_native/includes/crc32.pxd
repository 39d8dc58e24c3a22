# src/rs_crc32.h: CRC-32 (zlib's). Each extension that calls rs_crc32 has its own copy of
# the tables and calls rs_crc32_init() when it is imported.
from libc.stdint cimport uint32_t


cdef extern from "rs_crc32.h" nogil:
    void rs_crc32_init()
    uint32_t rs_crc32(uint32_t crc, const void* buf, size_t length)
    const char* rs_crc32_impl()

# src/rs_bytes.h: big-endian loads and stores (RocketMQ's on-disk byte order).
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t


cdef extern from "rs_bytes.h" nogil:
    void rs_put_u16(char* p, unsigned short v)
    void rs_put_u32(char* p, uint32_t v)
    void rs_put_u64(char* p, unsigned long long v)
    int16_t rs_get_i16(const char* p)
    int32_t rs_get_i32(const char* p)
    int64_t rs_get_i64(const char* p)
    unsigned short rs_get_u16(const char* p)
    uint32_t rs_get_u32(const char* p)

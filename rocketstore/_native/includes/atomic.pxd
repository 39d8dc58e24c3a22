# src/rs_atomic.h: atomics for fields shared with threads running without the GIL, and fences.
from libc.stdint cimport int64_t


cdef extern from "rs_atomic.h" nogil:
    int64_t rs_load_i64(const int64_t* p)
    int64_t rs_load_acquire_i64(const int64_t* p)
    void rs_store_release_i64(int64_t* p, int64_t v)
    void rs_store_max_i64(int64_t* p, int64_t v)
    int rs_load_int(const int* p)
    int rs_load_acquire_int(const int* p)
    void rs_store_int(int* p, int v)
    void rs_release_fence()
    void rs_acquire_fence()
    void rs_touch_for_write(char* p)

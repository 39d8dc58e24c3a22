# src/rs_copy.h: short copies without a call.


cdef extern from "rs_copy.h" nogil:
    void rs_copy_small(char* dst, const char* src, size_t n)

# src/rs_prefetch.h: cache prefetch hints.

cdef extern from "rs_prefetch.h" nogil:
    void rs_prefetch(const char* p)
    void rs_prefetch_w(const char* p)
    void rs_prefetch256(const char* p)

# src/rs_futex.h: sleeping on a generation word.
from posix.time cimport timespec


cdef extern from "rs_futex.h" nogil:
    void rs_futex_wait(int* addr, int seen, const timespec* rel)
    void rs_futex_bump_and_wake(int* addr)
    void rs_futex_bump_and_wake_n(int* addr, int n)
    void rs_futex_wake(int* addr, int n)

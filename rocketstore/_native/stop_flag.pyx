# cython: language_level=3
"""StopFlag: how a Python thread stops a native loop that runs without the GIL."""
from rocketstore._native.includes.atomic cimport rs_load_int, rs_store_int


cdef class StopFlag:
    """A flag a native loop running without the GIL polls (MappedFile.prefault_follow)."""

    def set(self):
        rs_store_int(&self.flag, 1)

    def clear(self):
        rs_store_int(&self.flag, 0)

    def is_set(self):
        return rs_load_int(&self.flag) != 0

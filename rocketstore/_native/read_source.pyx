# cython: language_level=3, boundscheck=False, wraparound=False
"""ReadSource: the bytes a native reader (record.pyx, columnar.pyx) walks."""
from rocketstore._native.mapped_file cimport MappedFile


cdef class ReadSource:
    """The bytes a native reader walks: a MappedFile held up to its readable position, or any
    1-D bytes-like buffer. release() gives the file back; use it in a finally."""

    def __cinit__(self, source):
        cdef MappedFile mf
        self.obj = source
        if isinstance(source, MappedFile):
            mf = <MappedFile>source
            if not mf.hold():
                raise ValueError(f"mapped file {mf.file_name} is being destroyed")
            self.mf = mf
            self.base = mf.base
            self.limit = mf.read_limit()
        else:
            self.view = source
            self.limit = self.view.shape[0]
            self.base = <const char*>&self.view[0] if self.limit > 0 else NULL

    cdef void release(self):
        if self.mf is not None:
            self.mf.release()
            self.mf = None

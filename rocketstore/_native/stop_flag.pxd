# A flag that native loops running without the GIL poll (MappedFile.prefault_follow, dispatch).


cdef class StopFlag:
    """A flag a native loop running without the GIL polls (prefault_follow, dispatch)."""
    cdef int flag

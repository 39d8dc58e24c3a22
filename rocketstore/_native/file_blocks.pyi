"""Type stub of rocketstore/_native/file_blocks.pyx: blocks on disk of a mapped file (its
functions are shared with MappedFile through file_blocks.pxd)."""

DEFAULT_ALLOCATION_CHUNK: int
"""Default allocation step of a file, bytes."""

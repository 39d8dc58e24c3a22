"""Type stub of rocketstore/_native/write_through.pyx: write-through of a mapped file (its
functions are shared with MappedFile through write_through.pxd; no Python API)."""

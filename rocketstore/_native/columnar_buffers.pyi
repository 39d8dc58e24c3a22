"""Type stub of rocketstore/_native/columnar_buffers.pyx: the columnar decode's output
buffers and the cache of freed ones."""

def set_buffer_cache(max_bytes: int) -> int:
    """Bytes of freed batch memory kept for reuse (default 512 MiB, 0 disables); returns the
    previous limit."""

def buffer_cache_info() -> tuple[int, int]:
    """(buffers, bytes) of freed batch memory currently kept for reuse."""

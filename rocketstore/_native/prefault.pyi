"""Type stub of rocketstore/_native/prefault.pyx: faulting a mapped file's pages in, and the
page-cache hints' soft failures (its functions are shared with MappedFile through
prefault.pxd)."""

failure_counts: dict[str, int]
"""Soft failures of the OS hints so far: keys 'madvise', 'mlock', 'munlock'."""

"""What the MappedFile tests share: the size of the file their fixtures map (conftest.py)."""

SIZE = 64 * 1024
PAGE = 4096

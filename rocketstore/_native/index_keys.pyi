"""Type stub of rocketstore/_native/index_keys.pyx: the index keys of a record and their
keyHashes."""

from rocketstore._native.mapped_file import MappedFile

def index_key_hash(key: str) -> int:
    """keyHash of an index key (``topic#key``): abs(Java hashCode), MIN_VALUE -> 0."""

def record_index_key_hashes(mf: MappedFile, pos: int) -> list[int]:
    """keyHashes the record at pos of mf gets in the index (empty for a ROLLBACK record)."""

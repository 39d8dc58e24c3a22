"""Type stub of rocketstore/_native/properties.pyx: a record's properties as RocketMQ reads
them, and the UTF-8 replacement the decoders share."""

from typing_extensions import Buffer

def sanitize_utf8(data: Buffer) -> bytes:
    """data with each maximal invalid UTF-8 subpart replaced by U+FFFD, as the decoders
    read it (== data.decode('utf-8', 'replace').encode())."""

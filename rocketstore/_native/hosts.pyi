"""Type stub of rocketstore/_native/hosts.pyx: host text and offsetMsgId."""

from typing import TypeAlias

from typing_extensions import Buffer

_Host: TypeAlias = str | tuple[str, int]
"""'a.b.c.d:port', '[v6]:port', or an (address, port) tuple."""

def parse_host(host: _Host) -> tuple[bytes, int]:
    """_Host -> (4- or 16-byte raw address, port). ValueError naming the text if invalid."""

def format_host(raw: Buffer, port: int) -> str:
    """Raw 4- or 16-byte address and port -> 'a.b.c.d:port' or '[v6]:port' (RFC 5952, an
    IPv4-mapped address as '[::ffff:a.b.c.d]:port')."""

def make_msg_id(store_host: _Host, offset: int) -> str:
    """offsetMsgId (store address + port + CommitLog offset, uppercase hex)."""

def parse_msg_id(msg_id: str) -> tuple[str, int]:
    """offsetMsgId -> (store host 'ip:port', CommitLog offset)."""

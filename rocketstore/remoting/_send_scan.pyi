"""Type stub of rocketstore/remoting/_send_scan.pyx: SEND headers in the Java producer's shape,
read by a bounds-checked scanner (msgspec and orjson are its reference)."""

from rocketstore.remoting._command import RemotingCommand

def scan_send_header(header: bytes) -> RemotingCommand | None:
    """The SEND command of a header in the Java producer's shape, or None (the library decides)."""

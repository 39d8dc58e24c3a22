"""Type stub of rocketstore/broker/processors/send/_send_header.pyx: a SEND request's header
and properties text, read natively (once per message in the broker)."""

from typing import final

class SendHeaderError(ValueError):
    """A SEND header field that is missing or malformed; ``field`` is its wire name."""

    field: str
    reason: str
    def __init__(self, field: str, message: str) -> None: ...

@final
class SendRequestHeader:
    """SEND_MESSAGE's (and V2's) request header."""

    producer_group: str
    topic: str
    default_topic: str
    properties: str | None
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    reconsume_times: int
    max_reconsume_times: int | None
    unit_mode: bool
    batch: bool

def decode_send_header(ext: dict[str, object], v2: bool = False) -> SendRequestHeader:
    """The SEND header of a request's ext fields (v2: SEND_MESSAGE_V2's one-letter names)."""

def decode_request_header(ext: dict[str, object], v2: bool = False) -> SendRequestHeader:
    """decode_send_header, a bad field raising remoting's HeaderFieldError."""

def parse_properties_text(text: str | None) -> dict[str, str]:
    """RocketMQ's string2messageProperties (pairs with an empty name or value dropped)."""

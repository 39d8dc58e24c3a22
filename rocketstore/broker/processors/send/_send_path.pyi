"""Type stub of rocketstore/broker/processors/send/_send_path.pyx: the send rules, with
SEND_MESSAGE / SEND_MESSAGE_V2's common case in one native call."""

from collections.abc import Callable, Collection
from typing import Any, final

from rocketstore._native.message import Message
from rocketstore._native.record_writer import PutMessageResult, PutMessagesResult
from rocketstore.broker.processors.send._send_header import SendRequestHeader
from rocketstore.remoting._command import RemotingCommand
from rocketstore.remoting._frames import FrameWriter
from rocketstore.remoting._pump import DirectHandler

#: MESSAGE_ILLEGAL's remark for a message whose properties hold NUL.
NUL_IN_PROPERTIES: str
#: what SendPath.stored_batch_reply returns when the reply is in the frame writer
WRITTEN: object

def properties_and_refusal(text: str | None) -> tuple[dict[str, str], str | None]:
    """The properties of a text and MESSAGE_ILLEGAL's remark when a value holds \\x01."""

def illegal_properties(ctx: Any, request: RemotingCommand, topic: str, remark: str
                       ) -> RemotingCommand:
    """MESSAGE_ILLEGAL for a message whose properties the store cannot write, logged once."""

@final
class SendPath(DirectHandler):
    """The request handler of SEND_MESSAGE (v2=False) or SEND_MESSAGE_V2 (v2=True) for a
    SendMessageProcessor, and the send rules its entry points run."""

    def __init__(
        self,
        processor: Any,
        v2: bool,
        *,
        topics: Any,
        not_allowed_topics: Collection[str],
        append: Callable[[Message, int], PutMessageResult],
        memory_append: Callable[[Message, int], PutMessageResult] | None = None,
        batch: bool = False,
    ) -> None: ...
    def __call__(self, ctx: Any, request: RemotingCommand) -> Any: ...
    def read_header(self, request: RemotingCommand) -> SendRequestHeader:
        """The request's SEND header (the frame decoder's typed fields, else the ext fields);
        a bad field raises HeaderFieldError naming it."""
    def send(self, ctx: Any, request: RemotingCommand, header: SendRequestHeader) -> Any:
        """The reply to a send whose header is read (or an awaitable of it): every rule."""
    def stored_reply(
        self, request: RemotingCommand, msg_id: str, queue_id: int, queue_offset: int
    ) -> RemotingCommand:
        """SUCCESS with the fields of a stored send."""
    def stored_batch_reply(
        self, request: RemotingCommand, result: PutMessagesResult, queue_id: int,
        writer: FrameWriter | None, wait: bool
    ) -> Any:
        """The reply to a stored batch: WRITTEN when it went into ``writer``; with ``wait`` a
        DeferredReply given once stored."""

"""Type stub of rocketstore/broker/_send_path.pyx: SEND_MESSAGE / SEND_MESSAGE_V2's common
case in one native call (every other send goes to the Python processor)."""

from collections.abc import Callable, Collection
from typing import Any, final

from rocketstore._native.message import Message
from rocketstore._native.record_writer import PutMessageResult
from rocketstore.remoting._command import RemotingCommand
from rocketstore.remoting._pump import DirectHandler

@final
class SendPath(DirectHandler):
    """The request handler of SEND_MESSAGE (v2=False) or SEND_MESSAGE_V2 (v2=True) for a
    SendMessageProcessor, which serves every send but the common one."""

    def __init__(
        self,
        processor: Any,
        v2: bool,
        *,
        topics: Any,
        not_allowed_topics: Collection[str],
        append: Callable[[Message, int], PutMessageResult],
    ) -> None: ...
    def __call__(self, ctx: Any, request: RemotingCommand) -> Any: ...

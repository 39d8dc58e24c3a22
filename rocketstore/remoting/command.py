"""RemotingCommand: one request or response of RocketMQ's remoting protocol.

The class is compiled (``_command``): the decoder builds one per frame and a processor one per
reply. ``create_request`` and ``create_response`` are the usual ways to make one.
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketstore.remoting._command import RemotingCommand, create_request, create_response

#: One contiguous buffer: what a frame's body may be made of.
Buffer = bytes | bytearray | memoryview
#: A body: nothing, one buffer, or several written back to back without being joined (a PULL
#: reply passes mapped-file memoryviews this way, straight to the socket).
Body = Buffer | Sequence[Buffer] | None

__all__ = ["Body", "Buffer", "RemotingCommand", "create_request", "create_response"]

"""RocketMQ's remoting protocol on asyncio: frames, commands, servers and clients.

Never imports the store or the broker (DESIGN.md, "The house").
"""

from rocketstore.remoting.client import InvokeCallback, RemotingClient
from rocketstore.remoting.codec import (
    MAX_FRAME_BYTES,
    FrameDecoder,
    decode,
    decode_frame,
    encode,
    encode_frame,
)
from rocketstore.remoting.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rocketstore.remoting.command import RemotingCommand, create_request, create_response
from rocketstore.remoting.config import RemotingClientConfig, RemotingServerConfig, parse_address
from rocketstore.remoting.connection import RemotingConnection, RequestHandler
from rocketstore.remoting.errors import (
    FrameError,
    HeaderError,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rocketstore.remoting.headers import HeaderFieldError, decode_header, encode_header
from rocketstore.remoting.server import RemotingServer

__all__ = [
    "FLAG_ONEWAY", "FLAG_RESPONSE", "MAX_FRAME_BYTES", "FrameDecoder", "FrameError", "HeaderError",
    "HeaderFieldError", "InvokeCallback", "LanguageCode", "RemotingClient", "RemotingClientConfig",
    "RemotingCommand", "RemotingConnectError", "RemotingConnection", "RemotingError",
    "RemotingSendRequestError", "RemotingServer", "RemotingServerConfig", "RemotingTimeoutError",
    "RequestCode", "RequestHandler", "ResponseCode", "SerializeType", "create_request",
    "create_response", "decode", "decode_frame", "decode_header", "encode", "encode_frame",
    "encode_header", "parse_address",
]

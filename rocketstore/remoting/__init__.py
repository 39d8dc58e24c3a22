"""RocketMQ's remoting protocol on asyncio: frames, commands, servers and clients.

`rocketstore.remoting` speaks RocketMQ 4.9's remoting protocol on asyncio (uvloop when
installed); `rocketstore.namesrv` is a name server on top of it.
The wire format is in docs/remoting.md; what the C++ client sends is in its section 9,
"Client compatibility: the C++ client". Neither package imports the store or the broker.

## Commands

```python
from rocketstore.remoting import RemotingCommand, create_request, create_response, RequestCode, ResponseCode

request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
reply = create_response(request, ResponseCode.TOPIC_NOT_EXIST, "no route")   # opaque, serialize type, flag
```

`RemotingCommand(code, language, version, opaque, flag, remark, ext_fields, body, serialize_type)`;
`ext_fields` are `dict[str, str]` (the C++ client's JSON numbers arrive as their text); `body` is
`bytes`, a `memoryview`, or a list of buffers written back to back without being joined. The
connection that sends a request sets its `opaque`; a reply takes the request's opaque and header
serialization (the C++ client does not understand binary headers, so never answer it in binary).

Typed header fields: `headers.require_int(cmd.ext_fields, "queueId")`, or a dataclass with
`decode_header(cmd.ext_fields, SendMessageRequestHeader)` (snake_case fields, camelCase keys,
`field(metadata={"key": "a"})` for SEND_MESSAGE_V2's one-letter names). Errors are
`HeaderFieldError` naming the field; a processor that lets one escape is answered SYSTEM_ERROR
with that message.

## Codec

`encode(cmd)`, `encode_frame(cmd)` (buffers to write: a large body's own buffers uncopied),
`decode(frame)`, `FrameDecoder(max_frame_bytes).feed(data)` (commands, with a `HeaderError` in
place of a frame whose header is bad; `FrameError` when the stream is corrupt) and
`FrameWriter` (frames queued for one write) are native (`_frames`); `tests/reference/frame_codec.py`
has the same functions in plain Python, the reference they are tested against.

## Servers

```python
server = RemotingServer(RemotingServerConfig(listen_port=10911, bind_address="0.0.0.0"))
server.register_processor(RequestCode.SEND_MESSAGE, on_send)
server.register_default_processor(on_anything_else)        # else REQUEST_CODE_NOT_SUPPORTED
server.add_connection_listener(on_open=..., on_close=...)  # ctx -> None
await server.start(); ...; await server.stop()
```

A processor is `handler(ctx, request)` returning a `RemotingCommand`, `None` (no reply now:
answer later with `ctx.send_response(request, response)`, e.g. a held long-poll), or an awaitable
of either. `async def` handlers work (one task each); a plain function is cheaper, and may return
a future that the store's threads resolve (`loop.call_soon_threadsafe(fut.set_result, ...)`):
that future is never cancelled by the transport, so it can be shared by many requests.

`ctx` is the `RemotingConnection`: `remote_address` ("ip:port"), `attributes` (a dict for the
owner), `received_at` (loop time the request's bytes were read: a request held back by a
pause is dispatched later, and a broker refuses a send that waited too long), `await ctx.invoke(request, timeout)` to ask the client something
(CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO), `ctx.invoke_oneway(request)`
(NOTIFY_CONSUMER_IDS_CHANGED), `ctx.close()`.

Limits (config fields, RocketMQ's names where it has them): `max_frame_bytes` (16 MiB; a larger
frame closes the connection), `server_channel_max_idle_time_seconds` (120), write buffer
high/low water marks (1 MiB / 256 KiB: over the high mark the connection stops being read, and
stops dispatching what it already read, until below the low mark), `max_inflight_requests`
(10,000 handlers running per connection before it stops being read).

## Clients

```python
client = RemotingClient(RemotingClientConfig())
client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_ids_changed)
client.add_connection_closed_listener(lambda address, connection: ...)
response = await client.invoke("127.0.0.1:9876", request, timeout=3.0)     # seconds
await client.invoke_oneway(address, request)
task = client.invoke_async(address, request, 3.0, lambda response, error: ...)
await client.close()
```

Errors: `RemotingConnectError`, `RemotingTimeoutError`, `RemotingSendRequestError` (closed
before the response), all `RemotingError`. A reply with an error code is returned, not raised.
"""

from rocketstore.remoting._deferred import DeferredReply
from rocketstore.remoting.client import InvokeCallback, RemotingClient, connected_to_itself
from rocketstore.remoting.codec import (
    MAX_FRAME_BYTES,
    FrameDecoder,
    FrameWriter,
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
    "FLAG_ONEWAY", "FLAG_RESPONSE", "DeferredReply", "MAX_FRAME_BYTES", "FrameDecoder", "FrameError", "FrameWriter", "HeaderError",
    "HeaderFieldError", "InvokeCallback", "LanguageCode", "RemotingClient", "RemotingClientConfig",
    "RemotingCommand", "RemotingConnectError", "RemotingConnection", "RemotingError",
    "RemotingSendRequestError", "RemotingServer", "RemotingServerConfig", "RemotingTimeoutError",
    "RequestCode", "RequestHandler", "ResponseCode", "SerializeType", "connected_to_itself", "create_request",
    "create_response", "decode", "decode_frame", "decode_header", "encode", "encode_frame",
    "encode_header", "parse_address",
]

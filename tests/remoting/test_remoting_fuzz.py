"""Corrupt input against a live server: it never crashes, answers what it can, closes only the
connection that sent garbage, and keeps serving the others."""

from __future__ import annotations

import asyncio
import random
import struct

import orjson
import remoting_helpers
from remoting_helpers import read_frame

from rocketstore.remoting import (
    RemotingClient,
    RemotingServer,
    RemotingServerConfig,
    ResponseCode,
    create_request,
    create_response,
    decode,
    encode,
)

ECHO = 1

arun = remoting_helpers.arun


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


async def exchange(port: int, data: bytes, timeout: float = 2.0) -> tuple[list[bytes], bool]:
    """Send ``data`` then an ECHO request; return the frames that came back and whether the
    server closed the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    probe = create_request(ECHO, body=b"probe")
    probe.opaque = 123456
    writer.write(data + encode(probe))
    frames: list[bytes] = []
    closed = False
    try:
        while True:
            got = await asyncio.wait_for(read_frame(reader), timeout)
            frames.append(got)
            if decode(got).opaque == 123456:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        closed = True
    except asyncio.TimeoutError:
        pass
    writer.close()
    return frames, closed


async def healthy(client: RemotingClient, address: str) -> None:
    response = await client.invoke(address, create_request(ECHO, body=b"alive"), timeout=5)
    assert response.body == b"alive"


def test_corrupt_frames(arun) -> None:
    async def main() -> None:
        server = RemotingServer(RemotingServerConfig(listen_port=0, max_frame_bytes=1 << 20))
        server.register_processor(ECHO, lambda ctx, req: create_response(req, body=req.body))
        async with server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            await healthy(client, address)

            # Stream corruption: the connection is closed, the probe is never answered.
            for data in (
                struct.pack(">I", 2**31) + b"x" * 100,  # length up to 2^31
                struct.pack(">I", 0xFFFFFFFF),
                struct.pack(">I", 2),  # shorter than its own header length field
                struct.pack(">I", (1 << 20) + 1),  # over max_frame_bytes
            ):
                frames, closed = await exchange(server.port, data)
                assert closed and frames == [], data[:8]
                await healthy(client, address)

            # Undecodable headers with no opaque: closed too.
            for header in (b"{broken", b"[]", b'{"opaque":"x"}', b"\xff\xfe"):
                frames, closed = await exchange(server.port, frame(header))
                assert closed
                await healthy(client, address)

            # Header length over the frame: closed (nothing to answer).
            frames, closed = await exchange(server.port, struct.pack(">II", 8, 100) + b"abcd")
            assert closed

            # Wrong types with a readable opaque: answered SYSTEM_ERROR, the connection goes on.
            for header in (
                b'{"code":"abc","opaque":5}',
                b'{"code":10,"opaque":5,"extFields":"nope"}',
                b'{"code":10,"opaque":5,"remark":7}',
                b'{"code":10,"opaque":5,"language":{}}',
            ):
                frames, closed = await exchange(server.port, frame(header))
                assert not closed and len(frames) == 2, header
                error = decode(frames[0])
                assert error.opaque == 5 and error.code == ResponseCode.SYSTEM_ERROR and error.is_response
                assert decode(frames[1]).body == b"probe"

            # A bad binary header with a readable opaque: answered in binary.
            bad_binary = struct.pack(">hBhii", 10, 0, 1, 6, 0) + struct.pack(">i", 999) + struct.pack(">i", 0)
            frames, closed = await exchange(server.port, frame(bad_binary, serialize_type=1))
            assert not closed and decode(frames[0]).opaque == 6
            assert struct.unpack(">I", frames[0][4:8])[0] >> 24 == 1

            # Unknown codes: REQUEST_CODE_NOT_SUPPORTED with a remark.
            for code in (0, 9999, -5, 2**31 - 1):
                header = orjson.dumps({"code": code, "opaque": 9, "flag": 0, "language": "JAVA", "version": 1})
                frames, closed = await exchange(server.port, frame(header))
                assert not closed
                reply = decode(frames[0])
                assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and str(code) in (reply.remark or "")

    arun(main())


def test_random_garbage_never_hurts_the_server(arun) -> None:
    rng = random.Random(15)

    def garbage() -> bytes:
        kind = rng.randrange(5)
        if kind == 0:
            return rng.randbytes(rng.randrange(1, 2000))
        if kind == 1:  # plausible length, random rest
            body = rng.randbytes(rng.randrange(0, 300))
            return struct.pack(">I", len(body)) + body
        if kind == 2:  # a good frame with random bytes flipped
            data = bytearray(encode(create_request(rng.randrange(0, 400), {"k": "v" * rng.randrange(50)}, rng.randbytes(20))))
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            return bytes(data)
        if kind == 3:  # a good frame, truncated, then another
            data = encode(create_request(ECHO, body=b"t" * 50))
            return data[: rng.randrange(len(data))] + encode(create_request(ECHO))
        header = orjson.dumps({"code": rng.choice([ECHO, "x", None, [1], 1.5]), "opaque": rng.choice([1, "2", None, -1]),
                               "extFields": rng.choice([{}, {"a": 1}, {"b": [1, {"c": None}]}, "s", None])})
        return frame(header, rng.randbytes(rng.randrange(10)), serialize_type=rng.choice([0, 0, 1, 5]))

    async def main() -> None:
        server = RemotingServer(RemotingServerConfig(listen_port=0, max_frame_bytes=1 << 20))
        server.register_processor(ECHO, lambda ctx, req: create_response(req, body=req.body))
        async with server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            # A steady connection runs beside the garbage and must see every answer.
            for round_ in range(20):
                results = await asyncio.gather(
                    *(exchange(server.port, garbage(), timeout=0.5) for _ in range(10)),
                    healthy(client, address),
                )
                assert len(results) == 11, round_
            await healthy(client, address)
            assert server.is_serving

    arun(main(), timeout=120)

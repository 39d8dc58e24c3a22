"""A peer that speaks another protocol: the stream is given up at once with a message that says
so (quoting a few of its bytes), and the requests waiting on it fail with that message instead
of waiting for their timeout."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from rocketstore.remoting import FrameDecoder, RequestCode, create_request
from rocketstore.remoting.client import RemotingClient
from rocketstore.remoting.errors import FrameError, RemotingSendRequestError

HTTP_ANSWER = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def test_text_where_a_frame_length_belongs_is_named_as_another_protocol() -> None:
    with pytest.raises(FrameError) as info:
        FrameDecoder().feed(HTTP_ANSWER)
    text = str(info.value)
    assert text.startswith("not a RocketMQ server or client: it sent b'HTTP/1.1 400 Bad Request")
    assert "1213486164" not in text and len(text) < 200


def test_binary_oversized_length_keeps_the_limit_message() -> None:
    with pytest.raises(FrameError, match=r"frame of 4278190084 bytes is over the 16777216-byte limit"):
        FrameDecoder().feed(b"\xff\x00\x00\x00" + b"\x00" * 8)


def test_a_client_request_to_an_http_port_fails_at_once_saying_why() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]

    def answer_once() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(HTTP_ANSWER)
            time.sleep(0.5)

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()

    async def ask() -> tuple[BaseException, float]:
        async with RemotingClient() as client:
            started = time.monotonic()
            try:
                await client.invoke(f"127.0.0.1:{port}", create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 10)
            except RemotingSendRequestError as exc:
                return exc, time.monotonic() - started
            raise AssertionError("the request to an HTTP port succeeded")

    try:
        error, waited = asyncio.run(ask())
    finally:
        thread.join(10)
        server.close()
    assert "not a RocketMQ server or client: it sent b'HTTP/1.1 400" in str(error)
    assert waited < 5, waited        # not the request's 10 s timeout

"""Replies whose body is a sequence of buffers (a PULL reply's mapped-file memoryviews) go to
the socket as they are, in order, between small replies joined around them, on both loops."""

from __future__ import annotations

import asyncio
import mmap
import os
from pathlib import Path

import remoting_helpers

from rocketstore.remoting import (
    RemotingClient,
    RemotingServer,
    RemotingServerConfig,
    create_request,
    create_response,
)

arun = remoting_helpers.arun
PULL = 11
SMALL = 12


def test_mapped_file_views_are_sent_in_order(arun, tmp_path: Path) -> None:
    record = 1024
    path = tmp_path / "commitlog"
    path.write_bytes(b"".join(bytes([i % 251]) * record for i in range(256)))
    with open(path, "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)
    view = memoryview(mapped)

    def pull(ctx: object, request):  # type: ignore[no-untyped-def]
        # like a PULL reply: n records out of the mapped file, one view each, not joined
        start, count = int(request.ext_fields["start"]), int(request.ext_fields["count"])
        return create_response(request, body=[view[(start + i) * record : (start + i + 1) * record]
                                              for i in range(count)])

    async def main() -> None:
        server = RemotingServer(RemotingServerConfig(listen_port=0))
        server.register_processor(PULL, pull)
        server.register_processor(SMALL, lambda ctx, req: create_response(req, body=req.body))
        async with server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            calls = []
            for i in range(200):
                start, count = (i * 7) % 200, 1 + i % 48  # 1 KiB to 48 KiB: joined and vectored
                calls.append((start, count, client.invoke(address, create_request(
                    PULL, {"start": str(start), "count": str(count)}), timeout=20)))
                calls.append((None, i, client.invoke(address, create_request(SMALL, body=os.urandom(i)),
                                                     timeout=20)))
            results = await asyncio.gather(*(call for _, _, call in calls))
            for (start, count, _), response in zip(calls, results, strict=True):
                if start is None:
                    assert response.body_length == count
                    continue
                expected = bytes(view[start * record : (start + count) * record])
                assert response.body_bytes() == expected

    try:
        arun(main())
    finally:
        view.release()
        mapped.close()

"""ResponseTable: one timer per connection, deadlines kept per timeout group."""

from __future__ import annotations

import asyncio

import pytest
import remoting_helpers

from rocketstore.remoting import RemotingSendRequestError, RemotingTimeoutError, create_response
from rocketstore.remoting.command import create_request
from rocketstore.remoting.response_table import ResponseTable

arun = remoting_helpers.arun


def test_mixed_timeouts_expire_in_deadline_order_and_answered_ones_never(arun) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        table = ResponseTable(loop, lambda: "peer:1")
        futures = {}
        started = loop.time()
        # a long timeout first, then short ones: the timer must move earlier
        for opaque, timeout in ((1, 0.6), (2, 0.1), (3, 0.3), (4, 0.1), (5, 0.6)):
            futures[opaque] = loop.create_future()
            table.add(opaque, futures[opaque], timeout)
        assert len(table) == 5 and 4 in table
        answered = table.pop(4)
        assert answered is futures[4] and 4 not in table and table.pop(4) is None
        answered.set_result(create_response(create_request(1)))
        expired_at = {}
        for opaque in (2, 3, 1, 5):
            with pytest.raises(RemotingTimeoutError, match=f"peer:1 to opaque {opaque}"):
                await futures[opaque]
            expired_at[opaque] = loop.time() - started
        assert 0.09 <= expired_at[2] < expired_at[3] < expired_at[1]
        assert expired_at[3] >= 0.29 and expired_at[1] >= 0.59
        assert len(table) == 0

    arun(main())


def test_fail_all_fails_every_waiter_and_stops_the_timer(arun) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        table = ResponseTable(loop, lambda: "peer:1")
        futures = [loop.create_future() for _ in range(3)]
        for opaque, future in enumerate(futures):
            table.add(opaque, future, 0.2)
        table.fail_all(lambda: RemotingSendRequestError("closed"))
        for future in futures:
            with pytest.raises(RemotingSendRequestError):
                await future
        await asyncio.sleep(0.3)  # no timer left to fire on an empty table
        assert len(table) == 0

    arun(main())

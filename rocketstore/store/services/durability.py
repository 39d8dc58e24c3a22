"""SYNC_FLUSH answers for puts that do not wait on their own thread.

DurabilityNotifier: "call me back, from a store thread, when the CommitLog is durable below
offset". DurableWatch: the same for an event loop, with no thread in between (see its
docstring).

A broker answers a SYNC_FLUSH send when its flush is done, but its event loop must never block
in the group commit's wait. So the put appends without waiting (``PutPath.append``) and hands
the record's end offset and a callback here; this one thread waits for the group commit on
behalf of every such put (always for the highest offset asked for, so one flush answers all of
them) and calls each callback from this thread: ``callback(True)`` once everything below its
offset is durable, ``callback(False)`` when the flush did not come within the sync flush
timeout (RocketMQ's FLUSH_DISK_TIMEOUT) or the store shut down first. Callbacks must be quick
and must not raise (a broker's does ``loop.call_soon_threadsafe``).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketstore._native.group_commit import GroupCommit

log = logging.getLogger(__name__)

#: callback(durable): True when the offset is durable, False on timeout or shutdown.
DurableCallback = Callable[[bool], None]
#: wait_flushed(offset, timeout_s) -> True once everything below offset is durable.
WaitFlushed = Callable[[int, float], bool]


class DurabilityNotifier:
    """One thread that turns the group commit's blocking wait into callbacks."""

    #: longest single wait, so deadlines and shutdown are looked at this often
    max_wait_s = 0.05

    def __init__(self, wait_flushed: WaitFlushed, flushed_where: Callable[[], int],
                 timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._wait_flushed = wait_flushed
        self._flushed_where = flushed_where
        self.timeout_s = timeout_s
        self._clock = clock
        # (offset, sequence, deadline, callback): lowest offset first
        self._pending: list[tuple[int, int, float, DurableCallback]] = []
        self._highest = 0
        self._sequence = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    def start(self) -> None:
        if self._thread is None:
            self._stopped = False
            self._thread = threading.Thread(target=self._run, name="DurabilityNotifier",
                                            daemon=True)
            self._thread.start()

    def notify_when_durable(self, offset: int, callback: DurableCallback) -> None:
        """callback(True) once everything below offset is durable (False: see the module)."""
        with self._cond:
            if self._stopped:
                stopped = True
            else:
                stopped = False
                heapq.heappush(self._pending, (offset, next(self._sequence),
                                               self._clock() + self.timeout_s, callback))
                if offset > self._highest:
                    self._highest = offset
                if len(self._pending) == 1:
                    self._cond.notify()
        if stopped:
            self._call(callback, self._flushed_where() >= offset)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                target = self._highest
                first_deadline = min(entry[2] for entry in self._pending[:8])
            wait = min(self.max_wait_s, max(0.0, first_deadline - self._clock()))
            try:
                durable = self._wait_flushed(target, wait)
            except Exception:  # noqa: BLE001 - keep answering; the deadline will fail them
                log.exception("waiting for the group commit failed")
                durable = False
            self._answer(target if durable else self._flushed_where())

    def _answer(self, durable_below: int) -> None:
        """Answer every put durable below durable_below, and fail those past their deadline."""
        now = self._clock()
        done: list[tuple[DurableCallback, bool]] = []
        with self._cond:
            pending = self._pending
            while pending and pending[0][0] <= durable_below:
                done.append((heapq.heappop(pending)[3], True))
            if pending and any(entry[2] <= now for entry in pending):
                kept = []
                for entry in pending:
                    if entry[2] <= now:
                        done.append((entry[3], False))
                    else:
                        kept.append(entry)
                heapq.heapify(kept)
                self._pending = kept
        for callback, durable in done:
            self._call(callback, durable)

    def _call(self, callback: DurableCallback, durable: bool) -> None:
        try:
            callback(durable)
        except Exception:  # noqa: BLE001 - one caller's bug must not stop the others' answers
            log.exception("durability callback failed")

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the thread, then answer every put still waiting by what is durable now (call
        it after the flush service's last flush)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)
        durable_below = self._flushed_where()
        with self._cond:
            left, self._pending = self._pending, []
        for offset, _seq, _deadline, callback in sorted(left):
            self._call(callback, offset <= durable_below)


class DurableWatch:
    """SYNC_FLUSH answers on one thread (an event loop's), without a thread between it and the
    group commit. ``watch(offset, callback)`` asks the group commit for a flush past offset
    (GroupCommit.request, which returns at once; the request rides the next round as a
    waiting producer would); the round that makes it durable writes the eventfd
    :meth:`fileno`, and :meth:`poll`, run by that thread when the descriptor is readable,
    calls back every put durable by then, in the order they were watched. Callbacks run on
    the polling thread only: ``callback(True)``, or ``callback(False)`` once the put waited
    ``timeout_s`` (poll also fails those; call it every so often while :attr:`pending`) or
    the store shut down first (:meth:`close`).

    The thread that watches must be the thread that appended, right before: offsets then
    grow in watch order, and the first put waiting is the first to be answered."""

    def __init__(self, group: GroupCommit, flushed_where: Callable[[], int], timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._group = group
        self._flushed_where = flushed_where
        self.timeout_s = timeout_s
        self._clock = clock
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        # (offset, deadline, callback), offsets growing
        self._waiting: deque[tuple[int, float, DurableCallback]] = deque()
        self.closed = False
        group.notify_fd = self._fd

    def fileno(self) -> int:
        return self._fd

    @property
    def pending(self) -> int:
        return len(self._waiting)

    def watch(self, offset: int, callback: DurableCallback) -> None:
        """callback(True) from a later poll() once everything below offset is durable (at once
        when it already is), callback(False) when it was not within timeout_s."""
        if self.closed:
            callback(self._flushed_where() >= offset)
        elif self._group.request(offset):
            callback(True)
        else:
            self._waiting.append((offset, self._clock() + self.timeout_s, callback))

    def poll(self) -> None:
        """Answer every put durable now, and fail those waiting past their deadline."""
        if self._fd >= 0:
            try:
                os.eventfd_read(self._fd)
            except BlockingIOError:
                pass
        waiting = self._waiting
        if not waiting:
            return
        durable = max(self._flushed_where(), self._group.flushed_where)
        now = self._clock()
        while waiting:
            offset, deadline, callback = waiting[0]
            if offset <= durable:
                ok = True
            elif deadline <= now or self.closed:
                ok = False
            else:
                break
            waiting.popleft()
            try:
                callback(ok)
            except Exception:  # noqa: BLE001 - one caller's bug must not stop the others' answers
                log.exception("durability callback failed")

    def close(self) -> None:
        """Stop watching: the group commit no longer writes the descriptor; every put still
        waiting is answered by what is durable now (call it after the last flush)."""
        if self.closed:
            return
        self.closed = True
        self._group.notify_fd = -1
        os.close(self._fd)
        self._fd = -1
        self.poll()

"""AllocateMappedFileService: creates the next CommitLog file (and the one after) in the
background, warming it when warm_mapped_file_enable, so a roll rarely waits on file creation.

A new segment is sparse with blocks on disk for its first COMMIT_LOG_ALLOCATION_CHUNK bytes
(layout.py); the writer and the prefault service allocate the rest as it fills, so a small
store stays small. A file that cannot be created, or whose first blocks the disk has no room
for, is not left behind, and the put returns CREATE_MAPPED_FILE_FAILED saying why."""
from __future__ import annotations

import logging
import os
import threading

from rocketstore._native.mapped_file import MappedFile
from rocketstore.config import StoreConfig
from rocketstore.store.layout import COMMIT_LOG_ALLOCATION_CHUNK
from rocketstore.store.services.service_thread import ServiceThread
from rocketstore.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)

WAIT_TIMEOUT_S = 5.0        # RocketMQ waits 5 s for a requested file


class _Request:
    __slots__ = ("path", "size", "done", "file", "error")

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size
        self.done = threading.Event()
        self.file: MappedFile | None = None
        self.error: BaseException | None = None


class AllocateMappedFileService(ServiceThread):
    wait_interval_s = 0.05

    def __init__(self, config: StoreConfig, pool: TransientStorePool | None = None) -> None:
        super().__init__("AllocateMappedFileService")
        self.config = config
        self.pool = pool
        self._lock = threading.Lock()
        self._requests: dict[str, _Request] = {}
        self._queue: list[_Request] = []
        self.created = 0
        self.failures = 0
        self.failing = False        # the last creation failed (logged once until one works)

    def _request(self, path: str, size: int) -> _Request:
        with self._lock:
            req = self._requests.get(path)
            if req is None:
                req = self._requests[path] = _Request(path, size)
                self._queue.append(req)
        return req

    def allocate(self, path: str, next_path: str | None, size: int) -> MappedFile:
        """The file for path (created now or already prepared); next_path is prepared in
        the background. Raises OSError when the file cannot be created."""
        req = self._request(path, size)
        if next_path is not None and not self.is_stopped:
            self._request(next_path, size)
        if self.is_stopped or not self.is_alive:
            self._create(req)
        else:
            self.wakeup()
            if not req.done.wait(WAIT_TIMEOUT_S):
                raise OSError(f"creating {path} took more than {WAIT_TIMEOUT_S:.0f} s")
        with self._lock:
            self._requests.pop(path, None)
        if req.error is not None:   # maybe prepared during an outage that is over: try again
            req = _Request(path, size)
            self._create(req)
        if req.error is not None:
            raise OSError(f"creating {path} failed: {req.error}") from req.error
        assert req.file is not None
        return req.file

    def _create(self, req: _Request) -> None:
        if req.done.is_set():
            return
        with self._lock:
            if req in self._queue:
                self._queue.remove(req)
        mf: MappedFile | None = None
        try:
            os.makedirs(os.path.dirname(req.path), exist_ok=True)
            mf = MappedFile(req.path, req.size, preallocate=True,
                            allocation_chunk=COMMIT_LOG_ALLOCATION_CHUNK)
            if self.config.warm_mapped_file_enable and req.size >= self.config.mapped_file_size_commit_log:
                mf.warm(self.config.flush_disk_type,
                        self.config.flush_least_pages_when_warm_mapped_file)
            if self.pool is not None:
                self.pool.lend_to(mf)
            req.file = mf
            self.created += 1
            if self.failing:
                self.failing = False
                log.warning("mapped file %s created: file creation works again", req.path)
        except BaseException as exc:  # noqa: BLE001 - reported to the waiting put
            if mf is not None:      # created, but its blocks could not be had: not kept
                mf.destroy(0)
            self.failures += 1
            req.error = exc
            # once per outage: a full disk fails every put that needs a new file
            if not self.failing:
                self.failing = True
                log.error("creating mapped file %s failed: %s", req.path, exc)
            else:
                log.debug("creating mapped file %s failed: %s", req.path, exc)
        finally:
            req.done.set()

    def run_once(self) -> None:
        while True:
            with self._lock:
                req = self._queue[0] if self._queue else None
            if req is None:
                return
            self._create(req)

    def on_shutdown(self) -> None:
        # prepared files nobody asked for yet are removed, as RocketMQ does
        with self._lock:
            leftovers = list(self._requests.values())
            self._requests.clear()
            self._queue.clear()
        for req in leftovers:
            if req.file is not None:
                req.file.destroy(0)

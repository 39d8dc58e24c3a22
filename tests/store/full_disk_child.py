"""Child process of test_full_disk.py: runs a store on a small tmpfs (mounted at argv[1] by
the parent, see small_fs.py) and drives it into a full disk. Prints one JSON document.

    python full_disk_child.py MOUNT FLUSH_DISK_TYPE allocation|watermark [SEGMENT_BYTES]

allocation: the disk is filled behind the store's back (a ballast file), so puts meet
    allocations that fail (issue 14, case 4: this used to kill the process with SIGBUS):
    with 4 MiB segments the next segment cannot be created, with 8 MiB ones the current
    segment cannot grow; then the ballast goes and puts must work again.
watermark: a throttled producer drives usage over disk_space_warning_level_ratio: puts are
    refused; three days later (an injected clock) cleanup deletes the expired CommitLog
    files and puts are accepted again by themselves; then the user fills the disk and frees
    it again, with the same outcome.
Both end with a clean shutdown and a reopen that reads back every acknowledged message the
retention did not delete.
"""
from __future__ import annotations

import errno
import json
import os
import sys
import time
from collections import Counter
from typing import Any

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.message import PutMessageStatus

QUEUES = 4
BODY = 1000


class Clock:
    """Wall time that a test can move forward; monotonic time as it is."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0


def fill(path: str, leave: int = 0) -> int:
    """Write a ballast file until the disk is full (or only `leave` bytes are free)."""
    written = 0
    chunk = 1 << 20
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while chunk >= 4096:
            if leave:
                st = os.statvfs(path)
                if st.f_bavail * st.f_frsize - chunk < leave:
                    chunk //= 2
                    continue
            try:
                written += os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(fd)
    return written


def fill_until_full(path: str, tries: int = 50) -> None:
    """fill() again while the disk is less than 99% used: the running store can give
    blocks back right after the ballast took the last ones (seen once: 3% free; likely a
    posix_fallocate of its next chunk that failed, whose blocks tmpfs returns)."""
    for _ in range(tries):
        fill(path)
        if used(os.path.dirname(path)) > 0.99:
            return
        time.sleep(0.02)


def used(path: str) -> float:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bavail) / st.f_blocks


class Producer:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.n = 0
        self.acked: list[tuple[int, int, int, str]] = []  # (queue, queue offset, phy, body id)
        self.statuses: Counter[str] = Counter()
        self.reasons: set[str] = set()

    def put(self) -> Any:
        i = self.n
        self.n += 1
        body = f"m{i:08d}".encode().ljust(BODY, b".")
        r = self.store.put_message(Message(topic="disk", body=body, keys=[f"k{i}"]), i % QUEUES)
        self.statuses[r.status.name] += 1
        if r.status == PutMessageStatus.PUT_OK:
            self.acked.append((i % QUEUES, r.queue_offset, r.commitlog_offset, f"m{i:08d}"))
        elif r.reason:
            self.reasons.add(r.reason.split(":")[0])
        return r

    def until(self, stop: Any, *, limit: int, pause_s: float = 0.0) -> Any:
        r = None
        for _ in range(limit):
            r = self.put()
            if stop(r):
                return r
            if pause_s:
                time.sleep(pause_s)
        return r


def check_readable(root: str, config: StoreConfig, acked: list[tuple[int, int, int, str]]
                   ) -> dict[str, Any]:
    """Reopen and read every acknowledged message at or after the minimum offset back."""
    with MessageStore.open(root, config) as store:
        assert store.wait_dispatched(30)
        min_phy = store.get_min_phy_offset()
        missing, read = [], 0
        for qid, qoff, phy, body_id in acked:
            if phy < min_phy:
                continue
            got = store.get_message("check", "disk", qid, qoff, 1)
            if got.status.name != "FOUND" or not bytes(got.messages[0].body).startswith(
                    body_id.encode()):
                missing.append([qid, qoff, phy, got.status.name])
            else:
                read += 1
        scanned = sum(1 for _ in store.scan())
        return {"min_phy": min_phy, "read": read, "missing": missing[:20],
                "missing_count": len(missing), "scanned": scanned,
                "below_min": sum(1 for a in acked if a[2] < min_phy),
                "recovery": store.recovery.stop_status if store.recovery else None}


def allocation(mount: str, flush: str, segment: int) -> dict[str, Any]:
    root = os.path.join(mount, "store")
    config = StoreConfig(store_path_root_dir=root, flush_disk_type=flush,
                         mapped_file_size_commit_log=segment, max_hash_slot_num=10000,
                         max_index_num=40000, clean_resource_interval=3_600_000)
    out: dict[str, Any] = {}
    with MessageStore.open(root, config) as store:
        p = Producer(store)
        p.until(lambda r: False, limit=200)
        out["before_full"] = dict(p.statuses)
        fill_until_full(os.path.join(mount, "ballast"))
        out["used_after_ballast"] = used(mount)
        failures = 0
        for _ in range(20000):
            r = p.put()
            failures = failures + 1 if r.status != PutMessageStatus.PUT_OK else 0
            if failures >= 50:
                break
        batch = store.put_messages([Message(topic="disk", body=b"b" * BODY) for _ in range(20)],
                                   0)
        out["batch"] = [batch.status.name, batch.stored, batch.reason]
        out["while_full"] = dict(p.statuses)
        last = store.commit_log.queue.last_file()
        out["last_segment"] = [last.file_from_offset, last.is_full, last.file_size]
        no_room = "no room on disk for CommitLog file "
        out["full_segments"] = sorted({os.path.basename(r[len(no_room):]) for r in p.reasons
                                       if r.startswith(no_room)})
        out["reasons"] = sorted({no_room.strip() if r.startswith(no_room) else r
                                 for r in p.reasons})
        os.remove(os.path.join(mount, "ballast"))
        ok_before = p.statuses["PUT_OK"]
        p.until(lambda r: False, limit=100)
        out["after_free_ok"] = p.statuses["PUT_OK"] - ok_before
        out["dispatched"] = store.wait_dispatched(30)
        fill(os.path.join(mount, "ballast"))     # and the shutdown meets a full disk
    os.remove(os.path.join(mount, "ballast"))
    out["clean_shutdown"] = not os.path.exists(os.path.join(root, "abort"))
    out["readback"] = check_readable(root, config, p.acked)
    out["acked"] = len(p.acked)
    return out


def watermark(mount: str, flush: str, segment: int) -> dict[str, Any]:
    root = os.path.join(mount, "store")
    clock = Clock()
    config = StoreConfig(store_path_root_dir=root, flush_disk_type=flush,
                         mapped_file_size_commit_log=segment, max_hash_slot_num=10000,
                         max_index_num=40000, clean_resource_interval=100,
                         delete_commit_log_files_interval=0,
                         delete_consume_queue_files_interval=0, commit_log_prefault_ahead=0,
                         clean_file_forcibly_enable=False, delete_when="04")
    out: dict[str, Any] = {}
    total = os.statvfs(mount).f_blocks * os.statvfs(mount).f_frsize
    fill(os.path.join(mount, "ballast"), leave=int(total * 0.35))
    out["used_at_start"] = used(mount)
    with MessageStore.open(root, config, clock=clock) as store:
        p = Producer(store)

        def refused(r: Any) -> bool:
            return r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE

        # 1 KiB a millisecond: the 100 ms cleanup period sees 90% before the disk fills
        r = p.until(refused, limit=30000, pause_s=0.001)
        out["refused"] = [r.status.name, r.reason, used(mount)]
        out["files_when_refused"] = len(store.commit_log.queue.files)
        clock.offset_ms = 73 * 3600 * 1000       # three days later: the old files expired
        r = p.until(lambda r: r.status == PutMessageStatus.PUT_OK, limit=3000, pause_s=0.01)
        out["accepted_again"] = [r.status.name, used(mount)]
        out["files_after_cleanup"] = len(store.commit_log.queue.files)
        out["min_phy_after_cleanup"] = store.get_min_phy_offset()
        # the user fills the disk, then frees it
        fill(os.path.join(mount, "ballast2"), leave=int(total * 0.05))
        r = p.until(refused, limit=3000, pause_s=0.01)
        out["refused_by_user"] = [r.status.name, used(mount)]
        os.remove(os.path.join(mount, "ballast2"))
        r = p.until(lambda r: r.status == PutMessageStatus.PUT_OK, limit=3000, pause_s=0.01)
        out["accepted_after_user"] = [r.status.name, used(mount)]
        out["statuses"] = dict(p.statuses)
        out["reasons"] = sorted(p.reasons)
        out["dispatched"] = store.wait_dispatched(30)
    out["readback"] = check_readable(root, config, p.acked)
    out["acked"] = len(p.acked)
    return out


def main() -> None:
    mount, flush, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
    segment = int(sys.argv[4]) if len(sys.argv) > 4 else 4 << 20
    result = {"allocation": allocation, "watermark": watermark}[scenario](mount, flush, segment)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

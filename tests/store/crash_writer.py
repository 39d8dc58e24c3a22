"""Crash-test writer: opens a store and puts messages from several threads until it is killed.

Run by tests/test_crash.py, either directly::

    python tests/crash_writer.py run '<json spec>'

or through a fork server (``python tests/crash_writer.py serve``) that imports rocketstore once
and forks one writer per JSON line read on stdin, answering ``{"pid": n}`` at once and
``{"pid": n, "exit": code, "signal": sig}`` when that writer is gone. Forking saves the
interpreter start-up (~0.7 s here) on each of the many crash rounds; the writer code is the
same either way.

Every message is a pure function of (writer id, thread, sequence) (:func:`derive`), so the
parent re-derives it and checks the recovered record byte for byte. The writer appends one line
per PUT_OK result to its output file with a single ``os.write`` (O_APPEND), only after the put
returned, so every line in the file is a put the store acknowledged::

    OK <wid> <tid> <seq> <commitlog offset> <size> <queue id> <queue offset> <msg id>

Other lines: ``READY <abnormal> <end offset>`` once the store is open (so the abort file exists),
``NACK <wid> <tid> <seq> <status>`` for a put that was not PUT_OK, ``DONE`` after a clean
shutdown (the run reached its message limit before the kill). With ``min_seconds`` in the spec a
thread paces itself to take at least that long for its ``max_per_thread`` messages.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any

TOPICS = ("CrashA", "CrashB")
QUEUES = 4
BATCH_MAX = 6


def derive(wid: str, tid: int, seq: int) -> dict[str, Any]:
    """The message a writer thread puts as its seq-th: topic, queue id, body, properties."""
    h = hashlib.blake2b(f"{wid}/{tid}/{seq}".encode(), digest_size=16).digest()
    pick = int.from_bytes(h[:8], "big")
    topic = TOPICS[pick % len(TOPICS)]
    queue_id = (pick >> 3) % QUEUES
    kind = (pick >> 7) % 16
    if kind == 0:
        body_len = 0
    elif kind == 1:
        body_len = 3000 + (pick >> 12) % 5000       # a few big ones: rolls files quickly
    else:
        body_len = (pick >> 12) % 1500
    body = hashlib.shake_128(h).digest(body_len)
    props = {"X-SEQ": f"{wid}:{tid}:{seq}", "X-LEN": str(body_len)}
    if seq % 5 == 1:
        props["X-TXT"] = "caf\u00e9 \u2713 " + h[8:12].hex()
    tags = f"tag{pick % 3}" if seq % 4 else None
    keys: list[str] = []
    if seq % 7 != 3:
        keys.append(f"K{wid}.{tid}.{seq}")
        if seq % 3 == 0:
            keys.append(f"G{wid}.{tid}.{seq // 10}")    # shared by up to 10 messages
    uniq = h.hex().upper()
    out = dict(props)
    if tags:
        out["TAGS"] = tags
    if keys:
        out["KEYS"] = " ".join(keys)
    out["UNIQ_KEY"] = uniq
    return {"topic": topic, "queue_id": queue_id, "body": body, "tags": tags, "keys": keys,
            "user_props": props, "uniq_key": uniq, "flag": pick % 1000,
            "properties": out}


def make_message(d: dict[str, Any]):
    from rocketstore import Message
    return Message(d["topic"], d["body"], tags=d["tags"], keys=d["keys"] or None,
                   properties=dict(d["user_props"]), flag=d["flag"], uniq_key=d["uniq_key"])


def store_config(spec: dict[str, Any]):
    from rocketstore import StoreConfig
    return StoreConfig(
        store_path_root_dir=spec["root"],
        flush_disk_type=spec["flush"],
        mapped_file_size_commit_log=spec.get("cl_size", 64 * 1024),
        mapped_file_size_consume_queue=spec.get("cq_size", 20 * 50),
        max_hash_slot_num=spec.get("slots", 64),
        max_index_num=spec.get("index_num", 300),
        sync_flush_timeout=spec.get("sync_flush_timeout", 20_000),
        transient_store_pool_enable=spec.get("pool", False),
        transient_store_pool_size=spec.get("pool_size", 3),
        warm_mapped_file_enable=spec.get("warm", False),
        flush_interval_commit_log=spec.get("flush_interval", 50),
        flush_interval_consume_queue=spec.get("flush_interval_cq", 100),
        flush_commit_log_thorough_interval=spec.get("thorough_interval", 300),
        store_host="10.0.0.7:10911",
    )


class _Out:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text: str) -> None:
        os.write(self.fd, (text + "\n").encode())     # one write: all of the line or none


def run(spec: dict[str, Any]) -> int:
    from rocketstore import MessageStore
    from rocketstore.message import PutMessageStatus

    out = _Out(spec["out"])
    wid = spec["wid"]
    store = MessageStore.open(spec["root"], store_config(spec))
    rep = store.recovery
    out.line(f"READY {int(rep.abnormal)} {rep.end_offset}")
    limit = spec.get("max_per_thread", 2000)
    # a thread takes at least this long for its `limit` messages: the kill must find the
    # writers still writing however fast the put path has become
    pace = spec.get("min_seconds", 0.0) / limit
    started = time.monotonic()
    errors: list[BaseException] = []

    def produce(tid: int) -> None:
        try:
            batch_mode = tid in spec.get("batch_threads", ())
            seq = 0
            while seq < limit:
                ahead = started + seq * pace - time.monotonic()
                if ahead > 0.001:
                    time.sleep(ahead)
                if batch_mode:
                    n = 1 + seq % BATCH_MAX
                    ds = [derive(wid, tid, seq + k) for k in range(n)]
                    res = store.put_messages([make_message(d) for d in ds],
                                             [d["queue_id"] for d in ds])
                    ok = res.status == PutMessageStatus.PUT_OK
                    for k in range(res.stored if ok else 0):
                        r = res[k]
                        out.line(f"OK {wid} {tid} {seq + k} {r.commitlog_offset} "
                                 f"{r.wrote_bytes} {ds[k]['queue_id']} {r.queue_offset} "
                                 f"{r.msg_id}")
                    if not ok:
                        out.line(f"NACK {wid} {tid} {seq} {res.status.name}")
                    seq += n
                else:
                    d = derive(wid, tid, seq)
                    r = store.put_message(make_message(d), d["queue_id"])
                    if r.status == PutMessageStatus.PUT_OK:
                        out.line(f"OK {wid} {tid} {seq} {r.commitlog_offset} {r.wrote_bytes} "
                                 f"{d['queue_id']} {r.queue_offset} {r.msg_id}")
                    else:
                        out.line(f"NACK {wid} {tid} {seq} {r.status.name}")
                    seq += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            out.line(f"ERROR {tid} {exc!r}")

    threads = [threading.Thread(target=produce, args=(t,), daemon=True)
               for t in range(spec.get("threads", 4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.shutdown()
    out.line("DONE")
    return 1 if errors else 0


def serve() -> None:
    """Fork server: one JSON spec per stdin line; forks a writer for each."""
    import rocketstore  # noqa: F401 - imported once here, inherited by every writer
    import rocketstore.store.message_store  # noqa: F401

    for raw in sys.stdin:
        if not raw.strip():
            continue
        spec = json.loads(raw)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                code = run(spec)
            except BaseException:  # noqa: BLE001
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code)
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        sys.stdout.write(json.dumps({"pid": pid, "exit": code, "signal": sig}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        serve()
    elif len(sys.argv) >= 3 and sys.argv[1] == "run":
        sys.exit(run(json.loads(sys.argv[2])))
    else:
        sys.exit("usage: crash_writer.py serve | run '<json spec>'")

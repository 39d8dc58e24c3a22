"""MessageStore basics: input validation (nothing stored on rejection), the writer lock,
read-only opens, concurrent writers, message ids, UNIQ_KEY and transaction queue offsets."""

from __future__ import annotations

import logging
import random
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import helpers
import pytest
import refcodec
from helpers import STORE_HOST, assert_no_signal, open_store, run_python

from rocketstore import (
    Message,
    MessageStore,
    PutMessageStatus,
    StoreLockedError,
)
from rocketstore._native import hosts

MAX_BODY = 1024


@pytest.fixture
def store(tmp_path: Path):
    s = open_store(tmp_path, max_message_size=MAX_BODY)
    for i in range(3):
        assert s.put_message(Message("base", f"m{i}".encode()), 0).ok
    yield s
    s.shutdown()


def snapshot(s: MessageStore, topics: tuple[str, ...] = ("base", "t")) -> tuple[Any, ...]:
    return (
        s.get_max_phy_offset(),
        [m.commitlog_offset for m in s.scan(check_crc=True)],
        [s.next_queue_offset(t, q) for t in topics for q in range(3)],
    )


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("topic", ["", "a b", "x" * 128, "订单", "a/b", "a.b", "tab\t", "a\x01"])
def test_bad_topic_rejected_at_construction(topic: str) -> None:
    with pytest.raises(ValueError, match="topic"):
        Message(topic, b"x")


def test_topic_type_and_limits() -> None:
    with pytest.raises(TypeError, match="topic"):
        Message(b"bytes-topic", b"x")  # type: ignore[arg-type]
    Message("x" * 127)
    Message("%RETRY%group|a-b_c")


@pytest.mark.parametrize("topic", ["a b", "x" * 128, "", "é"])
def test_bad_topic_set_after_construction_rejected_at_put(store: MessageStore, topic: str) -> None:
    before = snapshot(store)
    m = Message("t", b"x")
    m.topic = topic
    with pytest.raises(ValueError, match="topic"):
        store.put_message(m, 0)
    with pytest.raises(ValueError, match="topic"):
        store.put_messages([Message("t", b"ok"), m], 0)
    assert snapshot(store) == before


def test_body_over_max_message_size(store: MessageStore) -> None:
    before = snapshot(store)
    r = store.put_message(Message("t", b"x" * (MAX_BODY + 1)), 0)
    assert r.status == PutMessageStatus.MESSAGE_ILLEGAL and not r.ok and r.msg_id is None
    res = store.put_messages([Message("t", b"ok"), Message("t", b"x" * (MAX_BODY + 1))], 0)
    assert res.status == PutMessageStatus.MESSAGE_ILLEGAL and res.stored == 0
    assert snapshot(store) == before
    # the limit is the body alone: exactly max_message_size bodies are fine
    ok = store.put_message(Message("t", b"x" * MAX_BODY, properties={"p": "v" * 500}), 0)
    assert ok.ok and ok.queue_offset == 0


def _props_message(props_bytes: int, value_char: str = "v") -> Message:
    """Properties text of exactly props_bytes bytes: UNIQ_KEY\\x01U \\x02 p\\x01<value>."""
    fixed = len("UNIQ_KEY\x01U") + 1 + len("p\x01")
    width = len(value_char.encode())
    assert (props_bytes - fixed) % width == 0
    return Message(
        "t", b"", properties={"p": value_char * ((props_bytes - fixed) // width)}, uniq_key="U"
    )


@pytest.mark.parametrize("char", ["v", "é", "订"])
def test_properties_size_limit(store: MessageStore, char: str) -> None:
    before = snapshot(store)
    width = len(char.encode())
    limit = 32767 - (32767 - 13) % width  # the largest size reachable with this character
    over = limit + width
    r = store.put_message(_props_message(over, char), 0)
    assert r.status == PutMessageStatus.PROPERTIES_SIZE_EXCEEDED and r.msg_id is None
    res = store.put_messages([Message("t", b"ok"), _props_message(over, char)], 0)
    assert res.status == PutMessageStatus.PROPERTIES_SIZE_EXCEEDED and res.stored == 0
    assert snapshot(store) == before
    ok = store.put_message(_props_message(limit, char), 0)
    assert ok.ok
    m = store.look_message_by_offset(ok.commitlog_offset)
    assert len(m.properties_string.encode()) == limit
    assert refcodec.decode_record(bytes(m.record)).propertiesString == m.properties_string


@pytest.mark.parametrize(
    "kwargs",
    [
        {"properties": {"a\x01": "v"}},
        {"properties": {"a": "v\x02w"}},
        {"properties": {"\x02": "v"}},
        {"properties": {"a": "\x01"}},
        {"tags": "t\x01"},
        {"tags": "t\x02"},
        {"keys": "k1 k\x012"},
        {"keys": ["k1", "k\x022"]},
        {"uniq_key": "U\x01"},
    ],
)
def test_separator_characters_rejected(store: MessageStore, kwargs: dict[str, Any]) -> None:
    before = snapshot(store)
    with pytest.raises(ValueError, match="separator|contains"):
        Message("t", b"x", **kwargs)
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "name, value", [("a\x01", "v"), ("a", "v\x02"), ("TAGS", "x\x01y"), ("KEYS", "\x02")]
)
def test_separator_set_after_construction_rejected_at_put(
    store: MessageStore, name: str, value: str
) -> None:
    before = snapshot(store)
    m = Message("t", b"x")
    m.properties[name] = value
    with pytest.raises(ValueError, match="separator"):
        store.put_message(m, 0)
    with pytest.raises(ValueError, match="separator"):
        store.put_messages([Message("t", b"ok"), m], [0, 1])
    assert snapshot(store) == before


@pytest.mark.parametrize("bad", ["\x00", "\x01", "\x02"])
def test_separator_found_at_every_position_of_every_length(store: MessageStore, bad: str) -> None:
    """The put path scans property texts eight bytes at a time: every length (short, whole
    words, a word and a tail) and every position must be caught, in names and in values."""
    before = snapshot(store)
    for length in range(1, 26):
        for at in range(length):
            text = "".join(bad if i == at else "abcdefghij"[i % 10] for i in range(length))
            for name, value in ((text, "v"), ("NAME", text)):
                m = Message("t", b"x")
                m.properties[name] = value
                with pytest.raises(ValueError, match="separator"):
                    store.put_message(m, 0)
    # bytes 3 and up, multi-byte UTF-8 included, are fine at any length
    for length in range(1, 26):
        m = Message("t", b"x", properties={"k" * length: ("\x03\x7f\xff\u0100é" * 6)[:length]})
        assert store.put_message(m, 1).ok
    assert snapshot(store)[2][:3] == before[2][:3]


def test_queue_table_change_seen_by_the_writer_cache(store: MessageStore) -> None:
    """The writer caches the last topic's counters: dropping the topic from the queue table
    (as a topic deletion or recovery rebuild does) must not leave it writing stale offsets."""
    assert [store.put_message(Message("t", b"a"), 2).queue_offset for _ in range(3)] == [0, 1, 2]
    store.commit_log.queue_table.remove("t")
    assert store.put_message(Message("t", b"b"), 2).queue_offset == 0
    store.commit_log.queue_table.set("t", 2, 40)
    assert store.put_message(Message("t", b"c"), 2).queue_offset == 40
    store.commit_log.queue_table.clear()
    assert store.put_message(Message("t", b"d"), 2).queue_offset == 0
    assert store.put_messages([Message("t", b"e")] * 2, 2).queue_offsets.tolist() == [1, 2]


def test_bad_property_types_and_empties(store: MessageStore) -> None:
    before = snapshot(store)
    with pytest.raises(TypeError):
        Message("t", b"x", properties={"a": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="empty"):
        Message("t", b"x", properties={"": "v"})
    with pytest.raises(ValueError, match="empty"):
        Message("t", b"x", properties={"a": ""})
    with pytest.raises(TypeError):
        Message("t", "text body")  # type: ignore[arg-type]
    m = Message("t", b"x")
    m.properties["n"] = 5  # type: ignore[assignment]
    with pytest.raises(TypeError):
        store.put_message(m, 0)
    m = Message("t", b"x")
    m.properties["n"] = ""
    with pytest.raises(ValueError, match="empty"):
        store.put_message(m, 0)
    assert snapshot(store) == before


def test_negative_queue_id(store: MessageStore) -> None:
    before = snapshot(store)
    with pytest.raises(ValueError, match="queue_id"):
        store.put_message(Message("t", b"x"), -1)
    with pytest.raises(ValueError, match="queue_id"):
        store.put_messages([Message("t", b"x")], -1)
    with pytest.raises(ValueError, match="queue_id"):
        store.put_messages([Message("t", b"x"), Message("t", b"y")], [0, -5])
    with pytest.raises(ValueError, match="queue_ids"):
        store.put_messages([Message("t", b"x"), Message("t", b"y")], [0])
    with pytest.raises(TypeError):
        store.put_message("not a message", 0)  # type: ignore[arg-type]
    assert snapshot(store) == before


def test_put_on_closed_store(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    assert s.put_message(Message("t", b"x")).ok
    end = s.get_max_phy_offset()
    s.shutdown()
    assert not s.is_running
    r = s.put_message(Message("t", b"late"))
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and r.msg_id is None
    res = s.put_messages([Message("t", b"late"), Message("t", b"late2")])
    assert res.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and res.stored == 0
    s.shutdown()  # idempotent
    with open_store(tmp_path) as again:
        assert again.get_max_phy_offset() == end
        assert [bytes(m.body) for m in again.scan()] == [b"x"]


def test_put_on_read_only_store(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        s.put_message(Message("t", b"x"))
    before = sorted((p.name, p.read_bytes()) for p in (tmp_path / "commitlog").iterdir())
    with open_store(tmp_path, read_only=True) as ro:
        assert ro.read_only
        end = ro.get_max_phy_offset()
        r = ro.put_message(Message("t", b"nope"))
        assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
        res = ro.put_messages([Message("t", b"nope")])
        assert res.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and res.stored == 0
        assert ro.get_max_phy_offset() == end
    after = sorted((p.name, p.read_bytes()) for p in (tmp_path / "commitlog").iterdir())
    assert after == before
    assert not (tmp_path / "abort").exists()


def test_read_only_open_of_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_store(tmp_path / "absent", read_only=True)
    assert not (tmp_path / "absent").exists()


BAD_BATCH_ENTRIES = {
    "negative queue id": (ValueError, None),
    "oversized body": (None, PutMessageStatus.MESSAGE_ILLEGAL),
    "oversized properties": (None, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED),
    "separator": (ValueError, None),
    "bad topic": (ValueError, None),
    "not a message": (TypeError, None),
}


@pytest.mark.parametrize("kind", list(BAD_BATCH_ENTRIES))
def test_batch_with_one_bad_message_stores_nothing(store: MessageStore, kind: str) -> None:
    before = snapshot(store)
    msgs: list[Any] = [Message("t", f"good{i}".encode(), tags="g") for i in range(5)]
    qids = [0, 1, 2, 0, 1]
    if kind == "negative queue id":
        qids[3] = -1
    elif kind == "oversized body":
        msgs[3] = Message("t", b"x" * (MAX_BODY + 1))
    elif kind == "oversized properties":
        msgs[3] = _props_message(32768)
    elif kind == "separator":
        msgs[3].properties["k"] = "a\x02b"
    elif kind == "bad topic":
        msgs[3].topic = "bad topic"
    else:
        msgs[3] = "not a message"
    exc, status = BAD_BATCH_ENTRIES[kind]
    if exc is not None:
        with pytest.raises(exc, match=r"messages\[3\]|queue_ids?\[3\]|topic|queue_id"):
            store.put_messages(msgs, qids)
    else:
        res = store.put_messages(msgs, qids)
        assert res.status == status and res.stored == 0 and not res.ok
        assert res[0].msg_id is None
    assert snapshot(store) == before
    # and the next good batch gets the offsets the rejected one would have had
    good = [m for m in msgs if isinstance(m, Message)][:2]
    for m in good:
        m.topic = "t"
        m.properties.pop("k", None)
    res = store.put_messages(good, [0, 0])
    assert res.ok and res.queue_offsets.tolist() == [0, 1]
    assert res.commitlog_offsets[0] == before[0]


# ---------------------------------------------------------------------------- lock


def test_second_writer_is_locked_out(tmp_path: Path) -> None:
    with open_store(tmp_path) as first:
        first.put_message(Message("t", b"x"))
        with pytest.raises(StoreLockedError, match=str(tmp_path)):
            open_store(tmp_path)
        # a read-only open works beside the writer and sees the prefix
        with open_store(tmp_path, read_only=True) as reader:
            assert [bytes(m.body) for m in reader.scan(check_crc=True)] == [b"x"]
            assert first.put_message(Message("t", b"y")).ok
            assert reader.put_message(Message("t", b"z")).status == (
                PutMessageStatus.SERVICE_NOT_AVAILABLE
            )
        assert first.put_message(Message("t", b"w")).ok
    # released at shutdown
    with open_store(tmp_path) as again:
        assert [bytes(m.body) for m in again.scan()] == [b"x", b"y", b"w"]


LOCK_CHILD = """
import sys
from helpers import open_store
from rocketstore import StoreLockedError
root = sys.argv[1]
try:
    open_store(root)
except StoreLockedError as e:
    print("LOCKED", e)
else:
    print("OPENED")
    sys.exit(2)
with open_store(root, read_only=True) as r:
    print("SEEN", len(list(r.scan(check_crc=True))))
"""


def test_lock_across_processes(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        for i in range(25):
            assert s.put_message(Message("t", b"x" * 100 * i)).ok
        proc = run_python(LOCK_CHILD, args=[str(tmp_path)], timeout=60)
        assert_no_signal(proc, "second writer")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "LOCKED" in proc.stdout and "SEEN 25" in proc.stdout
    proc = run_python(LOCK_CHILD, args=[str(tmp_path)], timeout=60)
    assert proc.returncode == 2 and "OPENED" in proc.stdout, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- concurrency

THREADS = 8
PER_THREAD = 400
TOPICS = ("conc-a", "conc-b")


def test_concurrent_writers(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    sent: dict[bytes, tuple[int, int, str, int]] = {}  # body -> (offset, qoff, topic, qid)
    sent_lock = threading.Lock()
    done = threading.Event()
    reader_counts: list[int] = []

    def writer(tid: int) -> None:
        rng = random.Random(tid)
        seq = 0
        try:
            while seq < PER_THREAD:
                if rng.random() < 0.5:
                    body = f"{tid}:{seq}:".encode() + b"p" * rng.randint(0, 400)
                    topic, qid = TOPICS[seq % 2], rng.randrange(4)
                    r = s.put_message(Message(topic, body, tags=f"t{tid}"), qid)
                    assert r.ok, r
                    with sent_lock:
                        sent[body] = (r.commitlog_offset, r.queue_offset, topic, qid)
                    seq += 1
                else:
                    n = min(rng.randint(1, 8), PER_THREAD - seq)
                    bodies = [
                        f"{tid}:{seq + j}:".encode() + b"b" * rng.randint(0, 400) for j in range(n)
                    ]
                    topics = [TOPICS[(seq + j) % 2] for j in range(n)]
                    qids = [rng.randrange(4) for _ in range(n)]
                    msgs = [Message(t, b) for t, b in zip(topics, bodies, strict=True)]
                    res = s.put_messages(msgs, qids)
                    assert res.ok and res.stored == n, res
                    with sent_lock:
                        for j, r in enumerate(res):
                            sent[bodies[j]] = (
                                r.commitlog_offset,
                                r.queue_offset,
                                topics[j],
                                qids[j],
                            )
                    seq += n
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    def reader() -> None:
        try:
            while not done.is_set():
                reader_counts.append(sum(1 for _ in s.scan(check_crc=True)))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    with open_store(tmp_path) as s:
        threads = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
        rt = threading.Thread(target=reader)
        rt.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        rt.join()
        assert not errors, errors
        records = list(s.scan(check_crc=True))
        total = THREADS * PER_THREAD
        assert len(records) == total == len(sent)
        assert len(s.commit_log.queue.files) > 3  # rolled while contended
        # readers only ever saw whole records, and never fewer than before
        assert reader_counts == sorted(reader_counts) and reader_counts[-1] <= total
        # every record present exactly once, where its put said
        seen: dict[bytes, Any] = {}
        per_queue: dict[tuple[str, int], list[int]] = defaultdict(list)
        per_thread: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for m in records:
            body = bytes(m.body)
            assert body not in seen
            seen[body] = m
            off, qoff, topic, qid = sent[body]
            assert (m.commitlog_offset, m.queue_offset, m.topic, m.queue_id) == (
                off,
                qoff,
                topic,
                qid,
            )
            assert m.msg_id == hosts.make_msg_id(STORE_HOST, off)
            per_queue[(topic, qid)].append(m.queue_offset)
            tid, seq = map(int, body.split(b":")[:2])
            per_thread[tid].append((seq, m.commitlog_offset))
        # queue offsets dense per queue, in CommitLog order
        for key, qoffs in per_queue.items():
            assert qoffs == list(range(len(qoffs))), key
            assert s.next_queue_offset(*key) == len(qoffs)
        # each thread's puts are in its own order in the log
        for tid, items in per_thread.items():
            assert sorted(items) == sorted(items, key=lambda x: x[1]), tid
        # no interleaving: records tile the log exactly (blanks only at file ends)
        for a, b in zip(records, records[1:], strict=False):
            nxt = a.commitlog_offset + a.store_size
            assert (
                b.commitlog_offset == nxt
                or b.commitlog_offset % s.commit_log.queue.mapped_file_size == 0
            )
    with open_store(tmp_path) as again:
        assert len(list(again.scan(check_crc=True))) == THREADS * PER_THREAD
        for key, qoffs in per_queue.items():
            assert again.next_queue_offset(*key) == len(qoffs)


SHUTDOWN_RACE = """
import sys, threading, time
from helpers import open_store
from rocketstore import Message, PutMessageStatus

root, mode, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
s = open_store(root, mapped_file_size_commit_log=64 * 1024 * 1024)
batch = [Message("race", b"x" * 4000) for _ in range(2000)]
single = Message("race", b"y" * (1 << 20))
errors, started = [], threading.Event()

def writer():
    started.set()
    try:
        while True:
            if mode == "batch":
                r = s.put_messages(batch)
            else:
                r = s.put_message(single)
            if not r.ok:
                assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE, r.status
                return
    except Exception as e:
        errors.append(repr(e))

ts = [threading.Thread(target=writer) for _ in range(2)]
for t in ts:
    t.start()
started.wait()
time.sleep(delay)
s.shutdown()
for t in ts:
    t.join()
print("ERRORS", errors)
sys.exit(3 if errors else 0)
"""


def test_shutdown_while_writers_run(tmp_path: Path) -> None:
    # the race is timing dependent: batches crash almost every time, single puts less often
    runs = [("batch", d) for d in (0.002, 0.01, 0.03)] + [("single", 0.002)] * 8
    for i, (mode, delay) in enumerate(runs):
        proc = run_python(
            SHUTDOWN_RACE, args=[str(tmp_path / f"{mode}{i}"), mode, str(delay)], timeout=120
        )
        assert_no_signal(proc, f"shutdown during {mode} puts")
        assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- ids and keys


def test_msg_id_is_store_host_and_offset(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        r = s.put_message(Message("t", b"x"))
        assert r.msg_id == hosts.make_msg_id(STORE_HOST, r.commitlog_offset)
        assert len(r.msg_id) == 32 and r.msg_id == r.msg_id.upper()
        assert hosts.parse_msg_id(r.msg_id) == (STORE_HOST, r.commitlog_offset)
        # a message carrying its own store host gets an id built from it
        r6 = s.put_message(Message("t", b"y", store_host="[2001:db8::100]:10911"))
        assert r6.msg_id == hosts.make_msg_id("[2001:db8::100]:10911", r6.commitlog_offset)
        assert len(r6.msg_id) == 56
        m = s.look_message_by_offset(r6.commitlog_offset)
        assert m.msg_id == r6.msg_id and m.sys_flag & 0x20
        res = s.put_messages([Message("t", b"a"), Message("t", b"b")])
        assert res.msg_ids == [
            hosts.make_msg_id(STORE_HOST, o) for o in res.commitlog_offsets.tolist()
        ]


def test_ipv6_store_host_config(tmp_path: Path) -> None:
    host = "[fd00::a]:10911"
    with open_store(tmp_path, store_host=host) as s:
        r = s.put_message(Message("t", b"x", born_host="10.0.0.1:1234"))
        m = s.look_message_by_offset(r.commitlog_offset)
        assert m.store_host == host and m.born_host == "10.0.0.1:1234"
        assert m.sys_flag == 0x20
        assert r.msg_id == m.msg_id == hosts.make_msg_id(host, r.commitlog_offset)
        rec = refcodec.decode_record(bytes(m.record))
        assert rec.msgId == r.msg_id and rec.storeHost == host


def test_uniq_key_generated_and_kept(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        keys = set()
        for _ in range(300):
            msg = Message("t", b"x")
            assert msg.uniq_key is None
            r = s.put_message(msg)
            assert msg.uniq_key == r.uniq_key
            assert len(r.uniq_key) == 32 and all(c in "0123456789ABCDEF" for c in r.uniq_key)
            assert s.look_message_by_offset(r.commitlog_offset).uniq_key == r.uniq_key
            keys.add(r.uniq_key)
        assert len(keys) == 300
        mine = Message("t", b"x", uniq_key="MY-OWN-KEY")
        assert s.put_message(mine).uniq_key == "MY-OWN-KEY" == mine.uniq_key
        batch = [Message("t", b"a"), Message("t", b"b", uniq_key="B")]
        res = s.put_messages(batch)
        assert [r.uniq_key for r in res] == [batch[0].uniq_key, "B"]
        assert len(batch[0].uniq_key) == 32 and batch[0].uniq_key not in keys
        # put again: the same message keeps its key (as a client resending it)
        r2 = s.put_message(batch[0])
        assert r2.uniq_key == batch[0].uniq_key


def test_property_text_alike_on_every_path(tmp_path: Path) -> None:
    """The put reads plain str properties in one walk and anything else (a str subclass, a
    text to refuse) the careful way: both write the same text, find a UNIQ_KEY the dict has
    under any str object, and the careful way still refuses what it must."""

    class Name(str):
        pass

    uniq = "".join(["UNIQ_", "KEY"])        # equal to, not the same object as, the constant
    with open_store(tmp_path) as s:
        plain = Message("t", b"x", tags="a", properties={"p": "1", uniq: "U9", "é": "ü €"})
        odd = Message("t", b"x", tags="a", properties={Name("p"): "1", "UNIQ_KEY": Name("U9"),
                                                       "é": "ü €"})
        res = s.put_messages([plain, odd], 0)
        texts = [s.look_message_by_offset(r.commitlog_offset).properties_string for r in res]
        assert texts[0] == texts[1] == "p\x011\x02UNIQ_KEY\x01U9\x02é\x01ü €\x02TAGS\x01a"
        assert [r.uniq_key for r in res] == ["U9", "U9"]
        bad = Message("t", b"x")
        bad.properties["k"] = "\ud800"      # a lone surrogate has no UTF-8
        with pytest.raises(UnicodeEncodeError):
            s.put_messages([bad])


def test_generated_uniq_key_settles_into_the_message(tmp_path: Path) -> None:
    """The put keeps a generated UNIQ_KEY as text in the Message and the properties dict gets
    it on its next read: every way of looking at the message agrees with the record."""
    import pickle

    with open_store(tmp_path) as s:
        msg = Message("t", b"x", tags="a", keys=["k"])
        held = msg.properties                   # a reference taken before the put
        r1 = s.put_message(msg)
        r2 = s.put_message(msg)                 # put again before anything read the key
        assert r1.uniq_key == r2.uniq_key
        stored = s.look_message_by_offset(r2.commitlog_offset)
        assert stored.properties_string.count("UNIQ_KEY") == 1
        assert stored.properties == {"TAGS": "a", "KEYS": "k", "UNIQ_KEY": r1.uniq_key}
        assert pickle.loads(pickle.dumps(msg)).uniq_key == r1.uniq_key
        assert held["UNIQ_KEY"] == r1.uniq_key == msg.uniq_key
        assert list(msg.properties) == ["TAGS", "KEYS", "UNIQ_KEY"]     # where the record has it

        # a key written into a held dict after a put wins over the generated one
        other = Message("t", b"y")
        d = other.properties
        first = s.put_message(other)
        d["UNIQ_KEY"] = "SET-BY-HAND"
        again = s.put_message(other)
        assert first.uniq_key != "SET-BY-HAND" == again.uniq_key == other.uniq_key
        rec = s.look_message_by_offset(again.commitlog_offset)
        assert rec.properties_string.count("UNIQ_KEY") == 1 and rec.uniq_key == "SET-BY-HAND"

        # clearing it (or replacing the dict) makes the next put generate a new one
        cleared = Message("t", b"z")
        k1 = s.put_messages([cleared])[0].uniq_key
        cleared.uniq_key = None
        k2 = s.put_message(cleared).uniq_key
        cleared.properties = {"p": "v"}
        k3 = s.put_message(cleared).uniq_key
        assert len({k1, k2, k3}) == 3 and cleared.properties == {"p": "v", "UNIQ_KEY": k3}
        with pytest.raises(TypeError, match="properties"):
            cleared.properties = [("p", "v")]


def test_transaction_queue_offsets(tmp_path: Path) -> None:
    def put(s: MessageStore, flag: int, q: int = 0) -> int:
        r = s.put_message(Message("tx", b"x", sys_flag=flag), q)
        assert r.ok
        return r.queue_offset

    with open_store(tmp_path) as s:
        assert put(s, 0x0) == 0
        assert put(s, 0x4) == 0  # prepared: offset 0, queue does not advance
        assert s.next_queue_offset("tx", 0) == 1
        assert put(s, 0x8) == 1  # commit: a normal queue message
        assert put(s, 0xC) == 0  # rollback
        assert put(s, 0x4, 1) == 0  # prepared into an unseen queue
        assert s.next_queue_offset("tx", 1) == 0
        assert put(s, 0x0, 1) == 0
        assert put(s, 0x1 | 0x2) == 2  # compressed / multi-tags bits are not transactions
        res = s.put_messages(
            [Message("tx", b"b", sys_flag=f) for f in (0x4, 0x0, 0xC, 0x8, 0x4)], 0
        )
        assert res.queue_offsets.tolist() == [0, 3, 0, 4, 0]
        assert s.next_queue_offset("tx", 0) == 5
        flags = [(m.sys_flag, m.queue_offset) for m in s.scan() if m.queue_id == 0]
        assert flags == [
            (0, 0),
            (4, 0),
            (8, 1),
            (12, 0),
            (3, 2),
            (4, 0),
            (0, 3),
            (12, 0),
            (8, 4),
            (4, 0),
        ]
    with open_store(tmp_path) as s:
        assert s.next_queue_offset("tx", 0) == 5
        assert s.next_queue_offset("tx", 1) == 1
        assert put(s, 0x0) == 5


# ---------------------------------------------------------------------------- crash-prone cases

BATCH_QUEUE_GROWTH = """
import sys
from helpers import open_store
from rocketstore import Message
with open_store(sys.argv[1]) as s:
    res = s.put_messages([Message("T", b"a"), Message("T", b"b"), Message("T", b"c")],
                         [0, 1000, 0])
    print("QOFFS", res.queue_offsets.tolist(), s.next_queue_offset("T", 0))
    assert res.queue_offsets.tolist() == [0, 0, 1], res.queue_offsets.tolist()
    assert s.next_queue_offset("T", 0) == 2 and s.next_queue_offset("T", 1000) == 1
print("OK")
"""


def test_batch_with_growing_queue_ids_of_one_topic(tmp_path: Path) -> None:
    # a later message of the same topic with a larger queue id grows the topic's counter
    # array while the batch is prepared (a use-after-free there would crash: run in a child
    # process)
    proc = run_python(BATCH_QUEUE_GROWTH, args=[str(tmp_path)], timeout=60)
    assert_no_signal(proc, "batch with growing queue ids")
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


HUGE_QUEUE_ID = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))   # a bad alloc fails, not the box
from helpers import open_store
from rocketstore import Message
with open_store(sys.argv[1]) as s:
    try:
        r = s.put_message(Message("T", b"x"), 2**31 - 1)
    except (ValueError, MemoryError) as e:
        print("REFUSED", type(e).__name__, e)
    else:
        assert r.ok and r.queue_offset == 0, r
        print("STORED")
"""


def test_largest_queue_id_does_not_crash(tmp_path: Path) -> None:
    proc = run_python(HUGE_QUEUE_ID, args=[str(tmp_path)], timeout=120)
    assert_no_signal(proc, "queue id 2**31-1")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_refused_puts_say_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """MESSAGE_ILLEGAL and PROPERTIES_SIZE_EXCEEDED carry a reason (on the result and in a
    WARNING log line) naming the limit that was crossed; nothing is stored."""
    with open_store(tmp_path, max_message_size=1024) as store, \
            caplog.at_level(logging.WARNING, logger="rocketstore.store"):
        r = store.put_message(Message("t", b"x" * 2000), 0)
        assert r.status == PutMessageStatus.MESSAGE_ILLEGAL
        assert "body of 2,000 bytes" in r.reason and "max_message_size (1,024 bytes)" in r.reason
        r = store.put_message(Message("t", b"x", properties={"p": "v" * 40_000}), 0)
        assert r.status == PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        assert "32,767" in r.reason
        b = store.put_messages([Message("t", b"ok"), Message("t", b"y" * 5000)], 0)
        assert b.status == PutMessageStatus.MESSAGE_ILLEGAL and b.stored == 0
        assert b.reason.startswith("messages[1].body of 5,000 bytes")
        assert store.put_message(Message("t", b"ok"), 0).reason is None
        assert store.get_max_phy_offset() > 0
        assert sum("put refused" in rec.getMessage() for rec in caplog.records) == 3


def test_put_path_refuses_until_started_and_after_shutdown(tmp_path: Path) -> None:
    """put_message is the native put path itself, with an explicit refusing state."""
    store = MessageStore(tmp_path, helpers.make_config(tmp_path))
    assert store.put_message(Message("t", b"x"), 0).status == \
        PutMessageStatus.SERVICE_NOT_AVAILABLE
    store.load()
    store.start()
    assert store.put_message(Message("t", b"x"), 0).status == PutMessageStatus.PUT_OK
    store.shutdown()
    assert store.put_message(Message("t", b"x"), 0).status == \
        PutMessageStatus.SERVICE_NOT_AVAILABLE
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.put_message(Message("t", b"x"), 0).status == \
            PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_open_on_a_file_says_it_is_a_file(tmp_path) -> None:
    path = tmp_path / "not-a-store"
    path.write_text("x")
    for read_only in (False, True):
        with pytest.raises(NotADirectoryError, match=r"not-a-store is a file, not a directory$"):
            MessageStore.open(path, read_only=read_only)
    assert path.read_text() == "x"

"""The MessageStore read API against brute force over an independent scan of the CommitLog.

- get_message: tag subscriptions (``*``, ``A || B``, unicode tags, tags whose Java hash codes
  collide) equal a brute-force filter, with RocketMQ's max_msgs / transfer-limit /
  next_begin_offset semantics (a pull reads the units of one ConsumeQueue file at most); every
  GetMessageStatus the store can produce;
- query_message: equals a brute-force key scan with forced hash collisions (1..5 slots), keys
  spread over many index files and time windows; the 49 lookups of the RocketMQ 4.9.8 fixture
  return exactly the true matches (never RocketMQ's colliding entries);
- view_message by msg id (IPv4 and IPv6 store hosts); get_offset_in_queue_by_time;
- concurrent producers and consumers; the delay between a put and its visibility.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import helpers
import pytest
import refcodec

from rocketstore import GetMessageStatus, Message, MessageStore, StoreConfig
from rocketstore._native.hosts import make_msg_id

S = GetMessageStatus
CL_SIZE = 64 * 1024
CQ_UNITS = 100
STORE_HOST = helpers.STORE_HOST
PREPARED, COMMIT, ROLLBACK = 0x4, 0x8, 0xC
LONG_MAX = 2**63 - 1


def make_config(root: str | os.PathLike[str], **changes: Any) -> StoreConfig:
    """helpers.make_config with this file's sizes: 100-unit ConsumeQueue files (rolls early)
    and a 64-slot IndexFile (collisions)."""
    sizes: dict[str, Any] = {"mapped_file_size_commit_log": CL_SIZE,
                             "mapped_file_size_consume_queue": CQ_UNITS * 20,
                             "max_hash_slot_num": 64, "max_index_num": 400}
    return helpers.make_config(root, **{**sizes, **changes})


def open_store(root: str | os.PathLike[str], **changes: Any) -> MessageStore:
    return MessageStore.open(root, make_config(root, **changes))


def fixture_config(root: Path, **changes: Any) -> StoreConfig:
    values: dict[str, Any] = {
        "store_path_root_dir": str(root), "mapped_file_size_commit_log": 65536,
        "mapped_file_size_consume_queue": 2000, "max_hash_slot_num": 200,
        "max_index_num": 800}
    values.update(changes)
    return StoreConfig(**values)


def queue_records(root: Path, topic: str, qid: int) -> list[refcodec.RefRecord]:
    """The records of a queue in queue order, from refcodec's scan (dispatch rules applied)."""
    out = [r for r in refcodec.iter_commitlog(root)
           if r.topic == topic and r.queueId == qid and r.sysFlag & 0xC in (0, COMMIT)]
    assert [r.queueOffset for r in out] == list(range(len(out)))
    return out


# ============================================================================ tag filtering

TAGS = [None, "TagA", "TagB", "TagC", "Aa", "BB", "AaAa", "BBBB", "AaBB", "订单", "café",
        "📦", "🚀launch", "ÄÖÜ"]
SUBSCRIPTIONS = ["*", "", None, "TagA", "TagA || TagB", "  TagA||TagB  ", "TagA || ", "Aa",
                 "BB", "Aa || AaAa", "BBBB", "AaBB || BB", "订单", "café || 📦", "🚀launch",
                 "ÄÖÜ || TagC", "Missing", "TagA || Missing", "Ab"]


def test_colliding_tags_really_collide() -> None:
    assert refcodec.java_hash("Aa") == refcodec.java_hash("BB")
    assert len({refcodec.java_hash(t) for t in ("AaAa", "BBBB", "AaBB")}) == 1


def parse_sub(expr: str | None) -> set[str] | None:
    """RocketMQ FilterAPI: '*'/empty = everything, else '||'-separated trimmed tags."""
    if expr is None or expr.strip() in ("", "*"):
        return None
    return {t.strip() for t in expr.split("||") if t.strip()}


def model_pull(recs: list[refcodec.RefRecord], offset: int, max_msgs: int,
               sub: set[str] | None, max_count: int, max_bytes: int,
               per_file: int = CQ_UNITS) -> tuple[S, int, list[int]]:
    """RocketMQ getMessage for 0 <= offset < len(recs): read the units up to the end of the
    ConsumeQueue file holding offset; stop before a unit when the batch is full (max_msgs,
    transfer count or bytes; never before the first message); count every unit looked at."""
    window = recs[offset:min(len(recs), (offset // per_file + 1) * per_file)]
    got: list[int] = []
    total = looked = 0
    for r in window:
        if got and (len(got) >= max_msgs or total + r.storeSize > max_bytes
                    or len(got) > max_count - 1):
            break
        looked += 1
        if sub is None or r.tags in sub:
            got.append(r.commitLogOffset)
            total += r.storeSize
    return (S.FOUND if got else S.NO_MATCHED_MESSAGE), offset + looked, got


@pytest.fixture(scope="module")
def tag_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic 'tags', 2 queues of ~230 units (3 ConsumeQueue files each), every tag of TAGS;
    long runs of one tag so some pulls find nothing in a whole file."""
    root = tmp_path_factory.mktemp("tags") / "store"
    rng = random.Random(3)
    with open_store(root) as store:
        for i in range(460):
            tag = "TagC" if 120 <= i < 340 and i % 2 == 0 else rng.choice(TAGS)
            body = rng.randbytes(rng.randrange(20, 600))
            assert store.put_message(Message("tags", body, tags=tag, keys=[f"t{i}"]), i % 2).ok
        assert store.wait_dispatched()
    return root


@pytest.fixture
def tag_copy(tag_store: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "store"
    shutil.copytree(tag_store, dst)
    return dst


@pytest.mark.parametrize("limits", [
    {},
    {"max_transfer_count_on_message_in_memory": 5},
    {"max_transfer_bytes_on_message_in_memory": 1000},
    # every message counts as "in disk": RocketMQ's disk limits (8 messages, 64 KiB) apply
    {"access_message_in_memory_max_ratio": 0},
    {"access_message_in_memory_max_ratio": 0, "max_transfer_count_on_message_in_disk": 3,
     "max_transfer_bytes_on_message_in_disk": 700},
], ids=["default", "count5", "bytes1000", "disk", "disk-small"])
def test_tag_filter_equals_brute_force(tag_copy: Path, limits: dict[str, int]) -> None:
    config = make_config(tag_copy, **limits)
    in_disk = config.access_message_in_memory_max_ratio == 0
    max_count = (config.max_transfer_count_on_message_in_disk if in_disk
                 else config.max_transfer_count_on_message_in_memory)
    max_bytes = (config.max_transfer_bytes_on_message_in_disk if in_disk
                 else config.max_transfer_bytes_on_message_in_memory)
    rng = random.Random(11)
    with MessageStore.open(tag_copy, config) as store:
        for qid in (0, 1):
            recs = queue_records(tag_copy, "tags", qid)
            assert store.get_max_offset_in_queue("tags", qid) == len(recs) > 2 * CQ_UNITS
            for expr in SUBSCRIPTIONS:
                sub = parse_sub(expr)
                want_all = [r.commitLogOffset for r in recs if sub is None or r.tags in sub]
                for max_msgs in (1, 5, 32, 100):
                    # pull the whole queue following next_begin_offset
                    offset, got = 0, []
                    while offset < len(recs):
                        r = store.get_message("g", "tags", qid, offset, max_msgs, expr)
                        status, nxt, msgs = model_pull(recs, offset, max_msgs, sub, max_count,
                                                       max_bytes)
                        assert (r.status, r.next_begin_offset) == (status, nxt), (
                            expr, max_msgs, offset)
                        assert [m.commitlog_offset for m in r.messages] == msgs
                        assert r.buffer_total_size == sum(m.store_size for m in r.messages)
                        assert [bytes(b) for b in r.buffers] == [bytes(m.record)
                                                                 for m in r.messages]
                        assert (r.min_offset, r.max_offset) == (0, len(recs))
                        assert r.suggest_pulling_from_slave == in_disk
                        got += msgs
                        offset = r.next_begin_offset
                    assert got == want_all, (expr, max_msgs)
                # and from random offsets
                for offset in rng.sample(range(len(recs)), 8):
                    r = store.get_message("g", "tags", qid, offset, 32, expr)
                    status, nxt, msgs = model_pull(recs, offset, 32, sub, max_count, max_bytes)
                    assert (r.status, r.next_begin_offset,
                            [m.commitlog_offset for m in r.messages]) == (status, nxt, msgs)
                    assert all(sub is None or m.tags in sub for m in r.messages)


def test_fixture_tag_filter_equals_brute_force(rocketmq_store: Path,
                                              fixture_consumequeue: list[dict[str, Any]],
                                              fixture_messages: list[dict[str, Any]]) -> None:
    """RocketMQ's own tags codes (Latin-1, CJK, emoji as surrogate pairs) filter the same."""
    by_offset = {m["commitLogOffset"]: m for m in fixture_messages}
    tags = sorted({m["tags"] for m in fixture_messages if m["tags"]})
    assert {"café", "订单", "📦"} <= set(tags)
    rng = random.Random(2)
    exprs = ["*", *tags, *(f"{a} || {b}" for a, b in (rng.sample(tags, 2) for _ in range(10)))]
    config = StoreConfig(store_path_root_dir=str(rocketmq_store),
                         mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=2000,
                         max_hash_slot_num=200, max_index_num=800)
    with MessageStore.open(rocketmq_store, config) as store:
        for q in fixture_consumequeue:
            recs = [SimpleNamespace(commitLogOffset=u["commitLogOffset"],
                                    storeSize=u["size"],
                                    tags=by_offset[u["commitLogOffset"]]["tags"])
                    for u in q["units"]]
            for expr in exprs:
                sub = parse_sub(expr)
                offset, got = 0, []
                while offset < len(recs):
                    r = store.get_message("g", q["topic"], q["queueId"], offset, 32, expr)
                    want = model_pull(recs, offset, 32, sub, 32, 256 * 1024)  # type: ignore
                    assert (r.status, r.next_begin_offset,
                            [m.commitlog_offset for m in r.messages]) == want, (expr, offset)
                    got += [m.commitlog_offset for m in r.messages]
                    offset = r.next_begin_offset
                assert got == [x.commitLogOffset for x in recs if sub is None or x.tags in sub]


def test_pulls_stop_at_the_consume_queue_file_end(tag_copy: Path) -> None:
    """A pull never reads past the ConsumeQueue file holding its offset (RocketMQ
    getIndexBuffer): from the last unit of a file, at most one message comes back."""
    with open_store(tag_copy) as store:
        r = store.get_message("g", "tags", 0, CQ_UNITS - 1, 32)
        assert r.status == S.FOUND and len(r.messages) == 1
        assert r.next_begin_offset == CQ_UNITS
        r = store.get_message("g", "tags", 0, CQ_UNITS, 32)
        assert len(r.messages) == 32 and r.next_begin_offset == CQ_UNITS + 32


def test_no_matched_message_advances_over_the_file(tag_copy: Path) -> None:
    with open_store(tag_copy) as store:
        r = store.get_message("g", "tags", 0, 0, 32, "Missing")
        assert r.status == S.NO_MATCHED_MESSAGE and not r.messages
        assert r.next_begin_offset == CQ_UNITS
        r = store.get_message("g", "tags", 0, CQ_UNITS + 5, 32, "Missing")
        assert r.status == S.NO_MATCHED_MESSAGE and r.next_begin_offset == 2 * CQ_UNITS


def test_bad_arguments_raise(tag_copy: Path) -> None:
    with open_store(tag_copy) as store:
        with pytest.raises(ValueError, match="subscription"):
            store.get_message("g", "tags", 0, 0, 32, "||")
        with pytest.raises(ValueError, match="max_msgs"):
            store.get_message("g", "tags", 0, 0, 0)
        with pytest.raises(ValueError, match="queue_id"):
            store.get_message("g", "tags", -1, 0)
        with pytest.raises(TypeError, match="offset"):
            store.get_message("g", "tags", 0, "0")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="topic"):
            store.get_message("g", b"tags", 0, 0)  # type: ignore[arg-type]


# ============================================================================ statuses


def test_every_get_message_status(tag_copy: Path) -> None:
    (tag_copy / "consumequeue" / "empty" / "0").mkdir(parents=True)
    with open_store(tag_copy) as store:
        n = store.get_max_offset_in_queue("tags", 0)

        def get(topic: str, qid: int, offset: int, sub: str = "*") -> tuple[S, int, int, int]:
            r = store.get_message("g", topic, qid, offset, 32, sub)
            return r.status, r.next_begin_offset, r.min_offset, r.max_offset

        assert get("nope", 0, 0) == (S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        assert get("tags", 7, 5) == (S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        assert "empty" in store.topics() and store.queues("empty") == [0]
        assert get("empty", 0, 3) == (S.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        assert get("tags", 0, -1) == (S.OFFSET_TOO_SMALL, 0, 0, n)
        assert get("tags", 0, n) == (S.OFFSET_OVERFLOW_ONE, n, 0, n)
        assert get("tags", 0, n + 1) == (S.OFFSET_OVERFLOW_BADLY, n, 0, n)
        assert get("tags", 0, 10**12) == (S.OFFSET_OVERFLOW_BADLY, n, 0, n)
        assert get("tags", 0, 0)[0] == S.FOUND
        assert get("tags", 0, 0, "Missing")[:2] == (S.NO_MATCHED_MESSAGE, CQ_UNITS)
    # a slave without offset_check_in_slave does not correct the offset
    with MessageStore.open(tag_copy, make_config(tag_copy, broker_role="SLAVE")) as store:
        r = store.get_message("g", "tags", 0, n + 5)
        assert r.status == S.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == n + 5
    # a closed store
    store = open_store(tag_copy)
    store.shutdown()
    assert store.get_message("g", "tags", 0, 0).status == S.NO_MATCHED_LOGIC_QUEUE


# RocketMQ 4.9.8 DefaultMessageStore.getMessage's nextBeginOffset, status by status. A refused
# offset is corrected (nextOffsetCorrection) on a master and on a slave with
# offset_check_in_slave; a slave without it answers the offset it was asked for. An offset
# the pull read from moves past the units looked at, whatever the role.
ROLES = {"master": {}, "slave": {"broker_role": "SLAVE"},
         "slave-checking": {"broker_role": "SLAVE", "offset_check_in_slave": True}}


@pytest.fixture(params=list(ROLES))
def role(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def pull_as(root: Path, role: str, topic: str, qid: int, offset: int, sub: str = "*",
            before: Any = None) -> tuple[S, int, int, int]:
    with MessageStore.open(root, make_config(root, **ROLES[role])) as store:
        if before is not None:
            before(store)
        r = store.get_message("g", topic, qid, offset, 32, sub)
        return r.status, r.next_begin_offset, r.min_offset, r.max_offset


def corrected(role: str, asked: int, correct: int) -> int:
    return asked if role == "slave" else correct


def test_no_matched_logic_queue_next_offset(tag_copy: Path, role: str) -> None:
    assert pull_as(tag_copy, role, "nope", 0, 7) == (
        S.NO_MATCHED_LOGIC_QUEUE, corrected(role, 7, 0), 0, 0)


def test_no_message_in_queue_next_offset(tag_copy: Path, role: str) -> None:
    (tag_copy / "consumequeue" / "empty" / "0").mkdir(parents=True)
    assert pull_as(tag_copy, role, "empty", 0, 3) == (
        S.NO_MESSAGE_IN_QUEUE, corrected(role, 3, 0), 0, 0)


def test_offset_too_small_next_offset(tag_copy: Path, role: str) -> None:
    n = len(queue_records(tag_copy, "tags", 0))
    assert pull_as(tag_copy, role, "tags", 0, -5) == (
        S.OFFSET_TOO_SMALL, corrected(role, -5, 0), 0, n)


def test_offset_overflow_one_next_offset(tag_copy: Path, role: str) -> None:
    n = len(queue_records(tag_copy, "tags", 0))
    assert pull_as(tag_copy, role, "tags", 0, n) == (S.OFFSET_OVERFLOW_ONE, n, 0, n)


@pytest.mark.parametrize("beyond", [1, 2, 10**12])
def test_offset_overflow_badly_next_offset_is_the_max_offset(tag_copy: Path, role: str,
                                                             beyond: int) -> None:
    """Past the end: the queue's max offset (also when its min offset is 0)."""
    n = len(queue_records(tag_copy, "tags", 0))
    assert pull_as(tag_copy, role, "tags", 0, n + beyond) == (
        S.OFFSET_OVERFLOW_BADLY, corrected(role, n + beyond, n), 0, n)


def test_offset_found_null_next_offset(tag_copy: Path, role: str) -> None:
    """The ConsumeQueue file holding the offset is gone while the queue's min offset still
    names it (deleted, not yet corrected): the first offset of the next file."""
    n = len(queue_records(tag_copy, "tags", 0))

    def drop_first_cq_file(store: MessageStore) -> None:
        cq = store.consume_queues.find("tags", 0)
        assert cq is not None and cq.queue.delete_before(CQ_UNITS * 20, 0) == 1
        assert cq.min_offset == 0

    assert pull_as(tag_copy, role, "tags", 0, 5, before=drop_first_cq_file) == (
        S.OFFSET_FOUND_NULL, corrected(role, 5, CQ_UNITS), 0, n)


def test_no_matched_message_next_offset(tag_copy: Path, role: str) -> None:
    n = len(queue_records(tag_copy, "tags", 0))
    assert pull_as(tag_copy, role, "tags", 0, 3, "Missing") == (
        S.NO_MATCHED_MESSAGE, CQ_UNITS, 0, n)


def test_message_was_removing_next_offset(tag_copy: Path, role: str) -> None:
    """The CommitLog files under a whole ConsumeQueue file's units are deleted and the
    queue's min offset is not corrected yet: every unit is looked at."""
    recs = queue_records(tag_copy, "tags", 0)
    cut = 2 * CL_SIZE
    assert recs[CQ_UNITS - 1].commitLogOffset < cut

    def drop_commit_log_files(store: MessageStore) -> None:
        assert store.commit_log.queue.delete_before(cut, 0) == 2

    assert pull_as(tag_copy, role, "tags", 0, 0, before=drop_commit_log_files) == (
        S.MESSAGE_WAS_REMOVING, CQ_UNITS, 0, len(recs))


def test_found_next_offset(tag_copy: Path, role: str) -> None:
    n = len(queue_records(tag_copy, "tags", 0))
    assert pull_as(tag_copy, role, "tags", 0, 10) == (S.FOUND, 42, 0, n)


@pytest.mark.parametrize("delete_cq", [True, False], ids=["with-cq-files", "commitlog-only"])
def test_offset_too_small_after_old_files_are_deleted(tmp_path: Path, delete_cq: bool) -> None:
    """The oldest CommitLog segments deleted, and (with-cq-files) the ConsumeQueue files whose
    units all point into them, as the clean services do: the queue's min offset moves up to
    the first unit whose message is still there; older offsets are OFFSET_TOO_SMALL, answered
    with the new min as next_begin_offset."""
    root = tmp_path / "s"
    with open_store(root) as store:
        for i in range(600):
            assert store.put_message(Message("old", os.urandom(700), tags="x"), i % 2).ok
        assert store.wait_dispatched()
    all_recs = {qid: queue_records(root, "old", qid) for qid in (0, 1)}
    segments = sorted((root / "commitlog").iterdir())
    assert len(segments) >= 6
    for seg in segments[:3]:
        seg.unlink()
    first_phy = int(segments[3].name)
    if delete_cq:
        for qid in (0, 1):
            for path in sorted((root / "consumequeue" / "old" / str(qid)).iterdir()):
                last = int.from_bytes(path.read_bytes()[-20:-12], "big", signed=True)
                if 0 <= last < first_phy:   # a full file whose last message is gone
                    path.unlink()
    with open_store(root) as store:
        assert store.get_min_phy_offset() == first_phy
        for qid in (0, 1):
            recs = all_recs[qid]
            first_alive = next(i for i, r in enumerate(recs) if r.commitLogOffset >= first_phy)
            lo = store.get_min_offset_in_queue("old", qid)
            if delete_cq:
                assert lo == first_alive > CQ_UNITS
            else:
                # only the first ConsumeQueue file is looked at (RocketMQ correctMinOffset)
                assert 0 < lo <= first_alive
            r = store.get_message("g", "old", qid, 0)
            assert (r.status, r.next_begin_offset, r.min_offset) == (S.OFFSET_TOO_SMALL, lo, lo)
            r = store.get_message("g", "old", qid, lo - 1)
            assert r.status == S.OFFSET_TOO_SMALL
            r = store.get_message("g", "old", qid, lo)
            assert r.status == S.FOUND
            assert r.messages[0].commitlog_offset == recs[first_alive].commitLogOffset
            assert r.messages[0].queue_offset == first_alive
            assert store.get_offset_in_queue_by_time("old", qid, 0) == first_alive
            assert store.get_message_store_timestamp("old", qid, lo - 1) == -1
            if delete_cq:
                assert store.get_earliest_message_time("old", qid) == \
                    recs[first_alive].storeTimestamp


# ============================================================================ key queries


def brute_keys(records: list[refcodec.RefRecord], topic: str, key: str, max_num: int = 64,
               begin: int = 0, end: int = LONG_MAX, cap: int = 64) -> list[int]:
    """Offsets of the records of topic with key as UNIQ_KEY or KEYS token, stored in
    [begin, end], not ROLLBACK (never indexed): the newest min(max_num, cap), ascending."""
    hits = [r.commitLogOffset for r in records
            if r.topic == topic and r.sysFlag & 0xC != ROLLBACK
            and begin <= r.storeTimestamp <= end
            and (r.uniqKey == key or key in (r.keys or "").split(" "))]
    hits.sort()
    return hits[max(0, len(hits) - min(max_num, cap)):]


def queried(store: MessageStore, topic: str, key: str, max_num: int = 64, begin: int = 0,
            end: int = LONG_MAX) -> list[int]:
    res = store.query_message(topic, key, max_num, begin, end)
    offsets = [m.commitlog_offset for m in res.messages]
    for m in res.messages:
        assert m.topic == topic and (m.uniq_key == key or key in m.keys)
        assert begin <= m.store_timestamp <= end
    return offsets


KEY_TOPICS = ("ka", "kb")
HOT = 100   # records with key "hot" in topic ka: more than the 64 cap


@pytest.fixture(scope="module")
def key_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~900 records in 2 topics over 4 phases ~0.4 s apart (store times spread over several
    whole seconds for the time windows), keys: unique k<i>, a shared 'hot', colliding Aa/BB
    pairs, unicode keys, keys in both topics, prepared/commit/rollback transactions."""
    root = tmp_path_factory.mktemp("keys") / "store"
    rng = random.Random(99)
    with open_store(root, max_hash_slot_num=5000, max_index_num=20000) as store:
        i = 0
        for phase in range(4):
            if phase:
                time.sleep(0.4)
            for _ in range(220):
                topic = KEY_TOPICS[i % 7 == 0]
                keys = [f"k{i}"]
                if topic == "ka" and i % 9 == 0:
                    keys.append("hot")
                keys.append(rng.choice(["Aa", "BB", "AaAa", "BBBB", "AaBB", "x-Aa-1", "x-BB-1"]))
                if i % 5 == 0:
                    keys.append(rng.choice(["订单-1", "订单-2", "🔑", "café"]))
                if i % 11 == 0:
                    keys.append(f"shared-{i % 3}")
                sys_flag = 0
                if i % 37 == 5:
                    sys_flag = rng.choice([PREPARED, COMMIT, ROLLBACK])
                m = Message(topic, rng.randbytes(rng.randrange(10, 300)), tags="t", keys=keys,
                            sys_flag=sys_flag)
                assert store.put_message(m, i % 3).ok
                i += 1
        assert store.wait_dispatched()
    return root


def key_queries(records: list[refcodec.RefRecord]) -> list[tuple[str, str]]:
    qs = {(t, k) for t in KEY_TOPICS for k in
          ("hot", "Aa", "BB", "AaAa", "BBBB", "AaBB", "x-Aa-1", "x-BB-1", "订单-1", "订单-2",
           "🔑", "café", "shared-0", "shared-1", "shared-2", "k1", "k10", "k5", "k41",
           "absent", "k", "Ab")}
    for r in records[::23]:
        qs.add((r.topic, r.uniqKey))
        qs.add((KEY_TOPICS[r.topic == "ka"], f"k{r.queueOffset}"))  # maybe the other topic
    for r in records:
        if r.sysFlag & 0xC:
            qs.add((r.topic, r.uniqKey))
            qs.update((r.topic, k) for k in r.keys.split(" "))
    return sorted(qs)


@pytest.mark.parametrize("slots,items", [(1, 40), (3, 97), (5, 400), (64, 10000)])
def test_key_queries_equal_brute_force(key_store: Path, tmp_path: Path, slots: int,
                                       items: int) -> None:
    """The index rebuilt with `slots` hash slots (every key collides with many others) and
    `items` items per file (many index files), then every query checked."""
    root = tmp_path / "store"
    shutil.copytree(key_store, root)
    shutil.rmtree(root / "index")
    shutil.rmtree(root / "consumequeue")
    records = list(refcodec.iter_commitlog(root))
    assert {r.sysFlag & 0xC for r in records} == {0, PREPARED, COMMIT, ROLLBACK}
    stamps = sorted({r.storeTimestamp for r in records})
    assert stamps[-1] - stamps[0] >= 1000
    rng = random.Random(slots)
    with open_store(root, max_hash_slot_num=slots, max_index_num=items) as store:
        files = store.index_service.files
        if items < 100:
            assert len(files) >= 10
        windows = [(0, LONG_MAX), (stamps[0], stamps[-1]), (stamps[0] - 5000, stamps[0] - 1),
                   (stamps[-1] + 1, LONG_MAX)]
        for _ in range(6):
            a, b = sorted(rng.sample(stamps, 2))
            windows += [(a, b), (a + 1, max(a + 1, b - 1)), (a, a)]
        for topic, key in key_queries(records):
            assert queried(store, topic, key) == brute_keys(records, topic, key), (topic, key)
            for max_num in (1, 7, 1000):
                assert queried(store, topic, key, max_num) == brute_keys(
                    records, topic, key, max_num), (topic, key, max_num)
            for begin, end in windows:
                assert queried(store, topic, key, 64, begin, end) == brute_keys(
                    records, topic, key, 64, begin, end), (topic, key, begin, end)
        hot = queried(store, "ka", "hot")
        assert len(hot) == 64 < len(brute_keys(records, "ka", "hot", 1000, cap=1000))


def test_query_message_arguments(key_store: Path, tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(key_store, root)
    with open_store(root, max_hash_slot_num=5000, max_index_num=20000) as store:
        with pytest.raises(ValueError, match="key"):
            store.query_message("ka", "")
        with pytest.raises(ValueError, match="max_num"):
            store.query_message("ka", "hot", 0)
        with pytest.raises(ValueError, match="begin"):
            store.query_message("ka", "hot", 5, 10, 9)
        with pytest.raises(TypeError):
            store.query_message("ka", 5)  # type: ignore[arg-type]
        assert store.query_message("nope", "hot").messages == []


def _fixture_store(rocketmq_store: Path, **changes: Any) -> MessageStore:
    return MessageStore.open(rocketmq_store, fixture_config(rocketmq_store, **changes))


def _true_matches(q: dict[str, Any], by_offset: dict[int, dict[str, Any]]) -> list[int]:
    """matchingOffsets minus ROLLBACK records (never indexed), the newest 64."""
    hits = sorted(o for o in q["matchingOffsets"] if by_offset[o]["sysFlag"] & 0xC != ROLLBACK)
    return hits[-64:]


def test_fixture_lookups_return_exactly_the_true_matches(
        rocketmq_store: Path, fixture_index_queries: list[dict[str, Any]],
        fixture_messages: list[dict[str, Any]]) -> None:
    by_offset = {m["commitLogOffset"]: m for m in fixture_messages}
    assert len(fixture_index_queries) == 49
    colliding = capped = 0
    with _fixture_store(rocketmq_store) as store:
        for q in fixture_index_queries:
            args = q["queryMessageArgs"]
            want = _true_matches(q, by_offset)
            got = queried(store, q["topic"], q["key"], args["maxNum"], args["begin"],
                          args["end"])
            assert got == want, q["why"]
            bad = {c["commitLogOffset"] for c in q["collidingReturned"]}
            assert not bad & set(got)
            colliding += bool(bad)
            capped += len(want) < len(q["matchingOffsets"])
            for m in store.query_message(q["topic"], q["key"], 64).messages:
                assert m.msg_id == by_offset[m.commitlog_offset]["msgId"]
    assert colliding == 12 and capped >= 1


@pytest.mark.parametrize("slots,items", [(1, 50), (2, 300), (5, 2000)])
def test_fixture_lookups_with_forced_collisions(
        rocketmq_store: Path, fixture_index_queries: list[dict[str, Any]],
        fixture_messages: list[dict[str, Any]], slots: int, items: int) -> None:
    """The fixture's index rebuilt by rocketstore with 1..5 slots: every key shares its chain
    with most others, yet each lookup returns exactly its true matches."""
    shutil.rmtree(rocketmq_store / "index")
    shutil.rmtree(rocketmq_store / "consumequeue")
    by_offset = {m["commitLogOffset"]: m for m in fixture_messages}
    with _fixture_store(rocketmq_store, max_hash_slot_num=slots, max_index_num=items) as store:
        assert store.recovery is not None and store.recovery.dispatched_records == 600
        for q in fixture_index_queries:
            assert queried(store, q["topic"], q["key"]) == _true_matches(q, by_offset), q["why"]


def test_fixture_lookups_in_time_windows(rocketmq_store: Path,
                                         fixture_index_queries: list[dict[str, Any]],
                                         fixture_messages: list[dict[str, Any]]) -> None:
    stamps = sorted({m["storeTimestamp"] for m in fixture_messages})
    rng = random.Random(5)
    windows = [(stamps[0], stamps[-1]), (stamps[len(stamps) // 2], LONG_MAX)]
    for _ in range(10):
        a, b = sorted(rng.sample(stamps, 2))
        windows += [(a, b), (a + 1, b), (a, b - 1)]
    by_offset = {m["commitLogOffset"]: m for m in fixture_messages}
    with _fixture_store(rocketmq_store) as store:
        for q in fixture_index_queries:
            for begin, end in windows:
                want = sorted(o for o in q["matchingOffsets"]
                              if by_offset[o]["sysFlag"] & 0xC != ROLLBACK
                              and begin <= by_offset[o]["storeTimestamp"] <= end)[-64:]
                assert queried(store, q["topic"], q["key"], 64, begin, end) == want, (
                    q["why"], begin, end)
            for max_num in (1, 3):
                want = _true_matches(q, by_offset)
                assert queried(store, q["topic"], q["key"], max_num) == want[len(want) - min(
                    max_num, len(want)):]


# ============================================================================ ids, offsets


def test_view_message_ipv4_and_ipv6_store_hosts(tmp_path: Path) -> None:
    hosts = [None, "10.1.2.3:10911", "[2001:db8::100]:10911", "[fd00::a]:1"]
    with open_store(tmp_path / "s") as store:
        puts = []
        for i in range(200):
            host = hosts[i % len(hosts)]
            r = store.put_message(Message("view", f"body-{i}".encode(), keys=[f"v{i}"],
                                          store_host=host), i % 2)
            assert r.ok
            puts.append((r, host or STORE_HOST, f"body-{i}".encode()))
        for r, host, body in puts:
            assert len(r.msg_id) == (56 if host.startswith("[") else 32)
            assert r.msg_id == refcodec.msg_id(*refcodec.parse_host(host), r.commitlog_offset)
            m = store.view_message(r.msg_id)
            assert m is not None
            assert (m.commitlog_offset, m.store_host, bytes(m.body), m.msg_id) == (
                r.commitlog_offset, host, body, r.msg_id)
            assert store.look_message_by_offset(r.commitlog_offset).msg_id == r.msg_id
        last = puts[-1][0]
        end = last.commitlog_offset + last.wrote_bytes
        assert store.view_message(make_msg_id(STORE_HOST, end)) is None
        assert store.view_message(make_msg_id(STORE_HOST, 10**12)) is None
        # an offset inside a record is not a message
        assert store.view_message(make_msg_id(STORE_HOST, last.commitlog_offset + 1)) \
            is None
        with pytest.raises(ValueError):
            store.view_message("XYZ")
        with pytest.raises(ValueError):
            store.view_message("C0A8000A00002A9F00000000000000")  # too short


def test_view_message_of_every_fixture_record(rocketmq_store: Path,
                                              fixture_messages: list[dict[str, Any]]) -> None:
    with _fixture_store(rocketmq_store) as store:
        v6 = 0
        for want in fixture_messages:
            m = store.view_message(want["msgId"])
            assert m is not None
            assert (m.commitlog_offset, m.topic, m.store_host, m.born_host, m.sys_flag) == (
                want["commitLogOffset"], want["topic"], want["storeHost"], want["bornHost"],
                want["sysFlag"])
            v6 += len(want["msgId"]) == 56
        assert v6 == 78


def test_record_start_problem(rocketmq_store: Path,
                              fixture_messages: list[dict[str, Any]]) -> None:
    """None where a record or an END_FILE blank starts (or outside the data); the native
    check's reason anywhere else."""
    with _fixture_store(rocketmq_store) as store:
        for m in fixture_messages:
            assert store.record_start_problem(m["commitLogOffset"]) is None
        big = next(i for i, m in enumerate(fixture_messages) if m["bodyLen"] == 40000)
        blank = (fixture_messages[big - 1]["commitLogOffset"]
                 + fixture_messages[big - 1]["storeSize"])
        assert blank % 65536 != 0 and store.record_start_problem(blank) is None
        inside = fixture_messages[10]["commitLogOffset"] + 3
        assert store.record_start_problem(inside) == "bad magic code"
        assert store.record_start_problem(store.get_max_phy_offset()) is None
        assert store.record_start_problem(10**12) is None


def test_fixture_times_and_offsets(rocketmq_store: Path,
                                   fixture_consumequeue: list[dict[str, Any]],
                                   fixture_messages: list[dict[str, Any]]) -> None:
    by_offset = {m["commitLogOffset"]: m for m in fixture_messages}
    with _fixture_store(rocketmq_store) as store:
        assert store.get_earliest_message_time() == fixture_messages[0]["storeTimestamp"]
        for q in fixture_consumequeue:
            units = q["units"]
            first = by_offset[units[0]["commitLogOffset"]]
            assert store.get_earliest_message_time(q["topic"], q["queueId"]) == \
                first["storeTimestamp"]
            for u in units[::17]:
                m = by_offset[u["commitLogOffset"]]
                assert store.get_message_store_timestamp(
                    q["topic"], q["queueId"], u["queueOffset"]) == m["storeTimestamp"]
                assert store.get_commitlog_offset_in_queue(
                    q["topic"], q["queueId"], u["queueOffset"]) == u["commitLogOffset"]
            assert store.get_message_store_timestamp(q["topic"], q["queueId"],
                                                     q["maxOffset"]) == -1
        assert store.look_message_by_offset(635655) is None
        assert store.get_earliest_message_time("nope", 0) == -1
        assert store.get_offset_in_queue_by_time("nope", 0, 0) == 0


def brute_offset_by_time(stamps: list[int], t: int, lo: int = 0) -> int:
    """getOffsetInQueueByTime: the first offset stored exactly at t, else the closer of the
    last one before t and the first one after it (the earlier on a tie)."""
    exact = [i for i, s in enumerate(stamps) if s == t]
    if exact:
        return lo + exact[0]
    left = [i for i, s in enumerate(stamps) if s < t]
    right = [i for i, s in enumerate(stamps) if s > t]
    if not left:
        return lo + right[0]
    if not right:
        return lo + left[-1]
    li, ri = left[-1], right[0]
    return lo + (ri if abs(t - stamps[li]) > abs(t - stamps[ri]) else li)


def test_offset_in_queue_by_time_equals_brute_force(tmp_path: Path) -> None:
    """~225 messages per queue (3 ConsumeQueue files), put a few ms apart, some in batches
    (equal store times)."""
    with open_store(tmp_path / "s") as store:
        for i in range(180):
            if i % 10 == 0:
                assert store.put_messages([Message("time", b"x" * 10) for _ in range(5)],
                                          [0, 1, 0, 1, 0]).ok
            assert store.put_message(Message("time", b"y"), i % 2).ok
            assert store.put_message(Message("time", b"z"), (i + 1) % 2).ok
            time.sleep(0.0015 + (i % 4) * 0.001)
        assert store.wait_dispatched()
        assert store.get_offset_in_queue_by_time("time", 5, 0) == 0
        for qid in (0, 1):
            stamps = [r.storeTimestamp for r in queue_records(tmp_path / "s", "time", qid)]
            assert len(stamps) > 2 * CQ_UNITS and stamps == sorted(stamps)
            assert len(set(stamps)) < len(stamps)  # some equal times (batches)
            probes = {stamps[0] - 10_000, stamps[0] - 1, stamps[-1] + 1, stamps[-1] + 10**9, 0}
            distinct = sorted(set(stamps))
            for a, b in zip(distinct, distinct[1:], strict=False):
                probes.update({a, b, a + 1, b - 1, (a + b) // 2, (a + b + 1) // 2})
            for t in sorted(probes):
                assert store.get_offset_in_queue_by_time("time", qid, t) == \
                    brute_offset_by_time(stamps, t), t


# ============================================================================ concurrency


def test_concurrent_producers_and_consumers(tmp_path: Path) -> None:
    producers, per_producer, queues = 4, 2500, 4
    consumers = ("g1", "g2")
    total = producers * per_producer
    errors: list[BaseException] = []
    store = open_store(tmp_path / "s")

    def produce(p: int) -> None:
        try:
            rng = random.Random(p)
            seq = 0
            while seq < per_producer:
                n = min(per_producer - seq, rng.choice([1, 1, 5, 20]))
                msgs = [Message("cc", f"{p}:{seq + j}".encode(), tags=f"P{p}")
                        for j in range(n)]
                qids = [rng.randrange(queues) for _ in range(n)]
                if n == 1:
                    assert store.put_message(msgs[0], qids[0]).ok
                else:
                    assert store.put_messages(msgs, qids).ok
                seq += n
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    seen: dict[str, Counter[bytes]] = {g: Counter() for g in consumers}
    order: dict[str, dict[int, list[int]]] = {g: defaultdict(list) for g in consumers}

    def consume(group: str) -> None:
        try:
            offsets = [0] * queues
            got = 0
            deadline = time.monotonic() + 60
            while got < total and time.monotonic() < deadline:
                idle = True
                for q in range(queues):
                    r = store.get_message(group, "cc", q, offsets[q], 32)
                    if r.status == S.FOUND:
                        idle = False
                        for m in r.messages:
                            seen[group][bytes(m.body)] += 1
                            order[group][q].append(m.queue_offset)
                        got += len(r.messages)
                        offsets[q] = r.next_begin_offset
                    else:
                        # nothing new yet (the queue may not exist, or have no unit yet)
                        assert r.status in (S.NO_MATCHED_LOGIC_QUEUE, S.NO_MESSAGE_IN_QUEUE,
                                            S.OFFSET_OVERFLOW_ONE), r.status
                        assert r.next_begin_offset == offsets[q]
                if idle:
                    time.sleep(0.0005)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=consume, args=(g,)) for g in consumers]
    threads += [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors
        want = {f"{p}:{s}".encode() for p in range(producers) for s in range(per_producer)}
        for g in consumers:
            assert set(seen[g]) == want, g
            dup = [b for b, c in seen[g].items() if c != 1]
            assert not dup, (g, dup[:5])
            for q in range(queues):
                assert order[g][q] == list(range(store.get_max_offset_in_queue("cc", q)))
    finally:
        store.shutdown()


def test_put_is_visible_to_get_message_within_milliseconds(tmp_path: Path) -> None:
    latencies = []
    with open_store(tmp_path / "s") as store:
        for i in range(300):
            t0 = time.perf_counter()
            r = store.put_message(Message("lat", b"x" * 100), 0)
            assert r.ok
            while True:
                g = store.get_message("g", "lat", 0, r.queue_offset, 1)
                if g.status == S.FOUND:
                    break
                if time.perf_counter() - t0 > 5:
                    pytest.fail(f"put {i} not visible after 5 s")
                time.sleep(0.00005)
            latencies.append(time.perf_counter() - t0)
            assert g.messages[0].commitlog_offset == r.commitlog_offset
    latencies.sort()
    median = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"\nput -> visible to get_message: median {median * 1e3:.3f} ms, "
          f"p99 {p99 * 1e3:.3f} ms, max {latencies[-1] * 1e3:.3f} ms ({len(latencies)} puts)")
    assert latencies[-1] < 1.0
    assert median < 0.1


def test_fixture_opens_with_no_config(rocketmq_store: Path, fixture_messages: list[dict[str, Any]],
                                      fixture_consumequeue: list[dict[str, Any]]) -> None:
    """RocketMQ's own store (64 KiB CommitLog, 2000-byte ConsumeQueue, 200-slot IndexFiles)
    opens as it is with no StoreConfig, read-only and writable, and serves every message."""
    for read_only in (True, False):
        with MessageStore.open(rocketmq_store, read_only=read_only) as store:
            cfg = store.config
            assert (cfg.mapped_file_size_commit_log, cfg.mapped_file_size_consume_queue,
                    cfg.max_hash_slot_num, cfg.max_index_num) == (65536, 2000, 200, 800)
            for m in fixture_messages:
                got = store.look_message_by_offset(m["commitLogOffset"])
                assert got is not None and got.topic == m["topic"]
            total = 0
            for topic, qid in {(q["topic"], q["queueId"]) for q in fixture_consumequeue}:
                offset = store.get_min_offset_in_queue(topic, qid)
                while offset < store.get_max_offset_in_queue(topic, qid):
                    res = store.get_message("g", topic, qid, offset, 32)
                    assert res.status == S.FOUND
                    total += len(res.messages)
                    offset = res.next_begin_offset
            assert total == sum(q["unitCount"] for q in fixture_consumequeue)

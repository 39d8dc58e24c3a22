"""The broker's transaction pieces on an embedded store: the half message, the store's
dispatch rule for transaction records, the check request's body, the op offset's progress."""

from __future__ import annotations

from pathlib import Path

from rocketstore.broker.transaction import (
    TransactionalMessageService,
    op_message,
    record_as_real_message,
)
from rocketstore.broker.transaction_check import calculate_op_offset
from rocketstore.client.records import decode_message
from rocketstore.common.record import SysFlag
from rocketstore.common.topics import TRANS_HALF_TOPIC
from rocketstore.config import StoreConfig
from rocketstore.message import Message
from rocketstore.store import MessageStore


def _store(tmp_path: Path) -> MessageStore:
    return MessageStore.open(tmp_path / "store", StoreConfig(mapped_file_size_commit_log=1 << 20))


def test_a_half_goes_to_the_half_topic_with_its_real_topic_and_queue(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        service = TransactionalMessageService(store)
        message = Message("Orders", b"order 1", properties={"TRAN_MSG": "true", "PGROUP": "G", "KEYS": "o1"},
                          sys_flag=int(SysFlag.TRANSACTION_PREPARED), born_host="127.0.0.1:5000")
        result = service.prepare(message, 3)
        assert result.ok and result.queue_offset == 0
        store.wait_dispatched()
        assert store.get_max_offset_in_queue("Orders", 3) == 0
        assert store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 1
        half = service.find_half(result.commitlog_offset)
        assert half is not None and half.sys_flag & 0xC == 0     # the bits reset, as RocketMQ
        assert half.properties["REAL_TOPIC"] == "Orders" and half.properties["REAL_QID"] == "3"
        assert service.find_half(result.commitlog_offset + 1) is None

        final, queue_id = service.final_message(half, dict(half.properties), int(SysFlag.TRANSACTION_COMMIT))
        assert (final.topic, queue_id, final.sys_flag & 0xC, final.prepared_transaction_offset) == (
            "Orders", 3, 0x8, result.commitlog_offset)

        # the CHECK_TRANSACTION_STATE body: the half as its real topic's message
        checked, end = decode_message(memoryview(record_as_real_message(half)))
        assert (checked.topic, checked.queue_id, checked.body, checked.keys) == ("Orders", 3, b"order 1", ["o1"])
        assert checked.commit_log_offset == result.commitlog_offset
        assert end == len(record_as_real_message(half))


def test_prepared_and_rolled_back_records_get_no_consume_queue_unit(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        for kind in (SysFlag.TRANSACTION_PREPARED, SysFlag.TRANSACTION_ROLLBACK,
                     SysFlag.TRANSACTION_COMMIT, SysFlag.TRANSACTION_NOT_TYPE):
            assert store.append_message(Message("T", kind.name.encode(), sys_flag=int(kind)), 0).ok
        store.wait_dispatched()
        result = store.get_message("G", "T", 0, 0, 10, "*")
        assert [bytes(m.body) for m in result.messages] == [b"TRANSACTION_COMMIT", b"TRANSACTION_NOT_TYPE"]


def test_an_op_names_the_half_queue_offset() -> None:
    op = op_message(42)
    assert (op.topic, op.tags, op.body) == ("RMQ_SYS_TRANS_OP_HALF_TOPIC", "d", b"42")


def test_the_op_offset_moves_past_the_done_ops_up_to_the_first_gap() -> None:
    assert calculate_op_offset([], 5) == 5
    assert calculate_op_offset([7, 5, 6], 5) == 8
    assert calculate_op_offset([5, 7], 5) == 6
    assert calculate_op_offset([6, 7], 5) == 5


def test_a_transaction_is_ended_once(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        service = TransactionalMessageService(store)
        props = {"UNIQ_KEY": "U1", "PGROUP": "G"}
        assert service.first_end(props)
        assert not service.first_end(dict(props))
        assert service.first_end({"UNIQ_KEY": "U1", "PGROUP": "other"})

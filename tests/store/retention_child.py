"""Child process of test_retention.py's kill test: writes batches into a store whose cleanup
deletes expired files all the time (every file but the newest is expired, the disk is "76%
full"), until the parent SIGKILLs it. stdout lines (flushed):

    READY
    ACK <seq of the first message> <json [[qid, queue offset, commitlog offset], ...]>
    DEL <path>      a file was deleted (commitlog, consumequeue or index)

    python retention_child.py ROOT ROUND
"""
from __future__ import annotations

import json
import logging
import sys

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.message import PutMessageStatus

QUEUES = 3
BATCH = 20


def config(root: str) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=64 * 1024,
                       mapped_file_size_consume_queue=40 * 20, max_hash_slot_num=97,
                       max_index_num=200, file_reserved_time=0, clean_resource_interval=20,
                       delete_commit_log_files_interval=3,
                       delete_consume_queue_files_interval=1, commit_log_prefault_ahead=0,
                       redelete_hanged_file_interval=100)


def body(seq: int) -> bytes:
    return f"s{seq:09d}".encode().ljust(700, b"-")


class Deletions(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg.startswith("deleted "):
            sys.stdout.write(f"DEL {msg}\n")
            sys.stdout.flush()


def main() -> None:
    root, round_no = sys.argv[1], int(sys.argv[2])
    log = logging.getLogger("rocketstore.store")
    log.setLevel(logging.INFO)
    log.addHandler(Deletions())
    store = MessageStore.open(root, config(root), disk_probe=lambda path: 0.76)
    print("READY", flush=True)
    seq = round_no * 1_000_000
    while True:
        msgs = [Message(topic="ret", body=body(seq + i), keys=[f"k{seq + i}"])
                for i in range(BATCH)]
        qids = [(seq + i) % QUEUES for i in range(BATCH)]
        r = store.put_messages(msgs, qids)
        if r.status != PutMessageStatus.PUT_OK:
            print(f"FAIL {r.status.name} {r.reason}", flush=True)
            return
        rows = [[qids[i], int(r.queue_offsets[i]), int(r.commitlog_offsets[i])]
                for i in range(BATCH)]
        sys.stdout.write(f"ACK {seq} {json.dumps(rows)}\n")
        sys.stdout.flush()
        seq += BATCH


if __name__ == "__main__":
    main()

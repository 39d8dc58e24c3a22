"""The store tests' shared store: ``base_store``, written once per module."""
from __future__ import annotations

import time
from typing import Any

import pytest
import refcodec
from store_faults import N_BASE, message, open_store, segments

from rocketstore.message import PutMessageStatus


@pytest.fixture(scope="module")
def base_store(tmp_path_factory) -> dict[str, Any]:
    """A cleanly shut down ASYNC_FLUSH store: N_BASE messages (2 topics x 4 queues, bodies
    0..8 KiB, keys), about four 64 KiB CommitLog files, several ConsumeQueue files each."""
    root = tmp_path_factory.mktemp("base") / "store"
    with open_store(root) as store:
        for i in range(N_BASE):
            msg, qid, _ = message("base", i)
            assert store.put_message(msg, qid).status == PutMessageStatus.PUT_OK
            if i % 10 == 9:
                time.sleep(0.003)       # store timestamps differ from file to file
        assert store.wait_dispatched()
    records = list(refcodec.iter_commitlog(root))
    assert len(records) == N_BASE and len(segments(root)) >= 3
    return {"root": root, "records": records,
            "bytes": {p.name: p.read_bytes() for p in segments(root)}}



"""The send family (rocketstore/broker/processors/send/) writes each send rule once: the native
SendPath holds them, the processor's Python entry points run the same code, and the native
path asks the processor only through its public methods."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocketstore.broker.processors.send import SendMessageProcessor

SEND = Path(__file__).resolve().parents[2] / "rocketstore" / "broker" / "processors" / "send"

#: A piece of each rule's refusal: the rule is written where its remark is.
RULE_REMARKS = [
    "[TIMEOUT_CLEAN_QUEUE]broker busy", "sending message is forbidden", "the specified topic is illegal",
    "is forbidden.", "not exist, apply first please", "request queueId[", "has no write queue",
    "sending transaction message is forbidden", "subscription group not exist",
    "contain NUL", "batch request does not support retry group", "the batch is empty",
]


def _sources() -> dict[str, str]:
    if not (SEND / "_send_path.pyx").exists():
        pytest.skip("the sources are not beside the tests")
    return {p.name: p.read_text() for p in sorted(SEND.iterdir()) if p.suffix in (".py", ".pyx")}


def test_each_rule_is_written_once() -> None:
    sources = _sources()
    homes = {remark: [name for name, text in sources.items() if remark in text] for remark in RULE_REMARKS}
    assert {remark: names for remark, names in homes.items() if len(names) != 1} == {}


def test_the_native_path_calls_only_public_methods_of_the_processor() -> None:
    called = set(re.findall(r"\bself\.processor\.(\w+)", _sources()["_send_path.pyx"]))
    assert called
    assert sorted(n for n in called if n.startswith("_")) == []
    assert sorted(n for n in called if not hasattr(SendMessageProcessor, n)
                  and n not in ("config", "stats", "writer", "loop", "store")) == []

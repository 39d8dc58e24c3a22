"""rocketstore.common.send_header is the one table of the SEND header's names: the frame
decoder, the broker's header reader and the producer take theirs from it."""
from __future__ import annotations

import re
from pathlib import Path

from rocketstore.common.send_header import (
    REQUIRED_SEND_HEADER_FIELDS,
    SEND_HEADER_FIELD,
    SEND_HEADER_FIELDS,
    V2_NAME,
)

PACKAGE = Path(__file__).resolve().parents[2] / "rocketstore"
HOME = PACKAGE / "common" / "send_header.py"


def test_the_table_is_rocketmqs() -> None:
    assert [f.v2_name for f in SEND_HEADER_FIELDS] == list("abcdefghijklm")
    assert [f.name for f in SEND_HEADER_FIELDS[:REQUIRED_SEND_HEADER_FIELDS]] == [
        "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
        "bornTimestamp", "flag"]
    assert SEND_HEADER_FIELD["max_reconsume_times"].name == "maxReconsumeTimes"
    assert V2_NAME["batch"] == "m"


def _sources() -> list[Path]:
    return sorted(p for ext in ("*.py", "*.pyx", "*.pxd", "*.pyi") for p in PACKAGE.rglob(ext))


def test_no_other_table_of_the_names() -> None:
    """A name pair or a one-letter name beside its long name is a second table."""
    pair = re.compile(r"""["'](defaultTopicQueueNums|maxReconsumeTimes|unitMode)["']\s*[:,]\s*["'][a-m]["']""")
    found = [f"{p.relative_to(PACKAGE)}" for p in _sources() if p != HOME and pair.search(p.read_text())]
    assert found == []
    assert not [p for p in _sources() if "SEND_HEADER_V2_NAMES" in p.read_text()]

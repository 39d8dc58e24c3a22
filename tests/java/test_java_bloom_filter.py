"""The bloom filter and the ConsumeQueue extension against RocketMQ 4.9.8's own classes
(BloomFilter, BitsArray, ConsumeQueueExt): the same bit positions for the same groups, and
ext files each side writes read back by the other, byte for byte."""

from __future__ import annotations

from pathlib import Path

from java_env import JavaPrograms

from rocketstore.common.bloom import BloomFilter
from rocketstore.store.consume_queue_ext import ConsumeQueueExt, CqExtUnit

KEYS = ["g1#t", "consumerGroup#TopicTest", "组#トピック", "x" * 40 + "#" + "y" * 30, "#", "a#b"]


def test_bloom_positions_match_rocketmq(java_programs: JavaPrograms) -> None:
    for f, n in ((20, 32), (1, 5), (10, 128), (50, 1)):
        lines = java_programs.json_lines("RsBloom", "positions", f, n, *KEYS)
        bloom = BloomFilter(f, n)
        assert (lines[0]["k"], lines[0]["m"]) == (bloom.k, bloom.m)
        assert [tuple(line["pos"]) for line in lines[1:]] == [bloom.bit_positions(k) for k in KEYS]


def test_ext_files_written_by_rocketmq_read_here(java_programs: JavaPrograms,
                                                 tmp_path: Path) -> None:
    """4.9.8's ConsumeQueueExt writes 40 units (files of 200 bytes, so units cross files):
    every address it returned reads back here with its tags code, store time and bitmap."""
    lines = java_programs.json_lines("RsBloom", "write", tmp_path, 200, 40)
    bloom = BloomFilter()
    g = bloom.generate("g", "t")
    ext = ConsumeQueueExt("t", 0, str(tmp_path), 200, read_only=True)
    ext.load()
    ext.recover()
    for line in lines:
        i = line["i"]
        unit = ext.get(line["address"])
        assert unit is not None and (unit.tags_code, unit.msg_store_time) == (1000 + i, 7000 + i)
        if i % 3 == 0:
            bits = bytearray(bloom.m // 8)
            bloom.hash_to(g, bits)
            assert unit.filter_bit_map == bytes(bits)
        else:
            assert unit.filter_bit_map is None
    ext.close()


def test_ext_files_written_here_read_by_rocketmq(java_programs: JavaPrograms,
                                                 tmp_path: Path) -> None:
    bloom = BloomFilter()
    g = bloom.generate("g", "t")
    ext = ConsumeQueueExt("t", 0, str(tmp_path), 200)
    ext.load()
    addresses = []
    for i in range(30):
        bitmap = None
        if i % 2 == 0:
            bits = bytearray(bloom.m // 8)
            if i % 4 == 0:
                bloom.hash_to(g, bits)
            bitmap = bytes(bits)
        addresses.append(ext.put(CqExtUnit(-5 - i, 9000 + i, bitmap)))
    ext.flush(0)
    ext.close()
    lines = java_programs.json_lines("RsBloom", "read", tmp_path, 200, *addresses)
    assert [line["found"] for line in lines] == [True] * 30
    assert [(line["tagsCode"], line["msgStoreTime"]) for line in lines] == \
        [(-5 - i, 9000 + i) for i in range(30)]
    assert [line["hitG"] for line in lines] == \
        [None if i % 2 else i % 4 == 0 for i in range(30)]

"""``rocketstore demo [PATH]``: writes a realistic workload into a local store directory
(single and batch puts), reopens it, reads everything back with ``scan`` and verifies the
count and a checksum of the bodies, then prints throughput and what it wrote.

PATH may be new, empty, or a store an earlier demo made (marked by
``config/rocketstore-demo.json``; the demo appends and verifies what it added). Any other
store is only appended to with ``--append`` (or a yes on a terminal): the demo would mix its
topics into it.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from rocketstore import CorruptRecordError, Message, MessageStore, StoreConfig, __version__
from rocketstore.cli.common import (
    checked_topic,
    fail,
    open_store,
    progress_bar,
    progress_option,
    size_text,
)
from rocketstore.store import (
    StorePaths,
    consume_queue_files,
    detect_geometry,
    index_files,
    segment_files,
)

DEFAULT_DEMO_DIR = "rocketstore-demo"
DEFAULT_DEMO_TOPICS = "orders,audit,clicks"
DEFAULT_DEMO_SEGMENT = 32 * 1024 * 1024
MAX_BODY_SIZE = 4 * 1024 * 1024  # StoreConfig.max_message_size default
#: Written into every store the demo makes, so a later demo knows it may append there.
DEMO_MARKER = "rocketstore-demo.json"


_FILLER = (b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
           b"incididunt ut labore et dolore magna aliqua. ") * 8
_IPV4_BORN = [f"10.0.{i // 8}.{10 + i}:{40000 + 97 * i}" for i in range(24)]
_IPV6_BORN = ["[2001:db8:0:1::17]:41000", "[fd00::2:3]:41001",
              "[2001:db8:85a3::8a2e:370:7334]:41002", "[::1]:41003"]
_REGIONS = ["eu-west", "us-east", "ap-south", "华东", "Zürich"]
_PAGES = ["/", "/search", "/products/{}", "/cart", "/checkout", "/account"]
# topic -> (share of the traffic, queue count)
_PROFILES: dict[str, tuple[float, int]] = {"orders": (5.0, 8), "clicks": (3.0, 6),
                                          "audit": (2.0, 4)}
_DEFAULT_PROFILE = (2.0, 4)


@dataclass
class _Digest:
    """Order-sensitive summary of bodies: count, bytes, chained CRC-32, per-topic counts."""

    count: int = 0
    body_bytes: int = 0
    crc: int = 0
    topics: dict[str, int] = field(default_factory=dict)

    def add(self, topic: str, body: bytes | memoryview) -> None:
        self.count += 1
        self.body_bytes += len(body)
        self.crc = zlib.crc32(body, self.crc)
        self.topics[topic] = self.topics.get(topic, 0) + 1

    def differences(self, other: _Digest) -> list[str]:
        out = []
        if self.count != other.count:
            out.append(f"count {other.count} != {self.count} written")
        if self.body_bytes != other.body_bytes:
            out.append(f"body bytes {other.body_bytes} != {self.body_bytes} written")
        if self.crc != other.crc:
            out.append(f"body crc32 {other.crc:#010x} != {self.crc:#010x} written")
        if self.topics != other.topics:
            out.append(f"per-topic counts {other.topics} != {self.topics} written")
        return out


class _Workload:
    """Deterministic realistic messages: orders (paid/shipped/refunded, keyed and routed by
    order id), audit events (keyed by user), clicks (no keys), others generic."""

    def __init__(self, topics: list[str], body_size: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.topics = topics
        self.weights = [_PROFILES.get(t, _DEFAULT_PROFILE)[0] for t in topics]
        self.queues = {t: _PROFILES.get(t, _DEFAULT_PROFILE)[1] for t in topics}
        self.body_size = body_size
        self.next_order = 1000
        self.open_orders: list[int] = []
        self.counter = 0
        self.expected = _Digest()

    def _body(self, text: str) -> bytes:
        raw = text.encode("utf-8")
        size = self.body_size
        room = size - len(raw)
        if room >= 9:  # room for ,"pad":"" inside the object
            return raw[:-1] + b',"pad":"' + _filler(room - 9) + b'"}'
        if room >= 0:
            return raw + b" " * room
        return raw[:size]  # bodies are opaque bytes: a cut JSON document is fine

    def _born_host(self) -> str:
        rng = self.rng
        if rng.random() < 0.125:
            return rng.choice(_IPV6_BORN)
        return rng.choice(_IPV4_BORN)

    def _order(self, ts: int) -> tuple[Message, int]:
        rng = self.rng
        if not self.open_orders or rng.random() < 0.55:
            tag, oid = "paid", self.next_order
            self.next_order += 1
            self.open_orders.append(oid)
            if len(self.open_orders) > 256:
                self.open_orders.pop(0)
        else:
            tag = "refunded" if rng.random() < 0.2 else "shipped"
            oid = rng.choice(self.open_orders)
        customer = oid * 7919 % 5003
        amount = f"{(oid * 37 % 50000) / 100:.2f}"
        region = rng.choice(_REGIONS)
        body = self._body(
            f'{{"orderId":"ord-{oid}","customer":"cust-{customer}","status":"{tag}",'
            f'"amount":{amount},"currency":"EUR","region":"{region}",'
            f'"items":[{{"sku":"sku-{oid % 97}","qty":{1 + oid % 3}}}],"ts":{ts}}}')
        msg = Message("orders", body, tags=tag, keys=[f"ord-{oid}", f"cust-{customer}"],
                      properties={"region": region, "amount": amount, "currency": "EUR"},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        return msg, oid % self.queues["orders"]

    def _audit(self, ts: int) -> tuple[Message, int]:
        rng = self.rng
        uid = rng.randrange(1, 2000)
        event = rng.choice(("login", "login", "logout", "grant", "revoke"))
        severity = "warn" if event in ("grant", "revoke") else "info"
        body = self._body(
            f'{{"event":"{event}","user":"user-{uid}","ok":{"true" if uid % 11 else "false"},'
            f'"ip":"10.1.{uid % 256}.{uid // 256}","ts":{ts}}}')
        msg = Message("audit", body, tags=event, keys=f"user-{uid}",
                      properties={"actor": f"user-{uid}", "severity": severity},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        return msg, uid % self.queues["audit"]

    def _click(self, ts: int) -> tuple[Message, int]:
        rng = self.rng
        page = rng.choice(_PAGES).format(rng.randrange(1, 500))
        session = f"s-{rng.randrange(100000):05d}"
        body = self._body(f'{{"page":"{page}","session":"{session}","x":{rng.randrange(1920)},'
                          f'"y":{rng.randrange(1080)},"ts":{ts}}}')
        tag = rng.choice((None, "view", "view", "click"))
        msg = Message("clicks", body, tags=tag, properties={"page": page, "session": session},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        self.counter += 1
        return msg, self.counter % self.queues["clicks"]

    def _generic(self, topic: str, ts: int) -> tuple[Message, int]:
        rng = self.rng
        self.counter += 1
        n = self.counter
        body = self._body(f'{{"topic":"{topic}","n":{n},"value":{rng.random():.6f},'
                          f'"ts":{ts}}}')
        msg = Message(topic, body, tags=rng.choice(("TagA", "TagB")), keys=f"{topic}-{n}",
                      properties={"source": "rocketstore-demo"},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        return msg, n % self.queues[topic]

    def make(self, n: int) -> tuple[list[Message], list[int]]:
        """n messages and their queue ids; their bodies are added to self.expected."""
        ts = int(time.time() * 1000)
        msgs: list[Message] = []
        qids: list[int] = []
        expected = self.expected
        for topic in self.rng.choices(self.topics, self.weights, k=n):
            if topic == "orders":
                msg, qid = self._order(ts)
            elif topic == "audit":
                msg, qid = self._audit(ts)
            elif topic == "clicks":
                msg, qid = self._click(ts)
            else:
                msg, qid = self._generic(topic, ts)
            msgs.append(msg)
            qids.append(qid)
            expected.add(topic, msg.body)
        return msgs, qids


def _filler(n: int) -> bytes:
    if n <= len(_FILLER):
        return _FILLER[:n]
    return (_FILLER * (n // len(_FILLER) + 1))[:n]


@dataclass
class _Phase:
    name: str
    messages: int = 0
    log_bytes: int = 0
    seconds: float = 0.0
    failed: int = 0
    failure: str | None = None

    def rate(self) -> str:
        dt = max(self.seconds, 1e-9)
        return (f"{self.messages:>9,} msgs in {self.seconds:6.3f} s  "
                f"{self.messages / dt:>11,.0f} msgs/s  {self.log_bytes / dt / 1e6:>8,.1f} MB/s")




# ---- the command ---------------------------------------------------------------------------


def _parse_topics(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]
                  ) -> list[str]:
    names: list[str] = []
    for item in value or (DEFAULT_DEMO_TOPICS,):
        for name in item.split(","):
            name = name.strip()
            if name and name not in names:
                names.append(checked_topic(name, "--topics"))
    if not names:
        raise click.BadParameter("give at least one topic")
    return names


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=DEFAULT_DEMO_DIR)
@click.option("-n", "--messages", type=click.IntRange(min=1), default=200_000,
              show_default=True, help="How many messages to write.")
@click.option("--topics", multiple=True, callback=_parse_topics, metavar="T1,T2,...",
              help=f"Comma-separated topics (default: {DEFAULT_DEMO_TOPICS}).")
@click.option("--batch", type=click.IntRange(1, 100_000), default=500, show_default=True,
              help="Messages per put_messages call in the batch half.")
@click.option("--body-size", type=click.IntRange(0, MAX_BODY_SIZE), default=256,
              show_default=True, help="Body bytes per message.")
@click.option("--segment-size", type=click.IntRange(min=4096), default=DEFAULT_DEMO_SEGMENT,
              show_default=True, help="CommitLog file size for a new store (bytes).")
@click.option("--seed", type=int, default=42, show_default=True, help="Workload random seed.")
@click.option("--keep/--no-keep", default=True, show_default=True,
              help="Keep the store directory afterwards (--no-keep removes what the demo "
                   "created).")
@click.option("--append", is_flag=True,
              help="Append to PATH even when it holds a store an earlier demo did not make "
                   "(the demo's topics are added to it).")
@progress_option
def demo(path: Path, messages: int, topics: list[str], batch: int, body_size: int,
         segment_size: int, seed: int, keep: bool, append: bool, progress: bool | None
         ) -> None:
    """Write a realistic workload into PATH, reopen it, read it all back and verify.

    Half the messages go in one put_message call each, half in put_messages batches; the
    store is then closed, reopened (recovery) and read back with scan, checking the count and
    a CRC-32 over all bodies. PATH (default ./rocketstore-demo) may be new, empty or an
    earlier demo store (the demo appends and verifies what it added); any other store only
    with --append.
    """
    root = path.resolve()
    target = _prepare_demo_dir(root, topics, append)
    segment_size = target.segment_size or segment_size
    if body_size + 4096 > segment_size:
        raise fail(f"--segment-size {segment_size} is too small for {body_size}-byte bodies")
    config = StoreConfig(**_demo_sizes(root, messages, segment_size))
    workload = _Workload(topics, body_size, seed)
    try:
        if target.created or target.was_empty:
            _write_marker(root, topics)
        report = _run_demo(root, config, workload, messages, batch, progress)
        _print_demo(report, root, topics, workload, batch)
    finally:
        if not keep:
            _remove_demo_dir(root, target)
    if report.problems:
        click.echo("verification FAILED: " + "; ".join(report.problems), err=True)
        click.get_current_context().exit(1)


@dataclass(frozen=True)
class _DemoDir:
    created: bool           # the demo made the directory
    was_empty: bool         # it was there, empty
    segment_size: int       # an existing store's CommitLog segment size, else 0


def _prepare_demo_dir(root: Path, topics: list[str], append: bool) -> _DemoDir:
    """Where the demo may write: a new or empty directory, an earlier demo's store, or (with
    --append, or a yes on a terminal) any other store."""
    if not root.exists():
        return _DemoDir(True, False, 0)
    if not root.is_dir():
        raise fail(f"{root} exists and is not a directory")
    if not any(root.iterdir()):
        return _DemoDir(False, True, 0)
    paths = StorePaths.of(root)
    if not Path(paths.commitlog).is_dir():
        raise fail(f"{root} is not empty and is not a store (no commitlog/); give a new or "
                   "empty directory, or an earlier demo store")
    if not Path(paths.config_file(DEMO_MARKER)).is_file() and not append:
        question = (f"{root} holds a store that no demo made: append the demo's topics "
                    f"({', '.join(topics)}) to it?")
        if not (sys.stdin.isatty() and click.confirm(question, default=False, err=True)):
            raise fail(f"{root} holds a store that no demo made (no config/{DEMO_MARKER}): the "
                       f"demo would add its topics ({', '.join(topics)}) to it; give --append "
                       "to do that, or a new or empty directory")
    return _DemoDir(False, False, detect_geometry(root).get("mapped_file_size_commit_log", 0))


def _write_marker(root: Path, topics: list[str]) -> None:
    marker = Path(StorePaths.of(root).config_file(DEMO_MARKER))
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"createdBy": "rocketstore demo", "version": __version__,
                                  "topics": topics}) + "\n", encoding="utf-8")


def _demo_sizes(root: Path, messages: int, segment_size: int) -> dict[str, Any]:
    """File sizes for a new demo store, scaled to the workload: RocketMQ's defaults would
    allocate a 420 MB IndexFile and 6 MB per ConsumeQueue for a few thousand messages. An
    existing store keeps the sizes its files have (MessageStore.open fits them)."""
    slots = min(max(messages, 10_000), 5_000_000)
    return {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": segment_size,
        "mapped_file_size_consume_queue": 20 * min(max(messages // 4, 1000), 300_000),
        "max_hash_slot_num": slots,
        "max_index_num": 4 * slots,
    }


def _remove_demo_dir(root: Path, target: _DemoDir) -> None:
    if target.created:
        shutil.rmtree(root, ignore_errors=True)
    elif target.was_empty:
        for child in root.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    else:
        click.echo(f"kept {root}: it held a store before the demo", err=True)


@dataclass
class _DemoReport:
    single: _Phase
    batched: _Phase
    read: _Phase
    start_offset: int = 0
    end_offset: int = 0
    recovery_s: float = 0.0
    recovered_records: int = 0
    found: _Digest = field(default_factory=_Digest)
    first: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _run_demo(root: Path, config: StoreConfig, workload: _Workload, messages: int,
              batch: int, progress: bool | None) -> _DemoReport:
    report = _DemoReport(_Phase("put_message"), _Phase("put_messages"), _Phase("scan"))
    n_single = messages // 2
    n_batch = messages - n_single
    with open_store(root, config, read_only=False) as store, \
            progress_bar(progress, total=messages, unit="msg", unit_scale=True,
                         desc="writing") as bar:
        report.start_offset = store.get_max_phy_offset()
        _write_single(store, workload, n_single, report.single, bar)
        _write_batches(store, workload, n_batch, batch, report.batched, bar)
        report.end_offset = store.get_max_phy_offset()
    with open_store(root, config, read_only=False) as store, \
            progress_bar(progress, total=messages, unit="msg", unit_scale=True,
                         desc="reading") as bar:
        if store.recovery is not None:
            report.recovery_s = store.recovery.duration_s
            report.recovered_records = store.recovery.records
        _read_back(store, report, bar)
    for phase in (report.single, report.batched):
        if phase.failed:
            report.problems.append(f"{phase.failed} {phase.name} puts failed ({phase.failure})")
    report.problems.extend(workload.expected.differences(report.found))
    return report


def _write_single(store: MessageStore, workload: _Workload, total: int, phase: _Phase,
                  bar: tqdm) -> None:
    done = 0
    put = store.put_message
    while done < total:
        msgs, qids = workload.make(min(2048, total - done))
        wrote = failed = 0
        started = time.perf_counter()
        for msg, qid in zip(msgs, qids, strict=True):
            r = put(msg, qid)
            if r.ok:
                wrote += r.wrote_bytes
            else:
                failed += 1
                phase.failure = phase.failure or r.status.name
        phase.seconds += time.perf_counter() - started
        phase.log_bytes += wrote
        phase.failed += failed
        phase.messages += len(msgs) - failed
        done += len(msgs)
        bar.update(len(msgs))


def _write_batches(store: MessageStore, workload: _Workload, total: int, batch: int,
                   phase: _Phase, bar: tqdm) -> None:
    done = 0
    while done < total:
        msgs, qids = workload.make(min(batch, total - done))
        started = time.perf_counter()
        res = store.put_messages(msgs, qids)
        phase.seconds += time.perf_counter() - started
        phase.log_bytes += res.wrote_bytes
        phase.messages += res.stored
        if not res.ok:
            phase.failed += res.count - res.stored
            phase.failure = phase.failure or res.status.name
        done += len(msgs)
        bar.update(len(msgs))


def _read_back(store: MessageStore, report: _DemoReport, bar: tqdm) -> None:
    found = report.found
    read_bytes = 0
    started = time.perf_counter()
    try:
        pending = 0
        for msg in store.scan(report.start_offset):
            found.add(msg.topic, msg.body)
            read_bytes += msg.store_size
            if len(report.first) < 3:
                report.first.append(msg.to_dict())
            pending += 1
            if pending == 4096:
                bar.update(pending)
                pending = 0
        bar.update(pending)
    except CorruptRecordError as exc:
        report.problems.append(f"reading back failed: {exc}")
    report.read.seconds = time.perf_counter() - started
    report.read.messages = found.count
    report.read.log_bytes = read_bytes


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _print_demo(report: _DemoReport, root: Path, topics: list[str], workload: _Workload,
                batch: int) -> None:
    echo = click.echo
    exp = workload.expected
    log_bytes = report.end_offset - report.start_offset
    echo(f"rocketstore demo: {root}")
    echo(f"  wrote        {exp.count:,} messages: {_mb(exp.body_bytes)} of bodies, "
         f"{_mb(log_bytes)} of CommitLog (offsets {report.start_offset:,}.."
         f"{report.end_offset:,})")
    echo("  topics       " + ", ".join(
        f"{t} ({workload.queues[t]} queues) {exp.topics.get(t, 0):,}" for t in topics))
    echo(f"  put_message  {report.single.rate()}  (one call per message)")
    echo(f"  put_messages {report.batched.rate()}  (batches of {batch})")
    echo(f"  reopen       recovery checked {report.recovered_records:,} records in "
         f"{report.recovery_s * 1000:,.1f} ms")
    echo(f"  scan         {report.read.rate()}")
    if report.problems:
        echo("  verify       FAILED")
    else:
        echo(f"  verify       OK: {report.found.count:,} messages, body crc32 "
             f"{report.found.crc:#010x}, {report.found.body_bytes:,} body bytes")
    _print_files(root)
    echo("  first records")
    for d in report.first:
        keys = d["keys"] or "-"
        body = _preview(d["body_b64"])
        echo(f"    @{d['commitLogOffset']:<10} {d['topic']}[{d['queueId']}]#{d['queueOffset']}"
             f"  tags={d['tags'] or '-'}  keys={keys}  born={d['bornHost']}"
             f"  msgId={d['msgId']}")
        echo(f"      {body}")


def _print_files(root: Path) -> None:
    paths = StorePaths.of(root)
    segments = segment_files(paths.commitlog)
    sizes = [Path(p).stat().st_size for p in segments]
    click.echo(f"  files        {len(segments)} CommitLog segment(s), {size_text(sum(sizes))}, "
               f"in {paths.commitlog}")
    shown = list(range(len(segments)))
    if len(shown) > 6:
        shown = [*shown[:3], -1, *shown[-2:]]
    for i in shown:
        if i < 0:
            click.echo(f"               ... {len(segments) - 5} more")
        else:
            click.echo(f"               {Path(segments[i]).name}  {size_text(sizes[i])}")
    for name, files in (("consumequeue", consume_queue_files(root)),
                        ("index", index_files(root))):
        if files:
            size = sum(Path(p).stat().st_size for p in files)
            click.echo(f"               {name}/: {len(files)} file(s), {size_text(size)}")


def _preview(body_b64: str, width: int = 100) -> str:
    text = base64.b64decode(body_b64).decode("utf-8", "replace")
    return text if len(text) <= width else text[: width - 3] + "..."

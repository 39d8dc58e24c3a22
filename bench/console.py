"""The web console's pages against a broker holding many topics and messages, p95 per page
(issue 31: target <= 200 ms), then the broker's send throughput with /metrics scraped every
second against metrics off, in the same run (bench/metrics.py; target >= 0.97).

    python bench/console.py                         # 1,000 topics, 10,000,000 messages
    python bench/console.py --topics 100 --messages 1000000 --requests 20 --metrics-repeat 3

The store is written with the embedded store API (batches of ``--batch`` messages, a key per
message, 4 queues per topic), closed, and a broker started on it; the topics are then created
on the broker over the admin protocol (as a user would), ``--groups`` consumer groups commit
offsets half way on some topics, and the console (``rocketstore console``) runs as its own
process. Each page is fetched ``--requests`` times one after another over one keep-alive HTTP
connection after two warm-up fetches; the times are wall-clock, client side.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import re
import statistics
import subprocess
import sys
import time
from urllib.parse import quote

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)

import _common as C  # noqa: E402
import broker as B  # noqa: E402

CONSOLE_BOOT = re.compile(r"The console boot success\. listening on http://(\S+)")
QUEUES = 4


def topic_name(i: int) -> str:
    return f"BenchTopic{i:04d}"


def build_store(path: str, topics: int, messages: int, batch: int, size: int) -> float:
    """``messages`` spread evenly over ``topics`` x 4 queues; returns the seconds taken."""
    from rocketstore import Message, MessageStore, StoreConfig

    body = b"x" * size
    per_topic = messages // topics
    started = time.perf_counter()
    with MessageStore.open(path, StoreConfig()) as store:
        for t in range(topics):
            name = topic_name(t)
            for q in range(QUEUES):
                count = per_topic // QUEUES + (1 if q < per_topic % QUEUES else 0)
                for first in range(0, count, batch):
                    n = min(batch, count - first)
                    result = store.put_messages(
                        [Message(topic=name, body=body, tags="bench", keys=[f"{name}-{q}-{first + k}"])
                         for k in range(n)], q, wait_flush=False)
                    if not result.ok:
                        raise RuntimeError(f"put failed: {result}")
            if t % 100 == 99:
                print(f"  {t + 1} topics written ({time.perf_counter() - started:.0f} s)", flush=True)
    return time.perf_counter() - started


async def prepare_cluster(namesrv: str, broker_addr: str, topics: int, groups: int) -> dict[str, str]:
    """Topics on the broker, groups with offsets; returns what the page URLs need."""
    from rocketstore.client import AsyncAdmin, MessageQueue
    from rocketstore.client.message import create_offset_msg_id

    async with AsyncAdmin(namesrv, timeout=30.0) as admin:
        sem = asyncio.Semaphore(16)

        async def create(t: int) -> None:
            async with sem:
                await admin.update_topic(topic_name(t), broker_addr=broker_addr,
                                         read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        await asyncio.gather(*(create(t) for t in range(topics)))
        for _ in range(200):            # the broker's next registration carries them
            if len(await admin.topic_list()) >= topics:
                break
            await asyncio.sleep(0.5)
        for g in range(groups):
            group = f"BenchGroup{g:02d}"
            name = topic_name(g % topics)
            for q in range(QUEUES):
                mq = MessageQueue(name, "bench-broker", q)
                await admin.pull(mq, 0, 1, group=group)    # the broker creates the group
                await admin.update_consumer_offset(group, mq, (await admin.max_offset(mq)) // 2)
        topic = topic_name(topics // 2)
        msgs = await admin.pull(MessageQueue(topic, "bench-broker", 1), 5, 1)
        # the embedded store wrote its own store host into the records: the id the broker
        # answers to names the broker's address
        offset_msg_id = create_offset_msg_id(broker_addr, msgs[0].commit_log_offset)
        return {"topic": topic, "group": "BenchGroup00", "offset_msg_id": offset_msg_id,
                "key": next(iter(msgs[0].keys)), "begin": str(msgs[0].store_timestamp - 1000),
                "end": str(msgs[0].store_timestamp + 1000)}


def start_console(namesrv: str) -> B.Server:
    return B.start_server("console", ["-m", "rocketstore.console", "-n", namesrv, "--listen", "127.0.0.1:0",
                                      "--log-level", "WARNING"], CONSOLE_BOOT, lambda m: m.group(1))


def fetch_times(address: str, path: str, requests: int) -> list[float]:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    times = []
    try:
        for i in range(requests + 2):
            t0 = time.perf_counter()
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            elapsed = time.perf_counter() - t0
            if response.status != 200:
                raise RuntimeError(f"{path}: HTTP {response.status}: {body[:300]!r}")
            if i >= 2:
                times.append(elapsed)
    finally:
        conn.close()
    return times


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--requests", type=int, default=30, help="fetches per page")
    parser.add_argument("--metrics-repeat", type=int, default=5,
                        help="interleaved pairs of bench/metrics.py (0: skip that part)")
    parser.add_argument("--dir", help="where the store goes")
    args = parser.parse_args(argv)
    C.print_machine_info(C.machine_info(BENCH_DIR))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with C.TempDirs(args.dir) as dirs:
        root = dirs.new("console")
        store_dir = os.path.join(root, "store")
        seconds = build_store(store_dir, args.topics, args.messages, args.batch, args.size)
        print(f"store: {args.messages:,} messages in {args.topics:,} topics written in {seconds:.1f} s "
              f"({args.messages / seconds:,.0f} msgs/s)", flush=True)
        namesrv = B.start_namesrv()
        servers = [namesrv]
        try:
            broker = B.start_broker(root, store_dir, namesrv.address, brokerName="bench-broker")
            servers.append(broker)
            t0 = time.perf_counter()
            ids = asyncio.run(prepare_cluster(namesrv.address, broker.address, args.topics, args.groups))
            print(f"topics and groups created in {time.perf_counter() - t0:.1f} s", flush=True)
            console = start_console(namesrv.address)
            servers.append(console)
            topic, group = ids["topic"], ids["group"]
            last_page = max(1, -(-args.topics // 50))
            pages = [
                ("/cluster", "/cluster"),
                ("/topics (50 a page)", "/topics"),
                (f"/topics?page={last_page}", f"/topics?page={last_page}"),
                ("/topics/{topic}", f"/topics/{topic}"),
                ("/groups", "/groups"),
                ("/groups/{group}", f"/groups/{group}"),
                ("/messages?id=", f"/messages?id={ids['offset_msg_id']}"),
                ("/messages/{offsetMsgId}", f"/messages/{ids['offset_msg_id']}"),
                ("/messages?topic=&key=", f"/messages?topic={topic}&key={quote(ids['key'])}"),
                ("/messages?topic=&begin=&end=", f"/messages?topic={topic}&begin={ids['begin']}&end={ids['end']}"),
                ("/messages?topic=&broker=&queue=&offset=", f"/messages?topic={topic}&broker=bench-broker&queue=1&offset=5"),
                ("/dlq", "/dlq"),
            ]
            rows = []
            for label, path in pages:
                times = fetch_times(console.address, path, args.requests)
                rows.append((label, statistics.median(times) * 1000, p95(times) * 1000, max(times) * 1000))
                print(f"  {label}: p95 {rows[-1][2]:.1f} ms", flush=True)
            load = os.getloadavg()
        finally:
            for server in reversed(servers):
                server.stop()
    print()
    print(f"| page ({args.topics:,} topics, {args.messages:,} messages, {args.requests} fetches) "
          f"| median ms | p95 ms | max ms | p95 <= 200 ms |")
    print("|---|---:|---:|---:|---|")
    for label, median, high, most in rows:
        print(f"| `{label}` | {median:.1f} | {high:.1f} | {most:.1f} | {'yes' if high <= 200 else 'no'} |")
    print(f"\nload average after the pages: {' '.join(f'{x:.2f}' for x in load)}", flush=True)
    if args.metrics_repeat > 0:
        print("\nbroker send throughput, /metrics scraped every second against metrics off "
              "(bench/metrics.py):", flush=True)
        subprocess.run([sys.executable, os.path.join(BENCH_DIR, "metrics.py"), "--repeat",
                        str(args.metrics_repeat), *(["--dir", args.dir] if args.dir else [])], check=True)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()

"""The broker's send throughput with its Prometheus endpoint scraped every second, against
the same broker with metrics off, interleaved in one run (issue 31: target >= 0.97).

    python bench/metrics.py                  # 5 interleaved pairs of 5 s windows
    python bench/metrics.py --repeat 3 --seconds 3

Each pair: a broker subprocess (ASYNC_FLUSH) with ``metricsExporterType=DISABLE``, then one
with ``PROM`` while a thread scrapes ``/metrics`` every ``--scrape-interval`` seconds (each
scrape parsed, its size noted); the same pipelined SEND_MESSAGE_V2 load as bench/broker.py
(a). Before the window, ``--groups`` consumer groups commit offsets on every queue so a scrape
has lag rows to compute. The ratio is median(with scrapes) / median(off). On a machine shared
with other work the rates swing more than the cost being measured, so the broker process's CPU
per scrape (idle broker, ``--cost-scrapes`` back-to-back scrapes less its idle CPU) is printed
too: at one scrape a second it is the share of the event loop's core a scrape takes.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import threading
import time
import urllib.request

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)

import _common as C  # noqa: E402
import broker as B  # noqa: E402

from rocketstore.remoting import RemotingClient, RequestCode, create_request  # noqa: E402
from rocketstore.remoting.eventloop import run  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scraper(threading.Thread):
    def __init__(self, port: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.stop_event = threading.Event()
        self.scrapes = 0
        self.seconds: list[float] = []
        self.size = 0
        self.errors = 0

    def run(self) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        while not self.stop_event.wait(self.interval):
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as reply:
                    text = reply.read().decode()
                for _ in text_string_to_metric_families(text):
                    pass
            except Exception as exc:  # noqa: BLE001 - counted and shown
                self.errors += 1
                print(f"    scrape failed: {exc}", flush=True)
                continue
            self.seconds.append(time.perf_counter() - t0)
            self.scrapes += 1
            self.size = len(text)


async def commit_offsets(address: str, groups: int, queues: int) -> None:
    async with RemotingClient() as client:
        for g in range(groups):
            for q in range(queues):
                await client.invoke(address, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": f"bench_group_{g}", "topic": B.TOPIC, "queueId": str(q),
                    "commitOffset": "0"}), timeout=10)


def scrape_cpu(broker: B.Server, port: int, scrapes: int) -> float:
    """CPU seconds the idle broker process spends per scrape (its CPU over ``scrapes`` back to
    back scrapes, less its idle CPU over as long): what a scrape costs, however loaded the
    machine is."""
    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{port}/metrics"
    time.sleep(0.5)
    cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
    time.sleep(2.0)
    idle_rate = (broker.cpu_seconds() - cpu0) / (time.perf_counter() - t0)
    cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
    for _ in range(scrapes):
        with urllib.request.urlopen(url, timeout=10) as reply:
            for _ in text_string_to_metric_families(reply.read().decode()):
                pass
    elapsed = time.perf_counter() - t0
    return max(0.0, (broker.cpu_seconds() - cpu0 - idle_rate * elapsed) / scrapes)


def window(args: argparse.Namespace, dirs: C.TempDirs, block: bytes, frame_size: int,
           metrics: bool, cpu_per_scrape: list[float] | None = None) -> tuple[float, Scraper | None]:
    root = dirs.new("metrics-bench")
    port = free_port()
    props = {"metricsExporterType": "PROM", "metricsPromExporterPort": port} if metrics else {}
    broker = B.start_broker(root, os.path.join(root, "store"), **props)
    scraper = None
    try:
        run(B.create_topic(broker.address, B.TOPIC, args.queues))
        run(commit_offsets(broker.address, args.groups, args.queues))
        if metrics:
            scraper = Scraper(port, args.scrape_interval)
            scraper.start()
        w = run(B.pipelined_window(broker.port, block, frame_size, args.connections, args.inflight,
                                   args.seconds, args.warmup, True))
        if metrics and cpu_per_scrape is not None:
            cpu_per_scrape.append(scrape_cpu(broker, port, args.cost_scrapes))
        if w.failures:      # the broker's flow control (a loop stalled by the machine's other load)
            print(f"    {w.failures} sends failed, e.g. {w.failure_sample[:160]!r}", flush=True)
    finally:
        if scraper is not None:
            scraper.stop_event.set()
            scraper.join(15)
        broker.stop()
        dirs.remove(root)
    return w.rate, scraper


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--scrape-interval", type=float, default=1.0)
    parser.add_argument("--cost-scrapes", type=int, default=30,
                        help="back-to-back scrapes of the idle broker whose CPU is measured")
    parser.add_argument("--dir", help="where temporary stores go")
    args = parser.parse_args(argv)
    block, frame_size = B.send_block(os.urandom(args.size), args.queues, 4096)
    off: list[float] = []
    on: list[float] = []
    scrapes: list[Scraper] = []
    cpu_per_scrape: list[float] = []
    with C.TempDirs(args.dir) as dirs:
        for repeat in range(args.repeat):
            rate, _ = window(args, dirs, block, frame_size, False)
            off.append(rate)
            print(f"  run {repeat + 1} metrics off:     {rate:,.0f} msgs/s", flush=True)
            rate, scraper = window(args, dirs, block, frame_size, True, cpu_per_scrape)
            on.append(rate)
            assert scraper is not None
            scrapes.append(scraper)
            print(f"  run {repeat + 1} scraped every {args.scrape_interval:g} s: {rate:,.0f} msgs/s "
                  f"({scraper.scrapes} scrapes, {scraper.size:,} bytes each)", flush=True)
    ratio = statistics.median(on) / statistics.median(off)
    scrape_times = [s for scraper in scrapes for s in scraper.seconds]
    print()
    print(f"| {args.size} B sends, {args.queues} queues, {args.groups} groups | msgs/s (median of {args.repeat}) |")
    print("|---|---:|")
    print(f"| metrics off | {statistics.median(off):,.0f} |")
    print(f"| /metrics scraped every {args.scrape_interval:g} s | {statistics.median(on):,.0f} |")
    print(f"| ratio (target >= 0.97) | {ratio:.3f} |")
    if scrape_times:
        print(f"| scrape time, median / max | {statistics.median(scrape_times) * 1000:.1f} ms / "
              f"{max(scrape_times) * 1000:.1f} ms |")
    if cpu_per_scrape:
        cost = statistics.median(cpu_per_scrape)
        print(f"| broker CPU per scrape (idle broker, median) | {cost * 1000:.1f} ms: "
              f"{cost / args.scrape_interval:.1%} of one core at one scrape per {args.scrape_interval:g} s |")
    print(f"| scrape errors | {sum(s.errors for s in scrapes)} |")


if __name__ == "__main__":
    main()

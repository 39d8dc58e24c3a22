"""The Prometheus endpoint (metricsExporterType=PROM) of the broker and the name server."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

import broker_helpers
import pytest
from broker_helpers import cluster, pull_fields, send_fields
from prometheus_client.parser import text_string_to_metric_families

from rocketstore.broker.config import BrokerConfig
from rocketstore.namesrv import NamesrvConfig
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

arun = broker_helpers.arun


async def scrape(port: int) -> dict[str, list[Any]]:
    """name -> samples, read in a thread (the collector waits for the event loop)."""
    def fetch() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            return reply.read().decode()

    text = await asyncio.get_running_loop().run_in_executor(None, fetch)
    samples: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def value(samples: dict[str, list[Any]], name: str, **labels: str) -> float:
    found = [s.value for s in samples.get(name, ()) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_counters_move_by_what_was_sent_and_pulled_and_lag_is_max_minus_committed(arun, tmp_path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store", metrics_exporter_type="PROM",
                           metrics_prom_exporter_port=0) as cl:
            port = cl.broker.metrics.port
            before = await scrape(port)
            assert value(before, "rocketstore_scrape_ok") == 1
            assert "rocketmq_messages_in_total" not in before or not any(
                s.labels["topic"] == "mt" for s in before["rocketmq_messages_in_total"])
            sizes = 0
            for i in range(7):
                body = b"message %d" % i
                r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("mt", i % 2), body)
                assert r.code == 0, r.remark
                sizes += len(body)
            await cl.dispatched()
            r = await cl.call(RequestCode.PULL_MESSAGE, pull_fields("MG", "mt", 0, 0, max_nums=3))
            assert r.code == ResponseCode.SUCCESS
            r = await cl.call(RequestCode.PULL_MESSAGE, pull_fields("MG", "mt", 0, 3, commit_offset=3))
            assert r.code == ResponseCode.SUCCESS     # queue 0's fourth message
            r = await cl.call(RequestCode.PULL_MESSAGE, pull_fields("MG", "mt", 1, 0, max_nums=1,
                                                                    commit_offset=0))
            assert r.code == ResponseCode.SUCCESS

            after = await scrape(port)
            assert value(after, "rocketmq_messages_in_total", topic="mt") == 7
            assert value(after, "rocketmq_throughput_in_total", topic="mt") > sizes
            assert value(after, "rocketmq_messages_out_total", topic="mt", group="MG") == 5
            store = cl.broker.store
            for queue_id in (0, 1):
                committed = cl.broker.offsets.query("MG", "mt", queue_id)
                high = store.get_max_offset_in_queue("mt", queue_id)
                assert value(after, "rocketstore_consumer_lag", topic="mt", group="MG",
                             queueid=str(queue_id)) == high - committed
            assert value(after, "rocketmq_group_diff", topic="mt", group="MG") == (4 - 3) + (3 - 0)
            assert value(after, "rocketmq_producer_offset", topic="mt") == 7
            assert value(after, "rocketmq_consumer_offset", topic="mt", group="MG") == 3
            assert value(after, "rocketmq_brokeruntime_msg_put_total_today_now") == 7
            assert value(after, "rocketstore_put_lock_hold_seconds_bucket", le="+Inf") == 7
            assert value(after, "rocketstore_dispatch_lag_bytes") == 0
            assert value(after, "rocketstore_connections") >= 1
            assert 0 <= value(after, "rocketstore_disk_used_ratio",
                              path=store.config.commit_log_path) <= 1
            assert value(after, "rocketstore_disk_watermark_ratio",
                         watermark="diskMaxUsedSpaceRatio") == 0.75
            assert value(after, "rocketstore_pull_holds") == 0

            # a pull held by long polling shows while it waits
            held = asyncio.ensure_future(cl.call(
                RequestCode.PULL_MESSAGE, pull_fields("MG", "mt", 0, 4, suspend_ms=3000), timeout=10))
            for _ in range(100):
                if cl.broker.hold_service.held_count:
                    break
                await asyncio.sleep(0.02)
            assert value(await scrape(port), "rocketstore_pull_holds") == 1
            r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("mt", 0), b"wake")
            assert r.code == 0
            assert (await held).code == ResponseCode.SUCCESS

    arun(main())


def requests(samples: dict[str, list[Any]], request: str, result: str) -> float:
    """rocketstore_requests_total of one request name and result (0 when absent)."""
    found = [s.value for s in samples.get("rocketstore_requests_total", ())
             if s.labels["request"] == request and s.labels["result"] == result]
    assert len(found) <= 1, found
    return found[0] if found else 0.0


def test_requests_are_counted_by_code_and_result(arun, tmp_path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store", metrics_exporter_type="PROM",
                           metrics_prom_exporter_port=0) as cl:
            port = cl.broker.metrics.port
            before = await scrape(port)
            for i in range(5):      # the native send path answers these itself
                assert (await cl.call(RequestCode.SEND_MESSAGE, send_fields("rq", i % 2), b"x")).code == 0
            for _ in range(2):
                r = await cl.call(9999, {})
                assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            r = await cl.call(RequestCode.GET_MAX_OFFSET, {"topic": "rq", "queueId": "0"})
            assert r.code == ResponseCode.SUCCESS
            r = await cl.call(RequestCode.PULL_MESSAGE, pull_fields("RG", "no-such-topic", 0, 0))
            refused = ResponseCode(r.code).name
            after = await scrape(port)

            def moved(request: str, result: str) -> float:
                return requests(after, request, result) - requests(before, request, result)
            assert moved("SEND_MESSAGE", "SUCCESS") == 5
            assert moved("9999", "REQUEST_CODE_NOT_SUPPORTED") == 2
            assert moved("GET_MAX_OFFSET", "SUCCESS") == 1
            assert moved("PULL_MESSAGE", refused) == 1 and refused != "SUCCESS"
            sample = next(s for s in after["rocketstore_requests_total"] if s.labels["request"] == "SEND_MESSAGE")
            assert sample.labels["code"] == "10" and sample.labels["response_code"] == "0"

    arun(main())


def test_name_server_endpoint(arun, tmp_path) -> None:
    async def main() -> None:
        from rocketstore.namesrv import NamesrvController

        config = NamesrvConfig(listen_port=0, metrics_exporter_type="PROM", metrics_prom_exporter_port=0,
                               kv_config_path=str(tmp_path / "kv.json"))
        async with NamesrvController(config) as namesrv:
            before = await scrape(namesrv.metrics.port)
            client = RemotingClient()
            try:
                for _ in range(3):
                    reply = await client.invoke(namesrv.address, create_request(
                        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
                    assert reply.code == ResponseCode.SUCCESS
            finally:
                await client.close()
            samples = await scrape(namesrv.metrics.port)
            topics_listed = "GET_ALL_TOPIC_LIST_FROM_NAMESERVER"
            assert (requests(samples, topics_listed, "SUCCESS") - requests(before, topics_listed, "SUCCESS")) == 3
            assert value(samples, "rocketstore_namesrv_live_brokers") == 0
            assert value(samples, "rocketstore_namesrv_topics") == 0
            assert value(samples, "rocketstore_scrape_ok") == 1
        assert namesrv.metrics is None

    arun(main())


def test_exporter_type_is_checked() -> None:
    with pytest.raises(ValueError, match="metricsExporterType"):
        BrokerConfig(metrics_exporter_type="GRAPHITE")
    with pytest.raises(ValueError, match="metrics_prom_exporter_port"):
        NamesrvConfig(metrics_prom_exporter_port=70000)

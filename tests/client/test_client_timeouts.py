"""A producer against a broker that never answers: the send ends within send_msg_timeout,
retries included, with an error that says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cluster import cluster

from rocketstore.broker.registration import BrokerIdentity, BrokerRegistrar
from rocketstore.client import AsyncProducer, Message, MQClientError
from rocketstore.namesrv import DataVersion, topic_config
from rocketstore.remoting import RemotingClient, RemotingServer, RemotingServerConfig
from rocketstore.remoting.eventloop import run

pytestmark = pytest.mark.slow


def test_send_times_out_against_a_silent_broker(tmp_path: Path) -> None:
    with cluster(tmp_path, brokers=()) as c:
        async def main() -> None:
            server = RemotingServer(RemotingServerConfig(listen_port=0))
            server.register_default_processor(lambda ctx, request: None)      # never answers
            await server.start()
            address = f"127.0.0.1:{server.port}"
            try:
                async with RemotingClient() as client:
                    registrar = BrokerRegistrar(client, c.namesrv_addr,
                                                BrokerIdentity("TestCluster", "silent", 0, address, address))
                    await registrar.register_broker_all({"Silent": topic_config("Silent", 2, 2)}, DataVersion(1, 1))
                    producer = AsyncProducer("PG", namesrv_addr=c.namesrv_addr, send_msg_timeout=800)
                    await producer.start()
                    loop = asyncio.get_running_loop()
                    began = loop.time()
                    with pytest.raises(MQClientError, match="attempt"):
                        await producer.send(Message("Silent", b"x"))
                    assert 0.7 < loop.time() - began < 2.0
                    began = loop.time()
                    with pytest.raises(MQClientError):
                        await producer.send(Message("Silent", b"x"), timeout=0.3)
                    assert loop.time() - began < 1.0
                    await producer.shutdown()
            finally:
                await server.stop()

        run(asyncio.wait_for(main(), 60))

"""RocketMQ 4.9.8's Java push consumer on a rocketstore memory topic whose oldest messages
were evicted: its committed offset 0 is below every queue's min offset, the broker answers
PULL_OFFSET_MOVED (OFFSET_TOO_SMALL) and the consumer moves on to the min offset, then gets
exactly the messages the topic still holds."""

from __future__ import annotations

from cluster import Cluster
from conftest import start_java_facing_broker
from java_env import JavaPrograms

from rocketstore.client import AdminClient, Message, Producer
from rocketstore.client.message import MessageQueue

CAP = 1024 * 1024


def test_java_consumer_moves_on_past_evicted_offsets(tmp_path, java_programs: JavaPrograms) -> None:
    (tmp_path / "rocketstore").mkdir()
    cluster = Cluster(tmp_path / "rocketstore")
    try:
        cluster.start_namesrv()
        start_java_facing_broker(cluster, "broker-a", memoryTopicEnable="true", memoryTopicMaxBytes=CAP)
        namesrv = cluster.namesrv_addr
        with AdminClient(namesrv_addr=namesrv) as admin:
            admin.update_topic("JavaMem", broker_addr=cluster.brokers["broker-a"].address,
                               read_queue_nums=2, write_queue_nums=2, memory=True)
            with Producer("JavaMemP", namesrv_addr=namesrv) as producer:
                for i in range(0, 4000, 50):      # about 4 MiB: four times the cap
                    producer.send_batch([Message("JavaMem", b"java-mem-%06d-" % (i + j) + b"j" * 1000)
                                         for j in range(50)], queue=MessageQueue("JavaMem", "broker-a", (i // 50) % 2))
            queues = admin.queues("JavaMem")
            held = 0
            for mq in queues:
                low, high = admin.min_offset(mq), admin.max_offset(mq)
                assert low > 0
                held += high - low
                admin.update_consumer_offset("java_mem_group", mq, 0)     # below the min: evicted
            expected = {f"java-mem-{i:06d}" for i in range(4000 - held, 4000)}
        got = java_programs.json_lines("RsJava", "consume", namesrv, "java_mem_group", "JavaMem", held, 120_000)
        bodies = {m["body"][:len("java-mem-000000")] for m in got}
        assert bodies == expected
        assert min(m["queueOffset"] for m in got) > 0
    finally:
        cluster.close()

"""rocketstore's own RocketMQ clients: producers, push and pull consumers, admin.

asyncio at the core (:class:`AsyncProducer`, :class:`AsyncPushConsumer`,
:class:`AsyncPullConsumer`), with blocking classes over them that run the core on an event loop
thread of their own (:class:`Producer`, :class:`PushConsumer`, :class:`PullConsumer`). They speak
RocketMQ 4.9's remoting protocol to any 4.x name server and broker, rocketstore's or Apache's.

```python
from rocketstore.client import Message, Producer, PushConsumer, ConsumeStatus

with Producer("orders-producer", namesrv_addr="127.0.0.1:9876") as producer:
    result = producer.send(Message("orders", b"order 42 paid", tags="paid", keys=["o-42"]))

consumer = PushConsumer("orders-consumer", namesrv_addr="127.0.0.1:9876")
consumer.subscribe("orders", "paid || shipped")
consumer.register_message_listener(lambda messages: ConsumeStatus.SUCCESS)
consumer.start()
```

Settings are RocketMQ's, in snake_case (:mod:`rocketstore.client.config`). This package is a
network peer: it never imports the store, the broker or native code.
"""

from rocketstore.client.admin import AdminClient, AsyncAdmin
from rocketstore.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueStrategy,
)
from rocketstore.client.config import (
    ClientConfig,
    ProducerConfig,
    PullConsumerConfig,
    PushConsumerConfig,
)
from rocketstore.client.consume_service import ConsumeContext, ConsumeStatus
from rocketstore.client.errors import MQBrokerError, MQClientError
from rocketstore.client.message import (
    Message,
    MessageConst,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from rocketstore.client.producer import AsyncProducer, Producer
from rocketstore.client.pull_consumer import AsyncPullConsumer, PullConsumer
from rocketstore.client.push_consumer import AsyncPushConsumer, PushConsumer
from rocketstore.client.records import CorruptMessageError, decode_messages, encode_batch
from rocketstore.client.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)
from rocketstore.client.subscription import SQL92
from rocketstore.client.transaction import (
    AsyncTransactionProducer,
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from rocketstore.common.consume import ConsumeFromWhere, MessageModel

__all__ = [
    "SQL92",
    "AdminClient", "AsyncAdmin", "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig", "AllocateMessageQueueStrategy", "AsyncProducer",
    "AsyncPullConsumer", "AsyncPushConsumer", "ClientConfig", "ConsumeContext", "ConsumeFromWhere",
    "ConsumeStatus", "CorruptMessageError", "MQBrokerError", "MQClientError", "Message",
    "MessageConst", "MessageExt", "MessageModel", "MessageQueue", "MessageQueueSelector",
    "Producer", "ProducerConfig", "PullConsumer", "PullConsumerConfig", "PullResult", "PullStatus",
    "PushConsumer", "PushConsumerConfig", "SelectMessageQueueByHash", "SelectMessageQueueByRandom",
    "SendResult", "SendStatus", "decode_messages", "encode_batch",
    "AsyncTransactionProducer", "LocalTransactionState", "TransactionListener",
    "TransactionProducer", "TransactionSendResult",
]

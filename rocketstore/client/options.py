"""The clients' keyword options, typed: ``Producer(group, **options)`` and the consumers take
their config's fields as keywords, and these TypedDicts (with ``Unpack``) let a type checker
catch a misspelt option (``namesrv_adr=``) or a bad enumerated value
(``message_model="CLUSTER"``) before run time. Each holds its config dataclass's fields, less
the group, which the constructors take as their first argument
(``tests/client/test_client_typing.py`` keeps the two the same)."""

from __future__ import annotations

from typing import TypedDict

from rocketstore.common.consume import (
    ConsumeFromWhere,
    ConsumeFromWhereName,
    MessageModel,
    MessageModelName,
)

__all__ = ["ClientOptions", "ConsumerOptions", "ProducerOptions", "PullConsumerOptions",
           "PushConsumerOptions"]


class ClientOptions(TypedDict, total=False):
    """ClientConfig's fields."""

    namesrv_addr: str | None
    client_ip: str
    instance_name: str
    client_callback_executor_threads: int
    namespace: str | None
    poll_name_server_interval: int
    heartbeat_broker_interval: int
    persist_consumer_offset_interval: int
    pull_time_delay_mills_when_exception: int
    unit_mode: bool
    unit_name: str | None
    vip_channel_enabled: bool
    mq_client_api_timeout: int
    access_key: str | None
    secret_key: str | None
    security_token: str | None


class ProducerOptions(ClientOptions, total=False):
    """ProducerConfig's fields but producer_group."""

    create_topic_key: str
    default_topic_queue_nums: int
    send_msg_timeout: int
    compress_msg_body_over_howmuch: int
    compress_level: int
    compress_type: str
    retry_times_when_send_failed: int
    retry_times_when_send_async_failed: int
    retry_another_broker_when_not_store_ok: bool
    max_message_size: int
    send_latency_fault_enable: bool


class ConsumerOptions(ClientOptions, total=False):
    """ConsumerConfig's fields but consumer_group."""

    message_model: MessageModel | MessageModelName
    consume_from_where: ConsumeFromWhere | ConsumeFromWhereName
    consume_timestamp: str
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    pull_batch_size: int
    broker_suspend_max_time_millis: int
    consumer_timeout_millis_when_suspend: int
    rebalance_interval: int
    local_offset_store_dir: str


class PushConsumerOptions(ConsumerOptions, total=False):
    """PushConsumerConfig's fields but consumer_group."""

    consume_thread_min: int
    consume_thread_max: int
    consume_concurrently_max_span: int
    pull_threshold_for_topic: int
    pull_threshold_size_for_topic: int
    pull_interval: int
    consume_message_batch_max_size: int
    post_subscription_when_pull: bool
    max_reconsume_times: int
    suspend_current_queue_time_millis: int
    consume_timeout: int
    await_termination_millis_when_shutdown: int
    pull_time_delay_mills_when_pull_exception: int


class PullConsumerOptions(ConsumerOptions, total=False):
    """PullConsumerConfig's fields but consumer_group (pull_batch_size and
    broker_suspend_max_time_millis have other defaults there, the same types)."""

    auto_commit: bool
    auto_commit_interval_millis: int
    pull_threshold_for_all: int
    consume_max_span: int
    poll_timeout_millis: int
    topic_metadata_check_interval_millis: int
    pull_time_delay_mills_when_pull_exception: int

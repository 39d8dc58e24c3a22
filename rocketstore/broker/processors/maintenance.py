"""The broker's upkeep asked by an admin (RocketMQ's AdminBrokerProcessor):
UPDATE_BROKER_CONFIG 25 (``mqadmin updateBrokerConfig``), CLEAN_EXPIRED_CONSUMEQUEUE 306
(``cleanExpiredCQ``), CLEAN_UNUSED_TOPIC 316 (``cleanUnusedTopic``) and
DELETE_EXPIRED_COMMITLOG 329 (``deleteExpiredCommitLog``).

UPDATE_BROKER_CONFIG's body is Java properties text; which keys take effect at once and how
the file is written is :mod:`rocketstore.broker.live_config`'s. RocketMQ answers SUCCESS for an
empty body and for keys it does not know; a key in its black list gets NO_PERMISSION "Can not
update config in black list."; a bad value (RocketMQ keeps the old one silently) gets
SYSTEM_ERROR naming the key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketstore.broker.live_config import CONFIG_BLACK_LIST, ConfigUpdate, describe
from rocketstore.common.java_properties import parse_properties
from rocketstore.common.text import quote
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)

if TYPE_CHECKING:
    from rocketstore.broker.topic_config import TopicConfigManager
    from rocketstore.store import MessageStore

log = logging.getLogger(__name__)


class MaintenanceProcessor:
    def __init__(self, store: MessageStore, topics: TopicConfigManager,
                 update_config: Callable[[dict[str, str]], ConfigUpdate]) -> None:
        self.store = store
        self.topics = topics
        #: BrokerController.update_config: checks, applies and persists (ValueError: refused)
        self.update_config = update_config

    def register_with(self, server: RemotingServer) -> None:
        for code, handler in (
            (RequestCode.UPDATE_BROKER_CONFIG, self.update_broker_config),
            (RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_expired_consume_queue),
            (RequestCode.CLEAN_UNUSED_TOPIC, self.clean_unused_topic),
            (RequestCode.DELETE_EXPIRED_COMMITLOG, self.delete_expired_commit_log),
        ):
            server.register_processor(code, handler)

    def update_broker_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = request.body_bytes()
        if not body:
            return create_response(request)
        try:
            properties = parse_properties(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            log.warning("UPDATE_BROKER_CONFIG from %s: unreadable body %s: %s", ctx.remote_address,
                        quote(body, 200), exc)
            return create_response(request, ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if CONFIG_BLACK_LIST & properties.keys():
            log.warning("UPDATE_BROKER_CONFIG from %s refused: %s is in the black list",
                        ctx.remote_address, quote(sorted(CONFIG_BLACK_LIST & properties.keys())))
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   "Can not update config in black list.")
        try:
            update = self.update_config(properties)
        except ValueError as exc:
            log.warning("UPDATE_BROKER_CONFIG from %s refused: %s", ctx.remote_address, quote(str(exc), 300))
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        except OSError as exc:      # the file is written first: nothing was changed
            log.error("UPDATE_BROKER_CONFIG from %s: writing the properties file failed: %s",
                      ctx.remote_address, exc)
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"writing the broker's properties file failed: {exc}")
        log.info("broker config updated by %s: %s", ctx.remote_address, describe(update))
        return create_response(request)

    def clean_expired_consume_queue(self, ctx: RemotingConnection, request: RemotingCommand
                                    ) -> RemotingCommand:
        removed = self.store.clean_expired_consume_queues()
        log.info("cleanExpiredCQ by %s: %d ConsumeQueue(s) deleted", ctx.remote_address, len(removed))
        return create_response(request)

    def clean_unused_topic(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        deleted = self.store.clean_unused_topics(frozenset(self.topics.table))
        log.info("cleanUnusedTopic by %s: the queues of %d topic(s) deleted", ctx.remote_address, deleted)
        return create_response(request)

    def delete_expired_commit_log(self, ctx: RemotingConnection, request: RemotingCommand
                                  ) -> RemotingCommand:
        self.store.execute_delete_files_manually()
        return create_response(request)

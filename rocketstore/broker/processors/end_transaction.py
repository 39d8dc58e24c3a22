"""END_TRANSACTION 37: a producer's commit or rollback of a half message, after its local
transaction or as the answer to the broker's check (RocketMQ's EndTransactionProcessor).

The half is found by its CommitLog offset and must match the request (producer group,
queue offset in the half topic, CommitLog offset), else SYSTEM_ERROR. A commit stores the
message in its real topic (:meth:`TransactionalMessageService.final_message`) and then the op;
a rollback stores the op only. A transaction this broker run already ended (a check's answer
crossing the producer's own) is not delivered again, its half only marked done. NOT_TYPE (the producer does not know yet) gets no answer and
changes nothing: the check service asks again later. A slave answers SLAVE_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.message_writer import MessageWriter
from rocketstore.broker.processors.send.processor import put_response
from rocketstore.broker.transaction import TransactionalMessageService
from rocketstore.common.properties import MessageConst
from rocketstore.common.record import SysFlag
from rocketstore.common.text import quote
from rocketstore.message import MessageExt
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
    decode_header,
)

log = logging.getLogger("rocketstore.broker")

_COMMIT = int(SysFlag.TRANSACTION_COMMIT)
_ROLLBACK = int(SysFlag.TRANSACTION_ROLLBACK)


@dataclass
class EndTransactionRequestHeader:
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str | None = None
    transaction_id: str | None = None


class EndTransactionProcessor:
    def __init__(self, config: BrokerConfig, writer: MessageWriter,
                 transactions: TransactionalMessageService) -> None:
        self.config = config
        self.writer = writer
        self.transactions = transactions

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.END_TRANSACTION, self.end_transaction)

    def end_transaction(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if self.config.store.broker_role == "SLAVE":
            return create_response(request, ResponseCode.SLAVE_NOT_AVAILABLE,
                                   "Store is not available: this broker is a slave")
        header = decode_header(request.ext_fields, EndTransactionRequestHeader)
        kind = header.commit_or_rollback
        if kind not in (_COMMIT, _ROLLBACK):
            if kind != int(SysFlag.TRANSACTION_NOT_TYPE):
                log.warning("END_TRANSACTION from %s: commitOrRollback %d is none of 0, 8, 12",
                            ctx.remote_address, kind)
            return None
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s of transaction %s (msgId %s) from %s%s",
                      "commit" if kind == _COMMIT else "rollback", quote(header.transaction_id),
                      quote(header.msg_id), ctx.remote_address,
                      " answering a check" if header.from_transaction_check else "")
        half = self.transactions.find_half(header.commit_log_offset)
        if half is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   "Find prepared transaction message failed")
        properties = half.properties
        refused = self._check_prepared(request, half, properties, header)
        if refused is not None:
            return refused
        if kind == _COMMIT and self.transactions.first_end(properties):
            message, queue_id = self.transactions.final_message(half, properties, _COMMIT)
            result = self.writer.put(message, queue_id)
            if not result.ok:
                return put_response(request, result.status_code, result.reason)
        if kind == _ROLLBACK:
            self.transactions.first_end(properties)
        self.transactions.delete_prepared(half)
        return create_response(request)

    @staticmethod
    def _check_prepared(request: RemotingCommand, half: MessageExt, properties: dict[str, str],
                        header: EndTransactionRequestHeader) -> RemotingCommand | None:
        """checkPrepareMessage: the half is the one the request names."""
        if properties.get(MessageConst.PRODUCER_GROUP) != header.producer_group:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != header.tran_state_table_offset:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   "The transaction state table offset wrong")
        if half.commitlog_offset != header.commit_log_offset:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        return None

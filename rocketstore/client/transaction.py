"""Transactional producers: :class:`AsyncTransactionProducer` (asyncio) and
:class:`TransactionProducer` (blocking), RocketMQ's TransactionMQProducer.

``send_message_in_transaction(msg, arg)`` sends a half message (``TRAN_MSG=true``,
``PGROUP`` the producer group; a DELAY is dropped, as RocketMQ's producer drops it), which no
consumer sees; then runs the listener's ``execute_local_transaction(msg, arg)``, and ends the
transaction with END_TRANSACTION (oneway) to the broker that stored the half: COMMIT_MESSAGE
delivers the message, ROLLBACK_MESSAGE drops it, UNKNOW (or an exception) leaves it to the
broker's check. A half the broker could not make durable (FLUSH_DISK_TIMEOUT, ...) is rolled
back. The broker checks open halves older than its ``transactionTimeOut`` with
CHECK_TRANSACTION_STATE; the listener's ``check_local_transaction(msg)`` answers, and the answer
goes back as END_TRANSACTION with ``fromTransactionCheck``.

A listener's methods may return the state or (for the asyncio producer) an awaitable of it.
The blocking producer runs ``execute_local_transaction`` on the calling thread and
``check_local_transaction`` on a thread pool (``check_thread_pool_min_size`` threads), never on
its event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

from rocketstore.client.config import ProducerConfig
from rocketstore.client.errors import MQClientError
from rocketstore.client.message import (
    Message,
    MessageConst,
    MessageExt,
    SendResult,
    SendStatus,
    SysFlag,
    decode_offset_msg_id,
)
from rocketstore.client.producer import AsyncProducer, Producer
from rocketstore.common.text import quote
from rocketstore.remoting import RemotingCommand, RemotingConnection, RequestCode, create_request

log = logging.getLogger("rocketstore.client")


class LocalTransactionState(enum.Enum):
    """What the local transaction came to (RocketMQ's names, UNKNOW included)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_END_TYPE = {
    LocalTransactionState.COMMIT_MESSAGE: int(SysFlag.TRANSACTION_COMMIT),
    LocalTransactionState.ROLLBACK_MESSAGE: int(SysFlag.TRANSACTION_ROLLBACK),
    LocalTransactionState.UNKNOW: int(SysFlag.TRANSACTION_NOT_TYPE),
}

StateOrAwaitable = LocalTransactionState | Awaitable[LocalTransactionState] | None


class TransactionListener(Protocol):
    """RocketMQ's TransactionListener."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> StateOrAwaitable: ...

    def check_local_transaction(self, msg: MessageExt) -> StateOrAwaitable: ...


@dataclass(slots=True)
class TransactionSendResult(SendResult):
    """A half's SendResult and what its local transaction came to."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _resolved(value: StateOrAwaitable) -> LocalTransactionState:
    if inspect.isawaitable(value):
        value = await value
    if value is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(value, LocalTransactionState):
        raise MQClientError(f"a transaction listener returned {value!r}, not a LocalTransactionState")
    return value


class AsyncTransactionProducer(AsyncProducer):
    """A transactional producer on the running asyncio loop::

        producer = AsyncTransactionProducer("orders-tx", listener, namesrv_addr="127.0.0.1:9876")
        await producer.start()
        result = await producer.send_message_in_transaction(Message("orders", b"..."), arg=order)
        await producer.shutdown()
    """

    def __init__(self, producer_group: str | None = None,
                 transaction_listener: TransactionListener | None = None, *,
                 config: ProducerConfig | None = None,
                 check_executor: concurrent.futures.Executor | None = None, **options: Any) -> None:
        super().__init__(producer_group, config=config, **options)
        self.transaction_listener = transaction_listener
        #: where check_local_transaction runs (None: called on the loop)
        self.check_executor = check_executor
        self._checks: set[asyncio.Task[None]] = set()

    async def shutdown(self) -> None:
        for task in list(self._checks):
            task.cancel()
        await asyncio.gather(*self._checks, return_exceptions=True)
        await super().shutdown()

    async def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                          timeout: float | None = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it."""
        listener = self.require_listener()
        send_result = await self.prepare(msg, timeout=timeout)
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        if send_result.send_status is SendStatus.SEND_OK:
            try:
                state = await _resolved(listener.execute_local_transaction(msg, arg))
            except Exception as exc:  # noqa: BLE001 - the broker's check decides
                log.info("local transaction of %s failed: %s", send_result.msg_id, exc)
                error = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        await self.end_transaction(send_result, state, error)
        return self.result_of(send_result, state)

    def require_listener(self) -> TransactionListener:
        if self.transaction_listener is None:
            raise MQClientError("the transaction producer has no transaction listener")
        return self.transaction_listener

    async def prepare(self, msg: Message, *, timeout: float | None = None) -> SendResult:
        """The half message's send (the first step of :meth:`send_message_in_transaction`)."""
        self.require_listener()
        msg.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)
        msg.properties[MessageConst.TRANSACTION_PREPARED] = "true"
        msg.properties[MessageConst.PRODUCER_GROUP] = self.group
        try:
            send_result = await self.send(msg, timeout=timeout)
        except MQClientError:
            raise
        except Exception as exc:
            raise MQClientError(f"send message Exception: {exc}") from exc
        if send_result.send_status is SendStatus.SEND_OK:
            msg.transaction_id = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return send_result

    @staticmethod
    def result_of(send_result: SendResult, state: LocalTransactionState) -> TransactionSendResult:
        return TransactionSendResult(
            send_result.send_status, send_result.msg_id, send_result.offset_msg_id,
            send_result.message_queue, send_result.queue_offset, send_result.transaction_id,
            send_result.region_id, local_transaction_state=state)

    async def end_transaction(self, send_result: SendResult, state: LocalTransactionState,
                              error: BaseException | None = None) -> None:
        """END_TRANSACTION (oneway) for a half sent by :meth:`prepare`; a failure to send it
        is logged (the broker's check decides then)."""
        instance = self._checked_instance()
        _, commit_log_offset = decode_offset_msg_id(send_result.offset_msg_id or send_result.msg_id)
        header = {"producerGroup": self.group,
                  "tranStateTableOffset": str(send_result.queue_offset),
                  "commitLogOffset": str(commit_log_offset),
                  "commitOrRollback": str(_END_TYPE[state]),
                  "fromTransactionCheck": "false",
                  "msgId": send_result.msg_id}
        if send_result.transaction_id is not None:
            header["transactionId"] = send_result.transaction_id
        remark = (f"executeLocalTransactionBranch exception: {error}" if error is not None else None)
        address = instance.master_address(send_result.message_queue.broker_name)
        if address is None:
            log.warning("ending transaction %s: broker %s not found", send_result.msg_id,
                        send_result.message_queue.broker_name)
            return
        request = create_request(RequestCode.END_TRANSACTION, header, remark=remark, oneway=True)
        try:
            await instance.remoting.invoke_oneway(address, request, self.config.send_msg_timeout / 1000)
        except Exception as exc:  # noqa: BLE001 - the broker's check asks again
            log.warning("ending transaction %s at %s failed: %s", send_result.msg_id, address, exc)

    # ---- the broker's check ----

    def check_transaction_state(self, connection: RemotingConnection, message: MessageExt,
                                request: RemotingCommand) -> None:
        task = asyncio.get_running_loop().create_task(self._check(connection, message, request))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check(self, connection: RemotingConnection, message: MessageExt,
                     request: RemotingCommand) -> None:
        listener = self.transaction_listener
        if listener is None:
            log.warning("a broker checks transaction %s of group %s: no listener",
                        message.transaction_id, self.group)
            return
        ext = request.ext_fields or {}
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        try:
            if self.check_executor is not None:
                loop = asyncio.get_running_loop()
                answer = await loop.run_in_executor(self.check_executor,
                                                    listener.check_local_transaction, message)
            else:
                answer = listener.check_local_transaction(message)
            state = await _resolved(answer)
        except Exception as exc:  # noqa: BLE001 - answered UNKNOW
            log.info("check of transaction %s failed: %s", message.transaction_id, exc)
            error = exc
        unique_key = message.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or message.offset_msg_id
        header = {"producerGroup": self.group,
                  "tranStateTableOffset": ext.get("tranStateTableOffset", "0"),
                  "commitLogOffset": ext.get("commitLogOffset", "0"),
                  "commitOrRollback": str(_END_TYPE[state]),
                  "fromTransactionCheck": "true",
                  "msgId": unique_key}
        if ext.get("transactionId"):
            header["transactionId"] = ext["transactionId"]
        answer_request = create_request(
            RequestCode.END_TRANSACTION, header, oneway=True,
            remark=None if error is None else f"checkLocalTransactionState Exception: {error}")
        try:
            connection.invoke_oneway(answer_request)
        except Exception as exc:  # noqa: BLE001 - the broker asks again
            log.info("answering the check of %s failed: %s", quote(unique_key), exc)


class TransactionProducer(Producer):
    """A blocking transactional producer: :class:`AsyncTransactionProducer` on an event loop
    thread of its own::

        class Orders:
            def execute_local_transaction(self, msg, arg):
                return LocalTransactionState.COMMIT_MESSAGE if db.save(arg) else LocalTransactionState.UNKNOW
            def check_local_transaction(self, msg):
                return LocalTransactionState.COMMIT_MESSAGE if db.has(msg.keys) else LocalTransactionState.ROLLBACK_MESSAGE

        with TransactionProducer("orders-tx", Orders(), namesrv_addr="127.0.0.1:9876") as producer:
            result = producer.send_message_in_transaction(Message("orders", b"..."), arg=order)
    """

    def __init__(self, producer_group: str | None = None,
                 transaction_listener: TransactionListener | None = None, *,
                 config: ProducerConfig | None = None, check_thread_pool_min_size: int = 1,
                 **options: Any) -> None:
        self._listener_given = transaction_listener
        self._check_pool = concurrent.futures.ThreadPoolExecutor(
            max(1, check_thread_pool_min_size), thread_name_prefix="rocketstore-transaction-check")
        super().__init__(producer_group, config=config, **options)

    def _make_core(self, producer_group: str | None, config: ProducerConfig | None,
                   options: dict[str, Any]) -> AsyncTransactionProducer:
        return AsyncTransactionProducer(producer_group, self._listener_given, config=config,
                                        check_executor=self._check_pool, **options)

    @property
    def transaction_listener(self) -> TransactionListener | None:
        return self._core.transaction_listener  # type: ignore[attr-defined, no-any-return]

    @transaction_listener.setter
    def transaction_listener(self, listener: TransactionListener | None) -> None:
        self._core.transaction_listener = listener  # type: ignore[attr-defined]

    def shutdown(self) -> None:
        try:
            if self._loop is not None:
                try:
                    self.flush(self.config.send_msg_timeout / 1000)     # the END_TRANSACTIONs sent
                except TimeoutError as exc:
                    log.warning("shutting down: %s", exc)
            super().shutdown()
        finally:
            self._check_pool.shutdown(wait=True)

    def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                    timeout: float | None = None) -> TransactionSendResult:
        """Send the half, run the listener's execute_local_transaction on this thread, end the
        transaction."""
        core: AsyncTransactionProducer = self._core  # type: ignore[assignment]
        listener = core.require_listener()
        send_result = self._run(core.prepare(msg, timeout=timeout))
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        if send_result.send_status is SendStatus.SEND_OK:
            try:
                state = _sync_state(listener.execute_local_transaction(msg, arg))
            except Exception as exc:  # noqa: BLE001 - the broker's check decides
                log.info("local transaction of %s failed: %s", send_result.msg_id, exc)
                error = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        # oneway: not waited for (shutdown() waits for the last ones); the loop sends it
        # before anything this thread asks of it next
        self._track(self._loop_or_fail().submit(core.end_transaction(send_result, state, error)))
        return core.result_of(send_result, state)


def _sync_state(value: StateOrAwaitable) -> LocalTransactionState:
    if value is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(value, LocalTransactionState):
        raise MQClientError(f"a transaction listener returned {value!r}, not a LocalTransactionState")
    return value

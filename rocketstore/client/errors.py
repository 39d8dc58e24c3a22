"""Exceptions of the clients (RocketMQ's MQClientException and MQBrokerException)."""

from __future__ import annotations

from rocketstore.remoting.codes import describe_response


class MQClientError(Exception):
    """A client-side failure: bad arguments to a started client, no route, every retry spent,
    a client used before ``start()`` or after ``shutdown()``."""


class MQBrokerError(MQClientError):
    """A broker (or name server) answered with an error code; ``response_code`` and
    ``remark`` are its, ``address`` is who said it."""

    def __init__(self, response_code: int, remark: str | None, address: str | None = None) -> None:
        where = f" from {address}" if address else ""
        super().__init__(f"{describe_response(response_code)}{where}: {remark or 'no remark'}")
        self.response_code = response_code
        self.remark = remark
        self.address = address

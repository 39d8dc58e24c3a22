"""BrokerRegistrar: how a broker tells every name server it is alive and what it serves.

RocketMQ's BrokerOuterAPI.registerBrokerAll: REGISTER_BROKER to each name server at once, again
every 30 s, UNREGISTER_BROKER on shutdown. The broker gives its identity and a function that
returns its current topic config table and data version; nothing here knows the store.

When no name server answers, the broker says so once (the addresses and why) and registers
again after 1 s, 2 s, 4 s, ... up to the registration period; the first answer after that is
one INFO line (:meth:`BrokerRegistrar.after_registration`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocketstore.common.text import quote
from rocketstore.remoting import (
    RemotingClient,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    create_request,
)
from rocketstore.remoting.route_bodies import (
    DataVersion,
    RegisterBrokerResult,
    body_crc32,
    encode_register_broker_body,
)

log = logging.getLogger(__name__)

#: RocketMQ's brokerConfig.registerNameServerPeriod and registerBrokerTimeoutMills.
REGISTER_PERIOD_S = 30.0
REGISTER_TIMEOUT_S = 6.0
#: the first wait before registering again when no name server answered (doubled each time,
#: up to the registration period)
FIRST_RETRY_S = 1.0

#: ``() -> (topic config table, data version)``: the broker's state at registration time.
TopicConfigSource = Callable[[], tuple[Mapping[str, Mapping[str, Any]], DataVersion]]


@dataclass(frozen=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int
    #: "ip:port" clients reach the broker at.
    broker_addr: str
    #: "ip:port" slaves replicate from (the master's HA port).
    ha_server_addr: str


@dataclass(frozen=True)
class RegistrationOutcome:
    """One name server's answer: ``result`` when it accepted, ``error`` otherwise."""

    namesrv_addr: str
    result: RegisterBrokerResult | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _reason(exc: BaseException) -> str:
    """Why a request failed, briefly: the operating system's words when a socket error is
    behind it ("Connection refused"), else the exception."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    return f"{type(exc).__name__}: {exc}"


def describe_failures(outcomes: Sequence[RegistrationOutcome]) -> str:
    """``"a:9876 (Connection refused), b:9876 (timeout)"`` for the failed outcomes."""
    return ", ".join(f"{o.namesrv_addr} ({o.error})" for o in outcomes if not o.ok)


def split_namesrv_addrs(addrs: str | Sequence[str]) -> list[str]:
    """RocketMQ's ``namesrvAddr`` ("a:9876;b:9876") or a list of addresses."""
    items = addrs.split(";") if isinstance(addrs, str) else list(addrs)
    return [item.strip() for item in items if item.strip()]


def build_register_broker_request(
    identity: BrokerIdentity,
    topic_config_table: Mapping[str, Mapping[str, Any]],
    data_version: DataVersion,
    filter_server_list: Sequence[str] = (),
) -> RemotingCommand:
    body = encode_register_broker_body(topic_config_table, data_version, filter_server_list)
    return create_request(
        RequestCode.REGISTER_BROKER,
        {
            "brokerAddr": identity.broker_addr,
            "brokerId": str(identity.broker_id),
            "brokerName": identity.broker_name,
            "clusterName": identity.cluster_name,
            "haServerAddr": identity.ha_server_addr,
            "compressed": "false",
            "bodyCrc32": str(body_crc32(body)),
        },
        body,
    )


def build_unregister_broker_request(identity: BrokerIdentity) -> RemotingCommand:
    return create_request(
        RequestCode.UNREGISTER_BROKER,
        {
            "brokerAddr": identity.broker_addr,
            "brokerId": str(identity.broker_id),
            "brokerName": identity.broker_name,
            "clusterName": identity.cluster_name,
        },
    )


class BrokerRegistrar:
    """Registers one broker with every name server, once or every ``period`` seconds.

    ::

        registrar = BrokerRegistrar(client, "127.0.0.1:9876", identity)
        outcomes = await registrar.register_broker_all(topics, data_version)
        registrar.start_periodic(lambda: (topic_table(), data_version()))
        ...
        await registrar.stop()        # and UNREGISTER_BROKER everywhere
    """

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: str | Sequence[str],
        identity: BrokerIdentity,
        timeout: float = REGISTER_TIMEOUT_S,
        period: float = REGISTER_PERIOD_S,
    ) -> None:
        self.client = client
        self.namesrv_addrs = split_namesrv_addrs(namesrv_addrs)
        self.identity = identity
        self.timeout = timeout
        self.period = period
        self._periodic: asyncio.Task[None] | None = None
        #: whether a name server accepted the last registration (None: not tried yet)
        self.registered: bool | None = None
        #: the name servers that failed the last registration while others answered
        self._failing: frozenset[str] = frozenset()
        self._retry_delay = FIRST_RETRY_S
        self._retry: asyncio.TimerHandle | None = None

    async def register_broker_all(
        self,
        topic_config_table: Mapping[str, Mapping[str, Any]],
        data_version: DataVersion,
        filter_server_list: Sequence[str] = (),
    ) -> list[RegistrationOutcome]:
        """REGISTER_BROKER to every name server concurrently; one outcome each, in order."""

        async def register(addr: str) -> RegistrationOutcome:
            request = build_register_broker_request(self.identity, topic_config_table, data_version, filter_server_list)
            return await self._invoke(addr, request, parse_result=True)

        return list(await asyncio.gather(*(register(addr) for addr in self.namesrv_addrs)))

    def after_registration(self, outcomes: Sequence[RegistrationOutcome],
                           register_again: Callable[[], None]) -> None:
        """Say what changed (one line: no name server answers / some do not / one answers
        again) and, while none answers, call ``register_again`` after a back-off delay."""
        answered = [o.namesrv_addr for o in outcomes if o.ok]
        failing = frozenset(o.namesrv_addr for o in outcomes if not o.ok)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if not answered:
            delay = self._retry_delay
            if self.registered is not False:
                log.warning("no name server reachable: %s; registering again in %g s, then "
                            "backing off to every %g s", describe_failures(outcomes), delay,
                            self.period)
            else:
                log.debug("still no name server reachable: %s; again in %g s",
                          describe_failures(outcomes), delay)
            self.registered = False
            self._retry_delay = min(delay * 2, self.period)
            self._retry = asyncio.get_running_loop().call_later(delay, register_again)
            return
        if self.registered is not True:
            log.info("registered with name server %s", ", ".join(answered))
        if failing and failing != self._failing:
            log.warning("name server %s did not answer the registration",
                        describe_failures(outcomes))
        self.registered = True
        self._failing = failing
        self._retry_delay = FIRST_RETRY_S

    async def unregister_broker_all(self) -> list[RegistrationOutcome]:
        async def unregister(addr: str) -> RegistrationOutcome:
            return await self._invoke(addr, build_unregister_broker_request(self.identity), parse_result=False)

        outcomes = list(await asyncio.gather(*(unregister(addr) for addr in self.namesrv_addrs)))
        if any(not o.ok for o in outcomes):
            # a name server this broker never reached has nothing to forget
            log.log(logging.WARNING if self.registered else logging.DEBUG,
                    "unregistering from name server %s failed", describe_failures(outcomes))
        return outcomes

    async def _invoke(self, addr: str, request: RemotingCommand, parse_result: bool) -> RegistrationOutcome:
        try:
            response = await self.client.invoke(addr, request, self.timeout)
        except Exception as exc:  # an unreachable name server must not stop the others
            # the caller reports the outcomes together (after_registration)
            log.debug("%s to name server %s failed: %s", request.code, addr, exc)
            return RegistrationOutcome(addr, error=_reason(exc))
        if response.code != ResponseCode.SUCCESS:
            log.warning("name server %s answered %s: %s", addr, response.code, quote(response.remark))
            return RegistrationOutcome(addr, error=f"code {response.code}: {response.remark}")
        result = None
        if parse_result:
            ext = response.ext_fields
            result = RegisterBrokerResult(ext.get("haServerAddr"), ext.get("masterAddr"))
        return RegistrationOutcome(addr, result=result)

    def start_periodic(self, source: TopicConfigSource, period: float = REGISTER_PERIOD_S) -> None:
        """Register now and then every ``period`` seconds with what ``source()`` returns."""
        if self._periodic is not None:
            raise RuntimeError("periodic registration already started")

        async def loop() -> None:
            while True:
                try:
                    topics, version = source()
                    await self.register_broker_all(topics, version)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("registering with the name servers failed")
                await asyncio.sleep(period)

        self._periodic = asyncio.ensure_future(loop())

    async def stop(self, unregister: bool = True) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        periodic, self._periodic = self._periodic, None
        if periodic is not None:
            periodic.cancel()
            try:
                await periodic
            except asyncio.CancelledError:
                pass
        if unregister:
            await self.unregister_broker_all()

"""Type stub of rocketstore/_native/message.pyx: the message to put."""

from collections.abc import Sequence
from typing import Any, Final, TypeAlias

from typing_extensions import disjoint_base

_Host: TypeAlias = str | tuple[str, int]
"""'a.b.c.d:port', '[v6]:port', or an (address, port) tuple."""

PROPERTY_TAGS: Final[str]
PROPERTY_KEYS: Final[str]
PROPERTY_UNIQ_KEY: Final[str]

def new_uniq_key() -> str:
    """A fresh UNIQ_KEY as RocketMQ's client builds it."""

def validate_topic(topic: str) -> None:
    """RocketMQ's topic rule (1..127 of [%|a-zA-Z0-9_-]); ValueError/TypeError otherwise."""

@disjoint_base
class Message:
    """A message the embedded store puts (``rocketstore.Message``); a producer sends a broker
    ``rocketstore.client.Message`` instead.

    ``properties`` holds user and system properties."""

    topic: str
    body: bytes
    flag: int
    born_timestamp: int | None
    born_host: _Host | None
    store_host: _Host | None
    sys_flag: int
    reconsume_times: int
    prepared_transaction_offset: int

    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | memoryview = b"",
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        flag: int = 0,
        born_timestamp: int | None = None,
        born_host: _Host | None = None,
        *,
        store_host: _Host | None = None,
        sys_flag: int = 0,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        delay_level: int | None = None,
        uniq_key: str | None = None,
    ) -> None: ...
    @property
    def tags(self) -> str | None:
        """The TAGS property."""

    @tags.setter
    def tags(self, value: str | None) -> None: ...
    @property
    def keys(self) -> list[str]:
        """The KEYS tokens (the property is space-separated)."""

    @keys.setter
    def keys(self, value: str | Sequence[str] | None) -> None: ...
    @property
    def properties(self) -> dict[str, str]:
        """Every property. A UNIQ_KEY the put generated joins the dict on its first read
        after the put (the put path keeps it as text in the message until then)."""

    @properties.setter
    def properties(self, value: dict[str, str] | None) -> None: ...
    @property
    def uniq_key(self) -> str | None:
        """The UNIQ_KEY property (generated at put time when absent)."""

    @uniq_key.setter
    def uniq_key(self, value: str | None) -> None: ...
    @property
    def delay_level(self) -> int:
        """The DELAY property as an int (0: not delayed)."""

    def __reduce__(self) -> tuple[Any, ...]: ...

from collections.abc import Generator
from typing import Any

from typing_extensions import disjoint_base

@disjoint_base
class DeferredReply:
    """A reply given later on the loop (see rocketstore.remoting._deferred); ``bind``'s sink
    has ``deferred_done(request, outcome)``."""
    @property
    def done(self) -> bool: ...
    def bind(self, sink: Any, request: Any) -> None: ...
    def resolve(self, outcome: Any) -> None: ...
    def __await__(self) -> Generator[Any, None, Any]: ...

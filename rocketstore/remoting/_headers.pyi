"""Type stub of rocketstore/remoting/_headers.pyx: typed header decoding in C."""

from collections.abc import Callable, Iterable, Mapping
from typing import Any, final

@final
class FieldSpec:
    """One field of a header class: attribute, wire key, kind (0 str, 1 int, 2 bool,
    3 float), whether it is required, its default."""

    @property
    def attribute(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def kind(self) -> int: ...
    @property
    def required(self) -> bool: ...
    @property
    def default(self) -> Any: ...
    def __init__(self, attribute: str, key: str, kind: int, required: bool, default: Any) -> None: ...

@final
class HeaderDecoder:
    """``decoder(ext)``: an instance of the header class, or HeaderFieldError."""

    def __init__(
        self,
        cls: type,
        fields: Iterable[FieldSpec],
        post_init: Callable[[Any], None] | None,
        missing_error: Callable[[str], BaseException],
        parse_int: Callable[[str, Any], int],
        parse_bool: Callable[[str, Any], bool],
        parse_float: Callable[[str, Any], float],
    ) -> None: ...
    def __call__(self, ext: Mapping[str, Any]) -> Any: ...

"""Type stub of rocketstore/_native/read_source.pyx: the bytes a native reader walks."""

from typing_extensions import Self, disjoint_base

@disjoint_base
class ReadSource:
    """The bytes a native reader walks: a held MappedFile or a bytes-like buffer."""

    @property
    def obj(self) -> object: ...
    def __new__(cls, source: object) -> Self: ...

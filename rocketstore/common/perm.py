"""PermName: what a topic or a broker allows (bits of ``perm`` and ``brokerPermission``)."""
from __future__ import annotations

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
#: Every bit a ``perm`` may carry.
PERM_MASK = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)

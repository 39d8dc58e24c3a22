"""PullSysFlag: the bits of a PULL_MESSAGE request's ``sysFlag``."""
from __future__ import annotations

#: The request carries the consumer's committed offset (stored for the group).
FLAG_COMMIT_OFFSET = 0x1
#: A pull that finds nothing may be held (long polling).
FLAG_SUSPEND = 0x2
#: The request carries its subscription (else the one the group's heartbeat registered is used).
FLAG_SUBSCRIPTION = 0x4
#: A class filter (filter servers; not supported).
FLAG_CLASS_FILTER = 0x8

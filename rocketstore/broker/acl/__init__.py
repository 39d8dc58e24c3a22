"""RocketMQ 4.x plain ACL on the broker (``aclEnable=true``): the file (plain), the check of
every request (validator); the admin codes are processors/acl.py's."""

from rocketstore.broker.acl.plain import Account, AclConfig, AclFile, RemoteAddressPattern
from rocketstore.broker.acl.validator import AclRefused, RequestGuard, validate

__all__ = ["Account", "AclConfig", "AclFile", "AclRefused", "RemoteAddressPattern", "RequestGuard", "validate"]

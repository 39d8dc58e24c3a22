"""The check of every request of an ACL broker (PlainAccessValidator.parse and
PlainPermissionManager.validate of RocketMQ 4.9.8), in its order:

1. a client whose address is on the global white list passes;
2. the request must carry an AccessKey of a known account;
3. a client on that account's white list passes;
4. the Signature must be the account's (see rocketstore.remoting.acl);
5. an admin code (create/update topic, broker config, delete topic, create/delete group)
   needs an admin account;
6. each resource the request names (see ``resources``) needs its permission: the account's
   for that topic or group, else its default topic or group permission.

A refusal is answered NO_PERMISSION (16) with RocketMQ 4.9.8's remark (its AclException as
its remoting layer prints it; RocketMQ 4.9.8 itself answers such requests SYSTEM_ERROR 1).
"""

from __future__ import annotations

import hmac
from typing import Any

import orjson

from rocketstore.broker.acl.plain import (
    ANY,
    PUB,
    SUB,
    AclConfig,
    AclFile,
    check_permission,
    is_group_resource,
    resource_text,
)
from rocketstore.common.topics import retry_topic
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.acl import (
    ACCESS_KEY,
    SIGNATURE,
    calculate_signature,
    combine_request_content,
)

_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
_MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"

#: Permission.ADMIN_CODE, and the ACL changes (RocketMQ 4.9.8 lets any account make those)
ADMIN_CODES = frozenset((RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
                         RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                         RequestCode.DELETE_SUBSCRIPTIONGROUP, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                         RequestCode.DELETE_ACL_CONFIG, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG))


class AclRefused(Exception):
    """A request the ACL refuses; ``remark`` is RocketMQ's."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.remark = f"{_EXCEPTION}: {message}, {where}"


def _validate_at(line: int) -> str:
    return f"{_MANAGER}.validate(PlainPermissionManager.java:{line})"


def _check_perm_at(line: int) -> str:
    return f"{_MANAGER}.checkPerm(PlainPermissionManager.java:{line})"


def resources(request: RemotingCommand, fields: dict[str, str]) -> dict[str, int]:
    """The topics and groups (as retry topics) a request names, and the permission each
    needs (PlainAccessValidator.parse's table)."""
    code = request.code
    needed: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:
            needed[resource] = perm

    if code == RequestCode.SEND_MESSAGE:
        add(fields.get("topic"), PUB)
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        add(fields.get("b"), PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(fields.get("originTopic"), PUB)
        add(retry_topic(str(fields.get("group"))), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        add(fields.get("topic"), SUB)
        add(retry_topic(str(fields.get("consumerGroup"))), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(fields.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        for group, topics in _heartbeat_subscriptions(request):
            add(retry_topic(group), SUB)
            for topic in topics:
                add(topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        add(retry_topic(_java_text(fields.get("consumerGroup"))), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        add(retry_topic(_java_text(fields.get("consumerGroup"))), SUB)
        add(fields.get("topic"), SUB)
    return needed


def _java_text(value: str | None) -> str:
    return "null" if value is None else value


def _heartbeat_subscriptions(request: RemotingCommand) -> list[tuple[str, list[str]]]:
    try:
        data: Any = orjson.loads(request.body_bytes())
    except orjson.JSONDecodeError as exc:
        raise AclRefused(f"heartbeat body is not JSON: {exc}",
                         "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java)") from None
    out = []
    consumers = data.get("consumerDataSet") if isinstance(data, dict) else None
    for consumer in consumers if isinstance(consumers, list) else ():
        if not isinstance(consumer, dict):
            continue
        subscriptions = consumer.get("subscriptionDataSet")
        topics = [str(s.get("topic")) for s in (subscriptions if isinstance(subscriptions, list) else ())
                  if isinstance(s, dict)]
        out.append((str(consumer.get("groupName")), topics))
    return out


def host_of(remote_address: str) -> str:
    """``127.0.0.1:1234`` -> ``127.0.0.1``; ``[::1]:1234`` -> ``::1``."""
    host = remote_address.rsplit(":", 1)[0] if ":" in remote_address else remote_address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def validate(config: AclConfig, request: RemotingCommand, remote_address: str) -> None:
    """Raise AclRefused unless ``request`` from ``remote_address`` may be served."""
    host = host_of(remote_address)
    if any(p.match(host) for p in config.global_patterns):
        return
    fields = request.ext_fields or {}
    access_key = fields.get(ACCESS_KEY)
    if access_key is None:
        raise AclRefused("No accessKey is configured", _validate_at(664))
    account = config.accounts.get(access_key)
    if account is None:
        raise AclRefused(f"No acl config for {access_key}", _validate_at(668))
    if account.white_listed(host):
        return
    body = request.body_bytes() if request.body_length else None
    expected = calculate_signature(combine_request_content(fields, body), account.secret_key)
    if not hmac.compare_digest(expected.encode(), str(fields.get(SIGNATURE, "")).encode("utf-8", "replace")):
        raise AclRefused(f"Check signature failed for accessKey={access_key}", _validate_at(684))
    if request.code in ADMIN_CODES and not account.admin:
        raise AclRefused(f"Need admin permission for request code={request.code}, but accessKey="
                         f"{access_key} is not", _check_perm_at(581))
    needed = resources(request, fields)
    if not needed or (not account.perms and account.admin):
        return
    for resource, perm in needed.items():
        owned = account.perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group_resource(resource) else account.default_topic_perm
            line = 606
        else:
            line = 611
        if not check_permission(perm, owned):
            raise AclRefused(f"No default permission for {resource_text(resource)}", _check_perm_at(line))


class RequestGuard:
    """The check as a remoting request guard: None lets a request through, a response refuses it."""

    def __init__(self, acl_file: AclFile) -> None:
        self.acl_file = acl_file
        self.refusals = 0

    def __call__(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            validate(self.acl_file.current(), request, ctx.remote_address)
        except AclRefused as refused:
            self.refusals += 1
            return create_response(request, ResponseCode.NO_PERMISSION, refused.remark)
        return None


__all__ = ["ADMIN_CODES", "ANY", "AclRefused", "RequestGuard", "resources", "validate"]

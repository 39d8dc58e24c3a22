"""The ACL admin codes. On a broker with ``aclEnable=true``: AclAdminProcessor. Without ACL, as
RocketMQ 4.9.8 answers with ``aclEnable=false``, whose AdminBrokerProcessor fails each change with its
code's failure: UPDATE_AND_CREATE_ACL_CONFIG 50 -> UPDATE_AND_CREATE_ACL_CONFIG_FAILED 209,
DELETE_ACL_CONFIG 51 -> DELETE_ACL_CONFIG_FAILED 210, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53 ->
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED 211 (RocketMQ's remark is the text of the
NullPointerException behind it; here it says why). GET_BROKER_CLUSTER_ACL_INFO 52 and
GET_BROKER_CLUSTER_ACL_CONFIG 54 get SYSTEM_ERROR, where RocketMQ's broker never answers (the
same exception escapes its processor and mqadmin waits out its timeout).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable

import orjson

from rocketstore.broker.acl.plain import (
    MIN_KEY_LENGTH,
    Account,
    AclConfig,
    AclFile,
    address_patterns,
    parse_perm,
)
from rocketstore.common.text import quote
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)

log = logging.getLogger("rocketstore.broker.acl")

ACL_NOT_ENABLED = "ACL is not enabled on this broker (aclEnable=false)"

_FAILURES = {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    RequestCode.DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ResponseCode.SYSTEM_ERROR,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ResponseCode.SYSTEM_ERROR,
}


class AclDisabledProcessor:
    def register_with(self, server: RemotingServer) -> None:
        for code in _FAILURES:
            server.register_processor(code, self.refuse)

    def refuse(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, _FAILURES[request.code], ACL_NOT_ENABLED)


class AclAdminProcessor:
    """The ACL admin codes of a broker with ``aclEnable=true``, as RocketMQ 4.9.8 answers them:
    UPDATE_AND_CREATE_ACL_CONFIG 50 (the given fields replace the account's, or make a new
    one), DELETE_ACL_CONFIG 51, GET_BROKER_CLUSTER_ACL_INFO 52 (the file's data version),
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53. GET_BROKER_CLUSTER_ACL_CONFIG 54 is not served
    (REQUEST_CODE_NOT_SUPPORTED, as 4.9.8). Changes are written to the ACL file in a worker
    thread, one at a time."""

    def __init__(self, acl_file: AclFile, identity: Callable[[], tuple[str, str, str]]) -> None:
        self.acl_file = acl_file
        #: (cluster name, broker name, broker address)
        self.identity = identity
        self._lock = asyncio.Lock()

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, self.update_account)
        server.register_processor(RequestCode.DELETE_ACL_CONFIG, self.delete_account)
        server.register_processor(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, self.acl_info)
        server.register_processor(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, self.update_global_white)

    async def _change(self, change: Callable[[AclConfig], None]) -> None:
        async with self._lock:
            config = copy.deepcopy(self.acl_file.current())
            change(config)
            await asyncio.get_running_loop().run_in_executor(None, self.acl_file.write, config)

    async def update_account(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields or {}

        def change(config: AclConfig) -> None:
            access_key, secret_key = fields.get("accessKey"), fields.get("secretKey")
            if access_key is None or secret_key is None or len(access_key) <= MIN_KEY_LENGTH \
                    or len(secret_key) <= MIN_KEY_LENGTH:
                raise ValueError(f"The accessKey={access_key} and secretKey={secret_key} cannot be null "
                                 f"and length should longer than {MIN_KEY_LENGTH}")
            account = config.accounts.get(access_key) or Account(access_key, secret_key)
            account.secret_key = secret_key
            white = fields.get("whiteRemoteAddress")
            if white is not None:
                try:
                    account.white = address_patterns(white, "whiteRemoteAddress")
                except ValueError:
                    raise ValueError(f"Netaddress examine Exception netaddress is {white}") from None
                account.white_remote_address = white
            if fields.get("admin") is not None:
                account.admin = fields["admin"].strip().lower() == "true"
            for key in ("defaultTopicPerm", "defaultGroupPerm"):
                if fields.get(key) is not None:
                    _check_perm_text(fields[key], fields[key])
                    setattr(account, "default_topic_perm" if key == "defaultTopicPerm" else "default_group_perm",
                            parse_perm(fields[key]))
            topic_perms, group_perms = account.topic_perms, account.group_perms
            if fields.get("topicPerms") is not None:
                topic_perms = _perm_list(fields["topicPerms"])
            if fields.get("groupPerms") is not None:
                group_perms = _perm_list(fields["groupPerms"])
            account.set_perms(topic_perms, group_perms)
            config.accounts[access_key] = account

        return await self._answer(request, change, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED)

    async def delete_account(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        access_key = (request.ext_fields or {}).get("accessKey")

        def change(config: AclConfig) -> None:
            if access_key is None or config.accounts.pop(access_key, None) is None:
                raise ValueError(f"The accesskey[{access_key}] corresponding to accessConfig has been "
                                 "deleted failed.")

        return await self._answer(request, change, ResponseCode.DELETE_ACL_CONFIG_FAILED)

    async def update_global_white(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        text = (request.ext_fields or {}).get("globalWhiteAddrs") or ""

        def change(config: AclConfig) -> None:
            white = [w.strip() for w in text.split(",") if w.strip()]
            try:
                config.global_patterns = address_patterns(white, "globalWhiteAddrs")
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            config.global_white = white

        return await self._answer(request, change, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)

    async def _answer(self, request: RemotingCommand, change: Callable[[AclConfig], None],
                      failure: int) -> RemotingCommand:
        try:
            await self._change(change)
        except ValueError as exc:
            log.info("ACL change refused: %s", quote(str(exc)))
            return create_response(request, failure, str(exc))
        except OSError as exc:
            log.error("writing the ACL file %s failed: %s", self.acl_file.path, exc)
            return create_response(request, failure, f"writing {self.acl_file.path} failed: {exc}")
        return create_response(request, ResponseCode.SUCCESS)

    def acl_info(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        config = self.acl_file.current()
        cluster, broker, address = self.identity()
        version = orjson.dumps(config.version_json()).decode()
        return create_response(request, ResponseCode.SUCCESS, ext_fields={
            "version": version,
            "allAclFileVersion": orjson.dumps({self.acl_file.path: config.version_json()}).decode(),
            "brokerAddr": address, "brokerName": broker, "clusterName": cluster})


def _check_perm_text(text: str, entry: str) -> None:
    if text.strip().upper() not in ("PUB", "SUB", "PUB|SUB", "SUB|PUB", "DENY"):
        raise ValueError(f"Parse resource permission error for {entry}.\nThe expected permissions are "
                         "'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")


def _perm_list(text: str) -> list[str]:
    entries = [e.strip() for e in text.split(",") if e.strip()]
    for entry in entries:
        _check_perm_text(entry.partition("=")[2], entry)
    return entries

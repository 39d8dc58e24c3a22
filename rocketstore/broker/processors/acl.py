"""The ACL admin codes on a broker without ACL: rocketstore has none, so it answers as RocketMQ
4.9.8 does with ``aclEnable=false``, whose AdminBrokerProcessor fails each change with its
code's failure: UPDATE_AND_CREATE_ACL_CONFIG 50 -> UPDATE_AND_CREATE_ACL_CONFIG_FAILED 209,
DELETE_ACL_CONFIG 51 -> DELETE_ACL_CONFIG_FAILED 210, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53 ->
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED 211 (RocketMQ's remark is the text of the
NullPointerException behind it; here it says why). GET_BROKER_CLUSTER_ACL_INFO 52 and
GET_BROKER_CLUSTER_ACL_CONFIG 54 get SYSTEM_ERROR, where RocketMQ's broker never answers (the
same exception escapes its processor and mqadmin waits out its timeout).
"""

from __future__ import annotations

from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)

ACL_NOT_ENABLED = "ACL is not enabled on this broker (rocketstore has no ACL: RocketMQ's aclEnable=false)"

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

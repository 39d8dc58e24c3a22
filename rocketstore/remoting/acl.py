"""RocketMQ 4.x plain ACL's request signature, on both ends (AclClientRPCHook, AclUtils,
AclSigner, PlainAccessValidator.parse).

A signed request carries ``AccessKey``, ``Signature`` and, optionally, ``SecurityToken`` among
its extFields. The signature is base64(HmacSHA1(secretKey, content)), where content is the
values of every extField except ``Signature`` and ``_UNIQUE_KEY_QUERY``, in the order of their
names (Java's TreeMap), joined, as UTF-8, followed by the body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.json_header import normalize_ext

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
#: MixAll.UNIQUE_MSG_QUERY_FLAG: added after signing by mqadmin's queryMsgByUniqueKey
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
_UNSIGNED = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))


def combine_request_content(fields: Mapping[str, str], body: bytes | None) -> bytes:
    """AclUtils.combineRequestContent over the fields a signature covers."""
    text = "".join(fields[name] for name in sorted(fields) if name not in _UNSIGNED)
    content = text.encode("utf-8", "surrogatepass")
    return content + body if body else content


def calculate_signature(content: bytes, secret_key: str) -> str:
    """AclSigner.calSignature: base64(HmacSHA1(secret_key, content))."""
    digest = hmac.new(secret_key.encode("utf-8", "surrogatepass"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True)
class SessionCredentials:
    """An account's keys (RocketMQ's SessionCredentials)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key:
            raise ValueError("access_key must not be empty")
        if not self.secret_key:
            raise ValueError("secret_key must not be empty")

    def sign(self, request: RemotingCommand) -> None:
        """Add AccessKey, SecurityToken (when set) and Signature to ``request`` (AclClientRPCHook)."""
        fields = normalize_ext(request.ext_fields or {})
        fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            fields[SECURITY_TOKEN] = self.security_token
        fields.pop(SIGNATURE, None)
        body = request.body_bytes() if request.body_length else None
        fields[SIGNATURE] = calculate_signature(combine_request_content(fields, body), self.secret_key)
        request.ext_fields = fields

    def __call__(self, request: RemotingCommand) -> None:
        self.sign(request)

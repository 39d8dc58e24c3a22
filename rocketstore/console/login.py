"""Login with the accounts of a plain ACL file (``--acl-file``, the brokers' plain_acl.yml).

A person signs in with an account's accessKey and secretKey; the console then signs the
requests it makes for them with that account, so the brokers' ACL decides what they may see
and change (an account without admin cannot create topics, as with mqadmin). The session is a
cookie holding the accessKey, its expiry and an HMAC-SHA256 of both under a key made at
start (a restart signs everybody out); it is HttpOnly and SameSite=Strict, which keeps other
sites from posting the console's forms with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "rocketstore_console"
SESSION_S = 12 * 3600
#: paths served without a session: the login page and what it loads
OPEN_PATHS = ("/login", "/static/", "/favicon.ico")


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str


def load_accounts(path: str | os.PathLike[str]) -> dict[str, Account]:
    """The accounts of a plain_acl.yml; ValueError names the file and what is wrong."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--acl-file {path}: {exc}") from None
    accounts: dict[str, Account] = {}
    for index, item in enumerate((data or {}).get("accounts") or []):
        access_key = str((item or {}).get("accessKey") or "")
        secret_key = str((item or {}).get("secretKey") or "")
        if not access_key or not secret_key:
            raise ValueError(f"--acl-file {path}: account {index} has no accessKey or secretKey")
        accounts[access_key] = Account(access_key, secret_key)
    if not accounts:
        raise ValueError(f"--acl-file {path}: no accounts")
    return accounts


class Sessions:
    """Signs and checks session cookies."""

    def __init__(self, accounts: dict[str, Account], key: bytes | None = None) -> None:
        self.accounts = accounts
        self.key = key or os.urandom(32)

    def _mac(self, access_key: str, expires: int) -> str:
        digest = hmac.new(self.key, f"{access_key}\n{expires}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def check_password(self, access_key: str, secret_key: str) -> Account | None:
        account = self.accounts.get(access_key)
        if account is None or not hmac.compare_digest(account.secret_key.encode(), secret_key.encode()):
            return None
        return account

    def cookie(self, account: Account, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + SESSION_S)
        user = base64.urlsafe_b64encode(account.access_key.encode()).decode().rstrip("=")
        return f"{user}.{expires}.{self._mac(account.access_key, expires)}"

    def account_of(self, cookie: str | None, now: float | None = None) -> Account | None:
        """The account of a valid, unexpired cookie."""
        if not cookie or cookie.count(".") != 2:
            return None
        user, expires_text, mac = cookie.split(".")
        try:
            access_key = base64.urlsafe_b64decode(user + "=" * (-len(user) % 4)).decode()
            expires = int(expires_text)
        except ValueError:
            return None
        if expires < (time.time() if now is None else now):
            return None
        if not hmac.compare_digest(mac, self._mac(access_key, expires)):
            return None
        return self.accounts.get(access_key)


class LoginRequired:
    """ASGI middleware: a request without a valid session goes to /login (a page), or gets
    401 (anything else); the account is put in ``scope["state"]["account"]``."""

    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope["path"]).startswith(OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        account = self.sessions.account_of(request.cookies.get(COOKIE))
        if account is None:
            response: Response
            if request.method == "GET":
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                response = RedirectResponse(f"/login?next={_quote(target)}", status_code=303)
            else:
                response = Response("sign in first", status_code=401)
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["account"] = account
        await self.app(scope, receive, send)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="/")


def safe_next(target: str) -> str:
    """Where to go after signing in: a path of this console only."""
    return target if target.startswith("/") and not target.startswith("//") else "/cluster"



"""The console's parts that need no cluster: its command line, sessions, the ACL file, the
message views and the charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("starlette", reason="the console needs starlette: pip install 'rocketstore[console]'")

from rocketstore.cli import main  # noqa: E402
from rocketstore.console.charts import line_chart  # noqa: E402
from rocketstore.console.login import Account, Sessions, load_accounts, safe_next  # noqa: E402
from rocketstore.console.messages import body_hex, body_text, parse_time  # noqa: E402
from rocketstore.console.startup import parse_listen  # noqa: E402


def test_listen_and_key_options_are_checked() -> None:
    assert parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_listen("[::1]:0") == ("::1", 0)
    for bad in ("8080", "host:", ":80", "h:99999", "h:x"):
        with pytest.raises(ValueError, match="--listen"):
            parse_listen(bad)
    result = CliRunner().invoke(main, ["console", "--listen", "nowhere"])
    assert result.exit_code == 2 and "--listen must be host:port" in result.output
    result = CliRunner().invoke(main, ["console", "--access-key", "a"], env={"ROCKETSTORE_SECRET_KEY": ""})
    assert result.exit_code == 2 and "go together" in result.output


def test_sessions_sign_expire_and_refuse_forgeries() -> None:
    sessions = Sessions({"ak": Account("ak", "sk")}, key=b"k" * 32)
    assert sessions.check_password("ak", "sk") == Account("ak", "sk")
    assert sessions.check_password("ak", "SK") is None and sessions.check_password("x", "sk") is None
    cookie = sessions.cookie(Account("ak", "sk"), now=1000.0)
    assert sessions.account_of(cookie, now=1001.0) == Account("ak", "sk")
    assert sessions.account_of(cookie, now=1000.0 + 13 * 3600) is None          # expired
    user, expires, mac = cookie.split(".")
    assert sessions.account_of(f"{user}.{int(expires) + 3600}.{mac}", now=1001.0) is None
    assert sessions.account_of(cookie.replace(user, "eHg"), now=1001.0) is None   # another user
    assert Sessions(sessions.accounts, key=b"o" * 32).account_of(cookie, now=1001.0) is None
    for junk in (None, "", "a.b", "a.b.c.d", "!!.x.y"):
        assert sessions.account_of(junk, now=1001.0) is None
    assert safe_next("/groups/G?x=1") == "/groups/G?x=1"
    assert safe_next("//evil.example/") == "/cluster" and safe_next("https://x/") == "/cluster"


def test_the_acl_file_is_read_and_its_faults_named(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text('accounts:\n  - accessKey: a\n    secretKey: "1"\n  - accessKey: b\n    secretKey: "2"\n')
    assert load_accounts(path) == {"a": Account("a", "1"), "b": Account("b", "2")}
    path.write_text("accounts:\n  - accessKey: a\n")
    with pytest.raises(ValueError, match="account 0 has no accessKey or secretKey"):
        load_accounts(path)
    path.write_text("globalWhiteRemoteAddresses: []\n")
    with pytest.raises(ValueError, match="no accounts"):
        load_accounts(path)
    with pytest.raises(ValueError, match="--acl-file"):
        load_accounts(tmp_path / "missing.yml")


def test_bodies_times_and_charts() -> None:
    assert body_text("é".encode()) == "é" and body_text(b"\xff") is None
    assert body_hex(bytes(range(18))).splitlines() == [
        "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  ................",
        "00000010  10 11                                            .."]
    assert parse_time("1700000000000", "begin") == 1_700_000_000_000
    assert parse_time("2026-01-02T03:04", "end") > 0
    with pytest.raises(ValueError, match="^end must be"):
        parse_time("yesterday", "end")
    assert "collecting samples" in line_chart("lag", [(1.0, 5.0)])
    svg = line_chart("<lag>", [(0.0, 0.0), (10.0, 2000.0)])
    assert "&lt;lag&gt;" in svg and "2.0k" in svg and svg.count("<polyline") == 1


def _asgi(app: object, method: str, path: str, body: bytes = b"") -> tuple[int, str]:
    """One request through the ASGI app, without a server or its lifespan (nothing is asked
    of a cluster): (status, body text)."""
    import asyncio

    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": b"", "client": ("127.0.0.1", 1), "server": ("test", 80),
             "headers": [(b"host", b"test"), (b"content-type", b"application/x-www-form-urlencoded")]}

    bodies = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if bodies:
            return bodies.pop()
        await asyncio.sleep(3600)       # a client that stays: no disconnect
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))  # type: ignore[operator]
    status = next(int(m["status"]) for m in sent if m["type"] == "http.response.start")
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, text.decode()


def test_a_store_s_console_refuses_every_post_and_names_its_broker_after_the_directory() -> None:
    from rocketstore.console.app import ConsoleSettings, create_app
    from rocketstore.console.embedded import broker_name_for

    app = create_app(ConsoleSettings(namesrv_addr="127.0.0.1:1", store_path="/data/orders",
                                     store_broker_addr="127.0.0.1:2"))
    for path in ("/topics", "/topics/T/delete", "/groups/G/reset", "/dlq/resend", "/nowhere"):
        status, text = _asgi(app, "POST", path, b"topic=T&cluster=C")
        assert status == 403, path
        assert "The store /data/orders is opened read-only" in text
    assert _asgi(app, "GET", "/static/console.css")[0] == 200
    plain = create_app(ConsoleSettings(namesrv_addr="127.0.0.1:1"))
    assert _asgi(plain, "POST", "/dlq/resend", b"group=G")[0] == 400      # checked, not refused

    assert broker_name_for("/data/orders-store/") == "orders-store"
    assert broker_name_for("/data/my store@2024") == "my-store-2024"
    assert broker_name_for("/") == "broker-a"

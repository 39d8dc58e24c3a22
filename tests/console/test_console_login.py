"""The console with --acl-file against a broker with plain ACL on: pages need a signed-in
account, and the console signs the requests it makes for a person with their account, so the
broker's ACL decides (an account without admin cannot create a topic)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from cluster import Cluster
from console_helpers import Console, click_and_wait, save_screenshot, start_console

pytestmark = pytest.mark.slow

ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: rocketmq2
    secretKey: "87654321"
    admin: true
"""


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("console-login")
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(ACL)
    c = Cluster(root)
    try:
        c.start_namesrv()
        c.start_broker("broker-a", aclEnable="true", aclFile=str(acl_file))
        console = start_console(c.namesrv_addr, "--acl-file", str(acl_file))
        try:
            yield console
        finally:
            console.stop()
    finally:
        c.close()


def _sign_in(driver: Any, console: Console, access_key: str, secret_key: str) -> str:
    form = driver.find_element("id", "login")
    form.find_element("name", "accessKey").send_keys(access_key)
    form.find_element("name", "secretKey").send_keys(secret_key)
    click_and_wait(driver, form.find_element("css selector", "button"))
    text: str = driver.find_element("tag name", "body").text
    return text


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def test_pages_need_an_account_and_requests_are_signed_with_it(console: Console, browser: Any) -> None:
    browser.delete_all_cookies()
    browser.get(console.url + "/topics")
    assert browser.current_url.startswith(console.url + "/login?next=/topics")
    save_screenshot(browser, "login")
    assert "wrong accessKey or secretKey" in _sign_in(browser, console, "RocketMQ", "nope")
    assert not browser.get_cookies()

    text = _sign_in(browser, console, "RocketMQ", "12345678")
    assert browser.current_url == console.url + "/topics"        # where it was going
    assert "RocketMQ" in browser.find_element("id", "user").text and "Topics" in text
    assert not _errors(browser)
    browser.get(console.url + "/cluster")
    assert "broker-a" in browser.find_element("id", "brokers").text
    assert not _errors(browser)

    # not an admin account: the broker refuses the topic's creation
    browser.get(console.url + "/topics")
    form = browser.find_element("id", "create-topic")
    form.find_element("name", "topic").send_keys("LoginCreated")
    click_and_wait(browser, form.find_element("css selector", "button[type=submit]"))
    assert "16" in browser.find_element("id", "error").text    # NO_PERMISSION, RocketMQ's remark
    assert [e["message"] for e in _errors(browser)] == [
        f"{console.url}/topics - Failed to load resource: the server responded with a status of 502 (Bad Gateway)"]

    browser.get(console.url + "/cluster")
    click_and_wait(browser, browser.find_element("css selector", "form.user button"))
    assert browser.current_url.startswith(console.url + "/login")
    browser.get(console.url + "/topics")
    _sign_in(browser, console, "rocketmq2", "87654321")
    form = browser.find_element("id", "create-topic")
    form.find_element("name", "topic").send_keys("LoginCreated")
    click_and_wait(browser, form.find_element("css selector", "button[type=submit]"))
    assert "created or updated" in browser.find_element("id", "notice").text
    assert not _errors(browser)


def test_a_change_without_a_session_is_refused(console: Console) -> None:
    request = urllib.request.Request(console.url + "/topics", data=b"topic=Nope&cluster=TestCluster",
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    forged = urllib.request.Request(console.url + "/topics", data=b"topic=Nope&cluster=TestCluster",
                                    method="POST", headers={"Cookie": "rocketstore_console=cm9ja2V0bXEy.9999999999.AAAA"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, timeout=10)
    assert refused.value.code == 401

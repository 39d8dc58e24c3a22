"""The web console in a real headless browser against a live name server and broker with
data: every page loads, search finds a message by id and by key, creating a topic, resetting
a group's offsets and resending a dead letter work, and the browser logs no error. The
screenshots it saves are the README's (docs/console-*.png)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from cluster import cluster, wait_for
from console_helpers import Console, click_and_wait, save_screenshot, start_console
from ports import free_port

from rocketstore.client import (
    AdminClient,
    ConsumeStatus,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
)

pytestmark = pytest.mark.slow

TOPIC = "ConsoleOrders"
GROUP = "ConsoleCG"
DLQ_GROUP = "ConsoleDLQ"
FAST = {"rebalance_interval": 1_000, "persist_consumer_offset_interval": 500,
        "poll_name_server_interval": 1_000, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}


class Site:
    """A live cluster with data, its console and what was sent."""

    def __init__(self, namesrv: str, console: Console, sent: list[Any]) -> None:
        self.namesrv = namesrv
        self.console = console
        self.sent = sent


def _consume_all(namesrv: str, group: str, count: int, status: ConsumeStatus, **options: Any) -> list[Any]:
    got: list[Any] = []
    consumer = PushConsumer(group, namesrv_addr=namesrv, **FAST, **options)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(lambda msgs: got.extend(msgs) or status)
    consumer.start()
    try:
        assert wait_for(lambda: len(got) >= count, 60), f"{group} got {len(got)} of {count}"
        time.sleep(1.5)        # its offsets committed (every 500 ms)
    finally:
        consumer.shutdown()
    return got


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("console")
    with cluster(root, brokers=()) as c:
        ns = c.namesrv_addr
        c.start_broker("broker-a", haListenPort=free_port())
        # a slave of broker-a: the cluster page shows how far behind it is
        c.start_broker("broker-a-slave", brokerName="broker-a", brokerId=1, brokerRole="SLAVE",
                       haListenPort=free_port())
        with AdminClient(namesrv_addr=ns) as admin:
            admin.update_topic(TOPIC, cluster="TestCluster", read_queue_nums=4, write_queue_nums=4)
        with Producer("ConsolePG", namesrv_addr=ns) as producer:
            sent = [producer.send(Message(TOPIC, f"order {i} paid".encode(), tags="paid", keys=[f"ord-{i}"]))
                    for i in range(20)]
            sent.append(producer.send(Message(TOPIC, bytes(range(200, 256)), tags="raw", keys=["binary-1"])))
            sent.append(producer.send(Message(TOPIC, b"<b>not bold</b>", tags="html", keys=["html-1"])))
        _consume_all(ns, GROUP, len(sent), ConsumeStatus.SUCCESS)
        # maxReconsumeTimes 0: the first failure sends a message to %DLQ%<group>
        _consume_all(ns, DLQ_GROUP, len(sent), ConsumeStatus.RECONSUME_LATER, max_reconsume_times=0)
        with AdminClient(namesrv_addr=ns) as admin:
            assert wait_for(lambda: sum(r["maxOffset"] for r in admin.topic_status("%DLQ%" + DLQ_GROUP)) == len(sent), 30)
        console = start_console(ns, "--sample-interval", "1")
        try:
            yield Site(ns, console, sent)
        finally:
            console.stop()


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def _open(driver: Any, site: Site, path: str, shot: str | None = None) -> str:
    driver.get(site.console.url + path)
    text: str = driver.find_element("tag name", "body").text
    assert "Error" not in driver.title, f"{path}: {text[:500]}"
    assert not _errors(driver), f"{path}: the browser logged {_errors(driver)}"
    if shot:
        save_screenshot(driver, shot)
    return text


def _submit(driver: Any, form_id: str, confirm: bool = False) -> None:
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.find_element("css selector", f"#{form_id} button[type=submit]").click()
    if confirm:
        WebDriverWait(driver, 10).until(expected_conditions.alert_is_present()).accept()
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete"
                                    and d.find_elements("id", "notice") + d.find_elements("id", "error"))


def test_every_page_loads_with_the_cluster_s_data(site: Site, browser: Any) -> None:
    text = _open(browser, site, "/cluster")
    assert "broker-a" in text and "MASTER" in text and "V4_9_8" in text and "1 slave(s)" in text

    def slave_row() -> str:
        _open(browser, site, "/cluster")
        return next(r.text for r in browser.find_elements("css selector", "#brokers tbody tr") if "SLAVE" in r.text)
    assert wait_for(lambda: "0 bytes behind" in slave_row(), 30), slave_row()
    time.sleep(2.5)            # two samples for the TPS charts
    _open(browser, site, "/cluster", "cluster")
    assert browser.find_elements("css selector", "svg.chart polyline")

    text = _open(browser, site, "/topics", "topics")
    row = next(r.text for r in browser.find_elements("css selector", "#topics tbody tr") if TOPIC in r.text)
    assert row.split()[-5:-3] == ["4", str(len(site.sent))]      # queues, messages

    text = _open(browser, site, f"/topics/{TOPIC}", "topic")
    assert f"{len(site.sent)} messages" in text and GROUP in text and DLQ_GROUP in text

    text = _open(browser, site, "/groups", "groups")
    assert GROUP in text and DLQ_GROUP in text

    text = _open(browser, site, f"/groups/{GROUP}", "group")
    assert "Not online" in text
    progress = [r.text.split() for r in browser.find_elements("css selector", "#progress tbody tr")]
    rows = [r for r in progress if r[0] == TOPIC]      # and a row of its retry topic
    assert len(rows) == 4 and sum(int(r[4]) for r in rows) == len(site.sent)
    assert all(r[5] == "0" for r in rows)              # broker offset, consumer offset, lag

    text = _open(browser, site, "/dlq", "dlq")
    assert DLQ_GROUP in text
    _open(browser, site, "/messages")


def test_search_finds_a_message_by_id_and_by_key(site: Site, browser: Any) -> None:
    target = site.sent[7]
    text = _open(browser, site, f"/messages?id={target.offset_msg_id}", "message")
    assert "order 7 paid" in text and "ord-7" in text and target.msg_id in text
    # its consumption trace: GROUP consumed it, the DLQ group's offsets are past it too
    trace = {r.text.split()[0]: r.text for r in browser.find_elements("css selector", "#trace tbody tr")}
    assert "CONSUMED" in trace[GROUP]

    # the client's message id needs the topic
    text = _open(browser, site, f"/messages?id={target.msg_id}&topic={TOPIC}")
    assert "order 7 paid" in text

    text = _open(browser, site, f"/messages?topic={TOPIC}&key=ord-7", "search-key")
    rows = browser.find_elements("css selector", "#results tbody tr")
    assert len(rows) == 1 and target.msg_id in rows[0].text

    # the key search through its form, then the result's own page with the body in hex
    browser.get(site.console.url + "/messages")
    form = browser.find_element("id", "search-key")
    form.find_element("name", "topic").send_keys(TOPIC)
    form.find_element("name", "key").send_keys("binary-1")
    click_and_wait(browser, form.find_element("css selector", "button"))
    click_and_wait(browser, browser.find_element("css selector", "#results tbody a"))
    assert "c8 c9 ca cb" in browser.find_element("id", "body").text        # not UTF-8: hex
    assert not _errors(browser)

    _open(browser, site, f"/messages/{site.sent[-1].offset_msg_id}")
    assert browser.find_element("id", "body").text == "<b>not bold</b>"       # escaped, shown as sent
    assert not browser.find_elements("css selector", "#body b")

    text = _open(browser, site, f"/messages?topic={TOPIC}&broker=broker-a&queue={target.message_queue.queue_id}"
                                f"&offset={target.queue_offset}")
    assert "order 7 paid" in text
    _open(browser, site, f"/messages?topic={TOPIC}&broker=broker-a&queue=0&offset=1000")
    assert browser.find_element("id", "not-found").text == "No message there."
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 600))
    _open(browser, site, f"/messages?topic={TOPIC}&begin={quote(since)}")
    assert browser.find_element("id", "results-title").text == f"{len(site.sent)} message(s)"


def test_creating_updating_and_deleting_a_topic(site: Site, browser: Any) -> None:
    _open(browser, site, "/topics")
    form = browser.find_element("id", "create-topic")
    form.find_element("name", "topic").send_keys("ConsoleCreated")
    queues = form.find_element("name", "writeQueueNums")
    queues.clear()
    queues.send_keys("3")
    _submit(browser, "create-topic")
    assert "created or updated" in browser.find_element("id", "notice").text
    assert not _errors(browser)
    with AdminClient(namesrv_addr=site.namesrv) as admin:
        assert wait_for(lambda: "ConsoleCreated" in admin.topic_list(), 10)
        (queue_data,) = admin.topic_route("ConsoleCreated")["queueDatas"]
        assert queue_data["writeQueueNums"] == 3 and queue_data["readQueueNums"] == 8

        # its page: read only, then gone
        from selenium.webdriver.support.ui import Select
        _open(browser, site, "/topics/ConsoleCreated")
        Select(browser.find_element("css selector", "#update-topic select[name=perm]")).select_by_value("4")
        _submit(browser, "update-topic")
        assert wait_for(lambda: admin.topic_route("ConsoleCreated")["queueDatas"][0]["perm"] == 4, 10)
        _submit(browser, "delete-topic", confirm=True)
        assert "deleted" in browser.find_element("id", "notice").text
        assert not _errors(browser)
        assert "ConsoleCreated" not in admin.topic_list()


def test_resetting_a_group_s_offsets(site: Site, browser: Any) -> None:
    with AdminClient(namesrv_addr=site.namesrv) as admin:
        before = admin.consumer_progress(GROUP, TOPIC)
        assert before["diffTotal"] == 0
        from selenium.webdriver.support.ui import Select
        _open(browser, site, f"/groups/{GROUP}")
        Select(browser.find_element("css selector", "#reset-offsets select[name=topic]")).select_by_visible_text(TOPIC)
        browser.execute_script("document.querySelector('#reset-offsets input[name=time]').value = arguments[0]",
                               "2000-01-01T00:00:00")
        _submit(browser, "reset-offsets", confirm=True)
        assert "reset" in browser.find_element("id", "notice").text
        assert not _errors(browser)
        notice = browser.find_element("id", "notice").text
        after = admin.consumer_progress(GROUP, TOPIC)
        assert [r["consumerOffset"] for r in after["offsetTable"]] == [0, 0, 0, 0], notice
        assert after["diffTotal"] == len(site.sent)
    text = browser.find_element("tag name", "body").text
    assert f"lag {len(site.sent)}" in text


def test_resending_a_dead_letter(site: Site, browser: Any) -> None:
    _open(browser, site, f"/dlq?group={DLQ_GROUP}", "dlq-group")
    rows = browser.find_elements("css selector", "#dlq-messages tbody tr")
    assert len(rows) == len(site.sent)
    first = rows[0]
    msg_id = first.text.split()[0]
    click_and_wait(browser, first.find_element("css selector", "form.resend button"))
    assert "SEND_OK" in browser.find_element("id", "notice").text, browser.find_element("tag name", "body").text
    assert not _errors(browser)
    # the group, and only it, gets the message again, under its original topic
    got: list[Any] = []
    consumer = PushConsumer(DLQ_GROUP, namesrv_addr=site.namesrv, **FAST)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(lambda msgs: got.extend(msgs) or ConsumeStatus.SUCCESS)
    consumer.start()
    try:
        assert wait_for(lambda: any(m.msg_id == msg_id for m in got), 60), [m.msg_id for m in got]
    finally:
        consumer.shutdown()
    again = next(m for m in got if m.msg_id == msg_id)
    assert again.topic == TOPIC and again.keys and again.keys[0].startswith(("ord-", "binary", "html"))
    with AdminClient(namesrv_addr=site.namesrv) as admin:
        assert admin.consumer_progress(GROUP, TOPIC)["diffTotal"] == len(site.sent)   # GROUP untouched
        assert isinstance(admin.queues(TOPIC)[0], MessageQueue)


def test_bad_input_is_a_page_naming_the_field(site: Site, browser: Any) -> None:
    browser.get(site.console.url + "/messages?topic=" + TOPIC + "&broker=broker-a&queue=x&offset=1")
    assert "queue must be an integer" in browser.find_element("id", "error").text
    browser.get(site.console.url + "/topics?page=99")
    assert "page must be in" in browser.find_element("id", "error").text

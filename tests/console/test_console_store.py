"""``rocketstore console --store PATH``: a store written by the embedded MessageStore API, shown
read-only in a real headless browser. Every page loads, search finds a message by key, id and
queue offset, no page offers a control that changes anything, a POST is refused with a page
saying so, the browser logs no error, and afterwards every file of the store is byte for byte
as it was (and the name server and broker the console started are gone)."""

from __future__ import annotations

import hashlib
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster import CHILD_CWD, child_env
from console_helpers import Console, require_console, save_screenshot, start_console

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store import commit_group_offsets

TOPIC = "StoreOrders"
GROUP = "StoreCG"
DLQ_GROUP = "StoreDLQ"
SERVING = re.compile(r"Serving store .* read-only: name server (\S+), broker (\S+)")
#: forms and controls of the pages that change a cluster (topics, offsets, dead letters)
WRITE_CONTROLS = "form[method=post], #create-topic, #update-topic, #delete-topic, #reset-offsets, form.resend"


def file_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def write_store(root: Path) -> list[Any]:
    """Orders with keys over 3 queues, a binary body, dead letters of a group, and the
    committed offsets of a group: what the embedded API writes."""
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 20,
                         mapped_file_size_consume_queue=20 * 1000)
    with MessageStore.open(root, config) as store:
        results = [store.put_message(Message(topic=TOPIC, body=f"order {i} paid".encode(), tags="paid",
                                             keys=[f"ord-{i}"]), queue_id=i % 3) for i in range(20)]
        results.append(store.put_message(Message(topic=TOPIC, body=bytes(range(200, 256)), tags="raw",
                                                 keys=["binary-1"]), queue_id=0))
        for i in range(3):
            store.put_message(Message(topic="%DLQ%" + DLQ_GROUP, body=f"dead {i}".encode(),
                                      keys=[f"dead-{i}"]), queue_id=0)
    commit_group_offsets(root, GROUP, {(TOPIC, 0): 7, (TOPIC, 1): 3, (TOPIC, 2): 0})
    return results


class StoreSite:
    def __init__(self, root: Path, console: Console, results: list[Any], before: dict[str, str]) -> None:
        self.root = root
        self.console = console
        self.results = results
        self.before = before


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, int(port))) == 0


@pytest.fixture(scope="module")
def store_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreSite]:
    root = tmp_path_factory.mktemp("console-store") / "orders-store"
    results = write_store(root)
    before = file_hashes(root)
    console = start_console(None, "--store", str(root), "--sample-interval", "1", timeout=300)
    try:
        yield StoreSite(root, console, results, before)
    finally:
        console.stop()


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def _open(driver: Any, site: StoreSite, path: str, shot: str | None = None) -> str:
    driver.get(site.console.url + path)
    text: str = driver.find_element("tag name", "body").text
    assert "Error" not in driver.title, f"{path}: {text[:500]}"
    assert not _errors(driver), f"{path}: the browser logged {_errors(driver)}"
    assert driver.find_element("id", "read-only").text.startswith(f"Store {site.root} is opened read-only")
    assert not driver.find_elements("css selector", WRITE_CONTROLS), f"{path} offers a control that writes"
    if shot:
        save_screenshot(driver, shot)
    return text


@pytest.mark.slow
def test_every_page_of_a_store_loads_read_only_and_its_files_stay_as_they_were(
        store_site: StoreSite, browser: Any) -> None:
    site = store_site
    text = _open(browser, site, "/cluster")
    assert "orders-store" in text and "MASTER" in text

    _open(browser, site, "/topics")
    row = next(r.text for r in browser.find_elements("css selector", "#topics tbody tr") if TOPIC in r.text)
    assert row.split()[-5:-3] == ["3", "21"]       # queues, messages
    text = _open(browser, site, f"/topics/{TOPIC}", "store-topic")
    assert "21 messages" in text and GROUP in text

    text = _open(browser, site, "/groups")
    assert GROUP in text
    _open(browser, site, f"/groups/{GROUP}")
    progress = [r.text.split() for r in browser.find_elements("css selector", "#progress tbody tr")]
    # broker offset, consumer offset and lag of each queue (8, 7 and 6 messages)
    assert sorted((int(r[3]), int(r[4]), int(r[5])) for r in progress if r[0] == TOPIC) == [
        (6, 0, 6), (7, 3, 4), (8, 7, 1)]

    text = _open(browser, site, "/dlq")
    assert DLQ_GROUP in text
    text = _open(browser, site, f"/dlq?group={DLQ_GROUP}")
    assert len(browser.find_elements("css selector", "#dlq-messages tbody tr")) == 3
    _open(browser, site, "/messages")

    # search: by key, by the offset id the store wrote (its store host is not this broker's
    # address: the console asks the store's broker), by queue offset, by time
    target = site.results[7]
    _open(browser, site, f"/messages?topic={TOPIC}&key=ord-7", "store-search-key")
    rows = browser.find_elements("css selector", "#results tbody tr")
    assert len(rows) == 1 and "ord-7" in rows[0].text
    text = _open(browser, site, f"/messages?id={target.msg_id}")
    assert "order 7 paid" in text and "ord-7" in text
    text = _open(browser, site, f"/messages/{site.results[-1].msg_id}")
    assert "c8 c9 ca cb" in browser.find_element("id", "body").text
    text = _open(browser, site, f"/messages?topic={TOPIC}&broker=orders-store&queue=1&offset=2")
    assert "order 7 paid" in text
    _open(browser, site, f"/messages?topic={TOPIC}&begin=2000-01-01T00:00:00")
    assert browser.find_element("id", "results-title").text == "21 message(s)"

    # a POST made by hand is refused with a page saying why; nothing changes
    for path, form in (("/topics", b"topic=Fresh&cluster=DefaultCluster&readQueueNums=8&writeQueueNums=8"),
                       (f"/topics/{TOPIC}/delete", b"cluster=DefaultCluster"),
                       (f"/groups/{GROUP}/reset", f"topic={TOPIC}&time=".encode()),
                       ("/dlq/resend", b"group=" + DLQ_GROUP.encode() + b"&id=" + target.msg_id.encode())):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(site.console.url + path, data=form), timeout=30)
        assert refused.value.code == 403
        assert "is opened read-only" in refused.value.read().decode()
    _open(browser, site, "/topics")
    assert "Fresh" not in browser.find_element("id", "topics").text

    output = "".join(site.console.output)
    match = SERVING.search(output)
    assert match, output[-2000:]
    namesrv, broker = match.groups()
    site.console.stop()
    assert site.console.proc.returncode == 0, output[-2000:]
    assert not _listening(namesrv) and not _listening(broker)
    assert file_hashes(site.root) == site.before


def _console_exit(*args: str) -> subprocess.CompletedProcess[str]:
    require_console()
    return subprocess.run([sys.executable, "-m", "rocketstore.console", "--listen", "127.0.0.1:0", *args],
                          capture_output=True, text=True, timeout=180, env=child_env(), cwd=CHILD_CWD)


def test_a_directory_that_is_not_a_store_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    done = _console_exit("--store", str(tmp_path))
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines()[-1] == (
        f"console: --store {tmp_path}: {tmp_path} is not a store: it has no CommitLog directory "
        f"({tmp_path}/commitlog); readOnly=true serves an existing store")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]

    missing = tmp_path / "missing"
    done = _console_exit("--store", str(missing))
    assert done.returncode == 1 and done.stderr.strip() == f"console: --store {missing}: {missing} does not exist"

    done = _console_exit("--store", str(tmp_path), "-n", "127.0.0.1:9876")
    assert done.returncode == 2 and "give --store or --namesrv, not both" in done.stderr

"""The clients' API as a type checker sees it: AdminClient's blocking methods are real methods,
one per AsyncAdmin coroutine with the same parameters; the clients' keyword options are typed
(their TypedDicts hold the config dataclasses' fields); enumerated options take their enum or
one of its names, and mypy rejects a misspelt option or a bad name."""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rocketstore
from rocketstore.client import AdminClient
from rocketstore.client.admin import AsyncAdmin
from rocketstore.client.config import (
    ClientConfig,
    ProducerConfig,
    PullConsumerConfig,
    PushConsumerConfig,
)
from rocketstore.client.options import (
    ClientOptions,
    ProducerOptions,
    PullConsumerOptions,
    PushConsumerOptions,
)

PACKAGE_ROOT = Path(rocketstore.__file__).resolve().parents[1]

#: AsyncAdmin's coroutines that BlockingClient itself provides as blocking methods
LIFECYCLE = {"start", "shutdown"}


def _async_admin_coroutines() -> dict[str, object]:
    return {name: fn for name, fn in vars(AsyncAdmin).items()
            if not name.startswith("_") and inspect.iscoroutinefunction(fn)}


def test_admin_client_has_a_blocking_method_per_coroutine() -> None:
    coroutines = _async_admin_coroutines()
    assert len(coroutines) > 20
    for name, coroutine in coroutines.items():
        method = vars(AdminClient).get(name) if name not in LIFECYCLE else getattr(AdminClient, name)
        assert method is not None, f"AdminClient has no {name}()"
        assert not inspect.iscoroutinefunction(method), name
        if name in LIFECYCLE:
            continue
        want, got = inspect.signature(coroutine), inspect.signature(method)
        assert list(got.parameters.values()) == list(want.parameters.values()), name
        assert got.return_annotation == want.return_annotation, name
        assert inspect.getdoc(method) == inspect.getdoc(coroutine), name
    assert "__getattr__" not in vars(AdminClient)
    assert {n for n in dir(AdminClient) if not n.startswith("_")} >= set(coroutines)


@pytest.mark.parametrize("options, config, group", [
    (ClientOptions, ClientConfig, None),
    (ProducerOptions, ProducerConfig, "producer_group"),
    (PushConsumerOptions, PushConsumerConfig, "consumer_group"),
    (PullConsumerOptions, PullConsumerConfig, "consumer_group"),
])
def test_option_dicts_hold_the_config_fields(options: type, config: type, group: str | None) -> None:
    """Every field but the group (the constructors' first argument), and no other key."""
    fields = {f.name for f in dataclasses.fields(config)} - {group}
    assert not options.__required_keys__
    assert options.__optional_keys__ == fields, (
        f"missing: {sorted(fields - options.__optional_keys__)}, "
        f"extra: {sorted(options.__optional_keys__ - fields)}")


SNIPPET = """\
from rocketstore import BrokerRole, FlushDiskType, StoreConfig
from rocketstore.client import (
    AdminClient, ConsumeFromWhere, Message, Producer, PullConsumer, PushConsumer,
)

# right: these type-check
StoreConfig(flush_disk_type="SYNC_FLUSH", broker_role=BrokerRole.SLAVE)
StoreConfig(flush_disk_type=FlushDiskType.ASYNC_FLUSH, broker_role="SYNC_MASTER")
producer = Producer("g", namesrv_addr="127.0.0.1:9876", send_msg_timeout=3000)
PushConsumer("g", namesrv_addr="127.0.0.1:9876", consume_from_where="CONSUME_FROM_FIRST_OFFSET",
             message_model="BROADCASTING", consume_thread_max=4)
PullConsumer("g", consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, auto_commit=False)
admin = AdminClient("127.0.0.1:9876")
topics: list[str] = admin.topic_list()
written: list[str] = admin.update_topic("orders", cluster="DefaultCluster", write_queue_nums=8)

# wrong: each line below is one error
Producer("g", namesrv_adr="127.0.0.1:9876")  # error: option
StoreConfig(flush_disk_type="SYNC_FLUSHH")  # error: flush_disk_type
PushConsumer("g", message_model="CLUSTER")  # error: message_model
PullConsumer("g", consume_from_where="FIRST")  # error: consume_from_where
admin.update_topic("orders", clusterr="DefaultCluster")  # error: admin
count: int = admin.topic_list()  # error: admin result
"""


def test_mypy_catches_a_misspelt_option_and_a_bad_name(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy (in the test extras) is not installed")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    # a checkout built in place is found through MYPYPATH; an installed package (py.typed) is
    # found by mypy itself, which refuses site-packages in MYPYPATH
    env = dict(os.environ)
    if PACKAGE_ROOT.name != "site-packages":
        env["MYPYPATH"] = str(PACKAGE_ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / "mypy-cache"), "--python-version", "3.11", str(snippet)],
        capture_output=True, text=True, timeout=600, cwd=str(tmp_path), env=env)
    report = result.stdout + result.stderr
    error_lines = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines()
                          if ": error:" in line})
    lines = SNIPPET.splitlines()
    expected = [i + 1 for i, line in enumerate(lines) if "# error:" in line]
    assert error_lines == expected, textwrap.indent(report, "  ")
    assert '"namesrv_adr"' in report, report
    assert "SYNC_FLUSHH" in report, report

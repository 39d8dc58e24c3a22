"""The name server as a process (``python -m rocketstore.namesrv``), and the real RocketMQ C++
client (``rocketmq`` 0.4.4 on PyPI) fetching a route from it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import namesrv_helpers
import orjson
import pytest

import rocketstore
from rocketstore.broker.registration import BrokerIdentity, BrokerRegistrar
from rocketstore.namesrv import (
    DataVersion,
    NamesrvConfig,
    NamesrvController,
    topic_config,
)
from rocketstore.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RemotingServerConfig,
    RequestCode,
    ResponseCode,
    create_request,
    create_response,
)

BOOT_LINE = re.compile(r"listening on (\S+):(\d+)")

arun = namesrv_helpers.arun


# not the checkout: with -m, Python would import its unbuilt rocketstore/ source tree first
CHILD_CWD = str(Path(__file__).resolve().parent)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child Python that imports the same rocketstore as this test."""
    env = dict(os.environ)
    package_root = str(Path(rocketstore.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def start_namesrv(*args: str, command: tuple[str, ...] = ("-m", "rocketstore.namesrv")
                  ) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, *command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=CHILD_CWD,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = BOOT_LINE.search(line)
        if match:
            return proc, f"{match.group(1)}:{match.group(2)}"
    proc.kill()
    _, err = proc.communicate(timeout=10)
    raise AssertionError(f"name server did not start: {line!r} {err[-2000:]}")


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("name server did not stop on its signal") from None
    return proc.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_namesrv_process_serves_and_stops_cleanly(arun, sig: int) -> None:
    proc, address = start_namesrv("--listen-port", "0")
    try:
        assert address.startswith("127.0.0.1:")

        async def main() -> None:
            async with RemotingClient() as client:
                registrar = BrokerRegistrar(client, address, BrokerIdentity("c", "b", 0, "127.0.0.1:10911", "127.0.0.1:10912"))
                (outcome,) = await registrar.register_broker_all({"T": topic_config("T", 2, 2)}, DataVersion(1, 1))
                assert outcome.ok
                response = await client.invoke(address, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
                assert response.code == 0
                assert orjson.loads(response.body_bytes())["queueDatas"][0]["writeQueueNums"] == 2
                missing = await client.invoke(address, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"}))
                assert missing.code == ResponseCode.TOPIC_NOT_EXIST

        arun(main())
    finally:
        code, out = stop(proc, sig)
    assert code == 0
    assert "shut down" in out


def test_namesrv_process_reads_properties(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a free port, released for the name server to take
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    properties = tmp_path / "namesrv.properties"
    properties.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n", encoding="latin-1")
    proc, address = start_namesrv("-c", str(properties))
    try:
        assert address == f"127.0.0.1:{port}"
    finally:
        code, _ = stop(proc)
    assert code == 0


def test_namesrv_process_refuses_a_bad_config(tmp_path: Path) -> None:
    properties = tmp_path / "namesrv.properties"
    properties.write_text("listenPort=abc\n", encoding="latin-1")
    result = subprocess.run(
        [sys.executable, "-m", "rocketstore.namesrv", "-c", str(properties)],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=CHILD_CWD,
        timeout=30,
    )
    assert result.returncode == 2 and "listenPort" in result.stderr


CPP_PRODUCER = textwrap.dedent(
    """
    import sys, time
    import rocketmq.ffi
    from rocketmq.client import Message, Producer

    producer = Producer("PID_ROCKETSTORE_TEST", timeout=3000)
    rocketmq.ffi.dll.SetProducerLogLevel(producer._handle, 1)
    producer.set_namesrv_addr(sys.argv[1])
    producer.start()
    message = Message("TopicTest")
    message.set_keys("k1")
    message.set_tags("TagA")
    message.set_body("hello from the C++ client")
    started = time.monotonic()
    try:
        result = producer.send_sync(message)
        print("SENT", result.status, result.offset, flush=True)
    except Exception as exc:
        print("FAILED", type(exc).__name__, exc, flush=True)
    print("SECONDS", round(time.monotonic() - started, 2), flush=True)
    producer.shutdown()
    """
)


def _rocketmq_usable() -> str | None:
    """None when the C++ client imports here, else the reason it does not."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", "import rocketmq.client"],
            capture_output=True,
            text=True,
            timeout=60,
            env=child_env(HOME=os.environ.get("TMPDIR", "/tmp")),
            cwd=CHILD_CWD,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"importing rocketmq.client failed: {exc}"
    if result.returncode != 0:
        return f"the rocketmq package (C++ client 0.4.4) is not usable here: {result.stderr.strip()[-300:]}"
    return None


def test_cpp_client_fetches_a_route(arun, tmp_path: Path) -> None:
    """The real C++ producer asks our name server for TopicTest, parses our route body, and
    sends to the broker it names (a stand-in that answers SEND_MESSAGE)."""
    reason = _rocketmq_usable()
    if reason:
        pytest.skip(reason)

    async def main() -> None:
        seen: list[RemotingCommand] = []
        sends: list[RemotingCommand] = []
        namesrv = NamesrvController(NamesrvConfig(listen_port=0))
        route_processor = namesrv.processor.get_route_info_by_topic

        def recording_route(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            seen.append(request)
            return route_processor(ctx, request)

        namesrv.server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, recording_route)

        broker = RemotingServer(RemotingServerConfig(listen_port=0))

        def on_send(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            sends.append(request)
            return create_response(
                request, ext_fields={"msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "41"}
            )

        broker.register_processor(RequestCode.SEND_MESSAGE, on_send)
        broker.register_default_processor(lambda ctx, request: create_response(request))  # heartbeat, unregister
        async with namesrv, broker, RemotingClient() as client:
            identity = BrokerIdentity("DefaultCluster", "broker-a", 0, f"127.0.0.1:{broker.port}", "127.0.0.1:1")
            await BrokerRegistrar(client, namesrv.address, identity).register_broker_all(
                {"TopicTest": topic_config("TopicTest", 4, 4)}, DataVersion(1, 1)
            )
            home = tmp_path / "home"
            home.mkdir()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CPP_PRODUCER, namesrv.address,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=child_env(HOME=str(home)),
            )
            try:
                out, err = await asyncio.wait_for(proc.communicate(), 90)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
                raise AssertionError("the C++ producer did not finish in 90 s") from None
            text = out.decode(errors="replace")
            assert proc.returncode == 0, (text, err.decode(errors="replace")[-2000:])

            topics = [request.ext_fields.get("topic") for request in seen]
            assert "TopicTest" in topics, topics
            first = seen[topics.index("TopicTest")]
            assert first.code == RequestCode.GET_ROUTEINFO_BY_TOPIC and first.language == 1  # CPP
            assert "SENT 0 41" in text, text  # SendStatus 0 (SEND_OK), offset = our queueOffset
            assert sends and sends[0].ext_fields["topic"] == "TopicTest"
            assert sends[0].body_bytes() == b"hello from the C++ client"

    arun(main(), timeout=120)


def test_namesrv_process_reports_a_taken_port() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "rocketstore.namesrv", "--listen-port", str(port)],
            capture_output=True,
            text=True,
            env=child_env(),
            cwd=CHILD_CWD,
            timeout=30,
        )
    assert result.returncode == 1 and f"127.0.0.1:{port}" in result.stderr


def test_rocketstore_namesrv_command_runs_the_same_server(arun) -> None:
    """`rocketstore namesrv` (the CLI) starts the same name server."""
    proc, address = start_namesrv("--listen-port", "0", command=("-m", "rocketstore", "namesrv"))
    try:
        async def main() -> None:
            async with RemotingClient() as client:
                missing = await client.invoke(address, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"}))
                assert missing.code == ResponseCode.TOPIC_NOT_EXIST

        arun(main())
    finally:
        code, out = stop(proc)
    assert code == 0 and "shut down" in out

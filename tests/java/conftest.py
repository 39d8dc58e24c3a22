"""Fixtures for the tests with Apache RocketMQ 4.9.8's Java client, mqadmin and servers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# the subprocess cluster of our own servers lives with the client tests
_CLIENT_TESTS = str(Path(__file__).resolve().parents[1] / "client")
if _CLIENT_TESTS not in sys.path:
    sys.path.insert(0, _CLIENT_TESTS)

from cluster import Cluster  # noqa: E402
from java_env import JavaPrograms, compile_programs, require_java  # noqa: E402
from ports import free_low_port  # noqa: E402


@pytest.fixture(scope="session")
def java_programs(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    """The programs of tests/java/programs, compiled once per session against RocketMQ 4.9.8."""
    require_java()
    root = tmp_path_factory.mktemp("java-programs")
    return JavaPrograms(compile_programs(root / "classes"), root / "home")


@pytest.fixture
def java_home(tmp_path: Path) -> Path:
    """A user.home for mqadmin and other Java tools run by one test."""
    require_java()
    return tmp_path / "java-home"


@pytest.fixture
def rs_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """rocketstore's name server and broker ``broker-a`` as RocketMQ's Java client expects a
    broker: on a fixed port with the VIP channel (listenPort - 2) served too."""
    require_java()
    (tmp_path / "rocketstore").mkdir()
    cluster = Cluster(tmp_path / "rocketstore")
    try:
        cluster.start_namesrv()
        start_java_facing_broker(cluster, "broker-a")
        yield cluster
    finally:
        cluster.close()


def start_java_facing_broker(cluster: Cluster, name: str, **properties: object) -> None:
    port = free_low_port(also=(-2,))
    cluster.start_broker(name, listenPort=port, fastListenPortEnable="true", brokerIP1="127.0.0.1",
                         **properties)


@pytest.fixture
def rs_sql_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """rs_cluster with SQL92 filtering on (enablePropertyFilter=true)."""
    require_java()
    (tmp_path / "rocketstore").mkdir()
    cluster = Cluster(tmp_path / "rocketstore")
    try:
        cluster.start_namesrv()
        start_java_facing_broker(cluster, "broker-a", enablePropertyFilter="true")
        yield cluster
    finally:
        cluster.close()

"""The request pump (remoting/_pump.pyx) is the one dispatcher of a connection's requests, and
it calls its connection only through public methods RemotingConnection defines."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from rocketstore.remoting.connection import RemotingConnection

REMOTING = Path(__file__).resolve().parents[2] / "rocketstore" / "remoting"


def _source(name: str) -> str:
    path = REMOTING / name
    if not path.exists():
        pytest.skip("the sources are not beside the tests")
    return path.read_text()


def test_the_pump_calls_only_public_methods_of_its_connection() -> None:
    called = set(re.findall(r"\bconnection\.(\w+)\(", _source("_pump.pyx")))
    assert called, "the pump calls its connection"
    assert sorted(n for n in called if n.startswith("_")) == []
    assert sorted(n for n in called if not callable(getattr(RemotingConnection, n, None))) == []


def test_the_connection_does_not_dispatch_requests_itself() -> None:
    """No processor lookup in RemotingConnection: requests reach processors through the pump."""
    text = inspect.getsource(RemotingConnection)
    assert "handlers" not in text and "processors.get" not in text

"""SYNC_MASTER's acknowledgement rule in controller mode, in one process: the slaves of the
SyncStateSet count, and so does a replica the master is adding while the controller decides
(once the controller has it in the set it may elect it, so it must hold every message
acknowledged from then on: RocketMQ 5's synchronizing SyncStateSet)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers import make_config

from rocketstore import Message, MessageStore
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.replicas_manager import ReplicasManager
from rocketstore.ha import HAService, SyncStateSet
from rocketstore.ha.service import SlaveState
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request


class Connection:
    """What the acknowledgement rule reads of an HA connection."""

    def __init__(self, state: SlaveState) -> None:
        self.state = state


@pytest.fixture
def service(tmp_path: Path):  # noqa: ANN201
    store = MessageStore.open(tmp_path / "m", make_config(tmp_path / "m"))
    for i in range(20):
        assert store.put_message(Message(topic="T", body=b"x" * 100, keys=[f"k{i}"]), 0).ok
    ha = HAService(store, port=0)
    # replica 2 has acknowledged 1000 bytes, replica 3 only 500
    ha.connections = {Connection(SlaveState("127.0.0.1:2", ack_offset=1000)),  # type: ignore[misc]
                      Connection(SlaveState("127.0.0.1:3", ack_offset=500))}
    sss = SyncStateSet(ha, 1, members={1, 2}, epoch=1, master_epoch=1, epoch_start_offset=0,
                       max_time_not_catchup_ms=3000)
    sss.update([1, 2], 1, [{"brokerId": 2, "haClientAddress": "127.0.0.1:2"},
                           {"brokerId": 3, "haClientAddress": "127.0.0.1:3"}])
    ha.sync_state_set = sss
    try:
        yield ha
    finally:
        store.shutdown()


def test_members_and_joining_replicas_acknowledge(service: HAService) -> None:
    sss = service.sync_state_set
    assert sss is not None
    assert service.acknowledged_offset() == 1000        # replica 3 is not in the set
    sss.proposed = {1, 2, 3}       # a join asked, not answered
    assert service.acknowledged_offset() == 500
    assert not service.is_acknowledged(501)
    sss.proposed = set()
    sss.update([1], 2, [{"brokerId": 2, "haClientAddress": "127.0.0.1:2"}])
    assert service.is_acknowledged(2**40)               # the master alone


def test_a_replica_joins_the_acknowledgements_before_the_controller_answers(
        service: HAService, tmp_path: Path) -> None:
    sss = service.sync_state_set
    assert sss is not None
    manager = ReplicasManager(BrokerConfig(broker_name="broker-ha", broker_id=1,
                                           controller_addr="127.0.0.1:1"),
                              RemotingClient(), str(tmp_path / "m"))
    manager.master_epoch = 1
    seen: list[int] = []

    async def controller(code: int, fields: dict, body: bytes | None = None):  # noqa: ANN202
        assert code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET
        assert json.loads(body or b"{}")["syncStateSet"] == [1, 2, 3]
        # the controller has decided: replica 3 is in the set and could be elected now
        seen.append(service.acknowledged_offset())
        await asyncio.sleep(0)
        answer = {"syncStateSet": [1, 2, 3], "syncStateSetEpoch": 2,
                  "replicas": [{"brokerId": 2, "haClientAddress": "127.0.0.1:2"},
                               {"brokerId": 3, "haClientAddress": "127.0.0.1:3"}]}
        return create_response_like(code, answer)

    manager._ask = controller  # type: ignore[method-assign]
    asyncio.run(manager._alter(sss, {1, 2, 3}))
    assert seen == [500]
    assert sss.members == {1, 2, 3} and sss.proposed == set()
    assert service.acknowledged_offset() == 500


def test_a_refused_join_leaves_the_acknowledgements_as_they_were(
        service: HAService, tmp_path: Path) -> None:
    sss = service.sync_state_set
    assert sss is not None
    manager = ReplicasManager(BrokerConfig(broker_name="broker-ha", broker_id=1,
                                           controller_addr="127.0.0.1:1"),
                              RemotingClient(), str(tmp_path / "m"))

    async def controller(code: int, fields: dict, body: bytes | None = None):  # noqa: ANN202
        response = create_request(code, {})
        response.code = ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        return response

    manager._ask = controller  # type: ignore[method-assign]
    asyncio.run(manager._alter(sss, {1, 2, 3}))
    assert sss.members == {1, 2} and sss.proposed == set()
    assert service.acknowledged_offset() == 1000


def create_response_like(code: int, body: dict):  # noqa: ANN201
    response = create_request(code, {}, json.dumps(body).encode())
    response.code = ResponseCode.SUCCESS
    return response

"""SlaveAcks: SYNC_MASTER's waiting sends, answered in append order by the slaves' reports,
at their deadline by what was acknowledged then, or all at a stop; isSlaveOK's boundary."""

from __future__ import annotations

import logging

import pytest

from rocketstore.ha._acks import SlaveAcks


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.soon: list[object] = []
        self.armed: list[float] = []
        self.wakes = 0

    def bind(self, acks: SlaveAcks) -> None:
        acks.bind(lambda: self.now, self.soon.append, self.wake, self.armed.append)

    def wake(self) -> None:
        self.wakes += 1


def make(fallbehind: int = 1000) -> tuple[SlaveAcks, Clock]:
    acks, clock = SlaveAcks(fallbehind), Clock()
    clock.bind(acks)
    acks.update(True, 0, 0)
    return acks, clock


def test_reports_answer_the_waiters_they_cover_in_order() -> None:
    acks, clock = make()
    answers: list[tuple[int, bool]] = []
    # more than the first ring's 64 slots, wrapped: the queue keeps its order as it grows
    for offset in range(1, 41):
        acks.wait(offset * 10, 5.0, lambda ok, o=offset: answers.append((o, ok)))
    assert acks.update(True, 200, 200) == 20
    for offset in range(41, 201):
        acks.wait(offset * 10, 5.0, lambda ok, o=offset: answers.append((o, ok)))
    assert len(acks) == 180 and clock.armed == [105.0]     # one timer for them all
    assert acks.update(True, 1995, 1995) == 179
    assert [o for o, _ in answers] == list(range(1, 200)) and all(ok for _, ok in answers)
    assert len(acks) == 1
    assert acks.update(True, 2000, 2000) == 1 and len(acks) == 0
    assert len(clock.soon) == 1     # one wake a loop turn, however many sends wait in it


def test_a_send_already_acknowledged_is_answered_at_once() -> None:
    acks, clock = make()
    acks.update(True, 500, 500)
    answers: list[bool] = []
    acks.wait(500, 5.0, answers.append)
    assert answers == [True] and len(acks) == 0 and not clock.armed


def test_deadlines_answer_by_what_was_acknowledged() -> None:
    acks, clock = make()
    answers: list[tuple[int, bool]] = []
    for offset, at in ((100, 100.0), (200, 101.0), (300, 102.0)):
        clock.now = at
        acks.wait(offset, 5.0, lambda ok, o=offset: answers.append((o, ok)))
    acks.update(True, 150, 150)
    assert answers == [(100, True)]
    assert acks.expire(106.0) == 107.0      # the 200 send's deadline passed: not acknowledged
    assert answers[-1] == (200, False)
    acks.acked = 300                        # acknowledged, its report not read yet
    assert acks.expire(107.0) == -1
    assert answers[-1] == (300, True)


def test_a_stop_answers_every_waiter() -> None:
    acks, _ = make()
    answers: list[tuple[int, bool]] = []
    for offset in (100, 200):
        acks.wait(offset, 5.0, lambda ok, o=offset: answers.append((o, ok)))
    acks.acked = 150
    assert acks.fail_all() == 2
    assert answers == [(100, True), (200, False)]


def test_one_failing_waiter_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    acks, _ = make()
    answers: list[bool] = []

    def boom(ok: bool) -> None:
        raise RuntimeError("boom")

    acks.wait(100, 5.0, boom)
    acks.wait(200, 5.0, answers.append)
    with caplog.at_level(logging.ERROR, logger="rocketstore.ha.service"):
        assert acks.update(True, 200, 200) == 2
    assert answers == [True]
    assert "answering a SYNC_MASTER send failed" in caplog.text


def test_slave_ok_is_rocketmqs_boundary() -> None:
    acks = SlaveAcks(1000)
    assert not acks.slave_ok(0)                 # no slave connected
    acks.update(True, 5000, 5000)
    assert acks.slave_ok(5999) and not acks.slave_ok(6000)
    acks.controller_mode = True                 # the SyncStateSet decides instead
    assert acks.slave_ok(10**12)


def test_waiting_needs_a_loop() -> None:
    acks = SlaveAcks(1000)
    with pytest.raises(RuntimeError, match="bind"):
        acks.wait(10, 1.0, lambda ok: None)

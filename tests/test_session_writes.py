"""When a session's write may be submitted (zkemu.session_writes): never past an earlier one across a
change of route (leader, term); at once on the same route."""

from __future__ import annotations

import asyncio

from zkemu.session_writes import SessionWrites

OLD = (1, 5)  # node 1 led in term 5
NEW = (2, 6)  # node 2 leads in term 6


def test_writes_on_one_route_go_at_once_in_order() -> None:
    writes = SessionWrites()
    a, b, c = writes.add(), writes.add(), writes.add()
    assert writes.try_take(a, OLD)
    assert writes.try_take(b, OLD)
    assert writes.try_take(c, OLD)
    assert (a.route, b.route, c.route) == (OLD, OLD, OLD)


def test_a_write_does_not_pass_an_earlier_one_not_yet_submitted() -> None:
    async def body() -> None:
        writes = SessionWrites()
        a, b = writes.add(), writes.add()
        assert not writes.try_take(b, OLD)
        waiting = asyncio.ensure_future(writes.wait_turn(b, lambda: OLD))
        await asyncio.sleep(0)
        assert not waiting.done()
        assert writes.try_take(a, OLD)
        assert await asyncio.wait_for(waiting, 1) == OLD

    asyncio.run(body())


def test_after_a_leader_change_a_write_waits_until_the_earlier_ones_are_answered() -> None:
    async def body() -> None:
        writes = SessionWrites()
        a, b, c = writes.add(), writes.add(), writes.add()
        assert writes.try_take(a, OLD) and writes.try_take(b, OLD)
        assert not writes.try_take(c, NEW)  # a and b may yet be lost and retried through NEW
        waiting = asyncio.ensure_future(writes.wait_turn(c, lambda: NEW))
        a.settle()
        await asyncio.sleep(0)
        assert not waiting.done(), "went before b was answered"
        b.settle()
        assert await asyncio.wait_for(waiting, 1) == NEW
        assert c.route == NEW

    asyncio.run(body())


def test_a_write_answered_without_being_submitted_blocks_nothing() -> None:
    writes = SessionWrites()
    a, b = writes.add(), writes.add()
    a.settle()  # e.g. refused as too large before it reached the log
    assert writes.try_take(b, NEW)


def test_the_route_a_write_was_first_submitted_on_stays() -> None:
    writes = SessionWrites()
    a, b = writes.add(), writes.add()
    assert writes.try_take(a, OLD)
    a.placed_on(NEW)  # a retry through the new leader
    assert a.route == OLD
    assert not writes.try_take(b, NEW)


def test_a_write_not_taken_goes_back_in_line_before_later_ones() -> None:
    async def body() -> None:
        writes = SessionWrites()
        a, b = writes.add(), writes.add()
        assert writes.try_take(a, OLD)
        assert a.may_retry()  # nothing later went to OLD
        a.unplace()  # e.g. lost: it is submitted again, through whoever leads
        assert not writes.try_take(b, NEW)
        waiting = asyncio.ensure_future(b.wait_turn(lambda: NEW))
        await asyncio.sleep(0)
        assert not waiting.done(), "went before a was submitted again"
        await a.wait_turn(lambda: NEW)
        await asyncio.wait_for(waiting, 1)
        assert (a.route, b.route) == (NEW, NEW)

    asyncio.run(body())


def test_a_refused_write_may_not_be_retried_after_a_later_one_went_the_same_way() -> None:
    writes = SessionWrites()
    a, b = writes.add(), writes.add()
    assert writes.try_take(a, OLD) and writes.try_take(b, OLD)
    assert not a.may_retry()
    assert b.may_retry()


def test_a_later_write_already_answered_still_forbids_retrying_a_refused_one() -> None:
    writes = SessionWrites()
    a, b = writes.add(), writes.add()
    assert writes.try_take(a, OLD) and writes.try_take(b, OLD)
    b.settle()  # applied and answered before the leader's refusal of `a` came back
    assert not a.may_retry()

"""runtime.eager_start: a coroutine's first step runs in the caller, the rest wherever it is awaited."""

from __future__ import annotations

import asyncio

import pytest

from runtime.eager_start import begin


def test_the_first_step_runs_in_the_caller_and_the_rest_when_awaited() -> None:
    steps: list[str] = []

    async def work(gate: asyncio.Future[int]) -> int:
        steps.append("first")
        value = await gate
        steps.append("rest")
        await asyncio.sleep(0)  # a bare yield on the way
        return value * 2

    async def main() -> None:
        gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        rest = begin(work(gate))
        assert steps == ["first"]  # before any loop turn
        gate.set_result(21)
        assert await rest == 42
        assert steps == ["first", "rest"]

    asyncio.run(main())


def test_a_coroutine_that_never_waits_is_finished_by_begin() -> None:
    async def work() -> str:
        return "done"

    async def main() -> None:
        assert await begin(work()) == "done"

    asyncio.run(main())


def test_an_error_before_the_first_wait_is_raised_by_begin_and_a_later_one_by_the_await() -> None:
    async def early() -> None:
        raise ValueError("at once")

    async def late(gate: asyncio.Future[None]) -> None:
        await gate
        raise KeyError("later")

    async def main() -> None:
        with pytest.raises(ValueError, match="at once"):
            begin(early())
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        rest = begin(late(gate))
        gate.set_result(None)
        with pytest.raises(KeyError, match="later"):
            await rest

    asyncio.run(main())


def test_the_coroutine_sees_the_outcome_of_the_future_it_waits_on() -> None:
    async def work(gate: asyncio.Future[None]) -> str:
        try:
            await gate
        except OSError as exc:
            return f"handled {exc}"
        return "no error"

    async def main() -> None:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        rest = begin(work(gate))
        gate.set_exception(OSError("disk"))
        assert await rest == "handled disk"

    asyncio.run(main())


def test_cancelling_the_awaiting_task_cancels_the_wait_and_reaches_the_coroutine() -> None:
    seen: list[str] = []

    async def work(gate: asyncio.Future[None]) -> None:
        try:
            await gate
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("cleaned up")

    async def main() -> None:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        rest = begin(work(gate))
        task = asyncio.get_running_loop().create_task(rest)
        await asyncio.sleep(0)  # the task now waits on the gate
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert gate.cancelled()
        assert seen == ["cancelled", "cleaned up"]

    asyncio.run(main())

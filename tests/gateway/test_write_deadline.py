"""The bound on each of a stream's writes to the client (``_WriteDeadline``): one timer
for many writes, each write still held to the whole limit, from when it began."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from polystream.server.gateway import _WriteDeadline

MESSAGE = {"type": "http.response.body", "body": b"x", "more_body": True}


def _sender(delays: list[float], sent: list[Any]) -> Any:
    """An ASGI ``send`` whose n-th write takes ``delays[n]`` seconds."""

    async def send(message: Any) -> None:
        await asyncio.sleep(delays[len(sent)])
        sent.append(message)

    return send


def test_writes_in_time_pass_and_share_one_timer() -> None:
    async def main() -> tuple[list[bool], int, float]:
        loop = asyncio.get_running_loop()
        deadline = _WriteDeadline(0.2)
        sent: list[Any] = []
        send = _sender([0.005] * 60, sent)
        armed = 0
        call_at = loop.call_at

        def counting(when: float, callback: Any, *args: Any, **kw: Any) -> asyncio.TimerHandle:
            nonlocal armed
            if getattr(callback, "__self__", None) is deadline:
                armed += 1
            return call_at(when, callback, *args, **kw)

        loop.call_at = counting  # type: ignore[method-assign]
        start = loop.time()
        try:
            # 60 writes of 5 ms: 0.3 s in all, longer than the limit, none over it.
            results = [await deadline.send(send, MESSAGE) for _ in range(60)]
        finally:
            loop.call_at = call_at  # type: ignore[method-assign]
        elapsed = loop.time() - start
        assert len(sent) == 60 and sent[0] is MESSAGE
        deadline.close()
        return results, armed, elapsed

    results, armed, elapsed = asyncio.run(main())
    assert results == [True] * 60
    # Each timer re-armed for a write that began after the one before fired, so two
    # timers cover at least the limit: a handful for the run, not one per write.
    assert 1 <= armed <= 2 * elapsed / 0.2 + 2
    assert armed <= 20


def test_a_write_over_the_limit_is_cancelled_and_reported() -> None:
    async def main() -> tuple[bool, float, list[Any]]:
        loop = asyncio.get_running_loop()
        deadline = _WriteDeadline(0.1)
        sent: list[Any] = []
        start = loop.time()
        ok = await deadline.send(_sender([30.0], sent), MESSAGE)
        return ok, loop.time() - start, sent

    ok, took, sent = asyncio.run(main())
    assert ok is False
    assert sent == []  # the write never completed
    assert 0.09 <= took < 5.0


def test_a_write_begun_late_in_the_timers_period_gets_the_whole_limit() -> None:
    async def main() -> tuple[list[bool], float]:
        loop = asyncio.get_running_loop()
        deadline = _WriteDeadline(0.3)
        sent: list[Any] = []
        send = _sender([0.0, 30.0], sent)
        first = await deadline.send(send, MESSAGE)  # arms the timer for 0.3 s from now
        await asyncio.sleep(0.2)
        start = loop.time()
        # The timer fires 0.1 s into this write: it must wait for this write's own
        # deadline (0.3 s after it began), not cancel it then.
        second = await deadline.send(send, MESSAGE)
        return [first, second], loop.time() - start

    results, took = asyncio.run(main())
    assert results == [True, False]
    assert took >= 0.29


def test_a_failed_connection_is_reported_and_the_next_write_is_bounded() -> None:
    async def main() -> list[bool]:
        deadline = _WriteDeadline(0.1)

        async def broken(message: Any) -> None:
            raise ConnectionResetError("reset by peer")

        results = [await deadline.send(broken, MESSAGE)]
        results.append(await deadline.send(_sender([30.0], []), MESSAGE))
        return results

    assert asyncio.run(main()) == [False, False]


def test_another_cancellation_is_not_taken_for_the_deadline() -> None:
    async def main() -> None:
        deadline = _WriteDeadline(30.0)
        started = asyncio.Event()

        async def send(message: Any) -> None:
            started.set()
            await asyncio.sleep(30)

        task = asyncio.create_task(deadline.send(send, MESSAGE))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline.close()

    asyncio.run(main())


def test_both_cancellations_at_once_let_the_other_one_through() -> None:
    """The deadline expires while the task is also cancelled from outside: the
    outside cancellation wins (CancelledError), as with ``asyncio.timeout``."""

    async def main() -> None:
        deadline = _WriteDeadline(0.05)
        holder: dict[str, asyncio.Task[Any]] = {}

        async def send(message: Any) -> None:
            # Cancelled from outside in the same loop turn as the deadline fires.
            loop = asyncio.get_running_loop()
            loop.call_at(deadline._when, holder["task"].cancel)
            await asyncio.sleep(30)

        task = holder["task"] = asyncio.create_task(deadline.send(send, MESSAGE))
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_close_drops_the_pending_timer() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadline = _WriteDeadline(0.05)
        assert await deadline.send(_sender([0.0], []), MESSAGE)
        handle = deadline._handle
        assert handle is not None and not handle.cancelled()
        deadline.close()
        assert handle.cancelled() and deadline._handle is None
        # Armed again by the next write.
        assert await deadline.send(_sender([0.0], []), MESSAGE)
        assert deadline._handle is not None
        deadline.close()
        await asyncio.sleep(0.1)
        assert loop.is_running()

    asyncio.run(main())

"""The gateway's writes to a client, each bounded by the slow-client limit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["Message", "Receive", "Send", "WriteDeadline", "send_body"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class WriteDeadline:
    """How long each of one task's writes to the client may take, kept by one timer.

    ``asyncio.timeout`` around a write arms a timer and cancels it at every write (the
    pump writes once per upstream read, so once per event of a paced stream). Here a
    write notes when it began, and the timer is armed only when none is pending: when
    it fires, a write that has taken the whole limit is cancelled (:meth:`send` then
    returns False, as for ``TimeoutError``), a write under way for less re-arms it for
    that write's own deadline, and with no write under way it lapses until the next.
    One task writes at a time (the stream's pump). :attr:`last` is when the last write
    began: the stream's watcher reads it to tell an upstream silence (keep-alive
    comments) from a stream that is writing.
    """

    __slots__ = (
        "_cancelling",
        "_expired",
        "_handle",
        "_limit",
        "_loop",
        "_since",
        "_task",
        "_when",
        "last",
    )

    def __init__(self, limit: float) -> None:
        self._limit = limit
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = None
        self._when = 0.0  # when the pending timer fires
        self._since: float | None = None  # when the write under way began
        self._task: asyncio.Task[Any] | None = None  # the task writing
        self._cancelling = 0  # its cancellation requests before the write
        self._expired = False
        self.last = self._loop.time()  # when the last write began (or this was made)

    async def send(self, send: Send, message: Message) -> bool:
        """``await send(message)``; False when it took the limit (the write was
        cancelled) or the connection failed."""
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._cancelling = task.cancelling()
        loop = self._loop
        self._since = self.last = now = loop.time()
        if self._handle is None:
            self._when = now + self._limit
            self._handle = loop.call_at(self._when, self._check)
        try:
            await send(message)
        except asyncio.CancelledError:
            if self._expired:
                self._expired = False
                # The deadline's own cancellation, unless another is pending too (as
                # asyncio.timeout decides).
                if task.uncancel() <= self._cancelling:
                    return False
            raise
        except OSError:
            return False
        finally:
            self._since = None
            self._task = None
        return True

    def _check(self) -> None:
        self._handle = None
        since = self._since
        if since is None:
            return  # no write under way: the next one arms the timer
        due = since + self._limit
        if due <= self._when:
            self._expired = True
            assert self._task is not None
            self._task.cancel()
        else:
            self._when = due
            self._handle = self._loop.call_at(due, self._check)

    def close(self) -> None:
        """Drop the pending timer (unless a write is under way: it keeps its bound)."""
        if self._handle is not None and self._since is None:
            self._handle.cancel()
            self._handle = None


async def send_body(
    send: Send,
    data: bytes,
    limit: float,
    more: bool = True,
    deadline: WriteDeadline | None = None,
) -> bool:
    """Send body bytes (``more=False``: the last); a client that does not read within
    ``limit`` seconds is dropped (False). A stream's pump passes its ``deadline`` (one
    timer for all its writes); the few other writes (keep-alive comments, resumed
    entries) each take an ``asyncio.timeout``."""
    message = {"type": "http.response.body", "body": data, "more_body": more}
    if deadline is not None:
        return await deadline.send(send, message)
    try:
        async with asyncio.timeout(limit):
            await send(message)
    except (TimeoutError, OSError):
        return False
    return True

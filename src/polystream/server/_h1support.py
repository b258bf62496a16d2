"""What the HTTP/1.1 server's parts share: the ASGI types, :class:`ServerLimits`, the
``Date`` header, starting a request's task in the read that completed it
(:func:`start_task`), rate-limited logging, and the ASGI lifespan protocol."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ASGI",
    "SEND_NOWAIT",
    "TOKEN",
    "App",
    "HttpDate",
    "Lifespan",
    "Message",
    "RateLimitedLog",
    "Refusal",
    "Scope",
    "ServerLimits",
    "accept_error",
    "logger",
    "resolve",
    "start_task",
]

logger = logging.getLogger("polystream.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
App = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]

Refusal = Callable[[int, str, str], tuple[list[tuple[bytes, bytes]], bytes]]
"""A hook that shapes the server's own refusals: ``refusal(status, path, message)``
gives the response headers (its ``content-type`` among them) and body for a refused
request whose path is known. The server adds ``content-length``, ``connection: close``,
``date`` and, where it has one, ``retry-after``. It runs in the read that refused the
request, so it is to be quick and not to wait; if it raises, the refusal is plain
text."""

TOKEN: Final = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
SEND_NOWAIT: Final = "polystream.send_nowait"
"""The key, in an HTTP scope's ``extensions``, of the request's synchronous body send
(see :meth:`~polystream.server._h1cycle.Cycle.send_nowait`)."""


@dataclass(frozen=True)
class ServerLimits:
    """Bounds on what a client may make the server hold.

    Attributes:
        max_head_bytes: Largest request head (request line and headers).
        max_headers: Most header lines in a request.
        keepalive_timeout: Seconds an idle connection is kept between requests.
        head_timeout: Seconds a request head may take to arrive, from its first byte.
        body_timeout: Seconds a request body may go without a byte arriving (while the
            app is ready for more of it).
        max_buffered_bytes: Request bytes read ahead of the app (a body not yet
            received, a pipelined request) before reading pauses.
        shutdown_timeout: Seconds running requests get to finish at shutdown.
        max_body_bytes: Largest request body (413 past it; a declared
            ``Content-Length`` past it is refused before the body is read); None: no
            bound.
        max_connections: Connections open at once; one past it is answered 503 with
            ``Retry-After`` and closed.
    """

    max_head_bytes: int = 64 * 1024
    max_headers: int = 100
    keepalive_timeout: float = 5.0
    head_timeout: float = 10.0
    body_timeout: float = 30.0
    max_buffered_bytes: int = 1024 * 1024
    shutdown_timeout: float = 5.0
    max_body_bytes: int | None = None
    max_connections: int = 1024

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


class HttpDate:
    """The ``Date`` header, formatted once a second."""

    second = -1
    value = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.second = second
            cls.value = email.utils.formatdate(second, usegmt=True).encode("ascii")
        return cls.value


def resolve(waiter: asyncio.Future[None] | None) -> None:
    """Wake the task waiting on ``waiter``, if one is."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class _Started(Coroutine[Any, Any, Any]):
    """A coroutine whose first step ran ahead of the task that runs the rest of it: that
    task's first step gives what the first one ended with (what it awaits, its return
    or its exception), and every step after goes to the coroutine.

    What Python 3.12's eager tasks do, for 3.11 (see :func:`start_task`).
    """

    __slots__ = ("_coro", "_first", "_raised")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self._first: Any = None
        self._raised: BaseException | None = None

    def step(self) -> None:
        try:
            self._first = self._coro.send(None)
        except BaseException as exc:  # its return (StopIteration) too
            self._raised = exc

    def send(self, value: Any) -> Any:
        raised = self._raised
        if raised is not None:
            self._raised = None
            raise raised
        first = self._first
        if first is not None:
            self._first = None
            return first
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        self._first = self._raised = None
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        raise TypeError("a started task's coroutine is not awaited")


def start_task(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]
) -> asyncio.Task[None]:
    """A task for ``coro`` whose first step runs now, not at the next turn of the loop.

    A request's first step (its parse, the app's work up to its first wait: for a
    gateway, the upstream request) then leaves in the same turn as the read that
    completed the request: one turn of the loop less on every request's path, which on
    a machine that wakes to cold caches is tens of microseconds. The step runs with the
    task current and in the task's own context, as a task's steps do. From within
    another task (never the case for a protocol's callbacks), a task as usual.
    """
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, eager_start=True)
    if asyncio.current_task(loop) is not None:
        return loop.create_task(coro)
    started = _Started(coro)
    context = contextvars.copy_context()
    task = loop.create_task(started, context=context)  # its first step: the next turn
    asyncio.tasks._enter_task(loop, task)
    try:
        context.run(started.step)
    finally:
        asyncio.tasks._leave_task(loop, task)
    return task


_ACCEPT_MESSAGES: Final = (
    "socket.accept() out of system resource",
    "Error on transport creation for incoming connection",
)


def accept_error(context: dict[str, Any]) -> bool:
    """Whether a loop exception context is an error of accepting a connection."""
    if context.get("message") in _ACCEPT_MESSAGES:
        return True
    callback = getattr(context.get("handle"), "_callback", None)
    return getattr(callback, "__name__", "") in ("_accept_connection", "_start_serving")


class RateLimitedLog:
    """Log lines, of each kind at most one per ``interval`` seconds; the next line of a
    kind says how many were left out since the last one.

    Args:
        interval: Seconds between two lines of one kind.
        max_kinds: Kinds remembered (past it, all are forgotten).
    """

    def __init__(self, interval: float = 1.0, max_kinds: int = 64) -> None:
        self.interval = interval
        self.max_kinds = max_kinds
        self._kinds: dict[str, list[float]] = {}  # kind: [time of its last line, left out]

    def log(self, level: int, kind: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        entry = self._kinds.get(kind)
        if entry is not None and now - entry[0] < self.interval:
            entry[1] += 1
            return
        if entry is None and len(self._kinds) >= self.max_kinds:
            self._kinds.clear()
        suppressed = int(entry[1]) if entry is not None else 0
        self._kinds[kind] = [now, 0]
        if suppressed:
            message += " (%d more like it in the last %.0f s not logged)"
            args = (*args, suppressed, now - entry[0]) if entry is not None else args
        logger.log(level, message, *args)

    def warning(self, kind: str, message: str, *args: Any) -> None:
        self.log(logging.WARNING, kind, message, *args)


class Lifespan:
    """The ASGI lifespan protocol, for apps that speak it (others are left alone)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.events: dict[str, asyncio.Event] = {}
        self.failed = False
        self.refused = False
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        scope: Scope = {"type": "lifespan", "asgi": ASGI, "state": {}}
        try:
            await self.app(scope, self.inbox.get, self._send)
        except Exception:
            self.failed = True
            logger.debug("the app does not support the lifespan protocol", exc_info=True)
        finally:
            for event in self.events.values():
                event.set()

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind.endswith(".failed"):
            self.refused = True
            logger.error("lifespan: %s", message.get("message", kind))
        self.events.setdefault(kind.rsplit(".", 1)[0], asyncio.Event()).set()

    async def _step(self, name: str) -> None:
        event = self.events.setdefault(f"lifespan.{name}", asyncio.Event())
        await self.inbox.put({"type": f"lifespan.{name}"})
        await event.wait()

    async def startup(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())
        await self._step("startup")
        if self.refused:
            raise RuntimeError("the app's lifespan startup failed")

    async def shutdown(self) -> None:
        if self.task is None or self.task.done():
            return
        await self._step("shutdown")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.task, 5.0)

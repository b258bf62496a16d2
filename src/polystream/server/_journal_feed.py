"""A stream's writes to a blocking journal (SQLite, Redis), off the streaming path.

Each write to such a journal is a call in a worker thread, and a transaction or a
network round trip: awaited before each client write, it added that to every event a
client waits for. A :class:`JournalFeed` takes a stream's writes (create, appends,
finish) as they come and makes them in order, in one task, joining the appends that
have piled up meanwhile into one call. What is handed over but not yet written is
bounded (:data:`MAX_PENDING_BYTES`): past it, :meth:`JournalFeed.append` waits.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from polystream.journal import Journal, JournalConflict

__all__ = ["MAX_PENDING_BYTES", "JournalFeed"]

MAX_PENDING_BYTES: Final = 64 * 1024
"""Bytes of entries a feed holds unwritten before an append waits for the journal (what
a stream adds to the gateway's memory while its journal lags; the HTTP client's
read-ahead has the same bound)."""


class JournalFeed:
    """The journal writes of one stream, made in order by one task in a worker thread.

    Args:
        journal: A blocking journal (its methods run in a thread).
        on_error: Called once with the exception when a write fails; the feed then
            drops what it holds and every later write (the stream stays unresumable,
            its client's response goes on).
    """

    def __init__(self, journal: Journal, on_error: Callable[[Exception], None]) -> None:
        self._journal = journal
        self._on_error = on_error
        self._ops: deque[tuple[str, str, Any, int]] = deque()
        self._pending = 0  # entry bytes handed over and not yet written
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.failed = False
        self.names: list[str] = []  # the stream ids created through this feed

    def create(self, stream_id: str, meta: dict[str, Any]) -> None:
        self.names.append(stream_id)
        self._put("create", stream_id, meta, 0)

    def alias(self, stream_id: str, meta: dict[str, Any], on_conflict: Callable[[], None]) -> None:
        """Create an entry that may be taken already: then ``on_conflict`` is called
        (on the event loop) and the feed goes on; any other failure is a failure."""
        self.names.append(stream_id)
        self._put("alias", stream_id, (meta, on_conflict), 0)

    async def append(self, stream_id: str, entries: list[tuple[str, bytes]]) -> None:
        """Hand over entries (waits only while more than the bound is unwritten)."""
        self.put(stream_id, entries)
        if self.backlogged:
            await self.flushed()

    def put(self, stream_id: str, entries: list[tuple[str, bytes]]) -> None:
        """Hand over entries without waiting (a caller that may not wait checks
        :attr:`backlogged` first, and leaves its next entries to :meth:`append`)."""
        self._put("append", stream_id, entries, sum(len(data) for _, data in entries))

    @property
    def backlogged(self) -> bool:
        """More than the bound is handed over and not yet written."""
        return self._pending > MAX_PENDING_BYTES

    def finish(self, stream_id: str) -> None:
        self._put("finish", stream_id, None, 0)

    async def flushed(self) -> None:
        """Wait until everything handed over is written (or dropped after a failure)."""
        await self._idle.wait()

    def _put(self, kind: str, stream_id: str, argument: Any, size: int) -> None:
        if self.failed:
            return
        self._ops.append((kind, stream_id, argument, size))
        self._pending += size
        if self._task is None:
            self._idle.clear()
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        ops = self._ops
        try:
            while ops:
                kind, stream_id, argument, size = ops.popleft()
                if kind == "append":
                    # The appends that piled up while the last write ran: one call.
                    entries = list(argument)
                    while ops and ops[0][0] == "append" and ops[0][1] == stream_id:
                        _, _, more, more_size = ops.popleft()
                        entries += more
                        size += more_size
                    argument = entries
                try:
                    if kind == "alias":
                        meta, on_conflict = argument
                        try:
                            await asyncio.to_thread(self._write, "create", stream_id, meta)
                        except JournalConflict:
                            on_conflict()
                    else:
                        await asyncio.to_thread(self._write, kind, stream_id, argument)
                except Exception as exc:
                    self.failed = True
                    ops.clear()
                    self._pending = 0
                    self._on_error(exc)
                    return
                self._pending -= size
        finally:
            self._task = None
            self._idle.set()

    def _write(self, kind: str, stream_id: str, argument: Any) -> None:
        journal = self._journal
        now = time.time()
        if kind == "create":
            journal.create(stream_id, argument, now=now)
        elif kind == "append":
            journal.append(stream_id, argument, now=now)
        else:
            journal.finish(stream_id, now=now)

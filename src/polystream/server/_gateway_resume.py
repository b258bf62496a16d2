"""The gateway's resumes: a stream's journalled entries after a cursor, then the stream
live while it runs.

A resume names its stream by the id the gateway minted for it or, for the dialects
with one, by the stream's native id (through an alias of the tenant and dialect), and
its position by the cursor of the last event the client has (see
:meth:`~polystream.dialects._base.DialectEncoder.encode_entries`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any, Final

from polystream.dialects import DIALECTS
from polystream.gateway_core import ANONYMOUS_TENANT, Limits, alias_id, counter_cursors
from polystream.journal import Entry, Journal, JournalMiss
from polystream.server._gateway_stream import SSE_HEADERS, StreamReplies
from polystream.server._gateway_write import Receive, Send, send_body
from polystream.server._journal_feed import JournalFeed

__all__ = ["JOURNAL_LAG_SECONDS", "REPLAY_BYTES", "Resumes"]

REPLAY_BYTES: Final = 64 * 1024
"""Most journalled bytes a resume joins into one write (whole entries; at least one)."""
_MINTED: Final = re.compile(r"[0-9a-f]{32}")
"""The shape of the stream ids the gateway mints (``secrets.token_hex(16)``)."""
JOURNAL_LAG_SECONDS: Final = 1.0
"""How long a resume waits for its stream or cursor to reach a shared (blocking)
journal: another gateway instance writes it off its client's path, so a client may hold
an event a few milliseconds before the journal does."""


def _owned(meta: dict[str, Any], tenant: str, dialect: str) -> bool:
    """Whether a journal entry's metadata binds it to ``tenant`` and ``dialect`` (an
    entry that names no tenant, journalled before there were tenants, is the anonymous
    tenant's: only an open gateway serves it)."""
    return meta.get("tenant", ANONYMOUS_TENANT) == tenant and meta.get("dialect") == dialect


class Resumes:
    """A gateway's resumes from its journal.

    Args:
        journal: The gateway's journal.
        limits: The gateway's limits (the slow-client bound on each write, the idle
            timeout of a followed stream).
        feeds: The journal feeds of this process's live streams, by every id a resume
            may name (what they hold is written before a resume reads).
        replies: How the gateway answers (its error responses).
    """

    def __init__(
        self,
        journal: Journal,
        limits: Limits,
        feeds: dict[str, JournalFeed],
        replies: StreamReplies,
    ) -> None:
        self.journal = journal
        self.limits = limits
        self.feeds = feeds
        self.replies = replies

    async def journal_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call the journal's ``method`` (in a worker thread for a blocking journal)."""
        function = getattr(self.journal, method)
        if self.journal.blocking:
            return await asyncio.to_thread(function, *args, **kwargs)
        return function(*args, **kwargs)

    async def native(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        stream_id: str,
        query: dict[str, str],
        tenant: str,
    ) -> None:
        """A resume by the stream's own route (``GET .../{id}?stream=true``, the cursor
        in the query)."""
        if query.get("stream") not in ("true", "1"):
            await self.replies.error(
                send,
                dialect,
                400,
                "the gateway serves resumes only with stream=true",
                param="stream",
            )
            return
        param = DIALECTS[dialect].resume.cursor_param
        cursor = query.get(param) if param is not None else None
        await self.replay(send, receive, dialect, stream_id, cursor, tenant)

    async def counter(
        self, send: Send, receive: Receive, dialect: str, last_id: str, tenant: str
    ) -> None:
        """A resume by ``Last-Event-ID``: the same request sent again."""
        # ``<stream>.<cursor>``: the stream's minted id (no dot in it), then the cursor
        # (the whole id, for the gateway's counter cursors; else the event's own).
        stream_id, _, rest = last_id.partition(".")
        cursor = last_id if counter_cursors(dialect) else rest
        await self.replay(send, receive, dialect, stream_id, cursor, tenant)

    async def replay(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        stream_id: str,
        cursor: str | None,
        tenant: str,
    ) -> None:
        """Send a stream's entries after ``cursor``, then follow it while it runs; a
        client that goes away ends this at once (it frees its concurrency slot)."""
        task = asyncio.current_task()
        assert task is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            # Past the request's body only a disconnect can come (anything else, from a
            # server not keeping to ASGI, ends the watch: it never spins).
            if (await receive())["type"] == "http.disconnect":
                gone = True
                task.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await self.replay_entries(send, dialect, stream_id, cursor, tenant)
        except asyncio.CancelledError:
            if not gone:
                raise  # not the watcher's: the server's (its shutdown)
            task.uncancel()
        finally:
            watcher.cancel()

    async def replay_entries(
        self, send: Send, dialect: str, stream_id: str, cursor: str | None, tenant: str
    ) -> None:
        try:
            stream_id, entries, finished = await self.suffix(stream_id, cursor, tenant, dialect)
        except JournalMiss as exc:
            await self.replies.error(send, dialect, 404, f"cannot resume: {exc}", kind="not_found")
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    *SSE_HEADERS,
                    (b"x-polystream-resumed", b"suffix"),
                ],
            }
        )
        if not await self.send_entries(send, entries):
            return
        # Follow the stream live while it is still running (poll the shared journal for
        # the entries from a position on: each poll reads only those).
        position = 0
        try:
            if entries:
                position = entries[-1].position + 1
            elif not finished:
                position = await self.position_after(stream_id, cursor)
        except JournalMiss:
            finished = True
        idle = 0.0
        while not finished and idle < self.limits.idle_timeout:
            await asyncio.sleep(0.02)
            idle += 0.02
            try:
                more, finished = await self.journal_call("read_from", stream_id, position)
            except JournalMiss:
                break
            if more:
                idle = 0.0
                if not await self.send_entries(send, more):
                    return
                position = more[-1].position + 1
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def suffix(
        self, name: str, cursor: str | None, tenant: str, dialect: str
    ) -> tuple[str, list[Entry], bool]:
        """The journal id a resume names (a minted id, or a native id's alias), the
        entries after ``cursor`` and whether the stream finished. A shared (blocking)
        journal is given :data:`JOURNAL_LAG_SECONDS` to show what another instance is writing.

        Raises:
            JournalMiss: Unknown or expired stream, one of another tenant or dialect
                (the same error), cursor not in it, or overflowed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (JOURNAL_LAG_SECONDS if self.journal.blocking else 0.0)
        alias = alias_id(tenant, dialect, name)
        while True:
            for candidate in (name, alias):
                feed = self.feeds.get(candidate)
                if feed is not None:
                    await feed.flushed()  # what this process's client was sent is written
            try:
                journal_id = await self.resolve(name, alias, tenant, dialect)
                entries, finished = await self.journal_call("read_after", journal_id, cursor)
            except JournalMiss:
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(0.02)  # another instance's write on its way
                continue
            return journal_id, entries, finished

    async def resolve(self, name: str, alias: str, tenant: str, dialect: str) -> str:
        """The journal id of the stream ``name`` names for ``tenant`` through
        ``dialect``: ``name`` itself when it is a minted id of that tenant and dialect,
        else the stream its alias leads to.

        Raises:
            JournalMiss: No such stream for this tenant and dialect (one message for
                all: an unknown id and another tenant's are not told apart).
        """
        if _MINTED.fullmatch(name):
            with contextlib.suppress(JournalMiss):
                meta = await self.journal_call("meta", name)
                if "alias" not in meta and _owned(meta, tenant, dialect):
                    return name
        with contextlib.suppress(JournalMiss):
            meta = await self.journal_call("meta", alias)
            target = meta.get("alias")
            if (
                isinstance(target, str)
                and _owned(meta, tenant, dialect)
                and _owned(await self.journal_call("meta", target), tenant, dialect)
            ):
                return target
        raise JournalMiss("no stream with this id (unknown or expired)")

    async def position_after(self, stream_id: str, cursor: str | None) -> int:
        """The position right after ``cursor`` (0 for None), from one read of the stream
        (when nothing follows the cursor yet, its position is not otherwise known).

        Raises:
            JournalMiss: The stream or the cursor is gone.
        """
        if cursor is None:
            return 0
        everything: list[Entry]
        everything, _ = await self.journal_call("read_after", stream_id, None)
        for entry in everything:
            if entry.cursor == cursor:
                return entry.position + 1
        raise JournalMiss(f"cursor {cursor!r} is not in stream {stream_id!r}")

    async def send_entries(self, send: Send, entries: list[Entry]) -> bool:
        """Send journalled entries, joined into writes of up to :data:`REPLAY_BYTES`
        (one per entry would cost a write and a timer per event); False when the client
        was dropped."""
        limit = self.limits.slow_client_seconds
        batch: list[bytes] = []
        size = 0
        for entry in entries:
            batch.append(entry.data)
            size += len(entry.data)
            if size >= REPLAY_BYTES:
                if not await send_body(send, b"".join(batch), limit):
                    return False
                batch = []
                size = 0
        return not batch or await send_body(send, b"".join(batch), limit)

"""A blocking journal written off the streaming path: the writes keep their order,
appends that pile up go in one call, what waits is bounded, a failure is reported once,
and a client's stream does not wait for the journal (while a resume still finds every
event the client was sent)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from polystream import decode
from polystream.journal import MemoryJournal
from polystream.server import _journal_feed
from polystream.server._journal_feed import JournalFeed
from polystream.wire.sse import ServerSentEvent, SSEDecoder

from .conftest import GATEWAY_KEY


class SlowJournal(MemoryJournal):
    """A memory journal that blocks like a database: each write takes ``delay`` seconds
    (in the worker thread), and every call is recorded."""

    blocking = True

    def __init__(self, delay: float = 0.0, fail_on: str | None = None) -> None:
        super().__init__()
        self.delay = delay
        self.fail_on = fail_on
        self.calls: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def _slow(self, kind: str, detail: Any) -> None:
        time.sleep(self.delay)
        with self.lock:
            self.calls.append((kind, detail))
        if kind == self.fail_on:
            raise OSError("disk full")

    def create(self, stream_id: str, meta: dict[str, Any], *, now: float = 0.0) -> None:
        self._slow("create", stream_id)
        super().create(stream_id, meta, now=now)

    def append(self, stream_id: str, entries: list[tuple[str, bytes]], *, now: float = 0.0) -> None:
        self._slow("append", [cursor for cursor, _ in entries])
        super().append(stream_id, entries, now=now)

    def finish(self, stream_id: str, *, now: float = 0.0) -> None:
        self._slow("finish", stream_id)
        super().finish(stream_id, now=now)


def test_writes_in_order_with_piled_up_appends_joined() -> None:
    journal = SlowJournal(delay=0.05)
    errors: list[Exception] = []

    async def main() -> None:
        feed = JournalFeed(journal, errors.append)
        feed.create("s", {"dialect": "openai_chat"})
        for n in range(5):  # handed over while the create is being written
            await feed.append("s", [(str(n), b"x")])
        feed.finish("s")
        assert journal.calls == []  # nothing waited for the journal
        await feed.flushed()

    asyncio.run(main())
    assert journal.calls == [
        ("create", "s"),
        ("append", ["0", "1", "2", "3", "4"]),
        ("finish", "s"),
    ]
    assert errors == []
    entries, finished = journal.read_after("s", None)
    assert [e.cursor for e in entries] == ["0", "1", "2", "3", "4"] and finished


def test_an_append_waits_once_too_much_is_unwritten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_journal_feed, "MAX_PENDING_BYTES", 100)
    journal = SlowJournal(delay=0.02)
    written_when_returned: list[int] = []

    async def main() -> None:
        feed = JournalFeed(journal, lambda exc: None)
        feed.create("s", {})
        for n in range(6):
            await feed.append("s", [(str(n), b"y" * 40)])
            written_when_returned.append(sum(len(d) for k, d in journal.calls if k == "append"))
        await feed.flushed()

    asyncio.run(main())
    # The first two appends (80 bytes) return at once; the third passes the bound and
    # returns only once everything handed over is written; and so on.
    assert written_when_returned == [0, 0, 3, 3, 3, 6]


def test_a_failed_write_is_reported_once_and_the_rest_dropped() -> None:
    journal = SlowJournal(fail_on="append")
    errors: list[Exception] = []

    async def main() -> None:
        feed = JournalFeed(journal, errors.append)
        feed.create("s", {})
        await feed.append("s", [("1", b"a")])
        await feed.flushed()
        assert feed.failed
        await feed.append("s", [("2", b"b")])
        feed.finish("s")
        await feed.flushed()

    asyncio.run(main())
    assert [type(e) for e in errors] == [OSError]
    assert [kind for kind, _ in journal.calls] == ["create", "append"]


def _events(data: bytes) -> list[ServerSentEvent]:
    return [f for f in SSEDecoder().feed(data) if isinstance(f, ServerSentEvent)]


def test_the_client_does_not_wait_for_a_slow_journal(stack: Callable[..., Any]) -> None:
    """Each write to the journal takes 0.3 s: the client has the whole reply before the
    journal has its events, and a resume from its third event gets exactly the rest."""
    journal = SlowJournal(delay=0.3)
    reply = {"text": ["one ", "two ", "three ", "four ", "five"]}
    _, gateway = stack("openai_chat", [{"reply": reply}], journal=journal)
    message = {"role": "user", "content": "count"}
    body = {"model": "m", "max_tokens": 50, "stream": True, "messages": [message]}
    headers = {"x-api-key": GATEWAY_KEY}
    response = httpx.post(
        gateway.base_url + "/anthropic/v1/messages", headers=headers, json=body, timeout=30
    )
    with journal.lock:
        recorded = [c for kind, cursors in journal.calls if kind == "append" for c in cursors]
    events = _events(response.content)
    assert decode(response.content, "anthropic_messages").text == "one two three four five"
    assert len(recorded) < len(events)  # the reply was not held behind the journal
    last_id = events[2].id
    assert last_id is not None
    tail = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers={**headers, "last-event-id": last_id},
        json=body,
        timeout=30,
    )
    assert tail.status_code == 200
    assert [(e.event, e.data) for e in _events(tail.content)] == [
        (e.event, e.data) for e in events[3:]
    ]


def test_a_resume_waits_for_another_instance_to_journal_its_cursor() -> None:
    """With a shared journal, another instance writes a stream off its client's path: a
    resume naming an event not journalled yet waits for it (up to a bound) instead of
    answering 404, and one naming an unknown stream still gets its 404."""
    from .test_resume import _resume_in_process

    stream = "abcdefabcdefabcdefabcdefabcdef00"
    journal = SlowJournal()
    journal.create(stream, {"dialect": "anthropic_messages"})
    journal.append(stream, [(f"{stream}.1", b"id: 1\ndata: {}\n\n")])

    async def other_instance() -> None:
        await asyncio.sleep(0.2)
        journal.append(stream, [(f"{stream}.{n}", b"id: %d\ndata: {}\n\n" % n) for n in (2, 3)])
        journal.finish(stream)

    sent = asyncio.run(_resume_in_process(journal, f"{stream}.2", other_instance()))
    assert sent[0]["status"] == 200
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"id: 3\ndata: {}\n\n"
    sent = asyncio.run(_resume_in_process(journal, "0000.1"))
    assert sent[0]["status"] == 404


def test_a_stream_waits_for_its_journal_only_past_the_bound(
    stack: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paced stream through a slow journal with a small bound: no entries are handed
    over while more than the bound waits (on polystream's own server, reads handled in
    the upstream connection's callback stop there and leave the wait to the request's
    task, then take over again); the client gets the whole stream and the journal every
    event it was sent."""
    from polystream.client import AsyncEventStream

    bound = 1000
    monkeypatch.setattr(_journal_feed, "MAX_PENDING_BYTES", bound)
    over_bound: list[int] = []
    crossings: list[int] = []
    real_put = JournalFeed._put

    def checked_put(self: JournalFeed, kind: str, stream_id: str, argument: Any, size: int) -> None:
        if kind == "append" and self._pending > bound:
            over_bound.append(self._pending)
        real_put(self, kind, stream_id, argument, size)
        if self._pending > bound:
            crossings.append(self._pending)

    monkeypatch.setattr(JournalFeed, "_put", checked_put)
    pushes: list[int] = []
    real_push = AsyncEventStream.push

    def counted_push(self: AsyncEventStream, *args: Any) -> Any:
        future = real_push(self, *args)
        if future is not None:
            pushes.append(1)
        return future

    monkeypatch.setattr(AsyncEventStream, "push", counted_push)
    journal = SlowJournal(delay=0.01)
    deltas = [f"word{i:03d} " for i in range(120)]
    scenario = {"reply": {"text": deltas}, "timing": {"first_event": 0, "delay": 0.002}}
    _, gateway = stack("openai_chat", [scenario], journal=journal)
    message = {"role": "user", "content": "count"}
    body = {"model": "m", "max_tokens": 500, "stream": True, "messages": [message]}
    response = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers={"x-api-key": GATEWAY_KEY},
        json=body,
        timeout=30,
    )
    assert response.status_code == 200
    assert decode(response.content, "anthropic_messages").text == "".join(deltas)
    assert over_bound == []
    events = _events(response.content)
    stream_id = response.headers["x-polystream-stream-id"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        entries, finished = journal.read_after(stream_id, None)
        if finished:
            break
        time.sleep(0.02)
    assert finished
    assert [entry.cursor for entry in entries] == [e.id for e in events]
    appends = [cursors for kind, cursors in journal.calls if kind == "append"]
    assert len(appends) < len(events)  # appends piled up while one was written
    assert len(crossings) > 1  # the stream went past the bound, more than once
    if gateway.server == "polystream":
        assert len(pushes) > 1  # pushing stopped at the bound and began again
    else:
        assert pushes == []  # (another server has no send without waiting)

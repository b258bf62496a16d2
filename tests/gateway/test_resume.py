"""Resume through the gateway: upstream drops resumed exactly once, and clients that
disconnect resuming from the journal (memory, SQLite, and Redis shared by two gateway
instances)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from polystream import decode
from polystream.gateway_core import GatewayConfig, Upstream
from polystream.journal import Journal, MemoryJournal
from polystream.server import gateway as gateway_module
from polystream.server.journal_redis import RedisJournal
from polystream.server.journal_sqlite import SQLiteJournal
from polystream.wire.sse import ServerSentEvent, SSEDecoder
from tests.journal.test_journal import redis_url  # noqa: F401  (fixture)

from .conftest import GATEWAY_KEY, AppThread

REPLY: dict[str, Any] = {
    "reasoning": {"text": "Weighing it.", "signature": "c2lnLXJlc3VtZQ=="},
    "text": ["one ", "two ", "three ", "four ", "five ", "six."],
    "usage": {"input_tokens": 10, "output_tokens": 12},
}
ANTHROPIC = {"x-api-key": GATEWAY_KEY}
OPENAI = {"authorization": f"Bearer {GATEWAY_KEY}"}
MESSAGES_BODY = {
    "model": "claude-x",
    "max_tokens": 100,
    "stream": True,
    "messages": [{"role": "user", "content": "count"}],
}


def _events(data: bytes) -> list[ServerSentEvent]:
    return [f for f in SSEDecoder().feed(data) if isinstance(f, ServerSentEvent)]


def _full(gateway: AppThread) -> bytes:
    return httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers=ANTHROPIC,
        json=MESSAGES_BODY,
        timeout=30,
    ).content


@pytest.mark.parametrize("paced", [False, True], ids=["burst", "paced"])
@pytest.mark.parametrize("upstream", ["gemini_interactions", "openai_responses"])
def test_upstream_drop_at_every_event_is_resumed_exactly_once(
    stack: Callable[..., Any], upstream: str, paced: bool
) -> None:
    # Paced, each upstream event is a read of its own, handled where it arrives (on
    # polystream's own server), and the drop is the end of input in the middle of that.
    timing = {"timing": {"first_event": 0, "delay": 0.002}} if paced else {}
    _, clean = stack(upstream, [{"reply": REPLY, **timing}], background=True)
    expected = decode(_full(clean), "anthropic_messages")
    assert expected.status == "completed"
    expected_names = [(e.event, e.data) for e in _events(_full(clean))]
    total = len(expected_names)
    assert total > 10
    # Drop the upstream connection after each of its events in turn.
    for drop in range(1, 20):
        emulator, gateway = stack(
            upstream,
            [{"reply": REPLY, "faults": {"drop_at_event": drop}, **timing}],
            background=True,
        )
        body = _full(gateway)
        result = decode(body, "anthropic_messages")
        assert result.status == "completed", (drop, result.error)
        assert result.text == expected.text == "one two three four five six."
        assert result.reasoning == expected.reasoning
        names = [e.event for e in _events(body)]
        assert names == [e for e, _ in expected_names], drop
        emulator.stop()
        gateway.stop()


def _read_some_then_drop(
    gateway: AppThread, path: str, headers: dict[str, str], body: dict[str, Any], count: int
) -> tuple[bytes, dict[str, str]]:
    """Read ``count`` SSE events, then close the connection."""
    got = b""
    with httpx.stream(
        "POST", gateway.base_url + path, headers=headers, json=body, timeout=30
    ) as response:
        assert response.status_code == 200
        response_headers = dict(response.headers)
        for chunk in response.iter_bytes():
            got += chunk
            if len(_events(got)) >= count:
                break
    # Keep whole events only: what a client's SSE parser would have dispatched.
    cut = got.rfind(b"\n\n") + 2
    return got[:cut], response_headers


def _journals(kind: str, tmp_path: Path, redis: str | None) -> Journal:
    if kind == "memory":
        return MemoryJournal()
    if kind == "sqlite":
        return SQLiteJournal(str(tmp_path / "j.db"))
    assert redis is not None
    return RedisJournal(redis, prefix=f"gw:{tmp_path.name}")


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_client_resumes_with_last_event_id(
    stack: Callable[..., Any], tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    redis = request.getfixturevalue("redis_url") if kind == "redis" else None
    scenario = [{"reply": REPLY, "timing": {"delay": 0.05}}]
    journal = _journals(kind, tmp_path, redis)
    emulator, gateway = stack("openai_chat", scenario, journal=journal, resume_grace_seconds=10)
    expected = decode(_full(gateway), "anthropic_messages")
    head, headers = _read_some_then_drop(
        gateway, "/anthropic/v1/messages", ANTHROPIC, MESSAGES_BODY, count=4
    )
    assert "x-polystream-stream-id" in headers
    last_id = _events(head)[-1].id
    assert last_id is not None and last_id.startswith(headers["x-polystream-stream-id"])
    # The same request again with Last-Event-ID, as an EventSource reconnects.
    # With Redis, a *second* gateway instance sharing the journal serves the resume.
    resumer = gateway
    if kind == "redis":
        _, resumer = stack(
            "openai_chat",
            scenario,
            emulator=emulator,
            journal=_journals(kind, tmp_path, redis),
            resume_grace_seconds=10,
        )
    tail = httpx.post(
        resumer.base_url + "/anthropic/v1/messages",
        headers={**ANTHROPIC, "last-event-id": last_id},
        json=MESSAGES_BODY,
        timeout=30,
    )
    assert tail.headers["x-polystream-resumed"] == "suffix"
    whole = head + tail.content
    ids = [e.id for e in _events(whole)]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
    result = decode(whole, "anthropic_messages")
    assert result.status == "completed"
    assert result.text == expected.text


def test_openai_client_resumes_with_starting_after(stack: Callable[..., Any]) -> None:
    scenario = [{"reply": REPLY, "timing": {"delay": 0.05}}]
    _, gateway = stack("anthropic_messages", scenario, resume_grace_seconds=10)
    body = {"model": "gpt-x", "input": "count", "stream": True}
    head, _ = _read_some_then_drop(gateway, "/openai/v1/responses", OPENAI, body, count=5)
    events = _events(head)
    import json

    created = json.loads(events[0].data)
    response_id = created["response"]["id"]
    last_seq = json.loads(events[-1].data)["sequence_number"]
    tail = httpx.get(
        gateway.base_url + f"/openai/v1/responses/{response_id}",
        params={"stream": "true", "starting_after": str(last_seq)},
        headers=OPENAI,
        timeout=30,
    )
    assert tail.status_code == 200
    sequence = [json.loads(e.data)["sequence_number"] for e in _events(head + tail.content)]
    assert sequence == list(range(len(sequence)))  # each event exactly once, in order
    result = decode(head + tail.content, "openai_responses")
    assert result.status == "completed"
    assert result.text == "one two three four five six."


def test_unknown_stream_cannot_be_resumed(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", [{"reply": REPLY}])
    response = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers={**ANTHROPIC, "last-event-id": "nope.3"},
        json=MESSAGES_BODY,
    )
    assert response.status_code == 404
    assert "cannot resume" in response.json()["error"]["message"]


LONG = [{"reply": {"text": ["x"] * 200}, "timing": {"delay": 0.05}}]
"""200 deltas 50 ms apart: 10 s, longer than any of these tests waits."""


def _dropped_after_three(stack: Callable[..., Any], **limits: Any) -> tuple[Any, Any]:
    """A gateway streaming LONG to a Messages client that leaves after 3 events."""
    emulator, gateway = stack("openai_chat", LONG, **limits)
    _read_some_then_drop(gateway, "/anthropic/v1/messages", ANTHROPIC, MESSAGES_BODY, count=3)
    return emulator, gateway


def _cancelled_within(emulator: Any, seconds: float) -> int:
    """The emulator's count of cancelled streams, once one is or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not emulator.stats.cancelled:
        time.sleep(0.02)
    return int(emulator.stats.cancelled)


def test_client_disconnect_cancels_the_upstream(stack: Callable[..., Any]) -> None:
    emulator, _ = _dropped_after_three(stack)
    assert _cancelled_within(emulator, 1.0) == 1, (
        "the upstream kept streaming after the client left"
    )


def test_with_a_grace_period_the_upstream_is_read_for_that_long_then_cancelled(
    stack: Callable[..., Any],
) -> None:
    # A resumable stream (the journal is fed) outlives its client by the grace period:
    # the upstream goes on streaming into the journal, then the call is cancelled.
    emulator, _ = _dropped_after_three(stack, resume_grace_seconds=1.0)
    time.sleep(0.3)
    assert emulator.stats.cancelled == 0, "cancelled before the grace period ended"
    assert _cancelled_within(emulator, 6.0) == 1, "the upstream kept streaming past the grace"
    assert emulator.stats.completed == 0


def test_a_stream_in_its_grace_period_holds_its_concurrency_slot(
    stack: Callable[..., Any],
) -> None:
    emulator, gateway = _dropped_after_three(stack, resume_grace_seconds=1.0, max_concurrency=1)
    url = gateway.base_url + "/anthropic/v1/messages"
    # Its upstream call still runs, into the journal: the gateway is full.
    busy = httpx.post(url, headers=ANTHROPIC, json=MESSAGES_BODY, timeout=30)
    assert busy.status_code == 503
    assert _cancelled_within(emulator, 6.0) == 1
    # The grace period over, the slot is free again.
    for _ in range(50):
        with httpx.stream("POST", url, headers=ANTHROPIC, json=MESSAGES_BODY, timeout=30) as r:
            status = r.status_code
        if status != 503:
            break
        time.sleep(0.02)  # (the slot is freed once the cancelled call has closed)
    assert status == 200


async def _resume_in_process(
    journal: Journal, last_event_id: str, *alongside: Any
) -> list[dict[str, Any]]:
    """What a gateway on ``journal`` sends for a Messages request with Last-Event-ID
    (an ASGI call in this process, while the ``alongside`` coroutines run)."""
    config = GatewayConfig(upstreams={"a": Upstream(name="a", dialect="anthropic_messages")})
    app = gateway_module.create_gateway(config, journal=journal)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/anthropic/v1/messages",
        "query_string": b"",
        "headers": [(b"last-event-id", last_event_id.encode())],
    }
    await asyncio.gather(app(scope, receive, send), *alongside)  # type: ignore[arg-type]
    return sent


@pytest.mark.parametrize("entries", [1, 7, 20_000])
def test_a_long_journal_is_replayed_whole_in_few_writes(entries: int) -> None:
    """A resume sends the journalled suffix byte for byte, in writes of whole entries up
    to 64 KiB each (not one write, and one send timer, per event)."""
    stream = "0123456789abcdef0123456789abcdef"
    journal = MemoryJournal()
    journal.create(stream, {"dialect": "anthropic_messages"})
    kept = [
        (
            f"{stream}.{n}",
            f"id: {stream}.{n}\nevent: content_block_delta\ndata: "
            f'{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta",'
            f'"text":"{"word " * (n % 9)}"}}}}\n\n'.encode(),
        )
        for n in range(1, entries + 1)
    ]
    journal.append(stream, kept)
    journal.finish(stream)
    sent = asyncio.run(_resume_in_process(journal, f"{stream}.1"))
    assert sent[0]["type"] == "http.response.start"
    writes = [m["body"] for m in sent[1:]]
    assert writes[-1] == b"" and sent[-1]["more_body"] is False
    suffix = [data for _, data in kept[1:]]
    assert b"".join(writes) == b"".join(suffix)
    limit = gateway_module._REPLAY_BYTES
    assert limit == 64 * 1024
    longest = max((len(d) for d in suffix), default=0)
    assert all(len(w) < limit + longest for w in writes)
    assert all(len(w) >= limit for w in writes[:-2])  # all but the last two reach it
    ends = set(itertools.accumulate(len(d) for d in suffix))
    assert set(itertools.accumulate(len(w) for w in writes[:-1])) <= ends  # whole entries


def test_a_resume_at_the_tip_follows_without_reading_the_whole_stream_again() -> None:
    """A client that resumes with the last event it has (nothing after it yet) gets the
    events journalled later, exactly once, and the gateway's polls read from a position
    on: the whole stream is read once to find the cursor, not on every poll."""
    stream = "feedfacefeedfacefeedfacefeedface"
    calls: list[str] = []

    class Counting(MemoryJournal):
        def read_after(self, stream_id: str, cursor: str | None) -> Any:
            calls.append(f"read_after {cursor}")
            return super().read_after(stream_id, cursor)

        def read_from(self, stream_id: str, position: int) -> Any:
            calls.append(f"read_from {position}")
            return super().read_from(stream_id, position)

    journal = Counting()
    journal.create(stream, {"dialect": "anthropic_messages"})
    journal.append(stream, [(f"{stream}.{n}", b"id: %d\ndata: {}\n\n" % n) for n in (1, 2, 3)])

    async def later() -> None:
        await asyncio.sleep(0.15)
        journal.append(stream, [(f"{stream}.4", b"id: 4\ndata: {}\n\n")])
        await asyncio.sleep(0.1)
        journal.append(stream, [(f"{stream}.5", b"id: 5\ndata: {}\n\n")])
        journal.finish(stream)

    sent = asyncio.run(_resume_in_process(journal, f"{stream}.3", later()))
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert body == b"id: 4\ndata: {}\n\nid: 5\ndata: {}\n\n"
    assert calls[:2] == [f"read_after {stream}.3", "read_after None"]
    polls = calls[2:]
    assert len(polls) >= 5 and all(c.startswith("read_from ") for c in polls)
    assert set(polls) <= {"read_from 3", "read_from 4"}
    assert polls[-1] == "read_from 4"

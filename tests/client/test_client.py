"""polystream.Client and AsyncClient against the emulator over loopback: every dialect,
typed errors, retries, in-band errors, timeouts, cancellation and resume."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from polystream.client import AsyncClient, Client
from polystream.errors import APIStatusError, LocalProtocolError
from polystream.events import BlockStart, Event, Finish, StreamStart, TextDelta, Warning

from .conftest import FAST, MODEL, base_urls

DIALECTS = list(MODEL)

REPLY: dict[str, Any] = {
    "reasoning": {"text": "Thinking it over.", "signature": "c2lnLTE="},
    "text": ["The ", "answer ", "is ", "forty-two."],
    "usage": {"input_tokens": 12, "output_tokens": 30, "reasoning_tokens": 8},
}


def run(client: Client, dialect: str, **kw: Any) -> tuple[list[Event], Any]:
    stream = client.stream(
        dialect, model=MODEL[dialect], prompt=kw.pop("prompt", "hello there"), **kw
    )
    events = list(stream)
    return events, stream


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_streams_and_rebuilds(
    client_for: Callable[..., Client], dialect: str
) -> None:
    client = client_for([{"reply": REPLY}])
    events, stream = run(client, dialect)
    result = stream.result()
    assert result.status == "completed", result.error
    assert result.text == "The answer is forty-two."
    assert result.dialect == dialect
    assert sum(isinstance(e, Finish) for e in events) == 1 and isinstance(events[-1], Finish)
    assert isinstance(stream.native(), dict)
    assert stream.call.attempts == 1


def test_default_reply_contains_the_prompt(client_for: Callable[..., Client]) -> None:
    _, stream = run(client_for(), "anthropic_messages", prompt="ping 123")
    assert "ping 123" in stream.result().text


def test_request_id_and_headers_are_captured(client_for: Callable[..., Client]) -> None:
    _, stream = run(client_for(), "openai_chat")
    assert stream.call.headers["content-type"].startswith("text/event-stream")


def test_http_error_before_stream_is_typed(client_for: Callable[..., Client]) -> None:
    client = client_for(
        [{"reply": REPLY, "faults": {"http_error": {"status": 400, "message": "bad thing"}}}]
    )
    with pytest.raises(APIStatusError) as info:
        run(client, "anthropic_messages")
    assert info.value.status_code == 400
    assert info.value.kind == "invalid_request"
    assert "bad thing" in str(info.value)


@pytest.mark.parametrize("status", [429, 500, 503, 529])
def test_retryable_status_is_retried_with_a_visible_event(
    client_for: Callable[..., Client], status: int
) -> None:
    client = client_for(
        [
            {
                "reply": REPLY,
                "faults": {"http_error": {"status": status, "retry_after": 0.01, "times": 1}},
            }
        ]
    )
    events, stream = run(client, "openai_chat")
    retries = [e for e in events if isinstance(e, Warning) and e.code == "retry"]
    assert len(retries) == 1 and f"HTTP {status}" in retries[0].message
    assert stream.result().status == "completed"
    assert stream.result().text == "The answer is forty-two."
    assert stream.call.attempts == 2


def test_retries_are_bounded(client_for: Callable[..., Client]) -> None:
    client = client_for([{"reply": REPLY, "faults": {"http_error": {"status": 503}}}])
    with pytest.raises(APIStatusError) as info:
        run(client, "openai_responses")
    assert info.value.status_code == 503 and info.value.kind == "overloaded"
    assert client.retry.max_retries == 3


def test_in_band_overload_before_output_is_retried(client_for: Callable[..., Client]) -> None:
    # The error comes before any block: nothing was delivered, so the call starts over.
    client = client_for(
        [
            {
                "match": {"contains": "hello"},
                "reply": REPLY,
                "faults": {"error": {"after": 0, "kind": "overloaded", "message": "Overloaded"}},
            },
        ]
    )
    client.retry = FAST
    events, stream = run(client, "anthropic_messages")
    # Every attempt of this scenario fails the same way: bounded retries, then failed.
    retries = [e for e in events if isinstance(e, Warning) and e.code == "retry"]
    assert len(retries) == FAST.max_retries
    result = stream.result()
    assert result.status == "failed"
    assert result.error is not None and result.error.kind == "overloaded"
    assert sum(isinstance(e, StreamStart) for e in events) == 1  # never duplicated


def test_in_band_error_after_output_is_not_retried(client_for: Callable[..., Client]) -> None:
    client = client_for([{"reply": REPLY, "faults": {"error": {"after": 6, "kind": "overloaded"}}}])
    events, stream = run(client, "anthropic_messages")
    assert not [e for e in events if isinstance(e, Warning) and e.code == "retry"]
    result = stream.result()
    assert result.status == "failed"
    assert result.error is not None and result.error.kind == "overloaded"
    assert result.error.retryable is True
    assert stream.call.attempts == 1


def test_drop_without_resume_is_truncated_with_reason(client_for: Callable[..., Client]) -> None:
    client = client_for([{"reply": REPLY, "faults": {"drop_at_event": 5}}])
    _, stream = run(client, "anthropic_messages")
    result = stream.result()
    assert result.status == "truncated"
    assert result.error is not None and "has no resume" in result.error.message


def test_idle_timeout_ends_truncated(client_for: Callable[..., Client]) -> None:
    client = client_for(
        [{"reply": REPLY, "timing": {"first_event": 0.0, "delay": 1.0}}], idle_timeout=0.3
    )
    _, stream = run(client, "openai_chat")
    result = stream.result()
    assert result.status == "truncated"
    assert result.error is not None and "no data for 0.3 s" in result.error.message


def test_cancel_closes_the_upstream(client_for: Callable[..., Client]) -> None:
    client = client_for([{"reply": {"text": ["x"] * 50}, "timing": {"delay": 0.05}}])
    stream = client.stream("openai_chat", model=MODEL["openai_chat"], prompt="hi")
    for event in stream:
        if isinstance(event, TextDelta):
            break
    stream.close()
    result = stream.call.result()
    assert result.status == "failed" and result.error is not None
    assert result.error.kind == "cancelled"
    server = client.server  # type: ignore[attr-defined]
    for _ in range(100):
        if server.stats.cancelled:
            break
        import time

        time.sleep(0.02)
    assert server.stats.cancelled == 1


def _resume_events(client: Client, dialect: str) -> tuple[list[Event], Any]:
    events, stream = run(client, dialect, background=dialect == "openai_responses")
    return events, stream


@pytest.mark.parametrize("dialect", ["openai_responses", "gemini_interactions"])
def test_resume_at_every_event_boundary(serve: Callable[..., Any], dialect: str) -> None:
    clean_server = serve([{"reply": REPLY}])
    with Client(api_key="k", base_url=base_urls(clean_server), retry=FAST) as clean:
        expected_events, expected = _resume_events(clean, dialect)
    expected_result = expected.result()
    content = [e for e in expected_events if not isinstance(e, Warning)]
    total = len(content)
    assert total > 8
    for drop in range(1, total):
        server = serve([{"reply": REPLY, "faults": {"drop_at_event": drop}}])
        with Client(api_key="k", base_url=base_urls(server), retry=FAST) as client:
            events, stream = _resume_events(client, dialect)
        got = [e for e in events if not isinstance(e, Warning)]
        result = stream.result()
        assert result.status == "completed", (drop, result.error)
        assert result.text == expected_result.text, drop
        assert result.reasoning == expected_result.reasoning, drop
        assert [type(e).__name__ for e in got] == [type(e).__name__ for e in content], drop
        assert sum(isinstance(e, BlockStart) for e in got) == sum(
            isinstance(e, BlockStart) for e in content
        )
        server.stop()


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LocalProtocolError, match="ANTHROPIC_API_KEY"):
        Client().stream("anthropic_messages", model="m", prompt="x")


def test_connection_refused_is_retried_then_typed() -> None:
    from polystream.errors import TransportError

    client = Client(api_key="k", base_url="http://127.0.0.1:9/v1", retry=FAST)
    with pytest.raises(TransportError, match="cannot reach"):
        list(client.stream("openai_chat", model="m", prompt="x"))


def test_async_client(serve: Callable[..., Any]) -> None:
    server = serve([{"reply": REPLY}])

    async def main() -> tuple[list[Event], Any]:
        async with AsyncClient(api_key="k", base_url=base_urls(server), retry=FAST) as client:
            stream = client.stream("gemini_generate", model=MODEL["gemini_generate"], prompt="hi")
            events = [e async for e in stream]
            return events, await stream.result()

    events, result = asyncio.run(main())
    assert result.status == "completed"
    assert result.text == "The answer is forty-two."
    assert isinstance(events[-1], Finish)

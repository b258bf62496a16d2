"""The official Anthropic SDK against the emulator, over loopback: Anthropic Messages
and xAI's deprecated /v1/messages."""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import httpx2
import pytest

from polystream.server import ServerThread
from tests.server.support import WEATHER, require, track

ROOTS = {"anthropic_messages": "/anthropic", "xai_messages": "/xai"}
MODELS = {"anthropic_messages": "claude-sonnet-5-5", "xai_messages": "grok-4.3"}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def client(server: ServerThread, dialect: str, **options: object) -> anthropic.Anthropic:
    return track(
        anthropic.Anthropic(
            api_key="test",
            base_url=server.base_url + ROOTS[dialect],
            **options,  # type: ignore[arg-type]
        )
    )


@pytest.mark.parametrize("dialect", ["anthropic_messages", "xai_messages"])
def test_default_reply_stream_and_unary(server: ServerThread, dialect: str) -> None:
    require(dialect)
    sdk = client(server, dialect)
    message = sdk.messages.create(
        model=MODELS[dialect], max_tokens=100, messages=[{"role": "user", "content": "Ünïcode ok?"}]
    )
    assert message.stop_reason == "end_turn"
    assert message.content[0].type == "text"
    assert "Ünïcode ok?" in message.content[0].text
    with sdk.messages.stream(
        model=MODELS[dialect], max_tokens=100, messages=[{"role": "user", "content": "Ünïcode ok?"}]
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == message.content[0].text  # type: ignore[union-attr]
    assert final.usage.output_tokens > 0


def test_thinking_text_and_tool_use(serve: Callable[..., ServerThread]) -> None:
    require("anthropic_messages")
    server = serve([WEATHER])
    sdk = client(server, "anthropic_messages")
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    with sdk.messages.stream(
        model=MODELS["anthropic_messages"],
        max_tokens=100,
        messages=USER,
        tools=tools,  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text", "tool_use"]
    thinking, text, tool = final.content
    # A scenario's signature did not come from Anthropic: the encoder carries it in the
    # documented carrier (polystream:v1:<source>:...) rather than passing it as its own.
    assert thinking.type == "thinking" and thinking.signature == "c2lnLTE="
    assert thinking.thinking == "The user wants the weather. Call the tool."
    assert text.type == "text" and text.text == "Let me check."
    assert tool.type == "tool_use" and tool.name == "get_weather"
    assert tool.input == {"city": "Paris"}
    assert final.stop_reason == "tool_use"
    unary = sdk.messages.create(model=MODELS["anthropic_messages"], max_tokens=100, messages=USER)  # type: ignore[arg-type]
    assert [block.type for block in unary.content] == ["thinking", "text", "tool_use"]
    assert unary.stop_reason == "tool_use"


def test_xai_messages_reuses_block_index_zero(serve: Callable[..., ServerThread]) -> None:
    """xAI's /v1/messages opens every block at index 0 (spec §2 quirk), which the
    Anthropic SDK's stream accumulator cannot follow; the unary answer is whole."""
    require("xai_messages")
    server = serve([WEATHER])
    sdk = client(server, "xai_messages")
    events = list(sdk.messages.create(model="grok-4.3", max_tokens=100, messages=USER, stream=True))  # type: ignore[arg-type]
    starts = [e for e in events if e.type == "content_block_start"]
    assert [e.content_block.type for e in starts] == ["thinking", "text", "tool_use"]  # type: ignore[union-attr]
    assert {e.index for e in starts} == {0}  # type: ignore[union-attr]
    assert not any(e.type == "ping" for e in events)
    unary = sdk.messages.create(model="grok-4.3", max_tokens=100, messages=USER)  # type: ignore[arg-type]
    assert [block.type for block in unary.content] == ["thinking", "text", "tool_use"]
    assert unary.content[1].text == "Let me check."  # type: ignore[union-attr]
    assert unary.stop_reason == "tool_use"


def test_overloaded_529_and_rate_limit(serve: Callable[..., ServerThread]) -> None:
    require("anthropic_messages")
    server = serve(
        [
            {"match": {"contains": "busy"}, "faults": {"http_error": {"status": 529}}},
            {
                "match": {"contains": "fast"},
                "faults": {"http_error": {"status": 429, "retry_after": 3}},
            },
        ]
    )
    sdk = client(server, "anthropic_messages", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        sdk.messages.create(
            model="claude-sonnet-5-5", max_tokens=10, messages=[{"role": "user", "content": "busy"}]
        )
    assert caught.value.status_code == 529
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": caught.value.response.headers["request-id"],
    }
    with pytest.raises(anthropic.RateLimitError) as limited:
        sdk.messages.create(
            model="claude-sonnet-5-5", max_tokens=10, messages=[{"role": "user", "content": "fast"}]
        )
    assert limited.value.response.headers["retry-after"] == "3"


def test_in_band_overloaded_error(serve: Callable[..., ServerThread]) -> None:
    require("anthropic_messages")
    server = serve([{"faults": {"error": {"after": 3, "kind": "overloaded"}}}])
    sdk = client(server, "anthropic_messages", max_retries=0)
    seen = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        for event in sdk.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=10,
            messages=USER,
            stream=True,  # type: ignore[arg-type]
        ):
            seen.append(event.type)
    assert "overloaded_error" in str(caught.value)
    assert seen[0] == "message_start"
    assert "message_stop" not in seen


def test_dropped_connection_and_missing_terminal(serve: Callable[..., ServerThread]) -> None:
    require("anthropic_messages")
    server = serve(
        [
            {"match": {"contains": "drop"}, "faults": {"drop_at_event": 3}},
            {"match": {"contains": "cut"}, "faults": {"no_terminal": True}},
        ]
    )
    sdk = client(server, "anthropic_messages", max_retries=0)
    # The SDK does not wrap a transport error raised while iterating a stream.
    with pytest.raises((anthropic.APIConnectionError, httpx2.TransportError)):
        list(
            sdk.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=10,
                stream=True,
                messages=[{"role": "user", "content": "drop"}],
            )
        )
    # A clean close without message_stop: the SDK's stream just ends (a bug class the
    # unified decoder reports as "truncated"); the events stop before message_stop.
    types = [
        e.type
        for e in sdk.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=10,
            stream=True,
            messages=[{"role": "user", "content": "cut"}],
        )
    ]
    assert types[0] == "message_start"
    assert "message_stop" not in types

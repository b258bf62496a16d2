"""xai_responses: the xAI quirks over the shared Responses implementation."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from polystream import decode, decode_events
from polystream.accumulate import accumulate
from polystream.dialects._responses.quirks import XAI
from polystream.dialects._responses.usage import to_usage as _to_usage
from polystream.dialects.xai_responses import Decoder, Encoder, rebuild
from polystream.events import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
)
from tests.helpers import FIXTURES, native_frames


def to_usage(raw: Any) -> Usage | None:
    """The dialect's usage conversion (the shared Responses one with its quirks)."""
    return _to_usage(raw, reasoning_maybe_excluded=XAI.reasoning_maybe_excluded)


D = "xai_responses"
FIX = FIXTURES / D
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_skeleton_reasoning_first_and_snapshot_quirks() -> None:
    data = (FIX / "skeleton.sse").read_bytes()
    events = decode_events(data, D)
    start = events[0]
    assert isinstance(start, StreamStart)
    assert start.dialect == D and start.model == "grok-4.3"
    assert start.created == 0  # xAI's response.created snapshot says created_at: 0
    assert start.extra is not None
    assert start.extra["response"]["reasoning"] == {"effort": None, "summary": None}
    assert UUID.match(start.id or "")
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.index, s.kind) for s in starts] == [(0, "reasoning"), (1, "text")]
    assert all(UUID.match(s.id or "") for s in starts)
    assert [e.delta for e in events if isinstance(e, ReasoningDelta)] == ["The user", " wants OK."]
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["OK"]
    result = accumulate(events)
    assert (result.text, result.reasoning, result.status) == (
        "OK",
        "The user wants OK.",
        "completed",
    )
    # the terminal snapshot has the real creation time
    assert rebuild(events)["created_at"] == 1767225600


def test_function_call_arguments_in_one_delta() -> None:
    events = decode_events((FIX / "function_call_one_delta.sse").read_bytes(), D)
    deltas = [e for e in events if isinstance(e, ToolInputDelta)]
    assert [(d.index, d.delta) for d in deltas] == [(1, '{"city":"Paris"}')]
    assert [e.delta for e in events if isinstance(e, SignatureDelta)] == ["xai-enc-AbC/1+2=="]
    result = accumulate(events)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="completed")


def test_server_side_search_is_a_server_tool_call() -> None:
    events = decode_events((FIX / "server_side_search.sse").read_bytes(), D)
    block = next(e for e in events if isinstance(e, BlockStart) and e.index == 1)
    assert (block.kind, block.name) == ("server_tool_call", "web_search")
    result = accumulate(events)
    assert result.tool_calls == []  # nothing for the client to run
    search = result.blocks[1]
    assert search.arguments == {"query": "xAI news", "num_results": 5}  # the JSON-string input
    assert result.finish_reason == FinishReason(unified="stop", raw="completed")
    assert result.citations[0]["url"] == "https://x.ai/news"
    raw = result.usage.raw
    assert raw["cost_in_usd_ticks"] == 1234500
    assert raw["server_side_tool_usage_details"]["web_search_calls"] == 1
    assert raw["num_sources_used"] == 5


def test_usage_reasoning_counted_apart() -> None:
    raw = {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 45},
        "total_tokens": 66,
        "cost_in_usd_ticks": 1234500,
    }
    assert to_usage(raw) == Usage(
        input_tokens=20,
        output_tokens=46,
        reasoning_tokens=45,
        cache_read_tokens=4,
        total_tokens=66,
        raw=raw,
    )
    # when the total shows reasoning inside output_tokens, nothing is added
    inside = dict(raw, output_tokens=46, total_tokens=66)
    assert to_usage(inside).output_tokens == 46  # type: ignore[union-attr]


def test_incomplete_reason() -> None:
    result = decode((FIX / "incomplete_max_output_tokens.sse").read_bytes(), D)
    assert result.status == "incomplete"
    assert result.finish_reason == FinishReason(unified="length", raw="max_output_tokens")
    assert result.usage.output_tokens == 64


@pytest.mark.parametrize(
    ("reason", "unified"),
    [("max_prompt_tokens", "context_window"), ("max_time_limit", "other")],
)
def test_xai_incomplete_reasons(reason: str, unified: str) -> None:
    data = (
        (FIX / "incomplete_max_output_tokens.sse")
        .read_bytes()
        .replace(b'"reason":"max_output_tokens"', f'"reason":"{reason}"'.encode())
    )
    result = decode(data, D)
    assert result.finish_reason == FinishReason(unified=unified, raw=reason)  # type: ignore[arg-type]


def test_decoder_is_the_shared_one_with_xai_quirks() -> None:
    decoder = Decoder()
    assert decoder.dialect == D
    assert decoder.quirks.custom_tool_kind == "server_tool_call"


def test_encoding_a_foreign_stream_the_xai_way() -> None:
    events = [
        StreamStart(dialect="openai_chat", model="gpt-x", created=1700000000),
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="Hmm.", summary=True),
        BlockEnd(index=0),
        BlockStart(index=1, kind="tool_call", id="call_1", name="f"),
        ToolInputDelta(index=1, delta='{"a"'),
        ToolInputDelta(index=1, delta=":1}"),
        BlockEnd(index=1),
        Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="tool_calls")),
    ]
    data = Encoder().encode_all(events)
    frames = native_frames(data)
    names = [f[0] for f in frames]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    # one delta with the whole JSON
    assert frames[9][1]["delta"] == '{"a":1}'
    # bare UUID ids, created_at 0 in the opening snapshot, the real time at the end
    for frame in frames:
        item = frame[1].get("item")
        if item is not None:
            assert uuid.UUID(item["id"]).version == 4
    assert UUID.match(frames[0][1]["response"]["id"])
    assert frames[0][1]["response"]["created_at"] == 0
    assert frames[-1][1]["response"]["created_at"] == 1700000000
    result = decode(data, D, strict=True)
    assert [(c.id, c.arguments) for c in result.tool_calls] == [("call_1", {"a": 1})]
    assert result.reasoning == "Hmm."


def test_openai_stream_reencoded_as_xai_is_written_anew() -> None:
    # Between providers the native payloads are not reused: encrypted reasoning and
    # usage arithmetic belong to the provider that made them.
    data = (FIXTURES / "openai_responses" / "reasoning_encrypted.sse").read_bytes()
    events = decode_events(data, "openai_responses")
    encoder = Encoder()
    out = encoder.encode_all(events)
    assert native_frames(out) != native_frames(data)
    assert [loss.what for loss in encoder.losses] == ["signature"]
    source, again = accumulate(events), accumulate(decode_events(out, D, strict=True))
    assert (again.text, again.reasoning, again.status) == (
        source.text,
        source.reasoning,
        "completed",
    )
    assert again.blocks[0].signature is None
    assert (again.usage.input_tokens, again.usage.output_tokens) == (30, 200)
    assert all(UUID.match(b.id or "") for b in again.blocks)


def test_xai_server_search_is_not_an_openai_client_tool() -> None:
    from polystream.dialects.openai_responses import Encoder as OpenAIEncoder

    events = decode_events((FIX / "server_side_search.sse").read_bytes(), D)
    encoder = OpenAIEncoder()
    out = encoder.encode_all(events)
    again = accumulate(decode_events(out, "openai_responses", strict=True))
    assert again.tool_calls == []  # an OpenAI client must not run xAI's own search
    assert [b.kind for b in again.blocks] == ["reasoning", "server_tool_call", "text"]
    assert again.blocks[1].arguments == {"type": "search", "query": "xAI news"}
    assert again.text == "xAI shipped Grok. More soon."
    # canonical usage, OpenAI arithmetic: output includes reasoning
    assert (again.usage.output_tokens, again.usage.reasoning_tokens) == (160, 120)


def test_status_updates_of_reasoning_parts() -> None:
    events = decode_events((FIX / "skeleton.sse").read_bytes(), D)
    kinds = [e.extra["type"] for e in events if isinstance(e, StatusUpdate) and e.extra]
    assert kinds[:3] == [
        "response.in_progress",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.done",
    ]
    ends = [e for e in events if isinstance(e, BlockEnd)]
    assert [e.index for e in ends] == [0, 1]
    assert isinstance(events[-1], Finish)


def test_mixed_server_tools() -> None:
    events = decode_events((FIX / "server_tools_mixed.sse").read_bytes(), D, strict=True)
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.kind, s.name) for s in starts] == [
        ("reasoning", None),
        ("server_tool_call", "web_search"),
        ("server_tool_call", "x_keyword_search"),
        ("code", "code_interpreter"),
        ("text", None),
    ]
    # the web search item has no progress events: added, then done
    web = [e for e in events if e.extra and e.extra.get("item_id") == starts[1].id]
    assert web == []
    result = accumulate(events)
    assert result.tool_calls == []
    assert result.blocks[2].arguments == {"query": "from:xai grok", "limit": 3}
    assert result.blocks[3].text == "print(2026 - 2023)"
    assert (result.usage.output_tokens, result.usage.total_tokens) == (320, 1820)
    assert result.usage.raw["server_side_tool_usage_details"]["x_search_calls"] == 1

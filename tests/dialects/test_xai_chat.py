"""xai_chat: the quirks over the shared Chat implementation — reasoning_content,
created 0, whole tool calls with the finish in one chunk, usage placement, and
completion_tokens that exclude reasoning."""

from __future__ import annotations

import json
from typing import Any

import pytest

from polystream import accumulate_events as accumulate
from polystream import decode_events, get_dialect
from polystream.dialects._chat import usage as _chat_usage
from polystream.dialects._chat.quirks import XAI
from polystream.dialects.xai_chat import Decoder, Encoder, rebuild
from polystream.events import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    Metadata,
    ReasoningDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
    UsageUpdate,
)
from tests.dialects.test_openai_chat import foreign_events
from tests.helpers import FIXTURES, native_frames


def convert_usage(raw: Any) -> Usage | None:
    """The dialect's usage conversion (the shared Chat one with its quirks)."""
    return _chat_usage.convert_usage(raw, XAI)


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    return _chat_usage.usage_to_wire(usage, XAI)


DIALECT = "xai_chat"
HERE = FIXTURES / DIALECT


def _events(name: str, **options: Any) -> list[Event]:
    return decode_events((HERE / name).read_bytes(), DIALECT, **options)


def test_skeleton_events() -> None:
    # spec §2: reasoning_content chunks -> content "OK" -> finish stop -> usage -> [DONE]
    events = _events("skeleton.sse")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "StreamStart",
        "BlockStart",
        "ReasoningDelta",
        "ReasoningDelta",
        "ReasoningDelta",
        "BlockEnd",
        "BlockStart",
        "TextDelta",
        "Metadata",
        "BlockEnd",
        "UsageUpdate",
        "Finish",
    ]
    start = events[0]
    assert isinstance(start, StreamStart) and start.created == 0  # xAI sends created: 0
    assert [b.kind for b in events if isinstance(b, BlockStart)] == ["reasoning", "text"]
    assert all(not e.summary for e in events if isinstance(e, ReasoningDelta))
    result = accumulate(events)
    assert (result.reasoning, result.text) == ("The user wants me to reply with OK.", "OK")
    assert result.finish_reason == FinishReason(unified="stop", raw="stop")


def test_reasoning_tokens_are_added_to_output() -> None:
    # xAI: completion_tokens (1) excludes reasoning (38); total (51) includes it.
    finish = _events("skeleton.sse")[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    usage = finish.usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (12, 39, 38)
    assert usage.input_tokens + usage.output_tokens == usage.total_tokens == 51
    assert usage.cache_read_tokens == 3
    assert usage.raw["cost_in_usd_ticks"] == 60 + 25 * 39
    big = _events("reasoning_usage.sse")[-1]
    assert isinstance(big, Finish) and big.usage is not None
    assert (big.usage.output_tokens, big.usage.total_tokens) == (314, 332)


def test_usage_arithmetic_rules() -> None:
    stated = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 45,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    assert convert_usage(stated) == Usage(
        input_tokens=10, output_tokens=35, reasoning_tokens=30, total_tokens=45, raw=stated
    )
    # reasoning already inside completion_tokens (total says so): not added twice
    inside = {
        "prompt_tokens": 10,
        "completion_tokens": 35,
        "total_tokens": 45,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    converted = convert_usage(inside)
    assert converted is not None and converted.output_tokens == 35
    # no total: the xAI rule (reasoning outside completion_tokens) applies
    no_total = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    converted = convert_usage(no_total)
    assert converted is not None
    assert (converted.output_tokens, converted.total_tokens) == (35, 45)
    # and back: completion_tokens in xAI's convention
    assert usage_to_wire(Usage(input_tokens=10, output_tokens=35, reasoning_tokens=30)) == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 45,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }


def test_whole_tool_calls_with_finish_in_one_chunk() -> None:
    events = _events("whole_tool_calls.sse")
    # one native chunk: two complete calls and finish_reason tool_calls
    tail = [
        (type(e).__name__, getattr(e, "index", None))
        for e in events
        if isinstance(e, BlockStart | ToolInputDelta | Metadata | BlockEnd)
    ]
    assert tail == [
        ("BlockStart", 0),
        ("BlockEnd", 0),
        ("BlockStart", 1),
        ("ToolInputDelta", 1),
        ("BlockStart", 2),
        ("ToolInputDelta", 2),
        ("Metadata", None),
        ("BlockEnd", 1),
        ("BlockEnd", 2),
    ]
    result = accumulate(events)
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_58326451", {"city": "Paris"}),
        ("call_90211378", {"city": "Tokyo"}),
    ]
    assert result.reasoning == "Two cities: call the tool twice."
    assert result.usage.output_tokens == 62 + 74


def test_usage_on_second_to_last_chunk_is_not_overwritten() -> None:
    # pain-points #20: a later chunk without usage never erases it.
    events = _events("usage_second_to_last.sse")
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    assert (finish.usage.input_tokens, finish.usage.output_tokens) == (10, 2)
    assert accumulate(events).usage.total_tokens == 12


def test_cumulative_usage_last_non_empty_wins() -> None:
    events = _events("cumulative_usage.sse")
    updates = [e.usage.output_tokens for e in events if isinstance(e, UsageUpdate)]
    assert updates == [1, 2, 4, 4]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    assert finish.usage.output_tokens == 4
    # an empty usage after it changes nothing
    body = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "grok-t",
        "choices": [{"index": 0, "delta": {}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
    data = (
        (HERE / "cumulative_usage.sse")
        .read_bytes()
        .replace(b"data: [DONE]", b"data: " + json.dumps(body).encode() + b"\n\ndata: [DONE]")
    )
    finish = decode_events(data, DIALECT)[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    assert finish.usage.output_tokens == 4


def test_rebuild_has_reasoning_content() -> None:
    native = rebuild(_events("skeleton.sse"))
    assert native["object"] == "chat.completion"
    assert native["created"] == 0
    assert native["choices"][0]["message"] == {
        "role": "assistant",
        "content": "OK",
        "refusal": None,
        "reasoning_content": "The user wants me to reply with OK.",
    }
    assert native["usage"]["completion_tokens"] == 1
    assert native["system_fingerprint"] == "fp_2a5e7c9b31"
    tools = rebuild(_events("whole_tool_calls.sse"))["choices"][0]
    assert tools["finish_reason"] == "tool_calls"
    assert [t["function"]["arguments"] for t in tools["message"]["tool_calls"]] == [
        '{"city":"Paris"}',
        '{"city":"Tokyo"}',
    ]


def test_encode_foreign_uses_xai_shapes() -> None:
    encoder = Encoder()
    data = encoder.encode_all(foreign_events())
    chunks = [v for _, v in native_frames(data) if isinstance(v, dict)]
    assert {c["created"] for c in chunks} == {0}
    # xAI chunks carry no logprobs / null finish_reason keys
    first = chunks[0]["choices"][0]
    assert first == {
        "index": 0,
        "delta": {"role": "assistant", "reasoning_content": "Think about "},
    }
    # reasoning is native on xAI: only the signature goes through the carrier
    assert [(loss.what, loss.carried) for loss in encoder.losses] == [
        ("signature", True),
        ("finish_reason:tool_calls", True),
    ]
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == 45 - 12 and usage["total_tokens"] == 65
    back = accumulate(decode_events(data, DIALECT))
    assert back.usage.output_tokens == 45
    assert back.reasoning == "Think about both cities."


@pytest.mark.parametrize("name", sorted(p.name for p in HERE.glob("*.sse")))
def test_xai_events_encode_as_openai_chat_too(name: str) -> None:
    """Same wire format: events decoded from xAI re-encode verbatim through openai_chat,
    except ``completion_tokens``, rewritten in OpenAI's convention (reasoning included);
    and back through xai_chat the stream is the original."""
    data = (HERE / name).read_bytes()
    events = _events(name)
    as_openai = get_dialect("openai_chat").encoder().encode_all(events)
    expected = native_frames(data)
    for _, chunk in expected:
        usage = chunk.get("usage") if isinstance(chunk, dict) else None
        if usage:
            usage["completion_tokens"] = convert_usage(usage).output_tokens  # type: ignore[union-attr]
    assert native_frames(as_openai) == expected
    openai_events = decode_events(as_openai, "openai_chat")
    assert native_frames(Encoder().encode_all(openai_events)) == native_frames(data)


def test_registered() -> None:
    assert isinstance(get_dialect(DIALECT).decoder(), Decoder)
    assert isinstance(
        next(e for e in _events("skeleton.sse") if isinstance(e, TextDelta)), TextDelta
    )

"""openai_chat: exact events for key cases, tool-call keying, finish reasons, usage,
the rebuilt ChatCompletion, encoding from other dialects, and bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream import StreamDecoder, decode_events, get_dialect
from polystream import accumulate_events as accumulate
from polystream.dialects._chat import usage as _chat_usage
from polystream.dialects._chat.finish_reason import map_finish_reason, to_wire_finish_reason
from polystream.dialects._chat.quirks import OPENAI
from polystream.dialects.openai_chat import Decoder, Encoder, rebuild
from polystream.errors import RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    ErrorEvent,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)
from tests.helpers import FIXTURES, assert_chunking_invariant, native_frames


def convert_usage(raw: Any) -> Usage | None:
    """The dialect's usage conversion (the shared Chat one with its quirks)."""
    return _chat_usage.convert_usage(raw, OPENAI)


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    return _chat_usage.usage_to_wire(usage, OPENAI)


DIALECT = "openai_chat"
HERE = FIXTURES / DIALECT


def _events(name: str, **options: Any) -> list[Event]:
    return decode_events((HERE / name).read_bytes(), DIALECT, **options)


def _shape(events: list[Event]) -> list[tuple[Any, ...]]:
    """The events without residuals: (type, key fields)."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, BlockStart):
            out.append(("start", e.index, e.kind, e.id, e.name, e.candidate))
        elif isinstance(e, TextDelta | ReasoningDelta | ToolInputDelta):
            out.append((type(e).__name__, e.index, e.delta))
        elif isinstance(e, BlockEnd):
            out.append(("end", e.index))
        elif isinstance(e, Metadata):
            out.append(("meta", e.name, e.candidate))
        elif isinstance(e, UsageUpdate):
            out.append(("usage", e.usage.input_tokens, e.usage.output_tokens))
        elif isinstance(e, Finish):
            out.append(("finish", e.status, e.reason.unified, e.reason.raw))
        else:
            out.append((type(e).__name__,))
    return out


def _chunk(choices: list[Any] | None = None, **more: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-t",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-t",
    }
    if choices is not None:
        body["choices"] = choices
    body.update(more)
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _choice(delta: dict[str, Any], index: int = 0, finish: str | None = None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}


DONE = b"data: [DONE]\n\n"


# -- exact events ---------------------------------------------------------------------


def test_reply_ok_events() -> None:
    events = _events("reply_ok.sse")
    assert _shape(events) == [
        ("StreamStart",),
        ("StatusUpdate",),
        ("start", 0, "text", None, None, 0),
        ("TextDelta", 0, "OK"),
        ("TextDelta", 0, "."),
        ("meta", "finish_reason", 0),
        ("end", 0),
        ("usage", 11, 2),
        ("finish", "completed", "stop", "stop"),
    ]
    start = events[0]
    assert isinstance(start, StreamStart)
    assert (start.id, start.model, start.created) == (
        "chatcmpl-CRok1a2b3c4d5e6f7g8h9i0j",
        "gpt-5.4-nano",
        1764460800,
    )
    # The role chunk's residuals: nothing of it is lost.
    status = events[1]
    assert status.extra == {
        "chat": {
            "ci": 0,
            "ch": {},
            "d": {"role": "assistant", "content": "", "refusal": None},
            "env": {
                "service_tier": "default",
                "system_fingerprint": "fp_7c4a1b2e9d",
                "usage": None,
                "obfuscation": "Xq3",
            },
        }
    }
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.usage is not None and finish.usage.total_tokens == 13


def test_parallel_tool_calls_are_distinct_blocks() -> None:
    events = _events("parallel_tool_calls.sse")
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "call_Wq8cT2nLr5Yb1Vx9", "get_weather"),
        (1, "call_Mz3pR7kD0sHf6Ja4", "get_weather"),
    ]
    result = accumulate(events)
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_Wq8cT2nLr5Yb1Vx9", {"city": "Paris"}),
        ("call_Mz3pR7kD0sHf6Ja4", {"city": "Tokyo"}),
    ]
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="tool_calls")


def test_same_index_new_id_is_a_new_call() -> None:
    # pain-points #14: never merge two ids that share an index.
    result = accumulate(_events("tool_index_reused.sse"))
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_A1b2C3d4E5f6G7h8", {"q": "a"}),
        ("call_I9j0K1l2M3n4O5p6", {"q": "b"}),
    ]


def test_repeated_id_on_every_fragment_is_one_call() -> None:
    frag = {"index": 0, "id": "call_1", "type": "function"}
    data = (
        _chunk([_choice({"tool_calls": [{**frag, "function": {"name": "f", "arguments": "{"}}]})])
        + _chunk([_choice({"tool_calls": [{**frag, "function": {"arguments": "}"}}]})])
        + _chunk([_choice({}, finish="tool_calls")])
        + DONE
    )
    events = decode_events(data, DIALECT)
    result = accumulate(events)
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("call_1", "f", {})]
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_no_argument_tool_gives_empty_object() -> None:
    result = accumulate(_events("no_argument_tool.sse"))
    assert [(c.name, c.arguments, c.arguments_json) for c in result.tool_calls] == [
        ("get_current_time", {}, "")
    ]


def test_text_and_tool_call_in_one_chunk() -> None:
    # pain-points #17: a chunk with both content and tool_calls loses neither.
    result = accumulate(_events("text_and_tool_call.sse"))
    assert result.text == "Let me check. One moment."
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("search", {"query": "weather"})]


def test_refusal_starting_null_then_empty() -> None:
    events = _events("refusal.sse")
    assert [s.kind for s in events if isinstance(s, BlockStart)] == ["refusal"]
    result = accumulate(events)
    assert result.refusal == "I'm sorry, I can't help with that."
    assert result.text == ""


def test_n2_choices_are_candidates() -> None:
    events = _events("n2_choices.sse")
    starts = [(s.index, s.candidate) for s in events if isinstance(s, BlockStart)]
    assert starts == [(0, 0), (1, 1)]
    result = accumulate(events)
    assert result.text == "Red."
    assert [b.text for b in result.blocks] == ["Red.", "Blue and"]
    assert result.metadata == {"finish_reason": "stop", "finish_reason#1": "length"}
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason.raw == "stop"


def test_annotations_become_citations_on_the_text_block() -> None:
    events = _events("annotations.sse")
    citations = [e for e in events if isinstance(e, Citation)]
    assert len(citations) == 1 and citations[0].index == 0
    assert citations[0].citation["url_citation"]["url"] == "https://example.org/tides"


def test_usage_on_a_chunk_with_choices_is_kept() -> None:
    # pain-points #19
    result = accumulate(_events("usage_on_choice_chunk.sse"))
    assert (result.usage.input_tokens, result.usage.cache_read_tokens) == (2048, 1920)


def test_moderation_chunk_after_usage() -> None:
    events = _events("usage_then_moderation.sse")
    assert _shape(events)[-3:] == [
        ("usage", 9, 3),
        ("meta", "moderation", 0),
        ("finish", "completed", "stop", "stop"),
    ]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    assert finish.usage.total_tokens == 12


def test_openrouter_comments_are_keepalives() -> None:
    events = _events("openrouter_keepalive.sse")
    assert [e.comment for e in events if isinstance(e, KeepAlive)] == ["OPENROUTER PROCESSING"] * 3
    assert accumulate(events).text == "Hi!"


def test_error_chunk_fails_the_stream() -> None:
    events = _events("error_mid_stream.sse")
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    info = errors[0].error
    assert (info.kind, info.retryable, info.code) == ("server", True, "server_error")
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "failed" and finish.error == info
    assert accumulate(events).text == "The first part"


def test_openrouter_error_inside_a_chunk() -> None:
    events = _events("openrouter_error_mid_stream.sse")
    error = next(e for e in events if isinstance(e, ErrorEvent)).error
    assert (error.kind, error.retryable, error.code, error.http_status) == (
        "server",
        True,
        "502",
        502,
    )
    assert error.message == "Provider disconnected unexpectedly"
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason.unified, finish.reason.raw) == ("failed", "error", "error")
    assert accumulate(events).text == "Partial answer"


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        ({"message": "m", "type": "tokens", "code": "rate_limit_exceeded"}, "rate_limit", True),
        ({"message": "m", "type": "invalid_request_error", "code": None}, "invalid_request", False),
        ({"message": "m", "type": "insufficient_quota"}, "quota", False),
        ({"message": "m", "type": "mystery"}, "unknown", False),
        ("just a string", "unknown", False),
    ],
)
def test_error_kinds(error: Any, kind: str, retryable: bool) -> None:
    data = _chunk([_choice({"content": "a"})]) + b"data: " + json.dumps({"error": error}).encode()
    events = decode_events(data + b"\n\n" + DONE, DIALECT)
    err = next(e for e in events if isinstance(e, ErrorEvent))
    assert (err.error.kind, err.error.retryable) == (kind, retryable)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"


def test_truncated_stream_keeps_usage() -> None:
    events = _events("truncated.sse")
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "truncated" and finish.error is not None
    assert finish.error.kind == "truncated"
    # usage seen before the cut survives in the truncated Finish
    data = _chunk([_choice({"content": "a"})], usage={"prompt_tokens": 3, "completion_tokens": 1})
    finish = decode_events(data, DIALECT)[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"
    assert finish.usage is not None and finish.usage.input_tokens == 3


def test_unknown_object_passes_through() -> None:
    data = _chunk([_choice({"content": "a"})]) + b'data: {"type":"keepalive"}\n\n' + DONE
    events = decode_events(data, DIALECT)
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert [(u.name, u.data) for u in unknown] == [("keepalive", '{"type":"keepalive"}')]
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    with pytest.raises(RemoteProtocolError) as info:
        decode_events(data, DIALECT, strict=True)
    assert info.value.event_index == 1


# -- finish reasons and usage ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "unified", "status"),
    [
        ("stop", "stop", "completed"),
        ("length", "length", "incomplete"),
        ("tool_calls", "tool_calls", "completed"),
        ("content_filter", "content_filter", "incomplete"),
        ("function_call", "tool_calls", "completed"),
        ("error", "error", "failed"),
        ("eos_token", "other", "completed"),
        (None, "other", "completed"),
    ],
)
def test_finish_reason_table(raw: str | None, unified: str, status: str) -> None:
    reason, got_status = map_finish_reason(raw)
    assert (reason.unified, reason.raw, got_status) == (unified, raw, status)
    if raw is not None:
        finish = decode_events(_chunk([_choice({}, finish=raw)]) + DONE, DIALECT)[-1]
        assert isinstance(finish, Finish)
        assert (finish.reason.unified, finish.reason.raw, finish.status) == (unified, raw, status)


def test_unknown_finish_reason_is_an_error_in_strict_mode() -> None:
    data = _chunk([_choice({"content": "a"})]) + _chunk([_choice({}, finish="eos")]) + DONE
    with pytest.raises(RemoteProtocolError) as info:
        decode_events(data, DIALECT, strict=True)
    assert (info.value.event_index, info.value.byte_offset) == (1, data.index(b"data: ", 1))
    finish = decode_events(data, DIALECT)[-1]
    assert isinstance(finish, Finish) and finish.reason == FinishReason(unified="other", raw="eos")


def test_finish_reason_back_to_wire() -> None:
    assert to_wire_finish_reason(FinishReason(unified="tool_calls", raw="tool_use")) == "tool_calls"
    assert to_wire_finish_reason(FinishReason(unified="length", raw="length")) == "length"
    assert to_wire_finish_reason(FinishReason(unified="other", raw="weird")) == "stop"


def test_usage_arithmetic_openai() -> None:
    raw = {
        "prompt_tokens": 100,
        "completion_tokens": 50,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 10, "audio_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 30, "audio_tokens": 2},
    }
    usage = convert_usage(raw)
    assert usage == Usage(
        input_tokens=100,
        output_tokens=50,  # OpenAI's completion_tokens already includes reasoning
        reasoning_tokens=30,
        cache_read_tokens=60,
        cache_write_tokens=10,
        audio_input_tokens=5,
        audio_output_tokens=2,
        total_tokens=150,
        raw=raw,
    )
    assert usage.input_tokens + usage.output_tokens == usage.total_tokens
    # A server that keeps reasoning outside completion_tokens is detected by the total.
    xai_like = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 45,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    converted = convert_usage(xai_like)
    assert converted is not None and converted.output_tokens == 35
    assert convert_usage(None) is None and convert_usage([1]) is None
    back = usage_to_wire(Usage(input_tokens=7, output_tokens=9, reasoning_tokens=4))
    assert back == {
        "prompt_tokens": 7,
        "completion_tokens": 9,
        "total_tokens": 16,
        "completion_tokens_details": {"reasoning_tokens": 4},
    }


# -- the rebuilt ChatCompletion -------------------------------------------------------


def test_rebuild_reply_ok() -> None:
    assert rebuild(_events("reply_ok.sse")) == {
        "id": "chatcmpl-CRok1a2b3c4d5e6f7g8h9i0j",
        "object": "chat.completion",
        "created": 1764460800,
        "model": "gpt-5.4-nano",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "OK.", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 11,
            "completion_tokens": 2,
            "total_tokens": 13,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_7c4a1b2e9d",
    }


def test_rebuild_tools_logprobs_and_choices() -> None:
    native = rebuild(_events("no_argument_tool.sse"))
    assert native["choices"][0]["message"]["tool_calls"] == [
        {
            "id": "call_Nf5Gh2Jk8Lm1Qw7E",
            "type": "function",
            "function": {"name": "get_current_time", "arguments": "{}"},
        }
    ]
    assert native["choices"][0]["message"]["content"] is None
    events = _events("logprobs.sse")
    logprobs = rebuild(events)["choices"][0]["logprobs"]
    assert [t["token"] for t in logprobs["content"]] == ["Yes", "."]
    # (The entries are gathered in one list, extended chunk by chunk: a new list per
    # chunk was quadratic.) Rebuilding again gives the same.
    assert rebuild(events)["choices"][0]["logprobs"] == logprobs
    n2 = rebuild(_events("n2_choices.sse"))
    assert [(c["message"]["content"], c["finish_reason"]) for c in n2["choices"]] == [
        ("Red.", "stop"),
        ("Blue and", "length"),
    ]
    # the registry reaches the same function
    assert get_dialect(DIALECT).rebuild(_events("refusal.sse"))["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "refusal": "I'm sorry, I can't help with that.",
    }


# -- encoding events of another dialect -----------------------------------------------


def foreign_events() -> list[Event]:
    """A hand-built stream as another dialect would decode it (no Chat residuals):
    signed reasoning, text, two parallel tool calls, usage, finish."""
    return [
        StreamStart(dialect="anthropic_messages", id="msg_01", model="claude-t"),
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="Think about "),
        ReasoningDelta(index=0, delta="both cities."),
        SignatureDelta(index=0, delta="EqQBCkgIARABGAIiQL+sig=="),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="Checking both."),
        BlockEnd(index=1),
        BlockStart(index=2, kind="tool_call", id="toolu_A", name="get_weather"),
        ToolInputDelta(index=2, delta='{"city": '),
        ToolInputDelta(index=2, delta='"Paris"}'),
        BlockEnd(index=2),
        BlockStart(index=3, kind="tool_call", id="toolu_B", name="get_weather"),
        ToolInputDelta(index=3, delta='{"city": "Tokyo"}'),
        BlockEnd(index=3),
        UsageUpdate(usage=Usage(input_tokens=20, output_tokens=40, reasoning_tokens=12)),
        Finish(
            status="completed",
            reason=FinishReason(unified="tool_calls", raw="tool_use"),
            usage=Usage(input_tokens=20, output_tokens=45, reasoning_tokens=12),
        ),
    ]


def _data_lines(data: bytes) -> list[Any]:
    return [v for _, v in native_frames(data)]


def test_encode_foreign_stream() -> None:
    encoder = Encoder()
    data = encoder.encode_all(foreign_events())
    chunks = _data_lines(data)
    assert chunks[-1] == "[DONE]"
    ids = {c["id"] for c in chunks[:-1]}
    assert ids == {"chatcmpl-msg_01"}
    assert all(
        c["object"] == "chat.completion.chunk" and c["model"] == "claude-t" for c in chunks[:-1]
    )
    deltas = [c["choices"][0]["delta"] if c["choices"] else None for c in chunks[:-1]]
    # OpenAI's documented first chunk opens the choice before any output.
    assert deltas[0] == {"role": "assistant", "content": "", "refusal": None}
    assert deltas[1] == {"reasoning_content": "Think about "}
    assert deltas[3] == {
        "polystream": [
            {
                "index": 0,
                "type": "signature",
                "target": "reasoning",
                "data": "EqQBCkgIARABGAIiQL+sig==",
                "origin": "anthropic_messages",
            }
        ]
    }
    assert deltas[4] == {"content": "Checking both."}
    assert deltas[5] == {
        "tool_calls": [
            {
                "index": 0,
                "id": "toolu_A",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
        ]
    }
    assert deltas[8]["tool_calls"][0]["index"] == 1
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-2]["choices"] == []
    assert chunks[-2]["usage"] == {
        "prompt_tokens": 20,
        "completion_tokens": 45,
        "total_tokens": 65,
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    assert chunks[-3]["choices"][0]["delta"] == {
        "polystream": [
            {
                "index": 1,
                "type": "finish",
                "unified": "tool_calls",
                "raw": "tool_use",
                "status": "completed",
            }
        ]
    }
    assert [(loss.what, loss.carried, loss.kind) for loss in encoder.losses] == [
        ("created", False, "defaulted"),  # Messages states no creation time: 0
        ("reasoning", True, "lost"),
        ("signature", True, "lost"),
        ("finish_reason:tool_calls", True, "lost"),  # the raw "tool_use" is carried
    ]


def test_foreign_to_chat_and_back_restores_reasoning_and_signature() -> None:
    data = Encoder().encode_all(foreign_events())
    events = decode_events(data, DIALECT)
    result = accumulate(events)
    original = accumulate(foreign_events())
    assert result.reasoning == original.reasoning == "Think about both cities."
    assert result.text == original.text
    assert [b.signature for b in result.blocks if b.kind == "reasoning"] == [
        "EqQBCkgIARABGAIiQL+sig=="
    ]
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (c.id, c.name, c.arguments) for c in original.tool_calls
    ]
    assert result.usage.output_tokens == 45 and result.usage.reasoning_tokens == 12
    # the source's own finish reason comes back from the carrier
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="tool_use")
    # and once in Chat, a second hop reproduces the stream exactly
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_foreign_carriers_and_losses() -> None:
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", model="gemini-t"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Cited."),
        Citation(index=0, citation={"startIndex": 0, "uri": "https://e.org"}),
        Metadata(name="grounding", value={"groundingChunks": [{"web": {"uri": "u"}}]}, merge=True),
        BlockEnd(index=0),
        BlockStart(index=1, kind="server_tool_call", name="web_search"),
        ToolInputDelta(index=1, delta="{}"),
        BlockEnd(index=1),
        Unknown(name="mystery", data="{}"),
        KeepAlive(name="ping"),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="STOP")),
    ]
    encoder = Encoder(id_factory=lambda: "chatcmpl-fixed")
    data = encoder.encode_all(events)
    assert [(loss.what, loss.carried) for loss in encoder.losses] == [
        ("created", False),  # defaulted: Gemini states no creation time
        ("citation", True),
        ("metadata:grounding", True),
        ("block:server_tool_call", False),
        ("event:unknown", False),
        ("finish_reason:stop", True),
    ]
    assert b": ping\n\n" in data
    back = decode_events(data, DIALECT)
    result = accumulate(back)
    assert result.citations == [{"startIndex": 0, "uri": "https://e.org"}]
    assert result.metadata["grounding"] == {"groundingChunks": [{"web": {"uri": "u"}}]}
    assert result.text == "Cited."
    assert result.finish_reason == FinishReason(unified="stop", raw="STOP")
    assert {c["id"] for c in _data_lines(data) if isinstance(c, dict)} == {"chatcmpl-fixed"}


def test_encode_failed_and_truncated_endings() -> None:
    from polystream.events import ErrorInfo

    start = StreamStart(dialect="anthropic_messages", id="m", model="x")
    failed = Encoder().encode_all(
        [
            start,
            ErrorEvent(error=ErrorInfo(kind="overloaded", message="busy", code="overloaded_error")),
            Finish(status="failed", reason=FinishReason(unified="error")),
        ]
    )
    assert _data_lines(failed) == [
        {
            "id": "chatcmpl-m",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "x",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "", "refusal": None},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        },
        {
            "error": {
                "message": "busy",
                "type": "overloaded_error",
                "param": None,
                "code": "overloaded_error",
            }
        },
    ]
    events = decode_events(failed, DIALECT)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error is not None and finish.error.kind == "overloaded"
    truncated = Encoder().encode_all(
        [
            start,
            BlockStart(index=0, kind="text"),
            TextDelta(index=0, delta="a"),
            Finish(status="truncated", reason=FinishReason(unified="error")),
        ]
    )
    assert b"[DONE]" not in truncated
    finish = decode_events(truncated, DIALECT)[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"


# -- bad input ------------------------------------------------------------------------

BAD = HERE / "bad"


@pytest.mark.parametrize(
    ("name", "index", "message"),
    [
        ("malformed_json.sse", 2, "malformed JSON"),
        ("non_object.sse", 2, "not an object"),
        ("indexless_fragment.sse", 2, "without an index"),
        ("data_after_done.sse", 4, "after the [DONE]"),
    ],
)
def test_bad_input_strict(name: str, index: int, message: str) -> None:
    data = (BAD / name).read_bytes()
    with pytest.raises(RemoteProtocolError) as info:
        decode_events(data, DIALECT, strict=True)
    error = info.value
    assert message in error.message
    assert (error.dialect, error.event_index) == (DIALECT, index)
    offsets = [m.start() for m in __import__("re").finditer(rb"(?m)^data: ", data)]
    assert error.byte_offset == offsets[index]


@pytest.mark.parametrize("name", ["malformed_json.sse", "non_object.sse", "indexless_fragment.sse"])
def test_bad_input_tolerant_keeps_going(name: str) -> None:
    data = (BAD / name).read_bytes()
    events = assert_chunking_invariant(lambda: StreamDecoder(DIALECT), data, seeds=5)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    error = errors[0].error
    assert (error.kind, error.dialect, error.event_index) == ("protocol", DIALECT, 2)
    assert error.raw is not None  # what was received is kept
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "completed"  # decoding went on to [DONE]
    result = accumulate(events)
    if name == "indexless_fragment.sse":
        assert error.raw == {"function": {"arguments": "1}"}}
        assert [c.arguments_json for c in result.tool_calls] == ['{"x":', '{"y":']
    else:
        assert result.text == "Hello"


def test_data_after_done_tolerant() -> None:
    data = (BAD / "data_after_done.sse").read_bytes()
    events = decode_events(data, DIALECT)
    assert isinstance(events[-2], Finish)
    warning = events[-1]
    assert isinstance(warning, Warning) and warning.code == "after_terminal"
    assert warning.extra is not None and "Hello" in warning.extra["data"]


def test_indexless_fragment_with_one_open_call_continues_it() -> None:
    data = (
        _chunk(
            [
                _choice(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"a":'},
                            }
                        ]
                    }
                )
            ]
        )
        + _chunk([_choice({"tool_calls": [{"function": {"arguments": "1}"}}]})])
        + _chunk([_choice({}, finish="tool_calls")])
        + DONE
    )
    events = decode_events(data, DIALECT, strict=True)
    assert [(c.id, c.arguments) for c in accumulate(events).tool_calls] == [("c1", {"a": 1})]
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_suffix_without_stream_start_still_makes_valid_chunks() -> None:
    # A resumed replay may start mid-stream: no StreamStart, so no envelope base.
    events = _events("reply_ok.sse")[3:]
    chunks = _data_lines(Encoder(id_factory=lambda: "chatcmpl-r").encode_all(events))
    assert chunks[-1] == "[DONE]"
    first = chunks[0]
    assert (first["id"], first["object"], first["choices"][0]["delta"]) == (
        "chatcmpl-r",
        "chat.completion.chunk",
        {"content": "OK"},
    )
    assert accumulate(decode_events(Encoder().encode_all(events), DIALECT)).text == "OK."


def test_a_foreign_finish_after_chat_events_adds_only_done() -> None:
    # e.g. a gateway ends an upstream Chat stream with its own Finish
    events = _events("reply_ok.sse")[:-1]
    events.append(Finish(status="completed", reason=FinishReason(unified="stop")))
    data = Encoder().encode_all(events)
    assert native_frames(data) == native_frames((HERE / "reply_ok.sse").read_bytes())


def test_residual_diffs_keep_json_types() -> None:
    from polystream.dialects._chat.wire import apply, diff

    assert diff({"a": 0, "b": 1}, {"a": False, "b": 1.0}) == {"a": False, "b": 1.0}
    assert diff({"a": 1, "b": 2}, {"a": 1}) == {"-": ["b"]}
    assert diff({"a": [1]}, {"a": [1]}) == {}
    old = {"a": 1, "b": 2}
    assert apply(old, {"-": ["b"], "c": None}) == {"a": 1, "c": None}
    assert old == {"a": 1, "b": 2}  # never modified in place


def test_keep_raw_emits_raw_before_chunk_events() -> None:
    events = decode_events((HERE / "reply_ok.sse").read_bytes(), DIALECT, keep_raw=True)
    assert type(events[0]).__name__ == "Raw"
    assert isinstance(events[1], StreamStart)


def test_decoder_class_is_registered() -> None:
    assert isinstance(get_dialect(DIALECT).decoder(), Decoder)
    assert isinstance(
        next(e for e in _events("reply_ok.sse") if isinstance(e, StatusUpdate)), StatusUpdate
    )


# -- properties ---------------------------------------------------------------------------

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["", "a"]))
_FRAGMENT = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.integers(0, 2), st.none()),
        "id": st.one_of(st.none(), st.sampled_from(["", "c1", "c2"])),
        "type": st.sampled_from(["function", None]),
        "function": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.one_of(st.none(), st.sampled_from(["", "f"])),
                    "arguments": st.one_of(st.none(), st.sampled_from(["", "{", '{"a":1}'])),
                    "x": _SCALARS,
                },
            ),
        ),
    },
)
_CARRIED = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("signature"),
            "target": st.sampled_from(["reasoning", "tool_call"]),
            "data": st.just("s"),
        },
        optional={"index": st.one_of(st.integers(0, 3), st.none()), "tool_index": st.just(0)},
    ),
    st.fixed_dictionaries({"type": st.just("metadata"), "name": st.just("g"), "value": _SCALARS}),
    st.fixed_dictionaries(
        {"type": st.just("start"), "kind": st.just("reasoning")},
        optional={"name": st.just("redacted")},
    ),
    st.fixed_dictionaries({"type": st.just("zzz")}),
)
_DELTA = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["assistant", None]),
        "content": st.one_of(st.none(), st.sampled_from(["", "Hi"])),
        "refusal": st.one_of(st.none(), st.sampled_from(["", "No"])),
        "reasoning_content": st.one_of(st.none(), st.sampled_from(["", "hm"])),
        "tool_calls": st.one_of(st.none(), st.lists(_FRAGMENT, max_size=3)),
        "annotations": st.lists(st.just({"type": "url_citation"}), max_size=1),
        "polystream": st.lists(_CARRIED, max_size=2),
        "other": _SCALARS,
    },
)
_CHOICE = st.builds(
    lambda i, d, more, fin: (
        {"index": i, "delta": d, **more} | ({} if fin == "absent" else {"finish_reason": fin})
    ),
    st.integers(0, 1),
    _DELTA,
    st.dictionaries(st.sampled_from(["logprobs", "native_finish_reason"]), _SCALARS, max_size=2),
    st.sampled_from(["absent", None, "stop", "tool_calls", "weird"]),
)
_CHUNK = st.builds(
    lambda choices, more, usage: (
        {"id": "c", "object": "chat.completion.chunk", "created": 0}
        | more
        | ({} if choices is None else {"choices": choices})
        | ({} if usage == "absent" else {"usage": usage})
    ),
    st.one_of(st.none(), st.lists(_CHOICE, max_size=3)),
    st.dictionaries(
        st.sampled_from(["model", "system_fingerprint", "obfuscation"]), _SCALARS, max_size=2
    ),
    st.one_of(
        st.just("absent"),
        st.none(),
        st.fixed_dictionaries(
            {"prompt_tokens": st.integers(0, 9), "completion_tokens": st.integers(0, 9)}
        ),
    ),
)
_LINE = st.one_of(
    _CHUNK.map(lambda c: b"data: " + json.dumps(c).encode() + b"\n\n"),
    _CHUNK.map(lambda c: b"event: message\ndata: " + json.dumps(c).encode() + b"\n\n"),
    st.just(b": OPENROUTER PROCESSING\n\n"),
    st.just(b'data: {"error": {"message": "x", "type": "server_error"}, "more": 1}\n\n'),
    st.just(b'data: {"type": "keepalive"}\n\n'),
)


@settings(max_examples=100)
@given(lines=st.lists(_LINE, min_size=1, max_size=6), done=st.booleans())
def test_any_chat_stream_round_trips(lines: list[bytes], done: bool) -> None:
    """Arbitrary chunks (odd shapes, extra keys, several choices, id-less and index-less
    fragments, carrier entries, errors, comments): decode then encode reproduces every
    native event, unless the decoder reported a protocol error."""
    data = b"".join(lines) + (DONE if done else b"")
    for dialect in ("openai_chat", "xai_chat"):
        events = decode_events(data, dialect)
        if any(isinstance(e, ErrorEvent) and e.error.kind == "protocol" for e in events):
            continue
        encoded = get_dialect(dialect).encoder().encode_all(events)
        assert native_frames(encoded) == native_frames(data)


_BLOCK = st.tuples(
    st.sampled_from(["text", "reasoning", "refusal", "tool_call"]),
    st.lists(st.sampled_from(["a", "b c", "é", '{"k"', ": 1}"]), max_size=3),
    st.one_of(st.none(), st.sampled_from(["sigA", "sigB=="])),
    st.sampled_from([None, "redacted_thinking"]),
)


@settings(max_examples=60)
@given(blocks=st.lists(_BLOCK, max_size=6), reason=st.sampled_from(["stop", "tool_calls"]))
def test_foreign_stream_through_chat_keeps_blocks(
    blocks: list[tuple[str, list[str], str | None, str | None]], reason: str
) -> None:
    """Another dialect's blocks -> openai_chat -> decoded again: same text, reasoning,
    refusal, tool calls, signatures on the same blocks, usage and finish reason."""
    events: list[Event] = [StreamStart(dialect="anthropic_messages", id="m", model="x")]
    for index, (kind, deltas, signature, name) in enumerate(blocks):
        is_tool = kind == "tool_call"
        events.append(
            BlockStart(
                index=index,
                kind=kind,  # type: ignore[arg-type]
                id=f"t{index}" if is_tool else None,
                name=("f" if is_tool else name if kind == "reasoning" else None),
            )
        )
        for delta in deltas:
            if kind == "reasoning":
                events.append(ReasoningDelta(index=index, delta=delta))
            elif is_tool:
                events.append(ToolInputDelta(index=index, delta=delta))
            else:
                events.append(TextDelta(index=index, delta=delta))
        if signature is not None and kind != "refusal":
            events.append(SignatureDelta(index=index, delta=signature))
        events.append(BlockEnd(index=index))
    usage = Usage(input_tokens=3, output_tokens=5, reasoning_tokens=2)
    events.append(
        Finish(status="completed", reason=FinishReason(unified=reason), usage=usage)  # type: ignore[arg-type]
    )
    back = accumulate(decode_events(Encoder().encode_all(events), DIALECT))
    original = accumulate(events)
    assert (back.text, back.reasoning, back.refusal) == (
        original.text,
        original.reasoning,
        original.refusal,
    )
    assert [(c.id, c.name, c.arguments_json) for c in back.tool_calls] == [
        (c.id, c.name, c.arguments_json) for c in original.tool_calls
    ]

    def signed(result: Any) -> list[tuple[str, str | None]]:
        return [(b.kind, b.signature) for b in result.blocks if b.signature]

    assert signed(back) == signed(original)
    redacted = [b.name for b in original.blocks if b.name == "redacted_thinking"]
    assert [b.name for b in back.blocks if b.name == "redacted_thinking"] == redacted
    assert (back.usage.input_tokens, back.usage.output_tokens) == (3, 5)
    assert back.finish_reason is not None and back.finish_reason.unified == reason

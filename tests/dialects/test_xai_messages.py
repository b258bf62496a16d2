"""xai_messages: the same protocol as anthropic_messages, with xAI's block-index reuse and
no pings (the quirks), decoded into distinct blocks and reproduced by the encoder."""

from __future__ import annotations

from polystream import StreamDecoder, decode_events
from polystream.accumulate import accumulate
from polystream.dialects import detect, get_dialect
from polystream.dialects.xai_messages import Decoder, Encoder, rebuild
from polystream.events import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    ReasoningDelta,
    StreamStart,
    TextDelta,
    Warning,
)
from tests.helpers import FIXTURES, native_frames

HERE = FIXTURES / "xai_messages"
DIALECT = "xai_messages"


def fixture(name: str) -> bytes:
    return (HERE / f"{name}.sse").read_bytes()


def test_index_reuse_gives_two_distinct_blocks() -> None:
    events = decode_events(fixture("index_reuse"), DIALECT)
    blocks = [
        e for e in events if isinstance(e, BlockStart | BlockEnd | TextDelta | ReasoningDelta)
    ]
    assert blocks == [
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="The user wants a one-word reply."),
        ReasoningDelta(index=0, delta=" OK fits."),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="OK"),
        BlockEnd(index=1),
    ]
    # The reuse is the provider's rule, not an anomaly: no warning, no extra.
    assert not any(isinstance(e, Warning | KeepAlive) for e in events)
    result = accumulate(events)
    assert (result.text, result.reasoning) == ("OK", "The user wants a one-word reply. OK fits.")
    assert result.finish_reason == FinishReason(unified="stop", raw="end_turn")
    assert result.usage.input_tokens == 14 and result.usage.output_tokens == 161


def test_tool_use_after_thinking_reuses_index_zero() -> None:
    result = accumulate(decode_events(fixture("tool_use"), DIALECT))
    assert [(b.index, b.kind) for b in result.blocks] == [(0, "reasoning"), (1, "tool_call")]
    call = result.tool_calls[0]
    assert (call.id, call.name, call.arguments) == (
        "call_61712487",
        "get_weather",
        {"location": "Paris"},
    )
    # input 210 includes the 128 cached tokens Anthropic-style counting excludes.
    assert (result.usage.input_tokens, result.usage.cache_read_tokens) == (338, 128)


def test_encoder_reproduces_the_index_reuse() -> None:
    for name in ("index_reuse", "tool_use"):
        data = fixture(name)
        encoded = Encoder().encode_all(decode_events(data, DIALECT))
        assert encoded == data, name
        starts = [p["index"] for n, p in native_frames(encoded) if n == "content_block_start"]
        assert starts == [0, 0]


def test_encoding_other_dialects_uses_the_lowest_free_index_and_no_ping() -> None:
    events: list[Event] = [
        StreamStart(dialect="openai_responses", id="resp_1", model="grok-4.3"),
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="hm"),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="a"),
        BlockStart(index=2, kind="text"),
        TextDelta(index=2, delta="b"),
        BlockEnd(index=1),
        BlockEnd(index=2),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]
    frames = native_frames(Encoder(ping_after_first_block=False).encode_all(events))
    starts = [p["index"] for n, p in frames if n == "content_block_start"]
    assert starts == [0, 0, 1]
    assert all(n != "ping" for n, _ in frames)
    # The same events to anthropic_messages count up instead.
    anthropic = native_frames(get_dialect("anthropic_messages").encoder().encode_all(events))
    assert [p["index"] for n, p in anthropic if n == "content_block_start"] == [0, 1, 2]


def test_xai_stream_to_anthropic_messages_is_sequential() -> None:
    events = decode_events(fixture("index_reuse"), DIALECT)
    encoder = get_dialect("anthropic_messages").encoder()
    data = encoder.encode_all(events)
    assert [p["index"] for n, p in native_frames(data) if n == "content_block_start"] == [0, 1]
    assert accumulate(decode_events(data, "anthropic_messages")).text == "OK"


def test_rebuild_keeps_both_blocks() -> None:
    native = rebuild(decode_events(fixture("index_reuse"), DIALECT))
    assert native["content"] == [
        {
            "type": "thinking",
            "thinking": "The user wants a one-word reply. OK fits.",
            "signature": "",
        },
        {"type": "text", "text": "OK"},
    ]
    assert native["id"] == "5ea1f6a3-7c3b-4d0e-9f41-3b2a1c0d9e8f"
    assert native["stop_reason"] == "end_turn"


def test_auto_detection_by_model() -> None:
    assert detect(fixture("index_reuse")) == (DIALECT, "sse")
    decoder = StreamDecoder()
    events = decoder.feed(fixture("index_reuse")) + decoder.close()
    assert decoder.dialect == DIALECT
    assert isinstance(events[-1], Finish)
    assert isinstance(get_dialect(DIALECT).decoder(), Decoder)

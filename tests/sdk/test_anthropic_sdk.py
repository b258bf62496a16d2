"""The official ``anthropic`` SDK on the same bytes: ``messages.stream(...).get_final_message()``
must agree with polystream's rebuilt native Message and unified Result, and must accept
what polystream's encoder emits for events of any dialect.

Where the SDK behaves differently on purpose-built streams, the difference is asserted here
and documented in ``docs/dialects/anthropic_messages.md``: the in-band ``error`` event
becomes a bare ``APIStatusError`` with status 200; a truncated stream is returned as if it
were complete; xAI's block-index reuse puts the text into the wrong block.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from polystream import decode_events
from polystream.accumulate import accumulate
from polystream.dialects import get_dialect
from polystream.dialects.anthropic_messages import Encoder, rebuild
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    Event,
    Finish,
    FinishReason,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
    UsageUpdate,
)
from tests.helpers import FIXTURES, fixture_dialect, stream_fixtures

DIALECT = "anthropic_messages"
OURS = stream_fixtures(DIALECT)
# Beta-only blocks: the non-beta stream helper does not fold compaction or MCP input.
BETA_ONLY = {"compaction", "mcp"}
SDK_RAISES = {"overloaded"}


def client_for(data: bytes) -> anthropic.Anthropic:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    transport = httpx2.MockTransport(handler)
    return anthropic.Anthropic(
        api_key="x",
        base_url="http://test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )


def sdk_final(data: bytes, *, beta: bool = True) -> dict[str, Any]:
    """The SDK's own accumulated final message, as JSON values."""
    client = client_for(data)
    api: Any = client.beta.messages if beta else client.messages
    with api.stream(
        model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = stream.get_final_message()
    with warnings.catch_warnings():
        # Blocks outside the SDK's union (unknown types) serialise with a pydantic warning.
        warnings.simplefilter("ignore")
        out: dict[str, Any] = message.to_dict(mode="json")
    return out


def assert_agrees(sdk: dict[str, Any], native: dict[str, Any]) -> None:
    """Every content block, the stop reason and the usage agree."""
    assert len(sdk["content"]) == len(native["content"])
    for theirs, ours in zip(sdk["content"], native["content"], strict=True):
        assert theirs == ours
    for key in ("id", "type", "role", "model", "stop_reason", "stop_sequence", "usage"):
        assert sdk[key] == native[key], key
    if native.get("container") is not None:
        assert sdk["container"]["id"] == native["container"]["id"]
    if native.get("stop_details") is not None:
        assert sdk["stop_details"] == native["stop_details"]


@pytest.mark.parametrize(
    "path", [p for p in OURS if p.stem not in SDK_RAISES], ids=lambda p: p.stem
)
def test_sdk_final_message_agrees_with_rebuild(path: Path) -> None:
    data = path.read_bytes()
    events = decode_events(data, DIALECT)
    native = rebuild(events)
    assert_agrees(sdk_final(data, beta=True), native)
    if path.stem not in BETA_ONLY:
        assert_agrees(sdk_final(data, beta=False), native)


@pytest.mark.parametrize(
    "path", [p for p in OURS if p.stem not in SDK_RAISES], ids=lambda p: p.stem
)
def test_sdk_final_message_agrees_with_unified_result(path: Path) -> None:
    data = path.read_bytes()
    sdk = sdk_final(data)
    result = accumulate(decode_events(data, DIALECT))
    blocks = sdk["content"]
    assert result.text == "".join(b["text"] for b in blocks if b["type"] == "text")
    assert result.reasoning == "".join(b["thinking"] for b in blocks if b["type"] == "thinking")
    signatures = [b.get("signature") or b.get("data") for b in blocks if "thinking" in b["type"]]
    ours = [b.signature or "" for b in result.blocks if b.kind == "reasoning"]
    assert ours == signatures
    tools = [b for b in blocks if b["type"] == "tool_use"]
    assert [(c.id, c.name) for c in result.tool_calls] == [(b["id"], b["name"]) for b in tools]
    for call, block in zip(result.tool_calls, tools, strict=True):
        if call.error is None:
            assert call.arguments == block["input"]
        else:  # cut off by max_tokens: the SDK keeps a partial object, we report it
            assert call.error.startswith("incomplete")
    usage = sdk["usage"]
    expected_input = (
        usage["input_tokens"]
        + (usage.get("cache_read_input_tokens") or 0)
        + (usage.get("cache_creation_input_tokens") or 0)
    )
    assert result.usage.input_tokens == expected_input
    assert result.usage.output_tokens == usage["output_tokens"]
    assert result.usage.total_tokens == expected_input + usage["output_tokens"]
    assert result.finish_reason is not None
    assert result.finish_reason.raw == sdk["stop_reason"]


def test_sdk_raises_a_bare_status_200_error_where_polystream_types_it() -> None:
    data = (FIXTURES / DIALECT / "overloaded.sse").read_bytes()
    with pytest.raises(anthropic.APIStatusError) as info:
        sdk_final(data)
    # The SDK: a generic APIStatusError carrying HTTP 200, not an overloaded/retryable type.
    assert type(info.value) is anthropic.APIStatusError
    assert info.value.status_code == 200
    assert info.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    # polystream: a typed, retryable error event and a failed finish; the text is kept.
    events = decode_events(data, DIALECT)
    error = next(e for e in events if isinstance(e, ErrorEvent)).error
    assert (error.kind, error.retryable, error.http_status) == ("overloaded", True, 529)
    result = accumulate(events)
    assert (result.status, result.text) == ("failed", "Once upon a time")


def test_sdk_returns_a_truncated_stream_as_if_complete() -> None:
    data = (FIXTURES / DIALECT / "truncated.sse").read_bytes()
    sdk = sdk_final(data)
    assert sdk["stop_reason"] is None  # no error raised: the truncation goes unnoticed
    assert sdk["content"][0]["text"] == "The three primary colours are red, "
    result = accumulate(decode_events(data, DIALECT))
    assert result.status == "truncated"
    assert result.error is not None and result.error.kind == "truncated"


def test_sdk_misplaces_text_on_xai_index_reuse_and_reencoding_fixes_it() -> None:
    data = (FIXTURES / "xai_messages" / "index_reuse.sse").read_bytes()
    sdk = sdk_final(data)
    # The SDK extends content[index]: the reused index 0 points at the thinking block,
    # so the text deltas are dropped and the text block stays empty.
    assert sdk["content"][1] == {"type": "text", "text": ""}
    events = decode_events(data, "xai_messages")
    assert accumulate(events).text == "OK"
    fixed = Encoder().encode_all(events)
    assert sdk_final(fixed)["content"][1] == {"type": "text", "text": "OK"}


FOREIGN: list[Event] = [
    StreamStart(dialect="gemini_interactions", id="int_1", model="gemini-3.8-flash"),
    BlockStart(index=0, kind="reasoning"),
    ReasoningDelta(index=0, delta="Two cities, two calls.", summary=True),
    SignatureDelta(index=0, delta="CiQBjz1rX4q0Zmc="),
    BlockEnd(index=0),
    BlockStart(index=1, kind="text"),
    TextDelta(index=1, delta="Let me check."),
    BlockEnd(index=1),
    BlockStart(index=2, kind="tool_call", id="fc_a", name="get_weather"),
    ToolInputDelta(index=2, delta='{"city": "Paris"}'),
    BlockEnd(index=2),
    BlockStart(index=3, kind="tool_call", name="get_weather", value={"city": "Rome"}),
    BlockEnd(index=3),
    UsageUpdate(usage=Usage(input_tokens=300, output_tokens=80, reasoning_tokens=30)),
    Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="requires_action")),
]


def test_sdk_accepts_a_stream_encoded_from_unified_events() -> None:
    encoder = Encoder(id_factory=lambda prefix: f"{prefix}_01Synth")
    data = encoder.encode_all(FOREIGN)
    sdk = sdk_final(data)
    assert_agrees(sdk, rebuild(decode_events(data, DIALECT)))
    assert sdk["id"] == "msg_01Synth"
    assert sdk["model"] == "gemini-3.8-flash"
    assert sdk["content"] == [
        {
            "type": "thinking",
            "thinking": "Two cities, two calls.",
            "signature": "polystream:v1:gemini_interactions:CiQBjz1rX4q0Zmc=",
        },
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "fc_a", "name": "get_weather", "input": {"city": "Paris"}},
        {
            "type": "tool_use",
            "id": "toolu_01Synth",
            "name": "get_weather",
            "input": {"city": "Rome"},
        },
    ]
    assert sdk["stop_reason"] == "tool_use"
    assert sdk["usage"] == {
        "input_tokens": 300,
        "output_tokens": 80,
        "output_tokens_details": {"thinking_tokens": 30},
    }
    assert [(loss.what, loss.carried) for loss in encoder.losses] == [("signature", True)]


def _other_fixtures() -> list[Path]:
    return [p for p in stream_fixtures() if not fixture_dialect(p).endswith("_messages")]


@pytest.mark.parametrize("path", _other_fixtures(), ids=lambda p: f"{fixture_dialect(p)}/{p.stem}")
def test_sdk_accepts_other_dialects_encoded_to_messages(path: Path) -> None:
    source = fixture_dialect(path)
    options = {"framing": "json_array"} if path.suffix == ".jsonarray" else {}
    events = decode_events(path.read_bytes(), source, **options)
    data = get_dialect(DIALECT).encoder().encode_all(events)
    finish = next(e for e in reversed(events) if isinstance(e, Finish))
    if finish.status == "failed":
        with pytest.raises(anthropic.APIStatusError):
            sdk_final(data)
        return
    assert_agrees(sdk_final(data), rebuild(decode_events(data, DIALECT)))

"""The official ``openai`` SDK on the same bytes as polystream, for both Responses dialects.

For every fixture of ``openai_responses`` and ``xai_responses`` the SDK's
``client.responses.stream(...)`` runs over an ``httpx2.MockTransport`` serving the
fixture's exact bytes; ``get_final_response()`` must agree with polystream's rebuilt
native ``Response`` (and its unified Result) on output text, tool calls (names, call ids
and parsed arguments), refusal, status and usage. Where the SDK rejects a stream that is
valid on the wire, the rejection is asserted (and documented in the dialect docs).

Streams polystream writes from *another* dialect are checked the same way: the SDK must
accept them and its final response must match what was encoded.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import openai
import pytest

from polystream import decode_events, get_dialect
from polystream.accumulate import accumulate
from polystream.events import (
    BlockEnd,
    BlockStart,
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
from tests.helpers import FIXTURES, stream_fixtures

DIALECTS = ("openai_responses", "xai_responses")
FILES = [p for d in DIALECTS for p in stream_fixtures(d)]
IDS = [f"{p.parent.name}/{p.name}" for p in FILES]

# Streams the SDK refuses although they are valid Responses streams (see the docs).
SDK_REJECTS: dict[str, tuple[type[BaseException], str]] = {
    # get_final_response() only knows response.completed.
    "openai_responses/incomplete_max_output_tokens.sse": (RuntimeError, "response.completed"),
    "openai_responses/failed.sse": (RuntimeError, "response.completed"),
    "openai_responses/error_flat_then_failed.sse": (RuntimeError, "response.completed"),
    "openai_responses/truncated.sse": (RuntimeError, "response.completed"),
    "xai_responses/incomplete_max_output_tokens.sse": (RuntimeError, "response.completed"),
    # The nested error shape real streams send is raised as APIError mid-iteration.
    "openai_responses/error_nested_midstream.sse": (openai.APIError, "An error occurred"),
    # A resumed background stream has no response.created: the SDK's accumulator
    # refuses it (openai/openai-node#1983), polystream rebuilds it.
    "openai_responses/resumed_background.sse": (RuntimeError, "response.created"),
    "openai_responses/resumed_truncated.sse": (RuntimeError, "response.created"),
}


def _client(data: bytes) -> openai.OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )


def sdk_stream(data: bytes) -> tuple[list[Any], Any]:
    """Run the SDK's stream helper; returns (events, final response or the exception)."""
    seen: list[Any] = []
    client = _client(data)
    with warnings.catch_warnings():
        # pydantic warns while serialising tools it has no model for (xAI x_search).
        warnings.simplefilter("ignore")
        try:
            with client.responses.stream(model="m", input="hi") as stream:
                for event in stream:
                    seen.append(event)
                final: Any = stream.get_final_response()
        except (RuntimeError, openai.APIError) as exc:
            final = exc
        finally:
            client.close()
    return seen, final


def _native_view(resp: dict[str, Any]) -> dict[str, Any]:
    text, refusal, calls, types = [], [], [], []
    for item in resp.get("output") or []:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    text.append(part["text"])
                elif part.get("type") == "refusal":
                    refusal.append(part["refusal"])
        elif item.get("type") == "function_call":
            calls.append((item["name"], item["call_id"], json.loads(item["arguments"])))
            types.append("function_call")
        elif item.get("type") == "custom_tool_call":
            calls.append((item["name"], item["call_id"], item["input"]))
            types.append("custom_tool_call")
    return {"text": "".join(text), "refusal": "".join(refusal), "calls": calls, "call_types": types}


def _strip(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if k != "call_types"}


def _sdk_view(resp: Any) -> dict[str, Any]:
    text, refusal, calls = [], [], []
    for item in resp.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    text.append(part.text)
                elif part.type == "refusal":
                    refusal.append(part.refusal)
        elif item.type == "function_call":
            calls.append((item.name, item.call_id, json.loads(item.arguments)))
        elif item.type == "custom_tool_call":
            calls.append((item.name, item.call_id, item.input))
    return {"text": "".join(text), "refusal": "".join(refusal), "calls": calls}


def _usage(usage: Any) -> Any:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.input_tokens_details.cached_tokens,
        "reasoning_tokens": usage.output_tokens_details.reasoning_tokens,
    }


def _native_usage(usage: Any) -> Any:
    if usage is None:
        return None
    return {
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        "total_tokens": usage["total_tokens"],
        "cached_tokens": usage["input_tokens_details"]["cached_tokens"],
        "reasoning_tokens": usage["output_tokens_details"]["reasoning_tokens"],
    }


def test_every_fixture_is_covered() -> None:
    assert len(FILES) >= 25
    for key in SDK_REJECTS:
        assert (FIXTURES / key).exists(), key


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_sdk_agrees_with_polystream(path: Path) -> None:
    dialect = path.parent.name
    data = path.read_bytes()
    events = decode_events(data, dialect)
    native = get_dialect(dialect).rebuild(events)
    result = accumulate(events)
    seen, final = sdk_stream(data)
    key = f"{dialect}/{path.name}"
    if key in SDK_REJECTS:
        kind, message = SDK_REJECTS[key]
        assert isinstance(final, kind), final
        assert message in str(final)
        # What the SDK did deliver agrees: its lifecycle events carry our object.
        terminal = [e for e in seen if e.type in ("response.incomplete", "response.failed")]
        if terminal:
            sdk_resp = terminal[-1].response
            assert sdk_resp.status == native["status"]
            assert _usage(sdk_resp.usage) == _native_usage(native.get("usage"))
            assert _sdk_view(sdk_resp) == _strip(_native_view(native))
        return
    assert not isinstance(final, BaseException), final
    assert final.status == native["status"] == result.status
    assert final.id == native["id"] == result.id
    assert _sdk_view(final) == _strip(_native_view(native))
    assert _usage(final.usage) == _native_usage(native["usage"])
    # And the unified Result says the same.
    view = _native_view(native)
    assert view["refusal"] == (result.refusal or "")
    # Custom tools take free text: the unified arguments are None, the text is kept.
    assert [
        (c.name, c.id, c.arguments if c.arguments is not None else c.arguments_json)
        for c in result.tool_calls
    ] == [
        call for call in view["calls"] if dialect != "xai_responses" or call[1].startswith("call_")
    ]
    assert result.text == final.output_text
    assert result.usage.input_tokens == final.usage.input_tokens
    assert result.usage.total_tokens == final.usage.total_tokens


# -- streams written from another dialect -----------------------------------------------


def hand_built() -> list[Event]:
    """A stream as another dialect (Anthropic-like) would decode it."""
    return [
        StreamStart(dialect="anthropic_messages", id="msg_01ABC", model="claude-haiku-4-5"),
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="Think about "),
        ReasoningDelta(index=0, delta="the weather."),
        SignatureDelta(index=0, delta="EqQBCkYIBRgCKkB+sig=="),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="Let me "),
        TextDelta(index=1, delta="check."),
        BlockEnd(index=1),
        BlockStart(index=2, kind="tool_call", id="toolu_01XYZ", name="get_weather"),
        ToolInputDelta(index=2, delta='{"city": '),
        ToolInputDelta(index=2, delta='"Paris"}'),
        BlockEnd(index=2),
        BlockStart(index=3, kind="tool_call", id="toolu_02NOARGS", name="get_time"),
        BlockEnd(index=3),
        UsageUpdate(usage=Usage(input_tokens=120, output_tokens=40, cache_read_tokens=100)),
        Finish(
            status="completed",
            reason=FinishReason(unified="tool_calls", raw="tool_use"),
            usage=Usage(input_tokens=120, output_tokens=45, cache_read_tokens=100),
        ),
    ]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sdk_accepts_a_stream_encoded_from_another_dialect(dialect: str) -> None:
    events = hand_built()
    encoder = get_dialect(dialect).encoder()
    data = encoder.encode_all(events)
    seen, final = sdk_stream(data)
    assert not isinstance(final, BaseException), final
    assert final.status == "completed"
    assert final.output_text == "Let me check."
    calls = [
        (i.name, i.call_id, json.loads(i.arguments))
        for i in final.output
        if i.type == "function_call"
    ]
    assert calls == [
        ("get_weather", "toolu_01XYZ", {"city": "Paris"}),
        ("get_time", "toolu_02NOARGS", {}),
    ]
    assert [i.type for i in final.output] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    assert final.output[0].content[0].text == "Think about the weather."
    assert final.output[0].encrypted_content is None  # not carried: see the loss below
    assert _usage(final.usage) == {
        "input_tokens": 120,
        "output_tokens": 45,
        "total_tokens": 165,
        "cached_tokens": 100,
        "reasoning_tokens": 0,
    }
    assert [(loss.what, loss.kind) for loss in encoder.losses] == [
        ("created_at", "defaulted"),  # the source states no creation time: 0
        ("signature", "lost"),
    ]
    assert final.created_at == 0
    # sequence_number counts from 0 without a gap
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    # polystream decodes its own output to the same reply
    result = accumulate(decode_events(data, dialect, strict=True))
    source = accumulate(events)
    assert result.text == source.text == "Let me check."
    assert result.reasoning == source.reasoning
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {}),
    ]
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="completed")
    assert result.usage.input_tokens == 120 and result.usage.output_tokens == 45


def _foreign(events: list[Event]) -> list[Event]:
    """The same stream with every native trace removed (as if from another dialect)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, StreamStart):
            out.append(StreamStart(dialect="other", id=event.id, model=event.model))
            continue
        if (
            event.extra is not None
            and event.extra.get("implicit")
            and not isinstance(event, (SignatureDelta, BlockStart, Finish))
        ):
            continue
        out.append(msgspec.structs.replace(event, extra=None, cursor=None))
    return out


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_fixture_reencoded_as_foreign_is_accepted(dialect: str, path: Path) -> None:
    events = decode_events(path.read_bytes(), path.parent.name)
    foreign = _foreign(events)
    source = accumulate(foreign)
    data = get_dialect(dialect).encoder().encode_all(foreign)
    again = accumulate(decode_events(data, dialect, strict=True))
    kinds = {b.kind for b in source.blocks}
    if source.status == "truncated":
        assert again.status == "truncated"
    else:
        assert again.status == source.status
    if "refusal" in kinds or "text" in kinds:
        assert again.refusal == source.refusal
        assert again.text == source.text
    assert [(c.name, c.arguments, c.arguments_json) for c in again.tool_calls] == [
        (c.name, c.arguments, c.arguments_json) for c in source.tool_calls
    ]
    assert again.reasoning == source.reasoning
    if source.status == "completed":
        _, final = sdk_stream(data)
        assert not isinstance(final, BaseException), final
        assert final.output_text == again.text


OTHER = [p for p in stream_fixtures() if p.parent.name not in DIALECTS and "bad" not in p.parts]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("path", OTHER, ids=[f"{p.parent.name}/{p.name}" for p in OTHER])
def test_every_other_dialect_transcoded(dialect: str, path: Path) -> None:
    source_dialect = path.parent.name
    events = decode_events(path.read_bytes(), source_dialect)
    source = accumulate(events)
    encoder = get_dialect(dialect).encoder()
    data = encoder.encode_all(events)
    again = accumulate(decode_events(data, dialect, strict=True))
    assert again.status == source.status
    if not any(b.candidate for b in source.blocks):
        assert again.text == source.text
        assert again.refusal == source.refusal
    assert [(c.name, c.arguments) for c in again.tool_calls] == [
        (c.name, c.arguments) for c in source.tool_calls
    ]
    if source.status == "truncated":
        assert data == b"" or not data.endswith(b"response.completed")
        if not source.usage.is_empty():
            assert "usage" in [loss.what for loss in encoder.losses]
        return
    if not source.usage.is_empty():
        assert again.usage.input_tokens == (source.usage.input_tokens or 0)
        assert again.usage.output_tokens == (source.usage.output_tokens or 0)
    if source.status == "completed":
        _, final = sdk_stream(data)
        assert not isinstance(final, BaseException), final
        assert final.output_text == again.text
        calls = [
            (i.name, json.loads(i.arguments)) for i in final.output if i.type == "function_call"
        ]
        assert calls == [(c.name, c.arguments) for c in again.tool_calls]

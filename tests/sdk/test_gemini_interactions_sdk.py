"""The official ``google-genai`` SDK on the same bytes as polystream (Interactions SSE).

``client.interactions.create(model=..., input=..., stream=True)`` runs over an
``httpx2.MockTransport`` (``HttpOptions(httpx_client=...)``) serving each fixture's exact
bytes. The SDK has no stream accumulator for interactions, so its typed events are folded
here the way its docs do (text of ``step.delta`` text deltas, function calls from
``FunctionCallStep`` + ``ArgumentsDelta``, signatures from ``ThoughtStep.signature`` and
every delta's ``signature``, usage and status from ``InteractionCompletedEvent``), and must
agree with polystream's Result and rebuilt ``Interaction``.

What the installed SDK does not have is asserted, not skipped: the legacy schema's events
come out as ``UnknownInteractionSSEEvent`` (raw payload kept), and a stream cut inside an
event yields the partial data as a plain ``str`` instead of an error.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import types

from polystream import StreamDecoder, get_dialect
from polystream.dialects.gemini_interactions import rebuild
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
from tests.helpers import FIXTURES, native_frames

DIALECT = "gemini_interactions"
FILES = sorted((FIXTURES / DIALECT).glob("*.sse"))
CURRENT = [p for p in FILES if p.name not in ("legacy.sse", "truncated.sse")]


_SERVED: list[bytes] = [b""]
_REQUESTS: list[httpx2.Request] = []


def _handler(request: httpx2.Request) -> httpx2.Response:
    _REQUESTS.append(request)
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_SERVED[0])


@functools.cache
def _client() -> genai.Client:
    # One client for the module: building one costs more than a whole stream.
    return genai.Client(
        api_key="x",
        http_options=types.HttpOptions(
            base_url="http://test",
            httpx_client=httpx2.Client(transport=httpx2.MockTransport(_handler)),
        ),
    )


def sdk_events(data: bytes) -> list[Any]:
    """Every event the SDK yields for a stream serving ``data``."""
    return list(_sdk_events(data))


@functools.lru_cache(maxsize=64)
def _sdk_events(data: bytes) -> tuple[Any, ...]:
    _SERVED[0] = data
    _REQUESTS.clear()
    events = list(_client().interactions.create(model="gemini-3.8-flash", input="hi", stream=True))
    assert len(_REQUESTS) == 1 and _REQUESTS[0].url.path == "/v1/interactions"
    assert json.loads(_REQUESTS[0].content)["stream"] is True
    return tuple(events)


class SdkView:
    """The SDK's events folded into the facts compared with polystream."""

    def __init__(self, events: list[Any]) -> None:
        self.id: str | None = None
        self.status: str | None = None
        self.usage: dict[str, Any] | None = None
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.signatures: dict[int, list[str]] = {}
        self.errors: list[tuple[str | None, str | None]] = []
        self.event_ids: list[str] = []
        self.unknown: list[str] = []
        kinds: dict[int, str] = {}
        for event in events:
            if getattr(event, "is_unknown", False):
                # The SDK has no types for interaction.in_progress / .requires_action.
                self.unknown.append(event.raw["event_type"])
                event_id = event.raw.get("event_id")
            else:
                event_id = getattr(event, "event_id", None)
            if event_id is not None:
                self.event_ids.append(event_id)
            etype = getattr(event, "event_type", None)
            if etype == "interaction.created":
                self.id = event.interaction.id
            elif etype == "step.start":
                step = event.step
                kinds[event.index] = step.type
                if getattr(step, "signature", None):
                    self.signatures.setdefault(event.index, []).append(step.signature)
                if step.type == "function_call":
                    self.calls[event.index] = {
                        "id": step.id,
                        "name": step.name,
                        "start": step.arguments,
                        "fragments": [],
                    }
                if step.type == "model_output" and step.content:
                    self.text.extend(c.text for c in step.content if c.type == "text")
            elif etype == "step.delta":
                delta = event.delta
                if (
                    delta.type == "text"
                    and kinds.get(event.index, "model_output") == "model_output"
                ):
                    self.text.append(delta.text)
                elif delta.type == "arguments_delta":
                    self.calls[event.index]["fragments"].append(delta.arguments)
                if getattr(delta, "signature", None):
                    self.signatures.setdefault(event.index, []).append(delta.signature)
            elif etype == "interaction.completed":
                self.status = event.interaction.status
                usage = event.interaction.usage
                self.usage = None if usage is None else usage.model_dump(exclude_none=True)
            elif etype == "error":
                self.errors.append((event.error.code, event.error.message))

    def tool_calls(self) -> list[tuple[str, str, Any]]:
        out = []
        for call in self.calls.values():
            text = "".join(call["fragments"])
            arguments = json.loads(text) if text else call["start"]
            out.append((call["id"], call["name"], arguments))
        return out


def polystream(data: bytes) -> tuple[list[Event], Any]:
    decoder = StreamDecoder(DIALECT, keep_events=True)
    decoder.feed(data)
    decoder.close()
    return decoder.events, decoder.result()


@pytest.mark.parametrize("path", CURRENT, ids=[p.name for p in CURRENT])
def test_sdk_agrees_with_polystream(path: Path) -> None:
    data = path.read_bytes()
    view = SdkView(sdk_events(data))
    events, result = polystream(data)
    native = rebuild(events)
    assert "".join(view.text) == result.text
    assert view.tool_calls() == [(c.id, c.name, c.arguments) for c in result.tool_calls]
    # Thought (and tool) signatures, byte for byte, on the same steps.
    signed = {b.index: b.signature for b in result.blocks if b.signature is not None}
    assert {index: "".join(parts) for index, parts in view.signatures.items()} == signed
    if view.status is not None:
        assert native["status"] == view.status
        assert result.finish_reason is not None and result.finish_reason.raw == view.status
        assert native["usage"] == view.usage
        assert result.usage.raw == view.usage
    if view.id is not None:
        assert result.id == native["id"] == view.id
    assert view.errors == [(e.code, e.message) for e in result.errors]
    # The resume cursors polystream keeps are exactly the event_ids the SDK saw.
    cursors = [e.cursor for e in events if e.cursor is not None]
    assert list(dict.fromkeys(cursors)) == view.event_ids
    assert set(view.unknown) <= {"interaction.in_progress", "interaction.requires_action"}


@pytest.mark.parametrize("path", CURRENT, ids=[p.name for p in CURRENT])
def test_sdk_sees_the_same_stream_after_re_encoding(path: Path) -> None:
    data = path.read_bytes()
    events, _ = polystream(data)
    encoded = get_dialect(DIALECT).encoder().encode_all(events)
    original = sdk_events(data)
    again = sdk_events(encoded)
    assert [e.model_dump() for e in again] == [e.model_dump() for e in original]


def test_sdk_has_no_legacy_schema() -> None:
    data = (FIXTURES / DIALECT / "legacy.sse").read_bytes()
    events = sdk_events(data)
    # Only interaction.status_update (shared by both schemas) is typed; the legacy events
    # pass through as unknown, with the payload kept.
    assert [type(e).__name__ for e in events].count("InteractionStatusUpdate") == 1
    unknown = [e for e in events if getattr(e, "is_unknown", False)]
    payloads = [v for name, v in native_frames(data) if name != "interaction.status_update"]
    assert [e.raw for e in unknown] == payloads[:-1]
    # What the SDK leaves raw, polystream decodes: the text and the call agree.
    _, result = polystream(data)
    text = "".join(
        e.raw["delta"]["text"]
        for e in unknown
        if e.raw["event_type"] == "content.delta" and e.raw["delta"]["type"] == "text"
    )
    assert text == result.text == "Let me check the weather."
    [call] = [
        e.raw["delta"]
        for e in unknown
        if e.raw["event_type"] == "content.delta" and e.raw["delta"]["type"] == "function_call"
    ]
    assert [(call["id"], call["name"], call["arguments"])] == [
        (c.id, c.name, c.arguments) for c in result.tool_calls
    ]


def test_sdk_does_not_detect_truncation() -> None:
    data = (FIXTURES / DIALECT / "truncated.sse").read_bytes()
    events = sdk_events(data)
    # The SDK yields the cut-off event's data as a string and ends without an error.
    assert isinstance(events[-1], str) and events[-1].startswith('{"index":0,"delta"')
    view = SdkView(events[:-1])
    _, result = polystream(data)
    assert "".join(view.text) == result.text
    assert result.status == "truncated"


def _foreign_events() -> list[Event]:
    usage = Usage(input_tokens=40, output_tokens=25, reasoning_tokens=5, total_tokens=65)
    return [
        StreamStart(dialect="anthropic_messages", id="msg_01", model="claude-haiku-4-5"),
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="Let me look."),
        SignatureDelta(index=0, delta="EqQBCkYIBxgCKkA="),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="Checking "),
        TextDelta(index=1, delta="now."),
        BlockEnd(index=1),
        BlockStart(index=2, kind="tool_call", id="toolu_01", name="get_weather"),
        ToolInputDelta(index=2, delta=""),
        ToolInputDelta(index=2, delta='{"city": "Par'),
        ToolInputDelta(index=2, delta='is"}'),
        BlockEnd(index=2),
        UsageUpdate(usage=usage),
        Finish(
            status="completed",
            reason=FinishReason(unified="tool_calls", raw="tool_use"),
            usage=usage,
        ),
    ]


def test_sdk_accepts_a_stream_encoded_from_another_dialect() -> None:
    encoder = get_dialect(DIALECT).encoder()
    data = encoder.encode_all(_foreign_events())
    events = sdk_events(data)
    assert not any(getattr(e, "is_unknown", False) for e in events)
    assert [e.event_type for e in events] == [
        "interaction.created",
        "step.start",
        "step.delta",
        "step.delta",
        "step.stop",
        "step.start",
        "step.delta",
        "step.delta",
        "step.stop",
        "step.start",
        "step.delta",
        "step.delta",
        "step.delta",
        "step.stop",
        "interaction.completed",
    ]
    view = SdkView(events)
    assert view.id == "msg_01"
    assert "".join(view.text) == "Checking now."
    assert view.tool_calls() == [("toolu_01", "get_weather", {"city": "Paris"})]
    # Anthropic state, carried with its origin (see SignatureDelta).
    assert view.signatures == {0: ["polystream:v1:anthropic_messages:EqQBCkYIBxgCKkA="]}
    assert view.status == "requires_action"
    assert view.usage == {
        "total_input_tokens": 40,
        "total_output_tokens": 20,
        "total_thought_tokens": 5,
        "total_tokens": 65,
    }
    assert len(set(view.event_ids)) == len(events)
    # Anthropic thinking is raw reasoning; Interactions only streams summaries. The
    # Anthropic signature travels in the carrier.
    assert [(loss.what, loss.event_index, loss.carried) for loss in encoder.losses] == [
        ("reasoning.raw", 2, False),
        ("signature", 3, True),
    ]
    summary = events[2].delta
    assert (summary.type, summary.content.text) == ("thought_summary", "Let me look.")


def test_sdk_error_event_matches() -> None:
    data = (FIXTURES / DIALECT / "error.sse").read_bytes()
    events = sdk_events(data)
    error = events[-1]
    assert type(error).__name__ == "ErrorEvent"
    decoded, result = polystream(data)
    [ours] = [e for e in decoded if isinstance(e, ErrorEvent)]
    assert (error.error.code, error.error.message) == (ours.error.code, ours.error.message)
    assert error.event_id == ours.cursor
    assert result.status == "failed"

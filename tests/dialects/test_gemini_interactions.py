"""gemini_interactions: exact events, both schemas, finish / usage tables, rebuild, resume,
foreign encoding and bad input (strict and tolerant)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from polystream import StreamDecoder, get_dialect
from polystream.dialects.gemini_interactions import (
    Decoder,
    Encoder,
    build_steps,
    rebuild,
    resume_cursor,
)
from polystream.dialects.gemini_interactions.finish_reason import (
    STATUS_TABLE,
    error_kind,
    map_status,
    native_status,
)
from polystream.dialects.gemini_interactions.usage import convert_usage, usage_to_native
from polystream.errors import RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
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
from tests.helpers import FIXTURES, feed_all, native_frames, split_at

DIALECT = "gemini_interactions"
HERE = FIXTURES / DIALECT
GOOD = sorted(HERE.glob("*.sse"))
BAD = sorted((HERE / "bad").glob("*.sse"))


def decode(data: bytes, **options: Any) -> list[Event]:
    decoder = Decoder(**options)
    return decoder.feed(data) + decoder.close()


def event_ids(data: bytes) -> list[str]:
    ids = []
    for _name, value in native_frames(data):
        if isinstance(value, dict) and "event_id" in value:
            ids.append(value["event_id"])
    return ids


def sse(*events: tuple[str, dict[str, Any]], done: bool = True) -> bytes:
    out = "".join(
        f"event: {name}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"
        for name, body in events
    )
    if done:
        out += "event: done\ndata: [DONE]\n\n"
    return out.encode()


def ev(name: str, eid: str, **body: Any) -> tuple[str, dict[str, Any]]:
    return name, {**body, "event_type": name, "event_id": eid}


CREATED = ev(
    "interaction.created",
    "e0",
    interaction={"id": "int_1", "status": "in_progress", "model": "gemini-3.8-flash"},
)


def completed(status: str, eid: str = "e9", **fields: Any) -> tuple[str, dict[str, Any]]:
    return ev(
        "interaction.completed",
        eid,
        interaction={"id": "int_1", "status": status, **fields},
    )


# -- exact events ----------------------------------------------------------------------------


def test_spec_skeleton_exact_events() -> None:
    data = (HERE / "text.sse").read_bytes()
    ids = event_ids(data)
    usage_raw = {
        "total_input_tokens": 5,
        "total_output_tokens": 1,
        "total_thought_tokens": 21,
        "total_tokens": 27,
        "input_tokens_by_modality": [{"modality": "text", "tokens": 5}],
    }
    usage = Usage(
        input_tokens=5, output_tokens=22, reasoning_tokens=21, total_tokens=27, raw=usage_raw
    )
    iid = "v1_ChdPS3RleHQtc2tlbGV0b24"
    assert decode(data) == [
        StreamStart(
            dialect=DIALECT,
            id=iid,
            model="gemini-3.8-flash",
            cursor=ids[0],
            extra={
                "interaction": {
                    "status": "in_progress",
                    "object": "interaction",
                    "created": "2026-09-18T10:00:00Z",
                    "updated": "2026-09-18T10:00:00Z",
                }
            },
        ),
        StatusUpdate(status="in_progress", cursor=ids[1], extra={"p": {"interaction_id": iid}}),
        BlockStart(index=0, kind="reasoning", cursor=ids[2]),
        SignatureDelta(
            index=0,
            delta="CiQBcsjafM3xr0aJ7Qz8p5b2Yt4Ew1jR9u0kL6nH2vB8sDq3fWgKZQFyyNp8",
            cursor=ids[3],
        ),
        BlockEnd(index=0, cursor=ids[4]),
        BlockStart(index=1, kind="text", cursor=ids[5]),
        TextDelta(index=1, delta="OK", cursor=ids[6]),
        BlockEnd(index=1, cursor=ids[7]),
        StatusUpdate(
            status="completed",
            cursor=ids[8],
            extra={
                "event": "interaction.completed",
                "interaction": {
                    "id": iid,
                    "object": "interaction",
                    "model": "gemini-3.8-flash",
                    "created": "2026-09-18T10:00:00Z",
                    "updated": "2026-09-18T10:00:01Z",
                    "usage": usage_raw,
                },
            },
        ),
        UsageUpdate(usage=usage, cursor=ids[8], extra={"derived": True}),
        Finish(
            status="completed", reason=FinishReason(unified="stop", raw="completed"), usage=usage
        ),
    ]


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_every_event_carries_its_event_id(path: Path) -> None:
    data = path.read_bytes()
    ids = event_ids(data)
    events = decode(data)
    cursors = [e.cursor for e in events if e.cursor is not None]
    # Every cursor is an event_id of the stream, in stream order, and every event_id
    # reaches at least one unified event.
    assert all(c in ids for c in cursors)
    assert sorted(set(cursors), key=ids.index) == ids
    positions = [ids.index(c) for c in cursors]
    assert positions == sorted(positions)
    assert resume_cursor(events) == ids[-1]


def test_resume_cursor_empty_and_partial() -> None:
    assert resume_cursor([]) is None
    data = (HERE / "function_call.sse").read_bytes()
    ids = event_ids(data)
    events = decode(data)
    cut = next(i for i, e in enumerate(events) if isinstance(e, ToolInputDelta))
    assert resume_cursor(events[: cut + 1]) == ids[5]


def test_function_calls_are_distinct_blocks_with_parsed_arguments() -> None:
    decoder = StreamDecoder(DIALECT)
    decoder.feed((HERE / "function_call.sse").read_bytes())
    decoder.close()
    result = decoder.result()
    assert [(c.id, c.name, c.arguments, c.index) for c in result.tool_calls] == [
        ("fc_7k2m9q", "get_weather", {"location": "Boston, MA", "unit": "celsius"}, 1),
        ("fc_p3x8w1", "get_time", {"timezone": "America/New_York"}, 2),
        ("fc_n0args", "list_alarms", {}, 3),
    ]
    assert result.status == "completed"
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="requires_action")
    # The thought signature sent in step.start is the reasoning block's signature.
    assert (
        result.blocks[0].signature == "CiQBcsjafM3xr0aJ7Qz8p5b2Yt4Ew1jR9u0kL6nH2vB8sDq3fWgKZQFyyNp8"
    )


def test_requires_action_status_event_has_no_status_field() -> None:
    events = decode((HERE / "function_call.sse").read_bytes())
    updates = [e for e in events if isinstance(e, StatusUpdate)]
    assert [u.status for u in updates] == ["in_progress", "requires_action", "requires_action"]
    assert updates[1].extra is not None
    assert updates[1].extra["event"] == "interaction.requires_action"
    assert updates[1].extra["no_status"] is True


def test_legacy_schema_decodes_to_the_same_model() -> None:
    legacy = StreamDecoder(DIALECT)
    legacy.feed((HERE / "legacy.sse").read_bytes())
    legacy.close()
    result = legacy.result()
    assert result.text == "Let me check the weather."
    assert result.reasoning == "Need the weather tool."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("fc_legacy1", "get_weather", {"location": "Paris"})
    ]
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="requires_action")
    events = decode((HERE / "legacy.sse").read_bytes())
    start = events[0]
    assert isinstance(start, StreamStart)
    assert start.extra is not None and start.extra["schema"] == "legacy"
    # The call's identity arrives in the delta: the block still has it, and the encoder
    # knows not to put it into content.start.
    call = next(e for e in events if isinstance(e, BlockStart) and e.kind == "tool_call")
    assert (call.id, call.name, call.extra) == (
        "fc_legacy1",
        "get_weather",
        {"from_delta": ["id", "name"]},
    )


def test_legacy_encoder_writes_legacy_names() -> None:
    data = (HERE / "legacy.sse").read_bytes()
    encoded = Encoder().encode_all(decode(data))
    names = [name for name, _ in native_frames(encoded)]
    assert names[0] == "interaction.start"
    assert "content.delta" in names and "step.delta" not in names
    assert names[-2:] == ["interaction.complete", "done"]


def test_image_step_is_an_image_block() -> None:
    decoder = StreamDecoder(DIALECT)
    decoder.feed((HERE / "image.sse").read_bytes())
    decoder.close()
    image, text = decoder.result().blocks
    assert image.kind == "image" and image.mime_type == "image/png"
    assert image.data == "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    assert text.text == "Here is a one-pixel image."


def test_server_tools_and_signatures() -> None:
    events = decode((HERE / "google_search.sse").read_bytes())
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.kind, s.name, s.id, s.call_id) for s in starts] == [
        ("server_tool_call", "google_search", "gs_1", None),
        ("server_tool_result", "google_search", None, "gs_1"),
        ("text", None, None, None),
    ]
    calls = [e for e in events if isinstance(e, ToolInputDelta)]
    assert json.loads(calls[0].delta) == {"queries": ["last Super Bowl winner"]}
    signatures = [e.delta for e in events if isinstance(e, SignatureDelta)]
    assert signatures == [
        "CiQBcsjafM3xr0aJ7Qz8p5b2Yt4Ew1jR9u0kL6nH2vB8sDq3fWgKZQFyyNp8",
        "Ej8KPQFyyNp8a1b2c3d4e5f6g7h8i9j0kLmNoPqRsTuVwXyZ+/AbCdEf==",
    ]
    [citation] = [e for e in events if isinstance(e, Citation)]
    assert citation.index == 2 and citation.citation["url"] == "https://www.nfl.com/super-bowl"


def test_mcp_step_keeps_type_and_server() -> None:
    events = decode((HERE / "mcp_file_search_audio.sse").read_bytes())
    mcp = events[1]
    assert isinstance(mcp, BlockStart)
    assert (mcp.kind, mcp.name, mcp.value) == (
        "server_tool_call",
        "list_issues",
        {"repo": "octo/demo", "state": "open"},
    )
    assert mcp.extra == {"step": {"server_name": "github"}, "type": "mcp_server_tool_call"}


# -- finish, errors, truncation ----------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(STATUS_TABLE))
def test_finish_status_table(status: str) -> None:
    events = decode(sse(CREATED, completed(status)))
    finish = events[-1]
    assert isinstance(finish, Finish)
    expected_status, expected_reason = STATUS_TABLE[status]
    assert finish.status == expected_status
    assert finish.reason == FinishReason(unified=expected_reason, raw=status)
    assert (finish.error is not None) == (expected_status == "failed")


def test_finish_table_default_and_inverse() -> None:
    assert map_status("brand_new") == ("incomplete", FinishReason(unified="other", raw="brand_new"))
    assert native_status("completed", FinishReason(unified="tool_calls")) == "requires_action"
    assert native_status("completed", FinishReason(unified="stop", raw="end_turn")) == "completed"
    assert native_status("incomplete", FinishReason(unified="cancelled")) == "cancelled"
    assert native_status("failed", FinishReason(unified="error")) == "failed"
    assert native_status("incomplete", FinishReason(unified="pause", raw="requires_continuation"))
    for status, (finish, reason) in STATUS_TABLE.items():
        assert native_status(finish, FinishReason(unified=reason, raw=status)) == status


def test_failed_interaction_error_from_errors_list() -> None:
    events = decode(
        sse(CREATED, completed("failed", errors=[{"code": "INTERNAL", "message": "boom"}]))
    )
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.error is not None
    assert (finish.error.kind, finish.error.code, finish.error.message) == (
        "server",
        "INTERNAL",
        "boom",
    )


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [
        ("UNAVAILABLE", "overloaded", True),
        ("RESOURCE_EXHAUSTED", "rate_limit", True),
        ("resource_exhausted", "rate_limit", True),
        ("INVALID_ARGUMENT", "invalid_request", False),
        ("PERMISSION_DENIED", "permission", False),
        ("DEADLINE_EXCEEDED", "timeout", True),
        (429, "rate_limit", True),
        ("503", "overloaded", True),
        ("SOMETHING_NEW", "unknown", False),
    ],
)
def test_error_event_is_typed(code: object, kind: str, retryable: bool) -> None:
    body = {"code": code, "message": "m"}
    events = decode(sse(CREATED, ev("error", "e1", error=body), done=False))
    error_event, finish = events[-2:]
    assert isinstance(error_event, ErrorEvent)
    assert error_event.cursor == "e1"
    assert (error_event.error.kind, error_event.error.retryable) == (kind, retryable)
    assert error_event.error.raw == body
    assert error_kind(code) == kind
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error == error_event.error
    assert finish.extra == {"done": False}


def test_error_fixture_keeps_text_and_fails() -> None:
    decoder = StreamDecoder(DIALECT)
    decoder.feed((HERE / "error.sse").read_bytes())
    decoder.close()
    result = decoder.result()
    assert result.text == "Once upon a time, "
    assert result.status == "failed"
    assert result.error is not None and result.error.kind == "overloaded"


def test_truncated_fixture() -> None:
    events = decode((HERE / "truncated.sse").read_bytes())
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "truncated" and finish.error is not None
    assert finish.error.kind == "truncated" and finish.error.event_index == 3
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["The quick brown fox "]
    # Re-encoding does not invent an end for a stream that had none.
    encoded = Encoder().encode_all(events)
    assert b"done" not in encoded and b"interaction.completed" not in encoded


def test_completed_without_done() -> None:
    data = sse(CREATED, completed("completed"), done=False)
    events = decode(data)
    assert isinstance(events[-2], Warning) and events[-2].code == "missing_done"
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "completed"
    assert finish.extra == {"done": False}
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    with pytest.raises(RemoteProtocolError, match="without done"):
        decode(data, strict=True)


def test_close_without_anything_is_truncated() -> None:
    events = decode(sse(CREATED, done=False))
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"


def test_requires_action_event_then_done_finishes_with_tool_calls() -> None:
    events = decode(sse(CREATED, ev("interaction.requires_action", "e1", interaction_id="int_1")))
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason.unified) == ("completed", "tool_calls")


def test_done_without_final_interaction_warns() -> None:
    events = decode(sse(CREATED))
    assert isinstance(events[-2], Warning) and events[-2].code == "no_final_interaction"
    assert isinstance(events[-1], Finish) and events[-1].status == "incomplete"


# -- usage -------------------------------------------------------------------------------------


def test_usage_arithmetic() -> None:
    raw = {
        "total_input_tokens": 100,
        "total_output_tokens": 40,
        "total_thought_tokens": 60,
        "total_cached_tokens": 30,
        "total_tool_use_tokens": 7,
        "total_tokens": 207,
        "input_tokens_by_modality": [
            {"modality": "text", "tokens": 90},
            {"modality": "audio", "tokens": 10},
        ],
        "output_tokens_by_modality": [{"modality": "audio", "tokens": 40}],
    }
    assert convert_usage(raw) == Usage(
        input_tokens=107,
        output_tokens=100,
        reasoning_tokens=60,
        cache_read_tokens=30,
        tool_prompt_tokens=7,
        audio_input_tokens=10,
        audio_output_tokens=40,
        total_tokens=207,
        raw=raw,
    )
    # No stated total: input + output.
    assert convert_usage({"total_input_tokens": 3, "total_output_tokens": 2}).total_tokens == 5
    assert convert_usage(None) == Usage()
    back, lost = usage_to_native(convert_usage(raw))
    assert {k: back[k] for k in back if k.startswith("total_")} == {
        k: raw[k] for k in raw if k.startswith("total_")
    }
    assert lost == []
    assert usage_to_native(Usage(input_tokens=1, cache_write_tokens=1))[1] == ["cache_write_tokens"]


def test_usage_arithmetic_on_fixture() -> None:
    decoder = StreamDecoder(DIALECT)
    decoder.feed((HERE / "google_search.sse").read_bytes())
    decoder.close()
    usage = decoder.result().usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (228, 75, 303)
    assert (usage.reasoning_tokens, usage.tool_prompt_tokens) == (64, 210)
    assert usage.input_tokens + usage.output_tokens == usage.total_tokens


# -- rebuild -----------------------------------------------------------------------------------


def _final_interaction(data: bytes) -> dict[str, Any]:
    for name, value in native_frames(data):
        if name == "interaction.completed":
            interaction: dict[str, Any] = value["interaction"]
            return interaction
    raise AssertionError("no interaction.completed")


def test_rebuild_equals_full_completed_interaction() -> None:
    data = (HERE / "thought_signature.sse").read_bytes()
    events = decode(data)
    final = _final_interaction(data)
    assert rebuild(events) == final
    # The steps rebuilt from the step events alone equal the server's own steps.
    assert build_steps(events) == final["steps"]


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_rebuild_extends_completed_interaction(path: Path) -> None:
    data = path.read_bytes()
    rebuilt = rebuild(decode(data))
    frames = native_frames(data)
    if any(name == "interaction.completed" for name, _ in frames):
        final = _final_interaction(data)
        assert {k: rebuilt[k] for k in final if k != "steps"} == {
            k: v for k, v in final.items() if k != "steps"
        }
    assert rebuilt.get("steps") is not None or rebuilt.get("outputs") is not None


def test_rebuild_function_call_steps() -> None:
    rebuilt = rebuild(decode((HERE / "function_call.sse").read_bytes()))
    assert rebuilt["status"] == "requires_action"
    assert rebuilt["steps"] == [
        {
            "type": "thought",
            "signature": "CiQBcsjafM3xr0aJ7Qz8p5b2Yt4Ew1jR9u0kL6nH2vB8sDq3fWgKZQFyyNp8",
        },
        {
            "type": "function_call",
            "id": "fc_7k2m9q",
            "name": "get_weather",
            "arguments": {"location": "Boston, MA", "unit": "celsius"},
        },
        {
            "type": "function_call",
            "id": "fc_p3x8w1",
            "name": "get_time",
            "arguments": {"timezone": "America/New_York"},
        },
        {"type": "function_call", "id": "fc_n0args", "name": "list_alarms", "arguments": {}},
    ]


def test_rebuild_tools_and_media() -> None:
    search = rebuild(decode((HERE / "google_search.sse").read_bytes()))["steps"]
    assert search[0] == {
        "type": "google_search_call",
        "id": "gs_1",
        "arguments": {"queries": ["last Super Bowl winner"]},
        "signature": "CiQBcsjafM3xr0aJ7Qz8p5b2Yt4Ew1jR9u0kL6nH2vB8sDq3fWgKZQFyyNp8",
    }
    assert search[1]["result"] == [
        {"search_suggestions": '<div class="container">Super Bowl LX</div>'}
    ]
    assert search[2]["content"][0]["annotations"][0]["title"] == "NFL.com"
    url = rebuild(decode((HERE / "url_context.sse").read_bytes()))["steps"]
    assert url[0]["arguments"] == {
        "urls": ["https://example.com/a", "https://example.com/paywalled"]
    }
    assert url[2]["content"] == [
        {"type": "text", "text": "Page A says hello; the other page is paywalled."}
    ]
    image = rebuild(decode((HERE / "image.sse").read_bytes()))["steps"][0]
    assert image["content"] == [
        {
            "type": "image",
            "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ",
            "mime_type": "image/png",
        }
    ]
    legacy = rebuild(decode((HERE / "legacy.sse").read_bytes()))
    assert "steps" not in legacy
    assert legacy["outputs"][2] == {
        "type": "function_call",
        "id": "fc_legacy1",
        "name": "get_weather",
        "arguments": {"location": "Paris"},
    }


# -- resume ------------------------------------------------------------------------------------


def test_resumed_stream() -> None:
    data = (HERE / "resumed.sse").read_bytes()
    events = decode(data)
    start, implicit = events[:2]
    assert start == StreamStart(dialect=DIALECT, extra={"resumed": True})
    assert implicit == BlockStart(index=0, kind="text", extra={"implicit": True, "index": 1})
    assert resume_cursor(events) == event_ids(data)[-1]
    # Re-encoding a resumed stream gives the same suffix, nothing invented before it.
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_resumed_legacy_stream_and_implicit_kinds() -> None:
    data = sse(
        ev("content.delta", "e5", index=0, delta={"type": "thought_signature", "signature": "s"}),
        ev("content.stop", "e6", index=0),
        ev("content.delta", "e7", index=1, delta={"type": "arguments_delta", "arguments": "{}"}),
        ev("interaction.complete", "e8", interaction={"id": "i", "status": "completed"}),
    )
    events = decode(data)
    assert events[0] == StreamStart(dialect=DIALECT, extra={"resumed": True, "schema": "legacy"})
    kinds = [e.kind for e in events if isinstance(e, BlockStart)]
    assert kinds == ["reasoning", "tool_call"]
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def _wire_events(data: bytes) -> list[bytes]:
    """The fixture's SSE events, each with its blank line (fixtures use LF); a cut-off
    last event (truncated.sse) is kept as it is."""
    *whole, rest = data.split(b"\n\n")
    frames = [frame + b"\n\n" for frame in whole]
    if rest:
        frames.append(rest)
    assert b"".join(frames) == data
    return frames


def _frame_id(frame: bytes) -> object:
    values = [value for _name, value in native_frames(frame)]
    return values[0].get("event_id") if values and isinstance(values[0], dict) else None


def _unlocated(events: list[Event]) -> list[Event]:
    """Events without the framing position of a truncation (counted from the start of
    the resumed body, not of the original stream)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, Finish) and event.error is not None:
            error = msgspec.structs.replace(event.error, event_index=None, byte_offset=None)
            event = msgspec.structs.replace(event, error=error)
        out.append(event)
    return out


@pytest.mark.parametrize("partial", [False, True], ids=["boundary", "mid-event"])
@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_resume_after_every_event_gives_the_uncut_events(path: Path, partial: bool) -> None:
    """A drop after any event, then ``reset_framing()`` and the server's replay of the
    events after ``last_cursor`` (``last_event_id``) fed to the same decoder: the
    unified events equal the uncut decode (no BlockStart twice, indices continue), also
    when the drop cut the next event in half."""
    data = path.read_bytes()
    frames = _wire_events(data)
    ids = [_frame_id(frame) for frame in frames]
    expected = decode(data)
    for cut in range(1, len(frames)):
        decoder = Decoder()
        head = b"".join(frames[:cut])
        if partial:
            head += frames[cut][: len(frames[cut]) // 2]
        got = decoder.feed(head)
        # The cursor is the id of the last whole event handled, even when that event
        # produced nothing yet (a step.start whose BlockStart waits for its first delta).
        last = next(i for i in reversed(ids[:cut]) if i is not None)
        assert decoder.last_cursor == last, cut
        decoder.reset_framing()
        tail = b"".join(frames[ids.index(last) + 1 :])
        got += decoder.feed(tail) + decoder.close()
        assert _unlocated(got) == _unlocated(expected), cut


def test_last_cursor_of_a_held_step_start_and_of_the_fast_path() -> None:
    decoder = Decoder()
    assert decoder.last_cursor is None
    out = decoder.feed(
        sse(
            ev("interaction.created", "e1", interaction={"id": "i"}),
            ev("step.start", "e2", index=0, step={"type": "model_output"}),
            done=False,
        )
    )
    assert [type(e) for e in out] == [StreamStart] and decoder.last_cursor == "e2"
    out = decoder.feed(
        sse(
            ev("step.delta", "e3", index=0, delta={"type": "text", "text": "a"}),
            ev("step.delta", "e4", index=0, delta={"type": "text", "text": "b"}),
            done=False,
        )
    )
    assert [type(e) for e in out] == [BlockStart, TextDelta, TextDelta]
    assert [e.cursor for e in out] == ["e2", "e3", "e4"] and decoder.last_cursor == "e4"
    decoder.feed(sse(ev("some.future_event", "e5"), done=False))
    assert decoder.last_cursor == "e5"


# -- unknown and odd payloads --------------------------------------------------------------------


def test_unknown_event_and_delta_type_pass_through() -> None:
    data = sse(
        CREATED,
        ev("interaction.brand_new", "e1", x=1),
        ev("step.start", "e2", index=0, step={"type": "model_output"}),
        ev("step.delta", "e3", index=0, delta={"type": "hologram", "beams": 3}),
        ev("step.stop", "e4", index=0),
        completed("completed"),
    )
    events = decode(data)
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert [(u.name, u.cursor) for u in unknown] == [
        ("interaction.brand_new", "e1"),
        ("step.delta", "e3"),
    ]
    assert json.loads(unknown[1].data)["delta"] == {"type": "hologram", "beams": 3}
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    with pytest.raises(RemoteProtocolError, match=r"unknown event 'interaction\.brand_new'"):
        decode(data, strict=True)


def test_every_catalog_delta_type_round_trips() -> None:
    deltas = [
        {"type": "text", "text": "a", "annotations": [{"type": "url_citation", "url": "u"}]},
        {"type": "thought_summary", "content": {"type": "text", "text": "t", "extra": 1}},
        {"type": "thought_summary", "content": {"type": "image", "data": "AA=="}},
        {"type": "thought_summary"},
        {"type": "thought_signature", "signature": "sig"},
        {"type": "arguments_delta", "arguments": '{"a"'},
        {"type": "text_annotation_delta", "annotations": [{"type": "a"}, {"type": "b"}]},
        {"type": "text_annotation_delta", "annotations": []},
        {"type": "image", "data": "AAAA", "mime_type": "image/png", "resolution": "high"},
        {"type": "image", "uri": "gs://bucket/x.png"},
        {"type": "audio", "data": "AAAA", "mime_type": "audio/wav", "sample_rate": 24000},
        {"type": "document", "data": "JVBE", "mime_type": "application/pdf"},
        {"type": "video", "uri": "gs://bucket/v.mp4", "mime_type": "video/mp4"},
        {"type": "code_execution_call", "arguments": {"code": "1+1", "language": "python"}},
        {"type": "code_execution_result", "result": "2", "is_error": False, "signature": "s2"},
        {"type": "url_context_call", "arguments": {"urls": ["https://a"]}},
        {"type": "url_context_result", "result": [{"url": "https://a", "status": "error"}]},
        {"type": "google_search_call", "arguments": {"queries": ["q"]}},
        {"type": "google_search_result", "result": [{"search_suggestions": "<b>"}]},
        {"type": "file_search_call", "signature": "s3"},
        {"type": "file_search_result", "result": [{"title": "t", "text": "x"}]},
        {"type": "google_maps_call", "arguments": {"queries": ["cafe"]}},
        {"type": "google_maps_result", "result": [{"places": []}]},
        {"type": "mcp_server_tool_call", "arguments": {"a": 1}, "name": "n", "server_name": "s"},
        {"type": "mcp_server_tool_result", "result": {"items": ["x"]}, "name": "n"},
        {"type": "function_result", "result": "ok", "name": "f", "is_error": False},
        {"type": "retrieval_call", "arguments": {"query": "q"}, "retrieval_type": "rag_store"},
        {"type": "retrieval_result", "is_error": True},
        {"type": "tool_search_call", "arguments": {"query": "q"}},
        {"type": "tool_search_result", "result": []},
        {"type": "processing_call"},
        {"type": "processing_result", "signature": "s4"},
    ]
    body = [CREATED, ev("step.start", "s", index=0, step={"type": "model_output"})]
    body += [ev("step.delta", f"d{i}", index=0, delta=d) for i, d in enumerate(deltas)]
    body += [ev("step.stop", "t", index=0, status="done"), completed("completed")]
    data = sse(*body)
    events = decode(data, strict=True)
    assert not any(isinstance(e, Unknown) for e in events)
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    assert [e.delta for e in events if isinstance(e, SignatureDelta)] == ["sig", "s2", "s3", "s4"]
    reasoning = [e for e in events if isinstance(e, ReasoningDelta)]
    assert [r.delta for r in reasoning] == ["t", "", ""]
    data_deltas = [e for e in events if isinstance(e, DataDelta)]
    assert [(d.delta, d.mime_type) for d in data_deltas] == [
        ("AAAA", "image/png"),
        ("", None),
        ("AAAA", "audio/wav"),
        ("JVBE", "application/pdf"),
        ("", "video/mp4"),
    ]
    assert [e.citation for e in events if isinstance(e, Citation)] == [
        {"type": "url_citation", "url": "u"},
        {"type": "a"},
        {"type": "b"},
        None,
    ]


def test_payload_fields_beyond_the_model_round_trip() -> None:
    data = sse(
        ev(
            "interaction.created",
            "e0",
            interaction={"id": "int_1", "status": "in_progress", "service_tier": "flex"},
            metadata={"trace": "t"},
        ),
        ev(
            "interaction.status_update",
            "e1",
            interaction_id="int_1",
            status="in_progress",
            usage={"total_input_tokens": 4},
            continuation_token="ct",
        ),
        ev(
            "step.start",
            "e2",
            index=7,
            step={"type": "thought", "summary": [{"type": "text", "text": "pre "}]},
            metadata={"m": 1},
        ),
        ev(
            "step.delta",
            "e3",
            index=7,
            delta={"type": "thought_summary", "content": {"type": "text", "text": "more"}},
            metadata={"total_usage": {}},
        ),
        ev("step.stop", "e4", index=7, usage={"total_input_tokens": 4, "total_output_tokens": 1}),
        completed("completed", object="interaction", steps=[]),
    )
    events = decode(data)
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    decoder = StreamDecoder(DIALECT)
    decoder.feed(data)
    decoder.close()
    assert decoder.result().reasoning == "pre more"
    # Steps rebuilt: the summary sent in step.start continues with the deltas.
    assert rebuild(events)["steps"] == [
        {"type": "thought", "summary": [{"type": "text", "text": "pre more"}]}
    ]


def test_data_only_and_event_only_framing() -> None:
    data = (
        b'data: {"interaction":{"id":"i","status":"in_progress"},'
        b'"event_type":"interaction.created"}\n\n'
        b'event: interaction.completed\ndata: {"interaction":{"id":"i","status":"completed"}}\n\n'
        b"data: [DONE]\n\n"
    )
    events = decode(data, strict=True)
    assert isinstance(events[0], StreamStart) and events[0].extra == {
        "no_event_name": True,
        "interaction": {"status": "in_progress"},
    }
    assert isinstance(events[-1], Finish) and events[-1].status == "completed"
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_fast_path_matches_generic_path() -> None:
    data = (HERE / "thought_signature.sse").read_bytes()
    fast = decode(data)
    slow = decode(data, keep_raw=True)
    assert [e for e in slow if type(e).__name__ != "Raw"] == fast


# -- bad input ---------------------------------------------------------------------------------

BAD_MESSAGES = {
    "delta_never_started.sse": "step.delta for step 4, which was never started",
    "malformed_json.sse": "malformed JSON payload",
    "name_mismatch.sse": "SSE event name 'step.stop' disagrees with the payload's event_type",
    "not_object.sse": "payload is not a JSON object",
}


def _third_event_offset(data: bytes) -> int:
    offset = 0
    for _ in range(2):
        offset = data.index(b"\n\n", offset) + 2
    return offset


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_bad_input_strict(path: Path) -> None:
    data = path.read_bytes()
    decoder = StreamDecoder(DIALECT, strict=True)
    # The events before the bad one are returned; the error follows on the next call.
    before = decoder.feed(data)
    assert before and not any(isinstance(e, ErrorEvent) for e in before)
    with pytest.raises(RemoteProtocolError) as info:
        decoder.close()
    error = info.value
    assert BAD_MESSAGES[path.name] in error.message
    assert (error.dialect, error.event_index, error.byte_offset) == (
        DIALECT,
        2,
        _third_event_offset(data),
    )


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_bad_input_tolerant(path: Path) -> None:
    data = path.read_bytes()
    whole = feed_all(lambda: StreamDecoder(DIALECT), [data])
    # Chunking does not change what a tolerant decoder reports.
    assert feed_all(lambda: StreamDecoder(DIALECT), split_at(data, [7, 250, 301, 333])) == whole
    kinds = [type(e).__name__ for e in whole]
    assert kinds == [
        "StreamStart",
        "BlockStart",
        "ErrorEvent",
        "TextDelta",
        "BlockEnd",
        "StatusUpdate",
        "UsageUpdate",
        "Finish",
    ]
    error = whole[2]
    assert isinstance(error, ErrorEvent)
    assert error.error.kind == "protocol"
    assert BAD_MESSAGES[path.name] in error.error.message
    assert (error.error.dialect, error.error.event_index, error.error.byte_offset) == (
        DIALECT,
        2,
        _third_event_offset(data),
    )
    # Nothing received is lost: the bad event's bytes are kept and re-encoded as received.
    third = data[_third_event_offset(data) :].split(b"\n\n")[0].decode()
    assert error.error.raw["data"] == third.split("data: ", 1)[1]
    assert native_frames(Encoder().encode_all(whole)) == native_frames(data)
    decoder = StreamDecoder(DIALECT)
    decoder.feed(data)
    decoder.close()
    assert decoder.result().text == "still here"
    assert decoder.result().status == "completed"


def test_delta_after_stop_and_bad_shapes() -> None:
    base = [CREATED, ev("step.start", "e1", index=0, step={"type": "model_output"})]
    cases = {
        "after it stopped": [
            ev("step.stop", "e2", index=0),
            ev("step.delta", "e3", index=0, delta={"type": "text", "text": "x"}),
        ],
        "without an integer index": [ev("step.stop", "e2", index="0")],
        "without a delta object": [ev("step.delta", "e2", index=0, delta="x")],
        "is not a string": [ev("step.delta", "e2", index=0, delta={"type": "text", "text": 5})],
        "event_id is not a string": [ev("step.stop", "e2", index=0) for _ in range(1)],
    }
    cases["event_id is not a string"][0][1]["event_id"] = [1]
    for message, tail in cases.items():
        with pytest.raises(RemoteProtocolError, match=message):
            decode(sse(*base, *tail), strict=True)
        events = decode(sse(*base, *tail))
        assert any(isinstance(e, ErrorEvent) and message in e.error.message for e in events)


# -- encoding another dialect's events ---------------------------------------------------------


def foreign_events() -> list[Event]:
    usage = Usage(
        input_tokens=120,
        output_tokens=50,
        reasoning_tokens=20,
        cache_read_tokens=100,
        cache_write_tokens=10,
        total_tokens=170,
    )
    return [
        StreamStart(dialect="openai_responses", id="resp_1", model="gpt-5.4-nano", cursor=0),
        StatusUpdate(status="in_progress", cursor=1),
        BlockStart(index=0, kind="reasoning", id="rs_1", cursor=2),
        ReasoningDelta(index=0, delta="Thinking.", summary=True, cursor=3),
        SignatureDelta(index=0, delta="gAAAAencrypted==", cursor=4),
        BlockEnd(index=0, cursor=5),
        BlockStart(index=1, kind="text", id="msg_1", cursor=6),
        TextDelta(index=1, delta="Hello ", cursor=7),
        TextDelta(index=1, delta="world.", cursor=8),
        Citation(index=1, citation={"type": "url_citation", "url": "https://x"}, cursor=9),
        Metadata(name="grounding", value={"chunks": []}),
        BlockEnd(index=1, cursor=10),
        BlockStart(
            index=2, kind="tool_call", id="fc_1", call_id="call_1", name="lookup", cursor=11
        ),
        ToolInputDelta(index=2, delta='{"q": ', cursor=12),
        ToolInputDelta(index=2, delta='"x"}', cursor=13),
        SignatureDelta(index=2, delta="tool-sig", cursor=14),
        BlockEnd(index=2, cursor=15),
        BlockStart(index=3, kind="server_tool_call", id="ws_1", name="web_search", cursor=16),
        BlockEnd(index=3, cursor=17),
        BlockStart(index=4, kind="compaction", cursor=18),
        TextDelta(index=4, delta="summary", cursor=19),
        BlockEnd(index=4, cursor=20),
        UsageUpdate(usage=usage, cursor=21),
        Finish(
            status="completed",
            reason=FinishReason(unified="tool_calls", raw="completed"),
            usage=usage,
            cursor=21,
        ),
    ]


def test_foreign_stream_encodes_to_a_valid_interactions_stream() -> None:
    encoder = get_dialect(DIALECT).encoder()
    data = encoder.encode_all(foreign_events())
    frames = native_frames(data)
    names = [name for name, _ in frames]
    # The in_progress StatusUpdate repeats what interaction.created said: not sent again.
    assert names == [
        "interaction.created",
        "step.start",
        "step.delta",
        "step.delta",
        "step.stop",
        "step.start",
        "step.delta",
        "step.delta",
        "step.delta",
        "step.stop",
        "step.start",
        "step.delta",
        "step.delta",
        "step.delta",
        "step.stop",
        "step.start",
        "step.stop",
        "interaction.completed",
        "done",
    ]
    payloads = [value for _, value in frames[:-1]]
    assert [p["event_id"] for p in payloads] == [f"evt_{i:06d}" for i in range(len(payloads))]
    assert all(p["event_type"] == name for (name, _), p in zip(frames, payloads, strict=False))
    assert payloads[0]["interaction"] == {
        "id": "resp_1",
        "status": "in_progress",
        "object": "interaction",
        "model": "gpt-5.4-nano",
    }
    assert payloads[10]["step"] == {
        "type": "function_call",
        "id": "call_1",
        "name": "lookup",
        "arguments": {},
    }
    assert payloads[15]["step"] == {"type": "web_search_call", "id": "ws_1"}
    assert payloads[-1]["interaction"] == {
        "id": "resp_1",
        "status": "requires_action",
        "object": "interaction",
        "model": "gpt-5.4-nano",
        "usage": {
            "total_input_tokens": 120,
            "total_output_tokens": 30,
            "total_thought_tokens": 20,
            "total_cached_tokens": 100,
            "total_tokens": 170,
        },
    }
    assert frames[-1] == ("done", "[DONE]")
    assert [(loss.what, loss.event_index, loss.carried) for loss in encoder.losses] == [
        ("signature", 4, True),
        ("metadata:grounding", 10, False),
        ("signature", 15, True),
        ("server-tool:web_search", 17, True),
        ("block-kind:compaction", 19, False),
        ("usage.cache_write_tokens", 23, False),
    ]
    # Decoding it back gives the same reply.
    decoder = StreamDecoder(DIALECT, strict=True)
    decoder.feed(data)
    decoder.close()
    result = decoder.result()
    assert result.text == "Hello world."
    assert result.reasoning == "Thinking."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_1", "lookup", {"q": "x"})
    ]
    assert [b.signature for b in result.blocks[:3]] == ["gAAAAencrypted==", None, "tool-sig"]
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="requires_action")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (120, 50)
    assert result.usage.cache_read_tokens == 100


def test_foreign_truncated_and_failed_streams() -> None:
    start = StreamStart(dialect="anthropic_messages", id="msg_1")
    truncated = Finish(status="truncated", reason=FinishReason(unified="error"))
    data = Encoder().encode_all([start, truncated])
    assert [name for name, _ in native_frames(data)] == ["interaction.created"]
    error = ErrorEvent(error=ErrorInfo(kind="overloaded", message="busy", code="overloaded_error"))
    failed = Finish(status="failed", reason=FinishReason(unified="error"), error=error.error)
    data = Encoder().encode_all([start, error, failed])
    frames = native_frames(data)
    assert [name for name, _ in frames] == [
        "interaction.created",
        "error",
        "interaction.completed",
        "done",
    ]
    assert frames[1][1]["error"] == {"code": "overloaded_error", "message": "busy"}
    assert frames[2][1]["interaction"]["status"] == "failed"
    events = decode(data)
    assert isinstance(events[-1], Finish) and events[-1].status == "failed"


# -- the documentation's own examples, verbatim (migration guide, "Streaming") ---------------

LEGACY_DOC_EXAMPLE = b"""event: interaction.start
data: {"id": "int_123", "status": "in_progress"}

event: content.start
data: {"index": 0, "type": "text"}

event: content.delta
data: {"delta": {"type": "text", "text": "Quantum entanglement is..."}}

event: content.stop
data: {"index": 0}

event: interaction.complete
data: {"id": "int_123", "status": "done", "usage": {"total_tokens": 42}}

"""

STEPS_DOC_EXAMPLE = b"""event: interaction.created
data: {"interaction": {"id": "int_xyz", "status": "in_progress", "object": "interaction", \
"model": "gemini-3.5-flash"}, "event_type": "interaction.created"}

event: interaction.in_progress
data: {"interaction_id": "int_xyz", "event_type": "interaction.in_progress"}

event: step.start
data: {"index": 0, "step": {"type": "thought", "signature": "abc123..."}, \
"event_type": "step.start"}

event: step.stop
data: {"index": 0, "event_type": "step.stop"}

event: step.start
data: {"index": 1, "step": {"content": [{"text": "Once upon", "type": "text"}], \
"type": "model_output"}, "event_type": "step.start"}

event: step.delta
data: {"index": 1, "delta": {"text": " a time...", "type": "text"}, "event_type": "step.delta"}

event: step.stop
data: {"type": "step.stop", "index": 1, "status": "done"}

event: interaction.completed
data: {"type": "interaction.completed", "interaction": {"id": "int_xyz", "status": "completed", \
"usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}}

"""


def test_legacy_doc_example() -> None:
    events = decode(LEGACY_DOC_EXAMPLE)
    decoder = StreamDecoder(DIALECT)
    decoder.feed(LEGACY_DOC_EXAMPLE)
    decoder.close()
    result = decoder.result()
    assert (result.id, result.text, result.usage.total_tokens) == (
        "int_123",
        "Quantum entanglement is...",
        42,
    )
    assert result.finish_reason == FinishReason(unified="stop", raw="done")
    assert [w.code for w in result.warnings] == ["missing_done"]
    assert native_frames(Encoder().encode_all(events)) == native_frames(LEGACY_DOC_EXAMPLE)
    assert rebuild(events) == {
        "id": "int_123",
        "status": "done",
        "usage": {"total_tokens": 42},
        "outputs": [{"type": "text", "text": "Quantum entanglement is..."}],
    }


def test_steps_doc_example() -> None:
    events = decode(STEPS_DOC_EXAMPLE)
    decoder = StreamDecoder(DIALECT)
    decoder.feed(STEPS_DOC_EXAMPLE)
    decoder.close()
    result = decoder.result()
    assert result.text == "Once upon a time..."
    assert result.blocks[0].signature == "abc123..."
    assert result.blocks[1].status == "done"
    assert result.finish_reason == FinishReason(unified="stop", raw="completed")
    assert native_frames(Encoder().encode_all(events)) == native_frames(STEPS_DOC_EXAMPLE)
    assert rebuild(events)["steps"] == [
        {"type": "thought", "signature": "abc123..."},
        {"type": "model_output", "content": [{"text": "Once upon a time...", "type": "text"}]},
    ]


def test_foreign_raw_reasoning_and_inline_media() -> None:
    encoder = Encoder()
    data = encoder.encode_all(
        [
            StreamStart(dialect="xai_chat", id="chatcmpl-1"),
            BlockStart(index=0, kind="reasoning"),
            ReasoningDelta(index=0, delta="a"),
            ReasoningDelta(index=0, delta="b"),
            BlockEnd(index=0),
            BlockStart(index=1, kind="text"),
            DataDelta(index=1, delta="UklGRg==", mime_type="audio/wav"),
            DataDelta(index=1, delta="JVBERi0=", mime_type="application/pdf"),
            BlockEnd(index=1),
            Finish(status="completed", reason=FinishReason(unified="stop")),
        ]
    )
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [("reasoning.raw", 2)]
    deltas = [v["delta"] for name, v in native_frames(data) if name == "step.delta"]
    assert [d["type"] for d in deltas] == [
        "thought_summary",
        "thought_summary",
        "audio",
        "document",
    ]
    assert deltas[2] == {"data": "UklGRg==", "mime_type": "audio/wav", "type": "audio"}


def test_rebuild_of_another_dialects_events() -> None:
    assert rebuild(foreign_events()) == {
        "id": "resp_1",
        "status": "requires_action",
        "object": "interaction",
        "model": "gpt-5.4-nano",
        "usage": {
            "total_input_tokens": 120,
            "total_output_tokens": 30,
            "total_thought_tokens": 20,
            "total_cached_tokens": 100,
            "total_tokens": 170,
        },
        "steps": [
            {
                "type": "thought",
                # Another dialect's state, as the encoder writes it: in the carrier.
                "signature": "polystream:v1:openai_responses:gAAAAencrypted==",
                "summary": [{"type": "text", "text": "Thinking."}],
            },
            {
                "type": "model_output",
                "content": [
                    {
                        "type": "text",
                        "text": "Hello world.",
                        "annotations": [{"type": "url_citation", "url": "https://x"}],
                    }
                ],
            },
            {
                "type": "function_call",
                "id": "call_1",
                "name": "lookup",
                "arguments": {"q": "x"},
                "signature": "polystream:v1:openai_responses:tool-sig",
            },
            {"type": "web_search_call", "id": "ws_1"},
        ],
    }


def test_step_restarted_while_open() -> None:
    data = sse(
        CREATED,
        ev("step.start", "e1", index=0, step={"type": "model_output"}),
        ev("step.start", "e2", index=0, step={"type": "model_output"}),
        ev("step.delta", "e3", index=0, delta={"type": "text", "text": "x"}),
        ev("step.stop", "e4", index=0),
        completed("completed"),
    )
    events = decode(data)
    warning = next(e for e in events if isinstance(e, Warning))
    assert (warning.code, warning.event_index) == ("step_restarted", 2)
    starts = [e.index for e in events if isinstance(e, BlockStart)]
    assert starts == [0, 1]
    assert [e.index for e in events if isinstance(e, TextDelta)] == [1]
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    with pytest.raises(RemoteProtocolError, match="still open"):
        decode(data, strict=True)


# -- foreign blocks without a visible-text form; statuses; finish reasons; final interaction --


def test_foreign_code_blocks_become_code_execution_steps() -> None:
    """Code and its result are never visible text: a code_execution_call step whose
    arguments (streamed as text or tool input) are sent whole at the end, and a
    code_execution_result step linked by call_id; a refusal has no step and is dropped."""
    encoder = Encoder()
    data = encoder.encode_all(
        [
            StreamStart(dialect="openai_responses", id="resp_1"),
            BlockStart(index=0, kind="code", id="ci_1", call_id="call_9", name="shell"),
            ToolInputDelta(index=0, delta="ls "),
            ToolInputDelta(index=0, delta="-la"),
            BlockEnd(index=0),
            BlockStart(index=1, kind="code_result", call_id="call_9", name="shell_call_output"),
            TextDelta(index=1, delta="total 0\n"),
            BlockEnd(index=1),
            BlockStart(index=2, kind="code"),  # Gemini executableCode: no id, no name
            TextDelta(index=2, delta="print(1)\n"),
            BlockEnd(index=2),
            BlockStart(index=3, kind="code_result", value={"outcome": "OUTCOME_FAILED"}),
            BlockEnd(index=3, value={"outcome": "OUTCOME_FAILED", "output": "boom"}),
            BlockStart(index=4, kind="refusal"),
            TextDelta(index=4, delta="I can't help with that."),
            BlockEnd(index=4),
            BlockStart(index=5, kind="text"),
            TextDelta(index=5, delta="Done."),
            BlockEnd(index=5),
            Finish(status="completed", reason=FinishReason(unified="stop")),
        ]
    )
    frames = native_frames(data)
    steps = [(v["index"], v["step"]) for name, v in frames if name == "step.start"]
    assert steps == [
        (0, {"type": "code_execution_call", "id": "call_9"}),
        (1, {"type": "code_execution_result", "call_id": "call_9"}),
        (2, {"type": "code_execution_call", "id": "call_2"}),
        (3, {"type": "code_execution_result", "call_id": "call_2"}),
        (4, {"type": "model_output"}),
    ]
    deltas = [(v["index"], v["delta"]) for name, v in frames if name == "step.delta"]
    assert deltas == [
        (
            0,
            {"arguments": {"code": "ls -la", "language": "bash"}, "type": "code_execution_call"},
        ),
        (1, {"result": "total 0\n", "type": "code_execution_result"}),
        (2, {"arguments": {"code": "print(1)\n"}, "type": "code_execution_call"}),
        (3, {"result": "boom", "is_error": True, "type": "code_execution_result"}),
        (4, {"text": "Done.", "type": "text"}),
    ]
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [
        ("block-kind:refusal", 13)
    ]
    decoder = StreamDecoder(DIALECT, strict=True)
    decoder.feed(data)
    decoder.close()
    result = decoder.result()
    assert result.text == "Done."
    assert [(b.kind, b.name) for b in result.blocks[:4]] == [
        ("server_tool_call", "code_execution"),
        ("server_tool_result", "code_execution"),
        ("server_tool_call", "code_execution"),
        ("server_tool_result", "code_execution"),
    ]


def test_foreign_statuses_that_are_not_interaction_statuses() -> None:
    """An item's ``done`` / ``completed`` (OpenAI part and item events) is not the
    interaction's status: sending it would end the interaction early, so a cut-off
    source would decode as completed. Only in_progress / queued / idle changes go out."""
    encoder = Encoder()
    events: list[Event] = [
        StreamStart(dialect="openai_responses", extra={"resumed": True}),
        StatusUpdate(status="queued"),
        StatusUpdate(status="in_progress"),
        StatusUpdate(status="in_progress"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Background work done."),
        StatusUpdate(status="done"),
        StatusUpdate(status="completed"),
        StatusUpdate(status="done"),
        Finish(status="truncated", reason=FinishReason(unified="error")),
    ]
    data = encoder.encode_all(events)
    frames = native_frames(data)
    assert frames[0][1]["interaction"]["status"] == "in_progress"
    statuses = [v["status"] for name, v in frames if name == "interaction.status_update"]
    assert statuses == ["queued", "in_progress"]
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [
        ("id", 0),  # defaulted: the resumed stream named none
        ("status:done", 6),
        ("status:completed", 7),
    ]
    result = decode(data)
    assert isinstance(result[-1], Finish) and result[-1].status == "truncated"


@pytest.mark.parametrize(
    ("status", "unified", "native", "lost"),
    [
        ("completed", "stop", "completed", False),
        ("completed", "tool_calls", "requires_action", False),
        ("incomplete", "length", "incomplete", False),
        ("incomplete", "pause", "requires_continuation", False),
        ("incomplete", "context_window", "incomplete", True),
        ("completed", "refusal", "completed", True),
        ("completed", "other", "completed", True),
        ("incomplete", "content_filter", "incomplete", True),
    ],
)
def test_foreign_finish_reason_or_its_loss(
    status: str, unified: str, native: str, lost: bool
) -> None:
    encoder = Encoder()
    finish = Finish(
        status=status,  # type: ignore[arg-type]
        reason=FinishReason(unified=unified, raw="x"),  # type: ignore[arg-type]
        usage=Usage(input_tokens=134, output_tokens=19, tool_prompt_tokens=120, total_tokens=153),
    )
    data = encoder.encode_all([StreamStart(dialect="anthropic_messages", id="m"), finish])
    final = dict(native_frames(data))["interaction.completed"]["interaction"]
    assert final["status"] == native
    assert final["usage"] == {
        "total_input_tokens": 14,
        "total_output_tokens": 19,
        "total_tool_use_tokens": 120,
        "total_tokens": 153,
    }
    losses = [loss.what for loss in encoder.losses]
    assert losses == ([f"finish_reason:{unified}"] if lost else [])
    back = decode(data)[-1]
    assert isinstance(back, Finish) and back.status == status
    assert (back.reason.unified == unified) is not lost
    assert back.usage is not None and back.usage.input_tokens == 134


def test_native_events_without_extras_get_the_final_interaction() -> None:
    """Events that name this dialect but were not decoded from it (built by hand, no
    interaction extras) still get ``interaction.completed`` with status and usage before
    ``done``; a decoded stream that had none stays without one (``no_final``)."""
    usage = Usage(input_tokens=9, output_tokens=15, total_tokens=24)
    events: list[Event] = [
        StreamStart(dialect=DIALECT, id="v1_x", model="gemini-3.5-flash"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hi."),
        BlockEnd(index=0),
        UsageUpdate(usage=usage),
        Finish(status="completed", reason=FinishReason(unified="stop"), usage=usage),
    ]
    data = Encoder().encode_all(events)
    frames = native_frames(data)
    assert [name for name, _ in frames][-2:] == ["interaction.completed", "done"]
    assert frames[-2][1]["interaction"] == {
        "id": "v1_x",
        "status": "completed",
        "object": "interaction",
        "model": "gemini-3.5-flash",
        "usage": {"total_input_tokens": 9, "total_output_tokens": 15, "total_tokens": 24},
    }
    decoder = StreamDecoder(DIALECT, strict=True)
    decoder.feed(data)
    decoder.close()
    result = decoder.result()
    assert (result.status, result.text, result.warnings) == ("completed", "Hi.", [])
    # A source without a final interaction keeps its shape.
    source = sse(CREATED, ev("step.start", "e1", index=0, step={"type": "model_output"}))
    decoded = decode(source)
    assert isinstance(decoded[-1], Finish) and decoded[-1].extra == {"no_final": True}
    assert native_frames(Encoder().encode_all(decoded)) == native_frames(source)


def test_emulator_default_reply_ends_with_the_final_interaction() -> None:
    import httpx

    from polystream.scenario import Emulator
    from polystream.server import ServerThread

    server = ServerThread(Emulator()).start()
    try:
        response = httpx.post(
            server.base_url + "/gemini/v1beta/interactions",
            json={"model": "gemini-3.5-flash", "input": "hello", "stream": True},
            headers={"x-goog-api-key": "k"},
        )
    finally:
        server.stop()
    assert response.status_code == 200
    names = [name for name, _ in native_frames(response.content)]
    assert names[-2:] == ["interaction.completed", "done"]
    decoder = StreamDecoder(DIALECT, strict=True)
    decoder.feed(response.content)
    decoder.close()
    result = decoder.result()
    assert result.status == "completed" and result.warnings == []
    assert "hello" in result.text and result.usage.output_tokens

"""Decoder and transcoder edge cases: a late index-less Interactions delta, a Gemini
candidate that never finishes, a BOM before a Gemini stream, a Gemini array of
non-objects, and free-form (custom) tool calls between Responses and Chat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

import polystream
from polystream import StreamDecoder
from polystream.dialects.gemini_generate import Decoder as GeminiDecoder
from polystream.errors import EventOrderError, RemoteProtocolError
from polystream.events import ErrorEvent, ErrorInfo, Finish, FinishReason

from .helpers import assert_chunking_invariant, feed_all, feed_steps, split_at

FIXTURES = Path(__file__).parent / "fixtures"
BOM = b"\xef\xbb\xbf"


def _events(dialect: str, data: bytes, **options: Any) -> list[Any]:
    decoder = StreamDecoder(dialect, **options)
    return decoder.feed(data) + decoder.close()


# -- gemini_interactions: a delta without an index after the last step stopped --------------

INTERACTIONS = (FIXTURES / "gemini_interactions" / "text.sse").read_bytes()
LATE = (
    b"event: step.delta\n"
    b'data: {"delta":{"text":"late","type":"text"},"event_type":"step.delta","event_id":"zz"}'
    b"\n\n"
)
LATE_STOP = b'event: step.stop\ndata: {"event_type":"step.stop","event_id":"zy"}\n\n'


@pytest.mark.parametrize(("late", "what"), [(LATE, "step.delta"), (LATE_STOP, "step.stop")])
def test_interactions_index_less_event_after_the_last_step_stopped(late: bytes, what: str) -> None:
    cut = INTERACTIONS.index(b"event: interaction.completed")
    data = INTERACTIONS[:cut] + late + INTERACTIONS[cut:]
    message = f"{what} without an index after the last step (step 1) stopped"
    events = _events("gemini_interactions", data)
    errors = [e for e in events if type(e) is ErrorEvent]
    assert errors == [
        ErrorEvent(
            error=ErrorInfo(
                kind="protocol",
                message=message,
                dialect="gemini_interactions",
                event_index=8,
                byte_offset=cut,
                raw={"event": what, "data": late.split(b"data: ")[1].strip().decode()},
            )
        )
    ]
    # Everything else is as without the event: the stream goes on and completes.
    plain = _events("gemini_interactions", INTERACTIONS)
    assert [e for e in events if type(e) is not ErrorEvent] == plain
    assert polystream.decode(data, "gemini_interactions").status == "completed"
    assert_chunking_invariant(lambda: StreamDecoder("gemini_interactions"), data, events)
    for chunks in ([data], split_at(data, [5, cut + 3])):
        _, _, error = feed_steps(StreamDecoder("gemini_interactions", strict=True), chunks)
        assert error == (
            "EventOrderError",
            f"{message} (dialect gemini_interactions, event 8, byte {cut})",
            8,
            cut,
        )
    with pytest.raises(EventOrderError):
        polystream.decode(data, "gemini_interactions", strict=True)


# -- gemini_generate: every candidate that began must finish ---------------------------------

TWO = (FIXTURES / "gemini_generate" / "two_candidates.sse").read_bytes()


def _as_array(sse: bytes) -> bytes:
    chunks = [line[6:] for line in sse.split(b"\n") if line.startswith(b"data: ")]
    return b"[" + b",\r\n".join(chunks) + b"]"


@pytest.mark.parametrize("framing", ["sse", "json_array"])
def test_a_candidate_cut_before_its_finish_reason_is_truncated(framing: str) -> None:
    cut = TWO[: TWO.rindex(b"data: ")]  # candidate 0 finished, candidate 1 not
    data = cut if framing == "sse" else _as_array(cut)
    events = assert_chunking_invariant(GeminiDecoder, data, seeds=5)
    finish = events[-1]
    assert type(finish) is Finish
    assert (finish.status, finish.reason) == ("truncated", FinishReason(unified="error", raw=None))
    assert finish.error is not None
    assert finish.error.kind == "truncated"
    assert finish.error.message == (
        "stream closed without a finishReason for candidate 1 (another candidate finished; "
        "Gemini ends streams by closing)"
    )
    assert polystream.decode(data, "gemini_generate").status == "truncated"
    # Whole, both finish.
    whole = TWO if framing == "sse" else _as_array(TWO)
    assert polystream.decode(whole, "gemini_generate").status == "completed"


def test_every_candidate_the_gemini_encoder_began_finishes() -> None:
    # Chat's second choice ends before the stream's Finish: the Gemini stream written
    # from it gives that candidate a finishReason too, so that it reads as complete.
    from polystream.transcode import convert

    source = (FIXTURES / "openai_chat" / "n2_choices.sse").read_bytes()
    data, _ = convert(source, "gemini_generate", source="openai_chat")
    lines = [line for line in data.splitlines() if line.startswith(b"data: ")]
    last = msgspec.json.decode(lines[-1][6:])
    assert [(c["index"], c.get("finishReason")) for c in last["candidates"]] == [
        (0, "STOP"),
        (1, "STOP"),
    ]
    assert polystream.decode(data, "gemini_generate").status == "completed"


# -- gemini_generate: a UTF-8 BOM before the stream ------------------------------------------


def _gemini_chunks() -> list[bytes]:
    def chunk(text: str, **more: Any) -> bytes:
        candidate = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        candidate.update(more)
        usage = {"promptTokenCount": 7, "candidatesTokenCount": 1, "totalTokenCount": 8}
        body = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "g"}
        return msgspec.json.encode(body)

    return [chunk(f"w{i} ") for i in range(4)] + [chunk("end", finishReason="STOP")]


@pytest.mark.parametrize("framing", ["sse", "json_array"])
@pytest.mark.parametrize("explicit", [False, True])
def test_a_bom_before_the_stream_is_read_once(framing: str, explicit: bool) -> None:
    chunks = _gemini_chunks()
    if framing == "sse":
        plain = b"".join(b"data: " + c + b"\r\n\r\n" for c in chunks)
    else:
        plain = b"[" + b"\r\n,\r\n".join(chunks) + b"\r\n]"
    options = {"framing": framing} if explicit else {}

    def make() -> GeminiDecoder:
        return GeminiDecoder(**options)

    expected = feed_all(make, [plain])
    assert [type(e).__name__ for e in expected].count("TextDelta") == 5
    events = assert_chunking_invariant(make, BOM + plain, seeds=10)
    assert events == expected
    assert polystream.decode(BOM + plain).text == "w0 w1 w2 w3 end"


# -- gemini_generate: an array whose first element is not an object -------------------------


@pytest.mark.parametrize(
    ("data", "kind", "offset"),
    [
        (b"[1, 2]", "number", 1),
        (b'[ "x" ]', "string", 2),
        (b"[[1]]", "array", 1),
        (b"[\r\n null]", "null", 4),
        (b"[true]", "boolean", 1),
        (BOM + b"[-1.5]", "number", 4),
    ],
)
def test_an_array_of_non_objects_is_a_protocol_error(data: bytes, kind: str, offset: int) -> None:
    message = (
        f"the array's first element is a JSON {kind}, not an object: not a Gemini stream "
        "(an array of response objects)"
    )
    for strict in (False, True):
        for chunks in ([data], [data[i : i + 1] for i in range(len(data))]):
            events, _, error = feed_steps(GeminiDecoder(strict=strict), chunks)
            assert events == []
            assert error == (
                "RemoteProtocolError",
                f"{message} (dialect gemini_generate, event 0, byte {offset})",
                0,
                offset,
            )
    with pytest.raises(RemoteProtocolError) as caught:
        polystream.decode(data)
    assert caught.value.byte_offset == offset


def test_a_later_non_object_element_stays_an_error_event() -> None:
    chunks = _gemini_chunks()
    data = b"[" + chunks[0] + b",\r\n42,\r\n" + b",\r\n".join(chunks[1:]) + b"]"
    offset = data.index(b"42")
    events = _events("gemini_generate", data)
    errors = [e.error for e in events if type(e) is ErrorEvent]
    assert [(e.message, e.event_index, e.byte_offset) for e in errors] == [
        ("chunk is not a JSON object (got int)", 1, offset)
    ]
    assert polystream.decode(data).text == "w0 w1 w2 w3 end"


# -- free-form (custom) tool calls: Responses <-> Chat ----------------------------------------

CUSTOM_RESPONSES = (FIXTURES / "openai_responses" / "mcp_file_search_custom_tool.sse").read_bytes()


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-5",
        "choices": [choice],
    }
    return b"data: " + msgspec.json.encode(body) + b"\n\n"


CUSTOM_CHAT = (
    _chat_chunk({"role": "assistant", "content": None})
    + _chat_chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "custom",
                    "custom": {"name": "code_exec", "input": ""},
                }
            ]
        }
    )
    + _chat_chunk({"tool_calls": [{"index": 0, "custom": {"input": "print("}}]})
    + _chat_chunk({"tool_calls": [{"index": 0, "custom": {"input": "'hi')"}}]})
    + _chat_chunk({}, "tool_calls")
    + b"data: [DONE]\n\n"
)


def _openai(data: bytes) -> Any:
    import httpx2
    import openai

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def _chat_frames(data: bytes) -> list[Any]:
    return [
        msgspec.json.decode(block[6:])
        for block in data.split(b"\n\n")
        if block.startswith(b"data: {")
    ]


def test_responses_custom_call_to_chat_is_a_custom_call() -> None:
    from polystream.transcode import convert

    data, losses = convert(CUSTOM_RESPONSES, "openai_chat", source="openai_responses")
    calls = [
        call
        for frame in _chat_frames(data)
        for choice in frame["choices"]
        for call in choice["delta"].get("tool_calls", [])
    ]
    assert calls == [
        {
            "index": 0,
            "id": "call_Custom01",
            "type": "custom",
            "custom": {"name": "code_exec", "input": ""},
        },
        {"index": 0, "custom": {"input": "print("}},
        {"index": 0, "custom": {"input": "'hi')"}},
    ]
    # Only what Chat has no output for is lost (the MCP and file search items).
    assert [loss.what for loss in losses] == [
        "block:other",
        "block:server_tool_call",
        "block:server_tool_call",
        "finish_reason:tool_calls",
    ]
    # The openai SDK's stream helper accumulates it as the custom call it is.
    with _openai(data).chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "x"}]
    ) as stream:
        for _ in stream:
            pass
        snapshot = stream.current_completion_snapshot
    (call,) = snapshot.choices[0].message.tool_calls or []
    assert (call.id, call.type, call.custom) == (  # type: ignore[attr-defined]
        "call_Custom01",
        "custom",
        {"name": "code_exec", "input": "print('hi')"},
    )
    assert snapshot.choices[0].finish_reason == "tool_calls"


def test_chat_custom_call_decodes_and_round_trips() -> None:
    from polystream.transcode import convert

    events = assert_chunking_invariant(lambda: StreamDecoder("openai_chat"), CUSTOM_CHAT)
    result = polystream.decode(CUSTOM_CHAT, "openai_chat")
    (call,) = result.tool_calls
    assert (call.id, call.name, call.arguments_json) == ("call_1", "code_exec", "print('hi')")
    # A free-form input is text, not JSON: kept as it came, and no error.
    assert (call.arguments, call.error) == ("print('hi')", None)
    assert [type(e).__name__ for e in events].count("ToolInputDelta") == 2
    again, losses = convert(CUSTOM_CHAT, "openai_chat", source="openai_chat")
    assert _chat_frames(again) == _chat_frames(CUSTOM_CHAT)
    assert losses == []


def test_a_responses_custom_call_input_is_text_in_the_result() -> None:
    result = polystream.decode(CUSTOM_RESPONSES, "openai_responses")
    custom = [call for call in result.tool_calls if call.name == "code_exec"]
    assert custom, "the fixture holds a custom tool call"
    for call in custom:
        assert (call.arguments, call.error) == (call.arguments_json, None)


def test_chat_custom_call_to_responses_is_a_custom_tool_call() -> None:
    from polystream.transcode import convert

    data, losses = convert(CUSTOM_CHAT, "openai_responses", source="openai_chat")
    assert [loss.what for loss in losses] == ["metadata:finish_reason"]  # (as for any call)
    frames = [
        msgspec.json.decode(line[6:]) for line in data.split(b"\n") if line.startswith(b"data: ")
    ]
    kinds = [f["type"] for f in frames]
    assert kinds[2:7] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ]
    item = frames[6]["item"]
    assert (item["type"], item["call_id"], item["name"], item["input"]) == (
        "custom_tool_call",
        "call_1",
        "code_exec",
        "print('hi')",
    )
    assert frames[5]["input"] == "print('hi')"
    with _openai(data).responses.stream(model="m", input="x") as stream:
        response = stream.get_final_response()
    (output,) = response.output
    assert (output.type, output.call_id, output.name, output.input) == (  # type: ignore[union-attr]
        "custom_tool_call",
        "call_1",
        "code_exec",
        "print('hi')",
    )
    # And back: Chat again, a custom call still.
    back, _ = convert(data, "openai_chat", source="openai_responses")
    assert [
        call.get("type")
        for frame in _chat_frames(back)
        for choice in frame["choices"]
        for call in choice["delta"].get("tool_calls", [])
    ] == ["custom", None, None]

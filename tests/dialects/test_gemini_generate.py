"""gemini_generate: exact events, both framings, byte-exact round trips, signature and
continuity rules, finish-reason / usage / error tables, rebuild, foreign encoding and
bad input (strict and tolerant)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream import StreamDecoder, get_dialect
from polystream.accumulate import accumulate
from polystream.dialects.gemini_generate import Decoder, Encoder, rebuild
from polystream.dialects.gemini_generate.finish_reason import (
    FINISH_REASONS,
    map_finish_reason,
    to_gemini_finish_reason,
)
from polystream.dialects.gemini_generate.status import kind_for
from polystream.dialects.gemini_generate.usage import from_usage_metadata, to_usage_metadata
from polystream.errors import BufferLimitExceeded, RemoteProtocolError, StreamTruncated
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Metadata,
    Raw,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
    dump_event,
)
from tests.helpers import FIXTURES, assert_chunking_invariant, native_frames

HERE = FIXTURES / "gemini_generate"
STREAMS = sorted(p for p in HERE.iterdir() if p.suffix in (".sse", ".jsonarray"))
MODEL = "gemini-3.8-flash"


def decode(data: bytes, **options: Any) -> list[Event]:
    decoder = Decoder(**options)
    return decoder.feed(data) + decoder.close()


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(
        b"data: " + json.dumps(c, separators=(",", ": "), ensure_ascii=False).encode() + b"\r\n\r\n"
        for c in chunks
    )


def chunk(parts: list[dict[str, Any]] | None, finish: str | None = None, **more: Any) -> dict:
    cand: dict[str, Any] = {}
    if parts is not None:
        cand["content"] = {"parts": parts, "role": "model"}
    if finish is not None:
        cand["finishReason"] = finish
    cand["index"] = 0
    cand.update(more)
    return {"candidates": [cand], "modelVersion": MODEL, "responseId": "r1"}


def content(events: list[Event]) -> list[Event]:
    """The events without the chunk-ending usage updates and the stream start."""
    return [e for e in events if not isinstance(e, UsageUpdate | StreamStart)]


# -- the round trip, byte for byte ----------------------------------------------------------


@pytest.mark.parametrize("path", STREAMS, ids=[p.name for p in STREAMS])
def test_round_trip_is_byte_exact(path: Path) -> None:
    data = path.read_bytes()
    events = decode(data)
    encoder = Encoder(framing="json_array" if path.suffix == ".jsonarray" else "sse")
    assert encoder.encode_all(events) == data
    assert encoder.losses == []


@pytest.mark.parametrize(
    "path", [p for p in STREAMS if p.suffix == ".sse" and p.with_suffix(".jsonarray").exists()]
)
def test_sse_events_encode_to_the_array_fixture(path: Path) -> None:
    # Both framings of a case decode to the same events; encoding the SSE case's events
    # in the array framing gives the array fixture's exact bytes.
    events = decode(path.read_bytes())
    assert decode(path.with_suffix(".jsonarray").read_bytes()) == events
    assert (
        Encoder(framing="json_array").encode_all(events)
        == path.with_suffix(".jsonarray").read_bytes()
    )


def test_content_type_follows_the_framing() -> None:
    assert Encoder().content_type == "text/event-stream"
    assert Encoder(framing="json_array").content_type == "application/json"
    with pytest.raises(ValueError):
        Encoder(framing="ndjson")  # type: ignore[arg-type]


def test_blank_prefix_before_either_framing() -> None:
    for suffix in (".sse", ".jsonarray"):
        data = (HERE / f"skeleton{suffix}").read_bytes()
        events = decode(data)
        decoder = Decoder()
        shifted = decoder.feed(b"\r\n  ") + decoder.feed(b"\n") + decoder.feed(data)
        shifted += decoder.close()
        assert shifted == events


def test_a_blank_prefix_is_kept_in_pieces_and_bounded() -> None:
    # Blank bytes before the framing is known are kept for the framing's parser in
    # pieces (a feed does not copy what came before it), at most max_event_size of
    # them: past that, a typed error, raised again by every later call.
    data = (HERE / "skeleton.jsonarray").read_bytes()
    decoder = Decoder(max_event_size=1000)
    for _ in range(100):
        assert decoder.feed(b"\r\n \t\n") == []
    assert (decoder._blank_size, len(decoder._blank)) == (500, 100)
    assert decoder.feed(data) + decoder.close() == decode(data)
    assert decoder._blank == []
    # The parser saw every byte: offsets count the blank ones.
    broken = b"[{]"
    for strict in (False, True):
        whole = Decoder(strict=strict)
        pieces = Decoder(strict=strict)
        for decoder, feeds in ((whole, [b" \n" * 50 + broken]), (pieces, [b" \n"] * 50 + [broken])):
            try:
                for feed in feeds:
                    decoder.feed(feed)
                decoder.close()
            except RemoteProtocolError as exc:
                assert exc.byte_offset == 102
            else:
                raise AssertionError("no error")
    decoder = Decoder(max_event_size=1000)
    decoder.feed(b" " * 600)
    with pytest.raises(BufferLimitExceeded) as info:
        decoder.feed(b"\n" * 401)
    assert info.value.byte_offset == 0
    assert "no content in the first 1001 bytes" in str(info.value)
    assert decoder._blank == []
    with pytest.raises(BufferLimitExceeded):
        decoder.feed(data)
    with pytest.raises(BufferLimitExceeded):
        decoder.close()


def test_bare_text_that_is_not_json() -> None:
    good = sse(chunk([{"text": "Hi"}], "STOP"))
    data = good + b"<html>Bad gateway</html>\n"
    events = decode(data)
    assert accumulate(events).text == "Hi"
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [e.error.kind for e in errors] == ["protocol"]
    assert errors[0].error.byte_offset == len(good)
    assert Unknown(name="chunk", data="<html>Bad gateway</html>\n") in events
    with pytest.raises(RemoteProtocolError) as info:
        decode(data, strict=True)
    assert info.value.byte_offset == len(good)


def test_framing_auto_by_first_byte() -> None:
    for suffix, framing in ((".sse", "sse"), (".jsonarray", "json_array")):
        decoder = Decoder()
        decoder.feed((HERE / f"skeleton{suffix}").read_bytes())
        assert decoder.framing == framing
    detected = StreamDecoder()  # dialect "auto"
    detected.feed((HERE / "skeleton.jsonarray").read_bytes())
    detected.close()
    assert detected.dialect == "gemini_generate"
    assert detected.result().text == "OK"


# -- exact events --------------------------------------------------------------------------


SIG = "ThGV3wIN5Z4NZaM6QnnxGD565OXZgOMJ+LVa3/LmHD71X/FvZvQzYCZrldtvj+wB12AxBUMGrkpLOAWY9s8="


def test_skeleton_exact_events() -> None:
    events = decode((HERE / "skeleton.sse").read_bytes())
    usage = from_usage_metadata(
        {
            "promptTokenCount": 6,
            "candidatesTokenCount": 1,
            "totalTokenCount": 31,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 6}],
            "thoughtsTokenCount": 24,
        }
    )
    chunk_extra = {
        "chunk": {"modelVersion": MODEL, "responseId": "k9BjaaXqD8yGz7IP2p3QkA4"},
        "candidates": [{"index": 0}],
    }
    assert events == [
        StreamStart(dialect="gemini_generate", id="k9BjaaXqD8yGz7IP2p3QkA4", model=MODEL),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="OK"),
        UsageUpdate(usage=usage, extra=chunk_extra),
        SignatureDelta(index=0, delta=SIG, extra={"part": {"text": ""}}),
        BlockEnd(index=0),
        Metadata(name="finish", value={"finishReason": "STOP"}),
        UsageUpdate(usage=usage, extra=chunk_extra),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="STOP"), usage=usage),
    ]
    # Thought tokens are part of the output count (pain point 3.3 #22).
    assert usage.output_tokens == 25 and usage.reasoning_tokens == 24
    assert usage.input_tokens == 6 and usage.total_tokens == 31


def test_keep_raw_emits_each_chunk_before_its_events() -> None:
    events = decode((HERE / "skeleton.sse").read_bytes(), keep_raw=True)
    raws = [e for e in events if isinstance(e, Raw)]
    assert len(raws) == 2
    assert raws[0].data["candidates"][0]["content"]["parts"] == [{"text": "OK"}]
    assert isinstance(events[0], Raw) and isinstance(events[1], StreamStart)


# -- signatures and continuity -------------------------------------------------------------


def test_text_continuity_and_kind_changes() -> None:
    data = sse(
        chunk([{"text": "plan", "thought": True}]),
        chunk([{"text": " more", "thought": True}, {"text": "Hel"}]),
        chunk([{"text": "lo"}]),
        chunk([{"functionCall": {"name": "f", "args": {}}}, {"text": "after"}], "STOP"),
    )
    events = content(decode(data))
    assert events == [
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="plan", summary=True),
        ReasoningDelta(index=0, delta=" more", summary=True),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="Hel"),
        TextDelta(index=1, delta="lo"),
        BlockEnd(index=1),
        BlockStart(index=2, kind="tool_call", name="f"),
        ToolInputDelta(index=2, delta="{}"),
        BlockEnd(index=2),
        BlockStart(index=3, kind="text"),
        TextDelta(index=3, delta="after"),
        BlockEnd(index=3),
        Metadata(name="finish", value={"finishReason": "STOP"}),
        Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="STOP")),
    ]
    assert Encoder().encode_all(decode(data)) == data


def test_signature_rules() -> None:
    data = sse(
        # A signature on a text part: that block's, and the block ends.
        chunk([{"text": "A", "thoughtSignature": "s1"}]),
        # Text after a signed block starts a new block.
        chunk([{"text": "B"}]),
        # The empty-text part carrying only a signature: the preceding (unsigned) block's.
        chunk([{"text": "", "thoughtSignature": "s2"}]),
        # A second signature-only part: block 1 is signed already, so it is its own block.
        chunk([{"text": "", "thoughtSignature": "s3"}], "STOP"),
    )
    events = decode(data)
    assert content(events)[:-2] == [
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="A"),
        SignatureDelta(index=0, delta="s1"),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="B"),
        SignatureDelta(index=1, delta="s2", extra={"part": {"text": ""}}),
        BlockEnd(index=1),
        BlockStart(index=2, kind="text"),
        TextDelta(index=2, delta=""),
        SignatureDelta(index=2, delta="s3"),
        BlockEnd(index=2),
    ]
    result = accumulate(events)
    assert [b.signature for b in result.blocks] == ["s1", "s2", "s3"]
    assert result.text == "AB"
    assert Encoder().encode_all(events) == data
    # rebuild keeps each signature on its own part.
    assert rebuild(events)["candidates"][0]["content"]["parts"] == [
        {"text": "A", "thoughtSignature": "s1"},
        {"text": "B", "thoughtSignature": "s2"},
        {"text": "", "thoughtSignature": "s3"},
    ]


def test_signature_only_part_after_a_function_call_is_its_own_block() -> None:
    data = sse(
        chunk(
            [
                {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "sf"},
                {"functionCall": {"name": "g", "args": {"b": 2}}},
            ]
        ),
        chunk([{"text": "", "thoughtSignature": "st"}], "STOP"),
    )
    events = decode(data)
    result = accumulate(events)
    assert [(b.kind, b.name, b.signature) for b in result.blocks] == [
        ("tool_call", "f", "sf"),
        ("tool_call", "g", None),  # parallel call: only the first is signed
        ("text", None, "st"),
    ]
    assert Encoder().encode_all(events) == data


def test_parallel_calls_fixture_signatures_and_ids() -> None:
    result = accumulate(decode((HERE / "parallel_function_calls.sse").read_bytes()))
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("fc_0a1b2c3d", "get_weather", {"city": "Paris"}),
        ("fc_4e5f6a7b", "get_weather", {"city": "London", "unit": "celsius"}),
    ]
    assert result.blocks[0].signature is not None and result.blocks[1].signature is None
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="STOP")


def test_streamed_arguments_assemble_by_path() -> None:
    data = sse(
        chunk([{"functionCall": {"name": "plan", "willContinue": True}}]),
        chunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [
                            {
                                "jsonPath": "$.steps[1].title",
                                "stringValue": "Bo",
                                "willContinue": True,
                            },
                        ],
                        "willContinue": True,
                    }
                }
            ]
        ),
        chunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [
                            {"jsonPath": "$.steps[1].title", "stringValue": "il"},
                            {"jsonPath": "$['meta data'].ok", "nullValue": "NULL_VALUE"},
                            {"jsonPath": "$.steps[0]", "numberValue": 1.5},
                        ],
                        "willContinue": True,
                    }
                }
            ]
        ),
        chunk([{"functionCall": {}}], "STOP"),
    )
    events = decode(data)
    deltas = [e.delta for e in events if isinstance(e, ToolInputDelta)]
    assert deltas[:-1] == ["", "", ""]
    assert json.loads(deltas[-1]) == {
        "steps": [1.5, {"title": "Boil"}],
        "meta data": {"ok": None},
    }
    call = accumulate(events).tool_calls[0]
    assert call.name == "plan" and call.arguments["steps"][1] == {"title": "Boil"}
    assert Encoder().encode_all(events) == data
    native = rebuild(events)["candidates"][0]["content"]["parts"]
    assert native == [
        {
            "functionCall": {
                "name": "plan",
                "args": {"steps": [1.5, {"title": "Boil"}], "meta data": {"ok": None}},
            }
        }
    ]


def _call_in_fragments(*fragments: dict[str, Any]) -> list[Event]:
    """The events of a call whose parts carry the given functionCall fragments, then
    its end."""
    data = sse(
        chunk([{"functionCall": {"name": "w", "willContinue": True}}]),
        *(chunk([{"functionCall": {**f, "willContinue": True}}]) for f in fragments),
        chunk([{"functionCall": {}}], "STOP"),
    )
    return decode(data)


def _part(path: str, value: Any, more: bool = True) -> dict[str, Any]:
    key = "stringValue" if isinstance(value, str) else "numberValue"
    return {"jsonPath": path, key: value, "willContinue": more}


def _numbers(*paths: tuple[str, Any]) -> list[Event]:
    """:func:`_call_in_fragments` with one fragment per (path, number) pair."""
    return _call_in_fragments(*({"partialArgs": [_part(p, v, more=False)]} for p, v in paths))


def test_a_streamed_argument_index_far_past_the_end_is_not_filled_in() -> None:
    # An index up to 63 past the end of an array fills the elements between with null;
    # one 64 or more past it (10**12: a list of that many nulls, never done) is not
    # set, and reported like any path that does not fit.
    events = _numbers(("$.a[63]", 1), ("$.b[0]", 2), ("$.b[65]", 3), ("$.b[1000000000000]", 4))
    warnings = [(e.code, e.message) for e in events if isinstance(e, Warning)]
    message = "a partialArgs entry has a path that was not understood"
    assert warnings == [("partial_args", message), ("partial_args", message)]
    deltas = [e.delta for e in events if isinstance(e, ToolInputDelta)]
    assert json.loads(deltas[-1]) == {"a": [None] * 63 + [1], "b": [2]}


def test_a_streamed_argument_path_that_does_not_fit_is_reported() -> None:
    # A name into what is an array so far, an index into what is an object: not set.
    events = _numbers(("$.a[0]", 1), ("$.a.x", 2), ("$.o.y", 3), ("$.o[0]", 4))
    codes = [e.code for e in events if isinstance(e, Warning)]
    assert codes == ["partial_args", "partial_args"]
    deltas = [e.delta for e in events if isinstance(e, ToolInputDelta)]
    assert json.loads(deltas[-1]) == {"a": [1], "o": {"y": 3}}


@pytest.mark.parametrize(
    ("fragments", "expected"),
    [
        # one string in many fragments
        (
            [
                {"partialArgs": [_part("$.a", "ab")]},
                {"partialArgs": [_part("$.a", "cd")]},
                {"partialArgs": [_part("$.a", "ef", more=False)]},
            ],
            {"a": "abcdef"},
        ),
        (
            [{"partialArgs": [_part("$.code", "x = 1\n")]} for _ in range(3000)],
            {"code": "x = 1\n" * 3000},
        ),
        # another path ends the run: the same path again starts anew
        (
            [
                {"partialArgs": [_part("$.a", "x"), _part("$.b", 1, more=False)]},
                {"partialArgs": [_part("$.a", "y"), _part("$.a", "z", more=False)]},
            ],
            {"a": "yz", "b": 1},
        ),
        # whole args in a later part replace the string; the run continues from them
        (
            [
                {"partialArgs": [_part("$.a", "x")]},
                {"args": {"a": "P"}, "partialArgs": [_part("$.a", "Q"), _part("$.a", "R", False)]},
            ],
            {"a": "PQR"},
        ),
        # a number, then strings, at one path: the strings replace it, then join
        (
            [{"partialArgs": [_part("$.a", 5), _part("$.a", "s"), _part("$.a", "t", False)]}],
            {"a": "st"},
        ),
        # a run inside an array element, then the next element
        (
            [
                {"partialArgs": [_part("$.l[0]", "a"), _part("$.l[0]", "b", False)]},
                {"partialArgs": [_part("$.l[1]", "c", False)]},
            ],
            {"l": ["ab", "c"]},
        ),
    ],
)
def test_streamed_string_arguments_join_their_fragments(
    fragments: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    # (The fragments of a continuing string are joined once, when the run ends: joined
    # at each one, 80,000 fragments took 3.2 s against 0.38 s for 20,000.)
    events = _call_in_fragments(*fragments)
    assert not [e for e in events if isinstance(e, Warning)]
    deltas = [e.delta for e in events if isinstance(e, ToolInputDelta)]
    assert all(d == "" for d in deltas[:-1])
    assert json.loads(deltas[-1]) == expected
    assert accumulate(events).tool_calls[0].arguments == expected


def test_a_streamed_call_leaves_the_events_already_given_as_they_were() -> None:
    # Whole args in the first part, a path set inside them by a later fragment: the
    # first part's event keeps the args it came with (they were the object assembled
    # into, and the round trip wrote {"x": 1, "y": 2} for them).
    data = sse(
        chunk([{"functionCall": {"name": "w", "args": {"o": {"x": 1}}, "willContinue": True}}]),
        chunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [{"jsonPath": "$.o.y", "numberValue": 2}],
                        "willContinue": True,
                    }
                }
            ]
        ),
        chunk([{"functionCall": {}}], "STOP"),
    )
    cut = data.index(b"\r\n\r\n") + 4
    decoder = Decoder()
    first = decoder.feed(data[:cut])
    before = [dump_event(e) for e in first]
    rest = decoder.feed(data[cut:]) + decoder.close()
    assert [dump_event(e) for e in first] == before
    deltas = [e.delta for e in first + rest if isinstance(e, ToolInputDelta)]
    assert json.loads(deltas[-1]) == {"o": {"x": 1, "y": 2}}
    assert Encoder().encode_all(first + rest) == data


def test_rebuild_joins_each_run_of_audio_parts_once() -> None:
    # Consecutive audio parts of one MIME type become one part of their bytes joined;
    # a part whose base64 does not decode ("abc") stands alone, and so does the one
    # after it; another MIME type starts another run. (The bytes of a run are joined
    # once at its end: decoding and encoding the audio so far at each part took 40 s
    # for 2,000 parts of 4 KiB; 0.07 s now.)
    def audio(mime: str, data: str) -> dict[str, Any]:
        return {"inlineData": {"mimeType": mime, "data": data}}

    def b64(*values: int) -> str:
        return base64.b64encode(bytes(values)).decode()

    parts = [
        audio("audio/a", b64(0, 1)),
        audio("audio/a", b64(2, 3)),
        audio("audio/a", "abc"),
        audio("audio/a", b64(4)),
        audio("audio/b", b64(5)),
        audio("audio/b", b64(6)),
    ]
    data = sse(*(chunk([p]) for p in parts[:-1]), chunk([parts[-1]], "STOP"))
    assert rebuild(decode(data))["candidates"][0]["content"]["parts"] == [
        audio("audio/a", b64(0, 1, 2, 3)),
        audio("audio/a", "abc"),
        audio("audio/a", b64(4)),
        audio("audio/b", b64(5, 6)),
    ]


def test_rebuild_extends_grounding_without_changing_the_events() -> None:
    # Each chunk's groundingMetadata lists extend the ones before (in a dict of the
    # rebuild's own: copied at each chunk, many chunks were quadratic); the events'
    # values stay as they were.
    grounding = [
        {"groundingChunks": [{"web": {"uri": f"https://e.com/{i}"}}], "webSearchQueries": ["q"]}
        for i in range(3)
    ]
    data = sse(
        *(chunk([{"text": f"t{i}"}], groundingMetadata=g) for i, g in enumerate(grounding[:-1])),
        chunk([{"text": "t2"}], "STOP", groundingMetadata=grounding[-1]),
    )
    events = decode(data)
    before = [dump_event(e) for e in events]
    merged = rebuild(events)["candidates"][0]["groundingMetadata"]
    assert merged == {
        "groundingChunks": [{"web": {"uri": f"https://e.com/{i}"}} for i in range(3)],
        "webSearchQueries": ["q", "q", "q"],
    }
    assert [dump_event(e) for e in events] == before
    assert rebuild(events)["candidates"][0]["groundingMetadata"] == merged


@pytest.mark.parametrize(
    "odd",
    [
        b'data: "a"\r\n\r\n',
        b"data: [1,\r\ndata: 2]\r\n\r\n",
        b"data: [1,\r\ndata: \r\ndata: 2]\r\n\r\n",
    ],
)
def test_an_event_of_several_data_lines_that_is_no_chunk_round_trips(odd: bytes) -> None:
    # Not a chunk: an Unknown event whose data is the lines joined with LF. Written
    # back one data line per line (written whole, "2]" was bare text, and the blank
    # line ended the event before it).
    body = sse(chunk([{"text": "hi"}])) + odd + sse(chunk([{"text": "!"}], "STOP"))
    events = decode(body)
    assert [e.data for e in events if isinstance(e, Unknown)] == [
        odd[6:-4].decode().replace("\r\ndata: ", "\n")
    ]
    assert Encoder().encode_all(events) == body


def test_streamed_call_truncated_is_incomplete() -> None:
    data = sse(chunk([{"functionCall": {"name": "plan", "willContinue": True}}]))
    result = accumulate(decode(data))
    assert result.status == "truncated"
    assert result.tool_calls[0].arguments is None
    assert result.tool_calls[0].error is not None


def test_grounding_accumulates_and_arrives_on_the_finish_chunk() -> None:
    events = decode((HERE / "grounding.sse").read_bytes())
    grounding = [e for e in events if isinstance(e, Metadata) and e.name == "grounding"]
    assert len(grounding) == 3 and all(e.merge for e in grounding)
    result = accumulate(events)
    merged = result.metadata["grounding"]
    assert [c["web"]["title"] for c in merged["groundingChunks"]] == [
        "uefa.com",
        "bbc.com",
        "wikipedia.org",
    ]
    assert merged["webSearchQueries"] == ["who won euro 2024"]
    assert "renderedContent" in merged["searchEntryPoint"]
    native = rebuild(events)["candidates"][0]
    assert native["groundingMetadata"] == merged
    assert native["content"]["parts"] == [{"text": result.text}]


def test_two_candidates_have_their_own_blocks() -> None:
    events = decode((HERE / "two_candidates.sse").read_bytes())
    result = accumulate(events)
    assert [(b.candidate, b.text) for b in result.blocks] == [(0, "Heads!"), (1, "Tails, again.")]
    assert result.metadata["finish#1"] == {"finishReason": "STOP"}
    native = rebuild(events)
    assert [c["index"] for c in native["candidates"]] == [0, 1]
    assert native["candidates"][1]["content"]["parts"] == [{"text": "Tails, again."}]


# -- finish reasons, errors, usage ----------------------------------------------------------


CATALOG = json.loads(
    Path("/work/shared/reference/event-catalog.json").read_text()
    if Path("/work/shared/reference/event-catalog.json").exists()
    else '{"events": []}'
)


def test_finish_reason_table_is_total_over_the_catalog() -> None:
    names = {
        e["name"] for e in CATALOG["events"] if e.get("surface") == "gemini.generate.finish_reason"
    }
    assert len(FINISH_REASONS) == 21
    if names:
        assert names == set(FINISH_REASONS)


@pytest.mark.parametrize(
    ("raw", "unified", "status", "error"),
    [
        ("STOP", "stop", "completed", None),
        ("MAX_TOKENS", "length", "incomplete", None),
        ("SAFETY", "content_filter", "incomplete", None),
        ("RECITATION", "content_filter", "incomplete", None),
        ("IMAGE_SAFETY", "content_filter", "incomplete", None),
        ("MODEL_ARMOR", "content_filter", "incomplete", None),
        ("OTHER", "other", "incomplete", None),
        ("MALFORMED_FUNCTION_CALL", "error", "failed", "server"),
        ("MALFORMED_RESPONSE", "error", "failed", "server"),
        ("MISSING_THOUGHT_SIGNATURE", "error", "failed", "invalid_request"),
        ("UNEXPECTED_TOOL_CALL", "error", "failed", "invalid_request"),
        ("SOMETHING_NEW", "other", "incomplete", None),
    ],
)
def test_finish_reason_mapping(raw: str, unified: str, status: str, error: str | None) -> None:
    reason, row = map_finish_reason(raw)
    assert (reason.unified, reason.raw, row.status, row.error) == (unified, raw, status, error)
    data = sse(chunk([{"text": "x"}], raw))
    finish = decode(data)[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason.raw, finish.reason.unified) == (status, raw, unified)
    assert (finish.error.kind if finish.error else None) == error


def test_unknown_finish_reason_is_an_error_only_in_strict_mode() -> None:
    data = sse(chunk([{"text": "x"}], "SOMETHING_NEW"))
    with pytest.raises(RemoteProtocolError, match="SOMETHING_NEW") as info:
        decode(data, strict=True)
    assert info.value.dialect == "gemini_generate" and info.value.event_index == 0


def test_reverse_finish_reasons() -> None:
    assert to_gemini_finish_reason(FinishReason(unified="tool_calls", raw="tool_use")) == "STOP"
    assert to_gemini_finish_reason(FinishReason(unified="length", raw="max_tokens")) == "MAX_TOKENS"
    assert to_gemini_finish_reason(FinishReason(unified="other", raw="SPII")) == "SPII"
    assert to_gemini_finish_reason(FinishReason(unified="pause", raw="pause_turn")) == "OTHER"


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        ("RESOURCE_EXHAUSTED", 429, "rate_limit"),
        ("UNAVAILABLE", 503, "overloaded"),
        ("INTERNAL", 500, "server"),
        ("INVALID_ARGUMENT", 400, "invalid_request"),
        ("PERMISSION_DENIED", 403, "permission"),
        ("DEADLINE_EXCEEDED", 504, "timeout"),
        (None, 429, "rate_limit"),
        ("NEW_STATUS", None, "unknown"),
    ],
)
def test_error_kinds(status: str | None, code: int | None, kind: str) -> None:
    assert kind_for(status, code) == kind


def test_error_element_in_the_array() -> None:
    events = decode((HERE / "error_element.jsonarray").read_bytes())
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    error = errors[0].error
    assert (error.kind, error.code, error.http_status, error.retryable) == (
        "rate_limit",
        "RESOURCE_EXHAUSTED",
        429,
        True,
    )
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed" and finish.error == error
    assert accumulate(events).text == "Sure, here is"  # nothing received is lost


def test_bare_json_error_after_sse_events() -> None:
    data = (HERE / "error_bare.sse").read_bytes()
    events = assert_chunking_invariant(Decoder, data, seeds=10)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error is not None
    assert (finish.error.kind, finish.error.code, finish.error.http_status) == (
        "overloaded",
        "UNAVAILABLE",
        503,
    )


def test_blocked_prompt_fails_with_the_block_reason() -> None:
    finish = decode((HERE / "blocked_prompt.sse").read_bytes())[-1]
    assert finish == Finish(
        status="failed",
        reason=FinishReason(unified="content_filter", raw="PROHIBITED_CONTENT"),
        usage=finish.usage,
        error=ErrorInfo(
            kind="content_filter",
            message="prompt blocked: PROHIBITED_CONTENT",
            code="PROHIBITED_CONTENT",
        ),
    )


def test_close_without_finish_reason_is_truncated() -> None:
    for name in ("truncated.sse", "truncated_array.jsonarray"):
        finish = decode((HERE / name).read_bytes())[-1]
        assert isinstance(finish, Finish) and finish.status == "truncated"
        assert finish.error is not None and finish.error.kind == "truncated"


def test_usage_arithmetic() -> None:
    meta = {
        "promptTokenCount": 100,
        "cachedContentTokenCount": 40,
        "candidatesTokenCount": 20,
        "toolUsePromptTokenCount": 7,
        "thoughtsTokenCount": 30,
        "totalTokenCount": 157,
        "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 60}],
        "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 5}],
    }
    usage = from_usage_metadata(meta)
    assert usage == Usage(
        input_tokens=107,
        output_tokens=50,
        reasoning_tokens=30,
        cache_read_tokens=40,
        tool_prompt_tokens=7,
        audio_input_tokens=60,
        audio_output_tokens=5,
        total_tokens=157,
        raw=meta,
    )
    back = to_usage_metadata(usage)
    assert back == {
        "promptTokenCount": 100,
        "cachedContentTokenCount": 40,
        "candidatesTokenCount": 20,
        "toolUsePromptTokenCount": 7,
        "thoughtsTokenCount": 30,
        "totalTokenCount": 157,
    }
    assert from_usage_metadata({"promptTokenCount": 3, "totalTokenCount": 3}).output_tokens is None


def test_last_usage_is_authoritative() -> None:
    result = accumulate(decode((HERE / "thoughts.sse").read_bytes()))
    assert (result.usage.input_tokens, result.usage.output_tokens) == (11, 105)
    assert result.usage.reasoning_tokens == 96 and result.usage.total_tokens == 116


# -- rebuild -------------------------------------------------------------------------------


def test_rebuild_merges_like_the_non_streaming_endpoint() -> None:
    events = decode((HERE / "thoughts.jsonarray").read_bytes())
    assert rebuild(events) == {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "text": "**Weighing the options**\n\nThe user asks for a short rhyme.",
                            "thought": True,
                        },
                        {
                            "text": "Roses are red, skies can be grey.",
                            "thoughtSignature": "wCwLll4COr7oCPK1SNjVGTqLUim+bzEhpvFuLUGkSbN9y"
                            "W93bIQj5XonhUiaP5xD+251aHbWrZqcrEqk5y4=",
                        },
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 11,
            "candidatesTokenCount": 9,
            "totalTokenCount": 116,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 11}],
            "thoughtsTokenCount": 96,
        },
        "modelVersion": MODEL,
        "responseId": "Lp3kaeWcNqGm1e8P9uXd2Qs",
    }


@pytest.mark.parametrize(
    "name",
    sorted(p.stem for p in STREAMS if p.suffix == ".jsonarray" and p.with_suffix(".sse").exists()),
)
def test_rebuild_is_the_same_in_both_framings(name: str) -> None:
    a = rebuild(decode((HERE / f"{name}.sse").read_bytes()))
    b = rebuild(decode((HERE / f"{name}.jsonarray").read_bytes()))
    assert a == b


def test_rebuild_code_execution_and_builtin_tools() -> None:
    parts = rebuild(decode((HERE / "code_execution.sse").read_bytes()))["candidates"][0]["content"][
        "parts"
    ]
    assert parts[1] == {
        "executableCode": {
            "language": "PYTHON",
            "code": "total = sum(range(1, 101))\nprint(total)\n",
        }
    }
    assert parts[2] == {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "5050\n"}}
    parts = rebuild(decode((HERE / "builtin_tools.sse").read_bytes()))["candidates"][0]["content"][
        "parts"
    ]
    assert parts[0] == {
        "toolCall": {
            "id": "tc_1",
            "toolType": "GOOGLE_SEARCH_WEB",
            "args": {"queries": ["tallest building"]},
        }
    }
    assert parts[2] == {"futurePart": {"kind": "hologram", "level": 2}}


# -- encoding another dialect's events -------------------------------------------------------


ANTHROPIC_SIG = (
    "xw7Kaw+I9E2BpBMRZH5Q/aGsRU7AT/1EKw60dDqZMTHHDsprD4j0TYGkExFkflD9oaxFTsBP/UQrDrR0OpkxMQ=="
)
# The base64-safe carrier's marker: "polystreamv1", the origin's name in hex, "x" padding
# to a multiple of 4 characters.
ANTHROPIC_MARK = "polystreamv1" + b"anthropic_messages".hex() + "xxxx"
CARRIED_SIG = ANTHROPIC_MARK + ANTHROPIC_SIG


def foreign_events() -> list[Event]:
    """An Anthropic-shaped stream: thinking with its signature, text, a tool call."""
    return [
        StreamStart(dialect="anthropic_messages", id="msg_01", model="claude-haiku-4-5"),
        UsageUpdate(usage=Usage(input_tokens=30, cache_read_tokens=10)),
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="Let me think."),
        SignatureDelta(index=0, delta=ANTHROPIC_SIG),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="Checking "),
        TextDelta(index=1, delta="the weather."),
        BlockEnd(index=1),
        BlockStart(index=2, kind="tool_call", id="toolu_01", name="get_weather"),
        ToolInputDelta(index=2, delta='{"city": '),
        ToolInputDelta(index=2, delta='"Paris"}'),
        BlockEnd(index=2),
        Finish(
            status="completed",
            reason=FinishReason(unified="tool_calls", raw="tool_use"),
            usage=Usage(
                input_tokens=30, output_tokens=42, reasoning_tokens=12, cache_read_tokens=10
            ),
        ),
    ]


@pytest.mark.parametrize("framing", ["sse", "json_array"])
def test_foreign_events_encode_to_a_valid_stream(framing: str) -> None:
    encoder = Encoder(framing=framing)  # type: ignore[arg-type]
    data = encoder.encode_all(foreign_events())
    chunks = native_frames(data)
    if framing == "sse":
        assert all(name is None for name, _ in chunks)
        chunks = [value for _, value in chunks]
    assert [c["candidates"][0]["content"]["parts"] for c in chunks] == [
        [{"text": "Let me think.", "thought": True}],
        [{"text": "", "thought": True, "thoughtSignature": CARRIED_SIG}],
        [{"text": "Checking "}],
        [{"text": "the weather."}],
        [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "toolu_01"}}],
        [],
    ]
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"] == {
        "promptTokenCount": 30,
        "cachedContentTokenCount": 10,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 12,
        "totalTokenCount": 72,
    }
    assert all(
        c["modelVersion"] == "claude-haiku-4-5" and c["responseId"] == "msg_01" for c in chunks
    )
    assert [(loss.what, loss.carried) for loss in encoder.losses] == [("signature", True)]


def test_foreign_signature_survives_the_hop_back() -> None:
    data = Encoder().encode_all(foreign_events())
    result = accumulate(decode(data))
    assert [(b.kind, b.signature) for b in result.blocks] == [
        ("reasoning", ANTHROPIC_SIG),
        ("text", None),
        ("tool_call", None),
    ]
    # Read out of the carrier with its origin, which the hop back writes natively.
    signatures = [e for e in decode(data) if isinstance(e, SignatureDelta)]
    assert [(e.delta, (e.extra or {}).get("carrier")) for e in signatures] == [
        (ANTHROPIC_SIG, "anthropic_messages")
    ]
    # rebuild() writes it as the stream holds it, from the events or from the stream.
    for events in (foreign_events(), decode(data)):
        parts = rebuild(events)["candidates"][0]["content"]["parts"]
        assert parts[0] == {
            "text": "Let me think.",
            "thought": True,
            "thoughtSignature": CARRIED_SIG,
        }
    assert result.reasoning == "Let me think."
    assert result.text == "Checking the weather."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("toolu_01", "get_weather", {"city": "Paris"})
    ]
    assert result.status == "completed"
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="STOP")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 42)
    assert result.usage.reasoning_tokens == 12


def test_own_signature_back_from_another_dialect_is_native() -> None:
    # A Gemini signature that travelled (its origin in extra["carrier"]) is Gemini's again.
    events = [
        StreamStart(dialect="openai_chat", id="chatcmpl-1", model="gemini-3.8-flash"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hi"),
        SignatureDelta(index=0, delta="c2lnbmVk", extra={"carrier": "gemini_generate"}),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="stop")),
    ]
    encoder = Encoder()
    data = encoder.encode_all(events)
    parts = [v["candidates"][0]["content"]["parts"] for _, v in native_frames(data)]
    assert parts[:2] == [[{"text": "Hi"}], [{"text": "", "thoughtSignature": "c2lnbmVk"}]]
    assert [loss.what for loss in encoder.losses if "signature" in loss.what] == []
    assert [e.extra for e in decode(data) if isinstance(e, SignatureDelta)] == [
        {"part": {"text": ""}}
    ]


def test_foreign_losses_and_errors() -> None:
    encoder = Encoder()
    data = encoder.encode_all(
        [
            StreamStart(dialect="openai_responses", id="resp_1", model="gpt-5.4-nano"),
            BlockStart(index=0, kind="text"),
            TextDelta(index=0, delta="Partial answer"),
            BlockEnd(index=0),
            Metadata(name="service_tier", value="default"),
            Unknown(name="response.new_thing", data="{}"),
            KeepAlive(comment="OPENROUTER PROCESSING"),
            UsageUpdate(usage=Usage(input_tokens=5, cache_write_tokens=2)),
            ErrorEvent(error=ErrorInfo(kind="overloaded", message="busy", retryable=True)),
            Finish(
                status="failed",
                reason=FinishReason(unified="error", raw=None),
                error=ErrorInfo(kind="overloaded", message="busy", retryable=True),
            ),
        ]
    )
    assert [loss.what for loss in encoder.losses] == [
        "metadata:service_tier",
        "event:response.new_thing",
        "keep-alive",
        "usage.cache_write_tokens",
    ]
    assert b": OPENROUTER" not in data  # google-genai reads every non-data line as JSON
    events = decode(data)
    assert accumulate(events).text == "Partial answer"
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error is not None
    assert (finish.error.kind, finish.error.code, finish.error.http_status) == (
        "overloaded",
        "UNAVAILABLE",
        503,
    )
    # The error element ends the stream: no finishReason chunk follows it.
    assert data.count(b"data: ") == 2


def test_foreign_refusal_and_reasons_without_a_gemini_word() -> None:
    encoder = Encoder()
    data = encoder.encode_all(
        [
            StreamStart(dialect="openai_chat"),
            BlockStart(index=0, kind="refusal"),
            TextDelta(index=0, delta="I can't help with that."),
            BlockEnd(index=0),
            Finish(status="completed", reason=FinishReason(unified="refusal", raw="refusal")),
        ]
    )
    assert [loss.what for loss in encoder.losses] == ["block:refusal", "finish_reason"]
    result = accumulate(decode(data))
    assert result.text == ""
    assert result.metadata["finish"] == {
        "finishReason": "STOP",
        "finishMessage": "I can't help with that.",
    }
    assert result.status == "completed"
    # An unknown reason of a completed stream stays completed.
    encoder = Encoder()
    data = encoder.encode_all(
        [
            StreamStart(dialect="anthropic_messages"),
            Finish(status="completed", reason=FinishReason(unified="other", raw="new_reason")),
        ]
    )
    assert accumulate(decode(data)).status == "completed"
    assert [loss.what for loss in encoder.losses] == ["finish_reason"]


def test_foreign_tool_input_sent_whole_or_not_json() -> None:
    data = Encoder().encode_all(
        [
            StreamStart(dialect="anthropic_messages"),
            BlockStart(index=0, kind="tool_call", id="t1", name="f", value={"a": 1}),
            BlockEnd(index=0),
            BlockStart(index=1, kind="tool_call", id="t2", name="g"),
            ToolInputDelta(index=1, delta='{"cut": "of'),
            BlockEnd(index=1),
            Finish(status="incomplete", reason=FinishReason(unified="length", raw="max_tokens")),
        ]
    )
    result = accumulate(decode(data))
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("f", {"a": 1}), ("g", None)]
    assert result.tool_calls[1].error is not None  # cut off, never "no arguments"
    assert result.status == "incomplete"


def test_foreign_signature_that_is_not_base64_is_lost() -> None:
    encoder = Encoder()
    data = encoder.encode_all(
        [
            StreamStart(dialect="anthropic_messages"),
            BlockStart(index=0, kind="reasoning"),
            ReasoningDelta(index=0, delta="hmm"),
            SignatureDelta(index=0, delta="not base64!"),
            BlockEnd(index=0),
            Finish(status="completed", reason=FinishReason(unified="stop", raw="end_turn")),
        ]
    )
    assert [(loss.what, loss.carried) for loss in encoder.losses] == [("signature", False)]
    assert b"thoughtSignature" not in data


def test_foreign_truncated_stream_stays_truncated() -> None:
    data = Encoder().encode_all(
        [
            StreamStart(dialect="openai_chat"),
            BlockStart(index=0, kind="text"),
            TextDelta(index=0, delta="partial"),
            Finish(status="truncated", reason=FinishReason(unified="error")),
        ]
    )
    finish = decode(data)[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"


# -- bad input -----------------------------------------------------------------------------


def test_malformed_json_strict_and_tolerant() -> None:
    data = (HERE / "bad" / "malformed_json.sse").read_bytes()
    with pytest.raises(RemoteProtocolError) as info:
        decode(data, strict=True)
    error = info.value
    assert error.dialect == "gemini_generate" and error.event_index == 1
    assert error.byte_offset == data.index(b'data: {"candidates": [{\r\n')
    events = decode(data)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].error.kind == "protocol"
    assert errors[0].error.event_index == 1 and errors[0].error.byte_offset == error.byte_offset
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert unknown == [Unknown(name="chunk", data='{"candidates": [{')]
    result = accumulate(events)
    assert result.text == "Hi there" and result.status == "completed"


def test_chunk_that_is_not_an_object() -> None:
    data = (HERE / "bad" / "not_object.jsonarray").read_bytes()
    with pytest.raises(RemoteProtocolError, match="not a JSON object") as info:
        decode(data, strict=True)
    assert info.value.event_index == 1
    assert info.value.byte_offset == data.index(b'"oops"')
    events = decode(data)
    assert [e.error.event_index for e in events if isinstance(e, ErrorEvent)] == [1]
    assert Unknown(name="chunk", data='"oops"') in events
    assert accumulate(events).text == "Hi there"


def test_array_that_never_closes() -> None:
    data = (HERE / "bad" / "unclosed.jsonarray").read_bytes()
    with pytest.raises(StreamTruncated) as info:
        decode(data, strict=True)
    assert info.value.dialect == "gemini_generate"
    assert info.value.event_index == 2 and info.value.byte_offset == len(data)
    events = decode(data)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"
    assert finish.error is not None and finish.error.byte_offset == len(data)
    assert accumulate(events).text == "Hi there"  # every element received is kept
    # The cut is reproduced: re-encoding leaves the array open.
    assert Encoder(framing="json_array").encode_all(events) == data


def test_input_cut_inside_an_element() -> None:
    data = (HERE / "bad" / "cut_element.jsonarray").read_bytes()
    with pytest.raises(StreamTruncated) as info:
        decode(data, strict=True)
    assert info.value.event_index == 1
    events = decode(data)
    assert accumulate(events).text == "Hi"
    assert isinstance(events[-1], Finish) and events[-1].status == "truncated"


def test_unknown_part_kind_passes_through_and_is_strict_error() -> None:
    data = sse(chunk([{"hologram": {"x": 1}, "thoughtSignature": "sh"}]), chunk([], "STOP"))
    events = decode(data)
    blocks = [e for e in events if isinstance(e, BlockStart)]
    assert blocks == [
        BlockStart(
            index=0,
            kind="other",
            name="hologram",
            value={"hologram": {"x": 1}},
            extra={"part_order": ["hologram", "thoughtSignature"]},
        )
    ]
    assert SignatureDelta(index=0, delta="sh") in events
    assert not any(isinstance(e, ErrorEvent) for e in events)
    assert Encoder().encode_all(events) == data
    with pytest.raises(RemoteProtocolError, match="unknown part kind") as info:
        decode(data, strict=True)
    assert info.value.event_index == 0 and info.value.byte_offset == 0


def test_invalid_part_keeps_decoding_in_tolerant_mode() -> None:
    data = sse(chunk(["not a part", {"text": "ok"}], "STOP"))
    events = decode(data)
    assert accumulate(events).text == "ok"
    assert any(isinstance(e, Warning) and e.code == "invalid_part" for e in events)
    with pytest.raises(RemoteProtocolError, match="not a JSON object"):
        decode(data, strict=True)


# -- property: any chunk sequence of the known part kinds round-trips byte for byte ----------

_SIGS = st.sampled_from(["c2lnMQ==", "c2lnMg==", "AbCd"])
_TEXT = st.text(alphabet='ab \n"\\é<', max_size=6)
_PART = st.one_of(
    st.builds(lambda t: {"text": t}, _TEXT),
    st.builds(lambda t: {"text": t, "thought": True}, _TEXT),
    st.builds(lambda s: {"text": "", "thoughtSignature": s}, _SIGS),
    st.builds(lambda t, s: {"text": t, "thoughtSignature": s}, _TEXT, _SIGS),
    st.builds(
        lambda n, s: {"functionCall": {"name": n, "args": {"k": n}}, "thoughtSignature": s},
        st.sampled_from(["f", "g"]),
        _SIGS,
    ),
    st.builds(lambda n: {"functionCall": {"name": n, "args": {}}}, st.sampled_from(["f", "g"])),
    st.just({"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}}),
    st.just({"executableCode": {"language": "PYTHON", "code": "print(1)"}}),
)
_CHUNK = st.builds(
    lambda parts, candidate, finish: {
        "candidates": [
            {
                "content": {"parts": parts, "role": "model"},
                **({"finishReason": finish} if finish else {}),
                "index": candidate,
            }
        ],
        "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3},
        "modelVersion": MODEL,
    },
    st.lists(_PART, max_size=3),
    st.sampled_from([0, 0, 1]),
    st.sampled_from([None, None, None, "STOP", "MAX_TOKENS"]),
)


@settings(max_examples=40)
@given(chunks=st.lists(_CHUNK, min_size=1, max_size=5))
def test_any_chunk_sequence_round_trips(chunks: list[dict[str, Any]]) -> None:
    data = sse(*chunks)
    events = decode(data, strict=True)
    assert Encoder().encode_all(events) == data
    elements = [json.dumps(c, indent=2, ensure_ascii=False).encode() for c in chunks]
    array = b"[" + b"\r\n,\r\n".join(elements) + b"\r\n]"
    assert Encoder(framing="json_array").encode_all(events) == array
    result = accumulate(events)
    # Every signature is kept, on exactly one block, byte for byte.
    sent = [
        p["thoughtSignature"]
        for c in chunks
        for p in c["candidates"][0]["content"]["parts"]
        if "thoughtSignature" in p
    ]
    assert sorted(b.signature for b in result.blocks if b.signature) == sorted(sent)


@pytest.mark.parametrize(
    "path",
    [p for p in STREAMS if p.stem not in ("builtin_tools", "truncated_array")],
    ids=lambda p: p.name,
)
def test_valid_fixtures_decode_in_strict_mode(path: Path) -> None:
    events = decode(path.read_bytes(), strict=True)
    assert isinstance(events[-1], Finish)


@pytest.mark.parametrize("name", ["thinking", "redacted_thinking"])
def test_anthropic_signatures_survive_a_hop_through_gemini(name: str) -> None:
    # anthropic_messages -> gemini_generate -> anthropic_messages: every signature comes
    # back on a reasoning block, byte for byte (the thoughtSignature carrier).
    from polystream import decode_events

    source = (FIXTURES / "anthropic_messages" / f"{name}.sse").read_bytes()
    events = decode_events(source, "anthropic_messages")
    encoder = Encoder()
    gemini = encoder.encode_all(events)
    assert any(loss.what == "signature" and loss.carried for loss in encoder.losses)
    back = get_dialect("anthropic_messages").encoder().encode_all(decode(gemini))
    before = accumulate(events)
    after = accumulate(decode_events(back, "anthropic_messages"))
    signed = [(b.kind, b.signature) for b in before.blocks if b.signature]
    assert signed and [(b.kind, b.signature) for b in after.blocks if b.signature] == signed
    assert after.text == before.text


def test_url_safe_signature_is_carried() -> None:
    token = "gAAAAABoPq1x-enc_content"  # URL-safe base64, as OpenAI encrypted_content
    events: list[Event] = [
        StreamStart(dialect="openai_responses"),
        BlockStart(index=0, kind="reasoning"),
        SignatureDelta(index=0, delta=token),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="42"),
        BlockEnd(index=1),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="completed")),
    ]
    result = accumulate(decode(Encoder().encode_all(events)))
    assert [(b.kind, b.signature) for b in result.blocks] == [("reasoning", token), ("text", None)]


# -- the compact SSE writer -------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=':"[],{} ab\\'),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet=':"ab', max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_JSON)
def test_compact_writer_never_changes_values(value: object) -> None:
    import json

    from polystream.dialects.gemini_generate.wire import dumps_sse

    assert json.loads(dumps_sse(value)) == value


@given(_JSON)
def test_compact_writer_spaces_exactly(value: object) -> None:
    """The fast spacing gives what the walking writer gives, whatever the strings hold:
    the encoder's templates put a text's or a usage's JSON into bytes spaced by it."""
    from polystream.dialects.gemini_generate.wire import _compact, dumps_sse

    walked: list[bytes] = []
    _compact(value, walked)
    assert dumps_sse(value) == b"".join(walked)


@given(_JSON, _JSON)
def test_pretty_writer_nests_by_indenting(value: object, other: object) -> None:
    """A value pretty-printed alone, its lines indented one level, is what it is inside
    an object: the encoder's array templates put a usage's JSON in that way (and a
    text's as it is: a string's JSON is one line)."""
    from polystream.dialects.gemini_generate.wire import dumps_pretty

    whole = dumps_pretty({"a": other, "u": value, "s": value if isinstance(value, str) else ""})
    alone = dumps_pretty(value).replace(b"\n", b"\n  ")
    head = dumps_pretty({"a": other}).removesuffix(b"\n}")
    assert (
        whole
        == head
        + b',\n  "u": '
        + alone
        + b',\n  "s": '
        + (dumps_pretty(value) if isinstance(value, str) else b'""')
        + b"\n}"
    )


def test_text_starting_with_a_colon_survives_encoding() -> None:
    from polystream.dialects.gemini_generate.wire import dumps_sse

    assert dumps_sse({"text": ":)"}) == b'{"text": ":)"}'
    assert dumps_sse({"parts": [":", "x"]}) == b'{"parts": [":","x"]}'

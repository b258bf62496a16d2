"""The encoders' byte-template paths write exactly what their general paths write.

Every encoder has a private switch, ``_fast``: with it off, every event takes the
general path. For every stream fixture decoded to unified events, and for generated
event sequences full of tricky values (JSON escapes, ``":`` that Gemini's spacing
treats specially, the template placeholders themselves, text UTF-8 cannot carry,
residuals in ``extra`` that a template does not cover, blocks never started, several
candidates), both settings must give the same bytes event by event, the same losses,
and the same error at the same event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polystream import StreamDecoder
from polystream.dialects import DIALECTS, DialectEncoder, get_dialect
from polystream.events import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
    UsageUpdate,
)

from .helpers import fixture_dialect, stream_fixtures

TARGETS = [*DIALECTS, "gemini_generate:json_array"]
FIXTURES = stream_fixtures()
IDS = [str(p.relative_to(p.parents[1])) for p in FIXTURES]


def _encoder(target: str, fast: bool) -> DialectEncoder:
    name, _, framing = target.partition(":")
    options: dict[str, Any] = {}
    if framing:
        options["framing"] = framing
    if name.endswith("_messages"):
        options["id_factory"] = lambda prefix: f"{prefix}_01fixed"
    elif name.endswith("_chat"):
        options["id_factory"] = lambda: "chatcmpl-fixed"
    encoder = get_dialect(name).encoder(**options)
    encoder._fast = fast  # type: ignore[attr-defined]
    return encoder


def _run(target: str, events: list[Event], fast: bool) -> tuple[list[Any], list[Any]]:
    """Each event's bytes (or the error it raised, which ends the run), then the losses."""
    encoder = _encoder(target, fast)
    out: list[Any] = []
    for event in events:
        try:
            out.append(encoder.encode(event))
        except Exception as exc:
            out.append((type(exc), str(exc)))
            return out, encoder.losses
    try:
        out.append(encoder.close())
    except Exception as exc:
        out.append((type(exc), str(exc)))
    return out, encoder.losses


def _same(target: str, events: list[Event]) -> None:
    fast = _run(target, events, True)
    general = _run(target, events, False)
    assert fast[0] == general[0]
    assert fast[1] == general[1]


def test_switch_exists() -> None:
    for target in TARGETS:
        assert _encoder(target, True)._fast is True  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixtures(path: Path) -> None:
    decoder = StreamDecoder(fixture_dialect(path))
    events = decoder.feed(path.read_bytes()) + decoder.close()
    for target in TARGETS:
        _same(target, events)


# -- generated sequences ---------------------------------------------------------------

_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            " ",
            "plain",
            '"',
            '":',
            ':"',
            ":)",
            '\\":x',
            '{":a":1}',
            '{"a": 1}',
            "line\nbreak\r\n",
            "tab\t\x00\x1f",
            "naïve ☃ 𝄞",
            "\u2028\u2029",
            "\ud800",
            "\x00polystream-delta\x00",
            "\x00polystream-text\x00",
            "\x00polystream-usage\x00",
            '"choices":[]',
            "{",
            "  ",
        ]
    ),
)

_EXTRA = st.one_of(
    st.none(),
    st.sampled_from(
        [
            {},
            {"part": {"thoughtSignature": "c2ln"}},
            {"part": "x"},
            {"part_order": ["thought", "text"]},
            {"no_event_type": True},
            {"no_event_name": True},
            {"derived": True},
            {"absent": True},
            {"d": {"x": 1}},
            {"p": {"x": 1}},
            {"carrier": "anthropic_messages"},
            {"delta": {"x": 1}},
            {"fields": {"x": 1}},
            {"event": "other"},
            {"chat": {"env": {"obfuscation": "abc"}}},
            {"chat": {"env": {"obfuscation": '":'}}},
            {"chat": {"env": {"obfuscation": "\ud800"}}},
            {"chat": {"env": {"-": ["usage"]}}},
            {"chat": {"env": {"choices": [1]}}},
            {"chat": {"env": {"model": "m2", "created": 3}}},
            {"chat": {"env": {}}},
            {"chat": {}},
            {"chat": {"ci": 1, "env": {}}},
            {"chat": {"tc": {"index": 1}, "env": {"obfuscation": "x"}}},
            {"chat": "notadict"},
            {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0},
            {"item_id": "msg_1", "type": "response.output_text.delta"},
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1"},
            {"type": "response.output_text.delta", "sequence_number": 9},
            {"type": "response.output_text.delta", "delta": "own"},
            {"type": 5},
            {"functionCall": {"name": "f", "args": {}}},
            {"type": "response.output_text.delta", "x": '":\ud800'},
        ]
    ),
)

_CURSOR = st.one_of(st.none(), st.integers(-2, 50), st.sampled_from(["evt_a", "", True, '":']))

_DIALECT_NAMES = sorted(DIALECTS)


@st.composite
def _streams(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = []
    if draw(st.integers(0, 9)):  # mostly with a StreamStart
        events.append(
            StreamStart(
                dialect=draw(st.sampled_from(_DIALECT_NAMES)),
                id=draw(st.one_of(st.none(), st.sampled_from(["resp_1", "msg_1", '":id', "r"]))),
                model=draw(st.one_of(st.none(), st.sampled_from(["m", "gemini-x", '":m']))),
                extra=draw(st.sampled_from([None, {}, {"chat": {}}])),
            )
        )
    blocks: list[int] = []
    for _ in range(draw(st.integers(0, 14))):
        choice = draw(st.integers(0, 9))
        extra = draw(_EXTRA)
        cursor = draw(_CURSOR)
        if choice == 0 or not blocks:
            index = len(blocks) if draw(st.integers(0, 5)) else draw(st.integers(0, 3))
            blocks.append(index)
            events.append(
                BlockStart(
                    index=index,
                    kind=draw(
                        st.sampled_from(
                            ["text", "text", "reasoning", "tool_call", "refusal", "code", "other"]
                        )
                    ),
                    candidate=draw(st.sampled_from([0, 0, 0, 1])),
                    name=draw(st.sampled_from([None, "get", "x"])),
                    id=draw(st.sampled_from([None, "call_1", "toolu_1"])),
                    extra=draw(
                        st.sampled_from([None, {"chat": {}}, {"index": 1}, {"streamed": True}])
                    ),
                )
            )
            continue
        index = draw(st.one_of(st.sampled_from(blocks), st.integers(0, 6)))
        text = draw(_TEXT)
        if choice <= 4:
            events.append(TextDelta(index=index, delta=text, extra=extra, cursor=cursor))
        elif choice == 5:
            events.append(
                ReasoningDelta(
                    index=index,
                    delta=text,
                    extra=extra,
                    cursor=cursor,
                    summary=draw(st.booleans()),
                )
            )
        elif choice <= 7:
            events.append(ToolInputDelta(index=index, delta=text, extra=extra, cursor=cursor))
        elif choice == 8:
            usage_extra = draw(
                st.sampled_from(
                    [
                        None,
                        {
                            "chunk": {"modelVersion": "m", "responseId": "r"},
                            "candidates": [{"index": 0}],
                        },
                        {"chunk": {}, "candidates": [{"index": 1}]},
                        {"chunk": {"x": '":'}, "candidates": [{"index": 0}]},
                        {"chunk": {"usageMetadata": 1}, "candidates": [{"index": 0}]},
                        {"chunk": {"a": 0}, "candidates": [{"index": 0, "_order": ["index"]}]},
                        {"chunk": {"a": False}, "candidates": [{"index": 0}]},
                        {"chunk": {}, "candidates": [{"index": 0}], "bare": True},
                        {"chunk": {}, "candidates": [{"index": 0}, {"index": 1}]},
                        {"chunk": {}, "candidates": [{"index": True}]},
                        {"delta": {"stop_reason": None}},
                    ]
                )
            )
            raw = draw(
                st.sampled_from(
                    [None, {"promptTokenCount": 3}, {"a": '{":'}, {"b": "\ud800"}, {"c": [1, '":']}]
                )
            )
            events.append(
                UsageUpdate(
                    usage=Usage(input_tokens=3, output_tokens=1, raw=raw), extra=usage_extra
                )
            )
        else:
            events.append(
                draw(
                    st.sampled_from(
                        [
                            BlockEnd(index=index),
                            KeepAlive(name="ping"),
                            SignatureDelta(index=index, delta="c2ln"),
                        ]
                    )
                )
            )
    if draw(st.booleans()):
        events.append(Finish(status="completed", reason=FinishReason(unified="stop", raw=None)))
    return events


_CHUNK_END = {"chunk": {"modelVersion": "m", "responseId": "r"}, "candidates": [{"index": 0}]}


@st.composite
def _shaped_streams(draw: st.DrawFn) -> list[Event]:
    """Streams shaped like a decoder's output (so that the templates apply), with
    occasional odd events and residuals mixed in."""
    source = draw(
        st.sampled_from(
            [
                "openai_responses",
                "xai_responses",
                "openai_chat",
                "xai_chat",
                "anthropic_messages",
                "gemini_generate",
                "gemini_interactions",
            ]
        )
    )
    events: list[Event] = [
        StreamStart(
            dialect=source,
            id="r",
            model=draw(st.sampled_from(["m", '":'])),
            extra={"chat": {}} if source.endswith("_chat") else None,
        )
    ]
    kinds = draw(
        st.lists(st.sampled_from(["text", "tool_call", "reasoning"]), min_size=1, max_size=3)
    )
    seq = 0
    for index, kind in enumerate(kinds):
        events.append(
            BlockStart(
                index=index,
                kind=kind,  # type: ignore[arg-type]
                name="f" if kind == "tool_call" else None,
                candidate=draw(st.sampled_from([0, 0, 0, 1])),
                extra={"chat": {}} if source.endswith("_chat") else None,
            )
        )
        for _ in range(draw(st.integers(0, 6))):
            seq += 1
            text = draw(_TEXT)
            extra: Any = None
            if source.endswith("_responses"):
                name = {
                    "text": "response.output_text.delta",
                    "tool_call": "response.function_call_arguments.delta",
                    "reasoning": "response.reasoning_text.delta",
                }[kind]
                extra = {"type": name, "item_id": "it_1", "output_index": index, "obfuscation": "o"}
            elif source.endswith("_chat"):
                extra = {"chat": {"env": {"obfuscation": draw(st.sampled_from(["o", "p"]))}}}
            if draw(st.integers(0, 7)) == 0:
                extra = draw(_EXTRA)
            cursor: Any = seq if source.endswith("_responses") else None
            if source == "gemini_interactions":
                cursor = f"evt{seq}"
            if draw(st.integers(0, 9)) == 0:
                cursor = draw(_CURSOR)
            if kind == "tool_call":
                events.append(ToolInputDelta(index=index, delta=text, extra=extra, cursor=cursor))
            elif kind == "reasoning" and draw(st.booleans()):
                events.append(ReasoningDelta(index=index, delta=text, extra=extra, cursor=cursor))
            else:
                events.append(TextDelta(index=index, delta=text, extra=extra, cursor=cursor))
            if source == "gemini_generate" and draw(st.integers(0, 3)):
                raw = draw(
                    st.sampled_from(
                        [
                            {"promptTokenCount": seq, "details": [{"modality": "TEXT", "n": seq}]},
                            {"a": '{":'},
                            {"b": [1]},
                            {"k9": "9:", "n": seq},
                            {"n": [":1", seq]},
                            {"1": "x"},
                            {"s": '1":2'},
                        ]
                    )
                )
                chunk_end: Any = _CHUNK_END
                if draw(st.integers(0, 5)) == 0:
                    chunk_end = {"chunk": {"a": 0}, "candidates": [{"index": 1}]}
                events.append(UsageUpdate(usage=Usage(output_tokens=seq, raw=raw), extra=chunk_end))
        events.append(BlockEnd(index=index))
    if draw(st.booleans()):
        events.append(Finish(status="completed", reason=FinishReason(unified="stop", raw=None)))
    return events


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_shaped_streams())
def test_generated_shaped(target: str, events: list[Event]) -> None:
    _same(target, events)


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_streams())
def test_generated(target: str, events: list[Event]) -> None:
    _same(target, events)


@pytest.mark.parametrize(
    ("target", "source"),
    [(t, s) for t in TARGETS for s in ("openai_chat", "gemini_generate", "openai_responses")],
)
def test_templates_survive_a_new_stream_start(target: str, source: str) -> None:
    """A second StreamStart (another id or model) must not reuse an old template."""
    events: list[Event] = []
    for model in ("m1", "m2"):
        events += [
            StreamStart(dialect=source, id=f"id-{model}", model=model),
            BlockStart(index=0, kind="text"),
            TextDelta(index=0, delta="a"),
            TextDelta(index=0, delta="b"),
        ]
    _same(target, events)


@pytest.mark.parametrize("target", TARGETS)
def test_templates_follow_the_schema(target: str) -> None:
    """An Interactions StreamStart switching to the legacy schema renames the events."""
    events: list[Event] = [
        StreamStart(dialect="gemini_interactions", id="i", model="m"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="a", cursor="e1"),
        StreamStart(dialect="gemini_interactions", id="i", extra={"schema": "legacy"}),
        TextDelta(index=0, delta="b", cursor="e2"),
        ToolInputDelta(index=0, delta="c", cursor="e3"),
    ]
    _same(target, events)


@pytest.mark.parametrize(
    ("target", "source"),
    [(t, s) for t in TARGETS for s in ("openai_chat", "gemini_generate", "openai_responses")],
)
def test_templates_follow_the_delta_type(target: str, source: str) -> None:
    """A block's template is for one type of delta: text, tool input and reasoning
    deltas taking turns on one block, each after one of its own, are each written as
    the general path writes them."""
    events: list[Event] = [
        StreamStart(dialect=source, id="id", model="m"),
        BlockStart(index=0, kind="text"),
        BlockStart(index=1, kind="tool_call", name="get", id="call_1"),
        BlockStart(index=2, kind="reasoning"),
    ]
    for index in (0, 1, 2):
        for kind in (TextDelta, ToolInputDelta, ReasoningDelta, TextDelta, ToolInputDelta):
            events += [kind(index=index, delta="{"), kind(index=index, delta='"a"')]
    events.append(Finish(status="completed", reason=FinishReason(unified="stop")))
    _same(target, events)


@pytest.mark.parametrize("target", TARGETS)
def test_templates_follow_a_block_started_again(target: str) -> None:
    """A template kept for a block's text (its part, its sequence) is not used once the
    index is a new block, a block of another kind, or the stream becomes the target's
    own: each delta is written as the general path writes it."""
    events: list[Event] = [
        StreamStart(dialect="anthropic_messages", id="msg_1", model="m"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="a"),
        TextDelta(index=0, delta="b"),
        BlockEnd(index=0),
        TextDelta(index=0, delta="after its end"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="c"),
        TextDelta(index=0, delta="d"),
        BlockEnd(index=0),
        BlockStart(index=0, kind="refusal"),
        TextDelta(index=0, delta="e"),
        TextDelta(index=0, delta="f"),
        BlockStart(index=1, kind="tool_call", name="get", id="call_1"),
        TextDelta(index=1, delta="g"),
        StreamStart(dialect=target.partition(":")[0], id="r2", model="m"),
        TextDelta(index=0, delta="h"),
        TextDelta(index=0, delta="i", cursor=7, extra={"type": "response.refusal.delta"}),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]
    _same(target, events)


_COUNT = st.sampled_from([None, None, 0, 1, 7, 812])
_USAGE = st.builds(
    Usage,
    input_tokens=_COUNT,
    output_tokens=_COUNT,
    reasoning_tokens=_COUNT,
    cache_read_tokens=_COUNT,
    cache_write_tokens=st.sampled_from([None, None, 0, 3]),
    tool_prompt_tokens=_COUNT,
    audio_input_tokens=_COUNT,
    audio_output_tokens=_COUNT,
    total_tokens=_COUNT,
    raw=st.sampled_from([None, {"n": 1}, {"promptTokenCount": 2}, 0]),
)


_NOTHING = st.sampled_from([None, 0])
_EMPTY_USAGE = st.builds(
    Usage,
    input_tokens=_NOTHING,
    output_tokens=_NOTHING,
    total_tokens=_NOTHING,
    cache_read_tokens=_NOTHING,
    raw=st.sampled_from([None, {"n": 0}]),
)
"""Usage that :meth:`Usage.merged` ignores (every count None or 0)."""


@st.composite
def _usage_streams(draw: st.DrawFn) -> list[Event]:
    """Many usage updates of every shape (empty ones too), more than a batch."""
    source = draw(st.sampled_from(_DIALECT_NAMES))
    events: list[Event] = [
        StreamStart(dialect=source, id="r", model="m"),
        BlockStart(index=0, kind="text"),
    ]
    shapes = draw(st.lists(st.one_of(_USAGE, _EMPTY_USAGE), min_size=1, max_size=4))
    for i in range(draw(st.sampled_from([1, 3, 63, 64, 65, 150]))):
        events.append(UsageUpdate(usage=shapes[i % len(shapes)]))
        if draw(st.integers(0, 9)) == 0:
            events.append(TextDelta(index=0, delta="x"))
    if draw(st.booleans()):
        events.append(BlockEnd(index=0))
        events.append(
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw=None),
                usage=draw(st.one_of(st.none(), _USAGE)),
            )
        )
    return events


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_usage_streams())
def test_usage_batches(target: str, events: list[Event]) -> None:
    _same(target, events)


# -- Gemini: a chunk's one text part, held until its usage --------------------------------

_GEMINI_END = {
    "chunk": {"modelVersion": "gemini-x", "responseId": "r1"},
    "candidates": [{"index": 0}],
}


def _gemini_usage(n: int) -> UsageUpdate:
    raw = {
        "promptTokenCount": 8,
        "candidatesTokenCount": n,
        "totalTokenCount": 8 + n,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 8}],
    }
    return UsageUpdate(usage=Usage(input_tokens=8, output_tokens=n, raw=raw), extra=_GEMINI_END)


def _counting(encoder: DialectEncoder) -> list[int]:
    """Counts the chunks the encoder writes through its general path."""
    calls: list[int] = []
    general = encoder._flush_same  # type: ignore[attr-defined]

    def flush(event: UsageUpdate) -> bytes:
        calls.append(encoder.event_index)
        return general(event)  # type: ignore[no-any-return]

    encoder._flush_same = flush  # type: ignore[attr-defined]
    return calls


_SECOND_CHUNK = {
    "gemini_generate": (
        b'data: {"candidates": [{"content": {"parts": [{"text": "t2:"}],"role": "model"},'
        b'"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 2,'
        b'"totalTokenCount": 10,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 8}]},'
        b'"modelVersion": "gemini-x","responseId": "r1"}\r\n\r\n'
    ),
    "gemini_generate:json_array": b"""\r
,\r
{
  "candidates": [
    {
      "content": {
        "parts": [
          {
            "text": "t2:"
          }
        ],
        "role": "model"
      },
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 8,
    "candidatesTokenCount": 2,
    "totalTokenCount": 10,
    "promptTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 8
      }
    ]
  },
  "modelVersion": "gemini-x",
  "responseId": "r1"
}""",
}
"""The second chunk as Google writes it in each framing (SSE: compact with ``": ``;
the array: pretty-printed, elements separated by a CRLF comma line)."""

_GEMINI_TARGETS = ["gemini_generate", "gemini_generate:json_array"]


@pytest.mark.parametrize("target", _GEMINI_TARGETS)
def test_gemini_held_text_writes_the_chunk(target: str) -> None:
    """The decoder's shape (one ``extra`` mapping for every chunk): each chunk is written
    from its template, never through the general path, with Google's exact bytes."""
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r1", model="gemini-x"),
        BlockStart(index=0, kind="text"),
    ]
    for n in (1, 2, 3):
        events += [TextDelta(index=0, delta=f"t{n}:"), _gemini_usage(n)]
    encoder = _encoder(target, True)
    general = _counting(encoder)
    out = [encoder.encode(event) for event in events]
    assert general == []
    assert out[:2] == [b"", b""]
    assert out[2::2] == [b"", b"", b""]
    assert out[5] == _SECOND_CHUNK[target]
    if target.endswith("json_array"):
        assert out[3].startswith(b'[{\n  "candidates"')
        assert encoder.close() == b"\r\n]"
    _same(target, events)


@pytest.mark.parametrize("target", _GEMINI_TARGETS)
def test_gemini_held_text_checks_each_block_and_thought(target: str) -> None:
    """A template is remembered with the ``extra`` mapping, the block and the thought it
    was checked for: the same mapping with a thought, another block, or a block of
    another candidate is checked again."""
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r1", model="gemini-x"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="a"),
        _gemini_usage(1),
        ReasoningDelta(index=0, delta="b"),  # a reasoning delta of a text block: a thought
        _gemini_usage(2),
        BlockStart(index=1, kind="reasoning"),
        TextDelta(index=1, delta="c"),  # a text delta of a reasoning block: a thought
        _gemini_usage(3),
        BlockStart(index=2, kind="text"),
        TextDelta(index=2, delta="d"),
        _gemini_usage(4),
        BlockStart(index=3, kind="text", candidate=1),
        TextDelta(index=3, delta="e"),
        _gemini_usage(5),  # names candidate 0: not this template's chunk
    ]
    encoder = _encoder(target, True)
    general = _counting(encoder)
    out = [encoder.encode(event) for event in events]
    assert general == [14]
    assert _gemini_parts(out[3]) == [{"text": "a"}]
    assert _gemini_parts(out[5]) == [{"text": "b", "thought": True}]
    assert _gemini_parts(out[8]) == [{"text": "c", "thought": True}]
    assert _gemini_parts(out[11]) == [{"text": "d"}]
    assert _gemini_parts(out[14]) == []  # candidate 1's part waits for a chunk naming it
    _same(target, events)


def _gemini_parts(chunk: bytes) -> Any:
    """The first candidate's parts of one chunk as written (either framing)."""
    import json

    text = chunk.removeprefix(b"data: ").removeprefix(b"[").removeprefix(b"\r\n,\r\n")
    return json.loads(text)["candidates"][0]["content"]["parts"]


@pytest.mark.parametrize(
    "after",
    [
        [SignatureDelta(index=0, delta="c2ln")],
        [TextDelta(index=0, delta="more")],
        [TextDelta(index=0, delta="more", extra={"part": {"thoughtSignature": "c2ln"}})],
        [BlockEnd(index=0)],
        [KeepAlive(name="ping")],
        [Finish(status="completed", reason=FinishReason(unified="stop", raw=None))],
        [Finish(status="truncated", reason=FinishReason(unified="error", raw=None))],
        None,  # cut: close() writes it
    ],
)
@pytest.mark.parametrize("target", _GEMINI_TARGETS)
def test_gemini_held_text_keeps_its_place(after: list[Event] | None, target: str) -> None:
    """Whatever comes between the held text and its usage adds the text first; so does
    the end of the events."""
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r1", model="gemini-x"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="held"),
    ]
    if after is not None:
        events += after
        if type(after[0]) is not Finish:
            events.append(_gemini_usage(1))
    _same(target, events)
    encoder = _encoder(target, True)
    written = b"".join(encoder.encode(event) for event in events) + encoder.close()
    assert written.count(b'"held"') == 1
    more = written.find(b'"more"')
    assert more == -1 or written.index(b'"held"') < more


@pytest.mark.parametrize(
    ("raw", "way"),
    [
        ({"promptTokenCount": 8, "details": [{"modality": "TEXT", "tokenCount": 8}]}, 2),
        ({"n": 1, "s": "a:b"}, 1),  # a colon in a string: only ``":`` is spaced
        ({"n": 1, "s": "9:"}, 0),  # its shape starts a string with a colon: safe side
        ({"n": 1, "s": '\\"a'}, 2),
        ({"n": 1, "s": ":a"}, 0),  # a string starting with a colon: the slower writer
        ({"n": 1, "s": 'a":b'}, 0),
        ({"n": [":1", 2]}, 0),
        ({":k": 1}, 0),
        ({"k": {}}, 2),
    ],
)
def test_gemini_usage_spacing(raw: dict[str, Any], way: int) -> None:
    """How a usage object's shape is spaced, and that it is what ``dumps_sse`` writes."""
    from polystream.dialects.gemini_generate.encode import _JSON, _usage_way
    from polystream.dialects.gemini_generate.wire import dumps_sse

    compact = _JSON(raw)
    assert _usage_way(compact.translate(None, b"0123456789")) == way
    if way == 2:
        assert compact.replace(b":", b": ") == dumps_sse(raw)
    if way >= 1:
        assert compact.replace(b'":', b'": ') == dumps_sse(raw)
    encoder = _encoder("gemini_generate", True)
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r1", model="gemini-x"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="a"),
        UsageUpdate(usage=Usage(raw=raw), extra=_GEMINI_END),
    ]
    events += [TextDelta(index=0, delta="b"), UsageUpdate(usage=Usage(raw=raw), extra=_GEMINI_END)]
    out = [encoder.encode(event) for event in events]
    # The first chunk learns how to space the shape, the second uses what it learnt.
    for chunk in (out[3], out[5]):
        assert b'"usageMetadata": ' + dumps_sse(raw) + b',"modelVersion"' in chunk
    _same("gemini_generate", events)
    _same("gemini_generate:json_array", events)


@pytest.mark.parametrize(
    "extra",
    [
        {**_GEMINI_END, "bare": True},
        {**_GEMINI_END, "order": ["usageMetadata", "candidates", "modelVersion"]},
        {"chunk": {}, "candidates": [{"index": 0, "_order": ["index", "content"]}]},
        {"chunk": {}, "candidates": [{"index": 0, "finishReason": "STOP"}]},
        {"chunk": {}, "candidates": [{"index": 0, "_content": {"parts": None}}]},
        {"chunk": {}, "candidates": [{"index": 0}, {"index": 1}]},
        {"chunk": {}, "candidates": [{"index": True}]},
        {"chunk": {}, "candidates": [{"index": 1}]},
        {"chunk": {}, "candidates": []},
        {"chunk": {}, "candidates": [0]},
        {"chunk": {"usageMetadata": {}}, "candidates": [{"index": 0}]},
        {"chunk": {"candidates": []}, "candidates": [{"index": 0}]},
        {"chunk": [], "candidates": [{"index": 0}]},
        {"chunk": {"x": "\ud800"}, "candidates": [{"index": 0}]},
        {"chunk": {"x": "\x00polystream-text\x00"}, "candidates": [{"index": 0}]},
        {"candidates": [{"index": 0}]},
        None,
    ],
)
@pytest.mark.parametrize("target", _GEMINI_TARGETS)
def test_gemini_held_text_leaves_other_chunks(extra: dict[str, Any] | None, target: str) -> None:
    """A chunk-ending ``extra`` that the template does not write goes the general way."""
    usage = UsageUpdate(usage=Usage(raw={"promptTokenCount": 1}), extra=extra)
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r1", model="gemini-x"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="a"),
        usage,
        TextDelta(index=0, delta="b"),
        usage,
    ]
    encoder = _encoder(target, True)
    general = _counting(encoder)
    raised = False
    for event in events:
        try:
            encoder.encode(event)
        except Exception:
            raised = True
            break
    if extra is not None and "chunk" in extra:
        assert general == ([3] if raised else [3, 5])
    else:
        assert general == []  # not a chunk's end: the text waits for one
    _same(target, events)

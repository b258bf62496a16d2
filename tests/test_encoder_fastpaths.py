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

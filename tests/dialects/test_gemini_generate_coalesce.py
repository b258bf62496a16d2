"""gemini_generate's coalesced events (``coalesce="result"``, what
:func:`polystream.decode` asks for): the result is the one the full events give.

:func:`polystream.decode` returns only the result, so its decoder may give a run of
usual chunks read inline as one TextDelta (their texts joined) and one UsageUpdate (the
usage merged so far). Here the coalesced events are checked exactly on small streams,
and their result against the full events' on generated streams, in every chunking,
lenient and strict.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

import polystream
from polystream.accumulate import accumulate
from polystream.decoding import StreamDecoder
from polystream.dialects.gemini_generate import Decoder
from polystream.dialects.gemini_generate.decode import _ONES
from polystream.dialects.gemini_generate.wire import dumps_pretty, dumps_sse, usage_shape
from polystream.errors import PolystreamError
from polystream.events import TextDelta, Usage, UsageUpdate, dump_event
from tests.dialects.test_gemini_generate_fast import (
    array,
    at_chunk_starts,
    feedings,
    last,
    long_stream_cases,
    pieces,
    sse,
    streams,
    usual,
)
from tests.helpers import feed_steps, split_at


class Coalescing(Decoder):
    """The decoder :func:`polystream.decode` makes: ``coalesce="result"``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(coalesce="result", **options)


def outcome(cls: type[Decoder], feeds: list[bytes], strict: bool = False) -> Any:
    """The result the events give (as JSON), or the error that stopped decoding."""
    events, _, error = feed_steps(cls(strict=strict), feeds)
    if error is not None:
        return error
    return msgspec.json.encode(accumulate(events).to_dict())


def decoded(feeds: list[bytes], strict: bool = False) -> Any:
    """:func:`polystream.decode`'s result (as JSON), or the error it raised."""
    try:
        result = polystream.decode(iter(feeds), "gemini_generate", strict=strict)
    except PolystreamError as exc:
        return (type(exc).__name__, str(exc), exc.event_index, exc.byte_offset)
    return msgspec.json.encode(result.to_dict())


def texts_and_usages(events: list[Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for event in events:
        if type(event) is TextDelta:
            out.append(("text", event.delta))
        elif type(event) is UsageUpdate:
            out.append(("usage", event.usage))
    return out


def both_ways(data: bytes) -> tuple[list[Any], list[Any]]:
    """``data`` in one feed: every chunk's events, and the coalesced events."""
    full = Decoder()
    one = Coalescing()
    return full.feed(data) + full.close(), one.feed(data) + one.close()


def test_a_run_of_array_elements_is_one_text_delta_and_one_usage_update() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 8)] + [last(8)]
    every, fewer = both_ways(array(chunks))
    usages = [e.usage for e in every if type(e) is UsageUpdate]
    # The chunks in the feed's first 2 KiB are read by the framing's parser (the
    # template is learned there); from then on, the usual chunks are read inline, and
    # those give one run. (The last chunk has no text: its part holds a signature.)
    assert texts_and_usages(fewer) == [
        ("text", " w1"),
        ("usage", usages[0]),
        ("text", " w2"),
        ("usage", usages[1]),
        ("text", " w3"),
        ("usage", usages[2]),
        ("text", " w4"),
        ("usage", usages[3]),
        ("text", " w5 w6 w7"),
        ("usage", usages[6]),  # each usage reports every count of the one before
        ("usage", usages[7]),
    ]
    assert len(fewer) == len(every) - 4
    # Every other event is the same, in the same place.
    kept = [dump_event(e) for e in every if type(e) not in (TextDelta, UsageUpdate)]
    assert [dump_event(e) for e in fewer if type(e) not in (TextDelta, UsageUpdate)] == kept
    assert accumulate(fewer) == accumulate(every)


def test_a_count_the_run_loses_is_kept_by_the_merged_usage() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 8)] + [last(8)]
    # The run's last chunk reports no thoughtsTokenCount: its usage alone would lose
    # it, merged with the ones before it keeps it.
    del chunks[6]["usageMetadata"]["thoughtsTokenCount"]
    chunks[6]["usageMetadata"]["totalTokenCount"] = 99
    every, fewer = both_ways(array(chunks))
    assert ("text", " w5 w6 w7") in texts_and_usages(fewer)
    usage = [e.usage for e in fewer if type(e) is UsageUpdate][-2]  # (the run's)
    assert usage == Usage(
        input_tokens=7,
        output_tokens=7,
        reasoning_tokens=3,  # from the chunk before
        total_tokens=99,
        raw=chunks[6]["usageMetadata"],
    )
    assert accumulate(fewer) == accumulate(every)


def test_decode_coalesces_and_other_ways_do_not() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 40)] + [last(40)]
    data = array(chunks)
    joined = "".join(f" w{i}" for i in range(5, 40))
    texts = [("text", f" w{i}") for i in range(1, 40)]
    result = StreamDecoder("gemini_generate", coalesce="result")
    assert ("text", joined) in texts_and_usages(result.feed(data))
    result.close()
    plain = StreamDecoder("gemini_generate")
    events = plain.feed(data) + plain.close()
    assert [x for x in texts_and_usages(events) if x[0] == "text"] == texts
    assert result.result() == plain.result()
    assert polystream.decode(data, "gemini_generate") == plain.result()
    assert accumulate(polystream.decode_events(data, "gemini_generate")) == plain.result()


def test_sse_blocks_are_coalesced_within_a_feed() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 40)] + [last(40)]
    data = sse(chunks)
    every, fewer = both_ways(data)
    # The blocks in the feed's first 2 KiB are read by the parser, each with its own
    # events; the rest of the usual ones are read inline, one run.
    texts = [text for kind, text in texts_and_usages(fewer) if kind == "text"]
    first = len(texts) - 1
    assert 1 < first < 10
    assert texts == [f" w{i}" for i in range(1, first + 1)] + [
        "".join(f" w{i}" for i in range(first + 1, 40))
    ]
    assert accumulate(fewer) == accumulate(every)
    # Fed one block at a time, each feed's run is one chunk: its own two events.
    feeds = at_chunk_starts(data)
    one = Coalescing()
    events = [e for feed in feeds for e in one.feed(feed)] + one.close()
    assert [dump_event(e) for e in events] == [dump_event(e) for e in every]


@settings(max_examples=300, deadline=None)
@given(data=streams(), cuts=st.lists(st.integers(min_value=0), max_size=10), strict=st.booleans())
def test_generated_streams(data: bytes, cuts: list[int], strict: bool) -> None:
    for feeds in ([data], split_at(data, cuts)):
        expected = outcome(Decoder, feeds, strict)
        assert outcome(Coalescing, feeds, strict) == expected
        assert decoded(feeds, strict) == expected


@settings(max_examples=150, deadline=None)
@long_stream_cases
def test_long_generated_streams(data: bytes, cuts: list[int], strict: bool, size: int) -> None:
    for feeds in feedings(data, cuts, size):
        expected = outcome(Decoder, feeds, strict)
        assert outcome(Coalescing, feeds, strict) == expected
        assert decoded(feeds, strict) == expected


@settings(max_examples=100, deadline=None)
@given(
    counts=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "promptTokenCount": st.integers(0, 9),
                "candidatesTokenCount": st.integers(0, 9),
                "totalTokenCount": st.integers(0, 99),
                "thoughtsTokenCount": st.integers(0, 9),
                "cachedContentTokenCount": st.integers(0, 9),
                "promptTokensDetails": st.just([{"modality": "AUDIO", "tokenCount": 2}]),
            },
        ),
        min_size=1,
        max_size=30,
    ),
    lf=st.booleans(),
)
def test_usage_that_comes_and_goes(counts: list[dict[str, Any]], lf: bool) -> None:
    # Usual chunks whose usage reports a changing set of counts (an empty one too):
    # the merged usage of each run leaves the accumulator where every update would.
    chunks = [usual(f" w{i}") for i in range(8)]
    for i, meta in enumerate(counts):
        chunk = usual(f" x{i}")
        chunk["usageMetadata"] = json.loads(json.dumps(meta))
        chunks.append(chunk)
    newline = b"\n" if lf else b"\r\n"
    for data in (array(chunks, newline), sse(chunks, newline)):
        for feeds in ([data], at_chunk_starts(data), pieces(data, 700)):
            expected = outcome(Decoder, feeds)
            assert outcome(Coalescing, feeds) == expected
            assert decoded(feeds) == expected


# -- usage texts read only at the end of a run --------------------------------------------
#
# With coalesce="result", the usual chunks read inline keep their usage texts, checked, and read
# only the last of each shape (the text with its digits removed, when its only digits
# are its integers'): the others' counts are all reported again by it. Here the usage
# texts are written as bytes, so that they can be what no encoder writes.


def test_usage_shapes() -> None:
    def shape(text: bytes) -> bytes | None:
        return usage_shape(text.translate(_ONES))

    assert shape(b'{"a": 12, "b": [{"m": "TEXT", "c": 5}], "d": -3, "e": true}') == (
        b'{"a": , "b": [{"m": "TEXT", "c": }], "d": -, "e": true}'
    )
    assert shape(b'{"a": 1}') == shape(b'{"a": 100}')
    assert shape(b'{"a1": 2}') is None  # a digit in a key
    assert shape(b'{"a": "v2"}') is None  # in a string
    assert shape(b'{"a": "\\u0041"}') is None  # an escape ("A")
    assert shape(b'{"a": 1.5}') is None  # a float
    assert shape(b"[1]") is None  # no object
    assert shape(b'{"a": 012}') == b'{"a": }'  # (its own syntax check fails)


_COUNT = st.integers(0, 12) | st.sampled_from([99, 100, 1000, 99999999999999999999])


@st.composite
def usage_texts(draw: st.DrawFn) -> bytes:
    """A usage object's JSON text, usually a plausible one, sometimes an odd one."""
    kind = draw(st.integers(0, 14))
    n = draw(_COUNT)
    if kind <= 5:  # the usual counts, the thoughts count now and then
        thoughts = b',"thoughtsTokenCount": %d' % draw(_COUNT) if kind <= 2 else b""
        return b'{"promptTokenCount": 7,"candidatesTokenCount": %d,"totalTokenCount": %d%s}' % (
            n,
            n + 7,
            thoughts,
        )
    if kind == 6:
        return b'{"promptTokenCount": 0,"candidatesTokenCount": 0,"totalTokenCount": 0}'
    if kind == 7:
        modality = draw(st.sampled_from([b"AUDIO", b"TEXT", b"\\u0041UDIO", b"\\u0042UDIO"]))
        details = b'[{"modality": "%s","tokenCount": %d}]' % (modality, n)
        return b'{"promptTokenCount": 7,"promptTokensDetails": %s}' % details
    return draw(
        st.sampled_from(
            [
                b'{"promptTokenCount": 07,"candidatesTokenCount": 1,"totalTokenCount": 8}',
                b'{"promptTokenCount": 7.5,"candidatesTokenCount": 1,"totalTokenCount": 8}',
                b'{"promptTokenCount1": 7,"candidatesTokenCount": 1,"totalTokenCount": 8}',
                b'{"promptTokenCount": true,"candidatesTokenCount": 1,"totalTokenCount": 8}',
                b'{"cachedContentTokenCount": 3,"totalTokenCount": 8}',
                b"{}",
                b'{"promptTokenCount": 7,"candidatesTokenCount": 1,"totalTokenCount": 8,'
                b'"promptTokenCount": 9}',
            ]
        )
    )


def with_usage(word: str, usage: bytes, framing: str) -> bytes:
    """A usual chunk whose usageMetadata is ``usage`` as it is, in the framing's layout
    (an array element without the comma line, an SSE block)."""
    chunk = usual(word)
    chunk["usageMetadata"] = "\x01"
    if framing == "sse":
        return b"data: " + dumps_sse(chunk).replace(b'"\\u0001"', usage) + b"\r\n\r\n"
    return dumps_pretty(chunk).replace(b"\n", b"\r\n").replace(b'"\\u0001"', usage)


def usage_stream(usages: list[bytes], framing: str) -> bytes:
    firsts = [with_usage(f" w{i}", usages[0], framing) for i in range(6)]
    chunks = firsts + [with_usage(f" x{i}", u, framing) for i, u in enumerate(usages)]
    if framing == "sse":
        return b"".join(chunks)
    return b"[" + b"\r\n,\r\n".join(chunks) + b"\r\n]"


def usage_after_each_feed(cls: type[Decoder], feeds: list[bytes], strict: bool) -> Any:
    """The usage an accumulator holds after each feed's events, and how it all ended."""
    decoder = cls(strict=strict)
    events: list[Any] = []
    seen: list[bytes] = []
    try:
        for feed in feeds:
            events += decoder.feed(feed)
            seen.append(msgspec.json.encode(accumulate(events).usage))
        events += decoder.close()
    except PolystreamError as exc:
        return seen, (type(exc).__name__, str(exc), exc.event_index, exc.byte_offset)
    return seen, msgspec.json.encode(accumulate(events).to_dict())


@settings(max_examples=300, deadline=None)
@given(
    usages=st.lists(usage_texts(), min_size=1, max_size=40),
    framing=st.sampled_from(["array", "sse"]),
    cuts=st.lists(st.integers(min_value=0), max_size=8),
    strict=st.booleans(),
)
def test_usage_texts_read_at_the_end_of_a_run(
    usages: list[bytes], framing: str, cuts: list[int], strict: bool
) -> None:
    data = usage_stream(usages, framing)
    for feeds in ([data], split_at(data, cuts), at_chunk_starts(data)):
        expected = usage_after_each_feed(Decoder, feeds, strict)
        assert usage_after_each_feed(Coalescing, feeds, strict) == expected
        assert decoded(feeds, strict) == expected[1]


def test_a_run_whose_last_usage_reports_no_count() -> None:
    # All zeros: that usage reports no count, so it cannot stand for the ones before
    # it; each is read.
    usages = [
        b'{"promptTokenCount": 7,"candidatesTokenCount": %d,"totalTokenCount": 9}' % n
        for n in (2, 3, 4, 5, 6, 7, 8)
    ] + [b'{"promptTokenCount": 0,"candidatesTokenCount": 0,"totalTokenCount": 0}']
    data = usage_stream(usages, "array")
    one = Coalescing()
    fewer = one.feed(data)
    full = Decoder()
    every = full.feed(data)
    assert accumulate(fewer).usage == accumulate(every).usage
    assert accumulate(fewer).usage.output_tokens == 8
    fewer += one.close()
    every += full.close()
    assert accumulate(fewer) == accumulate(every)

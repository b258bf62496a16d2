"""gemini_generate fast paths give exactly the events of the general path.

The decoder takes the usual chunk (one candidate, ``usageMetadata``, the same
``modelVersion`` and ``responseId`` as before) in one pass, matches chunks against a
template cut from Google's layouts instead of parsing them whole, and lets the
JSON-array framing parse each element once. ``_fast_paths = False`` turns all of that
off; every test here compares both ways event by event, on the serialised events (so
the key order of ``extra`` and ``raw`` dicts counts), with the same errors.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.dialects.gemini_generate import Decoder, Encoder
from polystream.dialects.gemini_generate.decode import _HOLD_LIMIT, _JOIN_LIMIT
from polystream.dialects.gemini_generate.usage import _convert as general_convert_usage
from polystream.dialects.gemini_generate.usage import convert as convert_usage
from polystream.dialects.gemini_generate.wire import dumps_pretty, dumps_sse
from polystream.errors import PolystreamError
from polystream.events import ErrorEvent, TextDelta, UsageUpdate, dump_event
from tests.helpers import feed_steps, split_at, stream_fixtures


class General(Decoder):
    _fast_paths = False


def steps(
    cls: type[Decoder], chunks: list[bytes], **options: Any
) -> tuple[list[bytes], Any, list[int]]:
    """The serialised events, the error that stopped decoding (type, message,
    location) or None, and how many events each call returned (feeds, then close)."""
    events, counts, error = feed_steps(cls(**options), chunks)
    return [dump_event(e) for e in events], error, counts


def run(cls: type[Decoder], chunks: list[bytes], **options: Any) -> tuple[list[bytes], Any]:
    """:func:`steps` without the counts."""
    events, error, _ = steps(cls, chunks, **options)
    return events, error


def assert_same(chunks: list[bytes], **options: Any) -> tuple[list[bytes], Any]:
    """Both ways give the same events, each returned by the same call, and the same
    error from the same call."""
    fast = steps(Decoder, chunks, **options)
    general = steps(General, chunks, **options)
    assert fast == general
    return fast[0], fast[1]


def sse(chunks: list[Any], newline: bytes = b"\r\n") -> bytes:
    return b"".join(b"data: " + dumps_sse(c) + newline + newline for c in chunks)


def array(chunks: list[Any], newline: bytes = b"\r\n") -> bytes:
    elements = [dumps_pretty(c).replace(b"\n", newline) for c in chunks]
    return b"[" + (newline + b"," + newline).join(elements) + newline + b"]"


def usual(text: str, n: int = 1, **changes: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
        "usageMetadata": {
            "promptTokenCount": 7,
            "candidatesTokenCount": n,
            "totalTokenCount": 7 + n + 3,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 7}],
            "thoughtsTokenCount": 3,
        },
        "modelVersion": "gemini-3.8-flash",
        "responseId": "resp-1",
    }
    chunk.update(changes)
    return chunk


def last(n: int) -> dict[str, Any]:
    chunk = usual("", n)
    candidate = chunk["candidates"][0]
    candidate["content"]["parts"] = [{"text": "", "thoughtSignature": "c2ln"}]
    candidate["finishReason"] = "STOP"
    return chunk


def both(chunks: list[Any]) -> list[bytes]:
    """The stream in the SSE and JSON-array framings, CRLF and LF."""
    return [sse(chunks), sse(chunks, b"\n"), array(chunks), array(chunks, b"\n")]


# -- the usual stream -----------------------------------------------------------------------


def test_a_usual_stream_takes_the_fast_paths() -> None:
    chunks = [usual(f" word{i}", i) for i in range(1, 30)] + [last(30)]
    for data in both(chunks):
        _, error = assert_same([data])
        assert error is None
        decoder = Decoder()
        decoder.feed(data)
        assert decoder._template is not None  # the template was found and used


@pytest.mark.parametrize(
    "text",
    [
        "",
        'a "quoted" word',
        "back\\slash\\",
        "\\",
        '\\"',
        "line\nbreak\r\n\t",
        "\x00\x01\x1f",
        "é😀中\u2028",
        # The template's own pieces inside the text.
        '"}],"role": "model"},"index": 0}],"usageMetadata": ',
        '}],"role": "model"},"index": 0}],"usageMetadata": {"a": 1}',
        '\n          }\n        ],\n        "role": "model"\n      },\n      "index": 0\n',
        ',"modelVersion": "gemini-3.8-flash","responseId": "resp-1"}',
    ],
)
def test_texts_that_look_like_the_template(text: str) -> None:
    chunks = [usual("a", 1), usual(text, 2), usual(text + text, 3), usual("b", 4), last(5)]
    for data in both(chunks):
        assert_same([data])
        assert_same([data[i : i + 1] for i in range(len(data))])


def test_changes_between_chunks() -> None:
    chunks = [
        usual("a", 1),
        usual("b", 2),
        usual("c", 3, modelVersion="gemini-other"),  # a new template is needed
        usual("d", 4, modelVersion="gemini-other"),
        usual("e", 5, responseId=7),
        usual("f", 6),
        {
            **usual("g", 7),
            "candidates": [{"content": {"parts": [{"text": "g"}], "role": "model"}, "index": 1}],
        },
        usual("h", 8),
        usual("i", 8),  # the same usage again
        usual("j", 9, usageMetadata={}),
        usual("k", 10, usageMetadata={"totalTokenCount": 5}),
        usual("l", 11),
        {**usual("m", 12), "createTime": "2026-01-01T00:00:00Z"},
        usual("n", 13),
        last(14),
    ]
    for data in both(chunks):
        assert_same([data])
    # Block by block: SSE blocks are read without the parser where they fit.
    for newline in (b"\r\n", b"\n"):
        assert_same([sse([chunk], newline) for chunk in chunks])


def test_layout_variations_fall_back() -> None:
    base = [usual("a", 1), usual("b", 2)]
    variants = [
        b'data: {"candidates": [{"content": {"parts": [{"text": "x"}],"role": "model"},'
        b'"index": 0}], "usageMetadata": {"candidatesTokenCount": 3},'
        b'"modelVersion": "gemini-3.8-flash","responseId": "resp-1"}\r\n\r\n',
        b'data: {"candidates": [{"content": {"parts": [{"text": "x"}],"role": "model"},'
        b'"index": 0}],"usageMetadata":  { "candidatesTokenCount" : 3 } ,'
        b'"modelVersion": "gemini-3.8-flash","responseId": "resp-1"}\r\n\r\n',
        b'data: {"candidates": [{"content": {"parts": [{"text": "\\u0078"}],"role": "model"},'
        b'"index": 0}],"usageMetadata": [],'
        b'"modelVersion": "gemini-3.8-flash","responseId": "resp-1"}\r\n\r\n',
        b'data: {"candidates": [{"content": {"parts": [{"text": 5}],"role": "model"},'
        b'"index": 0}],"usageMetadata": {},'
        b'"modelVersion": "gemini-3.8-flash","responseId": "resp-1"}\r\n\r\n',
        b'data: {"candidates": [{"content": {"parts": [{"text": "x"}],"role": "model"},'
        b'"index": 0}],"usageMetadata": {"a": 1}},"modelVersion": "gemini-3.8-flash",'
        b'"responseId": "resp-1"}\r\n\r\n',
        b'data: {"candidates": [{"content": {"parts": [{"text": "x\xff"}],"role": "model"},'
        b'"index": 0}],"usageMetadata": {},'
        b'"modelVersion": "gemini-3.8-flash","responseId": "resp-1"}\r\n\r\n',
    ]
    for variant in variants:
        data = sse(base) + variant + sse([usual("c", 4), last(5)])
        for strict in (False, True):
            assert_same([data], strict=strict)


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0), max_size=20))
def test_any_chunking(cuts: list[int]) -> None:
    chunks = [usual(f"w{i} \"'\\", i) for i in range(1, 12)] + [last(12)]
    for data in both(chunks):
        assert_same(split_at(data, cuts))


@pytest.mark.parametrize("options", [{"keep_raw": True}, {"strict": True}, {"framing": "sse"}])
def test_options(options: dict[str, Any]) -> None:
    chunks = [usual(f"w{i}", i) for i in range(1, 6)] + [last(6)]
    assert_same([sse(chunks)], **options)
    if "framing" not in options:
        assert_same([array(chunks)], **options)


@pytest.mark.parametrize("path", stream_fixtures("gemini_generate"), ids=lambda p: p.name)
def test_fixtures(path: Any) -> None:
    data = path.read_bytes()
    assert_same([data])
    assert_same([data[i : i + 1] for i in range(len(data))])
    assert_same([data], strict=True)


def test_bad_fixtures() -> None:
    for path in sorted((stream_fixtures("gemini_generate")[0].parent / "bad").iterdir()):
        data = path.read_bytes()
        assert_same([data])
        assert_same([data], strict=True)


# -- generated streams ----------------------------------------------------------------------

_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list('"\\{}[],: \n\r\t\x00é😀')),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=12,
)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | _TEXT,
    lambda children: st.lists(children, max_size=2) | st.dictionaries(_TEXT, children, max_size=2),
    max_leaves=4,
)


@st.composite
def chunk_dicts(draw: st.DrawFn, n: int) -> Any:
    """A usual chunk, often changed in one or two ways that each path must handle."""
    chunk = usual(draw(_TEXT), n)
    candidate = chunk["candidates"][0]
    content = candidate["content"]
    for _ in range(draw(st.integers(0, 2))):
        if type(chunk) is dict and type(chunk.get("usageMetadata")) is dict:
            chunk = change_chunk(draw, chunk, candidate, content)
    return chunk


def change_chunk(draw: st.DrawFn, chunk: Any, candidate: Any, content: Any) -> Any:
    """One change to a chunk; ``candidate`` and ``content`` are its own objects (or
    were, before an earlier change replaced them: then the change is lost)."""
    change = draw(st.integers(0, 24))
    with contextlib.suppress(KeyError, TypeError):
        if change == 0:
            chunk = {k: chunk[k] for k in draw(st.permutations(list(chunk)))}
        elif change == 1:
            chunk["modelVersion"] = draw(st.sampled_from(["other", 3, None]))
        elif change == 2:
            chunk["responseId"] = draw(st.sampled_from(["resp-2", 7, ["x"]]))
        elif change == 3:
            chunk[draw(st.sampled_from(["extra", "promptFeedback", "error"]))] = draw(_VALUE)
        elif change == 4:
            chunk.pop(draw(st.sampled_from(list(chunk))), None)
        elif change == 5:
            chunk["candidates"] = [candidate, json.loads(json.dumps(candidate))]
            chunk["candidates"][1]["index"] = 1
        elif change == 6:
            candidate["content"] = {k: content[k] for k in ("role", "parts")}
        elif change == 7:
            content["role"] = draw(st.sampled_from(["user", 1]))
        elif change == 8:
            candidate["index"] = draw(st.sampled_from([1, True, 1.0, "0", None]))
        elif change == 9:
            candidate["finishReason"] = draw(st.sampled_from(["STOP", "MAX_TOKENS", "ODD"]))
        elif change == 10:
            content["parts"].append({"text": "", "thoughtSignature": "c2ln"})
        elif change == 11:
            content["parts"] = [{"text": draw(_TEXT), "thought": True}]
        elif change == 12:
            content["parts"] = [{"functionCall": {"name": "f", "args": {"a": 1}}}]
        elif change == 13:
            content["parts"] = draw(st.sampled_from([[], ["x"], [{}], [{"text": 1}]]))
        elif change == 14:
            content["parts"].append({"text": draw(_TEXT)})
        elif change == 15:
            chunk["usageMetadata"] = draw(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "promptTokenCount",
                            "candidatesTokenCount",
                            "totalTokenCount",
                            "thoughtsTokenCount",
                            "cachedContentTokenCount",
                            "toolUsePromptTokenCount",
                        ]
                    ),
                    st.integers(0, 3) | st.sampled_from([None, 1.0, True]),
                    max_size=4,
                )
            )
        elif change == 16:
            chunk["usageMetadata"]["candidatesTokensDetails"] = [
                {"modality": "AUDIO", "tokenCount": draw(st.integers(0, 3))}
            ]
        elif change == 17:
            candidate.pop("index")
        elif change == 18:
            chunk["candidates"] = [{k: candidate[k] for k in ("index", "content")}]
        elif change == 19:
            content["parts"] = [{"text": draw(_TEXT), "extra": draw(_VALUE)}]
        elif change == 20:
            chunk["candidates"] = draw(st.sampled_from(["bad", [], [None]]))
        elif change == 21:
            chunk["usageMetadata"] = draw(st.sampled_from([[], "x", None]))
        elif change == 22:
            chunk = draw(st.sampled_from([[], "text", 5, None]))
        elif change == 23:
            candidate["safetyRatings"] = []
        elif change == 24:
            chunk["usageMetadata"] = dict(reversed(list(chunk["usageMetadata"].items())))
    return chunk


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    chunks = [draw(chunk_dicts(n)) for n in range(draw(st.integers(1, 8)))]
    framing = draw(st.sampled_from(["sse", "sse-lf", "array", "array-lf", "compact"]))
    if framing == "sse":
        data = sse(chunks)
    elif framing == "sse-lf":
        data = sse(chunks, b"\n")
    elif framing == "array":
        data = array(chunks)
    elif framing == "array-lf":
        data = array(chunks, b"\n")
    else:
        data = json.dumps(chunks, ensure_ascii=False).encode()
    defect = draw(st.sampled_from(["none"] * 4 + ["cut", "insert", "bare"]))
    if defect == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif defect == "insert":
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at]
            + draw(st.sampled_from([b'"', b"\\", b"}", b"\n,", b"\xff", b"x"]))
            + data[at:]
        )
    elif defect == "bare":
        data += b'{\n  "error": {"code": 503, "status": "UNAVAILABLE"}\n}\n'
    return data


@settings(max_examples=300, deadline=None)
@given(
    data=streams(),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
    strict=st.booleans(),
    keep_raw=st.booleans(),
)
def test_generated_streams(data: bytes, cuts: list[int], strict: bool, keep_raw: bool) -> None:
    assert_same([data], strict=strict, keep_raw=keep_raw)
    assert_same(split_at(data, cuts), strict=strict, keep_raw=keep_raw)


def at_chunk_starts(data: bytes) -> list[bytes]:
    """``data`` cut after each blank line and each comma line: the feeds start where
    a chunk may, so that chunks are read without the framing once the template is
    found."""
    ends = rb"(?<=\n\r\n)|(?<=\n\n)|(?<=\n,\r\n)|(?<=\n,\n)"
    return [piece for piece in re.split(ends, data) if piece]


@settings(max_examples=300, deadline=None)
@given(data=streams(), strict=st.booleans())
def test_generated_streams_fed_chunk_by_chunk(data: bytes, strict: bool) -> None:
    feeds = at_chunk_starts(data)
    assert b"".join(feeds) == data
    assert_same(feeds, strict=strict)


@st.composite
def long_streams(draw: st.DrawFn) -> bytes:
    """8-40 chunks, most of them usual (read without the framing once the template is
    found, past the framing's first 2 KiB), with one defect or none."""
    chunks = [
        draw(chunk_dicts(n)) if draw(st.integers(0, 5)) == 0 else usual(draw(_TEXT), n)
        for n in range(draw(st.integers(8, 40)))
    ]
    framing = draw(st.sampled_from(["sse", "sse-lf", "array", "array-lf"]))
    newline = b"\n" if framing.endswith("lf") else b"\r\n"
    data = sse(chunks, newline) if framing.startswith("sse") else array(chunks, newline)
    defect = draw(st.sampled_from(["none"] * 4 + ["cut", "insert", "bare", "comment"]))
    at = draw(st.integers(0, len(data)))
    if defect == "cut":
        data = data[:at]
    elif defect == "insert":
        inserted = draw(
            st.sampled_from([b'"', b"\\", b"}", b"\n,", b"\xff", b"\r", b"\n", b": c\r\n"])
        )
        data = data[:at] + inserted + data[at:]
    elif defect == "bare":
        data = data[:at] + b'{\n  "error": {"code": 503, "status": "UNAVAILABLE"}\n}\n' + data[at:]
    elif defect == "comment":
        blocks = data.split(newline + newline)
        blocks[at % len(blocks)] += newline + b": keep-alive"
        data = (newline + newline).join(blocks)
    return data


# A long stream, cuts and a piece size for :func:`feedings`, lenient or strict (the
# coalescing tests draw the same cases).
long_stream_cases = given(
    data=long_streams(),
    cuts=st.lists(st.integers(min_value=0), max_size=40),
    strict=st.booleans(),
    size=st.integers(1, 3000),
)


def feedings(data: bytes, cuts: list[int], size: int) -> list[list[bytes]]:
    """``data`` whole, cut at ``cuts``, cut where each chunk may begin, and in pieces of
    ``size`` bytes."""
    return [[data], split_at(data, cuts), at_chunk_starts(data), pieces(data, size)]


@settings(max_examples=150, deadline=None)
@long_stream_cases
def test_long_generated_streams(data: bytes, cuts: list[int], strict: bool, size: int) -> None:
    for feeds in feedings(data, cuts, size):
        assert_same(feeds, strict=strict)


def test_a_placeholder_inside_the_model_version() -> None:
    # The template is cut at placeholder strings: a modelVersion whose JSON text holds
    # one ('"\u0000"' and '"\u0001"') has none.
    model = '"\x00"\x01'
    chunks = [usual(f"w{i}", i, modelVersion=model) for i in range(1, 5)] + [last(5)]
    for chunk in chunks:
        chunk["modelVersion"] = model
    for data in both(chunks):
        assert_same([data])
    decoder = Decoder()
    decoder.feed(sse(chunks))
    assert decoder._template is None


def test_the_template_search_gives_up() -> None:
    # A layout none of the templates fits: a few failed tries, then no more.
    chunks = [usual(f"w{i}", i) for i in range(1, 12)]
    data = b"".join(b"data: " + msgspec.json.encode(c) + b"\n\n" for c in chunks)
    decoder = Decoder()
    decoder.feed(data)
    assert decoder._template is None
    assert decoder._template_tries == 0
    assert_same([data])


@pytest.mark.parametrize("odd", ["order", "bare"])
def test_a_chunk_record_is_not_carried_to_the_next_chunk(odd: str) -> None:
    # A chunk in another key order records it in its UsageUpdate's extra (a bare
    # JSON text after SSE events records "bare"); the next chunk in the usual order,
    # with the same fields, must not inherit that record.
    candidate = {"content": {"parts": [{"text": "a"}], "role": "model"}, "index": 0}
    first = {"candidates": [candidate], "modelVersion": "m", "responseId": "r"}
    if odd == "order":
        second = {"modelVersion": "m", "candidates": [candidate], "responseId": "r"}
        data = sse([first, second, first])
    else:
        data = sse([first]) + dumps_pretty(first) + b"\n\n" + sse([first])
    for cls in (Decoder, General):
        decoder = cls()
        events = decoder.feed(data) + decoder.close()
        extras = [e.extra for e in events if isinstance(e, UsageUpdate)]
        assert len(extras) == 3
        assert odd in extras[1]
        assert (
            extras[2]
            == extras[0]
            == {"chunk": {"modelVersion": "m", "responseId": "r"}, "candidates": [{"index": 0}]}
        )
        encoder = Encoder(framing="sse")
        wire = b"".join(encoder.encode(e) for e in events) + encoder.close()
        if odd == "order":
            assert wire == data  # the same-dialect round trip is exact


def test_array_elements_the_template_does_not_fit() -> None:
    big = usual("big", 5)
    big["usageMetadata"]["promptTokensDetails"] = [
        {"modality": f"M{i}", "tokenCount": i} for i in range(200)
    ]  # a usage object longer than the window the matcher looks in
    thought = usual("t", 6)
    thought["candidates"][0]["content"]["parts"] = [{"text": "t", "thought": True}]
    chunks = [
        usual("a", 1),
        usual("b", 2),
        usual("c", 3),
        big,
        usual("d", 4),
        thought,
        usual("e", 7),
        *(usual(f"x{i}", 8 + i, modelVersion="gemini-switched") for i in range(40)),
        usual("f", 60),
        last(61),
    ]
    for data in both(chunks):
        assert_same([data])
        assert_same([data], max_event_size=700)
        assert_same(split_at(data, [len(data) // 3, len(data) // 2]))


# -- usage ----------------------------------------------------------------------------------

_COUNT = st.integers(-2, 5) | st.sampled_from([None, 1.0, True, False, "3", [], {}])
_DETAILS = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "modality": st.sampled_from(["TEXT", "AUDIO", "IMAGE", None, 1]),
            "tokenCount": _COUNT,
        },
    )
    | st.sampled_from([None, "AUDIO", 3]),
    max_size=3,
) | st.sampled_from([None, {}, "x"])
_USAGE_KEYS = [
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "toolUsePromptTokenCount",
    "trafficType",
]


@st.composite
def usage_objects(draw: st.DrawFn) -> dict[str, Any]:
    """usageMetadata objects: mostly the usual shape, with any key dropped, added,
    null, of another type or moved."""
    meta: dict[str, Any] = {
        "promptTokenCount": draw(st.integers(0, 900)),
        "candidatesTokenCount": draw(st.integers(0, 900)),
        "totalTokenCount": draw(st.integers(0, 2000)),
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": draw(st.integers(0, 9))}],
        "thoughtsTokenCount": draw(st.integers(0, 90)),
    }
    for _ in range(draw(st.integers(0, 3))):
        change = draw(st.integers(0, 5))
        if change == 0 and meta:
            meta.pop(draw(st.sampled_from(sorted(meta))))
        elif change == 1:
            meta[draw(st.sampled_from(_USAGE_KEYS))] = draw(_COUNT)
        elif change in (2, 3):
            key = draw(st.sampled_from(["promptTokensDetails", "candidatesTokensDetails"]))
            meta[key] = draw(_DETAILS)
        elif change == 4:
            meta = {k: meta[k] for k in draw(st.permutations(list(meta)))}
        else:
            meta = {k: (0 if type(v) is int else v) for k, v in meta.items()}
    return meta


@settings(max_examples=500, deadline=None)
@given(meta=usage_objects())
def test_usage_conversion_of_the_usual_object(meta: dict[str, Any]) -> None:
    # The usual object's own way and the general pass give the same usage and mask.
    usage, mask = convert_usage(meta)
    expected, expected_mask = general_convert_usage(meta)
    assert usage == expected
    assert mask == expected_mask
    assert usage.raw is meta


def test_usage_conversion_cases() -> None:
    usual_meta = usual("x", 4)["usageMetadata"]
    audio = {**usual_meta, "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 2}]}
    for meta in [
        usual_meta,
        audio,
        {k: v for k, v in usual_meta.items() if k != "thoughtsTokenCount"},
        {k: v for k, v in usual_meta.items() if k != "promptTokensDetails"},
        {**usual_meta, "thoughtsTokenCount": None},
        {**usual_meta, "promptTokensDetails": None},
        {**usual_meta, "promptTokensDetails": {}},
        {**usual_meta, "thoughtsTokenCount": True},
        {**usual_meta, "candidatesTokenCount": 2.0},
        {**usual_meta, "cachedContentTokenCount": 3},
        {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0},
        {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0, "x": 1},
        {"promptTokenCount": 2, "candidatesTokenCount": 3, "totalTokenCount": 5},
        # Any of the three counts the usual object always has, missing.
        {k: v for k, v in usual_meta.items() if k != "promptTokenCount"},
        {k: v for k, v in usual_meta.items() if k != "candidatesTokenCount"},
        {k: v for k, v in usual_meta.items() if k != "totalTokenCount"},
        {},
        # Five keys, but not the usual five; five zeros; detail lists of other shapes.
        {
            **{k: v for k, v in usual_meta.items() if k != "thoughtsTokenCount"},
            "cachedContentTokenCount": 3,
        },
        {
            "promptTokenCount": 0,
            "candidatesTokenCount": 0,
            "totalTokenCount": 0,
            "thoughtsTokenCount": 0,
            "promptTokensDetails": [],
        },
        {**usual_meta, "promptTokensDetails": [1, {"modality": "AUDIO", "tokenCount": 2}]},
        {**usual_meta, "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": True}]},
        {**usual_meta, "promptTokensDetails": [{"modality": "AUDIO"}, {"modality": "TEXT"}]},
    ]:
        assert convert_usage(meta) == general_convert_usage(meta)


def test_repeated_and_alternating_usage_texts() -> None:
    # The same usage text again reuses the parsed object; any other text (another
    # value, another layout) is parsed; the events are those of the general path.
    one = usual("a", 1)["usageMetadata"]
    two = usual("a", 2)["usageMetadata"]
    zeros = {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0}
    partial = {"totalTokenCount": 9}
    metas = [one, one, two, one, one, zeros, zeros, two, partial, partial, two, two, {}, {}, one]
    chunks = [usual(f"w{i}", usageMetadata=m) for i, m in enumerate(metas)] + [last(20)]
    for data in both(chunks):
        _, error = assert_same([data])
        assert error is None
        assert_same([data[i : i + 7] for i in range(0, len(data), 7)])
    # The usage of the chunks after the first repeats the object parsed for it.
    events = Decoder().feed(sse([usual("a", 1), usual("b", 1), usual("c", 1), usual("d", 1)]))
    usages = [e.usage for e in events if isinstance(e, UsageUpdate)]
    assert usages[1] == usages[3]
    assert usages[2] is usages[3]


@pytest.mark.parametrize("pieces", [1, 3, 40])
def test_bare_text_between_events_in_one_feed(pieces: int) -> None:
    # Bare JSON (Google's error text) among SSE events: the events before and after
    # it, in one feed or several, come in the same order either way.
    chunks = [usual(f"w{i}", i) for i in range(1, 5)]
    error = b'{\n  "error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}\n}\n'
    data = sse(chunks[:2]) + error + sse(chunks[2:]) + error + sse([last(5)])
    size = -(-len(data) // pieces)
    for strict in (False, True):
        assert_same([data[i : i + size] for i in range(0, len(data), size)], strict=strict)


# -- JSON-array elements: the usage object's end --------------------------------------------


def test_array_usage_texts_changing_length() -> None:
    # The usage object is tried at the last one's length first: counts gaining and
    # losing digits, keys coming and going, between chunks that repeat a length.
    counts = [1, 2, 9, 10, 11, 99, 100, 100, 7, 12345, 12346, 3, 3]
    chunks = [usual(f"w{i}", n) for i, n in enumerate(counts)]
    chunks[5]["usageMetadata"]["cachedContentTokenCount"] = 4
    chunks[9]["usageMetadata"] = {"totalTokenCount": 1}
    chunks.append(last(14))
    for newline in (b"\r\n", b"\n"):
        data = array(chunks, newline)
        _, error = assert_same([data])
        assert error is None
        assert_same([data[i : i + 1] for i in range(len(data))])
        assert_same([data[i : i + 333] for i in range(0, len(data), 333)])


def test_array_usage_holding_the_template_text() -> None:
    # A usage object whose string holds the text that follows it (suf), at the
    # offset where the last usage object ended, or anywhere: only a cut that parses
    # is taken.
    suffix = '\r\n  },\r\n  "modelVersion": "gemini-3.8-flash",\r\n  "responseId": "resp-1"\r\n}'
    odd = [
        {"note": suffix},
        {"a": 1, "note": suffix + suffix},
        {"note": "x" * 3 + suffix, "b": [1, {"c": suffix}]},
        {"promptTokenCount": 7, "note": suffix.replace("\r\n", "\n")},
    ]
    for meta in odd:
        chunks = [usual("a", 1), usual("b", 2), usual("c", usageMetadata=meta), usual("d", 3)]
        chunks += [usual("e", usageMetadata=meta), usual("f", usageMetadata=meta), last(9)]
        for newline in (b"\r\n", b"\n"):
            data = array(chunks, newline)
            assert_same([data])
            assert_same([data[i : i + 97] for i in range(0, len(data), 97)])


@pytest.mark.parametrize("depth", [122, 124, 125, 126, 127, 128, 172])
def test_array_usage_nesting_at_the_depth_limit(depth: int) -> None:
    # The elements nest as deep as the framing allows, or one level deeper (an error
    # either way the same).
    nested: Any = 1
    for _ in range(depth):
        nested = [nested]
    chunks = [usual("a", 1), usual("b", 2), usual("c", usageMetadata={"deep": nested})]
    chunks += [usual("d", 3), last(4)]
    data = array(chunks)
    for strict in (False, True):
        assert_same([data], strict=strict)
        assert_same([data[i : i + 500] for i in range(0, len(data), 500)], strict=strict)


@pytest.mark.parametrize(
    "first",
    [
        usual("a", 1),
        usual("a", 1, modelVersion=5),
        {**usual("a", 1), "createTime": "t"},
        last(1),
        {k: v for k, v in usual("a", 1).items() if k != "usageMetadata"},
    ],
)
def test_array_template_found_while_the_framing_parses(first: dict[str, Any]) -> None:
    # In one feed the framing parses every element before the decoder handles the
    # first: the template is looked for there, from whichever element has the form.
    chunks = [first, *(usual(f"w{i}", i) for i in range(2, 9)), last(9)]
    chunks[3] = usual("w3", 3, responseId="resp-other")
    for data in (array(chunks), array(chunks, b"\n")):
        for options in ({}, {"keep_raw": True}, {"strict": True}):
            assert_same([data], **options)
        decoder = Decoder()
        decoder.feed(data)
        assert decoder._template is not None


def test_a_subclass_hook_is_still_called() -> None:
    # The dispatch inlines the decoder's own hooks only: a subclass's hooks see
    # every chunk.
    seen: list[int] = []

    class Watching(Decoder):
        def _on_event(self, event: Any, out: list[Any]) -> None:
            seen.append(event.index)
            super()._on_event(event, out)

        def _on_element(self, element: Any, out: list[Any]) -> None:
            seen.append(element.index)
            super()._on_element(element, out)

    chunks = [usual(f"w{i}", i) for i in range(1, 8)] + [last(8)]
    for data in (sse(chunks), array(chunks)):
        seen.clear()
        assert run(Watching, [data]) == run(Decoder, [data])
        assert seen == list(range(8))


# -- SSE event blocks read without the parser ------------------------------------------------


class Counting(Decoder):
    """Counts the frames the SSE parser built."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.frames = 0

    def _dispatch_sse(self, frames: list[Any], out: list[Any]) -> None:
        self.frames += len(frames)
        super()._dispatch_sse(frames, out)


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("newline", [b"\r\n", b"\n"])
def test_usual_blocks_are_read_without_the_parser(newline: bytes) -> None:
    chunks = [usual(f" word{i}", i) for i in range(1, 40)] + [last(40)]
    blocks = [sse([chunk], newline) for chunk in chunks]
    decoder = Counting()
    events = []
    for block in blocks:
        events += decoder.feed(block)
    events += decoder.close()
    # The parser built the frames until the template was found, and the last one's
    # (which does not fit it); it was told of the others.
    assert decoder.frames == 3
    assert decoder._sse is not None
    assert decoder._sse.events_dispatched == len(blocks)
    assert decoder._sse.bytes_consumed == len(b"".join(blocks))
    assert [dump_event(e) for e in events] == run(General, blocks)[0]
    # A text with an escaped quote fits too.
    decoder = Counting()
    for block in [*blocks[:3], sse([usual('say "hi"\\', 9)], newline), *blocks[3:]]:
        decoder.feed(block)
    assert decoder.frames == 3
    # All in one feed: the parser takes the blocks in the first 2 KiB (the template
    # is found there), and each block that does not fit (one in the middle here).
    odd = sse([usual("x", 5, createTime="t")], newline)
    data = b"".join(blocks[:30]) + odd + b"".join(blocks[30:])
    decoder = Counting()
    events = decoder.feed(data) + decoder.close()
    assert [dump_event(e) for e in events] == run(General, [data])[0]
    first = next(i for i in range(len(blocks)) if len(b"".join(blocks[: i + 1])) > 2048)
    assert decoder.frames == first + 1 + 1 + 1
    # Several blocks in one feed, the feed starting inside a block: the block under
    # way ends in the parser, the whole ones after it are read here.
    data = b"".join(blocks)
    # The beginning of a block at the end of a feed is kept for the next one, which
    # reads the block whole: the parser sees the blocks until the template is found
    # and those already under way then, and the last. (Not a block whose feed ends
    # between the CR and the LF of its blank line: the parser dispatches it at the CR.)
    for size in (len(blocks[5]) * 3 + 17, 1000, 4096, 64):
        decoder = Counting()
        for piece in pieces(data, size):
            decoder.feed(piece)
        assert decoder.frames <= 2 + 1 + -(-size // len(blocks[5])) + 1
        assert_same(pieces(data, size))
    assert_same(pieces(data, 7))


def _with_usage_text(text: bytes, n: int = 1) -> bytes:
    """A usual block (CRLF) whose usageMetadata is ``text`` as is."""
    block = sse([usual(f"u{n}", usageMetadata={"x": 0})])
    return block.replace(b'{"x": 0}', text)


_SUF = b',"modelVersion": "gemini-3.8-flash","responseId": "resp-1"}'


@pytest.mark.parametrize(
    "odd",
    [
        # The usage object: raw line breaks (JSON whitespace, SSE line ends), at the
        # length of the usage before it too; holding the text that follows it.
        _with_usage_text(b'{"candidatesTokenCount":\n3}'),
        _with_usage_text(b'{"candidatesTokenCount":\r3}'),
        _with_usage_text(b'{"candidatesTokenCount":\r\n3}'),
        _with_usage_text(b'{"note": "' + _SUF.replace(b'"', b'\\"') + b'"}'),
        _with_usage_text(b'{"note": "}' + _SUF[1:].replace(b'"', b'\\"') + b'"}'),
        _with_usage_text(b"{}"),
        _with_usage_text(b"[]"),
        _with_usage_text(b'{"a": 1} '),
        # The text: a raw CR or LF, an escaped quote before the template's own text.
        sse([usual("a")]).replace(b'"a"', b'"a\rb"'),
        sse([usual("a")]).replace(b'"a"', b'"a\nb"'),
        sse([usual('x\\"}],"role": "model"},"index": 0}],"usageMetadata": ')]),
        # Another value where the template has its own text, at the same length.
        sse([usual("a")]).replace(b'"role": "model"', b'"role": "modex"'),
        sse([usual("a")]).replace(b'"index": 0', b'"index": 5'),
        # Line ends and fields around the block.
        sse([usual("a")]).replace(b"\r\n\r\n", b"\r\n\n"),
        sse([usual("a")]).replace(b"\r\n\r\n", b"\n\r\n"),
        sse([usual("a")]).replace(b"\r\n\r\n", b"\r\r"),
        sse([usual("a")]).replace(b"\r\n\r\n", b" \r\n\r\n"),
        sse([usual("a")]).replace(b"data: ", b"data:"),
        sse([usual("a")]).replace(b"data: ", b"data:  "),
        sse([usual("a")]).replace(b"data: ", b"id: 9\r\ndata: "),
        sse([usual("a")]).replace(b"data: ", b"event: message\r\ndata: "),
        sse([usual("a")]).replace(b"data: ", b": keep-alive\r\ndata: "),
        sse([usual("a")]).replace(b"\r\n\r\n", b"\r\ndata: \r\n\r\n"),
        sse([usual("a")]) + b"retry: 10\r\n\r\n",
        sse([usual("a")]).replace(b"\r\n\r\n", b"\r\n"),  # no blank line: one event
        b'{\n  "error": {"code": 503, "status": "UNAVAILABLE"}\n}\n',
        sse([usual("a")])[:-1],
    ],
)
def test_blocks_that_do_not_quite_fit(odd: bytes) -> None:
    # Between usual blocks (the template found), in one feed, byte by byte and in
    # pieces that start inside blocks: the events and errors of the general path.
    before = sse([usual(f"b{i}", i) for i in range(1, 6)])
    after = sse([usual(f"c{i}", i) for i in range(6, 9)] + [last(9)])
    data = before + odd + after
    for strict in (False, True):
        assert_same([data], strict=strict)
        assert_same(pieces(data, 1), strict=strict)
        for size in (7, 64, 301, len(before) - 3, len(before) + 5):
            assert_same(pieces(data, size), strict=strict)


def test_blocks_over_the_line_limit() -> None:
    chunks = [usual(f"w{i}", i) for i in range(1, 9)] + [last(9)]
    chunks[6] = usual("a much longer text than the others " * 9, 7)
    data = sse(chunks)
    longest = len(b"data: " + dumps_sse(chunks[6]))
    assert longest == max(len(b"data: " + dumps_sse(c)) for c in chunks)
    for max_line in (longest, longest - 1):
        for limits in ({"max_line_size": max_line}, {"max_event_size": max_line - 6}):
            for strict in (False, True):
                fast, error = assert_same([data], strict=strict, **limits)
                assert (error is not None) is (max_line < longest)
                assert_same(pieces(data, 1000), strict=strict, **limits)
                # Block by block: the long one is read where the parser is idle.
                blocks = [sse([chunk]) for chunk in chunks]
                assert assert_same(blocks, strict=strict, **limits) == (fast, error)
                # The long one cut where its line reaches the limit, and one byte
                # later: the error comes from the same feed either way.
                for cut in (max_line, max_line + 1):
                    feeds = [*blocks[:6], blocks[6][:cut], blocks[6][cut:], *blocks[7:]]
                    assert assert_same(feeds, strict=strict, **limits) == (fast, error)


def test_errors_after_blocks_read_without_the_parser_are_located() -> None:
    # A malformed chunk after blocks that were read here: its event index and byte
    # offset are those the parser gives.
    good = sse([usual(f"w{i}", i) for i in range(1, 30)])
    data = good + b"data: {oops\r\n\r\n" + sse([last(30)])
    events, _ = assert_same([data])
    errors = [e for e in events if e.startswith(b'{"type":"error"')]
    assert len(errors) == 1
    assert b'"event_index":29,"byte_offset":%d' % len(good) in errors[0]
    _, error = assert_same([data], strict=True)
    assert error is not None
    assert error[2:] == (29, len(good))


def test_a_stream_cut_after_blocks_read_without_the_parser() -> None:
    # No finishReason: the truncated Finish names the last event, read here.
    blocks = [sse([usual(f"w{i}", i)]) for i in range(1, 20)]
    events, _ = assert_same(blocks)
    finish = msgspec.json.decode(events[-1])
    assert finish["status"] == "truncated"
    assert finish["error"]["event_index"] == 18


def test_an_error_while_a_block_read_here_is_handled() -> None:
    # Whatever goes wrong while such a block's events are made is located at that
    # block; in strict mode the events before it come first, the error next call.
    class Failing(Decoder):
        def _matched(self, template: Any, text: str, meta: Any, out: list[Any]) -> bool:
            if text == "w7":
                raise self.protocol_error("no w7 here")
            return super()._matched(template, text, meta, out)

    blocks = [sse([usual(f"w{i}", i)]) for i in range(1, 10)]
    # After a chunk that does not fit, the next one's events are made the long way.
    blocks[5] = sse([usual("w6", 6, createTime="t")])
    offset = len(b"".join(blocks[:6]))
    decoder = Failing()
    events = [e for block in blocks for e in decoder.feed(block)]
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [(e.error.message, e.error.event_index, e.error.byte_offset) for e in errors] == [
        ("no w7 here", 6, offset)
    ]
    strict = Failing(strict=True)
    for block in blocks[:6]:
        strict.feed(block)
    data = b"".join(blocks[6:])
    with pytest.raises(PolystreamError):
        strict.feed(data)
    strict = Failing(strict=True)
    for block in blocks[:5]:
        strict.feed(block)
    early = strict.feed(b"".join(blocks[5:]))
    assert [e.delta for e in early if isinstance(e, TextDelta)] == ["w6"]
    with pytest.raises(PolystreamError) as caught:
        strict.feed(b"")
    assert (caught.value.event_index, caught.value.byte_offset) == (6, offset)


def test_bare_text_after_blocks_read_without_the_parser() -> None:
    # Google's bare error text among blocks read here: in its place, however fed.
    blocks = [sse([usual(f"w{i}", i)]) for i in range(1, 8)]
    bare = b'{\n  "error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}\n}\n'
    for feeds in (
        [*blocks, bare],
        [*blocks[:3], b"".join(blocks[3:5]) + bare + b"".join(blocks[5:])],
        [*blocks[:3], b"".join(blocks[3:]) + bare],
    ):
        events, error = assert_same(feeds)
        assert error is None
        kinds = [msgspec.json.decode(e)["type"] for e in events]
        at = kinds.index("error")
        assert kinds[at - 2 : at + 2] == ["text-delta", "usage", "error", "usage"]
        assert kinds.count("text-delta") == 7


def test_usage_and_runs_changing_among_blocks_read_without_the_parser() -> None:
    # A usage that drops a count the last one had (the merged usage keeps it), an
    # empty one, a reasoning part between texts (the text run ends and restarts):
    # the events and the final usage of the general path, block by block.
    chunks = [usual(f"w{i}", i) for i in range(1, 25)]
    chunks[8] = usual("w8", usageMetadata={"totalTokenCount": 30})
    chunks[9] = usual("w9", usageMetadata={"totalTokenCount": 31})
    chunks[12] = usual("w12", usageMetadata={})
    chunks[13] = usual("w13", usageMetadata={"promptTokenCount": 5, "candidatesTokenCount": 2})
    chunks[14] = usual("w14", usageMetadata={"promptTokenCount": 5, "candidatesTokenCount": 3})
    thought = usual("hmm", 16)
    thought["candidates"][0]["content"]["parts"][0]["thought"] = True
    chunks[16] = thought
    for chunk in chunks[20:]:  # only the total from here on
        chunk["usageMetadata"] = {"totalTokenCount": 40}
    chunks.append(last(30))
    chunks[-1]["usageMetadata"] = {"totalTokenCount": 41}
    blocks = [sse([chunk]) for chunk in chunks]
    events, error = assert_same(blocks)
    assert error is None
    finish = msgspec.json.decode(events[-1])
    assert {k: v for k, v in finish["usage"].items() if k != "raw"} == {
        "input_tokens": 7,
        "output_tokens": 23,  # the last full usage (w20: 20 + 3 thoughts)
        "reasoning_tokens": 3,
        "total_tokens": 41,
    }
    kinds = [msgspec.json.decode(e)["type"] for e in events]
    assert kinds.count("block-start") == 3  # text, reasoning, text (signed by the last)
    assert_same([b"".join(blocks)])


# -- JSON-array elements read without the framing --------------------------------------------


class CountingElements(Decoder):
    """Counts the elements the JSON-array framing built, and the feeds it was given."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.elements = 0
        self.parser_feeds = 0

    def _handle_element(self, element: Any, out: list[Any]) -> None:
        self.elements += 1
        super()._handle_element(element, out)

    def _feed_frames(self, data: bytes, *, scan: bool = True) -> list[Any]:
        self.parser_feeds += 1
        return super()._feed_frames(data, scan=scan)


def elements(chunks: list[Any], newline: bytes = b"\r\n") -> list[bytes]:
    """The JSON array of ``chunks``, one piece per element (with what follows it)."""
    data = array(chunks, newline)
    separator = newline + b"," + newline
    parts = data.split(separator)
    return [part + separator for part in parts[:-1]] + [parts[-1]]


@pytest.mark.parametrize("newline", [b"\r\n", b"\n"])
def test_usual_elements_are_read_without_the_framing(newline: bytes) -> None:
    chunks = [usual(f" word{i}", i) for i in range(1, 40)] + [last(40)]
    feeds = elements(chunks, newline)
    assert b"".join(feeds) == array(chunks, newline)
    decoder = CountingElements()
    events = []
    for piece in feeds:
        events += decoder.feed(piece)
    events += decoder.close()
    # The framing built the first element (the template is found while it is
    # parsed) and the last one (not followed by a comma); it was told of the others.
    assert decoder.elements == 2
    assert decoder._array is not None
    assert decoder._array.elements_decoded == len(chunks)
    assert decoder._array.bytes_consumed == len(b"".join(feeds))
    assert [dump_event(e) for e in events] == run(General, feeds)[0]
    # As a network hands them over: each comma line with the element after it. The
    # element at the end of a feed is read with its comma still to come.
    separator = newline + b"," + newline
    data = array(chunks, newline)
    network = [data[: data.index(separator)]]
    network += [separator + element for element in data.split(separator)[1:]]
    network[-1], end = network[-1][: -len(newline + b"]")], newline + b"]"
    network.append(end)
    assert b"".join(network) == data
    decoder = CountingElements()
    events = []
    for piece in network:
        events += decoder.feed(piece)
    events += decoder.close()
    assert decoder.elements == 2
    assert decoder.parser_feeds == 3  # the first element, the last one, the "]"
    assert [dump_event(e) for e in events] == run(General, network)[0]
    # A comma line missing between two elements of two feeds: the framing's error.
    broken = [*network[:8], network[8][len(separator) :], *network[9:]]
    for strict in (False, True):
        _, error = assert_same(broken, strict=strict)
        assert error is not None
        assert error[2] == 8
    # Cut inside the comma line too.
    split = [piece for feed in network for piece in (feed[:3], feed[3:]) if piece]
    assert_same(split)
    # All in one feed: the framing takes the elements in the first 2 KiB, and each
    # one that does not fit (one in the middle here).
    chunks[30] = usual("x", 30, createTime="t")
    data = array(chunks, newline)
    decoder = CountingElements()
    events = decoder.feed(data) + decoder.close()
    assert [dump_event(e) for e in events] == run(General, [data])[0]
    element = len(elements(chunks, newline)[3])
    assert decoder.elements == -(-2048 // element) + 1 + 1
    for size in (element * 3 + 17, 1000, 4096):
        assert_same(pieces(data, size))


_ELEMENT_SUF = b'\r\n  },\r\n  "modelVersion": "gemini-3.8-flash",\r\n  "responseId": "resp-1"\r\n}'


@pytest.mark.parametrize(
    ("index", "old", "new"),
    [
        # The usage object: line breaks (JSON whitespace, in an array too), the text
        # that follows it inside a string, another value there.
        (5, b'"candidatesTokenCount": 6', b'"candidatesTokenCount":\r\n6'),
        (5, b'"candidatesTokenCount": 6', b'"note": "' + _ELEMENT_SUF.replace(b'"', b'\\"') + b'"'),
        (5, b'"candidatesTokenCount": 6', b'"x": [[[[[[1]]]]]]'),
        # The text: an escaped quote, the template's own text after one.
        (5, b'"w5"', b'"w\\"5"'),
        (5, b'"w5"', b'"\\"\\r\\n          }\\r\\n        ],"'),
        # Another value where the template has its own text, at the same length.
        (5, b'"role": "model"', b'"role": "modex"'),
        (5, b'"index": 0', b'"index": 5'),
        # What follows the element.
        (5, b"}\r\n,\r\n{", b"}\r\n,\n{"),
        (5, b"}\r\n,\r\n{", b"} ,\r\n{"),
        (5, b"}\r\n,\r\n{", b"}\r\n,\r\n\r\n{"),
        (5, b"}\r\n,\r\n{", b"}\r\n,\r\n ,{"),
        (5, b"}\r\n,\r\n{", b"}\r\n]\r\n,{"),
        (5, b"}\r\n,\r\n{", b"}\r\n,\r\n]"),
        (5, b"}\r\n,\r\n{", b"}\r\n\r\n{"),
    ],
)
def test_elements_that_do_not_quite_fit(index: int, old: bytes, new: bytes) -> None:
    # Among usual elements (the template found), fed one by one, whole, and in
    # pieces that start inside elements: the events and errors of the general path.
    chunks = [usual(f"w{i}", i + 1) for i in range(12)] + [last(13)]
    feeds = elements(chunks)
    at = feeds[index].find(old) if old != b"}\r\n,\r\n{" else len(feeds[index]) - 5
    assert at >= 0
    feeds[index] = feeds[index][:at] + new + feeds[index][at + len(old) :]
    if old == b"}\r\n,\r\n{":  # the brace of the next element was part of this change
        feeds[index + 1] = feeds[index + 1][1:]
    data = b"".join(feeds)
    for strict in (False, True):
        assert_same(feeds, strict=strict)
        assert_same([data], strict=strict)
        for size in (7, 301, len(b"".join(feeds[:4])) + 5):
            assert_same(pieces(data, size), strict=strict)


@pytest.mark.parametrize("framing", ["sse", "json_array"])
@pytest.mark.parametrize("index", [1, 2, 3, 5])
def test_a_usage_with_no_value(framing: str, index: int) -> None:
    # `"usageMetadata": ,` in a chunk otherwise usual, early in the stream (before the
    # fast path has read a usage text: the text it compares with is then none) and
    # later: the malformed chunk of the general path, never an untyped exception.
    chunks = [usual(f"w{i}", i + 1) for i in range(8)] + [last(9)]
    if framing == "sse":
        feeds = [b"data: " + dumps_sse(c) + b"\r\n\r\n" for c in chunks]
    else:
        feeds = elements(chunks)
    gap = b'"usageMetadata": '
    start = feeds[index].index(gap) + len(gap)
    end = feeds[index].rindex(b",", start, feeds[index].index(b'"modelVersion"'))
    feeds[index] = feeds[index][:start] + feeds[index][end:]
    assert feeds[index][start : start + 1] == b","
    data = b"".join(feeds)
    for strict in (False, True):
        events, error = assert_same(feeds, strict=strict)
        if strict:
            assert error is not None
            assert error[0] == "RemoteProtocolError"
            assert "malformed JSON in chunk" in error[1]
            assert error[2] == index
            assert error[3] == len(b"".join(feeds[:index]))
        else:
            assert error is None
            assert b'"type":"error"' in b"".join(events)
        assert assert_same([data], strict=strict) == (events, error)


def test_elements_over_the_limits() -> None:
    chunks = [usual(f"w{i}", i) for i in range(1, 12)] + [last(12)]
    chunks[7] = usual("a much longer text than the others " * 9, 7)
    chunks[8] = usual("w8", usageMetadata={"deep": [[[[[[[[1]]]]]]]]})
    feeds = elements(chunks)
    longest = len(feeds[7]) - len(b"\r\n,\r\n")
    assert longest == max(len(feed) for feed in feeds) - 5
    for limits in (
        {"max_event_size": longest},
        {"max_event_size": longest - 1},
    ):
        for strict in (False, True):
            fast, error = assert_same(feeds, strict=strict, **limits)
            assert (error is not None) is (limits["max_event_size"] < longest)
            assert assert_same([b"".join(feeds)], strict=strict, **limits) == (fast, error)


@pytest.mark.parametrize("depth", [8, 9, 10, 11, 12])
def test_elements_at_the_depth_limit(depth: int) -> None:
    # The JSON-array framing's depth limit, for elements read without it.
    nested: Any = 1
    for _ in range(8):
        nested = [nested]
    chunks = [usual(f"w{i}", i) for i in range(1, 9)] + [last(9)]
    chunks[6] = usual("w6", usageMetadata={"deep": nested})
    feeds = elements(chunks)

    class Shallow(Decoder):
        def _make_framer(self, framing: Any) -> None:
            super()._make_framer(framing)
            if self._array is not None:
                self._array._max_depth = depth

    class ShallowGeneral(General):
        def _make_framer(self, framing: Any) -> None:
            super()._make_framer(framing)
            if self._array is not None:
                self._array._max_depth = depth

    for strict in (False, True):
        fast = run(Shallow, feeds, strict=strict)
        assert fast == run(ShallowGeneral, feeds, strict=strict)
        assert (fast[1] is not None) is (depth < 10)  # the chunk, usage, 8 lists


def test_errors_after_elements_read_without_the_framing_are_located() -> None:
    chunks = [usual(f"w{i}", i) for i in range(1, 30)] + [last(30)]
    feeds = elements(chunks)
    feeds[29] = b"{oops" + feeds[29]
    offset = len(b"".join(feeds[:29]))
    for strict in (False, True):
        _, error = assert_same(feeds, strict=strict)
        assert error is not None
        assert error[2] == 29
        assert offset <= error[3] < offset + len(feeds[29])


@pytest.mark.parametrize(
    "after",
    [
        b"",  # the stream ends inside the block: truncated
        b"\r\n: keep-alive\r\n\r\n",  # a comment line before the blank line
        b"\r\ndata: more\r\n\r\n",  # a second data line
        b'\r\n{"error": {"code": 503}}\r\n\r\n',  # a bare line
        b"\r\r\n",
        b"\n\n",
        b" \r\n\r\n",
    ],
)
@pytest.mark.parametrize("cut", [7, 30, -1, -2, -3])
def test_the_beginning_of_a_block_kept_for_the_next_feed(after: bytes, cut: int) -> None:
    # A feed ends inside a block that fits (its line, or its line end, cut): the
    # bytes are kept, and the next feed or close() decides, as the parser would.
    blocks = [sse([usual(f"w{i}", i)]) for i in range(1, 9)]
    line = sse([usual("held", 9)]).rstrip(b"\r\n")
    split = len(line) + 2 + cut if cut < 0 else cut  # (within the line, or its end)
    head, tail = (line + b"\r\n\r\n")[:split], (line + b"\r\n\r\n")[split:]
    if after:
        tail = tail.rstrip(b"\r\n") + after if cut > 0 else after
    feeds = [*blocks, head, tail, sse([last(10)])] if after or cut > 0 else [*blocks, head]
    for strict in (False, True):
        assert_same([feed for feed in feeds if feed], strict=strict)
    decoder = Decoder()
    for block in blocks:
        decoder.feed(block)
    assert decoder.feed(head) == []
    assert decoder._held == head
    # After an error deferred to the next call, the next feed raises it: nothing is
    # kept.
    deferred = [sse([usual("a", 1)]), sse([usual("b", 2)]), b"data: []\r\n\r\n", b"d"]
    _, error, counts = steps(Decoder, deferred, strict=True)
    assert (error, counts) == steps(General, deferred, strict=True)[1:]
    assert counts == [4, 2, 1]  # the last feed raised
    # The beginning of anything else is the parser's at once.
    for other in (b": keep-al", b"data: [", b"data:{", b"event: x", b'{"error"'):
        decoder = Decoder()
        for block in blocks:
            decoder.feed(block)
        decoder.feed(other)
        assert decoder._held == b""


def _element_cuts() -> dict[str, int]:
    """Places to cut the 9th element of :func:`_held_stream`, named by what the
    first piece ends in."""
    element = dumps_pretty(usual("held 42", 9)).replace(b"\n", b"\r\n")
    text = element.index(b'"held 42"')
    usage = element.index(b'"usageMetadata": ') + len(b'"usageMetadata": ')
    count = element.index(b'"candidatesTokenCount": 9') + len(b'"candidatesTokenCount": ')
    model = element.index(b'"modelVersion"')
    return {
        "head": 5,
        "head's end": text,
        "the opening quote": text + 1,
        "the text": text + 6,
        "the closing quote": text + len(b'"held 42"'),
        "mid": usage - 3,
        "mid's end": usage,
        "the usage's first key": usage + 9,
        "a count": count,
        "a count's digit": count + 1,
        "the usage's end": model - 3,
        "the suffix": model + 5,
        "the last brace": len(element) - 1,
        "the element": len(element),
        "the comma line": len(element) + 3,
    }


_ELEMENT_CUTS = _element_cuts()
_KEPT = {name for name, _ in _ELEMENT_CUTS.items() if name not in ("the element", "the comma line")}


def _held_stream() -> tuple[list[bytes], bytes, bytes]:
    """Eight usual elements with their comma lines, the 9th with its own, and the
    end."""
    chunks = [usual(f"w{i}", i) for i in range(1, 9)] + [usual("held 42", 9), last(10)]
    feeds = elements(chunks)
    return feeds[:8], feeds[8], feeds[9]


@pytest.mark.parametrize("cut", sorted(_ELEMENT_CUTS))
def test_the_beginning_of_an_element_kept_for_the_next_feed(cut: str) -> None:
    # A feed ends inside a JSON-array element that fits (in any of its pieces): the
    # bytes are kept, and the next feed reads the element whole, giving what the
    # parser gives, from the same call.
    before, element, end = _held_stream()
    split = _ELEMENT_CUTS[cut]
    head, tail = element[:split], element[split:]
    for strict in (False, True):
        events, error = assert_same([*before, head, tail, end], strict=strict)
        assert error is None
        assert events == assert_same([b"".join([*before, element, end])], strict=strict)[0]
        # The stream ends there: close() reports the element cut where it begins, as
        # the parser does (the two last cuts end after the element: a cut array).
        events, error = assert_same([*before, head], strict=strict)
        start = len(b"".join(before))
        if cut not in _KEPT:
            assert error or json.loads(events[-1])["error"]
        elif strict:
            assert error is not None and error[0] == "StreamTruncated"
            assert error[2:] == (8, start)
        else:
            finish = json.loads(events[-1])
            assert finish["status"] == "truncated"
            assert finish["error"]["message"] == "JSON array not closed (inside an element)"
            assert finish["error"]["byte_offset"] == start
    decoder = Decoder()
    for piece in before:
        decoder.feed(piece)
    decoder.feed(head)
    assert decoder._held == (head if cut in _KEPT else b"")


_BREAKS = [
    (b"}", b"]"),  # a closing bracket that does not close what is open
    (b'"gemini-3.8-flash"', b'"gemini-3.8-flash'),  # a string left open: truncated
    (b"\r\n}", b"\r\n}}"),  # one closer too many
]


def _broken_cuts() -> list[tuple[str, int]]:
    """(cut, break) pairs whose change lies after the kept part."""
    element = _held_stream()[1]
    return [
        (cut, number)
        for cut in sorted(_KEPT)
        for number, (old, _) in enumerate(_BREAKS)
        if element.rindex(old) >= _ELEMENT_CUTS[cut]
    ]


@pytest.mark.parametrize(("cut", "number"), _broken_cuts())
def test_an_error_after_the_kept_beginning_comes_from_the_same_call(cut: str, number: int) -> None:
    # What follows the kept bytes is wrong: the error is the parser's, raised by the
    # same call at the same place, and the events before it are the same.
    before, element, end = _held_stream()
    old, new = _BREAKS[number]
    at = element.rindex(old)
    broken = element[:at] + new + element[at + len(old) :]
    split = _ELEMENT_CUTS[cut]
    for strict in (False, True):
        events, error, counts = steps(
            Decoder, [*before, broken[:split], broken[split:], end], strict=strict
        )
        assert (events, error, counts) == steps(
            General, [*before, broken[:split], broken[split:], end], strict=strict
        )
        assert (events, error) == run(Decoder, [b"".join([*before, broken, end])], strict=strict)
        if strict:
            assert error is not None
            assert counts[8] == 0  # (the kept part gave nothing)


def test_the_beginning_of_another_element_is_the_parsers_at_once() -> None:
    # Bytes that are not the beginning of an element fitting the template go to the
    # parser at once: another usage object (digits aside), another layout, another
    # head.
    before, element, last_element = _held_stream()
    usage = element.index(b'"usageMetadata": ') + len(b'"usageMetadata": ')
    others = [
        element[:usage] + b'{\r\n    "cachedContentTokenCount": 1',
        element[:usage] + b'{\r\n    "promptTokenCount": 7,\r\n    "x',
        dumps_pretty(usual("w", 9))[:80],  # LF line ends
        element[:40].replace(b"candidates", b"candidatez"),
    ]
    for other in others:
        decoder = Decoder()
        for piece in before:
            decoder.feed(piece)
        decoder.feed(other[:-1] if other.endswith(b"}") else other)
        assert decoder._held == b"", other
    # After an element that ended exactly at the end of the feed, the comma line is
    # read first, then the beginning of the next element is kept.
    feeds = [*before[:-1], before[-1].rstrip(b"\r\n,"), b"\r\n,\r\n" + element[:50]]
    decoder = Decoder()
    for piece in feeds:
        decoder.feed(piece)
    assert decoder._held == element[:50]
    assert_same([*feeds, element[50:], last_element])


def test_what_the_structure_check_does_not_read_is_not_kept() -> None:
    # The parser's structure check does not look inside strings: a raw line break
    # there (not JSON, but no structure error either) or an escaped quote followed by
    # the mid's bytes must not let the decoder take the bytes for what they are not.
    before, element, end = _held_stream()
    text = element.index(b'"held 42"')
    close = text + len(b'"held 42"') - 1
    usage = element.index(b'"usageMetadata": ') + len(b'"usageMetadata": ')
    mid = element[close:usage]
    # An escaped quote, then the mid's bytes: the string is not closed there.
    escaped = element[:text] + b'"held\\' + mid + element[usage:]
    decoder = Decoder()
    for piece in before:
        decoder.feed(piece)
    decoder.feed(escaped[: text + 6 + len(mid)])
    assert decoder._held == b""
    cut = text + 6 + len(mid)
    for strict in (False, True):
        assert_same([*before, escaped[:cut], escaped[cut:], end], strict=strict)
    # A raw "\n," inside the text, where the next feed begins: the comma line the
    # decoder looks for to cut the kept element's end is not one.
    raw = element[:text] + b'"held\n,\r\n42"' + element[close + 1 :]
    cut = text + 3
    for strict in (False, True):
        assert_same([*before, raw[:cut], raw[cut:], end], strict=strict)
        assert_same([*before, raw[:cut], raw[cut:] + end], strict=strict)
    # More brackets than the parser's depth limit (here in the text, where they do not
    # count, but the check does not read strings): not kept.
    deep = element.replace(b'"held 42"', b'"' + b"[" * 300 + b'"')
    cut = deep.index(b'"usageMetadata": ') + 30
    decoder = Decoder()
    for piece in before:
        decoder.feed(piece)
    decoder.feed(deep[:cut])
    assert decoder._held == b""
    assert_same([*before, deep[:cut], deep[cut:], end])
    # A whole element that fits but for its text (an invalid escape), at the end of
    # the feed: it is the parser's at once, not kept.
    invalid = element.replace(b'"held 42"', b'"held \\x42"')
    for strict in (False, True):
        assert_same([*before, invalid[:-5], invalid[-5:], end], strict=strict)


@pytest.mark.parametrize("layout", ["sse", "json_array"])
def test_what_is_kept_is_bounded(layout: str) -> None:
    # A chunk with a long text (1 MiB), fed 4 KiB at a time: each feed that keeps the
    # beginning of a chunk copies it once more, so at most _HOLD_LIMIT bytes are
    # kept; the rest is the parser's, with the same events.
    chunks = [usual(f"w{i}", i) for i in range(1, 9)] + [usual("x" * (1 << 20), 9), last(10)]
    body = sse(chunks) if layout == "sse" else array(chunks)
    feeds = split_at(body, list(range(4096, len(body), 4096)))
    decoder = Decoder()
    kept = []
    for piece in feeds:
        decoder.feed(piece)
        kept.append(len(decoder._held))
    assert 0 < max(kept) <= _HOLD_LIMIT
    assert run(Decoder, feeds) == run(General, feeds)


@pytest.mark.parametrize("layout", ["sse", "json_array"])
@pytest.mark.parametrize("over", [-1, 0, 1])
def test_a_kept_chunk_is_read_with_the_next_feed_of_any_size(layout: str, over: int) -> None:
    # The chunk kept from a feed is joined to the whole next feed when that feed holds
    # at most _JOIN_LIMIT bytes, else to its own end only. Either way that feed's
    # chunks are all read without the parser, and the events are the parser's, from
    # the same calls.
    chunks = [usual(f"w{i} " + "x" * 90, i) for i in range(1, 300)] + [last(300)]
    body = sse(chunks) if layout == "sse" else array(chunks)
    start = body.index(b"w9 ")  # inside the 9th chunk's text
    size = _JOIN_LIMIT + over
    feeds = [body[:start], body[start : start + size], body[start + size :]]
    assert len(feeds[1]) == size
    assert len(feeds[2]) > size
    decoder = CountingElements()
    events = decoder.feed(feeds[0])
    begins = b"data: " if layout == "sse" else b"\r\n,\r\n"
    kept = body[body.rindex(begins, 0, start) + (0 if layout == "sse" else 5) : start]
    assert decoder._held == kept  # the 9th chunk's beginning
    before = decoder.parser_feeds
    events += decoder.feed(feeds[1])
    assert decoder.parser_feeds == before
    events += decoder.feed(feeds[2]) + decoder.close()
    assert [dump_event(e) for e in events] == run(General, feeds)[0]
    for strict in (False, True):
        assert assert_same(feeds, strict=strict)[1] is None


@pytest.mark.parametrize("layout", ["sse", "json_array"])
def test_a_large_first_feed_is_read_without_the_parser_after_its_first_look(layout: str) -> None:
    # The parser takes the first chunks (the template is found in them) and the
    # last, which does not fit; every chunk between them is read without it.
    chunks = [usual(f"w{i} " + "x" * 90, i) for i in range(1, 300)] + [last(300)]
    body = sse(chunks) if layout == "sse" else array(chunks)
    decoder = CountingElements()
    events = decoder.feed(body) + decoder.close()
    assert decoder.parser_feeds == 2
    assert [dump_event(e) for e in events] == run(General, [body])[0]


_SAME_IN_PYTHON = [
    b'{"promptTokenCount": 1,"candidatesTokenCount": 1.0}',  # 1.0 == 1
    b'{"promptTokenCount": 1,"candidatesTokenCount": true}',  # True == 1
    b'{"candidatesTokenCount": 1,"promptTokenCount": 1}',  # another key order
]


@pytest.mark.parametrize("second", _SAME_IN_PYTHON)
@pytest.mark.parametrize("decoder", [Decoder, General])
def test_a_usage_equal_in_python_is_not_the_last_one(second: bytes, decoder: type) -> None:
    """A chunk's usage that Python's equality takes for the last one is still its own:
    its ``raw`` as sent, its counts (a float or a boolean is no count), and the stream
    re-encoded byte for byte. (The usage is reused only when it is exactly the last.)"""
    first = b'{"promptTokenCount": 1,"candidatesTokenCount": 1}'
    body = b"".join(
        b'data: {"candidates": [{"content": {"parts": [{"text": "a"}],"role": "model"},'
        b'"index": 0}],"usageMetadata": ' + usage + b',"modelVersion": "m"}\r\n\r\n'
        for usage in (first, first, second)
    )
    for feeds in ([body], [body[i : i + 1] for i in range(len(body))]):
        events = steps(decoder, feeds)[0]
        usages = [json.loads(e) for e in events if json.loads(e)["type"] == "usage"]
        assert [msgspec.json.encode(u["usage"]["raw"]) for u in usages] == [
            msgspec.json.encode(msgspec.json.decode(u)) for u in (first, first, second)
        ]
        expected = {"input_tokens": 1, "output_tokens": 1}
        if second != _SAME_IN_PYTHON[2]:
            expected = {"input_tokens": 1}
        assert {k: v for k, v in usages[2]["usage"].items() if k != "raw"} == expected
    one = decoder()
    events = one.feed(body) + one.close()
    assert Encoder().encode_all(events) == body

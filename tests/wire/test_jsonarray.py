"""JSONArrayDecoder (Gemini's default streamGenerateContent framing) and
JSONArrayEncoder: elements as soon as complete, any formatting, strings with
structural characters, every structural error typed and located at its exact byte,
and hypothesis properties (chunking invariance, agreement with ``json.loads``)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from polystream.errors import (
    BufferLimitExceeded,
    LocalProtocolError,
    RemoteProtocolError,
    StreamTruncated,
)
from polystream.wire.jsonarray import JSONArrayDecoder, JSONArrayEncoder, JSONElement
from tests.helpers import assert_chunking_invariant, feed_all, split_at

BOM = b"\xef\xbb\xbf"


def values(elements: list[JSONElement]) -> list[Any]:
    return [msgspec.json.decode(e.data) for e in elements]


class Outcome:
    """A decoder whose errors become a final ``("error", type, offset, index)`` item
    and which ignores input after an error: the sequence it returns must be the same
    whatever the chunking."""

    def __init__(self, **limits: int) -> None:
        self.decoder = JSONArrayDecoder(**limits)
        self.failed = False

    def _run(self, call: Any) -> list[Any]:
        if self.failed:
            return []
        try:
            return [(e.data, e.offset, e.index) for e in call()]
        except RemoteProtocolError as exc:
            self.failed = True
            return [("error", type(exc).__name__, exc.byte_offset, exc.event_index)]

    def feed(self, data: bytes) -> list[Any]:
        return self._run(lambda: self.decoder.feed(data))

    def close(self) -> list[Any]:
        return self._run(self.decoder.close)


# -- valid arrays ---------------------------------------------------------------------------

GEMINI = (
    b'[{\r\n  "candidates": [\r\n    {\r\n      "content": {\r\n        "parts": [\r\n'
    b'          {\r\n            "text": "Hello"\r\n          }\r\n        ],\r\n'
    b'        "role": "model"\r\n      }\r\n    }\r\n  ],\r\n'
    b'  "modelVersion": "gemini-3.8-flash"\r\n}'
    b'\r\n,\r\n{\r\n  "candidates": [\r\n    {\r\n      "content": {\r\n        "parts": [\r\n'
    b'          {\r\n            "text": " world"\r\n          }\r\n        ],\r\n'
    b'        "role": "model"\r\n      },\r\n      "finishReason": "STOP"\r\n    }\r\n  ],\r\n'
    b'  "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2}\r\n}\r\n]'
)

VALID: list[tuple[str, bytes, list[Any]]] = [
    ("empty array", b"[]", []),
    ("empty array with whitespace", b" \r\n[ \t\r\n]\r\n ", []),
    ("one object", b'[{"a":1}]', [{"a": 1}]),
    ("gemini pretty-printed with crlf", GEMINI, json.loads(GEMINI)),
    ("compact", b'[{"a":1},{"b":2},{"c":3}]', [{"a": 1}, {"b": 2}, {"c": 3}]),
    ("newline comma lines", b'[{"a":1}\n,\n{"b":2}\n]', [{"a": 1}, {"b": 2}]),
    ("tabs and spaces", b'[\t{"a":1}\t ,\t {"b":2} ]', [{"a": 1}, {"b": 2}]),
    (
        "strings with brackets, braces, quotes and backslashes",
        b'[{"t": "}]\\"{[", "u": "\\\\"}, "a\\"b]", "\\\\", "{[", "\\\\\\""]',
        [{"t": '}]"{[', "u": "\\"}, 'a"b]', "\\", "{[", '\\"'],
    ),
    ("unicode escapes", b'["\\u005d\\u007d", "\\ud83d\\ude00"]', ["]}", "😀"]),
    ("raw utf-8", '[{"t": "é😀中"}]'.encode(), [{"t": "é😀中"}]),
    (
        "error object as an element",
        b'[{"candidates": []},\n{"error": {"code": 503, "message": "The model is overloaded.",'
        b' "status": "UNAVAILABLE"}}\n]',
        [
            {"candidates": []},
            {
                "error": {
                    "code": 503,
                    "message": "The model is overloaded.",
                    "status": "UNAVAILABLE",
                }
            },
        ],
    ),
    (
        "scalar elements",
        b'[1, -2.5e3, 0, true, false, null, "s", 1E+2, 0.5]',
        [1, -2500.0, 0, True, False, None, "s", 100.0, 0.5],
    ),
    ("scalar before the closing bracket", b"[1]", [1]),
    ("nested arrays", b"[[1,[2]],[],[[]]]", [[1, [2]], [], [[]]]),
    ("empty containers", b'[{}, [], ""]', [{}, [], ""]),
    ("bom before the array", BOM + b'[{"a":1}]', [{"a": 1}]),
    ("whitespace then bom", b"\r\n" + BOM + b"[1]", [1]),
]


@pytest.mark.parametrize(("data", "expected"), [v[1:] for v in VALID], ids=[v[0] for v in VALID])
def test_valid_arrays(data: bytes, expected: list[Any]) -> None:
    elements = assert_chunking_invariant(JSONArrayDecoder, data)
    assert values(elements) == expected
    assert [e.index for e in elements] == list(range(len(expected)))
    for element in elements:
        # Each element is the input's exact bytes, at its offset.
        assert data[element.offset : element.offset + len(element.data)] == element.data


def test_element_offsets() -> None:
    data = b'[ {"a":1} ,\r\n  "s" , 12 ]'
    elements = feed_all(JSONArrayDecoder, [data])
    assert elements == [
        JSONElement(b'{"a":1}', 2, 0),
        JSONElement(b'"s"', 15, 1),
        JSONElement(b"12", 21, 2),
    ]


def test_offsets_count_the_bom() -> None:
    assert feed_all(JSONArrayDecoder, [BOM + b"[1]"]) == [JSONElement(b"1", 4, 0)]
    assert feed_all(JSONArrayDecoder, [b"\xef", b"\xbb", b"\xbf[1]"]) == [JSONElement(b"1", 4, 0)]


# -- incremental delivery -------------------------------------------------------------------


# -- elements read by the caller (idle, skip) ------------------------------------------------


@pytest.mark.parametrize(
    ("fed", "idle"),
    [
        (b"", False),
        (b"  ", False),
        (b"[", True),
        (b' [ {"a": 1},', True),
        (b'[{"a": 1},\r\n', True),
        (b'[{"a": 1}', True),  # right after an element
        (b'[{"a": 1}\r\n', True),
        (b'[{"a"', False),  # an element under way
        (b"[1", False),  # a scalar under way
        (b"[1]", False),
        (b"[,", False),  # an error
    ],
)
def test_idle_only_where_an_element_may_begin(fed: bytes, idle: bool) -> None:
    decoder = JSONArrayDecoder()
    if fed == b"[,":  # a syntax error: the decoder is failed
        with pytest.raises(RemoteProtocolError):
            decoder.feed(fed)
    else:
        decoder.feed(fed)
    assert decoder.idle is idle
    # What a caller that takes elements itself needs, in one call, only while idle.
    expected = (decoder.elements_decoded, decoder.bytes_consumed, decoder.after_element)
    assert decoder.takeover() == (expected if idle else None)


def test_takeover_after_elements_and_skips() -> None:
    decoder = JSONArrayDecoder()
    decoder.feed(b'[{"a": 1}')
    assert decoder.takeover() == (1, 9, True)  # right after an element
    decoder.feed(b"\r\n,")
    assert decoder.takeover() == (1, 12, False)
    decoder.skip(len(b' {"b": 2},'), 1)
    assert decoder.takeover() == (2, 22, False)
    decoder.skip(len(b'{"c": 3}'), 1, comma=False)
    assert decoder.takeover() == (3, 30, True)
    decoder.feed(b"]")
    assert decoder.takeover() is None


def test_skipped_elements_count_as_if_fed() -> None:
    head = b'[{"a": 1},\r\n'
    middle = b'{"b": 2}\r\n,\r\n{"c": [3]}\r\n,\r\n'
    rest = b'{"d": 4}]'
    whole = feed_all(JSONArrayDecoder, [head + middle + rest])
    decoder = JSONArrayDecoder()
    assert decoder.feed(head) == whole[:1]
    decoder.skip(len(middle), 2)
    assert decoder.elements_decoded == 3
    assert decoder.bytes_consumed == len(head + middle)
    assert decoder.feed(rest) == whole[3:]
    assert whole[3] == JSONElement(b'{"d": 4}', len(head + middle), 3)
    decoder.close()


def test_after_skipped_elements_another_must_come() -> None:
    # Right after "[" an empty array may close; after skipped elements (each with
    # its comma), "]" is a trailing comma.
    decoder = JSONArrayDecoder()
    decoder.feed(b"[")
    decoder.skip(len(b'{"a": 1},'), 1)
    with pytest.raises(RemoteProtocolError, match="trailing comma") as caught:
        decoder.feed(b"]")
    assert (caught.value.event_index, caught.value.byte_offset) == (1, 10)
    nothing = JSONArrayDecoder()
    nothing.feed(b"[")
    nothing.skip(0, 0)
    assert nothing.feed(b"]") == []
    nothing.close()


@pytest.mark.parametrize("fed", [b"", b'[{"a"', b"[1", b"[1]"])
def test_skip_refused_unless_idle(fed: bytes) -> None:
    decoder = JSONArrayDecoder()
    decoder.feed(fed)
    with pytest.raises(LocalProtocolError, match="skip"):
        decoder.skip(9, 1)
    assert decoder.elements_decoded == (1 if fed == b"[1]" else 0)
    assert decoder.bytes_consumed == len(fed)


def test_skipped_elements_after_an_element_and_without_a_comma() -> None:
    # The decoder right after an element: what the caller reads begins with its
    # comma; it may end right after an element (comma=False), and then a comma or
    # "]" comes next.
    head = b'[{"a": 1}'
    middle = b'\r\n,\r\n{"b": 2}\r\n,\r\n{"c": 3}'
    rest = b'\r\n,\r\n{"d": 4}\r\n]'
    whole = feed_all(JSONArrayDecoder, [head + middle + rest])
    decoder = JSONArrayDecoder()
    decoder.feed(head)
    assert decoder.idle
    assert decoder.after_element
    decoder.skip(len(middle), 2, comma=False)
    assert decoder.after_element
    assert decoder.feed(rest) == whole[3:]
    assert whole[3].offset == len(head + middle) + 5
    decoder.close()
    ended = JSONArrayDecoder()
    ended.feed(head)
    ended.skip(len(middle), 2, comma=False)
    assert ended.feed(b"]") == []
    ended.close()
    # A comma alone: an element must come.
    comma = JSONArrayDecoder()
    comma.feed(head)
    comma.skip(len(b"\r\n,"), 0)
    assert not comma.after_element
    with pytest.raises(RemoteProtocolError, match="trailing comma"):
        comma.feed(b"]")


def test_limits_are_readable() -> None:
    decoder = JSONArrayDecoder(max_element_size=100, max_depth=7)
    assert (decoder.max_element_size, decoder.max_depth) == (100, 7)


def test_element_is_returned_by_the_feed_that_completes_it() -> None:
    decoder = JSONArrayDecoder()
    assert decoder.feed(b'[{"a":') == []
    assert decoder.feed(b"1") == []
    # The closing brace completes the element: returned now, before any comma.
    assert values(decoder.feed(b"}")) == [{"a": 1}]
    assert decoder.feed(b'\r\n,\r\n{"b": [') == []
    assert values(decoder.feed(b"2]}\r\n")) == [{"b": [2]}]
    assert values(decoder.feed(b',"str"')) == ["str"]
    # A scalar is complete only when the byte after it arrives.
    assert decoder.feed(b",12") == []
    assert values(decoder.feed(b"]")) == [12]
    assert decoder.elements_decoded == 4
    assert decoder.close() == []


def test_escape_split_across_chunks() -> None:
    decoder = JSONArrayDecoder()
    assert decoder.feed(b'[{"t": "a\\') == []
    # The quote right after the chunk boundary is escaped: the string goes on.
    assert decoder.feed(b'"}') == []
    assert values(decoder.feed(b'"}]')) == [{"t": 'a"}'}]


def test_double_backslash_split_across_chunks() -> None:
    decoder = JSONArrayDecoder()
    assert decoder.feed(b'["a\\') == []
    assert decoder.feed(b"\\") == []
    # The backslash was escaped, so this quote closes the string.
    assert values(decoder.feed(b'"')) == ["a\\"]


def test_feed_after_close_is_a_local_error() -> None:
    decoder = JSONArrayDecoder()
    decoder.feed(b"[]")
    assert decoder.close() == []
    with pytest.raises(LocalProtocolError):
        decoder.feed(b"[]")
    assert decoder.close() == []


@pytest.mark.parametrize("kwargs", [{"max_element_size": 0}, {"max_depth": 0}])
def test_limits_must_be_positive(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        JSONArrayDecoder(**kwargs)


# -- errors: typed, located at the exact byte, identical whatever the chunking ---------------

ERRORS: list[tuple[str, bytes, list[Any], str, int, int]] = [
    # (name, input, elements before the error, error type, byte offset, event index)
    ("empty input", b"", [], "StreamTruncated", 0, 0),
    ("whitespace only", b" \r\n", [], "StreamTruncated", 3, 0),
    ("truncated array", b'[{"a":1}', [{"a": 1}], "StreamTruncated", 8, 1),
    ("truncated after a comma", b"[1,", [1], "StreamTruncated", 3, 1),
    ("truncated after the bracket", b"[", [], "StreamTruncated", 1, 0),
    ("element cut mid-way", b'[{"a":1}, {"b":', [{"a": 1}], "StreamTruncated", 10, 1),
    ("string cut mid-way", b'[{"a":1},\n"ab', [{"a": 1}], "StreamTruncated", 10, 1),
    ("scalar cut at the end", b"[1, 23", [1], "StreamTruncated", 4, 1),
    ("data after ]", b'[{"a":1}] x', [{"a": 1}], "RemoteProtocolError", 10, 1),
    ("second array after ]", b"[][]", [], "RemoteProtocolError", 2, 0),
    ("missing comma", b'[{"a":1} {"b":2}]', [{"a": 1}], "RemoteProtocolError", 9, 1),
    ("missing comma between scalars", b"[1 2]", [1], "RemoteProtocolError", 3, 1),
    ("trailing comma", b'[{"a":1},\n]', [{"a": 1}], "RemoteProtocolError", 10, 1),
    ("leading comma", b"[,1]", [], "RemoteProtocolError", 1, 0),
    ("double comma", b"[1,,2]", [1], "RemoteProtocolError", 3, 1),
    ("garbage before [", b"  x[1]", [], "RemoteProtocolError", 2, 0),
    ("an object instead of an array", b'{"a":1}', [], "RemoteProtocolError", 0, 0),
    ("a partial bom alone", b"\xef\xbb", [], "RemoteProtocolError", 0, 0),
    ("a bom after the bracket", b"[" + BOM + b"1]", [], "RemoteProtocolError", 1, 0),
    ("mismatched bracket", b'[{"a":[1}]]', [], "RemoteProtocolError", 8, 0),
    ("mismatched brace", b"[1, [}]", [1], "RemoteProtocolError", 5, 1),
    ("stray closing brace", b"[}]", [], "RemoteProtocolError", 1, 0),
    ("invalid literal", b"[1, nope]", [1], "RemoteProtocolError", 4, 1),
    ("invalid number", b"[01]", [], "RemoteProtocolError", 1, 0),
    ("scalar glued to an object", b"[1{}]", [1], "RemoteProtocolError", 2, 1),
]


@pytest.mark.parametrize(
    ("data", "before", "kind", "offset", "index"),
    [e[1:] for e in ERRORS],
    ids=[e[0] for e in ERRORS],
)
def test_errors(data: bytes, before: list[Any], kind: str, offset: int, index: int) -> None:
    outcome = assert_chunking_invariant(Outcome, data)
    *elements, error = outcome
    assert [msgspec.json.decode(e[0]) for e in elements] == before
    assert error == ("error", kind, offset, index)


def test_error_types() -> None:
    decoder = JSONArrayDecoder()
    with pytest.raises(RemoteProtocolError) as info:
        decoder.feed(b"[,,")
    assert type(info.value) is RemoteProtocolError
    assert info.value.dialect == "json_array"
    assert "byte 1" in str(info.value)
    # The decoder stays failed.
    with pytest.raises(RemoteProtocolError):
        decoder.feed(b"2]")
    with pytest.raises(RemoteProtocolError):
        decoder.close()

    decoder = JSONArrayDecoder()
    decoder.feed(b"[1")
    with pytest.raises(StreamTruncated) as truncated:
        decoder.close()
    assert "byte 1" in str(truncated.value)


def test_elements_before_an_error_in_the_same_chunk_are_returned() -> None:
    decoder = JSONArrayDecoder()
    assert values(decoder.feed(b'[{"a":1}, 2, x')) == [{"a": 1}, 2]
    with pytest.raises(RemoteProtocolError) as info:
        decoder.feed(b"]")
    assert (info.value.byte_offset, info.value.event_index) == (13, 2)
    with pytest.raises(RemoteProtocolError):
        decoder.close()


def test_depth_limit_is_configurable_and_exact() -> None:
    ok = feed_all(lambda: JSONArrayDecoder(max_depth=3), [b"[[[[1]]]]"])
    assert values(ok) == [[[[1]]]]
    decoder = JSONArrayDecoder(max_depth=3)
    with pytest.raises(BufferLimitExceeded) as info:
        decoder.feed(b'[{"a":[{"b":[1]}]}]')
    assert (info.value.byte_offset, info.value.event_index) == (12, 0)


def test_element_limit_is_configurable_and_exact() -> None:
    element = b'{"a":"xyz"}'  # 11 bytes
    assert values(feed_all(lambda: JSONArrayDecoder(max_element_size=11), [b"[" + element + b"]"]))
    decoder = JSONArrayDecoder(max_element_size=10)
    decoder.feed(b"[1,")
    with pytest.raises(BufferLimitExceeded) as info:
        decoder.feed(element)
    assert (info.value.byte_offset, info.value.event_index) == (3, 1)


# -- encoder ------------------------------------------------------------------------------


def test_encoder_default_wire_form() -> None:
    encoder = JSONArrayEncoder()
    assert encoder.element(b'{"a":1}') == b'[{"a":1}'
    assert encoder.element(b'{"b":2}') == b'\r\n,\r\n{"b":2}'
    assert encoder.close() == b"\r\n]"
    assert encoder.close() == b""
    with pytest.raises(LocalProtocolError):
        encoder.element(b"1")


def test_encoder_element_of_pieces() -> None:
    """``element_of`` is ``element`` of the joined pieces, state and errors included."""
    encoder = JSONArrayEncoder()
    assert encoder.element_of((b'{"a":', b"1", b"}")) == b'[{"a":1}'
    assert encoder.element(b"2") == b"\r\n,\r\n2"
    assert encoder.element_of((b"3",)) == b"\r\n,\r\n3"
    assert encoder.close() == b"\r\n]"
    with pytest.raises(LocalProtocolError):
        encoder.element_of((b"4",))


def test_encoder_empty_array() -> None:
    encoder = JSONArrayEncoder()
    wire = encoder.close()
    assert wire == b"[]"
    assert feed_all(JSONArrayDecoder, [wire]) == []


def test_encoder_custom_separators() -> None:
    encoder = JSONArrayEncoder(separator=b",", prefix=b"[\n", suffix=b"\n]\n")
    wire = encoder.element(b"1") + encoder.element(b'"x"') + encoder.close()
    assert wire == b'[\n1,"x"\n]\n'
    assert values(feed_all(JSONArrayDecoder, [wire])) == [1, "x"]


# -- properties -----------------------------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(
        alphabet=st.one_of(
            st.sampled_from(list('[]{}",:\\/ \n\té😀\x00\x1f')),
            st.characters(exclude_categories=["Cs"]),
        ),
        max_size=10,
    ),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
_WS = st.text(alphabet=" \t\r\n", max_size=4)


@st.composite
def json_arrays(draw: st.DrawFn) -> tuple[bytes, list[Any]]:
    items = draw(st.lists(_JSON, max_size=5))
    parts = [draw(_WS), "["]
    for i, item in enumerate(items):
        if i:
            parts += [draw(_WS), ",", draw(_WS)]
        else:
            parts.append(draw(_WS))
        indent = draw(st.sampled_from([None, 0, 2]))
        separators = draw(st.sampled_from([None, (",", ":"), (" ,\r\n", " :\t")]))
        ascii_only = draw(st.booleans())
        parts.append(
            json.dumps(item, indent=indent, separators=separators, ensure_ascii=ascii_only)
        )
    parts += [draw(_WS), "]", draw(_WS)]
    return "".join(parts).encode(), items


@given(array=json_arrays(), cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_same_elements_whatever_the_chunking(
    array: tuple[bytes, list[Any]], cuts: list[int]
) -> None:
    data, items = array
    whole = feed_all(JSONArrayDecoder, [data])
    # The elements are the array's values, as json.loads reads the whole input.
    assert json.loads(data) == items
    assert values(whole) == items
    assert feed_all(JSONArrayDecoder, [data[i : i + 1] for i in range(len(data))]) == whole
    assert feed_all(JSONArrayDecoder, split_at(data, cuts)) == whole


@given(array=json_arrays())
def test_encoder_round_trip(array: tuple[bytes, list[Any]]) -> None:
    _, items = array
    encoder = JSONArrayEncoder()
    wire = b"".join(encoder.element(json.dumps(item).encode()) for item in items)
    wire += encoder.close()
    assert values(feed_all(JSONArrayDecoder, [wire])) == items


@given(array=json_arrays(), cut=st.integers(min_value=0))
def test_a_cut_array_is_truncated_never_complete(array: tuple[bytes, list[Any]], cut: int) -> None:
    data, items = array
    end = data.rindex(b"]")
    prefix = data[: cut % (end + 1)]  # stops before the closing bracket
    outcome = feed_all(Outcome, [prefix])
    assert outcome[-1][:2] == ("error", "StreamTruncated")
    got = [msgspec.json.decode(e[0]) for e in outcome[:-1]]
    assert got == items[: len(got)]


# -- a parser handed to the decoder (``decode=``) ----------------------------------------------


class ParsedOutcome(Outcome):
    """:class:`Outcome` of a decoder that parses elements with msgspec (``decode=``)."""

    def __init__(self, **limits: int) -> None:
        super().__init__(**limits)
        self.decoder = JSONArrayDecoder(decode=msgspec.json.decode, **limits)


def _parsed_values_are_right(elements: list[JSONElement]) -> None:
    for element in elements:
        if element.value is not msgspec.UNSET:
            assert element.value == msgspec.json.decode(element.data)


@st.composite
def gemini_layout_arrays(draw: st.DrawFn) -> bytes:
    """Arrays in Google's layout (pretty-printed elements, a line holding only a comma
    between them), sometimes with a defect: the fast path's home ground."""
    items = draw(st.lists(st.dictionaries(st.text(max_size=4), _JSON, max_size=3), max_size=4))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    body = "[" + f"{newline},{newline}".join(
        json.dumps(item, indent=2, ensure_ascii=False).replace("\n", newline) for item in items
    )
    body += newline + "]"
    data = body.encode()
    defect = draw(st.sampled_from(["none", "cut", "garbage", "insert"]))
    if defect == "cut":
        data = data[: draw(st.integers(min_value=0, max_value=len(data)))]
    elif defect == "garbage":
        data += draw(st.sampled_from([b" x", b"\n,", b"\n]", b"[]"]))
    elif defect == "insert":
        at = draw(st.integers(min_value=0, max_value=len(data)))
        piece = draw(st.sampled_from([b"\n,", b"\n]", b"}", b"{", b'"', b"\\", b"\xff", b"1e400"]))
        data = data[:at] + piece + data[at:]
    return data


@given(array=json_arrays(), cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_a_parser_changes_no_element(array: tuple[bytes, list[Any]], cuts: list[int]) -> None:
    data, _ = array
    for chunks in ([data], split_at(data, cuts)):
        plain = feed_all(JSONArrayDecoder, chunks)
        parsed = feed_all(lambda: JSONArrayDecoder(decode=msgspec.json.decode), chunks)
        assert [(e.data, e.offset, e.index) for e in parsed] == [
            (e.data, e.offset, e.index) for e in plain
        ]
        assert all(e.value is msgspec.UNSET for e in plain)
        _parsed_values_are_right(parsed)


@given(data=gemini_layout_arrays(), cuts=st.lists(st.integers(min_value=0), max_size=8))
def test_a_parser_changes_no_element_nor_error(data: bytes, cuts: list[int]) -> None:
    for chunks in ([data], split_at(data, cuts), [data[i : i + 1] for i in range(len(data))]):
        assert feed_all(ParsedOutcome, chunks) == feed_all(Outcome, chunks)
        assert feed_all(Outcome, chunks) == feed_all(Outcome, [data])


@pytest.mark.parametrize(
    "element",
    [b'{"a": "\xff"}', b'{"a": 1e400}', b'{"a": "\xed\xa0\x80"}'],
    ids=["invalid utf-8", "number out of range", "encoded surrogate"],
)
def test_an_element_the_parser_rejects_is_still_returned(element: bytes) -> None:
    # Validation lets these through and msgspec's parser does not: the scanner then
    # returns the element as it would without a parser (the caller's parse fails).
    data = b'[{"b": 1}\r\n,\r\n' + element + b'\r\n,\r\n{"c": 2}\r\n]'
    plain = feed_all(JSONArrayDecoder, [data])
    parsed = feed_all(lambda: JSONArrayDecoder(decode=msgspec.json.decode), [data])
    assert [(e.data, e.offset, e.index) for e in parsed] == [
        (e.data, e.offset, e.index) for e in plain
    ]
    assert [e.value for e in parsed] == [{"b": 1}, msgspec.UNSET, {"c": 2}]


def test_consecutive_elements_then_the_end() -> None:
    data = b'[{"a": 1}\r\n,\r\n{"b": [2]}\n,\n["c"]\r\n]  \r\n'
    parsed = feed_all(lambda: JSONArrayDecoder(decode=msgspec.json.decode), [data])
    assert [e.value for e in parsed] == [{"a": 1}, {"b": [2]}, ["c"]]
    assert [e.offset for e in parsed] == [1, 14, 27]
    outcome = feed_all(ParsedOutcome, [data + b"x"])
    assert outcome[-1] == ("error", "RemoteProtocolError", len(data), 3)
    outcome = feed_all(ParsedOutcome, [b'[{"a": 1}\n,\n]'])
    assert outcome == [(b'{"a": 1}', 1, 0), ("error", "RemoteProtocolError", 12, 1)]
    outcome = feed_all(ParsedOutcome, [b'[{"a": 1}\n,\n"s"\n,\n{"b": 2}\n]'])
    assert [item[0] for item in outcome] == [b'{"a": 1}', b'"s"', b'{"b": 2}']

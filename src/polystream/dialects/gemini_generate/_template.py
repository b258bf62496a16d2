"""The template of the usual chunk's JSON text (Google's layout, cut around its text
and its ``usageMetadata``), by which a chunk is recognised and read without parsing it
whole (see :mod:`.decode`, "Fast paths")."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

import msgspec

from ._state import ENCODE, Candidate
from .wire import dumps_pretty, dumps_sse

# The keys of the usual chunk, in Google's order (see ``_usual_chunk``).
USUAL_KEYS: Final = ("candidates", "usageMetadata", "modelVersion", "responseId")
# The two gaps of a chunk template (see ``Template``) and what fills them.
_TEXT_GAP: Final = "\x00"
_USAGE_GAP: Final = "\x01"
TEXT_DECODER: Final = msgspec.json.Decoder(str)
OBJECT_DECODER: Final = msgspec.json.Decoder(dict[str, Any])
DIGITS: Final = b"0123456789"
# Every digit made a 1: a usage text's *shape* (see usage_shape).
ONES: Final = bytes.maketrans(DIGITS, b"1" * 10)
# The usage text _take compares a chunk's with before it has read one: a NUL byte, which
# no JSON text holds (empty bytes would match a chunk whose usageMetadata has no value).
_NO_USAGE: Final = b"\x00"


class Template:
    """The JSON text of the usual chunk (see ``_usual_chunk``) with one text part, cut
    around its two values that change from chunk to chunk: the part's text (a JSON
    string) and ``usageMetadata`` (a JSON object).

    A chunk whose text is ``pre + <string> + mid[1:] + <object> + suf`` (``mid``
    begins with the closing quote of the string) is, token for token, the chunk the
    template was cut from with those two values replaced: the three pieces are the
    output of a JSON encoder around two placeholder strings, so they end and begin at
    token boundaries, and a JSON text parses one way only. Its events are found
    without parsing the whole chunk (:func:`match_template`); any other text does not match.
    """

    __slots__ = (
        "block",
        "block_meta",
        "block_tail",
        "block_usage",
        "block_usage_size",
        "extra",
        "index",
        "meta",
        "mid",
        "mid_size",
        "model",
        "ones",
        "pre",
        "pre_size",
        "rid",
        "shape",
        "state",
        "suf",
        "suf_size",
        "usage",
    )

    def __init__(self, pre: Any, mid: Any, suf: Any, index: int, model: str, rid: str) -> None:
        self.pre = pre  # str for SSE event data, bytes for JSON-array elements
        self.mid = mid
        self.suf = suf
        self.pre_size = len(pre)
        self.mid_size = len(mid)
        self.suf_size = len(suf)
        self.index = index  # the candidate index, modelVersion and responseId it holds
        self.model = model
        self.rid = rid
        # The usageMetadata text last matched and its value: Gemini often repeats it
        # byte for byte, and the same text parses to the same value.
        self.usage: Any = None
        self.meta: Any = None
        # The candidate's block state, once looked up (a decoder never replaces it).
        self.state: Candidate | None = None
        # The UsageUpdate extra last found to be that of a chunk fitting the template
        # (see _matched).
        self.extra: dict[str, Any] | None = None
        # For _take, which reads whole chunks in the framing's bytes: the pieces in
        # those bytes (None when the template's layout cannot be read that way); suf
        # and what ended the last chunk, with its size; block_usage, its size and
        # block_meta are the usage cache of that way, in bytes.
        self.block: Layout | None = None
        self.block_tail: tuple[bytes, int] = (b"", 0)
        self.block_usage = _NO_USAGE
        self.block_usage_size = len(_NO_USAGE)
        self.block_meta: Any = None
        # (coalesced) The last usage text's digits made 1s, and its shape, or None (see
        # usage_shape).
        self.ones = _NO_USAGE
        self.shape: bytes | None = None


class Layout(NamedTuple):
    """A template's pieces in the framing's bytes, with their sizes (``_take`` unpacks
    them in one step)."""

    head: bytes  # what begins a chunk: "data: " + pre for SSE, pre for an array element
    head_size: int
    mid: bytes
    mid_size: int
    suf: bytes
    suf_size: int
    ends: tuple[tuple[bytes, int], ...]  # what may end a chunk (blank or comma line), sized

    @classmethod
    def of(cls, head: bytes, mid: bytes, suf: bytes, ends: tuple[bytes, ...]) -> Layout:
        sized = tuple((end, len(end)) for end in ends)
        return cls(head, len(head), mid, len(mid), suf, len(suf), sized)


def templates_for(index: int, model: str, rid: str) -> list[tuple[bytes, bytes, bytes]]:
    """(pre, mid, suf) of the usual chunk in Google's layouts: the ``?alt=sse`` form
    and the JSON-array element form (pretty-printed, LF or CRLF line ends)."""
    skeleton = {
        "candidates": [
            {"content": {"parts": [{"text": _TEXT_GAP}], "role": "model"}, "index": index}
        ],
        "usageMetadata": _USAGE_GAP,
        "modelVersion": model,
        "responseId": rid,
    }
    text_gap = ENCODE.encode(_TEXT_GAP)
    usage_gap = ENCODE.encode(_USAGE_GAP)
    pretty = dumps_pretty(skeleton)
    out = []
    for layout in (dumps_sse(skeleton), pretty, pretty.replace(b"\n", b"\r\n")):
        if layout.count(text_gap) != 1 or layout.count(usage_gap) != 1:
            continue  # a placeholder also inside modelVersion or responseId
        pre, rest = layout.split(text_gap)
        between, suf = rest.split(usage_gap)
        out.append((pre, b'"' + between, suf))
    return out


def after_blank_line(data: bytes, start: int) -> int:
    """Where the first blank line at or after ``data[start]`` ends (after an LF that
    ends a line, an LF or a CRLF), else -1."""
    find = data.find
    lf = find(b"\n", start)
    while lf >= 0:
        after = data[lf + 1 : lf + 3]
        if after[:1] == b"\n":
            return lf + 2
        if after == b"\r\n":
            return lf + 3
        lf = find(b"\n", lf + 1)
    return -1


def after_comma_line(data: bytes, start: int) -> int:
    """Where the first comma line at or after ``data[start]`` ends (``\\n,`` and the
    line break after it, in Google's JSON-array layout), else -1."""
    at = data.find(b"\n,", start)
    if at < 0:
        return -1
    at += 2
    after = data[at : at + 2]
    if after == b"\r\n":
        return at + 2
    return at + 1 if after[:1] == b"\n" else at


def same_meta(meta: Any, last: Any) -> bool:
    """Whether ``meta`` is the ``usageMetadata`` ``last`` exactly: Python's equality
    alone would take ``1.0`` or ``true`` for ``1``, and ignores key order (the usage
    reused would not be the one sent)."""
    if meta is last:
        return True
    return bool(meta == last) and ENCODE.encode(meta) == ENCODE.encode(last)


def learnable(chunk: Any) -> bool:
    """Whether a chunk has the form :meth:`GeminiGenerateDecoder._learn` takes a
    template from (the usual chunk's, see ``_usual_chunk``), checked without state."""
    if type(chunk) is not dict or tuple(chunk) != USUAL_KEYS:
        return False
    cands = chunk["candidates"]
    if type(cands) is not list or len(cands) != 1:
        return False
    cand = cands[0]
    if type(cand) is not dict or tuple(cand) != ("content", "index"):
        return False
    content = cand["content"]
    return (
        type(cand["index"]) is int
        and type(content) is dict
        and tuple(content) == ("parts", "role")
        and content["role"] == "model"
        and type(content["parts"]) is list
        and type(chunk["usageMetadata"]) is dict
        and type(chunk["modelVersion"]) is str
        and type(chunk["responseId"]) is str
    )


def match_template(template: Template, data: Any) -> tuple[str, dict[str, Any]] | None:
    """The text and ``usageMetadata`` of a chunk whose JSON text ``data`` (of the
    template's type) fits the template, else None (see :class:`Template`)."""
    pre = template.pre
    suf = template.suf
    if not data.startswith(pre) or not data.endswith(suf):
        return None
    start = template.pre_size
    mid = template.mid
    close = data.find(mid, start + 1)
    if close < 0:
        return None
    begin = close + template.mid_size
    end = len(data) - template.suf_size
    if begin >= end:
        return None
    # The first occurrence of mid ends the string, unless its quote is escaped: then
    # this slice is no complete string and does not parse.
    return _parse_pieces(template, data[start : close + 1], data[begin:end])


def _parse_pieces(template: Template, text: Any, usage: Any) -> tuple[str, dict[str, Any]] | None:
    """Parse the two values a chunk fitting ``template`` holds: the JSON string
    ``text`` and the ``usageMetadata`` object text ``usage`` (the last one parsed is
    kept on the template: a repeated usage text is not parsed again). None when
    either does not parse."""
    try:
        value = TEXT_DECODER.decode(text)
        if usage == template.usage:
            meta = template.meta
        else:
            meta = OBJECT_DECODER.decode(usage)
            template.usage = usage
            template.meta = meta
    except msgspec.DecodeError:
        return None
    return value, meta


class _Skip(msgspec.Struct):
    """No field: decoding into it checks a JSON object's syntax and builds nothing."""


CHECK_OBJECT: Final = msgspec.json.Decoder(_Skip)

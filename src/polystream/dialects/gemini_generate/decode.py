"""Gemini ``streamGenerateContent`` -> unified events, in both framings.

Framings (spec/streaming.md §1): ``?alt=sse`` sends ``data: <GenerateContentResponse>``
events without event names, separated by CRLF (``data: {...}\\r\\n\\r\\n``); the default
framing is one pretty-printed JSON array whose elements arrive over time. The base
class picks the framing from the first byte (``[`` means the array).

Each chunk is a *partial* ``GenerateContentResponse``; its unified events come in this
order:

1. ``StreamStart`` (first chunk only: ``responseId`` and ``modelVersion``);
2. per candidate, the events of its ``parts`` (see "Blocks" below), then its
   ``citationMetadata`` (:class:`Citation` per source), ``groundingMetadata``
   (``Metadata("grounding", merge=True)``: Gemini sends only the *new* grounding
   chunks), ``urlContextMetadata`` (``url_context``), ``safetyRatings``
   (``safety_ratings``), and its ``finishReason`` / ``finishMessage``
   (``Metadata("finish")``, which also closes the candidate's open blocks);
3. ``promptFeedback`` (``Metadata("prompt_feedback")``) and an ``error`` object
   (:class:`ErrorEvent`);
4. exactly one :class:`UsageUpdate` that ends the chunk: its usage is the chunk's
   ``usageMetadata`` (empty when the chunk has none) and its ``extra`` holds the
   chunk fields no event models (``chunk``: ``modelVersion``, ``responseId``, ...;
   ``candidates``: per candidate the fields left over, e.g. ``index``; ``order`` when
   the keys were not in Google's usual order). The encoder writes one chunk per
   chunk-ending ``UsageUpdate``, which is how a same-dialect round trip reproduces
   every chunk exactly.

Blocks (unified block index per part run; ``BlockStart.candidate`` is the candidate)
-----------------------------------------------------------------------------------
* Text continuity: consecutive ``text`` parts of the same kind (plain text, or
  ``thought: true`` reasoning) continue ONE block, across chunks. A change of kind,
  any other part, or the candidate's ``finishReason`` ends it.
* Signatures: a ``thoughtSignature`` on a part becomes a :class:`SignatureDelta` on
  that part's block, byte for byte, and ends the block (a block holds at most one
  signature, in final position, as Gemini's non-streaming responses place it; text
  after it starts a new block). An *empty-text part that carries only a signature*
  (Gemini 3's final part) attaches to the preceding block of the same candidate when
  that block is text or reasoning and has no signature yet (a part flagged
  ``thought: true`` only to a reasoning block); its ``extra["part"]``
  records the part (``{"text": ""}``) so the encoder writes it back as its own part.
  Otherwise it becomes its own empty text block with the signature. Parallel
  function calls where only the first is signed keep that signature on the first.
  A signature behind polystream's base64-safe carrier marker (another dialect's state,
  see :mod:`polystream.dialects._carrier`) is given without the marker and with
  ``extra["carrier"]`` = the origin it records (see :class:`SignatureDelta`).
* ``functionCall`` complete in one part: ``BlockStart(tool_call, id, name)``,
  :class:`ToolInputDelta` with the compact JSON of ``args``, the signature, ``BlockEnd``.
* Streamed ``functionCall`` (``partialArgs`` / ``willContinue``, ended by a part whose
  ``willContinue`` is not true, usually ``{"functionCall": {}}``): one block; each part
  is a ``ToolInputDelta`` whose ``extra["functionCall"]`` is the part's object as
  sent. The arguments are assembled by JSON path (string values with
  ``willContinue`` concatenate) and their JSON text is the delta of the ending part,
  so the deltas of the block always concatenate to the complete arguments. A call
  still expecting fragments when its candidate finishes was cut: its block never ends.
* ``executableCode`` -> ``code`` block (the code as one TextDelta);
  ``codeExecutionResult`` -> ``code_result`` block with the object as ``value``;
  ``inlineData`` -> one ``image`` / ``audio`` block per part (:class:`DataDelta`; base64
  fragments with padding do not concatenate as text); ``toolCall`` of a built-in tool ->
  ``server_tool_call`` (``id``, ``name`` = ``toolType``, ``value`` = ``args``),
  ``toolResponse`` -> ``server_tool_result`` with the object as ``value``;
  ``functionResponse``, ``fileData`` and unknown part kinds -> an ``other`` block
  whose ``value`` is the part (unknown kinds are a protocol error in strict mode only).

End of stream
-------------
Gemini has no terminal event: the stream ends by closing. At close the Finish is
``failed`` after an error object (error elements, or bare JSON error text after SSE
events) or a ``promptFeedback.blockReason``; otherwise, when a candidate sent a
``finishReason``, its mapped status (:mod:`.finish_reason`); otherwise ``truncated``.
A framing cut (an unclosed array, an event cut mid-way) is ``truncated`` too, and
raises :class:`~polystream.errors.StreamTruncated` in strict mode.

Fast paths
----------
Nearly every chunk of a text stream has one shape: one candidate with text parts, then
``usageMetadata``, ``modelVersion`` and ``responseId`` as in the chunk before. Such a
chunk is handled in one pass (``_usual_chunk``); once one has been seen, a template of
its JSON text in Google's layout (``_Template``) lets later ones be recognised without
parsing them whole: only the text and ``usageMetadata`` are parsed. Where the framing
is idle, the decoder reads such chunks itself, SSE blocks and JSON-array elements
alike, and tells the framing what it read (``_take``); its ``usageMetadata`` is first
tried at the length of the last one. Other JSON-array elements are parsed once, by the
framing (``decode=``). A ``usageMetadata`` text equal to the last one matched is not
parsed again (the same object, so its usage is not converted again either); the usual
``usageMetadata`` (integer counts, ``promptTokensDetails``, nothing else) is converted
without the general pass (:func:`.usage.convert`). In the SSE framing the dispatch
handles a chunk that fits the template itself (``_dispatch_sse``). Each fast path emits
exactly the events of the general path (``_chunk_fields``) or leaves the chunk to it.

Per usual chunk (5,000-chunk benchmark streams, CPU ns, noisy): SSE framing ~950,
template checks and slices ~500, the text and ``usageMetadata`` parses ~200 + ~600 (the
latter ~650 pretty-printed), usage conversion with its :class:`Usage` ~600, the two
events ~200, bookkeeping ~300, the accumulator ~350 (its usage merge ~200). The
``usageMetadata`` object must be rebuilt as a dict (it is the usage's ``raw``) and
converted on every chunk whose counts changed, which is every chunk of a stream.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any, Final, NamedTuple, get_args

import msgspec

from polystream.dialects._base import Coalesce, FramedDecoder, Framing, UsageRun, UsageTexts
from polystream.dialects._carrier import unwrap_base64
from polystream.dialects._detect import BLANK
from polystream.errors import BufferLimitExceeded, RemoteProtocolError, StreamTruncated
from polystream.events import (
    RETRYABLE_KINDS,
    BlockEnd,
    BlockKind,
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
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire._pieces import PIECES, join_recent
from polystream.wire.jsonarray import JSONArrayDecoder, JSONElement
from polystream.wire.jsondepth import too_deep
from polystream.wire.sse import ServerSentEvent, SSEComment

from .finish_reason import FINISH_REASONS, map_finish_reason
from .status import error_info
from .usage import convert as convert_usage
from .wire import (
    CANDIDATE_RANK,
    CHUNK_DECODER,
    CHUNK_RANK,
    EXECUTABLE_CODE_RANK,
    FUNCTION_CALL_RANK,
    INLINE_DATA_RANK,
    PART_RANK,
    TOOL_CALL_RANK,
    GoogleError,
    dumps_pretty,
    dumps_sse,
    order_if_needed,
    usage_shape,
)

__all__ = ["GeminiGenerateDecoder"]

DIALECT: Final = "gemini_generate"

# Keys that say what a part is (exactly one per part, per the API reference).
_DATA_KEYS: Final = frozenset(
    {
        "text",
        "inlineData",
        "functionCall",
        "functionResponse",
        "fileData",
        "executableCode",
        "codeExecutionResult",
        "toolCall",
        "toolResponse",
    }
)
# Part kinds the API documents but the unified model has no block kind for.
_KNOWN_OTHER: Final = frozenset({"functionResponse", "fileData"})
_ENCODE: Final = msgspec.json.Encoder()
# JSONPath segments of partialArgs: .name, ['name'] / ["name"], [0] (RFC 9535 subset).
_PATH_SEGMENT: Final = re.compile(
    r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]"
)
_EMPTY_USAGE: Final = Usage()
_MISSING: Final[Any] = object()
# Key tuples seen at the top of chunks -> their recorded order (None: canonical). Real
# streams use a handful of key sets; the cache stops growing at a fixed size.
_ORDER_CACHE: dict[tuple[str, ...], list[str] | None] = {}
_ORDER_CACHE_SIZE: Final = 256
# The keys of the usual chunk, in Google's order (see ``_usual_chunk``).
_USUAL_KEYS: Final = ("candidates", "usageMetadata", "modelVersion", "responseId")
# The two gaps of a chunk template (see ``_Template``) and what fills them.
_TEXT_GAP: Final = "\x00"
_USAGE_GAP: Final = "\x01"
_TEXT_DECODER: Final = msgspec.json.Decoder(str)
_OBJECT_DECODER: Final = msgspec.json.Decoder(dict[str, Any])
# Failed attempts to find a template before a decoder stops trying.
_TEMPLATE_TRIES: Final = 4
# How far after the text _take looks for the end of usageMetadata (Google's is a few
# hundred bytes): the work per chunk stays bounded whatever the input.
_USAGE_WINDOW: Final = 4096
# What may follow an SSE block's data line while the parser would not dispatch the
# block yet (no blank line: "\r\n\r" is one, a CR ends a line; see
# GeminiGenerateDecoder._holds).
_OPEN_BLOCK_ENDS: Final = (b"", b"\r", b"\r\n", b"\n")
# The most a decoder keeps for the next feed (see GeminiGenerateDecoder._holds). Each
# feed that keeps the beginning of a chunk copies it once more, so the bound keeps the
# copying linear in a chunk's size; a usual chunk is a few hundred bytes, and a longer
# beginning goes to the framing's parser, as any chunk does that does not fit.
_HOLD_LIMIT: Final = 16 * 1024
# The largest feed that the chunk kept from the feed before is joined to whole (one
# pass over both: copying up to this many bytes costs less than a second pass of
# _take); the chunk is joined to its own end only, after a larger one.
_JOIN_LIMIT: Final = 16 * 1024
_DIGITS: Final = b"0123456789"
# Every digit made a 1: a usage text's *shape* (see usage_shape).
_ONES: Final = bytes.maketrans(_DIGITS, b"1" * 10)
# The usage text _take compares a chunk's with before it has read one: a NUL byte, which
# no JSON text holds (empty bytes would match a chunk whose usageMetadata has no value).
_NO_USAGE: Final = b"\x00"
# How much of a large feed goes to the framing while no template is known.
_FIRST_LOOK: Final = 2048
# First bytes of the SSE lines Gemini sends (data:, event:, id:, retry:, comments, blank).
_SSE_LINE_STARTS: Final = frozenset(b"deir:\r\n")
# A line start (after LF) whose first byte is none of those.
_BARE_LINE: Final = re.compile(rb"\n[^deir:\r\n]")


class _StreamedCall:
    """A function call streamed with ``partialArgs``: its block and assembled args."""

    __slots__ = ("continuing", "index", "root", "run", "run_at")

    def __init__(self, index: int) -> None:
        self.index = index
        self.root: Any = None  # the arguments assembled so far
        self.continuing: str | None = None  # the path whose string value continues
        # The pieces of the string that continues, joined into root only when the run
        # ends (or json() is asked): joined at each fragment, a long string streamed
        # in many fragments would cost time quadratic in their number.
        self.run: list[str] | None = None
        self.run_at: list[str | int] = []  # its path's segments

    def fold(self, call: dict[str, Any]) -> bool:
        """Fold one ``functionCall`` fragment in; False if a path was not understood."""
        ok = True
        args = call.get("args")
        if isinstance(args, dict):
            self._end_run()
            # A copy: the fragment's own object is in its event's extra, and the later
            # fragments set their paths in what is assembled.
            args = _copied(args)
            self.root = args if not isinstance(self.root, dict) else {**self.root, **args}
        partial = call.get("partialArgs")
        if not isinstance(partial, list):
            return ok
        for arg in partial:
            if not isinstance(arg, dict) or not isinstance(arg.get("jsonPath"), str):
                ok = False
                continue
            path: str = arg["jsonPath"]
            value: Any
            if "stringValue" in arg:
                value = arg["stringValue"]
            elif "numberValue" in arg:
                value = arg["numberValue"]
            elif "boolValue" in arg:
                value = arg["boolValue"]
            elif "nullValue" in arg:
                value = None
            else:
                continue
            segments = _parse_path(path)
            if segments is None:
                ok = False
                continue
            more = arg.get("willContinue") is True
            if isinstance(value, str) and self.continuing == path:
                if self.run is not None:
                    self.run.append(value)
                    if not more:
                        self._end_run()
                        self.continuing = None
                    continue
                previous = self._get(segments)
                if isinstance(previous, str):
                    value = previous + value
            self._end_run()
            if not self._set(segments, value):
                ok = False
                continue
            self.continuing = path if more else None
            if more and isinstance(value, str):
                self.run = [value]
                self.run_at = segments
        return ok

    def _join_run(self) -> None:
        """Set the continuing string's pieces, joined, at its path (the run goes on)."""
        run = self.run
        if run is not None and len(run) > 1:
            joined = "".join(run)
            self._set(self.run_at, joined)
            self.run = [joined]

    def _end_run(self) -> None:
        self._join_run()
        self.run = None

    def _get(self, segments: list[str | int]) -> Any:
        node = self.root
        for seg in segments:
            if isinstance(seg, str) and isinstance(node, dict):
                node = node.get(seg)
            elif isinstance(seg, int) and isinstance(node, list) and seg < len(node):
                node = node[seg]
            else:
                return None
        return node

    def _set(self, segments: list[str | int], value: Any) -> bool:
        """Set the value at a path; False (nothing set) when the path does not fit
        what was assembled (a name into an array, an index into an object) or an
        array index runs :data:`_MAX_INDEX_AHEAD` or more past the end of its array
        (the elements between are null until set): what a fragment costs stays
        bounded, where an index of 10**12 would fill an array with that many nulls."""
        if not segments:
            self.root = value
            return True
        if not isinstance(self.root, dict | list):
            self.root = {} if isinstance(segments[0], str) else []
        node: Any = self.root
        for seg, nxt in zip(segments, [*segments[1:], None], strict=True):
            fresh: Any = None if nxt is None else ({} if isinstance(nxt, str) else [])
            if isinstance(seg, str):
                if not isinstance(node, dict):
                    return False
                if nxt is None:
                    node[seg] = value
                    return True
                if not isinstance(node.get(seg), dict | list):
                    node[seg] = fresh
                node = node[seg]
            else:
                if not isinstance(node, list):
                    return False
                if seg - len(node) >= _MAX_INDEX_AHEAD:
                    return False
                while len(node) <= seg:
                    node.append(None)
                if nxt is None:
                    node[seg] = value
                    return True
                if not isinstance(node[seg], dict | list):
                    node[seg] = fresh
                node = node[seg]
        return True

    def json(self) -> str:
        """The assembled arguments as compact JSON ("" when none arrived)."""
        self._join_run()
        return "" if self.root is None else _ENCODE.encode(self.root).decode()


# How far past the end of an array a streamed argument's index may reach (arrays are
# streamed about in order; the elements skipped are null until set).
_MAX_INDEX_AHEAD: Final = 64


def _copied(value: Any) -> Any:
    """A copy of a JSON value, its objects and arrays copied all the way down."""
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if type(value) is list:
        return [_copied(item) for item in value]
    return value


def _parse_path(path: str) -> list[str | int] | None:
    if not path.startswith("$"):
        return None
    out: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _PATH_SEGMENT.match(path, pos)
        if m is None:
            return None
        name, number, single, double = m.groups()
        if number is not None:
            out.append(int(number))
        else:
            out.append(name if name is not None else (single if single is not None else double))
        pos = m.end()
    return out


class _Template:
    """The JSON text of the usual chunk (see ``_usual_chunk``) with one text part, cut
    around its two values that change from chunk to chunk: the part's text (a JSON
    string) and ``usageMetadata`` (a JSON object).

    A chunk whose text is ``pre + <string> + mid[1:] + <object> + suf`` (``mid``
    begins with the closing quote of the string) is, token for token, the chunk the
    template was cut from with those two values replaced: the three pieces are the
    output of a JSON encoder around two placeholder strings, so they end and begin at
    token boundaries, and a JSON text parses one way only. Its events are found
    without parsing the whole chunk (:func:`_match`); any other text does not match.
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
        self.state: _Candidate | None = None
        # The UsageUpdate extra last found to be that of a chunk fitting the template
        # (see _matched).
        self.extra: dict[str, Any] | None = None
        # For _take, which reads whole chunks in the framing's bytes: the pieces in
        # those bytes (None when the template's layout cannot be read that way); suf
        # and what ended the last chunk, with its size; block_usage, its size and
        # block_meta are the usage cache of that way, in bytes.
        self.block: _Layout | None = None
        self.block_tail: tuple[bytes, int] = (b"", 0)
        self.block_usage = _NO_USAGE
        self.block_usage_size = len(_NO_USAGE)
        self.block_meta: Any = None
        # (coalesced) The last usage text's digits made 1s, and its shape, or None (see
        # usage_shape).
        self.ones = _NO_USAGE
        self.shape: bytes | None = None


class _Layout(NamedTuple):
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
    def of(cls, head: bytes, mid: bytes, suf: bytes, ends: tuple[bytes, ...]) -> _Layout:
        sized = tuple((end, len(end)) for end in ends)
        return cls(head, len(head), mid, len(mid), suf, len(suf), sized)


def _templates(index: int, model: str, rid: str) -> list[tuple[bytes, bytes, bytes]]:
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
    text_gap = _ENCODE.encode(_TEXT_GAP)
    usage_gap = _ENCODE.encode(_USAGE_GAP)
    pretty = dumps_pretty(skeleton)
    out = []
    for layout in (dumps_sse(skeleton), pretty, pretty.replace(b"\n", b"\r\n")):
        if layout.count(text_gap) != 1 or layout.count(usage_gap) != 1:
            continue  # a placeholder also inside modelVersion or responseId
        pre, rest = layout.split(text_gap)
        between, suf = rest.split(usage_gap)
        out.append((pre, b'"' + between, suf))
    return out


def _after_blank_line(data: bytes, start: int) -> int:
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


def _after_comma_line(data: bytes, start: int) -> int:
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


def _same_meta(meta: Any, last: Any) -> bool:
    """Whether ``meta`` is the ``usageMetadata`` ``last`` exactly: Python's equality
    alone would take ``1.0`` or ``true`` for ``1``, and ignores key order (the usage
    reused would not be the one sent)."""
    if meta is last:
        return True
    return bool(meta == last) and _ENCODE.encode(meta) == _ENCODE.encode(last)


def _learnable(chunk: Any) -> bool:
    """Whether a chunk has the form :meth:`GeminiGenerateDecoder._learn` takes a
    template from (the usual chunk's, see ``_usual_chunk``), checked without state."""
    if type(chunk) is not dict or tuple(chunk) != _USUAL_KEYS:
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


def _match(template: _Template, data: Any) -> tuple[str, dict[str, Any]] | None:
    """The text and ``usageMetadata`` of a chunk whose JSON text ``data`` (of the
    template's type) fits the template, else None (see :class:`_Template`)."""
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


def _parse_pieces(template: _Template, text: Any, usage: Any) -> tuple[str, dict[str, Any]] | None:
    """Parse the two values a chunk fitting ``template`` holds: the JSON string
    ``text`` and the ``usageMetadata`` object text ``usage`` (the last one parsed is
    kept on the template: a repeated usage text is not parsed again). None when
    either does not parse."""
    try:
        value = _TEXT_DECODER.decode(text)
        if usage == template.usage:
            meta = template.meta
        else:
            meta = _OBJECT_DECODER.decode(usage)
            template.usage = usage
            template.meta = meta
    except msgspec.DecodeError:
        return None
    return value, meta


class _Skip(msgspec.Struct):
    """No field: decoding into it checks a JSON object's syntax and builds nothing."""


_CHECK_OBJECT: Final = msgspec.json.Decoder(_Skip)


class _Previous:
    """The previous chunk's repeated values, reused when the next chunk repeats them."""

    __slots__ = (
        "candidates",
        "extra",
        "extra_candidates",
        "extra_residual",
        "meta",
        "residual",
        "usage",
    )

    def __init__(self) -> None:
        self.residual: dict[str, Any] | None = None
        self.candidates: list[dict[str, Any]] | None = None
        self.extra: dict[str, Any] | None = None
        self.extra_residual: dict[str, Any] | None = None
        self.extra_candidates: list[dict[str, Any]] | None = None
        self.meta: dict[str, Any] | None = None
        self.usage: Usage | None = None


class _Candidate:
    """Per-candidate block state."""

    __slots__ = (
        "call",
        "finish",
        "finish_message",
        "has_calls",
        "last",
        "last_reasoning",
        "last_signed",
        "last_text",
        "last_textual",
        "open",
        "open_kind",
    )

    def __init__(self) -> None:
        self.open: int | None = None  # the open block (a text or reasoning run)
        self.open_kind: str | None = None  # "text" or "reasoning"
        self.last: int | None = None  # the most recent block of the candidate
        self.last_signed = False
        self.last_textual = False  # the most recent block is text or reasoning
        self.last_reasoning = False  # the most recent block is reasoning
        self.last_text: int | None = None  # most recent text block (for citations)
        self.call: _StreamedCall | None = None
        self.has_calls = False
        self.finish: str | None = None
        self.finish_message: str | None = None


class GeminiGenerateDecoder(FramedDecoder):
    """Decoder for ``streamGenerateContent`` (both framings; see the module docstring).

    Args:
        strict: Raise typed protocol errors (malformed JSON, a chunk that is not an
            object, an unknown part kind or finish reason, a cut framing) instead of
            emitting error events.
        keep_raw: Emit a :class:`~polystream.events.Raw` event with each chunk.
        framing: ``"sse"``, ``"json_array"`` or ``"auto"`` (by the first byte).

    Usage: ``feed(chunk)`` for each piece of the body, then ``close()``; the Finish is
    emitted by ``close()`` since Gemini ends a stream by closing it.
    """

    dialect = DIALECT
    framings = ("sse", "json_array")
    coalesce_modes = frozenset(get_args(Coalesce))
    # Off: every chunk takes the general path and JSON-array elements are parsed by
    # ``_chunk`` (the tests compare both ways).
    _fast_paths = True

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._started = False
        self._next_index = 0
        self._candidates: dict[int, _Candidate] = {}
        self._finished_order: list[int] = []
        # The merged usage is base.merged(last) (last: the newest non-empty usage, not
        # merged yet). Gemini restates the whole usageMetadata on every chunk, so a
        # newer usage nearly always reports every count the last one did, and then
        # the last one is replaced instead of merged (same result, no new object).
        self._usage_base = Usage()
        self._usage_last: Usage | None = None
        self._usage_mask = 0  # convert_usage's mask of _usage_last
        self._error: ErrorInfo | None = None
        self._blocked: tuple[str, str | None] | None = None
        self._previous = _Previous()
        self._template: _Template | None = None
        self._template_tries = _TEMPLATE_TRIES
        self._held = b""  # the beginning of a chunk, kept for the next feed (_holds)
        # The dispatch inlines _on_event and _on_element unless a subclass replaced them.
        cls = type(self)
        self._inline_hooks = (
            cls._on_event is GeminiGenerateDecoder._on_event
            and cls._on_element is GeminiGenerateDecoder._on_element
        )
        self._index_residuals: dict[int, dict[str, Any]] = {}
        # Bare (non-SSE) text after SSE events: Google writes a JSON error object there.
        self._scan_offset = 0
        # Whether a byte other than the blank ones that may open the stream (whitespace,
        # a UTF-8 BOM: see BLANK) has been scanned: those are never a bare line.
        self._scan_started = False
        self._at_line_start = True
        self._line_bare = False
        self._bare_parts: list[bytes] = []
        self._bare_joined = 0  # how many _bare_parts items are joins (wire._pieces)
        self._bare_size = 0  # bytes in _bare_parts: at most max_event_size
        self._bare_start: int | None = None
        self._bare_first: int | None = None
        self._bare_depth = 0
        self._bare_in_string = False
        self._bare_escape = False
        self._bare_ready: list[tuple[int, bytes]] = []

    # -- framing hooks -------------------------------------------------------------------

    def _make_framer(self, framing: Framing) -> None:
        if framing == "json_array" and self._fast_paths:
            # The array's fast path parses each element whole: hand the chunk over
            # parsed, so that it is parsed once (see :mod:`polystream.wire.jsonarray`).
            self._framing = framing
            self._array = JSONArrayDecoder(
                max_element_size=self._max_event,
                max_depth=self._max_depth,
                decode=_weak_parse(self),
            )
        else:
            super()._make_framer(framing)

    def feed(self, data: bytes) -> list[Event]:
        """Consume a chunk of the body; return the unified events it completed.

        Raises:
            RemoteProtocolError: Framing errors; dialect errors in strict mode.
        """
        if self._runs:
            self._runs = []  # (the last call's, not taken: see take_runs)
        framing = self._framing
        array = framing == "json_array"
        if framing is None and not self._closed:
            # Until the framing is known (auto), blank bytes are only counted.
            head = data.lstrip(BLANK)
            if not head:
                self._scan_offset += len(data)
                return super().feed(data)
            array = head[:1] == b"["  # (and an array needs no bare-text scan)
        held = self._held
        if held:
            self._held = b""
        if (
            not (data or held)
            or self._closed
            or not self._fast_paths
            or self.keep_raw
            or (self._template is None and not self._template_tries)
        ):
            return self._feed_frames(held + data if held else data, scan=not array)
        # Chunks that fit the template are read here (see _take); the parser takes the
        # rest of the chunk under way, each chunk that does not fit, and, while there
        # is no template, the first chunks (of a large feed, only those in its first
        # _FIRST_LOOK bytes: the template found there, the rest of the feed can be
        # read here too). Each cut is where a chunk may begin: after a blank line
        # (SSE) or after a comma line (Google's JSON-array layout).
        boundary = _after_comma_line if array else _after_blank_line
        out: list[Event] = []
        pos = 0
        try:
            if held:
                # The chunk the last feed kept (see _holds), with its end from this
                # feed, is read first on its own, unless the feed is small: the rest of
                # a large feed is not copied. Nothing of that chunk is kept again: the
                # rest of the feed follows it.
                cut = boundary(data, 0)
                if cut < 0 or len(data) <= _JOIN_LIMIT:
                    data = held + data
                else:
                    self._read(held + data[:cut], 0, out, array, hold=False)
                    if self._deferred is not None:
                        return out  # raised by the next call
                    pos = cut
            else:
                # A feed of whole chunks that fit the template (a network read mostly
                # holds one) is read without _read's loop.
                pos = self._take(data, 0, out)
                if pos == len(data):
                    return out
            self._read(data, pos, out, array, hold=True, taken=not held)
        except RemoteProtocolError as exc:
            if not out:
                raise
            # The events before the error are returned; the error comes next call.
            self._deferred = exc.again()
        return out

    def _read(
        self,
        data: bytes,
        pos: int,
        out: list[Event],
        array: bool,
        *,
        hold: bool,
        taken: bool = False,
    ) -> None:
        """:meth:`feed`'s loop over ``data[pos:]``: with ``hold``, the beginning of a
        chunk that ends it may be kept for the next feed (:meth:`_holds`); ``taken``
        says that :meth:`_take` has read from ``pos`` already."""
        boundary = _after_comma_line if array else _after_blank_line
        n = len(data)
        while pos < n:
            template = self._template
            if template is None or template.block is None:
                if template is not None or not self._template_tries:
                    cut = n
                else:
                    cut = boundary(data, pos + _FIRST_LOOK)
            else:
                if not taken:
                    pos = self._take(data, pos, out)
                    if pos == n:
                        return
                # (From there on, another _take would read nothing: it stopped at a
                # chunk that does not fit, or is not whole.)
                if hold and self._holds(data, pos):
                    return
                cut = boundary(data, pos)
            taken = False
            if cut < 0:
                cut = n
            out += self._feed_frames(data[pos:cut] if pos or cut < n else data, scan=not array)
            pos = cut
            if self._deferred is not None:
                return  # raised by the next call

    def _holds(self, data: bytes, pos: int) -> bool:
        """Keep ``data[pos:]`` for the next feed (``_held``) when it is the beginning
        of a chunk that fits the template, not whole yet: the next feed can then read
        it whole in :meth:`_take`, instead of the framing's parser taking it in two
        pieces (which costs tens of microseconds). Only what the parser would return
        nothing for and raise nothing on is kept (see :meth:`_holds_block` and
        :meth:`_holds_element`), at most ``_HOLD_LIMIT`` bytes; :meth:`close` hands
        it to the parser."""
        template = self._template
        if (
            template is None
            or template.block is None
            or not self._inline_hooks  # (_take reads nothing then)
            or self._deferred is not None  # (the next call raises it first)
            or len(data) - pos > _HOLD_LIMIT
        ):
            return False
        rest = data[pos:]
        sse = self._sse
        if not (self._holds_block(rest) if sse is not None else self._holds_element(rest)):
            return False
        self._held = rest
        return True

    def _holds_block(self, rest: bytes) -> bool:
        """Whether ``rest`` is the beginning of an SSE block that fits the template.
        The parser would return nothing for those bytes: they hold no line break but
        the block's own, and not the blank line's CR (at which the parser
        dispatches), so no frame, comment or bare text is delayed. The parser is idle,
        so they are the whole line so far, within its limits: no error is delayed
        either."""
        template = self._template
        sse = self._sse
        assert template is not None and template.block is not None and sse is not None
        if not sse.idle or len(rest) > sse.block_limit:
            return False
        line = rest.rstrip(b"\r\n")
        head = template.block.head
        return not (
            rest[len(line) :] not in _OPEN_BLOCK_ENDS
            or 10 in line
            or 13 in line
            or line[: len(head)] != head[: len(line)]
        )

    def _holds_element(self, rest: bytes) -> bool:
        """Whether ``rest`` is the beginning of a JSON-array element that fits the
        template (Google's layout), right after the comma line before it: the head,
        then the text (its string still open, or closed and followed by the mid), then
        the beginning of a usage object and what follows it. The parser would return
        nothing for those bytes, and raise nothing on them.

        Its structure check reads only quotes, backslashes and brackets (and counts
        bytes): it never looks inside a string, and a digit is none of those. So the
        bytes after the mid, digits removed, are checked to be a *proper* prefix of
        the last usage object read whole and the suffix after it, digits removed: the
        parser sees in them what it would see in the beginning of that element (valid
        JSON: the usage object parsed), whose last byte, its closing brace, is not
        there yet: no element is complete. The limits are checked on the bytes kept:
        their size, and their brackets (at most ``max_depth``, so that no nesting
        goes deeper)."""
        template = self._template
        array = self._array
        assert template is not None and template.block is not None
        if (
            array is None
            or not array.idle
            or array.after_element  # (a comma line comes first: left to the parser)
            or self.finished
            or len(rest) > array.max_element_size
        ):
            return False
        head = template.block.head
        head_size = template.block.head_size
        if len(rest) <= head_size:
            return rest == head[: len(rest)]
        if rest[:head_size] != head or rest[head_size] != 34:  # '"' opens the text
            return False
        close = rest.find(b'"', head_size + 1)
        if close < 0:
            return True  # inside the text
        if rest[close - 1] == 92:
            return False  # maybe an escaped quote: not decided here
        mid = template.block.mid
        after = rest[close:]
        if len(after) <= len(mid):
            return after == mid[: len(after)]
        if after[: len(mid)] != mid:
            return False
        if rest.count(b"{") + rest.count(b"[") > array.max_depth:
            return False  # (it could nest deeper than the parser allows)
        seen = after[len(mid) :].translate(None, _DIGITS)
        known = (template.block_usage + template.block.suf).translate(None, _DIGITS)
        return len(seen) < len(known) and known.startswith(seen)

    def close(self) -> list[Event]:
        """End of input: the events left, ending with the Finish (see the class)."""
        if self._runs:
            self._runs = []
        out: list[Event] = []
        if self._held and not self._closed:
            held, self._held = self._held, b""
            out = self._feed_frames(held)  # (nothing comes of them, see _holds)
        return out + super().close()

    def _feed_frames(self, data: bytes, *, scan: bool = True) -> list[Event]:
        """:meth:`feed` through the framing's parser (after the bare-text scan, for
        SSE: ``scan`` is False for what is known to be a JSON array)."""
        if scan and self.framing != "json_array" and not self._closed:
            self._scan_bare(data)
        out = super().feed(data)
        if self._bare_ready and self._deferred is None:
            # (After an error deferred to the next call, nothing more is returned.)
            # A bare text that began after the start of an event still open waits for
            # that event: the order of the two must not depend on the chunking.
            sse = self._sse
            pending = sse.open_event_offset if sse is not None else None
            try:
                self._drain_bare(out, None if pending is None else pending + 1)
            except RemoteProtocolError as exc:
                if not out:
                    raise
                # Strict mode: the events before the error are returned now and the
                # error is raised by the next call, as for any other dialect error.
                self._deferred = exc.again()
        return out

    def _dispatch_sse(self, frames: list[ServerSentEvent | SSEComment], out: list[Event]) -> None:
        """The base's dispatch with :meth:`_on_event` inlined for a chunk that fits the
        template: the same steps, fewer calls per chunk.

        Bare texts queued before this feed's frames (``_bare_ready``, filled only
        before the framing runs) take the base's way, which hands them over in order.
        """
        if self._bare_ready or self._template is None or not self._inline_hooks:
            super()._dispatch_sse(frames, out)
            return
        for frame in frames:
            if type(frame) is not ServerSentEvent or self.finished:
                self._handle_sse(frame, out)
                continue
            self.frame_index = frame.index
            self.frame_offset = frame.offset
            data = frame.data
            template = self._template
            try:
                if template is not None:
                    found = _match(template, data)
                    if found is not None and self._matched(template, found[0], found[1], out):
                        continue
                self._chunk(data, out)
            except RemoteProtocolError as exc:
                self._tolerate(exc, out)

    def _take(self, data: bytes, pos: int, out: list[Event]) -> int:
        """Read the chunks from ``data[pos]`` on that fit the template, without the
        framing's parser: SSE event blocks (``data: `` + the chunk's JSON text + a
        blank line, LF or CRLF line ends) or JSON-array elements (Google's
        pretty-printed layout, each followed by its comma line). Returns where the
        first chunk that does not fit (or is not whole in ``data``) begins; the
        parser is told what was read (``skip`` of
        :class:`~polystream.wire.sse.SSEDecoder` and
        :class:`~polystream.wire.jsonarray.JSONArrayDecoder`), and the rest of
        ``data`` takes the usual way.

        The events are those the parser's frames would give, chunk for chunk: an SSE
        block of that form is one event whose data is its JSON text, a JSON-array
        element of that form followed by ``,`` is one element, and the parser would
        take either on its own fast path. Each piece is compared (as a slice: on bytes
        that is cheaper than ``startswith``, a call with arguments) and both values
        must parse: the text is a JSON string, so it ends at its first quote not
        escaped and holds no raw line break; for SSE the usage object must hold no raw
        CR or LF either (JSON whitespace, but a line end there). The limits are the
        parser's. Only while nothing else is pending: the parser idle, no bare text
        under way, the stream not finished, no error deferred.
        """
        template = self._template
        sse = self._sse
        array = self._array if sse is None else None
        if (
            template is None
            or template.block is None
            or (sse is None and array is None)
            or self.finished
            or self._deferred is not None
            or not self._inline_hooks
        ):
            return pos
        if sse is not None:
            point = sse.takeover()
            if point is None or self._bare_parts or self._bare_ready or not self._at_line_start:
                return pos
            count, consumed = point
            after_element = False
            limit = sse.block_limit  # the parser's fast-path bound
            max_depth = self._max_depth  # (the framing's check, see FramedDecoder.feed)
        else:
            assert array is not None
            taking = array.takeover()
            if taking is None:
                return pos
            count, consumed, after_element = taking
            limit = array.max_element_size
            # (The brackets around the text are within it: the template was learned
            # from an element the framing took.)
            max_depth = array.max_depth
        head, head_size, mid, mid_size, suf, suf_size, block_ends = template.block
        tail, tail_size = template.block_tail  # suf and what ends the chunk, as last seen
        find = data.find
        n = len(data)
        base = consumed - pos
        first = pos
        counted = count
        previous = self._previous
        append = out.append
        comma = True  # (array) what was read ends after a comma, not after an element
        taken = pos  # where the last chunk read began
        # With coalesce "result", the chunks read inline give their events at the end,
        # as one run: once a chunk is read inline, so is every chunk after it that fits (what
        # that depends on, the extra and the block state, does not change inline).
        # Their usage texts are checked and kept (usages, all of one shape: see
        # usage_shape), and only the last of a shape is read, when the shape changes
        # or the run ends (_settle). (What is kept is less than the events those
        # chunks would have given.)
        # With "usage" instead (until an error was given: _gave_error), only their
        # usage updates are given as one, at the end of the run, and noted as a
        # UsageRun; their texts are given as usual.
        # With "usage_texts", each of their usage texts is kept for the encoder too
        # (chunk_usages, and its shape's digits made 1s in chunk_ones, one object while
        # they do not change), in the UsageRun.
        mode = self._coalesce
        join = mode == "result"
        coalesce = join or (mode != "off" and not self._gave_error)
        keep_texts = coalesce and mode == "usage_texts"
        chunk_usages: list[bytes] = []
        chunk_ones: list[bytes] = []
        run: list[str] = []  # the texts of those chunks (when joined)
        general = 0  # the chunks read by _matched, before the run
        run_index = 0
        run_extra: dict[str, Any] | None = None
        usages: list[bytes] = []
        meta: Any = None  # a chunk's usageMetadata (None: its text is in usages)
        state: Any = None  # (typed loosely: the inline test below checks its fields)
        if after_element:
            # The element before was read whole, its comma comes first.
            for ending, size in block_ends:
                if data[pos : pos + size] == ending:
                    pos += size
                    break
            else:
                return pos
        try:
            while data[pos : pos + head_size] == head:
                start = pos + head_size
                # The text ends at its first quote unless that one is escaped; then at
                # the first mid, and the string must still parse.
                close = find(34, start + 1)  # '"'
                if close < 0:
                    break
                if data[close - 1] == 92:  # a backslash
                    close = find(mid, start + 1)
                    if close < 0:
                        break
                elif data[close : close + mid_size] != mid:
                    break
                begin = close + mid_size
                # The usage object is tried at the length of the last one, else it ends
                # where suf first occurs (near: the work per chunk stays bounded).
                end = begin + template.block_usage_size
                ends = True  # (array) with its comma
                if end != begin and data[end : end + tail_size] == tail:
                    after = end + tail_size
                else:
                    if end == begin or data[end : end + suf_size] != suf:
                        end = find(suf, begin, begin + _USAGE_WINDOW + suf_size)
                        if end < 0:
                            break
                    stop = end + suf_size
                    if stop == n and sse is None:
                        # An element that ends the feed (as each does when a network
                        # read holds one): its comma comes next.
                        after = stop
                        ends = False
                    else:
                        for ending, size in block_ends:
                            if data[stop : stop + size] == ending:
                                tail = suf + ending
                                tail_size = suf_size + size
                                template.block_tail = (tail, tail_size)
                                after = end + tail_size
                                break
                        else:
                            break
                if end + suf_size - pos > limit:
                    break  # the parser raises BufferLimitExceeded
                usage_text = data[begin:end]
                # The depth bound, before parsing: one level for the chunk object, and
                # at most one per bracket the usage object opens, which (when it
                # parses, each has its closer) are at most half its bytes.
                if (
                    len(usage_text) // 2 + 1 > max_depth
                    and usage_text.count(b"{") + usage_text.count(b"[") + 1 > max_depth
                ):
                    break
                extra = previous.extra
                state = template.state
                # The chunk continues the open text run, and its extra is the chunk
                # before's: it is read inline (below), else by _matched.
                inline = (
                    extra is not None
                    and extra is template.extra
                    and state is not None
                    and state.open is not None
                    and state.open_kind == "text"
                )
                try:
                    text = _TEXT_DECODER.decode(data[start : close + 1])
                    if coalesce and inline:
                        # A chunk read inline below, coalesced.
                        if sse is not None and (10 in usage_text or 13 in usage_text):
                            break  # LF, CR: SSE line ends
                        ones = usage_text.translate(_ONES)
                        if ones != template.ones:
                            shape = template.shape
                            template.ones = ones
                            template.shape = usage_shape(ones)
                            if usages and template.shape != shape:
                                self._settle(template, usages)
                                usages = []
                        if template.shape is not None:
                            _CHECK_OBJECT.decode(usage_text)
                            meta = None
                        else:
                            meta = _OBJECT_DECODER.decode(usage_text)
                    elif usage_text == template.block_usage:
                        meta = template.block_meta
                    else:
                        if sse is not None and (10 in usage_text or 13 in usage_text):
                            break  # LF, CR: SSE line ends
                        meta = _OBJECT_DECODER.decode(usage_text)
                        template.block_usage = usage_text
                        template.block_usage_size = end - begin
                        template.block_meta = meta
                except msgspec.DecodeError:
                    break
                count += 1
                taken = pos
                pos = after
                comma = ends
                if inline:
                    # _matched, inlined for its most usual case.
                    if coalesce:
                        if join:
                            run.append(text)
                        else:
                            append(TextDelta(index=state.open, delta=text))
                            if keep_texts:
                                chunk_usages.append(usage_text)
                                chunk_ones.append(template.ones)
                        run_index = state.open
                        run_extra = extra
                        if meta is None:
                            usages.append(usage_text)
                            continue
                        if usages:
                            self._settle(template, usages)
                            usages = []
                    else:
                        append(TextDelta(index=state.open, delta=text))
                    usage = previous.usage
                    if usage is None or meta is not previous.meta:
                        # _new_usage, inlined: one call less on nearly every chunk.
                        usage, mask = convert_usage(meta)
                        if mask:
                            if self._usage_mask & ~mask:
                                assert self._usage_last is not None
                                self._usage_base = self._usage_base.merged(self._usage_last)
                            self._usage_last = usage
                            self._usage_mask = mask
                        previous.meta = meta
                        previous.usage = usage
                    if not coalesce:
                        append(UsageUpdate(usage=usage, extra=extra))
                    continue
                # (The chunk's location, for what may go wrong from here; for the
                # chunks made inline, only the last one's is set, at the end.)
                self.frame_index = count - 1
                self.frame_offset = base + taken
                general += 1
                try:
                    if not self._matched(template, text, meta, out):
                        # The state changed since the template was learned: the
                        # general way, with what the parser would give.
                        whole = data[taken : end + suf_size]
                        if sse is not None:
                            self._chunk(whole[6:].decode("utf-8", "replace"), out)
                        else:
                            self._chunk(whole, out)
                except RemoteProtocolError as exc:
                    self._tolerate(exc, out)
        finally:
            if usages:
                self._settle(template, usages)
            if run_extra is not None:
                self._coalesced(run, run_index, run_extra, out)
                if not join:
                    self._runs.append(
                        UsageRun(
                            len(out) - 1,
                            count - counted - general,
                            UsageTexts(chunk_usages, chunk_ones, self._usage_text_update)
                            if keep_texts
                            else None,
                        )
                    )
            if count > counted:
                self.frame_index = count - 1
                self.frame_offset = base + taken
            if pos > first:
                if sse is not None:
                    sse.skip(pos - first, count - counted)
                    self._scan_offset += pos - first
                else:
                    assert array is not None
                    array.skip(pos - first, count - counted, comma=comma)
        return pos

    def _usage_text_update(self, text: bytes, extra: dict[str, Any] | None) -> UsageUpdate:
        """The usage update a chunk read inline gives for its ``usageMetadata`` text
        (what a kept usage text stands for, see :class:`UsageTexts`): the text
        converted, with the chunk's ``extra``."""
        return UsageUpdate(usage=convert_usage(_OBJECT_DECODER.decode(text))[0], extra=extra)

    def _settle(self, template: _Template, usages: list[bytes]) -> None:
        """Read the usage texts of chunks read inline and coalesced, all of one
        shape (see :func:`usage_shape`) and checked: merged, they give what the last
        one gives, unless that one reports no count (then each is read, in order)."""
        last = usages[-1]
        meta = _OBJECT_DECODER.decode(last)
        usage, mask = convert_usage(meta)
        if not mask:
            for text in usages[:-1]:
                self._new_usage(_OBJECT_DECODER.decode(text))
        self._merge_usage(meta, usage, mask)
        template.block_usage = last
        template.block_usage_size = len(last)
        template.block_meta = meta

    def _coalesced(
        self, texts: list[str], index: int, extra: dict[str, Any] | None, out: list[Event]
    ) -> None:
        """The events of a run of chunks read inline and coalesced (see
        :data:`~polystream.dialects._base.Coalesce`): with ``"result"``, one TextDelta
        of their texts joined, and one UsageUpdate of the usage merged so far (every
        count of the stream: an accumulator's usage after it is the one it would have
        after each chunk's own); with ``"usage"`` (no ``texts``: each was given as its
        chunk was read), only the UsageUpdate."""
        if texts:
            joined = texts[0] if len(texts) == 1 else "".join(texts)
            out.append(TextDelta(index=index, delta=joined))
        out.append(UsageUpdate(usage=self._merged_usage(), extra=extra))

    def _merged_usage(self) -> Usage:
        """Every usage of the stream so far, merged (see ``_usage_base``)."""
        if self._usage_last is None:
            return self._usage_base
        return self._usage_base.merged(self._usage_last)

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        if self._bare_ready:
            # Bare text that began where this event began came before its data line
            # (the SSE layer counted the bare lines as fields of this event).
            self._drain_bare(out, event.offset + 1, event.index)
        data = event.data
        template = self._template
        if template is not None:
            found = _match(template, data)
            if found is not None and self._matched(template, found[0], found[1], out):
                return
        self._chunk(data, out)

    def _parse_element(self, data: bytes) -> Any:
        """Parse a JSON-array element for the framing (see ``_make_framer``): when it
        fits the template, the tuple (template, text, usageMetadata), which no JSON
        value is; else the chunk's value."""
        template = self._template
        if template is not None:
            found = _match(template, data)
            if found is not None:
                return (template, *found)
        chunk = CHUNK_DECODER.decode(data)
        if template is None and self._template_tries and not self.keep_raw and _learnable(chunk):
            # The framing parses the elements of a feed before any is handled: the
            # template is looked for at once, so that the next ones fit it. It is
            # only a way of parsing: whether a chunk that fits it takes the fast path
            # is still decided when the chunk is handled (see _matched).
            self._learn(data, chunk)
        return chunk

    def _handle_element(self, element: JSONElement, out: list[Event]) -> None:
        """The base's, with :meth:`_on_element` inlined for an element that fit the
        template (one call less per chunk).

        Raises:
            RemoteProtocolError: The first element is not a JSON object: the input is
                not a Gemini stream (an array of response objects), in strict and
                tolerant mode alike (a later one is an error like any malformed chunk).
        """
        if element.index == 0 and element.data[:1] != b"{":
            raise RemoteProtocolError(
                "the array's first element is a JSON "
                f"{_JSON_KINDS.get(element.data[:1], 'number')}, not an object: not a "
                "Gemini stream (an array of response objects)",
                dialect=self.dialect,
                event_index=element.index,
                byte_offset=element.offset,
            )
        if not self._inline_hooks:
            super()._handle_element(element, out)
            return
        self.frame_index = element.index
        self.frame_offset = element.offset
        value = element.value
        try:
            if type(value) is tuple:  # it fit the template
                if self._matched(value[0], value[1], value[2], out):
                    return
                value = msgspec.UNSET  # the state changed since: the general way
            self._chunk(element.data, out, parsed=value)
        except RemoteProtocolError as exc:
            self._tolerate(exc, out)

    def _on_element(self, element: JSONElement, out: list[Event]) -> None:
        value = element.value
        if type(value) is tuple:  # it fit the template
            if self._matched(value[0], value[1], value[2], out):
                return
            value = msgspec.UNSET  # the state changed since: the general way
        self._chunk(element.data, out, parsed=value)

    def _on_close(self, out: list[Event], truncation: StreamTruncated | None) -> None:
        if self._bare_parts:
            # Bare text that never balanced: hand it over as it is (it will not parse).
            self._bare_done()
        if self._bare_ready:
            self._drain_bare(out, None)
        if (
            truncation is not None
            and self._bare_first is not None
            and (truncation.byte_offset is None or truncation.byte_offset >= self._bare_first)
        ):
            # The SSE layer saw the bare lines as an undispatched event; they were read.
            truncation = None
        if truncation is not None and self.strict:
            # The framing names itself ("json_array", "sse"); report the dialect.
            raise StreamTruncated(
                truncation.message,
                dialect=self.dialect,
                event_index=truncation.event_index,
                byte_offset=truncation.byte_offset,
            )
        merged = self._merged_usage()
        usage = None if merged.is_empty() else merged
        unterminated = {"unterminated": True} if truncation is not None else None
        if self._error is not None:
            self.emit_finish(
                out,
                Finish(
                    status="failed",
                    reason=FinishReason(unified="error", raw=None),
                    usage=usage,
                    error=self._error,
                    extra=unterminated,
                ),
            )
        elif self._blocked is not None:
            reason, message = self._blocked
            self.emit_finish(
                out,
                Finish(
                    status="failed",
                    reason=FinishReason(unified="content_filter", raw=reason),
                    usage=usage,
                    error=ErrorInfo(
                        kind="content_filter",
                        message=message or f"prompt blocked: {reason}",
                        code=reason,
                    ),
                    extra=unterminated,
                ),
            )
        elif self._finished_order and truncation is None and not self._unfinished():
            which = 0 if 0 in self._finished_order else self._finished_order[0]
            state = self._candidates[which]
            assert state.finish is not None
            mapped, row = map_finish_reason(state.finish, tool_calls=state.has_calls)
            error = None
            if row.error is not None:
                error = ErrorInfo(
                    kind=row.error,
                    message=state.finish_message or f"generation ended with {state.finish}",
                    retryable=row.error in RETRYABLE_KINDS,
                    code=state.finish,
                )
            self.emit_finish(
                out, Finish(status=row.status, reason=mapped, usage=usage, error=error)
            )
        else:
            cause = truncation
            unfinished = self._unfinished() if self._finished_order else []
            if cause is not None:
                message = cause.message
            elif unfinished:
                # Every candidate that began must finish: one did, not all.
                message = (
                    "stream closed without a finishReason for candidate "
                    + ", ".join(str(n) for n in unfinished)
                    + " (another candidate finished; Gemini ends streams by closing)"
                )
            else:
                message = "stream closed without a finishReason (Gemini ends streams by closing)"
            self.emit_finish(
                out,
                Finish(
                    status="truncated",
                    reason=FinishReason(unified="error", raw=None),
                    usage=usage,
                    error=ErrorInfo(
                        kind="truncated",
                        message=message,
                        retryable=True,
                        dialect=self.dialect,
                        event_index=cause.event_index if cause is not None else self.frame_index,
                        byte_offset=cause.byte_offset if cause is not None else None,
                    ),
                    extra=unterminated,
                ),
            )

    def _unfinished(self) -> list[int]:
        """The candidates that began and have no finishReason yet, in order."""
        return sorted(n for n, state in self._candidates.items() if state.finish is None)

    # -- bare JSON after SSE events --------------------------------------------------------

    def _scan_bare(self, data: bytes) -> None:
        """Find lines that are not SSE fields (Google's bare JSON error text).

        Lines split on LF (Gemini sends CRLF); a line is bare when its first byte is
        not that of an SSE field, comment or blank line. Bare lines are collected
        until their braces balance (strings and escapes respected), as google-genai
        does in ``_RawJsonLineBuffer``.
        """
        if self._deferred is not None:
            raise self._deferred.again()  # (the scan runs before the framer, which raises it too)
        if not data:
            return
        if not self._scan_started:
            # The stream's opening blank bytes (a BOM, which the framing's parser takes
            # as its own, whitespace) are skipped as they are when they come alone.
            content = data.lstrip(BLANK)
            self._scan_offset += len(data) - len(content)
            if not content:
                return
            self._scan_started = True
            data = content
        if (
            not self._bare_parts
            and (not self._at_line_start or data[0] in _SSE_LINE_STARTS)
            and _BARE_LINE.search(data) is None
        ):
            # Fast path (every ordinary chunk): no line in ``data`` starts bare.
            self._scan_offset += len(data)
            self._at_line_start = data[-1] == 10  # ended with LF
            self._line_bare = False
            return
        base = self._scan_offset
        self._scan_offset += len(data)
        pos = 0
        n = len(data)
        while pos < n:
            if self._at_line_start:
                self._at_line_start = False
                self._line_bare = data[pos] not in _SSE_LINE_STARTS
                if self._line_bare and self._bare_start is None:
                    self._bare_start = base + pos
                    if self._bare_first is None:
                        self._bare_first = base + pos
            nl = data.find(b"\n", pos)
            end = n if nl == -1 else nl + 1
            if self._line_bare:
                piece = data[pos:end]
                self._bare_size += len(piece)
                if self._bare_size > self._max_event:
                    # As for an SSE event: a bare text that never balances must not
                    # hold memory without bound. The stream stays failed (the decoder's
                    # deferred error is raised by every later feed and by close).
                    self._bare_parts = []
                    self._bare_joined = 0
                    self._deferred = BufferLimitExceeded(
                        f"bare text larger than max_event_size={self._max_event} bytes",
                        dialect=self.dialect,
                        byte_offset=self._bare_start,
                    )
                    raise self._deferred.again()
                parts = self._bare_parts
                parts.append(piece)
                if len(parts) - self._bare_joined >= PIECES:
                    self._bare_joined = join_recent(parts, self._bare_joined)
                self._count_braces(piece)
            if nl == -1:
                return
            pos = end
            self._at_line_start = True
            if self._line_bare and self._bare_depth == 0 and not self._bare_in_string:
                self._bare_done()

    def _bare_done(self) -> None:
        """A bare text is complete: queue it, unless it is only blanks (ignored)."""
        assert self._bare_start is not None
        text = b"".join(self._bare_parts)
        if text.strip():
            self._bare_ready.append((self._bare_start, text))
        elif self._bare_first == self._bare_start:
            self._bare_first = None
        self._bare_parts = []
        self._bare_joined = 0
        self._bare_size = 0
        self._bare_start = None
        self._bare_depth = 0
        self._bare_in_string = False
        self._bare_escape = False

    def _count_braces(self, piece: bytes) -> None:
        depth = self._bare_depth
        in_string = self._bare_in_string
        escape = self._bare_escape
        for c in piece:
            if in_string:
                if escape:
                    escape = False
                elif c == 92:  # backslash
                    escape = True
                elif c == 34:
                    in_string = False
            elif c == 34:
                in_string = True
            elif c in (123, 91):
                depth += 1
            elif c in (125, 93):
                depth -= 1
        self._bare_depth = depth
        self._bare_in_string = in_string
        self._bare_escape = escape

    def _drain_bare(
        self, out: list[Event], before: int | None, next_index: int | None = None
    ) -> None:
        """Handle the complete bare texts that began before offset ``before`` (all if
        None). Their event index is that of the event after them, ``next_index``
        (None: after every event dispatched so far), whatever the chunking."""
        index, offset = self.frame_index, self.frame_offset
        if next_index is None:
            next_index = self._sse.events_dispatched if self._sse is not None else 0
        while self._bare_ready and (before is None or self._bare_ready[0][0] < before):
            start, text = self._bare_ready.pop(0)
            self.frame_offset = start
            self.frame_index = next_index
            try:
                deep = too_deep(text, self._max_depth)
                if deep is not None:
                    raise BufferLimitExceeded(
                        f"bare JSON text nests deeper than max_depth={self._max_depth} "
                        f"(at byte {deep} of it)"
                    )
                self._chunk(text, out, bare=True)
            except RemoteProtocolError as exc:
                self._tolerate(exc, out)
        self.frame_index, self.frame_offset = index, offset

    # -- chunks ----------------------------------------------------------------------------

    def _chunk(
        self,
        data: str | bytes,
        out: list[Event],
        *,
        bare: bool = False,
        parsed: Any = msgspec.UNSET,
    ) -> None:
        """Emit the events of one chunk (its JSON text ``data``, or already ``parsed``)."""
        if parsed is msgspec.UNSET:
            try:
                chunk = CHUNK_DECODER.decode(data)
            except msgspec.DecodeError as exc:
                text = data if isinstance(data, str) else data.decode("utf-8", "replace")
                out.append(Unknown(name="chunk", data=text))
                raise self.protocol_error(f"malformed JSON in chunk: {exc}") from None
        else:
            chunk = parsed
        if type(chunk) is not dict:
            if not isinstance(chunk, dict):
                text = data if isinstance(data, str) else data.decode("utf-8", "replace")
                out.append(Unknown(name="chunk", data=text))
                raise self.protocol_error(
                    f"chunk is not a JSON object (got {type(chunk).__name__})"
                )
        elif self._started and not bare and self._fast_paths:
            if self.keep_raw:
                self.raw_event(out, None, chunk)
            if self._usual_chunk(chunk, out):
                if self._template_tries and not self.keep_raw:
                    self._learn(data, chunk)
                return
            self._chunk_fields(chunk, out, bare)
            return
        if self.keep_raw:
            self.raw_event(out, None, chunk)
        self._chunk_fields(chunk, out, bare)

    def _usual_chunk(self, chunk: dict[str, Any], out: list[Event]) -> bool:
        """The usual chunk after the first, in one pass: ``candidates`` holding one
        candidate ``{"content": {"parts": [...], "role": "model"}, "index": n}``, then
        ``usageMetadata``, and the same ``modelVersion`` and ``responseId`` strings as
        the chunk before. Returns False, having done nothing, for any other chunk; the
        events are those :meth:`_chunk_fields` emits for it, step for step.
        """
        if tuple(chunk) != _USUAL_KEYS:
            return False
        cands = chunk["candidates"]
        meta = chunk["usageMetadata"]
        model = chunk["modelVersion"]
        rid = chunk["responseId"]
        previous = self._previous
        residual = previous.residual
        if not (
            type(cands) is list
            and len(cands) == 1
            and type(meta) is dict
            and type(model) is str
            and type(rid) is str
            and residual is not None
            and len(residual) == 2
            and residual.get("modelVersion") == model
            and residual.get("responseId") == rid
        ):
            return False
        cand = cands[0]
        if type(cand) is not dict or len(cand) != 2:
            return False
        number = cand.get("index")
        content = cand.get("content")
        if not (
            type(number) is int
            and type(content) is dict
            and len(content) == 2
            and next(iter(cand)) == "content"
            and next(iter(content)) == "parts"
            and content.get("role") == "model"
        ):
            return False
        parts = content["parts"]
        if type(parts) is not list:
            return False
        # From here on, the steps of _chunk_fields and _candidate for this chunk.
        state = self._candidates.get(number)
        if state is None:
            state = self._state(number)
        for part in parts:
            # _part's own first test (a text fragment continuing the open text run).
            index = state.open
            if type(part) is dict and len(part) == 1 and index is not None:
                text = part.get("text")
                if type(text) is str and state.open_kind == "text":
                    out.append(TextDelta(index=index, delta=text))
                    continue
            self._part(part, number, state, out)
        self._usual_end(number, meta, residual, out)
        return True

    def _matched(
        self, template: _Template, text: str, meta: dict[str, Any], out: list[Event]
    ) -> bool:
        """:meth:`_usual_chunk` for a chunk that fits ``template`` (its text and
        usageMetadata given); False, having done nothing, when the chunk before did
        not have the same modelVersion and responseId."""
        previous = self._previous
        extra = previous.extra
        verified = True
        if extra is None or extra is not template.extra:
            verified = False
            residual = previous.residual
            if not (
                residual is not None
                and len(residual) == 2
                and residual.get("modelVersion") == template.model
                and residual.get("responseId") == template.rid
            ):
                return False
            candidates = previous.candidates
            if (
                extra is not None
                and residual is previous.extra_residual
                and candidates is previous.extra_candidates
                and candidates is not None
                and len(candidates) == 1
                and candidates[0] is self._index_residuals.get(template.index)
            ):
                # The chunk before ended with the extra this chunk's UsageUpdate has.
                # Until previous.extra changes, so do not the residual and candidates
                # it was built from (they are only ever replaced along with it).
                template.extra = extra
                verified = True
        state = template.state
        if state is None:
            state = template.state = self._state(template.index)
        index = state.open
        if index is not None and state.open_kind == "text":
            out.append(TextDelta(index=index, delta=text))
        else:
            self._part({"text": text}, template.index, state, out)
        if not verified:
            residual = previous.residual
            assert residual is not None
            self._usual_end(template.index, meta, residual, out)
            return True
        # _usual_end, for its usual case: the chunk fields and the candidate's residual
        # are those of the chunk before, and so is the extra.
        usage = previous.usage
        if usage is None or meta is not previous.meta:
            # A usage text other than the last one's (the same text gives the same
            # object, see _match); an equal value converts to an equal usage.
            usage = self._new_usage(meta)
        out.append(UsageUpdate(usage=usage, extra=extra))
        return True

    def _learn(self, data: str | bytes, chunk: dict[str, Any]) -> None:
        """After a usual chunk with one text part, find the template it fits (unless
        the template in use already holds its index, modelVersion and responseId)."""
        candidate = chunk["candidates"][0]
        number = candidate["index"]
        model = chunk["modelVersion"]
        rid = chunk["responseId"]
        template = self._template
        if (
            template is not None
            and template.index == number
            and template.model == model
            and template.rid == rid
        ):
            return
        parts = candidate["content"]["parts"]
        if len(parts) != 1 or type(parts[0]) is not dict or len(parts[0]) != 1:
            return
        text = parts[0].get("text")
        if type(text) is not str:
            return
        for pre, mid, suf in _templates(number, model, rid):
            if isinstance(data, str):
                template = _Template(pre.decode(), mid.decode(), suf.decode(), number, model, rid)
                if not any(c in piece for piece in (pre, mid, suf) for c in (b"\r", b"\n")):
                    template.block = _Layout.of(b"data: " + pre, mid, suf, (b"\r\n\r\n", b"\n\n"))
            else:
                template = _Template(pre, mid, suf, number, model, rid)
                if b"\n" in mid:  # pretty-printed: Google's array layout
                    template.block = _Layout.of(pre, mid, suf, (b"\r\n,\r\n", b"\n,\n"))
            if template.block is not None:
                ending, size = template.block.ends[0]
                template.block_tail = (suf + ending, len(suf) + size)
            found = _match(template, data)
            if found is not None:
                if found[0] == text and found[1] == chunk["usageMetadata"]:
                    self._template = template
                    return
                break  # cannot happen (see _Template); never use it then
        self._template_tries -= 1

    def _usual_end(
        self, number: int, meta: dict[str, Any], residual: dict[str, Any], out: list[Event]
    ) -> None:
        """The end of :meth:`_usual_chunk`: the chunk's UsageUpdate."""
        previous = self._previous
        cached = self._index_residuals.get(number)
        if cached is None:
            cached = self._index_residuals[number] = {"index": number}
        candidates = previous.candidates
        if (
            candidates is None
            or len(candidates) != 1
            or not (cached is candidates[0] or cached == candidates[0])
        ):
            candidates = previous.candidates = [cached]
        extra = previous.extra
        if (
            extra is None
            or residual is not previous.extra_residual
            or candidates is not previous.extra_candidates
        ):
            extra = previous.extra = {"chunk": residual, "candidates": candidates}
            previous.extra_residual = residual
            previous.extra_candidates = candidates
        usage = previous.usage
        if usage is None or not _same_meta(meta, previous.meta):
            usage = self._new_usage(meta)
        out.append(UsageUpdate(usage=usage, extra=extra))

    def _new_usage(self, meta: dict[str, Any]) -> Usage:
        """Convert a ``usageMetadata`` that differs from the last one, and merge it."""
        usage, mask = convert_usage(meta)
        return self._merge_usage(meta, usage, mask)

    def _merge_usage(self, meta: dict[str, Any], usage: Usage, mask: int) -> Usage:
        """Merge a converted ``usageMetadata`` (see :meth:`_new_usage`)."""
        if mask:  # an empty usage never changes the merged one
            if self._usage_last is not None and self._usage_mask & ~mask:
                # The newer one omits a count the last one had: merge for real.
                self._usage_base = self._usage_base.merged(self._usage_last)
            self._usage_last = usage
            self._usage_mask = mask
        previous = self._previous
        previous.meta = meta
        previous.usage = usage
        return usage

    def _chunk_fields(self, chunk: dict[str, Any], out: list[Event], bare: bool) -> None:
        """Emit the events of one chunk object (the general path)."""
        if not self._started:
            self._started = True
            rid = chunk.get("responseId")
            model = chunk.get("modelVersion")
            out.append(
                StreamStart(
                    dialect=DIALECT,
                    id=rid if isinstance(rid, str) else None,
                    model=model if isinstance(model, str) else None,
                )
            )
        residual: dict[str, Any] = {}
        candidates: list[dict[str, Any]] | None = None
        usage_meta: dict[str, Any] | None = None
        for key, value in chunk.items():
            if key == "candidates" and isinstance(value, list):
                if len(value) == 1:  # the usual case: no comprehension frame
                    candidates = [self._candidate(value[0], 0, out)]
                else:
                    candidates = [self._candidate(c, pos, out) for pos, c in enumerate(value)]
            elif key == "usageMetadata" and isinstance(value, dict):
                usage_meta = value
            elif key == "promptFeedback" and isinstance(value, dict):
                out.append(Metadata(name="prompt_feedback", value=value))
                reason = value.get("blockReason")
                if isinstance(reason, str):
                    message = value.get("blockReasonMessage")
                    self._blocked = (reason, message if isinstance(message, str) else None)
            elif key == "error" and isinstance(value, dict):
                self._error_object(value, out)
            else:
                residual[key] = value
        # Gemini repeats the same chunk fields and usage on every chunk: equal values
        # reuse the previous objects (no new dicts, no second usage conversion).
        previous = self._previous
        if residual == previous.residual:
            residual = previous.residual
        else:
            previous.residual = residual
        if candidates is not None:
            if candidates == previous.candidates:
                candidates = previous.candidates
            else:
                previous.candidates = candidates
        keys = tuple(chunk)
        order = _ORDER_CACHE.get(keys, _MISSING)
        if order is _MISSING:
            order = order_if_needed(chunk, CHUNK_RANK)
            if len(_ORDER_CACHE) < _ORDER_CACHE_SIZE:
                _ORDER_CACHE[keys] = order
        if (
            order is None
            and not bare
            and residual is previous.extra_residual
            and candidates is previous.extra_candidates
            and previous.extra is not None
        ):
            extra = previous.extra
        else:
            extra = {"chunk": residual}
            if candidates is not None:
                extra["candidates"] = candidates
            if order is not None:
                extra["order"] = order
            if bare:
                extra["bare"] = True
            # Reused only by a chunk in the usual order and not bare: an extra that
            # records an order (or "bare") belongs to its own chunk alone.
            previous.extra = extra if order is None and not bare else None
            previous.extra_residual = residual
            previous.extra_candidates = candidates
        if usage_meta is None:
            usage = _EMPTY_USAGE
        elif previous.usage is not None and _same_meta(usage_meta, previous.meta):
            usage = previous.usage  # same counts: merging it again changes nothing
        else:
            usage = self._new_usage(usage_meta)
        out.append(UsageUpdate(usage=usage, extra=extra))

    def _error_object(self, value: dict[str, Any], out: list[Event]) -> None:
        try:
            err = msgspec.convert(value, GoogleError)
        except msgspec.ValidationError:
            err = GoogleError(message=_ENCODE.encode(value).decode())
        info = error_info(err.code, err.message, err.status, value)
        if self._error is None:
            self._error = info
        self._gave_error = True
        out.append(ErrorEvent(error=info))

    def _state(self, candidate: int) -> _Candidate:
        state = self._candidates.get(candidate)
        if state is None:
            state = self._candidates[candidate] = _Candidate()
        return state

    def _candidate(self, cand: Any, pos: int, out: list[Event]) -> dict[str, Any]:
        """Emit one candidate's events; return the fields no event carries."""
        if not isinstance(cand, dict):
            self.warn(out, "invalid_candidate", "a candidate is not a JSON object")
            return {"_literal": cand}
        number = cand.get("index")
        c = number if type(number) is int else pos
        state = self._candidates.get(c)
        if state is None:
            state = self._state(c)
        content = cand.get("content")
        if (
            len(cand) == 2
            and type(number) is int
            and type(content) is dict
            and len(content) == 2
            and next(iter(cand)) == "content"
            and next(iter(content)) == "parts"
            and content.get("role") == "model"
            and type(content.get("parts")) is list
        ):
            # The common chunk: {"content": {"parts": [...], "role": "model"}, "index": n}.
            for part in content["parts"]:
                self._part(part, c, state, out)
            cached = self._index_residuals.get(number)
            if cached is None:
                cached = self._index_residuals[number] = {"index": number}
            return cached
        residual: dict[str, Any] = {}
        grounding = url_context = safety = citations = None
        finish: dict[str, Any] = {}
        for key, value in cand.items():
            if key == "content":
                if isinstance(value, dict):
                    parts = value.get("parts")
                    if isinstance(parts, list):
                        for part in parts:
                            self._part(part, c, state, out)
                    if not (
                        isinstance(parts, list)
                        and len(value) == 2
                        and list(value) == ["parts", "role"]
                        and value["role"] == "model"
                    ):
                        residual["_content"] = {
                            k: (None if k == "parts" and isinstance(v, list) else v)
                            for k, v in value.items()
                        }
                else:
                    residual["_content"] = [value]
            elif key in ("finishReason", "finishMessage") and isinstance(value, str):
                finish[key] = value
            elif key == "groundingMetadata":
                grounding = value
            elif key == "urlContextMetadata":
                url_context = value
            elif key == "safetyRatings":
                safety = value
            elif key == "citationMetadata" and _plain_citations(value):
                citations = value["citationSources"]
            else:
                residual[key] = value
        if "content" not in cand:
            residual["_content"] = None
        order = order_if_needed(cand, CANDIDATE_RANK)
        if order is not None:
            residual["_order"] = order
        if citations is not None:
            target = state.last_text
            for source in citations:
                out.append(
                    Citation(
                        citation=source,
                        index=target,
                        extra={"candidate": c} if target is None and c != 0 else None,
                    )
                )
        if grounding is not None:
            out.append(Metadata(name="grounding", value=grounding, candidate=c, merge=True))
        if url_context is not None:
            out.append(Metadata(name="url_context", value=url_context, candidate=c))
        if safety is not None:
            out.append(Metadata(name="safety_ratings", value=safety, candidate=c))
        if finish:
            raw = finish.get("finishReason")
            if raw is not None:
                # A streamed call still expecting fragments was cut by the stop: its
                # block stays open (incomplete arguments), like a truncated stream's.
                self._close_open(state, out)
                if state.finish is None:
                    self._finished_order.append(c)
                state.finish = raw
                state.finish_message = finish.get("finishMessage")
            out.append(Metadata(name="finish", value=finish, candidate=c))
            if raw is not None and raw not in FINISH_REASONS and self.strict:
                raise self.protocol_error(f"unknown finishReason {raw!r}")
        return residual

    # -- parts -----------------------------------------------------------------------------

    def _new_block(
        self,
        state: _Candidate,
        c: int,
        kind: BlockKind,
        out: list[Event],
        **fields: Any,
    ) -> int:
        self._close_open(state, out)
        index = self._next_index
        self._next_index += 1
        out.append(BlockStart(index=index, kind=kind, candidate=c, **fields))
        state.last = index
        state.last_signed = False
        state.last_textual = kind in ("text", "reasoning")
        state.last_reasoning = kind == "reasoning"
        if kind == "text":
            state.last_text = index
        return index

    def _close_open(self, state: _Candidate, out: list[Event]) -> None:
        if state.open is not None:
            out.append(BlockEnd(index=state.open))
            state.open = None
            state.open_kind = None

    def _sign(self, state: _Candidate, index: int, signature: str, out: list[Event]) -> None:
        out.append(_signature(index, signature, None))
        if state.last == index:
            state.last_signed = True

    def _part(self, part: Any, c: int, state: _Candidate, out: list[Event]) -> None:
        if type(part) is dict and state.open is not None:
            # Fast path: a text or thought fragment continuing the open run.
            text = part.get("text")
            if type(text) is str:
                size = len(part)
                if size == 1 and state.open_kind == "text":
                    out.append(TextDelta(index=state.open, delta=text))
                    return
                if size == 2 and part.get("thought") is True and state.open_kind == "reasoning":
                    out.append(ReasoningDelta(index=state.open, delta=text, summary=True))
                    return
        if not isinstance(part, dict):
            self.warn(out, "invalid_part", "a part is not a JSON object")
            index = self._new_block(state, c, "other", out, value=part)
            out.append(BlockEnd(index=index))
            return
        signature = part.get("thoughtSignature")
        if not isinstance(signature, str):
            signature = None
        data_keys = [k for k in part if k in _DATA_KEYS]
        kind_key = data_keys[0] if len(data_keys) == 1 else None
        value = part.get(kind_key) if kind_key is not None else None
        if state.call is not None and kind_key != "functionCall":
            # A streamed call interrupted by another part: it ends here.
            out.append(BlockEnd(index=state.call.index))
            state.call = None
        if kind_key == "text" and isinstance(value, str):
            self._text_part(part, value, signature, c, state, out)
        elif kind_key == "functionCall" and isinstance(value, dict):
            self._function_call(part, value, signature, c, state, out)
        elif kind_key == "executableCode" and isinstance(value, dict):
            code = value.get("code")
            rest = {k: v for k, v in value.items() if k != "code" or not isinstance(code, str)}
            extra = _part_extra(part, kind_key, signature)
            extra["executableCode"] = rest
            inner = order_if_needed(value, EXECUTABLE_CODE_RANK)
            if inner is not None:
                extra["executableCode_order"] = inner
            index = self._new_block(state, c, "code", out, extra=extra)
            if isinstance(code, str):
                out.append(TextDelta(index=index, delta=code))
            self._end_whole(state, index, signature, out)
        elif kind_key == "inlineData" and isinstance(value, dict):
            self._inline_data(part, value, signature, c, state, out)
        elif kind_key == "toolCall" and isinstance(value, dict):
            # A built-in tool's call: its args are the block's value (like a function
            # call's), id and toolType its id and name; other fields stay in extra.
            ident = value.get("id")
            tool = value.get("toolType")
            ident = ident if isinstance(ident, str) else None
            tool = tool if isinstance(tool, str) else None
            extra = _part_extra(part, kind_key, signature)
            rest = {
                k: v
                for k, v in value.items()
                if not (k == "args" or (k == "id" and ident) or (k == "toolType" and tool))
            }
            if rest:
                extra["toolCall"] = rest
            inner = order_if_needed(value, TOOL_CALL_RANK)
            if inner is not None:
                extra["toolCall_order"] = inner
            if "args" not in value:
                extra["no_args"] = True
            index = self._new_block(
                state,
                c,
                "server_tool_call",
                out,
                id=ident,
                name=tool,
                value=value.get("args"),
                extra=extra or None,
            )
            self._end_whole(state, index, signature, out)
        elif kind_key in ("codeExecutionResult", "toolResponse") and isinstance(value, dict):
            kind: BlockKind = (
                "code_result" if kind_key == "codeExecutionResult" else "server_tool_result"
            )
            ident = value.get("id")
            tool = value.get("toolType")
            index = self._new_block(
                state,
                c,
                kind,
                out,
                id=ident if isinstance(ident, str) else None,
                name=tool if isinstance(tool, str) else None,
                value=value,
                extra=_part_extra(part, kind_key, signature) or None,
            )
            self._end_whole(state, index, signature, out)
        else:
            # functionResponse, fileData, unknown kinds, or a known kind of the wrong type.
            known = kind_key in _KNOWN_OTHER
            if self.strict and not known:
                raise self.protocol_error(f"unknown part kind: keys {sorted(part)}")
            body = {k: v for k, v in part.items() if k != "thoughtSignature" or signature is None}
            name = kind_key if kind_key is not None else next(iter(part), None)
            order = order_if_needed(part, PART_RANK)
            index = self._new_block(
                state,
                c,
                "other",
                out,
                name=name,
                value=body,
                extra={"part_order": order} if order is not None else None,
            )
            self._end_whole(state, index, signature, out)

    def _end_whole(
        self, state: _Candidate, index: int, signature: str | None, out: list[Event]
    ) -> None:
        if signature is not None:
            self._sign(state, index, signature, out)
        out.append(BlockEnd(index=index))

    def _text_part(
        self,
        part: dict[str, Any],
        text: str,
        signature: str | None,
        c: int,
        state: _Candidate,
        out: list[Event],
    ) -> None:
        thought = part.get("thought") is True
        if (
            text == ""
            and signature is not None
            and state.last is not None
            and state.last_textual
            and not state.last_signed
            and (not thought or state.last_reasoning)
            and len(part) <= 3
            and all(k in ("text", "thought", "thoughtSignature") for k in part)
        ):
            # Gemini 3's final empty-text part carrying the signature of the run before.
            extra: dict[str, Any] = {
                "part": {k: v for k, v in part.items() if k != "thoughtSignature"}
            }
            order = order_if_needed(part, PART_RANK)
            if order is not None:
                extra["part_order"] = order
            index = state.last
            out.append(_signature(index, signature, extra))
            state.last_signed = True
            if state.open == index:
                self._close_open(state, out)
            return
        kind: BlockKind = "reasoning" if thought else "text"
        if state.open is None or state.open_kind != kind:
            index = self._new_block(state, c, kind, out)
            state.open = index
            state.open_kind = kind
        else:
            index = state.open
        extra = _part_extra(part, "text", signature, thought=thought)
        if kind == "text":
            out.append(TextDelta(index=index, delta=text, extra=extra or None))
        else:
            out.append(ReasoningDelta(index=index, delta=text, summary=True, extra=extra or None))
        if signature is not None:
            self._sign(state, index, signature, out)
            self._close_open(state, out)

    def _function_call(
        self,
        part: dict[str, Any],
        call: dict[str, Any],
        signature: str | None,
        c: int,
        state: _Candidate,
        out: list[Event],
    ) -> None:
        state.has_calls = True
        name = call.get("name")
        ident = call.get("id")
        name = name if isinstance(name, str) else None
        ident = ident if isinstance(ident, str) else None
        if state.call is None and "willContinue" not in call and "partialArgs" not in call:
            extra = _part_extra(part, "functionCall", signature)
            rest = {
                k: v
                for k, v in call.items()
                if not (k == "args" or (k == "name" and name) or (k == "id" and ident))
            }
            if rest:
                extra["functionCall"] = rest
            inner = order_if_needed(call, FUNCTION_CALL_RANK)
            if inner is not None:
                extra["functionCall_order"] = inner
            index = self._new_block(
                state, c, "tool_call", out, id=ident, name=name, extra=extra or None
            )
            if "args" in call:
                out.append(ToolInputDelta(index=index, delta=_ENCODE.encode(call["args"]).decode()))
            self._end_whole(state, index, signature, out)
            return
        if state.call is None:
            index = self._new_block(
                state, c, "tool_call", out, id=ident, name=name, extra={"streamed": True}
            )
            state.call = _StreamedCall(index)
        streamed = state.call
        if not streamed.fold(call):
            self.warn(out, "partial_args", "a partialArgs entry has a path that was not understood")
        ends = call.get("willContinue") is not True
        extra = _part_extra(part, "functionCall", signature)
        extra["functionCall"] = call
        out.append(
            ToolInputDelta(index=streamed.index, delta=streamed.json() if ends else "", extra=extra)
        )
        if signature is not None:
            self._sign(state, streamed.index, signature, out)
        if ends:
            out.append(BlockEnd(index=streamed.index))
            state.call = None

    def _inline_data(
        self,
        part: dict[str, Any],
        blob: dict[str, Any],
        signature: str | None,
        c: int,
        state: _Candidate,
        out: list[Event],
    ) -> None:
        mime = blob.get("mimeType")
        data = blob.get("data")
        mime = mime if isinstance(mime, str) else None
        kind: BlockKind = "other"
        if mime is not None and mime.startswith("image/"):
            kind = "image"
        elif mime is not None and mime.startswith("audio/"):
            kind = "audio"
        extra = _part_extra(part, "inlineData", signature)
        rest = {
            k: v
            for k, v in blob.items()
            if not (
                (k == "mimeType" and mime is not None) or (k == "data" and isinstance(data, str))
            )
        }
        if rest:
            extra["inlineData"] = rest
        inner = order_if_needed(blob, INLINE_DATA_RANK)
        if inner is not None:
            extra["inlineData_order"] = inner
        # One block per part, audio included: base64 fragments do not concatenate as
        # text (each may end in padding), so each fragment stays a whole block.
        index = self._new_block(state, c, kind, out, name="inlineData" if kind == "other" else None)
        out.append(
            DataDelta(
                index=index,
                delta=data if isinstance(data, str) else "",
                mime_type=mime,
                extra=extra or None,
            )
        )
        self._end_whole(state, index, signature, out)


_JSON_KINDS: Final = {b"[": "array", b'"': "string", b"t": "boolean", b"f": "boolean", b"n": "null"}
"""The kind of a JSON value by its first byte (any other: a number)."""


def _weak_parse(decoder: GeminiGenerateDecoder) -> Callable[[bytes], Any]:
    """``decoder._parse_element`` for the decoder's JSON-array framer, without a strong
    reference to the decoder: the decoder holds the framer, so a bound method would
    be a reference cycle, and a dropped decoder would wait for the cycle collector
    instead of being freed at once."""
    owner = weakref.ref(decoder)
    parse = type(decoder)._parse_element

    def call(data: bytes) -> Any:
        # (The framer parses only inside the decoder's feed or close: it is alive.)
        return parse(owner(), data)  # type: ignore[arg-type]

    return call


def _plain_citations(value: Any) -> bool:
    """``citationMetadata`` that is exactly ``{"citationSources": [objects...]}``."""
    if not isinstance(value, dict) or list(value) != ["citationSources"]:
        return False
    sources = value["citationSources"]
    return (
        isinstance(sources, list)
        and bool(sources)
        and all(isinstance(source, dict) for source in sources)
    )


def _signature(index: int, value: str, extra: dict[str, Any] | None) -> SignatureDelta:
    """A SignatureDelta; another dialect's state in the base64-safe carrier (see
    :mod:`polystream.dialects._carrier`) becomes its original bytes with
    ``extra["carrier"]`` = its origin."""
    source, original = unwrap_base64(value, DIALECT)
    if source is None:
        return SignatureDelta(index=index, delta=value, extra=extra)
    return SignatureDelta(index=index, delta=original, extra={**(extra or {}), "carrier": source})


def _part_extra(
    part: dict[str, Any], kind_key: str, signature: str | None, *, thought: bool = False
) -> dict[str, Any]:
    """``extra`` for a part's event: the part fields no event models, and their order."""
    extra: dict[str, Any] = {}
    if len(part) > 1:
        rest = {
            k: v
            for k, v in part.items()
            if k != kind_key
            and not (k == "thoughtSignature" and signature is not None)
            and not (k == "thought" and thought)
        }
        if rest:
            extra["part"] = rest
        order = order_if_needed(part, PART_RANK)
        if order is not None:
            extra["part_order"] = order
    return extra

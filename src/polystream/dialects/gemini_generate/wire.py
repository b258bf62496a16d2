"""Gemini ``GenerateContentResponse`` chunks on the wire: parsing, key order, and the
exact JSON text Gemini writes.

Why chunks are decoded into builtins, not Structs
-------------------------------------------------
Gemini has no type discriminator: a chunk is a partial ``GenerateContentResponse``
whose parts are told apart by which key they hold (``text``, ``functionCall``, ...).
Lossless re-encoding needs every unknown key *and the order of keys*, which a Struct
drops. Decoding into ``dict`` costs the same as decoding into Structs with msgspec
(measured: 1.17 us for a typical text chunk either way), so the decoder parses each
chunk once into builtins with :data:`CHUNK_DECODER` and reads the few fields it maps
(a chunk that fits the decoder's template of the usual chunk is not parsed whole: only
its text and ``usageMetadata`` are; see :mod:`.decode`). The error object
(``{"error": {...}}``) is validated with the :class:`GoogleError` Struct.

Key order
---------
Google's JSON printer writes fields in protobuf field-number order (observed:
``content, finishReason, index, safetyRatings`` on candidates; ``promptTokenCount,
candidatesTokenCount, totalTokenCount, promptTokensDetails, thoughtsTokenCount`` in
``usageMetadata``). The ``*_RANK`` tables give that order for the objects the encoder
assembles; unknown keys follow, in arrival order. When a chunk arrives in another
order (Vertex AI writes ``role`` before ``parts``), the decoder records the order
(:func:`order_if_needed`) so that re-encoding is byte-exact anyway.

Text form
---------
``?alt=sse`` events hold compact JSON with a space after each colon and none after
commas (``{"text": "OK","thought": true}``); JSON-array elements are pretty-printed
with two-space indents. :func:`dumps_sse` and :func:`dumps_pretty` write both forms.
Strings are escaped by msgspec (``"``, ``\\``, control characters; non-ASCII as UTF-8).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from polystream.events import BlockStart

__all__ = [
    "CANDIDATE_RANK",
    "CHUNK_DECODER",
    "CHUNK_RANK",
    "CONTENT_RANK",
    "EXECUTABLE_CODE_RANK",
    "FUNCTION_CALL_RANK",
    "INLINE_DATA_RANK",
    "PART_RANK",
    "TOOL_CALL_RANK",
    "GoogleError",
    "dumps_pretty",
    "dumps_sse",
    "order_if_needed",
    "ordered",
    "tool_call_object",
    "usage_shape",
]

CHUNK_DECODER: Final = msgspec.json.Decoder()
"""The one decoder for chunks (builtins: see the module docstring)."""


class GoogleError(msgspec.Struct, frozen=True, kw_only=True):
    """The ``error`` object of a Google API error (google.rpc.Status in JSON).

    Fields:
        code: The HTTP status code Google associates with the error.
        message: Human-readable text.
        status: The canonical status name (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``...).
    """

    code: int | None = None
    message: str = ""
    status: str | None = None


# protobuf field numbers (google.ai.generativelanguage.v1beta) give the printed order.
CHUNK_RANK: Final[Mapping[str, int]] = {
    "candidates": 1,
    "promptFeedback": 2,
    "usageMetadata": 3,
    "modelVersion": 4,
    "createTime": 5,  # Vertex AI prints it between modelVersion and responseId
    "responseId": 6,
    "modelStatus": 7,
    "error": 8,
}
CANDIDATE_RANK: Final[Mapping[str, int]] = {
    "content": 1,
    "finishReason": 2,
    "index": 3,
    "finishMessage": 4,
    "safetyRatings": 5,
    "citationMetadata": 6,
    "tokenCount": 7,
    "groundingAttributions": 8,
    "groundingMetadata": 9,
    "avgLogprobs": 10,
    "logprobsResult": 11,
    "urlContextMetadata": 13,
}
CONTENT_RANK: Final[Mapping[str, int]] = {"parts": 1, "role": 2}
PART_RANK: Final[Mapping[str, int]] = {
    "text": 2,
    "inlineData": 3,
    "functionCall": 4,
    "functionResponse": 5,
    "fileData": 6,
    "partMetadata": 8,
    "executableCode": 9,
    "codeExecutionResult": 10,
    "thought": 11,
    "thoughtSignature": 13,
    "videoMetadata": 14,
    "toolCall": 15,
    "toolResponse": 16,
}
FUNCTION_CALL_RANK: Final[Mapping[str, int]] = {
    "name": 1,
    "args": 2,
    "id": 3,
    "partialArgs": 4,
    "willContinue": 5,
}
EXECUTABLE_CODE_RANK: Final[Mapping[str, int]] = {"language": 1, "code": 2, "id": 3}
INLINE_DATA_RANK: Final[Mapping[str, int]] = {"mimeType": 1, "data": 2}
TOOL_CALL_RANK: Final[Mapping[str, int]] = {"id": 1, "toolType": 2, "args": 3}

_UNRANKED: Final = 1 << 20
# rank table id -> key tuple -> whether that key order is canonical (see ``ordered``).
_CANONICAL: dict[int, dict[tuple[str, ...], bool]] = {}


def order_if_needed(obj: Mapping[str, Any], rank: Mapping[str, int]) -> list[str] | None:
    """The object's key order when it differs from the canonical order, else None.

    Canonical order: ranked keys by rank, then unranked keys in arrival order.
    """
    last = 0
    for key in obj:
        r = rank.get(key, _UNRANKED)
        if r < last:
            return list(obj)
        last = r
    return None


def ordered(
    obj: dict[str, Any], rank: Mapping[str, int], order: list[str] | None = None
) -> dict[str, Any]:
    """Return ``obj`` with its keys in canonical order (or in ``order`` when given)."""
    if order is not None:
        out = {key: obj[key] for key in order if key in obj}
        for key, value in obj.items():  # keys the recorded order does not know
            out.setdefault(key, value)
        return out
    keys = tuple(obj)
    cache = _CANONICAL.get(id(rank))
    if cache is None:
        cache = _CANONICAL[id(rank)] = {}
    canonical = cache.get(keys)
    if canonical is None:
        canonical = order_if_needed(obj, rank) is None
        if len(cache) < 256:  # a handful of key sets occur; the cache stays small
            cache[keys] = canonical
    if canonical:
        return obj
    ranked = sorted(obj, key=lambda k: rank.get(k, _UNRANKED))  # stable: unranked keep order
    return {key: obj[key] for key in ranked}


_SCALAR: Final = msgspec.json.Encoder()


def _compact(value: Any, out: list[bytes]) -> None:
    if isinstance(value, dict):
        if not value:
            out.append(b"{}")
            return
        out.append(b"{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(b",")
            first = False
            out.append(_SCALAR.encode(key))
            out.append(b": ")
            _compact(item, out)
        out.append(b"}")
    elif isinstance(value, list):
        if not value:
            out.append(b"[]")
            return
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            _compact(item, out)
        out.append(b"]")
    else:
        out.append(_SCALAR.encode(value))


def every_colon_quote_ends_a_key(compact: bytes) -> bool:
    """Whether every ``":`` of msgspec's compact JSON text ends a key: none follows an
    escaped quote or opens a string (a quote after ``{``, ``[``, ``,``, ``:`` or at the
    start, then a colon). Then adding a space after each is Google's SSE spacing."""
    return (
        b'\\":' not in compact
        and b'{":' not in compact
        and b'[":' not in compact
        and b',":' not in compact
        and b':":' not in compact
        and not compact.startswith(b'":')
    )


def dumps_sse(value: Any) -> bytes:
    """Gemini's compact JSON (the ``?alt=sse`` form): ``{"a": 1,"b": [2,3]}``.

    msgspec writes ``{"a":1,"b":[2,3]}``. A ``":`` ends a key, except where a string
    starts with a colon (its opening quote then follows ``{``, ``[``, ``,`` or ``:``,
    e.g. ``{"text":":)"}`` or the key in ``{":a":1}``, or is the first byte: the value
    ``":"`` itself) or a string holds an escaped quote before a colon. When none of
    those occurs, adding the space after every ``":`` is exact; otherwise a slower
    writer walks the value.
    """
    out = _SCALAR.encode(value)
    if every_colon_quote_ends_a_key(out):
        return out.replace(b'":', b'": ')
    pieces: list[bytes] = []
    _compact(value, pieces)
    return b"".join(pieces)


def dumps_pretty(value: Any) -> bytes:
    """Gemini's pretty-printed JSON (the JSON-array element form, two-space indent,
    ``"key": value``, empty containers as ``[]`` / ``{}``)."""
    return msgspec.json.format(_SCALAR.encode(value), indent=2)


def tool_call_object(start: BlockStart) -> dict[str, Any]:
    """A built-in tool's ``toolCall`` object from its ``server_tool_call`` block start.

    The decoder puts ``id`` in ``id``, ``toolType`` in ``name``, ``args`` in ``value``
    (``extra["no_args"]`` when absent) and any other field in ``extra["toolCall"]``.
    """
    call: dict[str, Any] = {}
    if start.id is not None:
        call["id"] = start.id
    if start.name is not None:
        call["toolType"] = start.name
    if not (start.extra and start.extra.get("no_args")):
        call["args"] = start.value
    rest = start.extra.get("toolCall") if start.extra else None
    if isinstance(rest, dict):
        call.update(rest)
    return ordered(call, TOOL_CALL_RANK)


_OBJECT: Final = msgspec.json.Decoder(dict[str, Any])


def usage_shape(ones: bytes) -> bytes | None:
    """What a usage text ``t`` whose digits made 1s are ``ones`` shares with every usage
    text of the same shape, when its only digits are those of integers (none in a
    string, no escape, no float): ``t`` with its digits removed. Else None.

    Two usage texts of that kind with the same shape differ only in the digits of their
    integers: the same members in the same order, the same strings, an integer where
    the other has one. Their conversions then report the same counts (unless all of
    one's counts are zero: it reports none), so that the later one, merged, makes the
    earlier one count for nothing (see ``GeminiGenerateDecoder._settle``). A text
    with the same ``ones`` as one of that kind has its digits where that one has them:
    it is a JSON object exactly when its integers have no leading zero, which a syntax
    check finds (the decoder's)."""
    if 92 in ones:  # a backslash: an escape may hold digits (and "\u0041" is "A")
        return None
    try:
        value = _OBJECT.decode(ones)
    except msgspec.DecodeError:
        return None
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind is dict:
            if any("1" in key for key in item):
                return None
            todo.extend(item.values())
        elif kind is list:
            todo.extend(item)
        elif kind is str:
            if "1" in item:
                return None
        elif kind is float:
            return None
    return ones.replace(b"1", b"")

"""Unified events -> Gemini ``streamGenerateContent`` bytes, in both framings.

Two modes, chosen by the stream's :class:`~polystream.events.StreamStart`:

* **Same dialect** (``StreamStart.dialect == "gemini_generate"``): the events of one
  native chunk are gathered and written when the chunk-ending
  :class:`~polystream.events.UsageUpdate` arrives (see :mod:`.decode`). Parts,
  signatures, candidate fields and chunk fields come back exactly, key order
  included, without using ``raw``. A transcoder may instead hand over a run of usual
  chunks as their text deltas and each one's ``usageMetadata`` text
  (:meth:`GeminiGenerateEncoder._encode_usage_texts`): the same bytes, the usage not
  decoded where its form is known to give them.
* **Another dialect**: each content event becomes its own chunk at once (a text or
  reasoning delta, an image or audio fragment, a signature); tool calls and code are
  buffered until their block ends because Gemini sends a ``functionCall`` whole. The
  Finish writes a last chunk with the mapped ``finishReason`` and ``usageMetadata``
  (:func:`.usage.to_usage_metadata`); ``modelVersion`` and ``responseId`` come from the
  StreamStart.

Signatures follow the origin rule of :class:`~polystream.events.SignatureDelta`: one whose
origin (``extra["carrier"]``, else the StreamStart's dialect) is ``gemini_generate`` is the
native ``thoughtSignature`` of its part. Carrier (recorded as
:class:`~polystream.dialects._base.Loss` with ``carried=True``): a signature of another
origin (Anthropic ``signature``, OpenAI/xAI ``encrypted_content``, an Interactions
signature) is written as the ``thoughtSignature`` of the part it belongs to, or of an
empty-text part right after the block's parts (``{"text": "", "thoughtSignature": ...}``,
flagged ``"thought": true`` for a reasoning block), behind the base64-safe marker that
records its origin (``polystreamv1<hex origin>x...``, see
:mod:`polystream.dialects._carrier`). Decoding attaches it to the same block (see the
decoder's signature rule) and strips the marker, giving ``extra["carrier"]``, so a hop
back to the origin writes it natively, byte for byte. ``thoughtSignature`` is a bytes
field: the marker is letters and digits, so the value is base64 (standard or URL-safe,
which google-genai accepts) whenever the signature is; a signature that is not base64 is
reported lost instead, as is one of a block with no Gemini part. Gemini validates its own
signatures, so such a stream must not be sent back to Gemini as history.

What Gemini cannot carry is reported with :meth:`lose`: refusal blocks (their text
becomes the candidate's ``finishMessage``), compaction blocks, a finish reason Gemini
has no word for (the stream's status is kept: a completed stream says ``STOP``),
server tool calls/results and ``other`` blocks of other dialects, tool input that is
not a JSON object (the call is written as cut off: ``willContinue`` without a last
fragment), citations without a URL, metadata other than grounding / URL context /
safety ratings / prompt feedback, ``cache_write_tokens``, data and signatures that
are not base64, unknown events, keep-alives (google-genai reads every line that is
not ``data:`` as JSON).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import msgspec

from polystream.dialects._base import DialectEncoder, UsageTexts
from polystream.dialects._carrier import origin, wrap_base64
from polystream.dialects._usage_fold import BATCH, fold
from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    Event,
    Finish,
    KeepAlive,
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
from polystream.wire.jsonarray import JSONArrayEncoder
from polystream.wire.jsondepth import decode_bounded

from .finish_reason import FINISH_REASONS, map_finish_reason, to_gemini_finish_reason
from .status import google_status
from .usage import to_usage_metadata
from .wire import (
    CANDIDATE_RANK,
    CHUNK_RANK,
    EXECUTABLE_CODE_RANK,
    FUNCTION_CALL_RANK,
    INLINE_DATA_RANK,
    PART_RANK,
    TOOL_CALL_RANK,
    dumps_pretty,
    dumps_sse,
    every_colon_quote_ends_a_key,
    ordered,
    tool_call_object,
    usage_shape,
)

__all__ = ["DIALECT", "GeminiGenerateEncoder", "is_base64"]

DIALECT: Final = "gemini_generate"
_DECODE: Final = msgspec.json.Decoder()
_METADATA_FIELDS: Final = {
    "grounding": "groundingMetadata",
    "url_context": "urlContextMetadata",
    "safety_ratings": "safetyRatings",
}
# What ends a line of SSE data (an unknown event's data is written a line at a time).
_LINE_BREAK: Final = re.compile(rb"\r\n|\r|\n")
# Base64 as google-genai (pydantic) accepts it: one alphabet, standard or URL-safe,
# padding optional but never wrong, no stray bits in the last symbol.
_BASE64_CHARS: Final = re.compile(r"[A-Za-z0-9+/]*|[A-Za-z0-9_-]*")
_BASE64_VALUE: Final = {
    c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
} | {"-": 62, "_": 63}
_PARTLESS: Final = frozenset({"server_tool_call", "server_tool_result", "code_result", "other"})
"""Block kinds that have a part only when their value has a Gemini form (``slot``)."""


class _Part:
    """One part being assembled: its fields, the block it belongs to, key orders."""

    __slots__ = ("block", "fields", "inner_order", "order")

    def __init__(
        self, block: int, fields: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> None:
        self.block = block
        self.fields = fields
        self.order: list[str] | None = None
        self.inner_order: list[str] | None = None
        if extra:
            rest = extra.get("part")
            if isinstance(rest, dict):
                for key, value in rest.items():
                    fields.setdefault(key, value)
            order = extra.get("part_order")
            self.order = order if isinstance(order, list) else None

    def render(self) -> dict[str, Any]:
        fields = self.fields
        for key, rank in (
            ("functionCall", FUNCTION_CALL_RANK),
            ("executableCode", EXECUTABLE_CODE_RANK),
            ("inlineData", INLINE_DATA_RANK),
            ("toolCall", TOOL_CALL_RANK),
        ):
            inner = fields.get(key)
            if isinstance(inner, dict):
                fields[key] = ordered(inner, rank, self.inner_order)
        return ordered(fields, PART_RANK, self.order)


class _Candidate:
    """A candidate's share of the chunk being assembled."""

    __slots__ = ("citations", "fields", "parts")

    def __init__(self) -> None:
        self.parts: list[_Part] = []
        self.fields: dict[str, Any] = {}
        self.citations: list[Any] = []


class _Block:
    """What the encoder remembers of a unified block."""

    __slots__ = (
        "args",
        "candidate",
        "id",
        "image",
        "index",
        "kind",
        "name",
        "pending",
        "signature",
        "slot",
        "streamed",
        "value",
    )

    def __init__(self, start: BlockStart) -> None:
        self.index = start.index
        self.kind = start.kind
        self.candidate = start.candidate
        self.id = start.id or start.call_id
        self.name = start.name
        self.streamed = bool(start.extra and start.extra.get("streamed"))
        self.slot: _Part | None = None  # the part this block fills (same dialect)
        self.args: list[str] | None = None  # buffered tool input / code (other dialects)
        self.pending: str | None = None  # this dialect's call arguments not yet JSON
        self.signature: str | None = None
        self.value = start.value  # whole tool input sent at the start (other dialects)
        self.image: DataDelta | None = None  # the latest refined partial image


class GeminiGenerateEncoder(DialectEncoder):
    """Encoder for ``streamGenerateContent`` (see the module docstring).

    Args:
        framing: ``"sse"`` (``?alt=sse``: ``data: {...}\\r\\n\\r\\n``) or ``"json_array"``
            (the default endpoint: pretty-printed elements of one JSON array).

    Call :meth:`encode` per event, then :meth:`close` (which writes the closing ``]``
    of the array). :attr:`content_type` is the HTTP content type of the framing.
    """

    dialect = DIALECT

    def __init__(self, *, framing: Literal["sse", "json_array"] = "sse") -> None:
        super().__init__()
        if framing not in ("sse", "json_array"):
            raise ValueError(f"unknown framing {framing!r}")
        self.framing = framing
        self._array = JSONArrayEncoder() if framing == "json_array" else None
        self._same = False
        self._wrote_same = False  # a chunk of this dialect was written from its extras
        self._source: str | None = None
        self._model: str | None = None
        self._id: str | None = None
        self._blocks: dict[int, _Block] = {}
        self._candidates: dict[int, _Candidate] = {}
        # The candidates written to (another dialect's), and those whose finishReason
        # went out: at the Finish, each one that began is given one (a decoder reads a
        # candidate that never finishes as a cut stream).
        self._began: set[int] = set()
        self._ended: set[int] = set()
        self._chunk_fields: dict[str, Any] = {}
        self._usage = Usage()
        self._errored = False
        self._unterminated = False
        self._buffering = 0  # foreign tool-call / code blocks still open
        self._wrote_calls = False  # a functionCall part was written (STOP means tool_calls)
        self._refusal: list[str] = []  # another dialect's refusal text (-> finishMessage)
        self._fast = True  # the byte-template paths (False: always the general path)
        # Another dialect's text parts: (candidate, thought) -> the chunk's bytes around
        # the text (for the StreamStart seen last: the chunk names its model and id).
        self._templates: dict[tuple[int, bool], tuple[bytes, bytes] | None] = {}
        # This dialect's one-text-part chunks: (candidate, thought, the chunk residual's
        # JSON) -> the chunk's bytes before the text, between it and the usage, after it.
        self._same_templates: dict[tuple[int, bool, bytes], tuple[bytes, bytes, bytes] | None] = {}
        # usageMetadata's compact JSON without digits -> how to space it (_usage_way)
        self._usage_shapes: dict[bytes, int] = {}
        # A source usageMetadata text with its digits made 1s -> how to write every
        # text of that form (_learn_usage_form)
        self._usage_forms: dict[bytes, int] = {}
        # This dialect's text part held back while nothing else is pending in its chunk:
        # (block, text, thought). Whatever else comes first adds it as a part (_unhold).
        self._held: tuple[_Block, str, bool] | None = None
        # The chunk-ending extra last written from a template (kept by identity), the
        # block and thought it was checked for, and the template's three pieces.
        self._held_cache: tuple[Any, _Block, bool, bytes, bytes, bytes] | None = None

    @property
    def content_type(self) -> str:  # type: ignore[override]
        """``text/event-stream`` for SSE, ``application/json`` for the JSON array."""
        return "application/json" if self.framing == "json_array" else "text/event-stream"

    # -- framing ---------------------------------------------------------------------------

    def _frame(self, chunk: Any, *, bare: bool = False) -> bytes:
        if self._array is not None:
            return self._array.element(dumps_pretty(chunk))
        if bare:
            # Google writes an error after SSE events as bare pretty-printed JSON.
            return dumps_pretty(chunk) + b"\n"
        return b"data: " + dumps_sse(chunk) + b"\r\n\r\n"

    def _close(self) -> bytes:
        """End of the events: the closing ``]`` of the array (nothing for SSE, nor for
        an array whose stream was cut: the decoder's Finish says so)."""
        if self._usage_batch:
            self._fold_usage()
        if self._held is not None:
            self._unhold()
        out = b""
        if self._has_pending():
            # Content never flushed (another dialect's stream without a Finish, or a
            # same-dialect stream missing its chunk-ending events): write it anyway.
            out = self._flush_foreign()
        if self._array is not None and not self._unterminated:
            out += self._array.close()
        return out

    # -- fast paths ------------------------------------------------------------------------

    def encode(self, event: Event) -> bytes:
        """Encode one unified event; returns the bytes to send now (maybe none).

        The bulk of a stream takes byte templates, in both framings, when their output is
        certain to equal the general path's (same keys, order, spacing and escaping):
        another dialect's text and reasoning deltas, each its own chunk, and this
        dialect's chunks of one text part (the text is held until the chunk's usage
        update). Another dialect's tool input and usage are kept without the general
        dispatch. Anything else takes the general path (``_fast = False``: always).
        """
        kind = type(event)
        if self._same and self._fast:
            # This dialect's chunk of one text part: the text is held, then the chunk
            # is written from a template when its usage comes (see _held_template).
            if kind is UsageUpdate:
                held = self._held
                raw = event.usage.raw  # type: ignore[union-attr]
                if held is not None and type(raw) is dict and not self._chunk_fields:
                    extra = event.extra
                    owner, text, thought = held
                    cache = self._held_cache
                    if (
                        cache is None
                        or cache[0] is not extra
                        or cache[1] is not owner
                        or cache[2] is not thought
                    ):
                        cache = self._new_held_cache(extra, owner, thought)
                    if cache is not None:
                        try:
                            value = _JSON(text)
                            compact = _JSON(raw)
                        except Exception:  # not encodable: the general path says how
                            pass
                        else:
                            self._held = None
                            self.event_index += 1
                            array = self._array
                            if array is not None:
                                # Pretty-printed, one level in: JSON text has no raw LF
                                # but the indentation's.
                                usage = _FORMAT(compact, indent=2).replace(b"\n", b"\n  ")
                                return array.element_of(
                                    (cache[3], value, cache[4], usage, cache[5])
                                )
                            shape = compact.translate(None, _DIGITS)
                            way = self._usage_shapes.get(shape)
                            if way is None:
                                way = self._learn_usage_shape(shape)
                            if way == 2:
                                usage = compact.replace(b":", b": ")
                            elif way == 1:
                                usage = compact.replace(b'":', b'": ')
                            else:
                                usage = dumps_sse(raw)
                            return b"".join((cache[3], value, cache[4], usage, cache[5]))
            elif kind is TextDelta or kind is ReasoningDelta:
                held = self._held
                if held is None and not self._candidates and event.extra is None:
                    # (_text_block, inlined: this runs on every chunk's text.)
                    block = self._blocks.get(event.index)  # type: ignore[union-attr,arg-type]
                    if block is not None:
                        thought = kind is ReasoningDelta or block.kind == "reasoning"
                        if thought or block.kind == "text":
                            self._held = (block, event.delta, thought)  # type: ignore[union-attr]
                            self.event_index += 1
                            return b""
                if held is not None:
                    self._unhold()
                if self._fast_same_part(event):  # type: ignore[arg-type]
                    self.event_index += 1
                    return b""
        elif self._fast and not self._same:
            # Another dialect's stream.
            data: bytes | None = None
            if kind is TextDelta or kind is ReasoningDelta:
                if not self._buffering and not self._candidates and not self._chunk_fields:
                    data = self._fast_foreign(event)  # type: ignore[arg-type]
            elif kind is ToolInputDelta:
                # Another dialect's tool input: buffered until the call is whole.
                block = self._blocks.get(event.index)  # type: ignore[union-attr,arg-type]
                if (
                    block is not None
                    and block.args is not None
                    and block.slot is None
                    and not (
                        block.streamed
                        and event.extra
                        and isinstance(event.extra.get("functionCall"), dict)
                    )
                ):
                    block.args.append(event.delta)  # type: ignore[union-attr]
                    data = b""
            elif kind is UsageUpdate and not event.usage.cache_write_tokens:  # type: ignore[union-attr]
                # Another dialect's usage: kept for the last chunk.
                self._usage_batch.append(event.usage)  # type: ignore[union-attr,arg-type]
                if len(self._usage_batch) >= BATCH:
                    self._fold_usage()
                data = b""
            if data is not None:
                self.event_index += 1
                return data
        if self._held is not None:
            self._unhold()
        return self._encode_pending(event)

    def writes_usage_texts(self, source: str) -> bool:
        """True for this dialect's own streams: a run of its usual chunks may come as
        their text deltas and each chunk's ``usageMetadata`` text, written as it came
        or reformatted where that is certain to give the general path's bytes (see
        :meth:`_encode_usage_texts`)."""
        return source == DIALECT

    def _encode_usage_texts(
        self, deltas: list[Event], texts: UsageTexts, extra: dict[str, Any] | None
    ) -> bytes:
        """Each delta, then the usage update of its chunk's ``usageMetadata`` text
        (``texts.update``: the decoder's), encoded.

        A chunk is written from the template of :meth:`encode`'s held text, with the
        usage text as it came or reformatted (:meth:`_learn_usage_form`, once per
        form); anything else makes the chunk's two events and encodes them.
        """
        out: list[bytes] = []
        array = self._array
        forms = self._usage_forms
        cache = self._run_template(deltas[0], extra) if deltas else None
        seen: bytes | None = None  # the form key of the chunk before
        form = 0
        update = texts.update
        for delta, usage, ones in zip(deltas, texts.texts, texts.shapes, strict=True):
            if cache is not None and type(delta) is TextDelta and delta.extra is None:
                if ones is not seen:
                    found = forms.get(ones)
                    form = self._learn_usage_form(usage, ones) if found is None else found
                    seen = ones
                if form and delta.index == cache[1].index:
                    try:
                        value = _JSON(delta.delta)
                    except Exception:  # not encodable: the general path says how
                        pass
                    else:
                        self.event_index += 2
                        if form == 2:
                            if array is not None:
                                usage = _FORMAT(usage, indent=2).replace(b"\n", b"\n  ")
                            else:
                                usage = _FORMAT(usage, indent=-1).replace(b":", b": ")
                        pieces = (cache[3], value, cache[4], usage, cache[5])
                        out.append(b"".join(pieces) if array is None else array.element_of(pieces))
                        continue
            out.append(self.encode(delta))
            out.append(self.encode(update(usage, extra)))
            cache = self._run_template(delta, extra)
        return b"".join(out)

    def _run_template(
        self, delta: Event, extra: dict[str, Any] | None
    ) -> tuple[Any, _Block, bool, bytes, bytes, bytes] | None:
        """The template :meth:`encode` writes a chunk of one text part from (the text
        of ``delta``, its usage update with ``extra``), when it would now; else None."""
        if (
            not (self._same and self._fast)
            or self._held is not None
            or self._candidates
            or self._chunk_fields
            or type(delta) is not TextDelta
            or delta.extra is not None
        ):
            return None
        block = self._blocks.get(delta.index)
        if block is None:
            return None
        thought = block.kind == "reasoning"
        if not thought and block.kind != "text":
            return None
        cache = self._held_cache
        if cache is not None and cache[0] is extra and cache[1] is block and cache[2] is thought:
            return cache
        return self._new_held_cache(extra, block, thought)

    def _new_held_cache(
        self, extra: dict[str, Any] | None, block: _Block, thought: bool
    ) -> tuple[Any, _Block, bool, bytes, bytes, bytes] | None:
        """The template for a chunk of ``block``'s text whose usage update has
        ``extra`` (:meth:`_held_template`), kept as ``_held_cache`` with what it was
        made for."""
        template = self._held_template(extra, block.candidate, thought)
        cache = self._held_cache = None if template is None else (extra, block, thought, *template)
        return cache

    def _learn_usage_form(self, text: bytes, ones: bytes) -> int:
        """How to write the usage texts whose digits made 1s are ``ones`` (at most 16
        forms remembered): 1, as they are; 2, reformatted (``msgspec.json.format``,
        then Google's spacing); 0, decoded and written by the general path.

        ``text`` decides for all: they differ from it only in the digits of their
        integers, same count at the same places (:func:`.wire.usage_shape`: none in
        a key or a string, no escape, no float; and none negative, where ``-0``
        would be written ``0``, nor of 19 digits or more, which may not decode as an
        integer), and both ways write an integer's digits as they came."""
        if len(self._usage_forms) >= 16:
            self._usage_forms.clear()
        form = 0
        if b"-" not in ones and b"1" * 19 not in ones and usage_shape(ones) is not None:
            meta = _DECODE.decode(text)
            if self._array is not None:
                expected = _FORMAT(_JSON(meta), indent=2).replace(b"\n", b"\n  ")
                reformatted = _FORMAT(text, indent=2).replace(b"\n", b"\n  ")
            else:
                expected = dumps_sse(meta)
                reformatted = _FORMAT(text, indent=-1).replace(b":", b": ")
            if text == expected:
                form = 1
            elif reformatted == expected:
                form = 2
        self._usage_forms[ones] = form
        return form

    def _learn_usage_shape(self, shape: bytes) -> int:
        """How to space a usage of this shape (:func:`_usage_way`), remembered (at most
        16 shapes)."""
        if len(self._usage_shapes) >= 16:
            self._usage_shapes.clear()
        way = self._usage_shapes[shape] = _usage_way(shape)
        return way

    def _unhold(self) -> None:
        """Add the held text part, as :meth:`_fast_same_part` would have."""
        held = self._held
        assert held is not None
        self._held = None
        self._add_text(*held)

    def _add_text(self, block: _Block, text: str, thought: bool) -> None:
        """Add a text (or thought) part of ``block``, without ``extra`` (:meth:`_add`)."""
        self._add(block, {"text": text, "thought": True} if thought else {"text": text}, None)

    def _fold_usage(self) -> None:
        """Fold the usage updates kept back (see :mod:`polystream.dialects._usage_fold`)."""
        usage = fold(self._usage, self._usage_batch)
        assert usage is not None
        self._usage = usage
        self._usage_batch.clear()

    def _text_block(self, event: TextDelta | ReasoningDelta) -> tuple[_Block, bool] | None:
        """The block of a text or reasoning delta that makes one plain text part, and
        whether the part is a thought (what :meth:`_text` and :meth:`_content` add)."""
        extra = event.extra
        if extra and ("part" in extra or "part_order" in extra):
            return None
        block = self._blocks.get(event.index)
        if block is None:
            return None
        if type(event) is ReasoningDelta:
            return block, True
        if block.kind == "text":
            return block, False
        if block.kind == "reasoning":
            return block, True
        return None

    def _fast_foreign(self, event: TextDelta | ReasoningDelta) -> bytes | None:
        """Another dialect's text or reasoning delta, its own chunk (nothing pending)."""
        found = self._text_block(event)
        if found is None:
            return None
        block, thought = found
        key = (block.candidate, thought)
        try:
            template = self._templates[key]
        except KeyError:
            template = self._templates[key] = self._foreign_template(block.candidate, thought)
            self._began.add(block.candidate)  # (written to by its templates)
        if template is None:
            return None
        try:
            text = _JSON(event.delta)
        except Exception:  # not encodable: the general path says how it fails
            return None
        # No check of the text: dumps_sse spaces the chunk exactly (see _held_template).
        if self._array is not None:
            return self._array.element_of((template[0], text, template[1]))
        return template[0] + text + template[1]

    def _foreign_template(self, candidate: int, thought: bool) -> tuple[bytes, bytes] | None:
        """The bytes of :meth:`_flush_foreign` for one text part, around the text."""
        fields: dict[str, Any] = {"text": _MARK, "thought": True} if thought else {"text": _MARK}
        body: dict[str, Any] = {"content": {"parts": [_Part(0, fields).render()], "role": "model"}}
        body["index"] = candidate
        chunk: dict[str, Any] = {"candidates": [ordered(body, CANDIDATE_RANK)]}
        if self._model is not None:
            chunk["modelVersion"] = self._model
        if self._id is not None:
            chunk["responseId"] = self._id
        try:
            if self._array is not None:  # framed per element (the array's own state)
                return _split(dumps_pretty(ordered(chunk, CHUNK_RANK)), 2)  # type: ignore[return-value]
            return _split(self._frame(ordered(chunk, CHUNK_RANK)), 2)  # type: ignore[return-value]
        except Exception:
            return None

    def _fast_same_part(self, event: TextDelta | ReasoningDelta) -> bool:
        """This dialect's text part: what :meth:`_text` adds, without the dispatch."""
        if event.extra is not None:
            return False
        found = self._text_block(event)
        if found is None:
            return False
        self._add_text(found[0], event.delta, found[1])
        return True

    def _held_template(
        self, extra: dict[str, Any] | None, number: int, thought: bool
    ) -> tuple[bytes, bytes, bytes] | None:
        """The template of a chunk holding one text part of candidate ``number``, whose
        chunk-ending usage has ``extra`` (None unless :meth:`_flush_same` writes such a
        chunk as the template does).

        The text's JSON and the usage's go into the template as they are, whatever
        they hold: :func:`.wire.dumps_sse` spaces a chunk exactly (its slower writer
        takes over where a ``":`` may be inside a string), so the pieces around them
        are what the general path writes around them.
        """
        if extra is None or len(extra) != 2:
            return None
        residuals = extra.get("candidates")
        residual_chunk = extra.get("chunk")
        # (A chunk residual naming candidates or usageMetadata replaces a placeholder:
        # _same_template then finds none.)
        if type(residuals) is not list or len(residuals) != 1 or type(residual_chunk) is not dict:
            return None
        residual = residuals[0]
        if type(residual) is not dict or len(residual) != 1:
            return None
        index = residual.get("index")
        if type(index) is not int or index != number:
            return None
        try:
            rest = _JSON(residual_chunk)
        except Exception:
            return None
        key = (number, thought, rest)
        try:
            return self._same_templates[key]
        except KeyError:
            if len(self._same_templates) >= 16:
                self._same_templates.clear()
            template = self._same_templates[key] = _same_template(
                number, thought, residual_chunk, pretty=self._array is not None
            )
            return template

    # -- events ----------------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        kind = type(event)
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._source = event.dialect
            self._same = event.dialect == DIALECT
            self._templates.clear()  # they name the model and id
            self._model = event.model
            self._id = event.id
            return b""
        if kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            if self._same and event.extra is not None and "chunk" in event.extra:
                return self._flush_same(event)
            self._usage = self._usage.merged(event.usage)
            if event.usage.cache_write_tokens:
                self.lose("usage.cache_write_tokens", event, "Gemini reports no cache writes")
            return b""
        if kind is Finish:
            assert isinstance(event, Finish)
            return self._finish(event)
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            return self._error(event)
        if kind is KeepAlive:
            assert isinstance(event, KeepAlive)
            if self._same and self._array is None and event.comment is not None:
                return b":" + (b" " + event.comment.encode() if event.comment else b"") + b"\r\n"
            # Gemini sends no keep-alives, and google-genai parses every line that is not
            # ``data:`` as JSON: an SSE comment would break it.
            self.lose("keep-alive", event, "Gemini streams have no keep-alive")
            return b""
        if kind is Unknown:
            assert isinstance(event, Unknown)
            if self._same:
                data = event.data.encode()
                if self._array is not None:
                    return self._array.element(data)
                if b"\n" in data or b"\r" in data:
                    # One data line per line of the event's data (the decoder joined
                    # them with LF): written whole, a line would be bare text, and a
                    # blank one would end the event.
                    lines = _LINE_BREAK.split(data)
                    return b"".join([b"data: " + line + b"\r\n" for line in lines]) + b"\r\n"
                return b"data: " + data + b"\r\n\r\n"
            self.lose(f"event:{event.name}", event, "an unknown event of another dialect")
            return b""
        self._content(event)
        if not self._same and self._buffering == 0 and self._has_pending():
            return self._flush_foreign()
        return b""

    def _content(self, event: Event) -> None:
        if isinstance(event, BlockStart):
            self._block_start(event)
        elif isinstance(event, TextDelta):
            self._text(event)
        elif isinstance(event, ReasoningDelta):
            block = self._blocks.get(event.index)
            if block is not None:
                self._add(block, {"text": event.delta, "thought": True}, event.extra)
        elif isinstance(event, ToolInputDelta):
            self._tool_input(event)
        elif isinstance(event, DataDelta):
            self._data(event)
        elif isinstance(event, SignatureDelta):
            self._signature(event)
        elif isinstance(event, BlockEnd):
            self._block_end(event)
        elif isinstance(event, Citation):
            self._citation(event)
        elif isinstance(event, Metadata):
            self._metadata(event)
        # StatusUpdate, Warning and Raw have no Gemini form and carry no content.

    def _cand(self, number: int) -> _Candidate:
        cand = self._candidates.get(number)
        if cand is None:
            cand = self._candidates[number] = _Candidate()
            self._began.add(number)
        return cand

    def _add(self, block: _Block, fields: dict[str, Any], extra: dict[str, Any] | None) -> _Part:
        part = _Part(block.index, fields, extra)
        self._cand(block.candidate).parts.append(part)
        return part

    def _block_start(self, event: BlockStart) -> None:
        block = _Block(event)
        self._blocks[event.index] = block
        extra = event.extra
        kind = event.kind
        if kind == "tool_call":
            if self._same and not block.streamed:
                call: dict[str, Any] = {}
                if event.name is not None:
                    call["name"] = event.name
                if event.id is not None:
                    call["id"] = event.id
                if extra and isinstance(extra.get("functionCall"), dict):
                    call.update(extra["functionCall"])
                block.slot = self._add(block, {"functionCall": call}, extra)
                block.slot.inner_order = _list(extra, "functionCall_order")
                self._wrote_calls = True
            elif not self._same:
                block.args = []
                self._buffering += 1
        elif kind == "code":
            if self._same:
                code = dict(extra.get("executableCode", {})) if extra else {}
                block.slot = self._add(block, {"executableCode": code}, extra)
                block.slot.inner_order = _list(extra, "executableCode_order")
            else:
                block.args = []
                self._buffering += 1
        elif kind == "server_tool_call" and self._same:
            block.slot = self._add(block, {"toolCall": tool_call_object(event)}, extra)
            block.slot.inner_order = _list(extra, "toolCall_order")
        elif kind in ("code_result", "server_tool_call", "server_tool_result"):
            key = {
                "code_result": "codeExecutionResult",
                "server_tool_call": "toolCall",
                "server_tool_result": "toolResponse",
            }[kind]
            value = event.value
            if self._same and isinstance(value, dict):
                block.slot = self._add(block, {key: value}, extra)
            elif kind == "code_result" and isinstance(value, dict) and "outcome" in value:
                block.slot = self._add(block, {key: value}, None)
            else:
                self.lose(f"block:{kind}", event, "Gemini has no form for this server tool block")
        elif kind == "other":
            if self._same and isinstance(event.value, dict):
                block.slot = self._add(block, dict(event.value), extra)
            else:
                self.lose("block:other", event, "a block kind Gemini cannot carry")
        elif kind == "refusal":
            self.lose(
                "block:refusal",
                event,
                "Gemini has no refusal part: its text is written as the finishMessage",
            )
        elif kind == "compaction":
            self.lose("block:compaction", event, "Gemini has no compaction part")

    def _text(self, event: TextDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if block.kind == "text":
            self._add(block, {"text": event.delta}, event.extra)
        elif block.kind == "refusal":
            self._refusal.append(event.delta)
        elif block.kind == "reasoning":
            self._add(block, {"text": event.delta, "thought": True}, event.extra)
        elif block.kind == "code":
            if block.slot is not None:
                block.slot.fields["executableCode"]["code"] = event.delta
            elif block.args is not None:
                block.args.append(event.delta)
        elif block.kind != "compaction":
            self.lose(f"text:{block.kind}", event, "text in a block kind Gemini cannot carry")

    def _tool_input(self, event: ToolInputDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if block.streamed and event.extra and isinstance(event.extra.get("functionCall"), dict):
            block.slot = self._add(
                block, {"functionCall": event.extra["functionCall"]}, event.extra
            )
        elif block.slot is not None and "functionCall" in block.slot.fields:
            if event.delta:
                # This dialect's decoder gives a call's args whole, in one delta. Deltas
                # made another way may be fragments: they are joined until they parse.
                text = event.delta if block.pending is None else block.pending + event.delta
                try:
                    args = decode_bounded(text, _DECODE, what="tool arguments")
                except msgspec.DecodeError:
                    args = None
                if isinstance(args, dict):
                    block.slot.fields["functionCall"]["args"] = args
                    block.pending = None
                else:
                    block.pending = text
        elif block.args is not None:
            block.args.append(event.delta)

    def _data(self, event: DataDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if not self._same:
            if event.replace:
                block.image = event  # written when the block ends
                return
            if not is_base64(event.delta):
                self.lose("data", event, "not base64: no Gemini client accepts it")
                return
        blob: dict[str, Any] = {}
        if event.extra and isinstance(event.extra.get("inlineData"), dict):
            blob.update(event.extra["inlineData"])
        if event.mime_type is not None:
            blob["mimeType"] = event.mime_type
        blob["data"] = event.delta
        part = self._add(block, {"inlineData": blob}, event.extra)
        part.inner_order = _list(event.extra, "inlineData_order")

    def _signature(self, event: SignatureDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            self.lose("signature", event, f"block {event.index} was never started")
            return
        if block.kind in ("refusal", "compaction") or (
            block.kind in _PARTLESS and block.slot is None and block.args is None
        ):
            self.lose("signature", event, f"a {block.kind} block has no Gemini part")
            return
        # The origin rule (see SignatureDelta): Gemini's own state is written natively;
        # another dialect's goes in the base64-safe carrier, which records the origin.
        source = origin(event.extra, self._source)
        value = event.delta
        if source is not None and source != DIALECT:
            if not is_base64(value):
                # thoughtSignature is a bytes field: clients (google-genai) reject a value
                # that is not base64, so such a signature cannot be carried.
                self.lose("signature", event, "not base64: no Gemini client accepts it")
                return
            value = wrap_base64(source, value)
            if not self._same:
                self.lose(
                    "signature",
                    event,
                    f"{source} opaque state carried in thoughtSignature (marked with its "
                    "origin); restored by a hop back to that dialect",
                    carried=True,
                )
        extra = event.extra
        if extra and isinstance(extra.get("part"), dict):
            fields = dict(extra["part"])
            fields["thoughtSignature"] = value
            self._add(block, fields, {"part_order": extra.get("part_order")})
            return
        if block.args is not None:  # a buffered foreign tool call or code block
            block.signature = (block.signature or "") + value
            return
        parts = self._cand(block.candidate).parts
        index = event.index
        for part in reversed(parts):
            if part.block == index:
                part.fields["thoughtSignature"] = part.fields.get("thoughtSignature", "") + value
                return
        # A signature-only part after the block's parts; flagged as a thought for a
        # reasoning block, so that decoding attaches it to a reasoning block only.
        fields = {"text": "", "thoughtSignature": value}
        if block.kind == "reasoning":
            fields["thought"] = True
        self._add(block, fields, None)

    def _block_end(self, event: BlockEnd) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if block.image is not None:
            # The last refinement of a partial image is the image.
            image, block.image = block.image, None
            self._data(msgspec.structs.replace(image, replace=False))
        if block.pending is not None:
            # As for another dialect's call below: never a call without its arguments.
            block.pending = None
            assert block.slot is not None
            self._unfinished(block.slot.fields["functionCall"], event)
        if block.args is None:
            return
        self._buffering -= 1
        joined = "".join(block.args)
        block.args = None
        if block.kind == "tool_call":
            call: dict[str, Any] = {}
            if block.name is not None:
                call["name"] = block.name
            args = _arguments(joined, block.value if event.value is None else event.value)
            if isinstance(args, dict):
                call["args"] = args
            else:
                self._unfinished(call, event)
            if block.id is not None:
                call["id"] = block.id
            self._wrote_calls = True
            fields: dict[str, Any] = {"functionCall": call}
        else:
            fields = {"executableCode": {"language": "PYTHON", "code": joined}}
        if block.signature is not None:
            fields["thoughtSignature"] = block.signature
        self._add(block, fields, None)

    def _unfinished(self, call: dict[str, Any], event: BlockEnd) -> None:
        """A call whose arguments are no JSON object. Gemini's args is an object: input
        that is not one (cut-off or free-text arguments) is written as a call still
        expecting fragments, which reads back as an incomplete call, never as a call
        without arguments."""
        self.lose("tool_call.arguments", event, "arguments are not a JSON object")
        call["willContinue"] = True

    def _citation(self, event: Citation) -> None:
        block = self._blocks.get(event.index) if event.index is not None else None
        number = block.candidate if block is not None else 0
        if block is None and event.extra and type(event.extra.get("candidate")) is int:
            number = event.extra["candidate"]
        source = event.citation
        if not self._same:
            mapped = _citation_source(source)
            if mapped is None:
                self.lose("citation", event, "no citationSources form for this citation")
                return
            source = mapped
        self._cand(number).citations.append(source)

    def _metadata(self, event: Metadata) -> None:
        if event.name == "finish" and isinstance(event.value, dict):
            self._cand(event.candidate).fields.update(event.value)
        elif event.name in _METADATA_FIELDS:
            self._cand(event.candidate).fields[_METADATA_FIELDS[event.name]] = event.value
        elif event.name == "prompt_feedback":
            self._chunk_fields["promptFeedback"] = event.value
        else:
            self.lose(f"metadata:{event.name}", event, "Gemini has no field for this metadata")

    def _error(self, event: ErrorEvent) -> bytes:
        error = event.error
        if error.kind == "protocol":
            self.lose("error:protocol", event, "a decoding error has no native form")
            return b""
        self._errored = True
        raw = error.raw
        if not (isinstance(raw, dict) and self._same):
            code, status = google_status(error.kind)
            raw = {
                "code": error.http_status or code,
                "message": error.message,
                "status": error.code if self._source == DIALECT and error.code else status,
            }
        self._chunk_fields["error"] = raw
        if self._same:
            return b""
        return self._flush_foreign()

    def _finish(self, event: Finish) -> bytes:
        if event.extra and event.extra.get("unterminated"):
            self._unterminated = True
        if event.status == "truncated":
            return b""
        if (
            self._same
            and (self._wrote_same or self._held_cache is not None)
            and not self._has_pending()
            and self._usage.is_empty()
        ):
            # This dialect's last chunk, written from its events' extras (by
            # _flush_same, or from a template: _held_cache), said it all. (Events that
            # name this dialect but carry none of its extras, as events made by hand
            # do, end as another dialect's would.)
            return b""
        if self._errored:
            return b""  # the error chunk ended the stream, as Gemini's would
        if event.usage is not None:
            self._usage = self._usage.merged(event.usage)
        error = event.error
        if (
            event.status == "failed"
            and error is not None
            and not self._errored
            and error.kind != "content_filter"
        ):
            # A failure without its in-band error event: write the error object.
            return self._error(ErrorEvent(error=error))
        reason = to_gemini_finish_reason(event.reason)
        if event.status == "completed" and FINISH_REASONS[reason].status != "completed":
            reason = "STOP"  # keep the stream's status when the reason has no word
        back, _ = map_finish_reason(reason, tool_calls=self._wrote_calls)
        if back.unified != event.reason.unified:
            self.lose(
                "finish_reason",
                event,
                f"Gemini has no finishReason for {event.reason.unified!r}; wrote {reason}",
            )
        if not self._candidates:
            self._cand(0)
        for number in self._began - self._ended:
            self._cand(number)
        for cand in self._candidates.values():
            cand.fields["finishReason"] = reason
        if self._refusal:
            self._cand(0).fields.setdefault("finishMessage", "".join(self._refusal))
        return self._flush_foreign(final=True)

    # -- chunks ----------------------------------------------------------------------------

    def _has_pending(self) -> bool:
        return bool(self._chunk_fields) or any(
            cand.parts or cand.fields or cand.citations for cand in self._candidates.values()
        )

    def _render_candidate(self, cand: _Candidate, base: dict[str, Any]) -> dict[str, Any]:
        out = base
        out.update(cand.fields)
        if cand.citations:
            out["citationMetadata"] = {"citationSources": cand.citations}
        return out

    def _flush_same(self, event: UsageUpdate) -> bytes:
        self._wrote_same = True
        extra = event.extra or {}
        chunk: dict[str, Any] = {}
        residuals = extra.get("candidates")
        if isinstance(residuals, list):
            rendered = []
            for pos, residual in enumerate(residuals):
                if not isinstance(residual, dict) or "_literal" in residual:
                    rendered.append(
                        residual.get("_literal") if isinstance(residual, dict) else None
                    )
                    continue
                number = residual.get("index")
                if type(number) is not int:
                    number = pos
                cand = self._candidates.pop(number, None) or _Candidate()
                parts = [part.render() for part in cand.parts]
                body: dict[str, Any] = {}
                if "_content" in residual:
                    template = residual["_content"]
                    if isinstance(template, dict):
                        body["content"] = {
                            k: (parts if k == "parts" and v is None else v)
                            for k, v in template.items()
                        }
                    elif isinstance(template, list) and template:
                        body["content"] = template[0]
                else:
                    body["content"] = {"parts": parts, "role": "model"}
                for key, value in residual.items():
                    if not key.startswith("_"):
                        body[key] = value
                body = self._render_candidate(cand, body)
                rendered.append(ordered(body, CANDIDATE_RANK, _list(residual, "_order")))
            chunk["candidates"] = rendered
        chunk.update(self._chunk_fields)
        self._chunk_fields = {}
        if event.usage.raw is not None:
            chunk["usageMetadata"] = event.usage.raw
        residual_chunk = extra.get("chunk")
        if isinstance(residual_chunk, dict):
            chunk.update(residual_chunk)
        self._candidates.clear()
        chunk = ordered(chunk, CHUNK_RANK, _list(extra, "order"))
        return self._frame(chunk, bare=bool(extra.get("bare")))

    def _flush_foreign(self, *, final: bool = False) -> bytes:
        chunk: dict[str, Any] = {}
        if self._candidates:
            rendered = []
            for number in sorted(self._candidates):
                cand = self._candidates[number]
                parts = [part.render() for part in cand.parts]
                body: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
                body = self._render_candidate(cand, body)
                body["index"] = number
                if "finishReason" in body:
                    self._ended.add(number)
                rendered.append(ordered(body, CANDIDATE_RANK))
            chunk["candidates"] = rendered
        chunk.update(self._chunk_fields)
        self._chunk_fields = {}
        self._candidates.clear()
        if final and not self._usage.is_empty():
            chunk["usageMetadata"] = to_usage_metadata(self._usage)
        if self._model is not None:
            chunk["modelVersion"] = self._model
        if self._id is not None:
            chunk["responseId"] = self._id
        return self._frame(ordered(chunk, CHUNK_RANK))


_JSON: Final = msgspec.json.Encoder().encode
_MARK: Final = "\x00polystream-text\x00"
"""Placeholder text when a byte template is made (see :func:`_split`)."""
_MARK_JSON: Final = _JSON(_MARK)
_MARK_USAGE: Final = "\x00polystream-usage\x00"
"""Placeholder for ``usageMetadata`` in a template of this dialect's chunk."""
_MARK_USAGE_JSON: Final = _JSON(_MARK_USAGE)
_DIGITS: Final = b"0123456789"
_FORMAT: Final = msgspec.json.format


def _split(data: bytes, pieces: int) -> tuple[bytes, ...] | None:
    """``data`` around the placeholders, in order (None unless each occurs once)."""
    parts = data.split(_MARK_JSON)
    if len(parts) != 2:
        return None
    if pieces == 2:
        return parts[0], parts[1]
    tail = parts[1].split(_MARK_USAGE_JSON)
    if len(tail) != 2:
        return None
    return parts[0], tail[0], tail[1]


def _same_template(
    number: int, thought: bool, residual_chunk: dict[str, Any], *, pretty: bool = False
) -> tuple[bytes, bytes, bytes] | None:
    """The bytes of :meth:`GeminiGenerateEncoder._flush_same` for a chunk of one plain text
    part, around the text and the usage: with the SSE framing, or (``pretty``) the JSON
    array's element without its framing."""
    fields: dict[str, Any] = {"text": _MARK, "thought": True} if thought else {"text": _MARK}
    body: dict[str, Any] = {
        "content": {"parts": [_Part(0, fields).render()], "role": "model"},
        "index": number,
    }
    chunk: dict[str, Any] = {"candidates": [ordered(body, CANDIDATE_RANK)]}
    chunk["usageMetadata"] = _MARK_USAGE
    chunk.update(residual_chunk)
    try:
        if pretty:
            data = dumps_pretty(ordered(chunk, CHUNK_RANK))
        else:
            data = b"data: " + dumps_sse(ordered(chunk, CHUNK_RANK)) + b"\r\n\r\n"
    except Exception:
        return None
    return _split(data, 3)  # type: ignore[return-value]


def _usage_way(shape: bytes) -> int:
    """How :func:`.wire.dumps_sse` spaces a compact JSON text whose digits removed give
    ``shape``: 2, a space after every colon; 1, after every ``":``; 0, neither (its
    slower writer).

    ``dumps_sse`` adds a space after every ``":`` unless one may be inside a string (its
    guards). The guards hold no digit and deleting digits cannot make one disappear, so
    the shape decides. When, besides, no string holds a colon (digits are neither
    quotes nor backslashes, so the shape's strings are the text's strings without
    their digits), every colon ends a key: msgspec writes no other, and spacing every
    colon is the same and faster (a one-byte search).
    """
    if not every_colon_quote_ends_a_key(shape):
        return 0
    inside = escaped = False
    for byte in shape:
        if inside:
            if escaped:
                escaped = False
            elif byte == 92:  # backslash
                escaped = True
            elif byte == 34:  # quote
                inside = False
            elif byte == 58:  # colon
                return 1
        elif byte == 34:
            inside = True
    return 2


def is_base64(text: str) -> bool:
    """Whether google-genai accepts ``text`` as base64 bytes (see ``_BASE64_CHARS``)."""
    body = text.rstrip("=")
    pad = len(text) - len(body)
    rest = len(body) % 4
    if pad > 2 or rest == 1 or (pad and (len(body) + pad) % 4):
        return False
    if not _BASE64_CHARS.fullmatch(body):
        return False
    if rest == 2:
        return _BASE64_VALUE[body[-1]] & 0xF == 0
    if rest == 3:
        return _BASE64_VALUE[body[-1]] & 0x3 == 0
    return True


def _arguments(joined: str, value: Any) -> Any:
    """A tool call's arguments from its streamed text, else from its whole value;
    None when they are not JSON."""
    if joined.strip():
        try:
            return decode_bounded(joined, _DECODE, what="tool arguments")
        except msgspec.DecodeError:
            return None
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            return decode_bounded(value, _DECODE, what="tool arguments")
        except msgspec.DecodeError:
            return None
    return {} if value is None else value


def _list(extra: dict[str, Any] | None, key: str) -> list[str] | None:
    if not extra:
        return None
    value = extra.get(key)
    return value if isinstance(value, list) else None


def _citation_source(citation: Any) -> dict[str, Any] | None:
    """A Gemini ``citationSources`` entry for another dialect's citation, if it has a URL."""
    if not isinstance(citation, dict):
        return None
    uri = citation.get("uri") or citation.get("url")
    if not isinstance(uri, str):
        return None
    out: dict[str, Any] = {}
    start = citation.get("startIndex", citation.get("start_index"))
    end = citation.get("endIndex", citation.get("end_index"))
    if type(start) is int:
        out["startIndex"] = start
    if type(end) is int:
        out["endIndex"] = end
    out["uri"] = uri
    title = citation.get("title")
    if isinstance(title, str):
        out["title"] = title
    return out

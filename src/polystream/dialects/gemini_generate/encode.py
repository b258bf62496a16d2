"""Unified events -> Gemini ``streamGenerateContent`` bytes, in both framings.

Two modes, chosen by the stream's :class:`~polystream.events.StreamStart`:

* **Same dialect** (``StreamStart.dialect == "gemini_generate"``): the events of one
  native chunk are gathered and written when the chunk-ending
  :class:`~polystream.events.UsageUpdate` arrives (see :mod:`.decode`). Parts,
  signatures, candidate fields and chunk fields come back exactly, key order
  included, without using ``raw``. A transcoder may instead hand over a run of usual
  chunks as their text deltas and each one's ``usageMetadata`` text (a
  :class:`~polystream.dialects._base.UsageRun` with its texts, to
  :meth:`~polystream.dialects._base.DialectEncoder.encode_batch`; the decoder's
  ``coalesce="usage_texts"``): the same bytes, the usage not decoded where its form is
  known to give them.
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

This module holds the fast paths (byte templates of the usual chunks, both modes) over
the general path of :mod:`._general`; :mod:`._blocks` holds what is gathered of a chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from polystream.dialects._base import UsageTexts
from polystream.dialects._usage_fold import BATCH
from polystream.events import (
    Event,
    ReasoningDelta,
    TextDelta,
    ToolInputDelta,
    UsageUpdate,
)

from ._blocks import Block, Part
from ._general import DECODE, DIALECT, GeneralEncoder, is_base64
from .wire import (
    CANDIDATE_RANK,
    CHUNK_RANK,
    dumps_pretty,
    dumps_sse,
    every_colon_quote_ends_a_key,
    ordered,
    usage_shape,
)

__all__ = ["DIALECT", "GeminiGenerateEncoder", "is_base64"]


class GeminiGenerateEncoder(GeneralEncoder):
    """Encoder for ``streamGenerateContent`` (see the module docstring).

    Args:
        framing: ``"sse"`` (``?alt=sse``: ``data: {...}\\r\\n\\r\\n``) or ``"json_array"``
            (the default endpoint: pretty-printed elements of one JSON array).

    Call :meth:`encode` per event, then :meth:`close` (which writes the closing ``]``
    of the array). :attr:`content_type` is the HTTP content type of the framing.
    """

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
                if TYPE_CHECKING:  # (the branches test ``kind``: this tells mypy)
                    assert isinstance(event, UsageUpdate)
                held = self._held
                raw = event.usage.raw
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
                if TYPE_CHECKING:
                    assert isinstance(event, TextDelta | ReasoningDelta)
                held = self._held
                if held is None and not self._candidates and event.extra is None:
                    # (_text_block, inlined: this runs on every chunk's text.)
                    block = self._blocks.get(event.index)
                    if block is not None:
                        thought = kind is ReasoningDelta or block.kind == "reasoning"
                        if thought or block.kind == "text":
                            self._held = (block, event.delta, thought)
                            self.event_index += 1
                            return b""
                if held is not None:
                    self._unhold()
                if self._fast_same_part(event):
                    self.event_index += 1
                    return b""
        elif self._fast and not self._same:
            # Another dialect's stream.
            data: bytes | None = None
            if kind is TextDelta or kind is ReasoningDelta:
                if TYPE_CHECKING:
                    assert isinstance(event, TextDelta | ReasoningDelta)
                if not self._buffering and not self._candidates and not self._chunk_fields:
                    data = self._fast_foreign(event)
            elif kind is ToolInputDelta:
                if TYPE_CHECKING:
                    assert isinstance(event, ToolInputDelta)
                # Another dialect's tool input: buffered until the call is whole.
                block = self._blocks.get(event.index)
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
                    block.args.append(event.delta)
                    data = b""
            elif kind is UsageUpdate:
                if TYPE_CHECKING:
                    assert isinstance(event, UsageUpdate)
                if not event.usage.cache_write_tokens:  # (else lost: the general path)
                    # Another dialect's usage: kept for the last chunk.
                    self._usage_batch.append(event.usage)
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
    ) -> tuple[Any, Block, bool, bytes, bytes, bytes] | None:
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
        self, extra: dict[str, Any] | None, block: Block, thought: bool
    ) -> tuple[Any, Block, bool, bytes, bytes, bytes] | None:
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
            meta = DECODE.decode(text)
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

    def _text_block(self, event: TextDelta | ReasoningDelta) -> tuple[Block, bool] | None:
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
        body: dict[str, Any] = {"content": {"parts": [Part(0, fields).render()], "role": "model"}}
        body["index"] = candidate
        chunk: dict[str, Any] = {"candidates": [ordered(body, CANDIDATE_RANK)]}
        if self._model is not None:
            chunk["modelVersion"] = self._model
        if self._id is not None:
            chunk["responseId"] = self._id
        try:
            if self._array is not None:  # framed per element (the array's own state)
                return _split2(dumps_pretty(ordered(chunk, CHUNK_RANK)))
            return _split2(self._frame(ordered(chunk, CHUNK_RANK)))
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


_JSON: Final = msgspec.json.Encoder().encode
_MARK: Final = "\x00polystream-text\x00"
"""Placeholder text when a byte template is made (see :func:`_split2`)."""
_MARK_JSON: Final = _JSON(_MARK)
_MARK_USAGE: Final = "\x00polystream-usage\x00"
"""Placeholder for ``usageMetadata`` in a template of this dialect's chunk."""
_MARK_USAGE_JSON: Final = _JSON(_MARK_USAGE)
_DIGITS: Final = b"0123456789"
_FORMAT: Final = msgspec.json.format


def _split2(data: bytes) -> tuple[bytes, bytes] | None:
    """``data`` around the text's placeholder (None unless it occurs once)."""
    parts = data.split(_MARK_JSON)
    if len(parts) != 2:
        return None
    return parts[0], parts[1]


def _split3(data: bytes) -> tuple[bytes, bytes, bytes] | None:
    """``data`` around the text's and the usage's placeholders, in order (None unless
    each occurs once)."""
    around = _split2(data)
    if around is None:
        return None
    tail = around[1].split(_MARK_USAGE_JSON)
    if len(tail) != 2:
        return None
    return around[0], tail[0], tail[1]


def _same_template(
    number: int, thought: bool, residual_chunk: dict[str, Any], *, pretty: bool = False
) -> tuple[bytes, bytes, bytes] | None:
    """The bytes of :meth:`GeminiGenerateEncoder._flush_same` for a chunk of one plain text
    part, around the text and the usage: with the SSE framing, or (``pretty``) the JSON
    array's element without its framing."""
    fields: dict[str, Any] = {"text": _MARK, "thought": True} if thought else {"text": _MARK}
    body: dict[str, Any] = {
        "content": {"parts": [Part(0, fields).render()], "role": "model"},
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
    return _split3(data)


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

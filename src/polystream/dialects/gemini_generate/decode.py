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
  fragments with padding do not concatenate as text); an audio block's
  :class:`~polystream.events.MediaInfo` is read from its ``mimeType``
  (``audio/L16;codec=pcm;rate=24000``: ``format="pcm"``, ``sample_rate=24000``,
  ``channels=1``; :func:`polystream.audio.media_of_type`); ``toolCall`` of a built-in tool ->
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
chunk is handled in one pass (``_usual_chunk``, :mod:`._chunks`); once one has been
seen, a template of its JSON text in Google's layout (:class:`._template.Template`)
lets later ones be recognised without parsing them whole: only the text and
``usageMetadata`` are parsed. Where the framing is idle, the decoder reads such chunks
itself, SSE blocks and JSON-array elements alike, and tells the framing what it read
(``_take``, :mod:`._inline`); its ``usageMetadata`` is first tried at the length of the
last one. Other JSON-array elements are parsed once, by the framing (``decode=``). A
``usageMetadata`` text equal to the last one matched is not parsed again (the same
object, so its usage is not converted again either); the usual ``usageMetadata``
(integer counts, ``promptTokensDetails``, nothing else) is converted without the
general pass (:func:`.usage.convert`). In the SSE framing the dispatch handles a chunk
that fits the template itself (``_dispatch_sse``). Each fast path emits exactly the
events of the general path (``_chunk_fields``) or leaves the chunk to it.

The decoder has each :data:`~polystream.dialects._base.Coalesce` mode: with
``coalesce="result"`` a run of chunks read inline gives one TextDelta of their texts
and one UsageUpdate of the usage merged so far; with ``"usage"`` their usage updates
come as one (:meth:`~polystream.dialects._base.DialectDecoder.take_runs` notes it); with
``"usage_texts"`` each chunk's ``usageMetadata`` text is kept besides, for Gemini's own
encoder. The modules: :mod:`._chunks` (the general way, candidates and parts),
:mod:`._bare` (bare text after SSE events), :mod:`._template` and :mod:`._inline` (the
template and the chunks read inline), :mod:`._state`; this one, the framing and the end
of the stream.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ClassVar, Final, get_args

import msgspec

from polystream.dialects._base import Coalesce, Framing
from polystream.errors import RemoteProtocolError, StreamTruncated
from polystream.events import RETRYABLE_KINDS, ErrorInfo, Event, Finish, FinishReason
from polystream.wire.framing import BLANK
from polystream.wire.jsonarray import JSONArrayDecoder, JSONElement
from polystream.wire.sse import ServerSentEvent, SSEComment

from ._chunks import DIALECT
from ._inline import InlineDecoder
from ._template import DIGITS, after_blank_line, after_comma_line, learnable, match_template
from ._template import ONES as _ONES  # noqa: F401 (its name here before _template)
from .finish_reason import map_finish_reason
from .wire import CHUNK_DECODER

__all__ = ["DIALECT", "GeminiGenerateDecoder"]

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
# How much of a large feed goes to the framing while no template is known.
_FIRST_LOOK: Final = 2048


class GeminiGenerateDecoder(InlineDecoder):
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
    private_extra: ClassVar[frozenset[str]] = frozenset(
        {"bare", "no_args", "streamed", "order", "part_order", "unterminated"}
    )
    """Markers of a part's shape and the key orders of a chunk and its parts."""
    framings = ("sse", "json_array")
    coalesce_modes = frozenset(get_args(Coalesce))
    # Off: every chunk takes the general path and JSON-array elements are parsed by
    # ``_chunk`` (the tests compare both ways).
    _fast_paths = True

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._held = b""  # the beginning of a chunk, kept for the next feed (_holds)
        # The dispatch inlines _on_event and _on_element unless a subclass replaced them.
        cls = type(self)
        self._inline_hooks = (
            cls._on_event is GeminiGenerateDecoder._on_event
            and cls._on_element is GeminiGenerateDecoder._on_element
        )

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
        boundary = after_comma_line if array else after_blank_line
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
        boundary = after_comma_line if array else after_blank_line
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
        seen = after[len(mid) :].translate(None, DIGITS)
        known = (template.block_usage + template.block.suf).translate(None, DIGITS)
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
                    found = match_template(template, data)
                    if found is not None and self._matched(template, found[0], found[1], out):
                        continue
                self._chunk(data, out)
            except RemoteProtocolError as exc:
                self._tolerate(exc, out)

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        if self._bare_ready:
            # Bare text that began where this event began came before its data line
            # (the SSE layer counted the bare lines as fields of this event).
            self._drain_bare(out, event.offset + 1, event.index)
        data = event.data
        template = self._template
        if template is not None:
            found = match_template(template, data)
            if found is not None and self._matched(template, found[0], found[1], out):
                return
        self._chunk(data, out)

    def _parse_element(self, data: bytes) -> Any:
        """Parse a JSON-array element for the framing (see ``_make_framer``): when it
        fits the template, the tuple (template, text, usageMetadata), which no JSON
        value is; else the chunk's value."""
        template = self._template
        if template is not None:
            found = match_template(template, data)
            if found is not None:
                return (template, *found)
        chunk = CHUNK_DECODER.decode(data)
        if template is None and self._template_tries and not self.keep_raw and learnable(chunk):
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
        decoder = owner()
        assert decoder is not None
        return parse(decoder, data)

    return call

"""Rebuild a final reply from unified events, for any dialect.

:class:`Accumulator` consumes the events of one stream (``feed``) and builds a
:class:`Result`. ``snapshot`` gives the reply so far at any moment; ``result()`` the
final one. Text and argument fragments are kept in lists and joined once, when their
block ends, so the total cost is linear in the stream's size; tool arguments are
parsed once, at the block's end. While a block streams, each run of
:data:`_FOLD_RUN` fragments is folded into one string as it completes (a small str
costs about 50 bytes besides its text, so 20,000 separate fragments would cost over
1 MiB); every character is then copied at most twice in all, still linear. (A
``snapshot`` of a block still open joins what it has so far; that cost is the
caller's choice.)

Rules (each one a bug class of today's tools):

* Blocks are keyed by their unified ``index``; a delta for a block never started, a
  second start of the same index, or a delta after the block's end raises
  :class:`~polystream.errors.EventOrderError`.
* Tool arguments: no fragments and no value -> ``{}`` (no-argument tools); otherwise
  the concatenated text is parsed as JSON. Invalid JSON is never turned into ``{}``:
  the tool call's ``arguments`` is None and ``error`` says whether the JSON was cut
  off (``incomplete``) or malformed; with ``strict=True`` a
  :class:`~polystream.errors.ToolArgumentsError` is raised.
* Signatures and other opaque state are concatenated and kept on their block.
* Usage merges count by count; a later empty usage never overwrites (see
  :meth:`polystream.events.Usage.merged`).
* Media: a block's base64 data deltas are joined as bytes, never as text with padding
  inside; :attr:`Result.audio`, :attr:`Result.images` and :attr:`Result.transcript`
  gather the ``audio``, ``image`` and ``transcript`` blocks of candidate 0 (see
  :mod:`polystream.media`, which also says what they cost in memory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec

from polystream.dialects._free_form import is_free_form
from polystream.errors import EventOrderError, ToolArgumentsError
from polystream.events import (
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
    KeepAlive,
    Metadata,
    Raw,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    TranscriptSegment,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)
from polystream.media import (
    Audio,
    DataParts,
    Image,
    MediaBlock,
    Segment,
    Transcript,
    audio_of,
    images_of,
    transcript_of,
)
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH, too_deep

__all__ = [
    "Accumulator",
    "Audio",
    "Block",
    "Image",
    "Result",
    "Segment",
    "ToolCall",
    "Transcript",
    "accumulate",
]

_TOOL_KINDS: Final = frozenset({"tool_call", "server_tool_call"})
_TEXTUAL_KINDS: Final = frozenset({"text", "reasoning", "refusal", "compaction", "code"})
_MEDIA_KINDS: Final = frozenset({"audio", "image", "transcript"})
_FRAGMENTS: Final = frozenset({TextDelta, ReasoningDelta, ToolInputDelta})
"""The events whose delta is a fragment of their block's text (see ``_text``)."""
_DECODE_ANY: Final = msgspec.json.Decoder()
_NO_BLOCK: Final = object()  # equal to no block index
_FOLD_RUN: Final = 256
"""Fragments folded into one string at a time while a block streams (see the module
docstring): large enough that folding costs little, small enough that the unfolded
fragments of a block stay a few KiB."""


class ToolCall(msgspec.Struct, kw_only=True, omit_defaults=False):
    """A client-side tool call the model asked for.

    Fields:
        id: The id to send the tool result back with (``call_id`` where the dialect
            distinguishes it from the item id, else the block id).
        name: The tool name.
        arguments: The parsed arguments (``{}`` for a no-argument tool), or None when
            they are not valid JSON (see ``error``). A free-form (custom) tool's
            input is text, not JSON: its ``arguments`` is that text, as it came.
        arguments_json: The arguments exactly as streamed.
        index: The unified block index.
        error: Why ``arguments`` is None: ``incomplete JSON ...`` or ``invalid JSON ...``.
    """

    id: str | None
    name: str | None
    arguments: Any
    arguments_json: str
    index: int
    error: str | None = None


class Block(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One output block of the final reply.

    Fields:
        index: Unified block index.
        kind: What the block holds.
        id: Provider identity of the block.
        call_id: Tool call id, when distinct from ``id``.
        name: Tool name (tool blocks) or provider block type (``other``).
        candidate: The candidate / choice it belongs to.
        text: Text content (text, reasoning, refusal, compaction, code blocks).
        arguments: Parsed tool input (tool blocks), or None if invalid.
        arguments_json: Tool input as streamed (tool blocks).
        data: Base64 content (image and audio blocks): one valid base64 text of the
            block's bytes (deltas that each end in padding are decoded and the bytes
            encoded once; see :mod:`polystream.media`).
        mime_type: Media type of ``data``, as the last data delta stated it.
        signature: Opaque provider state (signature, thoughtSignature, encrypted content).
        value: Whole content sent at the start or end (server tool results, ...).
        citations: Citations attached to the block, in order.
        status: The provider's final status for the block.
        complete: True when the block's end arrived.
        error: Why ``arguments`` could not be parsed.
    """

    index: int
    kind: BlockKind
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    candidate: int = 0
    text: str | None = None
    arguments: Any = None
    arguments_json: str | None = None
    data: str | None = None
    mime_type: str | None = None
    signature: str | None = None
    value: Any = None
    citations: list[Any] = msgspec.field(default_factory=list)
    status: str | None = None
    complete: bool = False
    error: str | None = None


class Result(msgspec.Struct, kw_only=True):
    """The final (or so-far) reply of one stream, in unified terms.

    Fields:
        dialect: The dialect decoded.
        id: Response / message / interaction id.
        model: Model name as the provider reported it.
        status: ``completed``, ``incomplete``, ``failed``, ``truncated``, or
            ``in_progress`` while the stream is still open.
        finish_reason: Unified and raw finish reason (None while in progress).
        text: All visible output text of candidate 0, concatenated in block order.
        reasoning: All reasoning / thought text of candidate 0, concatenated.
        refusal: Refusal text, if the model refused.
        tool_calls: Client tool calls, in order.
        usage: Canonical usage (counts None when not reported).
        error: The error that ended the stream, or the first in-band error.
        blocks: Every block, in index order.
        citations: Every citation, in order (block-level and reply-level).
        metadata: Reply-level metadata by name (grounding, safety ratings, ...) for
            candidate 0; other candidates under ``"<name>#<candidate>"``.
        warnings: Anomalies seen while decoding (sequence gaps, ...).
        errors: Every error event, in order (in-band and tolerated protocol errors).
        unknown: How many unknown native events passed through.
        audio: The ``audio`` blocks of candidate 0 joined into one (None without any).
        images: The ``image`` blocks of candidate 0, one :class:`Image` each.
        transcript: The ``transcript`` blocks of candidate 0 (None without any).
    """

    dialect: str | None = None
    id: str | None = None
    model: str | None = None
    status: str = "in_progress"
    finish_reason: FinishReason | None = None
    text: str = ""
    reasoning: str = ""
    refusal: str | None = None
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    usage: Usage = msgspec.field(default_factory=Usage)
    error: ErrorInfo | None = None
    blocks: list[Block] = msgspec.field(default_factory=list)
    citations: list[Any] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    warnings: list[Warning] = msgspec.field(default_factory=list)
    errors: list[ErrorInfo] = msgspec.field(default_factory=list)
    unknown: int = 0
    audio: Audio | None = None
    images: list[Image] = msgspec.field(default_factory=list)
    transcript: Transcript | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``polystream decode --result`` (a stable contract).

        ``audio``, ``images`` and ``transcript`` are there only when the stream had
        such blocks (:meth:`Audio.to_dict`, :meth:`Image.to_dict`,
        :meth:`Transcript.to_dict`: bytes as base64, with their count)."""
        usage = self.usage
        reason = self.finish_reason
        out: dict[str, Any] = {
            "dialect": self.dialect,
            "id": self.id,
            "model": self.model,
            "status": self.status,
            "finish_reason": None
            if reason is None
            else {"unified": reason.unified, "raw": reason.raw},
            "text": self.text,
            "reasoning": self.reasoning,
            "refusal": self.refusal,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": call.arguments}
                | ({"error": call.error} if call.error is not None else {})
                for call in self.tool_calls
            ],
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "reasoning_tokens": usage.reasoning_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "tool_prompt_tokens": usage.tool_prompt_tokens,
                "audio_input_tokens": usage.audio_input_tokens,
                "audio_output_tokens": usage.audio_output_tokens,
                "total_tokens": usage.total_tokens,
                "raw": usage.raw,
            },
            "error": None if self.error is None else _error_dict(self.error),
            "blocks": msgspec.to_builtins(self.blocks),
            "citations": self.citations,
            "metadata": self.metadata,
            "warnings": [{"code": w.code, "message": w.message} for w in self.warnings],
            "unknown": self.unknown,
        }
        if self.audio is not None:
            out["audio"] = self.audio.to_dict()
        if self.images:
            out["images"] = [image.to_dict() for image in self.images]
        if self.transcript is not None:
            out["transcript"] = self.transcript.to_dict()
        return out


def _error_dict(error: ErrorInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": error.kind,
        "message": error.message,
        "retryable": error.retryable,
    }
    if error.code is not None:
        out["code"] = error.code
    if error.http_status is not None:
        out["http_status"] = error.http_status
    if error.event_index is not None:
        out["event_index"] = error.event_index
    if error.byte_offset is not None:
        out["byte_offset"] = error.byte_offset
    return out


class _BlockState:
    """Mutable state of one block while it streams."""

    __slots__ = (
        "arguments",
        "citations",
        "data",
        "end",
        "end_value",
        "ended",
        "error",
        "fold_at",
        "parsed",
        "parts",
        "segments",
        "signature_parts",
        "start",
        "status",
    )

    def __init__(self, start: BlockStart) -> None:
        self.start = start
        self.parts: list[str] = []  # text / reasoning / tool input fragments
        # When ``parts`` reaches this length, its last _FOLD_RUN fragments are folded
        # into one string (the entries before them are already folded runs).
        self.fold_at = _FOLD_RUN
        self.data: DataParts | None = None  # base64 fragments, from the first
        self.segments: list[TranscriptSegment] | None = None
        self.signature_parts: list[str] = []
        self.citations: list[Any] = []
        self.ended = False
        self.end: BlockEnd | None = None
        self.end_value: Any = None
        self.status: str | None = None
        # Tool blocks: the arguments parsed once, at the block's end.
        self.parsed = False
        self.arguments: Any = None
        self.error: str | None = None


def _join(parts: list[str]) -> str:
    """Join fragments (the one place the accumulator concatenates text)."""
    return parts[0] if len(parts) == 1 else "".join(parts)


def _fold(state: _BlockState) -> None:
    """Fold the run of _FOLD_RUN fragments at the end of ``state.parts`` into one
    string. Only the new run is copied, never the runs folded before it, so each
    character is copied once here and once more by the final join: linear."""
    parts = state.parts
    first = len(parts) - _FOLD_RUN
    parts[first:] = [_join(parts[first:])]
    state.fold_at = first + 1 + _FOLD_RUN


def _parse_arguments(text: str) -> tuple[Any, str | None]:
    """Parse tool arguments once. Returns (value, error).

    An empty or all-blank text is a tool without arguments: ``{}``. Otherwise the
    text must be one JSON value. When it is not, the error says ``incomplete`` if the
    text is a valid JSON *prefix* (cut off: msgspec stops at the end of the input, or
    inside a number that ends the input) and ``invalid`` otherwise.
    """
    if not text.strip():
        return {}, None
    data = text.encode("utf-8", "surrogatepass")
    deep = too_deep(data)
    if deep is not None:
        # Not parsed (see polystream.wire.jsondepth): an error like invalid JSON.
        return None, (
            f"tool arguments nest deeper than {DEFAULT_MAX_DEPTH} levels (at byte {deep})"
        )
    try:
        return _DECODE_ANY.decode(data), None
    except msgspec.DecodeError as exc:
        message = str(exc)
        if message.startswith("Input data was truncated") or message.endswith(
            f"invalid number (byte {len(data)})"
        ):
            return None, "incomplete JSON in tool arguments (cut off before the end)"
        return None, f"invalid JSON in tool arguments: {message}"


class Accumulator:
    """Builds a :class:`Result` from the unified events of one stream.

    Args:
        strict: Raise :class:`~polystream.errors.ToolArgumentsError` when a finished
            tool call's arguments are not valid JSON (otherwise it is recorded on the
            tool call).

    Usage::

        acc = Accumulator()
        for event in events:
            acc.feed(event)
        result = acc.result()
    """

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        self._blocks: dict[int, _BlockState] = {}
        self._order: list[int] = []
        self._dialect: str | None = None
        self._id: str | None = None
        self._model: str | None = None
        self._usage = Usage()
        self._finish: Finish | None = None
        self._citations: list[Any] = []
        self._metadata: dict[str, Any] = {}
        self._warnings: list[Warning] = []
        self._errors: list[ErrorInfo] = []
        self._unknown = 0
        self._status = "in_progress"
        self._final: Result | None = None

    @property
    def finished(self) -> bool:
        """True once the Finish event has been fed."""
        return self._finish is not None

    def feed(self, event: Event) -> None:
        """Fold one event into the reply.

        Raises:
            EventOrderError: The event cannot happen now (see the module docstring).
        """
        self._final = None  # a Warning or KeepAlive may follow the Finish
        _HANDLERS[type(event)](self, event)

    def feed_all(self, events: Iterable[Event]) -> None:
        """Feed every event of an iterable."""
        self._final = None
        handlers = _HANDLERS
        blocks = self._blocks
        # The open block of the last fragment, while only fragments follow: its index,
        # state and fragment list (no handler ran since, so it is still open).
        last: Any = _NO_BLOCK
        state: _BlockState | None = None
        parts: list[str] = []
        for event in events:
            kind = type(event)
            if kind in _FRAGMENTS:
                # _text, inlined (most events of a stream): a fragment for an open block.
                # (The type test above makes the attributes safe; mypy cannot narrow it.)
                index: int = event.index  # type: ignore[union-attr,assignment]
                if index != last:
                    state = blocks.get(index)
                    if state is None or state.ended:
                        last = _NO_BLOCK
                        handlers[kind](self, event)
                        continue
                    last = index
                    parts = state.parts
                parts.append(event.delta)  # type: ignore[union-attr]
                if len(parts) >= state.fold_at:  # type: ignore[union-attr]
                    _fold(state)  # type: ignore[arg-type]
                continue
            if kind is UsageUpdate:
                # _usage_update, inlined (one per chunk in some dialects, e.g. Gemini); it
                # touches no block, so the open block above stays the last one.
                self._usage = self._usage.merged(event.usage)  # type: ignore[union-attr,arg-type]
                continue
            last = _NO_BLOCK
            handlers[kind](self, event)

    @property
    def snapshot(self) -> Result:
        """The reply so far (text joined up to now; arguments parsed if complete)."""
        return self._build(final=False)

    def result(self) -> Result:
        """The final reply. Before the Finish arrived, the status is ``in_progress``.

        Raises:
            ToolArgumentsError: ``strict`` and a finished tool call has invalid JSON.
        """
        if self._finish is None:
            return self._build(final=False)
        if self._final is None:
            self._final = self._build(final=True)
        return self._final

    # -- handlers ---------------------------------------------------------------------

    def _get(self, index: int, what: str) -> _BlockState:
        state = self._blocks.get(index)
        if state is None:
            raise EventOrderError(f"{what} for block {index}, which was never started")
        if state.ended:
            raise EventOrderError(f"{what} for block {index} after the block ended")
        return state

    def _stream_start(self, event: StreamStart) -> None:
        self._dialect = event.dialect
        self._id = event.id or self._id
        self._model = event.model or self._model

    def _status_update(self, event: StatusUpdate) -> None:
        pass

    def _block_start(self, event: BlockStart) -> None:
        if event.index in self._blocks:
            raise EventOrderError(f"block {event.index} started twice")
        self._blocks[event.index] = _BlockState(event)
        self._order.append(event.index)

    def _text(self, event: TextDelta | ReasoningDelta | ToolInputDelta) -> None:
        state = self._blocks.get(event.index)
        if state is None or state.ended:
            self._get(event.index, type(event).__name__)
        else:
            parts = state.parts
            parts.append(event.delta)
            if len(parts) >= state.fold_at:
                _fold(state)

    def _data(self, event: DataDelta) -> None:
        state = self._get(event.index, "DataDelta")
        data = state.data
        if data is None:
            data = state.data = DataParts()
        data.add(event)

    def _signature(self, event: SignatureDelta) -> None:
        # Signatures may arrive after the block's content (Gemini's final empty part),
        # but never for a block that does not exist.
        state = self._blocks.get(event.index)
        if state is None:
            raise EventOrderError(f"signature for block {event.index}, which was never started")
        state.signature_parts.append(event.delta)

    def _citation(self, event: Citation) -> None:
        if event.index is not None:
            state = self._blocks.get(event.index)
            if state is None:
                raise EventOrderError(f"citation for block {event.index}, which was never started")
            state.citations.append(event.citation)
        self._citations.append(event.citation)

    def _segment(self, event: TranscriptSegment) -> None:
        # A transcript's timed segment repeats text its deltas carry: kept for the
        # transcript's timing (the block must be open).
        state = self._get(event.index, "TranscriptSegment")
        if state.segments is None:
            state.segments = [event]
        else:
            state.segments.append(event)

    def _meta(self, event: Metadata) -> None:
        key = event.name if event.candidate == 0 else f"{event.name}#{event.candidate}"
        old = self._metadata.get(key)
        if event.merge and isinstance(event.value, dict) and isinstance(old, dict):
            merged = dict(old)
            for name, value in event.value.items():
                previous = merged.get(name)
                if isinstance(value, list) and isinstance(previous, list):
                    merged[name] = previous + value
                else:
                    merged[name] = value
            self._metadata[key] = merged
        else:
            self._metadata[key] = event.value

    def _block_end(self, event: BlockEnd) -> None:
        state = self._get(event.index, "BlockEnd")
        state.ended = True
        state.end = event
        state.end_value = event.value
        state.status = event.status
        # No more fragments can come: join them once, and parse tool arguments once.
        if len(state.parts) > 1:
            state.parts = [_join(state.parts)]
        if state.data is not None:
            state.data.end()
        if state.start.kind in _TOOL_KINDS:
            self._tool_arguments(state)

    def _usage_update(self, event: UsageUpdate) -> None:
        self._usage = self._usage.merged(event.usage)

    def _finish_event(self, event: Finish) -> None:
        if self._finish is not None:
            raise EventOrderError("a second Finish event")
        self._finish = event
        self._status = event.status
        if event.usage is not None:
            self._usage = self._usage.merged(event.usage)
        if event.error is not None and (not self._errors or event.error not in self._errors):
            self._errors.append(event.error)

    def _error(self, event: ErrorEvent) -> None:
        self._errors.append(event.error)

    def _warning(self, event: Warning) -> None:
        self._warnings.append(event)

    def _unknown_event(self, event: Unknown) -> None:
        self._unknown += 1

    # -- building the result --------------------------------------------------------------

    def _build(self, *, final: bool) -> Result:
        blocks: list[Block] = []
        calls: list[ToolCall] = []
        text: list[str] = []
        reasoning: list[str] = []
        refusal: list[str] = []
        media: dict[str, list[MediaBlock]] = {}
        for index in self._order:
            state = self._blocks[index]
            block = self._block(state, final=final)
            blocks.append(block)
            if block.candidate == 0 and block.kind in _MEDIA_KINDS:
                media.setdefault(block.kind, []).append(
                    MediaBlock(
                        start=state.start,
                        data=state.data,
                        complete=state.ended,
                        text=block.text,
                        end=state.end,
                        segments=state.segments or [],
                    )
                )
            if block.candidate == 0:
                if block.kind == "text" and block.text:
                    text.append(block.text)
                elif block.kind == "reasoning" and block.text:
                    reasoning.append(block.text)
                elif block.kind == "refusal" and block.text:
                    refusal.append(block.text)
            if block.kind == "tool_call":
                calls.append(
                    ToolCall(
                        id=block.call_id or block.id,
                        name=block.name,
                        arguments=block.arguments,
                        arguments_json=block.arguments_json or "",
                        index=block.index,
                        error=block.error,
                    )
                )
        finish = self._finish
        error = None
        if finish is not None and finish.error is not None:
            error = finish.error
        elif self._errors:
            error = self._errors[0]
        return Result(
            dialect=self._dialect,
            id=self._id,
            model=self._model,
            status=self._status,
            finish_reason=None if finish is None else finish.reason,
            text="".join(text),
            reasoning="".join(reasoning),
            refusal="".join(refusal) if refusal else None,
            tool_calls=calls,
            usage=self._usage,
            error=error,
            blocks=blocks,
            citations=list(self._citations),
            metadata=dict(self._metadata),
            warnings=list(self._warnings),
            errors=list(self._errors),
            unknown=self._unknown,
            audio=audio_of(media["audio"]) if "audio" in media else None,
            images=images_of(media["image"]) if "image" in media else [],
            transcript=transcript_of(media["transcript"]) if "transcript" in media else None,
        )

    def _block(self, state: _BlockState, *, final: bool) -> Block:
        start = state.start
        kind = start.kind
        block = Block(
            index=start.index,
            kind=kind,
            id=start.id,
            call_id=start.call_id,
            name=start.name,
            candidate=start.candidate,
            citations=list(state.citations),
            status=state.status,
            complete=state.ended,
        )
        joined: str | None = None
        if state.parts:
            joined = _join(state.parts)
            state.parts = [joined]  # later snapshots start from the joined text
            state.fold_at = 1 + _FOLD_RUN
        value = state.end_value if state.end_value is not None else start.value
        if kind in _TOOL_KINDS:
            if state.parsed:
                block.arguments_json, block.arguments, block.error = self._tool_arguments(state)
                if block.error is not None and self.strict and final:
                    raise ToolArgumentsError(
                        block.error, block_index=start.index, arguments=block.arguments_json
                    )
            else:
                block.arguments_json, block.arguments = _arguments_json(joined, value)
                if block.arguments is None:
                    block.error = "incomplete: the tool call's block never ended"
        elif kind in _TEXTUAL_KINDS:
            if joined is not None:
                block.text = joined
            elif isinstance(value, str):
                block.text = value
            elif value is not None:
                block.value = value
        else:
            if joined is not None:
                block.text = joined
            if value is not None:
                block.value = value
        if state.data is not None and state.data.parts:
            block.data = state.data.text()
            block.mime_type = state.data.mime_type
        if state.signature_parts:
            block.signature = _join(state.signature_parts)
        return block

    @staticmethod
    def _tool_arguments(state: _BlockState) -> tuple[str, Any, str | None]:
        """A finished tool block's (arguments_json, arguments, error), parsed once."""
        joined = state.parts[0] if state.parts else None  # joined at the block's end
        value = state.end_value if state.end_value is not None else state.start.value
        text, arguments = _arguments_json(joined, value)
        if not state.parsed:
            state.parsed = True
            if arguments is None and is_free_form(state.start):
                # A free-form (custom) tool's input is text, not JSON: kept as it came.
                state.arguments = text
            elif arguments is None:
                state.arguments, state.error = _parse_arguments(text)
            else:
                state.arguments = arguments
        return text, state.arguments, state.error


def _arguments_json(joined: str | None, value: Any) -> tuple[str, Any]:
    """A tool block's argument text, and its arguments when sent whole as an object."""
    if joined is not None:
        return joined, None
    if isinstance(value, str):
        return value, None
    if value is not None:
        return msgspec.json.encode(value).decode(), value
    return "", None


def _ignore(acc: Accumulator, event: Event) -> None:
    return None


# Each event type's handler, as a function of the accumulator and the event: a table
# of the class, not of each instance (bound methods kept by an instance would make a
# reference cycle, and a dropped accumulator, with every fragment it holds, would wait
# for the cycle collector instead of being freed at once).
_HANDLERS: Final[dict[type, Callable[[Accumulator, Any], None]]] = {
    TextDelta: Accumulator._text,
    ReasoningDelta: Accumulator._text,
    ToolInputDelta: Accumulator._text,
    DataDelta: Accumulator._data,
    SignatureDelta: Accumulator._signature,
    BlockStart: Accumulator._block_start,
    BlockEnd: Accumulator._block_end,
    Citation: Accumulator._citation,
    Metadata: Accumulator._meta,
    TranscriptSegment: Accumulator._segment,
    UsageUpdate: Accumulator._usage_update,
    StreamStart: Accumulator._stream_start,
    StatusUpdate: Accumulator._status_update,
    Finish: Accumulator._finish_event,
    ErrorEvent: Accumulator._error,
    Warning: Accumulator._warning,
    Unknown: Accumulator._unknown_event,
    KeepAlive: _ignore,
    Raw: _ignore,
}


def accumulate(events: Iterable[Event], *, strict: bool = False) -> Result:
    """Fold a whole sequence of events into a :class:`Result`."""
    acc = Accumulator(strict=strict)
    acc.feed_all(events)
    return acc.result()

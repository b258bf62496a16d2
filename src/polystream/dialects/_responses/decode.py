"""Responses SSE -> unified events (shared by ``openai_responses`` and ``xai_responses``).

One native event gives one *carrier* unified event whose ``extra`` is the native payload
without ``sequence_number`` (that is the event's ``cursor``) and without the one field
the unified event models (``delta``, ``annotation``, ``partial_image_b64``). The encoder
of the same dialect rebuilds the native event from the carrier alone. A few unified events
have no native event of their own (the encrypted content restated by
``output_item.done``, the opening of an audio block, the StreamStart of a resumed
stream): their ``extra`` is ``{"implicit": true}`` (or ``{"resumed": true}``) and the
encoder writes nothing for them.

Blocks: a ``message`` item's content parts (``output_text`` -> ``text``, ``refusal`` ->
``refusal``) are blocks; every other output item is one block (see
:data:`.wire.ITEM_KINDS`). Items are keyed by ``item_id`` when an event names it, by
``output_index`` otherwise; parallel calls are distinct items.

Fast paths: a text, argument or reasoning delta in sequence for an open block takes an
inlined hot path (:meth:`ResponsesDecoder._on_payload`); the deltas that follow it for
the same block, with nothing else between them, are taken in the dispatch loop itself
(:meth:`ResponsesDecoder._dispatch_sse`), without looking the item up again. Both give
exactly the events of the handlers; anything else, or any doubt, takes the general path.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.dialects._responses.errors import error_info
from polystream.dialects._responses.finish_reason import FINISH_REASONS, map_finish_reason
from polystream.dialects._responses.quirks import Quirks
from polystream.dialects._responses.usage import to_usage
from polystream.dialects._responses.wire import (
    DECODER,
    ITEM_KINDS,
    KNOWN_ITEM_TYPES,
    LIFECYCLE,
    STATUS_EVENTS,
    TERMINAL,
    TOOL_NAMES,
)
from polystream.errors import EventOrderError, LocalProtocolError, RemoteProtocolError
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
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
)
from polystream.wire.sse import ServerSentEvent, SSEComment

__all__ = ["ResponsesDecoder"]

_IMPLICIT: dict[str, Any] = {"implicit": True}

_TOOL_INPUT_DELTAS = frozenset(
    {
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.mcp_call_arguments.delta",
        "response.code_interpreter_call_code.delta",
        "response.shell_call_command.delta",
        "response.apply_patch_call_operation_diff.delta",
    }
)

_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)
_TEXT_DELTA: Final = "response.output_text.delta"
_ARGUMENTS_DELTA: Final = "response.function_call_arguments.delta"
_SUMMARY_DELTA: Final = "response.reasoning_summary_text.delta"
# The deltas that take the hot path (in ResponsesDecoder._on_event).
_HOT_DELTAS = frozenset({_TEXT_DELTA, _ARGUMENTS_DELTA, *_REASONING_DELTAS})
# What a run (see ResponsesDecoder._dispatch_sse) builds: its event, and for reasoning
# the payload key of the part.
_TEXT_RUN: Final = 0
_ARGUMENTS_RUN: Final = 1
_SUMMARY_RUN: Final = 2
_REASONING_RUN: Final = 3
_NO_RUN: Final = object()  # equal to no event name
_HANDLER_NAMES: Final = {
    "response.output_text.delta": "_text_delta",
    "response.refusal.delta": "_text_delta",
    "response.reasoning_summary_text.delta": "_reasoning_delta",
    "response.reasoning_text.delta": "_reasoning_delta",
    "response.output_item.added": "_item_added",
    "response.output_item.done": "_item_done",
    "response.content_part.added": "_part_added",
    "response.content_part.done": "_part_done",
    "response.output_text.annotation.added": "_annotation",
    "response.image_generation_call.partial_image": "_partial_image",
    "response.shell_call_output_content.delta": "_shell_output",
    "response.audio.delta": "_audio_delta",
    "response.audio.done": "_audio_done",
    "response.audio.transcript.delta": "_transcript_delta",
    "response.audio.transcript.done": "_transcript_done",
    "error": "_error_event",
    "keepalive": "_keepalive",
}
"""The payload types with a handler of their own, and its method's name. (Looked up on
each call: a table of the instance's bound methods would be a reference cycle, and a
dropped decoder would wait for the cycle collector instead of being freed at once.)"""


def _reasoning(
    block: int, delta: str, cursor: Any, payload: dict[str, Any], summary: bool
) -> ReasoningDelta:
    """A reasoning delta (of the summary, or of the full reasoning text) from its native
    payload, which becomes its ``extra``: the part is the payload's ``summary_index`` or
    ``content_index``."""
    part = payload.get("summary_index" if summary else "content_index")
    return ReasoningDelta(
        index=block,
        delta=delta,
        part=part if type(part) is int else None,
        summary=summary,
        cursor=cursor,
        extra=payload,
    )


class _Item:
    """One output item while it streams."""

    __slots__ = ("block", "id", "kind", "output_index", "parts", "type")

    def __init__(self, output_index: int, item_id: str | None, type_: str) -> None:
        self.output_index = output_index
        self.id = item_id
        self.type = type_
        self.block: int | None = None  # the item's block (not for messages)
        self.kind: BlockKind | None = None
        self.parts: dict[int, int] = {}  # message content_index -> block


class ResponsesDecoder(FramedDecoder):
    """Decoder for the Responses SSE stream; subclasses bind ``dialect`` and ``quirks``."""

    quirks: ClassVar[Quirks]
    private_extra: ClassVar[frozenset[str]] = frozenset({"implicit", "resumed"})
    """The markers of the events that had no native event of their own."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._started = False
        self._seq: int | None = None
        self._next_block = 0
        self._items: dict[int, _Item] = {}
        self._by_id: dict[str, _Item] = {}
        self._error: ErrorInfo | None = None
        self._output = False  # content was delivered (errors are then not retryable)
        self._tool_calls = False
        self._refusal = False
        self._text = False
        self._ended: set[int] = set()  # blocks whose end was emitted
        self._audio: int | None = None
        self._transcript: int | None = None
        # The hot path (see _on_event); never with keep_raw (the Raw event comes first).
        self._hot = self._fast_paths and not self.keep_raw
        # The run (see _dispatch_sse): (event name, item_id, content_index, block, what
        # it builds) of the last delta the hot path took, as long as no other event
        # came since; None otherwise.
        self._run: tuple[str, str, Any, int, int] | None = None

    # -- dispatch ----------------------------------------------------------------------

    def _dispatch_sse(self, frames: list[ServerSentEvent | SSEComment], out: list[Event]) -> None:
        """The frames of one ``feed``: runs of deltas taken in this loop, the rest through
        the base class's dispatch.

        A run: once the hot path (:meth:`_on_event`) has taken a delta, each following
        event that is the next delta of the same block (same event name, payload type,
        ``item_id`` and ``content_index``, the next ``sequence_number``, a string
        ``delta``) needs no lookup: nothing else happened since (any other event goes
        through :meth:`_general`, which ends the run), so the hot path would find the
        same item and open block. Anything else leaves the payload untouched and goes
        to :meth:`_on_payload`. The frame location and ``_seq`` are recorded when the
        run hands over and at the end.
        """
        if not self._hot:
            super()._dispatch_sse(frames, out)
            return
        decode = DECODER.decode
        append = out.append
        # The run, unpacked (name is _NO_RUN, equal to no event name, when there is none).
        name: Any = _NO_RUN
        item_id: Any = None
        ci: Any = None
        block = 0
        what = _TEXT_RUN
        if self._run is not None:
            name, item_id, ci, block, what = self._run
        # The cursor the run expects next (a run implies a sequence_number so far).
        following = self._seq + 1 if self._seq is not None else -1
        taken: ServerSentEvent | None = None  # the last frame the run took
        for frame in frames:
            if type(frame) is not ServerSentEvent:
                self._handle_sse(frame, out)  # a comment: no state changes
                continue
            payload: Any = None
            if frame.event == name:
                try:
                    payload = decode(frame.data)
                except (msgspec.DecodeError, RecursionError):
                    payload = None  # _on_event decodes it again and raises as usual
                if type(payload) is dict:
                    try:
                        kind = payload["type"]
                        cursor = payload["sequence_number"]
                        delta = payload["delta"]
                        same = payload["item_id"] == item_id
                    except KeyError:
                        same = False
                    if (
                        same
                        and cursor == following
                        and kind == name
                        and type(cursor) is int
                        and type(delta) is str
                    ):
                        hot: Event | None = None
                        if what == _TEXT_RUN:
                            index = payload.get("content_index")
                            if index == ci and type(index) is int:
                                hot = TextDelta(
                                    index=block, delta=delta, part=ci, cursor=cursor, extra=payload
                                )
                        elif what == _ARGUMENTS_RUN:
                            hot = ToolInputDelta(
                                index=block, delta=delta, cursor=cursor, extra=payload
                            )
                        else:
                            hot = _reasoning(block, delta, cursor, payload, what == _SUMMARY_RUN)
                        if hot is not None:
                            del payload["sequence_number"]
                            del payload["delta"]
                            following = cursor + 1
                            taken = frame
                            append(hot)
                            continue
            # Anything else: as the base class dispatches it (with the payload decoded).
            if taken is not None:
                self._seq = following - 1
                taken = None
            if self.finished:
                self._handle_sse(frame, out)
            else:
                self.frame_index = frame.index
                self.frame_offset = frame.offset
                try:
                    if type(payload) is dict:
                        self._on_payload(frame, payload, out)
                    else:
                        self._on_event(frame, out)
                except RemoteProtocolError as exc:
                    self._tolerate(exc, out)
            if self._run is not None:
                name, item_id, ci, block, what = self._run
                following = self._seq + 1 if self._seq is not None else -1
            else:
                name = _NO_RUN
        if taken is not None:
            self._seq = following - 1
            self.frame_index = taken.index
            self.frame_offset = taken.offset

    def feed_payload(self, payload: Any, data: str, *, index: int) -> list[Event]:
        """One event given without SSE framing: its JSON text ``data`` already parsed
        into ``payload`` (a Responses WebSocket message holds one event). The events are
        those of the SSE event ``event: <payload type>`` / ``data: <data>``; ``payload``
        becomes their ``extra`` (the caller hands it over). Errors are located at event
        ``index`` (the message's index) and byte offset 0 (the message's start).

        Raises:
            RemoteProtocolError: (strict mode) As :meth:`feed`.
            LocalProtocolError: After :meth:`close`.
        """
        if self._closed:
            raise LocalProtocolError("feed_payload() after close()", dialect=self.dialect)
        kind = payload.get("type") if type(payload) is dict else None
        frame = ServerSentEvent(data=data, event=kind if type(kind) is str else None, index=index)
        out: list[Event] = []
        self.frame_index = index
        self.frame_offset = 0
        try:
            if self.finished:
                self._after_finish(frame, out)
            else:
                self._on_payload(frame, payload, out)
        except RemoteProtocolError as exc:
            self._tolerate(exc, out)
        return out

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        try:
            payload = DECODER.decode(event.data)
        except msgspec.DecodeError as exc:
            self._run = None
            raise self.protocol_error(f"malformed JSON payload: {exc}") from None
        self._on_payload(event, payload, out)

    def _on_payload(self, event: ServerSentEvent, payload: Any, out: list[Event]) -> None:
        """One event's decoded payload: the hot path, else :meth:`_general`."""
        name = event.event
        if name in _HOT_DELTAS and self._hot and type(payload) is dict:
            # The hot path (inlined: most events of a stream): a text, argument or
            # reasoning delta named by its SSE event, in sequence, for an open block.
            # Any other case leaves ``payload`` untouched and goes to _general, which
            # gives the same events through the handlers (_text_delta, _tool_delta,
            # _reasoning_delta) or the precise error.
            try:
                kind = payload["type"]
                seq = payload["sequence_number"]
                item = self._by_id[payload["item_id"]]
                delta = payload["delta"]
            except (KeyError, TypeError):  # a key missing, or an unhashable item_id
                kind = None
            last = self._seq
            if (
                kind == name
                and type(seq) is int
                and type(delta) is str
                and last is not None
                and seq == last + 1
            ):
                hot: Event | None = None
                ci = None
                what = _TEXT_RUN
                if kind == _TEXT_DELTA:
                    ci = payload.get("content_index")
                    block = item.parts.get(ci) if type(ci) is int else None
                    if block is not None and block not in self._ended:
                        hot = TextDelta(
                            index=block, delta=delta, part=ci, cursor=seq, extra=payload
                        )
                        self._text = True
                else:
                    block = item.block
                    if block is not None and block not in self._ended:
                        if kind == _ARGUMENTS_DELTA:
                            hot = ToolInputDelta(
                                index=block, delta=delta, cursor=seq, extra=payload
                            )
                            what = _ARGUMENTS_RUN
                        else:
                            summary = kind == _SUMMARY_DELTA
                            hot = _reasoning(block, delta, seq, payload, summary)
                            what = _SUMMARY_RUN if summary else _REASONING_RUN
                if hot is not None:
                    assert block is not None
                    # The extra is the payload less the cursor and the modelled delta.
                    self._run = (name, payload["item_id"], ci, block, what)
                    del payload["sequence_number"]
                    del payload["delta"]
                    self._seq = seq
                    self._output = True
                    out.append(hot)
                    return
        self._general(event, payload, out)

    def _general(self, event: ServerSentEvent, payload: Any, out: list[Event]) -> None:
        """Every event through its handler (the hot path's events included)."""
        self._run = None  # the state may change: a run starts afresh from the hot path
        if type(payload) is not dict:
            raise self.protocol_error(f"payload is a JSON {type(payload).__name__}, not an object")
        kind = payload.get("type")
        name = event.event
        if kind is None:
            if name is None:
                raise self.protocol_error("payload has no type and the event has no name")
            self._unknown(name, event.data, None, out)
            return
        if type(kind) is not str:
            raise self.protocol_error("payload type is not a string")
        if name is not None and name != kind:
            raise self.protocol_error(f"event name {name!r} disagrees with data.type {kind!r}")
        if self.keep_raw:
            self.raw_event(out, name, DECODER.decode(event.data))
        seq = payload.pop("sequence_number", None)
        if seq is not None:
            self._check_sequence(seq, out)
        handler = _HANDLER_NAMES.get(kind)
        if handler is not None:
            getattr(self, handler)(payload, seq, out)
        elif kind in _TOOL_INPUT_DELTAS:
            self._tool_delta(payload, seq, out)
        elif kind in STATUS_EVENTS:
            self._item(payload, kind)  # the item must exist
            status = kind.rsplit(".", 1)[1]
            out.append(StatusUpdate(status=status, cursor=seq, extra=payload))
        elif kind in LIFECYCLE:
            self._lifecycle(payload, seq, out)
        elif kind in TERMINAL:
            self._terminal(payload, seq, kind, out)
        else:
            self._unknown(kind, event.data, seq, out)

    def _unknown(self, name: str, data: str, seq: Any, out: list[Event]) -> None:
        if self.strict:
            raise self.protocol_error(f"unknown event {name!r}")
        out.append(Unknown(name=name, data=data, cursor=seq))

    def _check_sequence(self, seq: Any, out: list[Event]) -> None:
        """``sequence_number`` must grow by one: report gaps, repeats and reordering."""
        if type(seq) is not int:
            raise self.protocol_error("sequence_number is not an integer")
        last = self._seq
        if last is not None:
            if seq == last:
                self.warn(out, "sequence_duplicate", f"sequence_number {seq} repeated")
            elif seq < last:
                self.warn(out, "sequence_reorder", f"sequence_number {seq} arrived after {last}")
            elif seq != last + 1:
                self.warn(
                    out,
                    "sequence_gap",
                    f"sequence_number jumped from {last} to {seq} ({seq - last - 1} missing)",
                )
        if last is None or seq > last:
            self._seq = seq

    # -- helpers -------------------------------------------------------------------------

    def _new_block(self) -> int:
        index = self._next_block
        self._next_block += 1
        return index

    def _start(self, response: Any, out: list[Event]) -> None:
        """Open the stream when it did not begin with ``response.created`` (resumed)."""
        if self._started:
            return
        self._started = True
        resp = response if isinstance(response, dict) else {}
        created = resp.get("created_at")
        rid = resp.get("id")
        model = resp.get("model")
        out.append(
            StreamStart(
                dialect=self.dialect,
                id=rid if isinstance(rid, str) else None,
                model=model if isinstance(model, str) else None,
                created=created if type(created) is int else None,
                extra={"resumed": True},
            )
        )

    def _item(self, payload: dict[str, Any], kind: str) -> _Item:
        """The item an event refers to (by ``item_id``, else ``output_index``)."""
        item_id = payload.get("item_id")
        item = None
        if isinstance(item_id, str):
            item = self._by_id.get(item_id)
        if item is None:
            index = payload.get("output_index")
            if type(index) is int:
                item = self._items.get(index)
                if item is not None and isinstance(item_id, str) and item.id != item_id:
                    item = None
        if item is None:
            raise EventOrderError(f"{kind} for an output item never added")
        return item

    def _block_of(self, payload: dict[str, Any], kind: str) -> int:
        item = self._item(payload, kind)
        if item.block is None:
            raise EventOrderError(f"{kind} for a message item (it has no such content)")
        if item.block in self._ended:
            raise EventOrderError(f"{kind} after its output item was done")
        return item.block

    def _pop_str(self, payload: dict[str, Any], key: str, kind: str) -> str:
        value = payload.get(key)
        if type(value) is not str:
            raise self.protocol_error(f"{kind} has no string {key!r}")
        del payload[key]
        return value

    # -- lifecycle ---------------------------------------------------------------------

    def _lifecycle(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        kind = payload["type"]
        resp = payload.get("response")
        if not isinstance(resp, dict):
            raise self.protocol_error(f"{kind} has no response object")
        if kind == "response.created" and not self._started:
            self._started = True
            created = resp.get("created_at")
            rid = resp.get("id")
            model = resp.get("model")
            out.append(
                StreamStart(
                    dialect=self.dialect,
                    id=rid if isinstance(rid, str) else None,
                    model=model if isinstance(model, str) else None,
                    created=created if type(created) is int else None,
                    cursor=seq,
                    extra=payload,
                )
            )
            return
        # A resumed background stream starts here, without response.created.
        self._start(resp, out)
        status = resp.get("status")
        out.append(
            StatusUpdate(
                status=status if isinstance(status, str) else kind[9:],
                cursor=seq,
                extra=payload,
            )
        )

    def _terminal(self, payload: dict[str, Any], seq: Any, kind: str, out: list[Event]) -> None:
        resp = payload.get("response")
        if not isinstance(resp, dict):
            raise self.protocol_error(f"{kind} has no response object")
        self._start(resp, out)
        status = TERMINAL[kind]
        details = resp.get("incomplete_details")
        raw = details.get("reason") if isinstance(details, dict) else None
        if not isinstance(raw, str):
            state = resp.get("status")
            raw = state if isinstance(state, str) else status
        if self.strict and raw not in FINISH_REASONS:
            raise self.protocol_error(f"unknown status or incomplete reason {raw!r}")
        reason = map_finish_reason(
            raw, tool_calls=self._tool_calls, refusal=self._refusal and not self._text
        )
        error = None
        if isinstance(resp.get("error"), dict):
            error = error_info(resp["error"], output_started=self._output)
        elif status == "failed":
            error = self._error or ErrorInfo(kind="unknown", message="response failed")
        self.emit_finish(
            out,
            Finish(
                status=status,  # type: ignore[arg-type]
                reason=reason,
                usage=to_usage(
                    resp.get("usage"),
                    reasoning_maybe_excluded=self.quirks.reasoning_maybe_excluded,
                ),
                error=error,
                cursor=seq,
                extra=payload,
            ),
        )

    def _error_event(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        # ``error`` is terminal; the Finish waits for close() in case response.failed follows.
        info = error_info(payload, output_started=self._output)
        if self._error is None:
            self._error = info
        out.append(ErrorEvent(error=info, cursor=seq, extra=payload))

    def _on_close(self, out: list[Event], truncation: Any) -> None:
        if not self.finished and self._error is not None and truncation is None:
            self.emit_finish(
                out,
                Finish(
                    status="failed",
                    reason=FinishReason(unified="error", raw="error"),
                    error=self._error,
                    extra=_IMPLICIT,
                ),
            )

    def _keepalive(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        out.append(KeepAlive(name=payload["type"], cursor=seq, extra=payload))

    # -- items and parts ---------------------------------------------------------------

    def _item_added(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        item = payload.get("item")
        index = payload.get("output_index")
        if not isinstance(item, dict) or type(index) is not int:
            raise self.protocol_error("output_item.added without item and output_index")
        if index in self._items:
            raise EventOrderError(f"output_index {index} added twice")
        item_type = item.get("type")
        if type(item_type) is not str:
            raise self.protocol_error(f"output item type {item_type!r} is not a string")
        if self.strict and item_type not in KNOWN_ITEM_TYPES:
            raise self.protocol_error(f"unknown output item type {item_type!r}")
        self._start(None, out)
        item_id = item.get("id")
        state = _Item(index, item_id if isinstance(item_id, str) else None, item_type)
        self._items[index] = state
        if state.id is not None:
            self._by_id[state.id] = state
        if item_type == "message":
            status = item.get("status")
            out.append(
                StatusUpdate(
                    status=status if isinstance(status, str) else "in_progress",
                    cursor=seq,
                    extra=payload,
                )
            )
            return
        kind: BlockKind = ITEM_KINDS.get(state.type, "other")
        if item_type == "custom_tool_call":
            kind = self.quirks.custom_tool_kind
        if kind == "tool_call":
            self._tool_calls = True
        name = item.get("name")
        if not isinstance(name, str):
            name = (
                None
                if kind in ("reasoning", "compaction")
                else TOOL_NAMES.get(state.type, state.type)
            )
        call_id = item.get("call_id")
        state.kind = kind
        state.block = self._new_block()
        out.append(
            BlockStart(
                index=state.block,
                kind=kind,
                id=state.id,
                call_id=call_id if isinstance(call_id, str) else None,
                name=name,
                cursor=seq,
                extra=payload,
            )
        )

    def _item_done(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        item = payload.get("item")
        index = payload.get("output_index")
        if not isinstance(item, dict) or type(index) is not int:
            raise self.protocol_error("output_item.done without item and output_index")
        state = self._items.get(index)
        if state is None:
            raise EventOrderError(f"output_item.done for output_index {index}, never added")
        status = item.get("status")
        status = status if isinstance(status, str) else None
        if state.block is None:
            out.append(StatusUpdate(status=status or "completed", cursor=seq, extra=payload))
            return
        block = state.block
        if block in self._ended:
            raise EventOrderError(f"output_item.done twice for output_index {index}")
        self._ended.add(block)
        encrypted = item.get("encrypted_content")
        if isinstance(encrypted, str) and encrypted:
            out.append(SignatureDelta(index=block, delta=encrypted, extra=_IMPLICIT))
        value: Any = None
        itype = state.type
        if itype in {"function_call", "mcp_call"}:
            value = item.get("arguments")
        elif itype == "custom_tool_call":
            value = item.get("input")
        elif itype == "web_search_call":
            value = item.get("action")
        elif itype == "file_search_call":
            value = {"queries": item.get("queries")}
        elif itype == "code_interpreter_call":
            value = item.get("code")
        elif itype == "reasoning":
            parts = item.get("summary") or item.get("content")
            value = (
                "".join(
                    p["text"]
                    for p in parts
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
                if isinstance(parts, list)
                else ""
            )
        elif itype == "image_generation_call":
            result = item.get("result")
            if isinstance(result, str) and result:
                fmt = item.get("output_format")
                out.append(
                    DataDelta(
                        index=block,
                        delta=result,
                        mime_type=f"image/{fmt}" if isinstance(fmt, str) else None,
                        replace=True,
                        extra=_IMPLICIT,
                    )
                )
        elif state.kind in {"other", "server_tool_call"}:
            value = item
        out.append(BlockEnd(index=block, status=status, value=value, cursor=seq, extra=payload))

    def _part_added(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        item = self._item(payload, "content_part.added")
        part = payload.get("part")
        ci = payload.get("content_index")
        if not isinstance(part, dict) or type(ci) is not int:
            raise self.protocol_error("content_part.added without part and content_index")
        if item.type != "message":
            # reasoning_text parts of a reasoning item: the item is the block
            out.append(StatusUpdate(status="added", cursor=seq, extra=payload))
            return
        if ci in item.parts:
            raise EventOrderError(f"content_index {ci} of item {item.id} added twice")
        ptype = part.get("type")
        kind: BlockKind = (
            "text" if ptype == "output_text" else "refusal" if ptype == "refusal" else "other"
        )
        block = self._new_block()
        item.parts[ci] = block
        out.append(
            BlockStart(
                index=block,
                kind=kind,
                id=item.id,
                name=None if kind != "other" else str(ptype),
                cursor=seq,
                extra=payload,
            )
        )

    def _part_done(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        item = self._item(payload, "content_part.done")
        ci = payload.get("content_index")
        if item.type != "message":
            out.append(StatusUpdate(status="done", cursor=seq, extra=payload))
            return
        block = item.parts.get(ci) if type(ci) is int else None
        if block is None:
            raise EventOrderError(f"content_part.done for content_index {ci}, never added")
        if block in self._ended:
            raise EventOrderError(f"content_part.done twice for content_index {ci}")
        self._ended.add(block)
        part = payload.get("part")
        value = None
        if isinstance(part, dict):
            value = part.get("text", part.get("refusal"))
        out.append(BlockEnd(index=block, value=value, cursor=seq, extra=payload))

    # -- deltas ------------------------------------------------------------------------

    def _text_delta(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        kind = payload["type"]
        item = self._item(payload, kind)
        ci = payload.get("content_index")
        block = item.parts.get(ci) if type(ci) is int else None
        if block is None:
            raise EventOrderError(f"{kind} for content_index {ci}, never added")
        if block in self._ended:
            raise EventOrderError(f"{kind} after content part {ci} was done")
        delta = self._pop_str(payload, "delta", kind)
        self._output = True
        if kind == "response.refusal.delta":
            self._refusal = True
        else:
            self._text = True
        out.append(TextDelta(index=block, delta=delta, part=ci, cursor=seq, extra=payload))

    def _reasoning_delta(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        kind = payload["type"]
        block = self._block_of(payload, kind)
        delta = self._pop_str(payload, "delta", kind)
        self._output = True
        out.append(_reasoning(block, delta, seq, payload, kind == _SUMMARY_DELTA))

    def _tool_delta(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        kind = payload["type"]
        block = self._block_of(payload, kind)
        delta = self._pop_str(payload, "delta", kind)
        self._output = True
        out.append(ToolInputDelta(index=block, delta=delta, cursor=seq, extra=payload))

    def _annotation(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        item = self._item(payload, "output_text.annotation.added")
        ci = payload.get("content_index")
        block = item.parts.get(ci) if type(ci) is int else None
        if block is None:
            raise EventOrderError(f"annotation for content_index {ci}, never added")
        annotation = payload.pop("annotation", None)
        out.append(Citation(citation=annotation, index=block, part=ci, cursor=seq, extra=payload))

    def _partial_image(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        kind = payload["type"]
        block = self._block_of(payload, kind)
        data = self._pop_str(payload, "partial_image_b64", kind)
        fmt = payload.get("output_format")
        partial = payload.get("partial_image_index")
        self._output = True
        out.append(
            DataDelta(
                index=block,
                delta=data,
                mime_type=f"image/{fmt}" if isinstance(fmt, str) else None,
                replace=True,
                partial=partial if type(partial) is int else None,
                cursor=seq,
                extra=payload,
            )
        )

    def _shell_output(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        # ``delta`` is an object {stdout, stderr}: it stays in extra, the text is a view.
        kind = payload["type"]
        block = self._block_of(payload, kind)
        delta = payload.get("delta")
        text = ""
        if isinstance(delta, dict):
            text = "".join(
                v for v in (delta.get("stdout"), delta.get("stderr")) if isinstance(v, str)
            )
        out.append(TextDelta(index=block, delta=text, cursor=seq, extra=payload))

    def _audio_delta(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        if self._audio is None:
            self._audio = self._new_block()
            out.append(BlockStart(index=self._audio, kind="audio", extra=_IMPLICIT))
        delta = self._pop_str(payload, "delta", "response.audio.delta")
        self._output = True
        out.append(DataDelta(index=self._audio, delta=delta, cursor=seq, extra=payload))

    def _audio_done(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        if self._audio is None:
            out.append(StatusUpdate(status="done", cursor=seq, extra=payload))
            return
        out.append(BlockEnd(index=self._audio, cursor=seq, extra=payload))
        self._audio = None

    def _transcript_delta(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        if self._transcript is None:
            self._transcript = self._new_block()
            # ``other``, not ``text``: the transcript of the audio is not more output text
            # (Chat Completions keeps it apart too, in ``message.audio.transcript``).
            out.append(
                BlockStart(index=self._transcript, kind="other", name="transcript", extra=_IMPLICIT)
            )
        delta = self._pop_str(payload, "delta", "response.audio.transcript.delta")
        self._output = True
        out.append(TextDelta(index=self._transcript, delta=delta, cursor=seq, extra=payload))

    def _transcript_done(self, payload: dict[str, Any], seq: Any, out: list[Event]) -> None:
        if self._transcript is None:
            out.append(StatusUpdate(status="done", cursor=seq, extra=payload))
            return
        out.append(BlockEnd(index=self._transcript, cursor=seq, extra=payload))
        self._transcript = None

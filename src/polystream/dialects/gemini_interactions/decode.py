"""Gemini Interactions SSE -> unified events.

Native event -> unified events (the first one listed is the *primary* event: it carries in
``extra`` every native field it does not model, so the encoder can rebuild the native
event from it alone; the others are marked ``extra["derived"] = True`` and exist for
consumers only):

==============================================  =============================================
native                                          unified
==============================================  =============================================
``interaction.created`` / ``interaction.start``  StreamStart (id, model)
``interaction.status_update`` / ``.in_progress``  StatusUpdate (+ UsageUpdate if ``usage``)
/ ``.requires_action`` / ``.cancelled``
``step.start`` / ``content.start``              BlockStart (+ Text/Reasoning/Data/Signature
                                                deltas and Citations for content the step
                                                carries already)
``step.delta`` / ``content.delta``              one delta event by delta type (see below)
``step.stop`` / ``content.stop``                BlockEnd (+ UsageUpdate if ``usage``)
``interaction.completed`` / ``.complete``       StatusUpdate(final status) + UsageUpdate
``error``                                       ErrorEvent (kind from ``error.code``)
``done`` (``data: [DONE]``)                     Finish (status from the final interaction)
anything else                                   Unknown (a protocol error in strict mode)
==============================================  =============================================

Delta types: ``text`` -> TextDelta; ``thought_summary`` -> ReasoningDelta(summary);
``thought_signature`` -> SignatureDelta; ``arguments_delta`` -> ToolInputDelta (partial
JSON); ``text_annotation_delta`` -> Citation per annotation; ``image`` / ``audio`` /
``document`` / ``video`` -> DataDelta; every ``*_call`` / ``*_result`` delta (and the legacy
``function_call``) carries a whole object -> ToolInputDelta whose text is the compact JSON of
its ``arguments`` / ``result`` (one fragment, so it parses on its own), plus a derived
SignatureDelta when it carries a ``signature``. A signature in polystream's carrier
(``polystream:v1:<origin>:<bytes>``, another dialect's state) is given as the original bytes
with ``extra["carrier"]`` = the origin (see :class:`SignatureDelta`).

Every unified event carries ``cursor = event_id`` of the native event it came from (the
resume cursor, see :func:`polystream.dialects.gemini_interactions.resume_cursor`).

Deliberate choices:

* The BlockStart of a step is emitted when its first delta (or any other event) arrives, so
  that a ``model_output`` step that streams an image is an ``image`` block and a legacy
  ``content.start`` whose call id and name only come in the delta still gets them.
* A stream that starts without ``interaction.created`` is a *resumed* stream
  (``last_event_id``): a synthetic StreamStart (``extra.resumed``) opens it and a delta for
  a step started before the resume point opens an implicit block (``extra.implicit``).
  Without the resume, such a delta is a protocol error.
* ``interaction.completed`` without ``done`` finishes from the final interaction after a
  ``missing_done`` warning; ``error`` without ``done`` finishes ``failed``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.dialects._carrier import CARRIER_PREFIX, unwrap
from polystream.errors import EventOrderError, RemoteProtocolError, StreamTruncated
from polystream.events import (
    RETRYABLE_KINDS,
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import ServerSentEvent

from .finish_reason import STATUS_TABLE, error_kind, map_status
from .usage import convert_usage
from .wire import (
    FAST_DELTA,
    FINAL_EVENTS,
    LEGACY_EVENTS,
    NAMED_STEP_TYPES,
    START_EVENTS,
    STATUS_EVENTS,
    WHOLE_DELTA_SUFFIXES,
    FastStepDelta,
    encode_json,
    kind_of_step,
    main_field,
    step_type_of,
)

__all__ = ["DIALECT", "Decoder"]

DIALECT: Final = "gemini_interactions"

_ANY_DECODER: Final = msgspec.json.Decoder()
_DATA_TYPES: Final = frozenset({"image", "audio", "document", "video"})
_DELTA_EVENTS: Final = frozenset({"step.delta", "content.delta"})
_ENVELOPE: Final = frozenset({"event_type", "event_id"})
# Statuses that end a turn (a final interaction may still follow); not in_progress/queued/idle.
_TERMINAL_STATUSES: Final = frozenset(STATUS_TABLE) - {"in_progress", "queued", "idle"}


def _derived() -> dict[str, Any]:
    """``extra`` of a derived event (a fresh mapping: events never share one)."""
    return {"derived": True}


def _derived_signature(index: int, value: str, cursor: Any) -> SignatureDelta:
    """A derived SignatureDelta; a carrier's original bytes with their origin."""
    extra = _derived()
    source, value = unwrap(value, DIALECT)
    if source is not None:
        extra["carrier"] = source
    return SignatureDelta(index=index, delta=value, cursor=cursor, extra=extra)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Step:
    """One provider step (or legacy content block) while it streams."""

    __slots__ = (
        "cursor",
        "ended",
        "extra",
        "implicit",
        "kind",
        "payload_rest",
        "provider",
        "step",
        "stype",
        "unified",
    )

    def __init__(
        self,
        unified: int,
        provider: int,
        stype: str,
        *,
        step: dict[str, Any],
        payload_rest: dict[str, Any],
        cursor: Any,
        extra: dict[str, Any],
        implicit: bool = False,
    ) -> None:
        self.unified = unified
        self.provider = provider
        self.stype = stype
        self.step = step
        self.payload_rest = payload_rest
        self.cursor = cursor
        self.extra = extra  # flags of the native event (no_event_type, ...)
        self.implicit = implicit
        self.ended = False
        self.kind = "other"  # the unified kind, once the BlockStart is out


class Decoder(FramedDecoder):
    """Decode a Gemini Interactions SSE stream (either schema) into unified events.

    Args:
        strict: Raise typed protocol errors (unknown events and delta types included)
            instead of emitting ErrorEvent / Unknown and continuing.
        keep_raw: Emit a Raw event before the unified events of each native event.

    Feed bytes with :meth:`feed` in any chunking, then call :meth:`close`; the last event
    is always the one Finish.
    """

    dialect = DIALECT
    private_extra: ClassVar[frozenset[str]] = frozenset(
        {
            "derived",
            "implicit",
            "resumed",
            "absent",
            "bare",
            "from_delta",
            "no_status",
            "no_final",
            "no_index",
            "no_event_name",
            "no_event_type",
            "schema",
        }
    )
    """Markers of how each event stood in the native stream (derived from another,
    without an event of its own, which keys it lacked, its schema)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._legacy: bool | None = None  # schema, once an event has told
        self._started = False
        self._resumed = False
        self._steps: dict[int, _Step] = {}  # provider index -> latest step with it
        self._held: list[_Step] = []  # steps whose BlockStart is not emitted yet
        self._last: _Step | None = None
        self._next_index = 0
        self._final: dict[str, Any] | None = None  # the final interaction object
        self._status: str | None = None  # last status seen
        self._error: ErrorInfo | None = None
        self._usage: Usage | None = None
        self._frame: ServerSentEvent | None = None  # the event being decoded
        self._fast_ok = self._fast_paths and not self.keep_raw  # see _fast_delta

    # -- framing hooks ---------------------------------------------------------------------

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        self._frame = event
        name = event.event
        data = event.data
        if data == "[DONE]" or name == "done":
            self._flush(out)
            self._on_done(event, out)
            return
        if self._started and self._fast_ok and name in _DELTA_EVENTS:
            try:
                fast: FastStepDelta | None = FAST_DELTA.decode(data)
            except msgspec.DecodeError:
                fast = None  # not the hot shape: the general path decides
            if fast is not None:
                # A text delta for an open step, inlined (the same event as _fast_delta).
                step = self._steps.get(fast.index)
                delta = fast.delta
                text = delta.text
                if (
                    delta.type == "text"
                    and text is not None
                    and fast.event_type == name
                    and step is not None
                    and not step.ended
                    and not self._held
                ):
                    out.append(TextDelta(index=step.unified, delta=text, cursor=fast.event_id))
                    self.last_cursor = fast.event_id
                    return
                if self._fast_delta(fast, name, out):
                    return
        payload = self.decode_json(data, _ANY_DECODER)
        if type(payload) is not dict:
            raise self.protocol_error(
                f"{name or 'event'} payload is not a JSON object: {data[:60]!r}"
            )
        cursor = payload.get("event_id")
        if not (cursor is None or type(cursor) is str or _is_int(cursor)):
            raise self.protocol_error(f"event_id is not a string: {cursor!r}")
        if cursor is not None:
            # Every native event with an id is a resume point (``last_event_id``), even
            # one that yields no unified event yet (a step.start whose BlockStart waits).
            self.last_cursor = cursor
        etype = payload.get("event_type")
        flags: dict[str, Any] = {}
        if etype is None:
            if name is None:
                self._unknown(None, data, cursor, out)
                return
            etype = name
            flags["no_event_type"] = True
        elif type(etype) is not str:
            raise self.protocol_error(f"event_type is not a string: {etype!r}")
        elif name is None:
            flags["no_event_name"] = True
        elif name != etype:
            raise self.protocol_error(
                f"SSE event name {name!r} disagrees with the payload's event_type {etype!r}"
            )
        self.raw_event(out, name, payload)
        if self._legacy is None and etype not in STATUS_EVENTS and etype != "error":
            self._legacy = etype in LEGACY_EVENTS
        if not self._started and etype not in START_EVENTS:
            self._start_resumed(out)
        if etype not in _DELTA_EVENTS:
            self._flush(out)
        if etype in _DELTA_EVENTS:
            self._on_delta(payload, cursor, flags, out)
        elif etype in ("step.start", "content.start"):
            self._on_step_start(payload, cursor, flags, etype == "content.start", out)
        elif etype in ("step.stop", "content.stop"):
            self._on_step_stop(payload, cursor, flags, out)
        elif etype in STATUS_EVENTS:
            self._on_status(etype, payload, cursor, flags, out)
        elif etype in START_EVENTS:
            self._on_start(etype, payload, cursor, flags, out)
        elif etype in FINAL_EVENTS:
            self._on_final(etype, payload, cursor, flags, out)
        elif etype == "error":
            self._on_error(payload, cursor, flags, out)
        else:
            self._unknown(name or etype, data, cursor, out)

    def _tolerate(self, exc: RemoteProtocolError, out: list[Event]) -> None:
        """A protocol error at the current event: held BlockStarts go out first (order is
        kept), and in tolerant mode the ErrorEvent keeps the offending event's name and
        data in ``error.raw`` so nothing received is lost (the encoder re-emits it)."""
        self._flush(out)
        count = len(out)
        super()._tolerate(exc, out)
        if (
            len(out) > count
            and isinstance(out[-1], ErrorEvent)
            and self._frame is not None
            and self._frame.index == self.frame_index  # (not an event never parsed)
        ):
            error = out[-1].error
            raw = {"event": self._frame.event, "data": self._frame.data}
            out[-1] = ErrorEvent(error=msgspec.structs.replace(error, raw=raw))

    def _on_close(self, out: list[Event], truncation: StreamTruncated | None) -> None:
        self._flush(out)
        if self.finished:
            return
        if truncation is None and self._error is not None:
            # spec section 1: ``event: error`` is the in-band failure; no ``done`` needed.
            self.emit_finish(out, self._finish({"done": False}))
        elif truncation is None and (self._final is not None or self._status in _TERMINAL_STATUSES):
            self.warn(out, "missing_done", "stream closed after the final interaction without done")
            self.emit_finish(out, self._finish({"done": False}))

    # -- the hot path ------------------------------------------------------------------

    def _fast_delta(self, payload: FastStepDelta, name: str, out: list[Event]) -> bool:
        """A text / signature / arguments delta with only documented fields, for an open
        step whose BlockStart is out: built without any intermediate dict."""
        step = self._steps.get(payload.index)
        if payload.event_type != name or step is None or step.ended or self._held:
            return False
        delta = payload.delta
        cursor = payload.event_id
        if delta.type == "text" and delta.text is not None:
            out.append(TextDelta(index=step.unified, delta=delta.text, cursor=cursor))
        elif (
            delta.type == "thought_signature"
            and delta.signature is not None
            and not delta.signature.startswith(CARRIER_PREFIX)  # a carrier: the slow path
        ):
            out.append(SignatureDelta(index=step.unified, delta=delta.signature, cursor=cursor))
        elif delta.type == "arguments_delta" and delta.arguments is not None:
            out.append(ToolInputDelta(index=step.unified, delta=delta.arguments, cursor=cursor))
        else:
            return False
        self.last_cursor = cursor
        return True

    # -- lifecycle ---------------------------------------------------------------------------

    def _start_resumed(self, out: list[Event]) -> None:
        """The stream began after a resume point: open it with a synthetic StreamStart."""
        self._started = True
        self._resumed = True
        extra: dict[str, Any] = {"resumed": True}
        if self._legacy:
            extra["schema"] = "legacy"
        out.append(StreamStart(dialect=DIALECT, extra=extra))

    def _interaction_of(
        self, payload: dict[str, Any], flags: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Split a lifecycle payload into (interaction object, other top-level fields)."""
        rest = {k: v for k, v in payload.items() if k not in _ENVELOPE}
        if "interaction" in rest:
            interaction = rest.pop("interaction")
            if type(interaction) is not dict:
                raise self.protocol_error("interaction is not a JSON object")
            return interaction, rest
        # Legacy examples send the interaction's fields at the top level.
        flags["bare"] = True
        return rest, {}

    def _on_start(
        self,
        etype: str,
        payload: dict[str, Any],
        cursor: Any,
        flags: dict[str, Any],
        out: list[Event],
    ) -> None:
        interaction, rest = self._interaction_of(payload, flags)
        self._started = True
        extra = dict(flags)
        if etype == "interaction.start":
            extra["schema"] = "legacy"
        iid = interaction.get("id")
        model = interaction.get("model")
        others = {
            k: v
            for k, v in interaction.items()
            if not (k == "id" and type(iid) is str) and not (k == "model" and type(model) is str)
        }
        if others:
            extra["interaction"] = others
        if rest:
            extra["p"] = rest
        status = interaction.get("status")
        if type(status) is str:
            self._status = status
        out.append(
            StreamStart(
                dialect=DIALECT,
                id=iid if type(iid) is str else None,
                model=model if type(model) is str else None,
                cursor=cursor,
                extra=extra or None,
            )
        )

    def _on_status(
        self,
        etype: str,
        payload: dict[str, Any],
        cursor: Any,
        flags: dict[str, Any],
        out: list[Event],
    ) -> None:
        rest = {k: v for k, v in payload.items() if k not in _ENVELOPE}
        status = rest.pop("status", None)
        extra = dict(flags)
        if type(status) is not str:
            if status is not None:
                rest["status"] = status
            else:
                extra["no_status"] = True
            # ``interaction.in_progress`` carries no status: the name says it.
            status = etype.split(".", 1)[1] if etype != "interaction.status_update" else "unknown"
        if etype != "interaction.status_update":
            extra["event"] = etype
        if rest:
            extra["p"] = rest
        self._status = status
        out.append(StatusUpdate(status=status, cursor=cursor, extra=extra or None))
        self._usage_from(rest.get("usage"), cursor, out)

    def _on_final(
        self,
        etype: str,
        payload: dict[str, Any],
        cursor: Any,
        flags: dict[str, Any],
        out: list[Event],
    ) -> None:
        interaction, rest = self._interaction_of(payload, flags)
        status = interaction.get("status")
        extra = dict(flags)
        extra["event"] = etype
        others = dict(interaction)
        if type(status) is str:
            del others["status"]
        else:
            extra["no_status"] = True
            status = "unknown"
        extra["interaction"] = others
        if rest:
            extra["p"] = rest
        self._final = interaction
        self._status = status
        out.append(StatusUpdate(status=status, cursor=cursor, extra=extra))
        self._usage_from(interaction.get("usage"), cursor, out)

    def _usage_from(self, raw: Any, cursor: Any, out: list[Event]) -> None:
        if type(raw) is dict:
            usage = convert_usage(raw)
            self._usage = usage if self._usage is None else self._usage.merged(usage)
            out.append(UsageUpdate(usage=usage, cursor=cursor, extra=_derived()))

    def _on_error(
        self, payload: dict[str, Any], cursor: Any, flags: dict[str, Any], out: list[Event]
    ) -> None:
        rest = {k: v for k, v in payload.items() if k not in ("event_type", "event_id", "error")}
        raw = payload.get("error")
        if type(raw) is dict:
            code = raw.get("code")
            message = raw.get("message")
            kind = error_kind(code)
            info = ErrorInfo(
                kind=kind,
                message=message if type(message) is str else "",
                retryable=kind in RETRYABLE_KINDS,
                code=None if code is None else str(code),
                raw=raw,
            )
        else:
            info = ErrorInfo(kind="unknown", message="error event without an error object", raw=raw)
            flags = {**flags, "no_error": "error" not in payload}
        extra = dict(flags)
        if rest:
            extra["p"] = rest
        if self._error is None:
            self._error = info
        out.append(ErrorEvent(error=info, cursor=cursor, extra=extra or None))

    def _on_done(self, event: ServerSentEvent, out: list[Event]) -> None:
        extra: dict[str, Any] = {}
        if event.data != "[DONE]":
            extra["data"] = event.data
        if event.event != "done":
            extra["event"] = event.event
        if not self._started:
            self._start_resumed(out)
        if self._final is None and self._error is None and self._status not in _TERMINAL_STATUSES:
            self.warn(out, "no_final_interaction", "done without a final interaction")
        self.emit_finish(out, self._finish(extra or None))

    def _finish(self, extra: dict[str, Any] | None) -> Finish:
        """The Finish for the end of the stream, from the final interaction (or the error)."""
        final = self._final
        usage = self._usage
        if final is None and self._error is None:
            # The source had no final interaction: the encoder must not invent one.
            extra = {**(extra or {}), "no_final": True}
        if final is not None and type(final.get("usage")) is dict:
            usage = convert_usage(final["usage"])
        if self._error is not None:
            return Finish(
                status="failed",
                reason=FinishReason(
                    unified="error", raw=final.get("status") if final is not None else None
                ),
                usage=usage,
                error=self._error,
                extra=extra,
            )
        status, reason = map_status(self._status)
        error = None
        if status == "failed":
            errors = final.get("errors") if final is not None else None
            first = errors[0] if type(errors) is list and errors else None
            code = first.get("code") if type(first) is dict else None
            message = first.get("message") if type(first) is dict else None
            kind = error_kind(code)
            error = ErrorInfo(
                kind=kind,
                message=message if type(message) is str else "the interaction failed",
                retryable=kind in RETRYABLE_KINDS,
                code=None if code is None else str(code),
                raw=first,
            )
        return Finish(status=status, reason=reason, usage=usage, error=error, extra=extra)

    def _unknown(self, name: str | None, data: str, cursor: Any, out: list[Event]) -> None:
        if self.strict:
            raise self.protocol_error(f"unknown event {name!r}")
        out.append(Unknown(name=name, data=data, cursor=cursor))

    # -- steps -------------------------------------------------------------------------------

    def _on_step_start(
        self,
        payload: dict[str, Any],
        cursor: Any,
        flags: dict[str, Any],
        legacy: bool,
        out: list[Event],
    ) -> None:
        index = payload.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.protocol_error("step.start without an integer index")
        previous = self._steps.get(index)
        if previous is not None and not previous.ended:
            # A new block all the same (unified indices are never reused); the old one
            # simply never ends.
            self.warn(out, "step_restarted", f"step.start for step {index}, which is still open")
        key = "content" if legacy else "step"
        step = payload.get(key)
        if step is None and key not in payload and type(payload.get("type")) is str:
            # Legacy examples put the content's fields beside the index:
            # ``{"index": 0, "type": "text"}`` (migration guide).
            flags["bare"] = True
            step = {k: v for k, v in payload.items() if k not in _ENVELOPE and k != "index"}
        if type(step) is not dict or type(step.get("type")) is not str:
            raise self.protocol_error(f"{key} is not an object with a string type")
        rest = {
            k: v
            for k, v in payload.items()
            if k not in _ENVELOPE and k not in ("index", key) and not flags.get("bare")
        }
        state = _Step(
            self._next_index,
            index,
            step["type"],
            step=step,
            payload_rest=rest,
            cursor=cursor,
            extra=flags,
        )
        self._next_index += 1
        self._steps[index] = state
        self._held.append(state)
        self._last = state

    def _lookup(self, payload: dict[str, Any], what: str, flags: dict[str, Any]) -> _Step:
        index = payload.get("index")
        if index is None and "index" not in payload and self._last is not None:
            # Legacy examples omit the index on deltas: the open block is meant.
            if self._last.ended:
                raise EventOrderError(
                    f"{what} without an index after the last step "
                    f"(step {self._last.provider}) stopped",
                    dialect=self.dialect,
                    event_index=self.frame_index,
                    byte_offset=self.frame_offset,
                )
            flags["no_index"] = True
            return self._last
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.protocol_error(f"{what} without an integer index")
        state = self._steps.get(index)
        if state is None:
            if not self._resumed:
                raise self.protocol_error(f"{what} for step {index}, which was never started")
            return self._implicit(index, payload)
        if state.ended:
            if not self._resumed:
                raise self.protocol_error(f"{what} for step {index} after it stopped")
            return self._implicit(index, payload)
        return state

    def _implicit(self, index: int, payload: dict[str, Any]) -> _Step:
        """A step opened before the resume point: guess its type from the delta."""
        delta = payload.get("delta")
        dtype = delta.get("type") if type(delta) is dict else None
        if dtype in ("thought_summary", "thought_signature"):
            stype = "thought"
        elif dtype in ("arguments_delta", "function_call"):
            stype = "function_call"
        elif type(dtype) is str and dtype.endswith(WHOLE_DELTA_SUFFIXES):
            stype = dtype
        else:
            stype = "text" if self._legacy else "model_output"
        state = _Step(
            self._next_index,
            index,
            stype,
            step={"type": stype},
            payload_rest={},
            cursor=None,
            extra={},
            implicit=True,
        )
        self._next_index += 1
        self._steps[index] = state
        self._held.append(state)
        self._last = state
        return state

    def _flush(
        self, out: list[Event], target: _Step | None = None, delta: dict[str, Any] | None = None
    ) -> None:
        """Emit the BlockStarts still held back, in order; ``delta`` (the first delta of
        ``target``) refines that block's kind and identity."""
        if not self._held:
            return
        pending, self._held = self._held, []
        for state in pending:
            self._emit_start(state, out, delta if state is target else None)

    def _emit_start(self, state: _Step, out: list[Event], delta: dict[str, Any] | None) -> None:
        legacy = bool(self._legacy)
        step = state.step
        stype = state.stype
        kind, name = kind_of_step(stype)
        if stype == "model_output":
            content = step.get("content")
            first: Any = None
            if type(content) is list and content and type(content[0]) is dict:
                first = content[0].get("type")
            elif delta is not None:
                first = delta.get("type")
            if first in ("image", "audio"):
                kind = first
            elif first in ("document", "video"):
                kind, name = "other", "model_output"
        modelled = {"type"}
        block_id = step.get("id")
        if type(block_id) is str:
            modelled.add("id")
        else:
            block_id = None
        call_id = step.get("call_id")
        if type(call_id) is str:
            modelled.add("call_id")
        else:
            call_id = None
        if stype in NAMED_STEP_TYPES and type(step.get("name")) is str:
            name = step["name"]
            modelled.add("name")
        value = None
        if kind in ("tool_call", "server_tool_call", "server_tool_result"):
            main = main_field(stype)
            if main in step:
                value = step[main]
                modelled.add(main)
        extra: dict[str, Any] = dict(state.extra)
        borrowed: list[str] = []
        if delta is not None:
            # Legacy deltas carry the call's identity that content.start lacked.
            if block_id is None and type(delta.get("id")) is str:
                block_id = delta["id"]
                borrowed.append("id")
            if call_id is None and type(delta.get("call_id")) is str:
                call_id = delta["call_id"]
                borrowed.append("call_id")
            if (
                (name is None or kind == "server_tool_call")
                and stype in NAMED_STEP_TYPES
                and type(delta.get("name")) is str
            ):
                name = delta["name"]
                borrowed.append("name")
        if borrowed:
            extra["from_delta"] = borrowed
        if step_type_of(kind, name, legacy) != stype:
            extra["type"] = stype
        if state.provider != state.unified:
            extra["index"] = state.provider
        if state.implicit:
            extra["implicit"] = True
        else:
            rest = {k: v for k, v in step.items() if k not in modelled}
            if rest:
                extra["step"] = rest
            if state.payload_rest:
                extra["p"] = state.payload_rest
        index = state.unified
        cursor = state.cursor
        state.kind = kind
        out.append(
            BlockStart(
                index=index,
                kind=kind,  # type: ignore[arg-type]
                id=block_id,
                call_id=call_id,
                name=name,
                value=value,
                cursor=cursor,
                extra=extra or None,
            )
        )
        if state.implicit:
            return
        # Content the step carries already, for consumers (the encoder uses ``step``).
        signature = step.get("signature")
        if type(signature) is str:
            out.append(_derived_signature(index, signature, cursor))
        summary = step.get("summary")
        if type(summary) is list:
            for item in summary:
                if (
                    type(item) is dict
                    and item.get("type") == "text"
                    and type(item.get("text")) is str
                ):
                    out.append(
                        ReasoningDelta(
                            index=index,
                            delta=item["text"],
                            summary=True,
                            cursor=cursor,
                            extra=_derived(),
                        )
                    )
        if stype == "model_output":
            content = step.get("content")
            if type(content) is list:
                for item in content:
                    self._derived_content(index, item, cursor, out)
        elif legacy and stype in ("text", "image", "audio"):
            self._derived_content(index, step, cursor, out)

    def _derived_content(self, index: int, item: Any, cursor: Any, out: list[Event]) -> None:
        if type(item) is not dict:
            return
        ctype = item.get("type")
        if ctype == "text" and type(item.get("text")) is str and item["text"]:
            out.append(TextDelta(index=index, delta=item["text"], cursor=cursor, extra=_derived()))
        elif type(ctype) is str and ctype in _DATA_TYPES and type(item.get("data")) is str:
            mime = item.get("mime_type")
            out.append(
                DataDelta(
                    index=index,
                    delta=item["data"],
                    mime_type=mime if type(mime) is str else None,
                    cursor=cursor,
                    extra=_derived(),
                )
            )
        annotations = item.get("annotations")
        if type(annotations) is list:
            for annotation in annotations:
                out.append(
                    Citation(index=index, citation=annotation, cursor=cursor, extra=_derived())
                )

    def _on_step_stop(
        self, payload: dict[str, Any], cursor: Any, flags: dict[str, Any], out: list[Event]
    ) -> None:
        state = self._lookup(payload, "step.stop", flags)
        self._flush(out)
        rest = {k: v for k, v in payload.items() if k not in ("event_type", "event_id", "index")}
        status = rest.pop("status", None)
        if status is not None and type(status) is not str:
            rest["status"] = status
            status = None
        extra = dict(flags)
        if rest:
            extra["p"] = rest
        state.ended = True
        out.append(BlockEnd(index=state.unified, status=status, cursor=cursor, extra=extra or None))
        self._usage_from(rest.get("usage"), cursor, out)

    def _on_delta(
        self, payload: dict[str, Any], cursor: Any, flags: dict[str, Any], out: list[Event]
    ) -> None:
        state = self._lookup(payload, "step.delta", flags)
        delta = payload.get("delta")
        if type(delta) is not dict or type(delta.get("type")) is not str:
            raise self.protocol_error("step.delta without a delta object with a string type")
        self._flush(out, state, delta)
        dtype: str = delta["type"]
        index = state.unified
        extra = dict(flags)
        rest_payload = {
            k: v
            for k, v in payload.items()
            if k not in ("event_type", "event_id", "index", "delta")
        }
        if rest_payload:
            extra["p"] = rest_payload
        drest = {k: v for k, v in delta.items() if k != "type"}
        primary: Event
        if dtype == "text":
            text = self._main_str(drest, "text", extra)
            if drest:
                extra["d"] = drest
            primary = TextDelta(index=index, delta=text, cursor=cursor, extra=extra or None)
        elif dtype == "thought_summary":
            content = drest.pop("content", None)
            if (
                type(content) is dict
                and content.get("type") == "text"
                and type(content.get("text")) is str
            ):
                others = {k: v for k, v in content.items() if k not in ("type", "text")}
                if others:
                    extra["content"] = others
                text = content["text"]
            else:
                if "content" in delta:
                    extra["content_raw"] = content
                else:
                    extra["absent"] = True
                text = ""
            if drest:
                extra["d"] = drest
            primary = ReasoningDelta(
                index=index, delta=text, summary=True, cursor=cursor, extra=extra or None
            )
        elif dtype == "thought_signature":
            text = self._main_str(drest, "signature", extra)
            source, text = unwrap(text, DIALECT)
            if source is not None:
                # Another dialect's state in the carrier: its origin (see SignatureDelta).
                extra["carrier"] = source
            if drest:
                extra["d"] = drest
            primary = SignatureDelta(index=index, delta=text, cursor=cursor, extra=extra or None)
        elif dtype == "arguments_delta":
            text = self._main_str(drest, "arguments", extra)
            if drest:
                extra["d"] = drest
            primary = ToolInputDelta(index=index, delta=text, cursor=cursor, extra=extra or None)
        elif type(dtype) is str and dtype in _DATA_TYPES:
            text = self._main_str(drest, "data", extra)
            mime = drest.get("mime_type")
            if type(mime) is str:
                del drest["mime_type"]
            else:
                mime = None
            if dtype != data_delta_type(state.kind):
                extra["dt"] = dtype
            if drest:
                extra["d"] = drest
            primary = DataDelta(
                index=index, delta=text, mime_type=mime, cursor=cursor, extra=extra or None
            )
        elif dtype == "text_annotation_delta":
            annotations = drest.pop("annotations", None)
            if drest:
                extra["d"] = drest
            if type(annotations) is list and annotations:
                if len(annotations) > 1:
                    extra["more"] = annotations[1:]
                out.append(
                    Citation(
                        index=index, citation=annotations[0], cursor=cursor, extra=extra or None
                    )
                )
                for annotation in annotations[1:]:
                    out.append(
                        Citation(index=index, citation=annotation, cursor=cursor, extra=_derived())
                    )
                return
            if "annotations" in delta:
                extra["annotations_raw"] = annotations
            else:
                extra["absent"] = True
            primary = Citation(index=index, citation=None, cursor=cursor, extra=extra)
        elif dtype.endswith(WHOLE_DELTA_SUFFIXES) or dtype == "function_call":
            main = main_field(dtype)
            if main in drest:
                text = encode_json(drest.pop(main))
            else:
                text = ""
                extra["absent"] = True
            extra["dt"] = dtype
            if drest:
                extra["d"] = drest
            primary = ToolInputDelta(index=index, delta=text, cursor=cursor, extra=extra)
        else:
            if self.strict:
                raise self.protocol_error(f"unknown step.delta type {dtype!r}")
            out.append(Unknown(name="step.delta", data=encode_json(payload), cursor=cursor))
            return
        out.append(primary)
        signature = drest.get("signature")
        if type(signature) is str and dtype != "thought_signature":
            out.append(_derived_signature(index, signature, cursor))
        annotations = drest.get("annotations")
        if type(annotations) is list:
            for annotation in annotations:
                out.append(
                    Citation(index=index, citation=annotation, cursor=cursor, extra=_derived())
                )

    def _main_str(self, drest: dict[str, Any], key: str, extra: dict[str, Any]) -> str:
        """Pop the delta's main string field; an absent one is flagged for re-encoding."""
        if key not in drest:
            extra["absent"] = True
            return ""
        value = drest.pop(key)
        if type(value) is not str:
            raise self.protocol_error(f"delta field {key!r} is not a string")
        return value


def data_delta_type(kind: str) -> str:
    """The data delta type an encoder writes into a block of ``kind`` by default."""
    return "audio" if kind == "audio" else "image"

"""Messages SSE -> unified events (Anthropic Messages, xAI ``/v1/messages``).

The stream (Anthropic docs, "Streaming Messages", "Event types")::

    message_start -> (content_block_start -> content_block_delta* -> content_block_stop)*
    -> message_delta -> message_stop        (ping anywhere, error anywhere)

Mapping (``docs/dialects/anthropic_messages.md`` has the full table):

* ``message_start`` -> :class:`StreamStart` (+ :class:`UsageUpdate` for its usage). The
  programmatic-tool-calling continuation form carries whole content blocks and a stop
  reason in ``message_start``: each block becomes BlockStart, its content, BlockEnd,
  all marked ``extra["in_start"]``.
* ``content_block_start`` -> :class:`BlockStart` with a fresh unified index (never
  reused, even when the provider reuses its own: xAI); content the start already holds
  (non-empty text, ``redacted_thinking`` data, a thinking signature) follows as deltas
  marked ``extra["start"]``.
* ``content_block_delta`` -> TextDelta / ReasoningDelta / ToolInputDelta /
  SignatureDelta / Citation; ``compaction_delta`` -> TextDelta (+ SignatureDelta for
  ``encrypted_content``).
* ``content_block_stop`` -> :class:`BlockEnd`.
* ``message_delta`` -> :class:`UsageUpdate` (cumulative usage; the native ``delta``
  kept in ``extra["delta"]``); the stop reason is remembered for the Finish.
* ``message_stop`` -> :class:`Finish`. ``error`` -> :class:`ErrorEvent` + a ``failed``
  Finish. ``ping`` -> :class:`KeepAlive`. Anything else -> :class:`Unknown`.

Fields not modelled travel in ``extra`` (``fields``: other top-level keys; ``block`` /
``message``: difference from the skeleton; ``delta``: other delta keys; ``event``: the
SSE event name when it differs from the payload type; ``index``: the provider's block
index when it differs from the dialect's rule), so the encoder reproduces the stream.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.dialects._carrier import unwrap
from polystream.dialects._messages.error_kind import error_info
from polystream.dialects._messages.finish_reason import (
    KNOWN_STOP_REASONS,
    map_stop_reason,
    status_for,
)
from polystream.dialects._messages.quirks import ANTHROPIC, Quirks, next_provider_index
from polystream.dialects._messages.usage import merge_native, to_usage
from polystream.dialects._messages.wire import (
    CARRIER_PREFIX,
    CONTENT_BLOCK_FAST,
    FAST_DECODER,
    GENERIC_DECODER,
    RESULT_BLOCK_TYPES,
    TOOL_USE_TYPES,
    CitationsDeltaW,
    ContentBlockDeltaW,
    ContentBlockStopW,
    InputJsonDeltaW,
    MessageStopW,
    PingW,
    SignatureDeltaW,
    TextDeltaW,
    ThinkingDeltaW,
    diff_from,
    skeleton,
)
from polystream.errors import EventOrderError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    Citation,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import ServerSentEvent

__all__ = ["MessagesDecoder"]

_MESSAGE_BASE: Final[dict[str, Any]] = {
    "type": "message",
    "role": "assistant",
    "content": [],
    "stop_reason": None,
    "stop_sequence": None,
}
"""The ``message`` of ``message_start`` apart from id, model and usage (docs example)."""

_KNOWN_OTHER_BLOCKS: Final = frozenset({"container_upload", "fallback"})
"""Block types of the catalog that are neither text, reasoning nor tool blocks."""

_START: Final[dict[str, Any]] = {"start": True}
_IN_START: Final[dict[str, Any]] = {"start": True, "in_start": True}


def _fields(obj: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any] | None:
    """Top-level keys of a payload that the mapping does not model."""
    if len(obj) <= len(known):
        return None
    rest = {key: value for key, value in obj.items() if key not in known}
    return rest or None


class MessagesDecoder(FramedDecoder):
    """Decoder for the Messages SSE stream; subclasses bind ``dialect`` and ``quirks``.

    Args:
        strict: Raise typed protocol errors (with dialect, event index and byte offset)
            on malformed or out-of-order events, unknown events, unknown block types and
            unknown stop reasons. Otherwise each becomes an ErrorEvent (the offending
            payload kept in ``error.raw``) or passes through, and decoding continues.
        keep_raw: Emit a Raw event before the unified events of each native event.
        **options: Framing limits, as for :class:`FramedDecoder`.
    """

    dialect: ClassVar[str] = "anthropic_messages"
    quirks: ClassVar[Quirks] = ANTHROPIC
    private_extra: ClassVar[frozenset[str]] = frozenset(
        {"start", "in_start", "no_delta", "joined", "absent"}
    )
    """Where an event came from in the native stream (the block's start, ``message_start``,
    a joined signature) and the native keys that were absent."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._started = False
        # provider index -> (unified index, native block type) for the open blocks
        self._open: dict[int, tuple[int, str]] = {}
        self._used: set[int] = set()  # provider indices ever opened
        self._next = 0  # next unified block index
        self._usage: dict[str, Any] | None = None  # cumulative native usage
        self._stop_reason: str | None = None
        self._stop_seen = False  # a stop reason arrived (message_delta or message_start)
        self._fast_ok = self._fast_paths  # the typed fast path (see _fast)

    # -- dispatch ------------------------------------------------------------------------

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        name = event.event
        data = event.data
        if self.keep_raw:
            try:
                parsed: Any = GENERIC_DECODER.decode(data)
            except msgspec.DecodeError:
                parsed = data
            self.raw_event(out, name, parsed)
        if name in CONTENT_BLOCK_FAST and self._fast_ok:
            try:
                fast = FAST_DECODER.decode(data)
            except msgspec.DecodeError:
                pass  # a field we do not model, or malformed: the general path decides
            else:
                # The two hottest shapes, inlined (the same events as _fast gives).
                if type(fast) is ContentBlockDeltaW and name == "content_block_delta":
                    state = self._open.get(fast.index)
                    if state is not None:
                        delta = fast.delta
                        if type(delta) is TextDeltaW and state[1] == "text":
                            out.append(TextDelta(index=state[0], delta=delta.text))
                            return
                        if type(delta) is InputJsonDeltaW and state[1] in TOOL_USE_TYPES:
                            out.append(ToolInputDelta(index=state[0], delta=delta.partial_json))
                            return
                if self._fast(fast, name, data, out):
                    return
        stripped = data.strip()
        if not stripped or stripped == "[DONE]":
            # Not Anthropic's, but seen behind proxies: an empty data line (the SDK skips
            # it) or an OpenAI-style terminator. Passed through untouched.
            if self.strict:
                raise self.protocol_error(f"unexpected payload {stripped or 'empty'!r}")
            out.append(Unknown(name=name, data=data))
            return
        try:
            obj = GENERIC_DECODER.decode(data)
        except msgspec.DecodeError as exc:
            self._bad(out, f"malformed JSON payload: {exc}", data)
            return
        if type(obj) is not dict:
            self._bad(out, f"payload is not a JSON object ({type(obj).__name__})", data)
            return
        kind = obj.get("type")
        if kind == "content_block_delta":
            self._delta(obj, name, data, out)
        elif kind == "content_block_start":
            self._block_start(obj, name, data, out)
        elif kind == "content_block_stop":
            self._block_stop(obj, name, data, out)
        elif kind == "message_start":
            self._message_start(obj, name, data, out)
        elif kind == "message_delta":
            self._message_delta(obj, name, data, out)
        elif kind == "message_stop":
            self._message_stop(obj, name, data, out)
        elif kind == "ping":
            # Anthropic docs: "Event streams may also include any number of ping events."
            out.append(KeepAlive(name="ping", extra=self._extra(obj, ("type",), name, "ping")))
        elif kind == "error":
            self._error(obj, name, out)
        else:
            # Anthropic docs, "Other events": "we may occasionally add new event types,
            # and your code should handle unknown event types gracefully."
            if self.strict:
                raise self.protocol_error(f"unknown event type {kind!r}")
            out.append(Unknown(name=name, data=data))

    def _fast(self, event: Any, name: str | None, data: str, out: list[Event]) -> bool:
        """Handle a fast-path event; False sends it to the general path."""
        kind = type(event)
        if kind is ContentBlockDeltaW:
            if name != "content_block_delta":
                return False
            state = self._open.get(event.index)
            if state is None:
                return False  # the general path reports it, with the payload
            index, block_type = state
            delta = event.delta
            dkind = type(delta)
            if dkind is TextDeltaW:
                if block_type != "text":
                    return False
                out.append(TextDelta(index=index, delta=delta.text))
            elif dkind is InputJsonDeltaW:
                if block_type not in TOOL_USE_TYPES:
                    return False
                out.append(ToolInputDelta(index=index, delta=delta.partial_json))
            elif dkind is ThinkingDeltaW:
                if block_type != "thinking":
                    return False
                out.append(ReasoningDelta(index=index, delta=delta.thinking))
            elif dkind is SignatureDeltaW:
                if delta.signature.startswith(CARRIER_PREFIX):
                    return False
                out.append(SignatureDelta(index=index, delta=delta.signature))
            elif dkind is CitationsDeltaW:
                if block_type != "text":
                    return False
                out.append(Citation(index=index, citation=delta.citation))
            return True
        if kind is ContentBlockStopW:
            if name != "content_block_stop":
                return False
            stopped = self._open.pop(event.index, None)
            if stopped is None:
                return False
            out.append(BlockEnd(index=stopped[0]))
            return True
        if kind is PingW:
            if name != "ping":
                return False
            out.append(KeepAlive(name="ping"))
            return True
        if kind is MessageStopW and name == "message_stop" and self._started:
            self._finish(None, out)
            return True
        return False

    # -- helpers -------------------------------------------------------------------------

    def _bad(self, out: list[Event], message: str, data: str, *, order: bool = False) -> None:
        """A malformed or impossible event: raise (strict) or report it with its payload."""
        if self.strict:
            cls = EventOrderError if order else RemoteProtocolError
            raise cls(
                message,
                dialect=self.dialect,
                event_index=self.frame_index,
                byte_offset=self.frame_offset,
            )
        out.append(
            ErrorEvent(
                error=ErrorInfo(
                    kind="protocol",
                    message=message,
                    dialect=self.dialect,
                    event_index=self.frame_index,
                    byte_offset=self.frame_offset,
                    raw=data,
                )
            )
        )

    def _extra(
        self,
        obj: dict[str, Any],
        known: tuple[str, ...],
        name: str | None,
        kind: str,
        **more: Any,
    ) -> dict[str, Any] | None:
        extra: dict[str, Any] = {key: value for key, value in more.items() if value is not None}
        fields = _fields(obj, known)
        if fields:
            extra["fields"] = fields
        if name != kind:
            extra["event"] = name
        return extra or None

    def _index(self, obj: dict[str, Any], data: str, out: list[Event]) -> int | None:
        index = obj.get("index")
        if type(index) is not int:
            self._bad(out, f"{obj.get('type')} without an integer index", data)
            return None
        return index

    # -- message events --------------------------------------------------------------------

    def _message_start(
        self, obj: dict[str, Any], name: str | None, data: str, out: list[Event]
    ) -> None:
        if self._started:
            self._bad(out, "a second message_start", data, order=True)
            return
        message = obj.get("message")
        if type(message) is not dict:
            self._bad(out, "message_start without a message object", data)
            return
        self._started = True
        usage = message.get("usage")
        content = message.get("content")
        compared = dict(message)
        if type(content) is list:
            compared["content"] = []
        base = dict(_MESSAGE_BASE)
        base["id"] = message.get("id")
        base["model"] = message.get("model")
        base["usage"] = usage if type(usage) is dict else {}
        msg_id = message.get("id")
        model = message.get("model")
        out.append(
            StreamStart(
                dialect=self.dialect,
                id=msg_id if type(msg_id) is str else None,
                model=model if type(model) is str else None,
                extra=self._extra(
                    obj,
                    ("type", "message"),
                    name,
                    "message_start",
                    message=diff_from(compared, base),
                ),
            )
        )
        if type(usage) is dict:
            self._usage = usage
            out.append(UsageUpdate(usage=to_usage(usage, usage)))
        stop_reason = message.get("stop_reason")
        if stop_reason is not None:
            self._stop_seen = True
        if type(stop_reason) is str:
            self._note_stop_reason(stop_reason)
        if type(content) is list:
            # The continuation form: whole blocks already in message_start.
            for position, block in enumerate(content):
                if type(block) is not dict:
                    self._bad(out, "message_start content holds a non-object block", data)
                    continue
                index = self._open_block(block, position, None, None, out, in_start=True)
                if index is not None:
                    out.append(BlockEnd(index=index, extra={"in_start": True}))

    def _message_delta(
        self, obj: dict[str, Any], name: str | None, data: str, out: list[Event]
    ) -> None:
        if not self._started:
            self._bad(out, "message_delta before message_start", data, order=True)
            return
        delta = obj.get("delta")
        self._stop_seen = True
        if type(delta) is dict:
            stop_reason = delta.get("stop_reason")
            if type(stop_reason) is str:
                self._note_stop_reason(stop_reason)
        usage = obj.get("usage")
        if type(usage) is dict:
            # Anthropic docs: message_delta usage counts are cumulative.
            self._usage = merge_native(self._usage or {}, usage)
            unified = to_usage(self._usage, usage)
        else:
            unified = Usage(raw=usage)
        absent = [key for key in ("delta", "usage") if key not in obj]
        extra: dict[str, Any] = {"delta": delta}
        if absent:
            extra["absent"] = absent
        fields = _fields(obj, ("type", "delta", "usage"))
        if fields:
            extra["fields"] = fields
        if name != "message_delta":
            extra["event"] = name
        out.append(UsageUpdate(usage=unified, extra=extra))

    def _note_stop_reason(self, stop_reason: str) -> None:
        if self.strict and stop_reason not in KNOWN_STOP_REASONS:
            raise self.protocol_error(f"unknown stop_reason {stop_reason!r}")
        self._stop_reason = stop_reason

    def _message_stop(
        self, obj: dict[str, Any], name: str | None, data: str, out: list[Event]
    ) -> None:
        if not self._started:
            self._bad(out, "message_stop before message_start", data, order=True)
            return
        self._finish(self._extra(obj, ("type",), name, "message_stop"), out)

    def _finish(self, extra: dict[str, Any] | None, out: list[Event]) -> None:
        if not self._stop_seen:
            # message_stop without any message_delta: say so, or the encoder would add one.
            extra = {**(extra or {}), "no_delta": True}
        usage = self._usage
        self.emit_finish(
            out,
            Finish(
                status=status_for(self._stop_reason),
                reason=map_stop_reason(self._stop_reason),
                usage=None if usage is None else to_usage(usage, usage),
                extra=extra,
            ),
        )

    def _error(self, obj: dict[str, Any], name: str | None, out: list[Event]) -> None:
        # Anthropic docs, "Error events": e.g. overloaded_error mid-stream; the stream
        # ends there. The SDK raises a bare APIStatusError(200); we type it.
        info = error_info(obj.get("error"))
        out.append(ErrorEvent(error=info, extra=self._extra(obj, ("type", "error"), name, "error")))
        usage = self._usage
        self.emit_finish(
            out,
            Finish(
                status="failed",
                reason=FinishReason(unified="error", raw=None),
                usage=None if usage is None else to_usage(usage, usage),
                error=info,
            ),
        )

    # -- block events ----------------------------------------------------------------------

    def _block_start(
        self, obj: dict[str, Any], name: str | None, data: str, out: list[Event]
    ) -> None:
        if not self._started:
            self._bad(out, "content_block_start before message_start", data, order=True)
            return
        index = self._index(obj, data, out)
        if index is None:
            return
        block = obj.get("content_block")
        if type(block) is not dict:
            self._bad(out, "content_block_start without a content_block object", data)
            return
        if index in self._open:
            self._bad(
                out, f"content_block_start for index {index}, which is open", data, order=True
            )
            return
        if index in self._used and not self.quirks.reuse_indices:
            self.warn(out, "index_reused", f"block index {index} reused after its block stopped")
        fields = _fields(obj, ("type", "index", "content_block"))
        self._open_block(block, index, fields, name, out, in_start=False)

    def _open_block(
        self,
        block: dict[str, Any],
        provider_index: int,
        fields: dict[str, Any] | None,
        name: str | None,
        out: list[Event],
        *,
        in_start: bool,
    ) -> int | None:
        """Emit BlockStart (and the content the start holds); returns the unified index."""
        block_type = block.get("type")
        if type(block_type) is not str:
            self._bad(out, "content block without a type", msgspec.json.encode(block).decode())
            return None
        expected = next_provider_index(self.quirks, self._next, self._open)
        index = self._next
        self._next += 1
        self._used.add(provider_index)
        if not in_start:
            self._open[provider_index] = (index, block_type)
        marker = _IN_START if in_start else _START
        follow: list[Event] = []
        kind: BlockKind
        block_id: str | None = None
        tool_name: str | None = None
        value: Any = None
        compared = dict(block)
        base: dict[str, Any] | None
        if block_type == "text":
            kind = "text"
            text = block.get("text")
            if type(text) is str and text:
                compared["text"] = ""
                follow.append(TextDelta(index=index, delta=text, extra=marker))
            citations = block.get("citations")
            if type(citations) is list and citations:
                compared["citations"] = []
                follow.extend(Citation(index=index, citation=c, extra=marker) for c in citations)
            base = skeleton("text")
        elif block_type in ("thinking", "redacted_thinking"):
            kind = "reasoning"
            if block_type == "thinking":
                thinking = block.get("thinking")
                if type(thinking) is str and thinking:
                    compared["thinking"] = ""
                    follow.append(ReasoningDelta(index=index, delta=thinking, extra=marker))
                opaque = block.get("signature")
                key = "signature"
            else:
                tool_name = "redacted_thinking"
                opaque = block.get("data")
                key = "data"
            # The signature / redacted data is opaque state: first class, byte for byte.
            if type(opaque) is str and opaque:
                compared[key] = ""
                follow.append(_signature(index, opaque, marker, self.dialect))
            base = skeleton(block_type)
        elif block_type in TOOL_USE_TYPES:
            kind = "tool_call" if block_type == "tool_use" else "server_tool_call"
            raw_id = block.get("id")
            raw_name = block.get("name")
            block_id = raw_id if type(raw_id) is str else None
            tool_name = raw_name if type(raw_name) is str else None
            if "input" in block and block["input"] != {} and block["input"] is not None:
                # Input sent whole at the start (continuation form, or a provider that
                # does not stream it): the block's value.
                value = block["input"]
                compared["input"] = {}
            base = skeleton(
                "tool_use" if block_type == "tool_use" else "server_tool_use", raw_id, raw_name
            )
        elif block_type == "compaction":
            kind = "compaction"
            content = block.get("content")
            if type(content) is str and content:
                del compared["content"]
                follow.append(TextDelta(index=index, delta=content, extra=marker))
            encrypted = block.get("encrypted_content")
            if type(encrypted) is str and encrypted:
                del compared["encrypted_content"]
                follow.append(SignatureDelta(index=index, delta=encrypted, extra=marker))
            base = skeleton("compaction")
        else:
            # Server tool results, container uploads, and block types this version does
            # not know: the whole block is the value, so it re-encodes exactly.
            base = None
            value = block
            tool_name = block_type
            if block_type in RESULT_BLOCK_TYPES:
                kind = "server_tool_result"
                tool_use_id = block.get("tool_use_id")
                block_id = tool_use_id if type(tool_use_id) is str else None
            else:
                kind = "other"
                if self.strict and block_type not in _KNOWN_OTHER_BLOCKS:
                    raise self.protocol_error(f"unknown content block type {block_type!r}")
        extra: dict[str, Any] = {}
        if base is not None:
            diff = diff_from(compared, base)
            if diff is not None:
                extra["block"] = diff
        if provider_index != expected and not in_start:
            extra["index"] = provider_index
        if fields:
            extra["fields"] = fields
        if name is not None and name != "content_block_start":
            extra["event"] = name
        if in_start:
            extra["in_start"] = True
        out.append(
            BlockStart(
                index=index,
                kind=kind,
                id=block_id,
                name=tool_name,
                value=value,
                extra=extra or None,
            )
        )
        out.extend(follow)
        return index

    def _delta(self, obj: dict[str, Any], name: str | None, data: str, out: list[Event]) -> None:
        if not self._started:
            self._bad(out, "content_block_delta before message_start", data, order=True)
            return
        index = self._index(obj, data, out)
        if index is None:
            return
        delta = obj.get("delta")
        if type(delta) is not dict or type(delta.get("type")) is not str:
            self._bad(out, "content_block_delta without a typed delta object", data)
            return
        dtype: str = delta["type"]
        state = self._open.get(index)
        if state is None:
            what = "which stopped" if index in self._used else "which was never started"
            self._bad(out, f"content_block_delta for index {index}, {what}", data, order=True)
            return
        unified, block_type = state
        main = _DELTA_FIELD.get(dtype)
        if main is None:
            if dtype == "compaction_delta" and block_type == "compaction":
                self._compaction_delta(obj, delta, unified, name, out)
                return
            # An unknown delta type passes through untouched.
            if self.strict:
                raise self.protocol_error(f"unknown delta type {dtype!r}")
            out.append(Unknown(name=name, data=data))
            return
        allowed = _DELTA_BLOCKS[dtype]
        if allowed is not None and block_type not in allowed:
            self._bad(out, f"{dtype} for a {block_type} block (index {index})", data, order=True)
            return
        payload: Any = delta.get(main)
        if dtype != "citations_delta" and type(payload) is not str:
            self._bad(out, f"{dtype} without a string {main!r}", data)
            return
        extra: dict[str, Any] = {}
        rest = _fields(delta, ("type", main))
        if rest:
            extra["delta"] = rest
        fields = _fields(obj, ("type", "index", "delta"))
        if fields:
            extra["fields"] = fields
        if name != "content_block_delta":
            extra["event"] = name
        more = extra or None
        if dtype == "text_delta":
            out.append(TextDelta(index=unified, delta=payload, extra=more))
        elif dtype == "thinking_delta":
            out.append(ReasoningDelta(index=unified, delta=payload, extra=more))
        elif dtype == "input_json_delta":
            out.append(ToolInputDelta(index=unified, delta=payload, extra=more))
        elif dtype == "signature_delta":
            out.append(_signature(unified, payload, more, self.dialect))
        else:
            out.append(Citation(index=unified, citation=payload, extra=more))

    def _compaction_delta(
        self,
        obj: dict[str, Any],
        delta: dict[str, Any],
        index: int,
        name: str | None,
        out: list[Event],
    ) -> None:
        """``compaction_delta``: the summary as text, ``encrypted_content`` as opaque state.

        The SDK *replaces* the block's content with each compaction delta; the API
        sends one, with the whole summary (docs, "Compaction", streaming).
        """
        rest = {key: value for key, value in delta.items() if key != "type"}
        content = rest.get("content")
        encrypted = rest.get("encrypted_content")
        if type(content) is str:
            del rest["content"]
        if type(encrypted) is str:
            del rest["encrypted_content"]
        extra: dict[str, Any] = {"delta": rest} if rest else {}
        fields = _fields(obj, ("type", "index", "delta"))
        if fields:
            extra["fields"] = fields
        if name != "content_block_delta":
            extra["event"] = name
        if type(content) is str or type(encrypted) is not str:
            text = content if type(content) is str else ""
            out.append(TextDelta(index=index, delta=text, extra=extra or None))
            if type(encrypted) is str:
                out.append(SignatureDelta(index=index, delta=encrypted, extra={"joined": True}))
        else:
            out.append(SignatureDelta(index=index, delta=encrypted, extra=extra or None))

    def _block_stop(
        self, obj: dict[str, Any], name: str | None, data: str, out: list[Event]
    ) -> None:
        index = self._index(obj, data, out)
        if index is None:
            return
        state = self._open.pop(index, None)
        if state is None:
            what = "which already stopped" if index in self._used else "which was never started"
            self._bad(out, f"content_block_stop for index {index}, {what}", data, order=True)
            return
        out.append(
            BlockEnd(
                index=state[0],
                extra=self._extra(obj, ("type", "index"), name, "content_block_stop"),
            )
        )


def _signature(index: int, value: str, extra: dict[str, Any] | None, own: str) -> SignatureDelta:
    """A SignatureDelta; another dialect's state in the polystream carrier is unwrapped.

    ``polystream:v1:<dialect>:<bytes>`` (see :mod:`.encode`) becomes the original
    bytes with ``extra["carrier"] = <dialect>`` (its origin), so that encoding back to
    that dialect writes them natively and re-encoding to Messages wraps them again.
    """
    source, original = unwrap(value, own)
    if source is not None:
        return SignatureDelta(
            index=index, delta=original, extra={**(extra or {}), "carrier": source}
        )
    return SignatureDelta(index=index, delta=value, extra=extra)


_DELTA_FIELD: Final[dict[str, str]] = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "signature_delta": "signature",
    "citations_delta": "citation",
}
"""Delta type -> the field that holds its content."""

_DELTA_BLOCKS: Final[dict[str, frozenset[str] | None]] = {
    "text_delta": frozenset({"text"}),
    "thinking_delta": frozenset({"thinking"}),
    "input_json_delta": TOOL_USE_TYPES,
    "signature_delta": None,  # opaque state may belong to any block
    "citations_delta": frozenset({"text"}),
}
"""Delta type -> the block types it may extend (None: any)."""

"""Decode a Managed Agents session stream (SSE) into unified events.

Each native event keeps what the unified events do not model in their ``extra``:
``extra["session_event"]`` is the native event object with the modelled fields left in place as
``null`` (so that the encoder writes the keys in their order), filled again from the
events on the way back. See ``docs/dialects/anthropic_agent_session.md``.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.dialects._errors import CODE_KINDS
from polystream.errors import StreamTruncated
from polystream.events import (
    RETRYABLE_KINDS,
    BlockEnd,
    BlockKind,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Metadata,
    StatusUpdate,
    StreamStart,
    TextDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import ServerSentEvent

from .wire import (
    CLIENT_RESULTS,
    CLIENT_TOOL_USES,
    METADATA_EVENTS,
    METADATA_PREFIXES,
    SERVER_RESULTS,
    SERVER_TOOL_USES,
    STATUS_EVENTS,
    TERMINAL_EVENTS,
    decode_any,
    error_kind,
    finish_of,
    unified_usage,
)

__all__ = ["DIALECT", "Decoder"]

DIALECT: Final = "anthropic_agent_session"

_PREVIEW_KINDS: Final[dict[str, BlockKind]] = {
    "agent.message": "text",
    "agent.thinking": "reasoning",
}

PREVIEW_CLOSED: Final = {"session_preview_closed": True}
"""The ``extra`` of the BlockEnd that closes a preview its buffered event never
concluded (nothing is written for it)."""


def placeholders(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``data`` with each of ``keys`` it has set to None (kept in its place)."""
    return {k: (None if k in keys else v) for k, v in data.items()}


class Decoder(FramedDecoder):
    """Decode a session event stream into unified events.

    Args:
        strict: Raise typed protocol errors (unknown event types included) instead of
            emitting ErrorEvent / Unknown and continuing.
        keep_raw: Emit a Raw event before the unified events of each native event.

    The stream is one turn of the session: it ends (the one Finish) at the session's
    ``session.status_idle``, ``session.status_terminated`` or ``session.deleted``, or at an
    ``event: error``; without one of them it ends ``truncated``.
    """

    dialect = DIALECT

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._started = False
        self._next = 0
        self._previews: dict[str, tuple[int, BlockKind]] = {}
        self._error: ErrorInfo | None = None  # a session.error the platform does not retry
        self._usage: Usage | None = None

    # -- hooks ---------------------------------------------------------------------------------

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        name = event.event
        if name == "ping":
            out.append(KeepAlive(name="ping", extra={"session_ping": event.data}))
            return
        try:
            data = decode_any(event.data)
        except msgspec.DecodeError as exc:
            raise self.protocol_error(f"malformed JSON payload: {exc}") from None
        self.raw_event(out, name, data)
        if not self._started:
            self._started = True
            out.append(StreamStart(dialect=DIALECT))
        if name == "error":
            self._api_error(data, out)
            return
        kind = data.get("type") if isinstance(data, dict) else None
        if not isinstance(data, dict) or name is None or kind != name:
            # An event the SDK's reader skips (no name) or that names another type.
            self._unknown(name, event.data, out)
            return
        if name in STATUS_EVENTS:
            self._status(name, data, out)
        elif name == "agent.message":
            self._message(data, out)
        elif name == "agent.thinking":
            self._thinking(data, out)
        elif name == "event_start":
            self._preview_start(data, event.data, out)
        elif name == "event_delta":
            self._preview_delta(data, event.data, out)
        elif name in SERVER_TOOL_USES:
            self._tool_use(data, "server_tool_call", out)
        elif name in CLIENT_TOOL_USES:
            self._tool_use(data, "tool_call", out)
        elif name in SERVER_RESULTS:
            self._tool_result(data, "server_tool_result", SERVER_RESULTS[name], out)
        elif name in CLIENT_RESULTS:
            self._tool_result(data, "tool_result", CLIENT_RESULTS[name], out)
        elif name == "session.usage":
            self._session_usage(data, out)
        elif name == "session.error":
            self._session_error(data, out)
        elif name in METADATA_EVENTS or name.startswith(METADATA_PREFIXES):
            if name == "span.model_request_end":
                self._close_previews(out)
            out.append(Metadata(name=name, value=data))
        else:
            self._unknown(name, event.data, out)

    def _on_close(self, out: list[Event], truncation: StreamTruncated | None) -> None:
        if not self.finished:
            self._close_previews(out)

    # -- events --------------------------------------------------------------------------------

    def _unknown(self, name: str | None, data: str, out: list[Event]) -> None:
        if self.strict:
            raise self.protocol_error(f"unknown event {name!r}")
        out.append(Unknown(name=name, data=data))

    def _open(self, out: list[Event], kind: BlockKind, **fields: Any) -> int:
        index = self._next
        self._next += 1
        out.append(BlockStart(index=index, kind=kind, **fields))
        return index

    def _close_previews(self, out: list[Event]) -> None:
        for index, _kind in self._previews.values():
            out.append(BlockEnd(index=index, status="incomplete", extra=PREVIEW_CLOSED))
        self._previews.clear()

    def _status(self, name: str, data: dict[str, Any], out: list[Event]) -> None:
        if name in TERMINAL_EVENTS:
            self._close_previews(out)
        out.append(StatusUpdate(status=STATUS_EVENTS[name], extra={"session_event": data}))
        if name not in TERMINAL_EVENTS:
            return
        status, reason = finish_of(name, data, self._error is not None)
        error: ErrorInfo | None = None
        if status == "failed":
            error = self._error or ErrorInfo(
                kind="server",
                message=f"the session ended {reason.raw}",
                code=reason.raw,
                dialect=DIALECT,
            )
        self.emit_finish(out, Finish(status=status, reason=reason, usage=self._usage, error=error))

    def _message(self, data: dict[str, Any], out: list[Event]) -> None:
        event_id = data.get("id")
        content = data.get("content")
        if not isinstance(content, list) or not all(isinstance(c, dict) for c in content):
            raise self.protocol_error("agent.message without a content array of objects")
        preview = self._previews.pop(event_id, None) if isinstance(event_id, str) else None
        if preview is not None:
            text = "".join(
                c["text"]
                for c in content
                if c.get("type") == "text" and isinstance(c.get("text"), str)
            )
            out.append(BlockEnd(index=preview[0], value=text, extra={"session_event": data}))
            return
        if not content:
            out.append(Metadata(name="agent.message", value=data))
            return
        block_id = event_id if isinstance(event_id, str) else None
        native = placeholders(data, "content")
        for j, item in enumerate(content):
            extra: dict[str, Any] = (
                {"session_event": native, "session_parts": len(content)} if j == 0 else {}
            )
            text = item.get("text")
            if item.get("type") == "text" and isinstance(text, str) and len(item) == 2:
                if list(item) != ["type", "text"]:
                    extra["session_item_keys"] = list(item)
                index = self._open(out, "text", id=block_id, extra=extra or None)
                out.append(TextDelta(index=index, delta=text))
            else:
                index = self._open(
                    out,
                    "other",
                    id=block_id,
                    name=str(item.get("type")),
                    value=item,
                    extra=extra or None,
                )
            out.append(BlockEnd(index=index))

    def _thinking(self, data: dict[str, Any], out: list[Event]) -> None:
        event_id = data.get("id")
        preview = self._previews.pop(event_id, None) if isinstance(event_id, str) else None
        if preview is not None:
            out.append(BlockEnd(index=preview[0], extra={"session_event": data}))
            return
        index = self._open(
            out,
            "reasoning",
            id=event_id if isinstance(event_id, str) else None,
            extra={"session_event": data},
        )
        out.append(BlockEnd(index=index))

    def _preview_start(self, data: dict[str, Any], text: str, out: list[Event]) -> None:
        preview = data.get("event")
        ptype = preview.get("type") if isinstance(preview, dict) else None
        kind = _PREVIEW_KINDS.get(ptype) if isinstance(ptype, str) else None
        event_id = preview.get("id") if isinstance(preview, dict) else None
        if kind is None or not isinstance(event_id, str):
            self._unknown("event_start", text, out)
            return
        if event_id in self._previews:
            raise self.protocol_error(f"a second event_start for event {event_id!r}")
        index = self._open(out, kind, id=event_id, extra={"session_event": data})
        self._previews[event_id] = (index, kind)

    def _preview_delta(self, data: dict[str, Any], text: str, out: list[Event]) -> None:
        event_id = data.get("event_id")
        delta = data.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if not (
            isinstance(delta, dict)
            and delta.get("type") == "content_delta"
            and isinstance(content, dict)
            and content.get("type") == "text"
            and isinstance(content.get("text"), str)
        ):
            self._unknown("event_delta", text, out)  # a delta type this version does not know
            return
        preview = self._previews.get(event_id) if isinstance(event_id, str) else None
        if preview is None or preview[1] != "text":
            raise self.protocol_error(
                f"event_delta for event {event_id!r}, which no event_start opened"
            )
        part = delta.get("index")
        native = {**data, "delta": {**delta, "content": placeholders(content, "text")}}
        out.append(
            TextDelta(
                index=preview[0],
                delta=content["text"],
                part=part if isinstance(part, int) and not isinstance(part, bool) else None,
                extra={"session_event": native},
            )
        )

    def _tool_use(self, data: dict[str, Any], kind: BlockKind, out: list[Event]) -> None:
        event_id = data.get("id")
        name = data.get("name")
        index = self._open(
            out,
            kind,
            id=event_id if isinstance(event_id, str) else None,
            name=name if isinstance(name, str) else None,
            value=data.get("input"),
            extra={"session_event": placeholders(data, "name", "input")},
        )
        out.append(BlockEnd(index=index))

    def _tool_result(
        self, data: dict[str, Any], kind: BlockKind, field: str, out: list[Event]
    ) -> None:
        event_id = data.get("id")
        call_id = data.get(field)
        index = self._open(
            out,
            kind,
            id=event_id if isinstance(event_id, str) else None,
            call_id=call_id if isinstance(call_id, str) else None,
            value=data.get("content"),
            extra={"session_event": placeholders(data, field, "content")},
        )
        out.append(BlockEnd(index=index, status="error" if data.get("is_error") is True else None))

    def _session_usage(self, data: dict[str, Any], out: list[Event]) -> None:
        usage = data.get("usage")
        if not isinstance(usage, dict):
            raise self.protocol_error("session.usage without a usage object")
        unified = unified_usage(usage)
        self._usage = unified if self._usage is None else self._usage.merged(unified)
        out.append(UsageUpdate(usage=unified, extra={"session_event": placeholders(data, "usage")}))

    def _session_error(self, data: dict[str, Any], out: list[Event]) -> None:
        error = data.get("error")
        if not isinstance(error, dict):
            raise self.protocol_error("session.error without an error object")
        retry = error.get("retry_status")
        retry_type = retry.get("type") if isinstance(retry, dict) else None
        code = error.get("type")
        message = error.get("message")
        info = ErrorInfo(
            kind=error_kind(code),
            message=message if isinstance(message, str) else "",
            retryable=retry_type == "retrying",
            code=code if isinstance(code, str) else None,
            dialect=DIALECT,
            raw=error,
        )
        if retry_type != "retrying":
            self._error = info
        self._gave_error = True
        out.append(ErrorEvent(error=info, extra={"session_event": data}))

    def _api_error(self, data: Any, out: list[Event]) -> None:
        """An ``event: error`` (the API's error body, as on every Anthropic stream):
        the stream failed."""
        error = data.get("error") if isinstance(data, dict) else None
        code = error.get("type") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        kind = CODE_KINDS.get(code, "unknown") if isinstance(code, str) else "unknown"
        info = ErrorInfo(
            kind=kind,
            message=message if isinstance(message, str) else "stream error",
            retryable=kind in RETRYABLE_KINDS,
            code=code if isinstance(code, str) else None,
            dialect=DIALECT,
            raw=data,
        )
        self._gave_error = True
        self._close_previews(out)
        out.append(ErrorEvent(error=info, extra={"session_event": data, "session_api_error": True}))
        self.emit_finish(
            out,
            Finish(
                status="failed",
                reason=FinishReason(unified="error", raw=info.code),
                usage=self._usage,
                error=info,
            ),
        )

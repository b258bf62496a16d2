"""Encode unified events as a Managed Agents session stream (SSE).

Events decoded from this dialect carry their native objects (``extra["session_event"]``) and are
written back as they came, the modelled fields filled in from the events. Events from
another dialect are written as the session events that mean the same (a text block as an
``agent.message``, a client tool call as an ``agent.custom_tool_use``, the Finish as the
session going idle with its ``stop_reason``); what has no place is reported as a
:class:`~polystream.dialects._base.Loss`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from polystream.dialects._base import DialectEncoder
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    Event,
    Finish,
    KeepAlive,
    Metadata,
    ReasoningDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)

from .decode import DIALECT
from .wire import (
    CLIENT_RESULTS,
    SERVER_RESULTS,
    STATUS_NAMES,
    TERMINAL_EVENTS,
    encode_json,
    native_usage,
    sse,
)

__all__ = ["Encoder"]

_STOP_REASONS: Final[dict[str, str]] = {
    "stop": "end_turn",
    "tool_calls": "requires_action",
    "refusal": "refusal",
    "content_filter": "refusal",
}
"""The idle ``stop_reason`` of a unified finish reason (others: ``end_turn``, lost)."""

_WRITTEN_STATUSES: Final = frozenset({"running", "rescheduled"})
"""Status words of another dialect's stream written as session status events."""


@dataclass
class _Block:
    kind: str
    id: str | None
    name: str | None
    call_id: str | None
    value: Any
    native: dict[str, Any] | None
    extra: dict[str, Any]
    texts: list[str] = field(default_factory=list)


@dataclass
class _Group:
    """An ``agent.message`` whose content blocks are being collected."""

    native: dict[str, Any]
    parts: int
    items: list[Any] = field(default_factory=list)


class Encoder(DialectEncoder):
    """Encode unified events as a session event stream."""

    dialect = DIALECT

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, _Block] = {}
        self._group: _Group | None = None
        self._ended = False  # a terminal event (or an API error) was written
        self._created = 0
        self._serial = 0
        self._tool_calls: list[str] = []  # client tool uses written (requires_action)
        self._source: str | None = None  # the stream's dialect (its StreamStart)
        self._usage: Usage | None = None  # the usage written so far, merged
        self._failed = False  # a session.error that ends the turn was written
        self._usage_pending = False  # another dialect's usage merged, not written yet

    # -- helpers -------------------------------------------------------------------------------

    def _stamp(self) -> str:
        return datetime.fromtimestamp(self._created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _new_id(self, given: str | None = None) -> str:
        if given:
            return given
        self._serial += 1
        return f"sevt_{self._serial:024d}"

    def _write(self, data: dict[str, Any]) -> bytes:
        return sse(str(data["type"]), encode_json(data))

    def _synth(self, kind: str, event_id: str | None, **fields: Any) -> bytes:
        data: dict[str, Any] = {"type": kind, "id": self._new_id(event_id), **fields}
        data["processed_at"] = self._stamp()
        return self._write(data)

    # -- events --------------------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        extra = event.extra or {}
        native = extra.get("session_event")
        if isinstance(event, StreamStart):
            self._created = event.created or 0
            self._source = event.dialect
            return b""
        if isinstance(event, BlockStart):
            return self._block_start(event, extra, native)
        if isinstance(event, TextDelta | ReasoningDelta | ToolInputDelta):
            return self._delta(event, native)
        if isinstance(event, BlockEnd):
            return self._block_end(event, extra, native)
        if isinstance(event, StatusUpdate):
            return self._status(event, native)
        if isinstance(event, Metadata):
            value = event.value
            if isinstance(value, dict) and value.get("type") == event.name:
                return self._write(value)
            self.lose(f"metadata:{event.name}", event, "the session stream has no such event")
            return b""
        if isinstance(event, UsageUpdate):
            self._usage = event.usage if self._usage is None else self._usage.merged(event.usage)
            if isinstance(native, dict):
                return self._write({**native, "usage": native_usage(event.usage, own=True)})
            # Another dialect's usage: merged, and written once as the turn's snapshot
            # before its end (see folds_usage).
            self._usage_pending = True
            return b""
        if isinstance(event, ErrorEvent):
            return self._error(event, extra, native)
        if isinstance(event, Finish):
            return self._finish(event)
        if isinstance(event, KeepAlive):
            if event.name == "ping":
                data = extra.get("session_ping")
                return sse("ping", data if isinstance(data, str) else '{"type":"ping"}')
            return b":" + (event.comment or "").encode() + b"\n\n"
        if isinstance(event, Unknown):
            if self._source != DIALECT:
                self.lose("event:unknown", event, "an event of another dialect")
                return b""
            if event.name is None:
                return b"data: " + event.data.encode() + b"\n\n"
            return sse(event.name, event.data)
        tag = type(event).__struct_config__.tag
        if tag not in ("raw", "warning"):
            self.lose(f"event:{tag}", event, "the session stream has no place for it")
        return b""

    def _block_start(self, event: BlockStart, extra: dict[str, Any], native: Any) -> bytes:
        group = self._group
        block = _Block(
            event.kind,
            event.id,
            event.name,
            event.call_id,
            event.value,
            native if isinstance(native, dict) else None,
            extra,
        )
        self._blocks[event.index] = block
        if block.native is not None and block.native.get("type") == "event_start":
            return self._write(block.native)
        if block.native is not None and isinstance(extra.get("session_parts"), int):
            self._group = _Group(block.native, extra["session_parts"])
        elif group is None and block.native is None and event.kind not in _FOREIGN_KINDS:
            self.lose(f"block:{event.kind}", event, "the session stream has no such content")
        return b""

    def _delta(self, event: TextDelta | ReasoningDelta | ToolInputDelta, native: Any) -> bytes:
        block = self._blocks.get(event.index)
        if block is None:
            self.lose("delta", event, f"no open block {event.index}")
            return b""
        if isinstance(native, dict) and isinstance(event, TextDelta):
            delta = dict(native["delta"])
            delta["content"] = {**delta["content"], "text": event.delta}
            return self._write({**native, "delta": delta})
        if type(event) in _ACCEPTS.get(block.kind, ()):
            block.texts.append(event.delta)
            return b""
        if isinstance(event, ReasoningDelta) and block.kind == "reasoning":
            self.lose("reasoning_text", event, "agent.thinking carries no text")
        else:
            tag = type(event).__struct_config__.tag
            self.lose(f"{tag}:{block.kind}", event, f"a {block.kind} block has no place for it")
        return b""

    def _block_end(self, event: BlockEnd, extra: dict[str, Any], native: Any) -> bytes:
        block = self._blocks.pop(event.index, None)
        if block is None:
            self.lose("block_end", event, f"no open block {event.index}")
            return b""
        if extra.get("session_preview_closed"):
            return b""
        if isinstance(native, dict):  # the buffered event concluding a preview
            return self._write(native)
        group = self._group
        if group is not None:
            group.items.append(self._item(block))
            if len(group.items) < group.parts:
                return b""
            self._group = None
            return self._write({**group.native, "content": group.items})
        if block.native is not None:
            return self._write(self._filled(block))
        return self._foreign(block, event)

    def _item(self, block: _Block) -> Any:
        if block.kind == "text":
            text = "".join(block.texts)
            keys = block.extra.get("session_item_keys")
            if isinstance(keys, list):
                return {k: ("text" if k == "type" else text) for k in keys}
            return {"type": "text", "text": text}
        return block.value

    def _input(self, block: _Block) -> Any:
        if block.texts:
            text = "".join(block.texts)
            text.encode()  # a lone surrogate is named where it is in the input's text
            try:
                return json.loads(text) if text else {}
            except ValueError:
                return {"input": text}
        return block.value if block.value is not None else {}

    def _filled(self, block: _Block) -> dict[str, Any]:
        out = dict(block.native or {})
        kind = out.get("type")
        if block.kind in ("tool_call", "server_tool_call"):
            out.update(
                {k: v for k, v in (("name", block.name), ("input", self._input(block))) if k in out}
            )
        elif isinstance(kind, str) and (kind in SERVER_RESULTS or kind in CLIENT_RESULTS):
            id_field = SERVER_RESULTS.get(kind) or CLIENT_RESULTS[kind]
            if id_field in out:
                out[id_field] = block.call_id
            if "content" in out:
                out["content"] = block.value
        return out

    def _foreign(self, block: _Block, event: Event) -> bytes:
        kind = block.kind
        if kind in ("text", "refusal"):
            text = "".join(block.texts)
            if not text and isinstance(block.value, str):
                text = block.value
            if kind == "refusal":
                self.lose("refusal", event, "written as agent.message text")
            return self._synth("agent.message", block.id, content=[{"type": "text", "text": text}])
        if kind == "reasoning":
            return self._synth("agent.thinking", block.id)
        if kind in ("tool_call", "server_tool_call"):
            name = "agent.custom_tool_use" if kind == "tool_call" else "agent.tool_use"
            event_id = self._new_id(block.call_id or block.id)
            if kind == "tool_call":
                self._tool_calls.append(event_id)
            return self._synth(name, event_id, name=block.name or "", input=self._input(block))
        if kind in ("server_tool_result", "tool_result"):
            name = (
                "agent.tool_result" if kind == "server_tool_result" else "user.custom_tool_result"
            )
            id_field = SERVER_RESULTS.get(name) or CLIENT_RESULTS[name]
            return self._synth(
                name,
                None,
                **{id_field: block.call_id or block.id or ""},
                content=_content(block.value, "".join(block.texts)),
            )
        return b""

    def _status(self, event: StatusUpdate, native: Any) -> bytes:
        if isinstance(native, dict):
            if native.get("type") in TERMINAL_EVENTS:
                self._ended = True
            return self._write(native)
        if event.status in _WRITTEN_STATUSES:
            return self._synth(STATUS_NAMES[event.status], None)
        self.lose(f"status:{event.status}", event, "no session status event means it")
        return b""

    def _error(self, event: ErrorEvent, extra: dict[str, Any], native: Any) -> bytes:
        if isinstance(native, dict):
            if extra.get("session_api_error"):
                self._ended = True
                return sse("error", encode_json(native))
            retry = (
                event.error.raw.get("retry_status") if isinstance(event.error.raw, dict) else None
            )
            if not (isinstance(retry, dict) and retry.get("type") == "retrying"):
                self._failed = True
            return self._write(native)
        error = event.error
        if error.kind == "protocol":
            self.lose("error:protocol", event, "a decoding error of the source stream")
            return b""
        self._failed = True
        return self._session_error(error.code, error.message)

    def _session_error(self, code: str | None, message: str) -> bytes:
        body = {
            "type": code or "unknown_error",
            "message": message,
            # Another dialect's in-band error ended its stream: nothing retries it.
            "retry_status": {"type": "terminal"},
        }
        return self._synth("session.error", None, error=body)

    def _flush(self, event: Event) -> bytes:
        """Write the blocks another dialect's stream left open (at its end)."""
        parts: list[bytes] = []
        for index in sorted(self._blocks):
            block = self._blocks.pop(index)
            if block.native is None and self._group is None:
                parts.append(self._foreign(block, event))
        return b"".join(parts)

    def _finish(self, event: Finish) -> bytes:
        if self._ended:
            return b""
        self._ended = True
        parts = [self._flush(event)]
        usage = event.usage
        if usage is not None and (self._usage is None or self._usage.merged(usage) != self._usage):
            self._usage = usage if self._usage is None else self._usage.merged(usage)
            self._usage_pending = True
        parts.append(self._pending_usage())
        if event.status == "truncated":
            return b"".join(parts)
        if event.status == "failed":
            if not self._failed:
                error = event.error
                parts.append(
                    self._session_error(
                        error.code if error else None,
                        error.message if error else "the stream failed",
                    )
                )
            parts.append(self._synth("session.status_terminated", None))
            return b"".join(parts)
        unified = event.reason.unified
        stop = _STOP_REASONS.get(unified)
        if stop is None:
            stop = "end_turn"
            self.lose(f"finish_reason:{unified}", event, "the idle stop_reason has no such value")
        reason: dict[str, Any] = {"type": stop}
        if stop == "requires_action":
            reason["event_ids"] = list(self._tool_calls)
        parts.append(
            self._synth("session.status_idle", None, stop_details=None, stop_reason=reason)
        )
        return b"".join(parts)

    def _pending_usage(self) -> bytes:
        """The ``session.usage`` snapshot of another dialect's usage merged so far."""
        if not self._usage_pending or self._usage is None:
            return b""
        self._usage_pending = False
        return self._synth("session.usage", None, usage=native_usage(self._usage, own=False))

    def _close(self) -> bytes:
        if self._ended:
            return b""
        return self._flush(StreamStart(dialect=DIALECT)) + self._pending_usage()

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates are only merged (written once, before the
        turn's end); this dialect's own are written where they come."""
        return source != DIALECT


_ACCEPTS: Final[dict[str, tuple[type, ...]]] = {
    "text": (TextDelta,),
    "refusal": (TextDelta,),
    "tool_call": (ToolInputDelta,),
    "server_tool_call": (ToolInputDelta,),
    "server_tool_result": (TextDelta,),
    "tool_result": (TextDelta,),
}
"""The deltas each block kind's session event carries (a tool use's input, a result's
text content)."""

_FOREIGN_KINDS: Final = frozenset(
    {
        "text",
        "refusal",
        "reasoning",
        "tool_call",
        "server_tool_call",
        "server_tool_result",
        "tool_result",
    }
)
"""Block kinds of another dialect that have a session event."""


def _content(value: Any, text: str) -> list[Any]:
    """A tool result's ``content`` blocks from another dialect's value."""
    if isinstance(value, list) and all(isinstance(v, dict) and "type" in v for v in value):
        return value
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if value is None:
        return [{"type": "text", "text": text}] if text else []
    return [{"type": "text", "text": json.dumps(value)}]

"""OpenAI Agents API session stream -> unified events.

See ``docs/dialects/openai_agent_session.md`` for the event coverage table. Each unified
event made from a native event carries that event's whole payload in ``extra`` (the
first one) or ``{FOLLOW: event_id}`` (the others), so the encoder writes the bytes back.

The stream's terminal event is the one the official SDK's ``AgentSessionStream`` stops
at: ``agent.session.idle`` after the root turn (``subagent_id`` null) ended,
``agent.session.failed``, or ``agent.session.budget_reached`` when no root turn is
running. A stream that ends before it ends ``truncated``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Final

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    ErrorKind,
    Event,
    Finish,
    FinishReason,
    FinishStatus,
    Metadata,
    ReasoningDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    UnifiedFinishReason,
    Unknown,
    Usage,
    UsageUpdate,
    kind_for_status,
)
from polystream.wire.sse import ServerSentEvent

from .wire import (
    COMMAND_OUTPUT_DELTA,
    ENVIRONMENT_EVENTS,
    ERROR,
    FOLLOW,
    HOSTED_ITEM_TYPES,
    KNOWN_EVENTS,
    SESSION_STATUS_EVENTS,
    SUBAGENT_EVENTS,
    TURN_END_EVENTS,
    TURN_START_EVENTS,
)

__all__ = ["DIALECT", "Decoder", "usage_of"]

DIALECT: Final = "openai_agent_session"

_JSON: Final = msgspec.json.Decoder()

_TURN_OUTCOMES: Final[dict[str, tuple[FinishStatus, UnifiedFinishReason]]] = {
    "completed": ("completed", "stop"),
    "failed": ("failed", "error"),
    "cancelled": ("incomplete", "cancelled"),
}
"""The Finish of a root turn's final ``status``."""

_ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    "server_error": "server",
    "rate_limit_exceeded": "rate_limit",
    "invalid_request_error": "invalid_request",
    "insufficient_quota": "quota",
    "authentication_error": "authentication",
    "permission_error": "permission",
    "not_found_error": "not_found",
    "timeout": "timeout",
    "overloaded": "overloaded",
    "content_filter": "content_filter",
}


def usage_of(raw: Any) -> Usage | None:
    """The unified usage of a ``TokenUsage`` object (None when it is not one)."""
    if not isinstance(raw, dict):
        return None
    inputs = raw.get("input_tokens_details")
    outputs = raw.get("output_tokens_details")
    return Usage(
        input_tokens=raw.get("input_tokens"),
        output_tokens=raw.get("output_tokens"),
        total_tokens=raw.get("total_tokens"),
        cache_read_tokens=inputs.get("cached_tokens") if isinstance(inputs, dict) else None,
        reasoning_tokens=outputs.get("reasoning_tokens") if isinstance(outputs, dict) else None,
        raw=raw,
    )


def error_info(error: Any, *, dialect: str, index: int, offset: int) -> ErrorInfo:
    """The unified error of a ``SessionError`` / ``SessionTurnError`` object."""
    if not isinstance(error, dict):
        return ErrorInfo(
            kind="unknown", message=str(error), dialect=dialect, event_index=index, raw=error
        )
    code = error.get("code")
    etype = error.get("type")
    kind: ErrorKind = _ERROR_KINDS.get(str(code), _ERROR_KINDS.get(str(etype), "unknown"))
    if kind == "unknown" and isinstance(code, int):
        kind = kind_for_status(code)
    message = error.get("message")
    return ErrorInfo(
        kind=kind,
        message=message if isinstance(message, str) else "agent session error",
        retryable=kind in ("server", "overloaded", "rate_limit", "timeout"),
        code=str(code) if code is not None else None,
        dialect=dialect,
        event_index=index,
        byte_offset=offset,
        raw=error,
    )


class Decoder(FramedDecoder):
    """Decode an Agents API session event stream (see the module docstring)."""

    dialect: ClassVar[str] = DIALECT
    _fast_paths: ClassVar[bool] = False

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._blocks = 0
        self._items: dict[str, int] = {}  # item id -> block (reasoning, tools)
        self._parts: dict[tuple[str, int], int] = {}  # (item id, content index) -> block
        self._kinds: dict[int, BlockKind] = {}
        self._root_turn: str | None = None
        self._turn_ended = False
        self._outcome: str | None = None
        self._usage: Usage | None = None
        self._error: ErrorInfo | None = None

    # -- helpers -------------------------------------------------------------------------

    def _block(self, kind: BlockKind) -> int:
        index = self._blocks
        self._blocks += 1
        self._kinds[index] = kind
        return index

    @staticmethod
    def _follow(payload: dict[str, Any]) -> dict[str, Any]:
        return {FOLLOW: payload.get("event_id")}

    def _obj(self, payload: dict[str, Any], key: str) -> dict[str, Any]:
        value = payload.get(key)
        if not isinstance(value, dict):
            raise self.protocol_error(f"{payload['type']} without a {key} object")
        return value

    def _str(self, payload: dict[str, Any], key: str) -> str:
        value = payload.get(key)
        if not isinstance(value, str):
            raise self.protocol_error(f"{payload['type']} without a string {key}")
        return value

    # -- dispatch ------------------------------------------------------------------------

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        data = event.data
        payload = self.decode_json(data, _JSON) if data.lstrip()[:1] == "{" else None
        etype = payload.get("type") if isinstance(payload, dict) else None
        self.raw_event(out, etype if isinstance(etype, str) else event.event, payload or data)
        if payload is None or not isinstance(etype, str) or etype not in KNOWN_EVENTS:
            if self.strict and isinstance(etype, str):
                raise self.protocol_error(f"unknown event type {etype!r}")
            out.append(Unknown(data=data, name=etype if isinstance(etype, str) else event.event))
            return
        if etype in SESSION_STATUS_EVENTS:
            self._session_status(etype, payload, out)
        elif etype == "agent.session.created":
            session = self._obj(payload, "session")
            agent = session.get("agent")
            model = agent.get("model") if isinstance(agent, dict) else None
            created = session.get("created_at")
            out.append(
                StreamStart(
                    dialect=DIALECT,
                    id=session.get("id") if isinstance(session.get("id"), str) else None,
                    model=model if isinstance(model, str) else None,
                    created=created if type(created) is int else None,
                    extra=payload,
                )
            )
        elif etype == ERROR:
            self._error = error_info(
                payload.get("error"),
                dialect=DIALECT,
                index=self.frame_index,
                offset=self.frame_offset,
            )
            out.append(ErrorEvent(error=self._error, extra=payload))
        elif etype in ENVIRONMENT_EVENTS:
            value = payload.get("environment")
            if value is None:
                value = {k: payload.get(k) for k in ("environment_id", "reset_count")}
            out.append(Metadata(name=etype, value=value, extra=payload))
        elif etype in SUBAGENT_EVENTS:
            out.append(Metadata(name=etype, value=payload.get("subagent"), extra=payload))
        elif etype in TURN_START_EVENTS or etype in TURN_END_EVENTS:
            self._turn(etype, payload, out)
        elif etype == "agent.session.turn.item.added":
            self._item_added(payload, out)
        elif etype == "agent.session.turn.item.done":
            self._item_done(payload, out)
        elif etype == "agent.session.turn.content_part.added":
            self._part_added(payload, out)
        elif etype == "agent.session.turn.content_part.done":
            block = self._part(payload)
            part = payload.get("part")
            text = part.get("text") if isinstance(part, dict) else None
            out.append(BlockEnd(index=block, value=text, extra=payload))
        elif etype == "agent.session.turn.output_text.delta":
            block = self._part(payload)
            out.append(
                TextDelta(
                    index=block,
                    delta=self._str(payload, "delta"),
                    part=payload.get("content_index"),
                    extra=payload,
                )
            )
        elif etype == "agent.session.turn.reasoning_summary_text.delta":
            block = self._reasoning(payload)
            out.append(
                ReasoningDelta(
                    index=block,
                    delta=self._str(payload, "delta"),
                    part=payload.get("summary_index"),
                    summary=True,
                    extra=payload,
                )
            )
        elif etype == COMMAND_OUTPUT_DELTA:
            self._command_output(payload, out)
        else:
            # output_text.done and the reasoning summary part / text bounds: the text is
            # already whole in its deltas.
            out.append(StatusUpdate(status=etype.rsplit(".", 1)[1], extra=payload))

    # -- lifecycle ------------------------------------------------------------------------

    def _session_status(self, etype: str, payload: dict[str, Any], out: list[Event]) -> None:
        session = self._obj(payload, "session")
        status = session.get("status")
        word = status if isinstance(status, str) else etype.rsplit(".", 1)[1]
        if etype == "agent.session.failed":
            error = self._error
            if error is None:
                message = session.get("error")
                error = ErrorInfo(
                    kind="server",
                    message=message if isinstance(message, str) else "the session failed",
                    dialect=DIALECT,
                    event_index=self.frame_index,
                    byte_offset=self.frame_offset,
                )
            self.emit_finish(
                out,
                Finish(
                    status="failed",
                    reason=FinishReason(unified="error", raw="failed"),
                    usage=self._usage or usage_of(session.get("usage")),
                    error=error,
                    extra=payload,
                ),
            )
            return
        if etype == "agent.session.budget_reached" and (
            self._root_turn is None or self._turn_ended
        ):
            self.emit_finish(
                out,
                Finish(
                    status="incomplete",
                    reason=FinishReason(unified="pause", raw="budget_reached"),
                    usage=self._usage or usage_of(session.get("usage")),
                    extra=payload,
                ),
            )
            return
        if etype == "agent.session.idle" and self._turn_ended:
            outcome = self._outcome or "completed"
            status_, reason = _TURN_OUTCOMES.get(outcome, ("completed", "other"))
            error = None
            if status_ == "failed":
                error = self._error or ErrorInfo(
                    kind="server",
                    message="the turn failed",
                    dialect=DIALECT,
                    event_index=self.frame_index,
                    byte_offset=self.frame_offset,
                )
            self.emit_finish(
                out,
                Finish(
                    status=status_,
                    reason=FinishReason(unified=reason, raw=outcome),
                    usage=self._usage,
                    error=error,
                    extra=payload,
                ),
            )
            return
        out.append(StatusUpdate(status=word, extra=payload))

    def _turn(self, etype: str, payload: dict[str, Any], out: list[Event]) -> None:
        turn = self._obj(payload, "turn")
        turn_id = payload.get("turn_id")
        root = turn.get("subagent_id") is None
        if etype == "agent.session.turn.created" and root and self._root_turn is None:
            self._root_turn = turn_id if isinstance(turn_id, str) else ""
        status = turn.get("status")
        word = status if isinstance(status, str) else etype.rsplit(".", 1)[1]
        out.append(StatusUpdate(status=word, extra=payload))
        if etype not in TURN_END_EVENTS:
            return
        usage = usage_of(payload.get("usage"))
        if usage is not None:
            out.append(UsageUpdate(usage=usage, extra=self._follow(payload)))
        if root and turn_id == self._root_turn:
            self._turn_ended = True
            self._outcome = etype.rsplit(".", 1)[1]
            self._usage = usage
            if self._outcome == "failed" and self._error is None and turn.get("error"):
                self._error = error_info(
                    turn.get("error"),
                    dialect=DIALECT,
                    index=self.frame_index,
                    offset=self.frame_offset,
                )

    # -- items and parts -------------------------------------------------------------------

    def _item_added(self, payload: dict[str, Any], out: list[Event]) -> None:
        item = self._obj(payload, "item")
        itype = item.get("type")
        item_id = item.get("id")
        key = item_id if isinstance(item_id, str) else ""
        if itype == "message":
            status = item.get("status")
            out.append(
                StatusUpdate(status=status if isinstance(status, str) else "added", extra=payload)
            )
            return
        if itype == "agent_message":
            out.append(Metadata(name=payload["type"], value=item, extra=payload))
            return
        if itype in ("function_call_output", "computer_use_approval_request_result"):
            # A result the client sent: whole at once, no item.done follows.
            block = self._block("tool_result")
            value = item.get("output") if item.get("error") is None else item.get("error")
            out.append(
                BlockStart(
                    index=block,
                    kind="tool_result",
                    id=item_id if isinstance(item_id, str) else None,
                    call_id=item.get("call_id") if isinstance(item.get("call_id"), str) else None,
                    name=str(itype),
                    value=value,
                    extra=payload,
                )
            )
            status = item.get("status")
            out.append(
                BlockEnd(
                    index=block,
                    status=status if isinstance(status, str) else None,
                    extra=self._follow(payload),
                )
            )
            return
        kind: BlockKind
        name: str | None
        if itype == "reasoning":
            kind, name = "reasoning", None
        elif itype == "function_call":
            kind, name = "tool_call", item.get("name")
        elif itype in HOSTED_ITEM_TYPES:
            kind, name = "server_tool_call", item.get("name") or itype
        else:
            kind, name = "other", str(itype)
        block = self._block(kind)
        self._items[key] = block
        call_id = item.get("call_id")
        out.append(
            BlockStart(
                index=block,
                kind=kind,
                id=item_id if isinstance(item_id, str) else None,
                call_id=call_id if isinstance(call_id, str) else None,
                name=name if isinstance(name, str) else None,
                extra=payload,
            )
        )

    def _item_done(self, payload: dict[str, Any], out: list[Event]) -> None:
        item = self._obj(payload, "item")
        itype = item.get("type")
        found = item.get("id")
        key = found if isinstance(found, str) else ""
        status = item.get("status")
        status = status if isinstance(status, str) else None
        if itype == "message":
            out.append(StatusUpdate(status=status or "done", extra=payload))
            return
        block = self._items.pop(key, None)
        if block is None:
            raise self.protocol_error(f"turn.item.done for item {key!r}, never added")
        kind = self._kinds[block]
        if kind == "tool_call":
            arguments = item.get("arguments")
            text = (
                arguments
                if isinstance(arguments, str)
                else json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
            )
            out.append(ToolInputDelta(index=block, delta=text, extra=self._follow(payload)))
        value = item if kind in ("server_tool_call", "other") else None
        out.append(BlockEnd(index=block, status=status, value=value, extra=payload))
        result = item.get("output")
        if kind == "server_tool_call" and result is not None:
            # A hosted tool's output (a command's, an MCP call's): its result block.
            index = self._block("server_tool_result")
            follow = self._follow(payload)
            out.append(
                BlockStart(
                    index=index,
                    kind="server_tool_result",
                    id=key or None,
                    name=str(itype),
                    value=result,
                    extra=follow,
                )
            )
            out.append(BlockEnd(index=index, status=status, extra=follow))

    def _part_added(self, payload: dict[str, Any], out: list[Event]) -> None:
        item_id = self._str(payload, "item_id")
        index = payload.get("content_index")
        if type(index) is not int:
            raise self.protocol_error("content_part.added without an integer content_index")
        if (item_id, index) in self._parts:
            raise self.protocol_error(f"content part {index} of {item_id} added twice")
        part = payload.get("part")
        ptype = part.get("type") if isinstance(part, dict) else None
        kind: BlockKind = "text" if ptype == "output_text" else "other"
        block = self._block(kind)
        self._parts[(item_id, index)] = block
        out.append(
            BlockStart(
                index=block,
                kind=kind,
                id=item_id,
                name=None if kind == "text" else str(ptype),
                extra=payload,
            )
        )

    def _part(self, payload: dict[str, Any]) -> int:
        key = (payload.get("item_id"), payload.get("content_index"))
        block = self._parts.get(key)  # type: ignore[arg-type]
        if block is None:
            raise self.protocol_error(
                f"{payload['type']} for content part {key[1]} of {key[0]}, never added"
            )
        return block

    def _reasoning(self, payload: dict[str, Any]) -> int:
        item_id = payload.get("item_id")
        block = self._items.get(item_id) if isinstance(item_id, str) else None
        if block is None or self._kinds[block] != "reasoning":
            raise self.protocol_error(
                f"{payload['type']} for reasoning item {item_id!r}, never added"
            )
        return block

    def _command_output(self, payload: dict[str, Any], out: list[Event]) -> None:
        item_id = self._str(payload, "item_id")
        delta = self._str(payload, "delta")
        if item_id not in self._items:
            raise self.protocol_error(f"command output for item {item_id!r}, never added")
        # A progress report of the tool's run: its whole output is the result block
        # that item.done opens.
        out.append(
            Metadata(
                name=COMMAND_OUTPUT_DELTA,
                value={"item_id": item_id, "delta": delta},
                extra=payload,
            )
        )

"""Unified events -> the Agents API session stream.

An event decoded from this dialect carries its native payload in ``extra`` and is written
back exactly (a delta event's ``delta`` from the event itself); one marked as following
another native event (``extra`` holding only :data:`~.wire.FOLLOW`) writes nothing.
Events of other dialects are written as the session events that say the same: a
``agent.session.created`` and a root ``turn.created`` for the StreamStart, messages,
reasoning summaries and function calls as turn items, the error, and the turn's end
followed by ``agent.session.idle`` (``agent.session.failed`` for a failed stream). What
has no place in the stream (other block kinds, statuses, metadata, citations, ...) is
reported with :meth:`lose`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Final

from polystream.dialects._base import DialectEncoder
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    Event,
    Finish,
    KeepAlive,
    ReasoningDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)

from .decode import DIALECT
from .wire import FOLLOW, KNOWN_EVENTS, encode_json

__all__ = ["Encoder"]

_DELTAS: Final = (TextDelta, ReasoningDelta, ToolInputDelta)

_TURN_ENDS: Final = {"completed": "completed", "incomplete": "cancelled"}


def _frame(payload: Any) -> bytes:
    return b"data: " + encode_json(payload) + b"\n\n"


def _usage(usage: Usage) -> dict[str, Any]:
    if isinstance(usage.raw, dict) and "input_tokens_details" in usage.raw:
        return usage.raw
    inputs = usage.input_tokens or 0
    outputs = usage.output_tokens or 0
    return {
        "input_tokens": inputs,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens or 0},
        "output_tokens": outputs,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": usage.total_tokens if usage.total_tokens is not None else inputs + outputs,
    }


class _Block:
    __slots__ = ("arguments", "call_id", "id", "kind", "name", "text")

    def __init__(self, kind: str, id: str, call_id: str, name: str) -> None:
        self.kind = kind
        self.id = id
        self.call_id = call_id
        self.name = name
        self.text: list[str] = []
        self.arguments: list[str] = []


class Encoder(DialectEncoder):
    """Encode unified events as an Agents API session stream (see the module docstring)."""

    dialect: ClassVar[str] = DIALECT

    def __init__(self) -> None:
        super().__init__()
        self._serial = 0
        self._session = "sess_polystream"
        self._turn = "turn_polystream"
        self._model: str | None = None
        self._created = 0
        self._blocks: dict[int, _Block] = {}
        self._output = 0
        self._usage: Usage | None = None
        self._started = False

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates only go into the turn's final usage (see
        :meth:`DialectEncoder.folds_usage`); this dialect's are its native events'."""
        return source != DIALECT

    # -- own events --------------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        extra = event.extra
        if extra is not None:
            if len(extra) == 1 and FOLLOW in extra:
                return b""
            etype = extra.get("type")
            if etype in KNOWN_EVENTS and "event_id" in extra:
                payload = extra
                if isinstance(event, _DELTAS) and payload.get("delta", event.delta) != event.delta:
                    payload = {**payload, "delta": event.delta}
                return _frame(payload)
        if isinstance(event, Unknown):
            return b"data: " + event.data.encode() + b"\n\n"
        if isinstance(event, KeepAlive):
            if event.comment is None:
                self.lose("keep-alive event", event, "the session stream has no ping event")
                return b""
            return (b": " + event.comment.encode() if event.comment else b":") + b"\n\n"
        return self._foreign(event)

    # -- other dialects' events ------------------------------------------------------------

    def _id(self) -> str:
        self._serial += 1
        return f"evt_{self._serial:06d}"

    def _event(self, etype: str, **fields: Any) -> bytes:
        payload: dict[str, Any] = {"type": etype, "event_id": self._id()}
        if "session" not in fields:
            payload["session_id"] = self._session
        payload.update(fields)
        return _frame(payload)

    def _snapshot(self, status: str) -> dict[str, Any]:
        session: dict[str, Any] = {
            "id": self._session,
            "object": "agent.session",
            "agent": {"model": self._model or ""},
            "created_at": self._created,
            "status": status,
        }
        if self._usage is not None:
            session["usage"] = _usage(self._usage)
        return session

    def _turn_object(self, status: str) -> dict[str, Any]:
        turn: dict[str, Any] = {
            "id": self._turn,
            "object": "agent.session.turn",
            "session_id": self._session,
            "created_at": self._created,
            "status": status,
            "subagent_id": None,
        }
        return turn

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._event("agent.session.created", session=self._snapshot("in_progress")) + (
            self._event(
                "agent.session.turn.created",
                turn=self._turn_object("in_progress"),
                turn_id=self._turn,
            )
        )

    def _foreign(self, event: Event) -> bytes:
        if isinstance(event, StreamStart):
            if event.id:
                self._session = event.id
                self._turn = f"turn_{event.id}"
            self._model = event.model
            self._created = event.created or 0
            return self._start()
        if isinstance(event, UsageUpdate):
            self._usage = event.usage if self._usage is None else self._usage.merged(event.usage)
            return b""
        if isinstance(event, Finish) and event.status == "truncated":
            return b""  # a stream cut short ends without its terminal event, as it came
        head = self._start()
        if isinstance(event, BlockStart):
            return head + self._block_start(event)
        if isinstance(event, _DELTAS):
            return head + self._delta(event)
        if isinstance(event, BlockEnd):
            return head + self._block_end(event)
        if isinstance(event, ErrorEvent):
            error = event.error
            return head + self._event(
                "error",
                error={
                    "code": error.code,
                    "message": error.message,
                    "param": None,
                    "type": error.kind,
                },
            )
        if isinstance(event, Finish):
            return head + self._finish(event)
        self.lose(
            f"{type(event).__name__} event",
            event,
            "the Agents API session stream has no event that carries it",
        )
        return head

    def _block_start(self, event: BlockStart) -> bytes:
        kind = event.kind
        if kind not in ("text", "reasoning", "tool_call"):
            self.lose(f"{kind} block", event, "the session stream carries it only as a native item")
            return b""
        item_id = event.id or f"item_{event.index}"
        block = _Block(kind, item_id, event.call_id or event.id or "", event.name or "")
        self._blocks[event.index] = block
        index = self._output
        self._output += 1
        item: dict[str, Any]
        if kind == "text":
            item = {
                "id": item_id,
                "content": [],
                "role": "assistant",
                "status": "in_progress",
                "turn_id": self._turn,
                "type": "message",
            }
            return self._event(
                "agent.session.turn.item.added", item=item, output_index=index, turn_id=self._turn
            ) + self._event(
                "agent.session.turn.content_part.added",
                content_index=0,
                item_id=item_id,
                output_index=index,
                part={"text": "", "type": "output_text"},
                turn_id=self._turn,
            )
        if kind == "reasoning":
            item = {
                "id": item_id,
                "status": "in_progress",
                "summary": [],
                "turn_id": self._turn,
                "type": "reasoning",
            }
        else:
            item = {
                "id": item_id,
                "arguments": {},
                "call_id": block.call_id,
                "name": block.name,
                "status": "in_progress",
                "turn_id": self._turn,
                "type": "function_call",
            }
        return self._event(
            "agent.session.turn.item.added", item=item, output_index=index, turn_id=self._turn
        )

    def _delta(self, event: TextDelta | ReasoningDelta | ToolInputDelta) -> bytes:
        block = self._blocks.get(event.index)
        if block is None:
            return b""  # the block's loss is reported at its start
        index = list(self._blocks).index(event.index)
        if block.kind == "tool_call":
            block.arguments.append(event.delta)
            return b""
        block.text.append(event.delta)
        if block.kind == "text":
            return self._event(
                "agent.session.turn.output_text.delta",
                content_index=0,
                delta=event.delta,
                item_id=block.id,
                output_index=index,
                turn_id=self._turn,
            )
        return self._event(
            "agent.session.turn.reasoning_summary_text.delta",
            delta=event.delta,
            item_id=block.id,
            output_index=index,
            summary_index=0,
            turn_id=self._turn,
        )

    def _block_end(self, event: BlockEnd) -> bytes:
        block = self._blocks.get(event.index)
        if block is None:
            return b""
        index = list(self._blocks).index(event.index)
        text = "".join(block.text)
        if block.kind == "text":
            part = {"text": text, "type": "output_text"}
            item = {
                "id": block.id,
                "content": [part],
                "role": "assistant",
                "status": "completed",
                "turn_id": self._turn,
                "type": "message",
            }
            return self._event(
                "agent.session.turn.content_part.done",
                content_index=0,
                item_id=block.id,
                output_index=index,
                part=part,
                turn_id=self._turn,
            ) + self._event(
                "agent.session.turn.item.done", item=item, output_index=index, turn_id=self._turn
            )
        if block.kind == "reasoning":
            item = {
                "id": block.id,
                "status": "completed",
                "summary": [{"text": text, "type": "summary_text"}] if text else [],
                "turn_id": self._turn,
                "type": "reasoning",
            }
        else:
            raw = "".join(block.arguments)
            try:
                raw.encode()  # (text UTF-8 cannot carry is named where it was sent)
                arguments: Any = json.loads(raw) if raw else {}
            except ValueError:
                arguments = raw
            item = {
                "id": block.id,
                "arguments": arguments,
                "call_id": block.call_id,
                "name": block.name,
                "status": "completed",
                "turn_id": self._turn,
                "type": "function_call",
            }
        return self._event(
            "agent.session.turn.item.done", item=item, output_index=index, turn_id=self._turn
        )

    def _finish(self, event: Finish) -> bytes:
        if event.usage is not None:
            self._usage = event.usage if self._usage is None else self._usage.merged(event.usage)
        outcome = _TURN_ENDS.get(event.status, "failed")
        if event.status == "incomplete" and event.reason.unified != "cancelled":
            self.lose(
                f"finish reason {event.reason.unified}",
                event,
                "a turn ends completed, failed or cancelled",
            )
        turn = self._turn_object(outcome)
        fields: dict[str, Any] = {"turn": turn, "turn_id": self._turn}
        if self._usage is not None:
            fields["usage"] = _usage(self._usage)
        out = self._event(f"agent.session.turn.{outcome}", **fields)
        if outcome == "failed":
            return out + self._event("agent.session.failed", session=self._snapshot("failed"))
        return out + self._event("agent.session.idle", session=self._snapshot("idle"))

"""One Realtime response written by the server: unified events in, the response's
messages out, one at a time (the server's side of :mod:`.reply`).

The reply's blocks become the response's output items, each added to the conversation
as it is made (``conversation.item.added`` / ``.done``) unless the response is
out-of-band:

* a ``text`` block: a ``message`` item with one ``text`` part
  (``response.output_text.delta`` ...);
* an ``audio`` block, with the ``transcript`` block that follows it: a ``message`` item
  with one ``audio`` part (``response.output_audio.delta`` with the block's base64 data,
  ``response.output_audio_transcript.delta``);
* a ``tool_call`` block: a ``function_call`` item (``response.function_call_arguments.*``).

Other blocks (reasoning, server tools, images) have no place in a Realtime response and
are left out. ``response.created`` opens it, ``response.done`` ends it with the status,
the output items and the usage. A response cancelled or failed midway ends its open
items ``incomplete`` and says so in ``response.done``.
"""

from __future__ import annotations

import base64
import copy
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final

from polystream.dialects._errors import error_body, status_for
from polystream.dialects._realtime.server import EventFeed, IdMaker, Message, ReplyRun
from polystream.dialects._spec import ErrorSpec
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
    UsageUpdate,
)
from polystream.wire.ws import dump_message

__all__ = ["Conversation", "ResponseRun", "error_object", "usage_object"]

_OPENAI_ERRORS: Final = ErrorSpec("openai", param_field=True)
_INCOMPLETE_REASONS: Final = {"length": "max_output_tokens", "content_filter": "content_filter"}


def error_object(error: ErrorInfo) -> dict[str, Any]:
    """The ``{"type", "code", "message"}`` of a failed response's ``status_details``."""
    status = error.http_status or status_for(error.kind, _OPENAI_ERRORS)
    body = error_body(_OPENAI_ERRORS, status, error.message, kind=error.kind, code=error.code)
    nested = body["error"]
    return {"type": nested["type"], "code": nested["code"], "message": nested["message"]}


def usage_object(usage: Usage | None) -> dict[str, Any] | None:
    """A response's ``usage`` from canonical counts: the audio parts as stated, the rest
    text."""
    if usage is None:
        return None
    given = usage.input_tokens or 0
    made = usage.output_tokens or 0
    audio_in = usage.audio_input_tokens or 0
    audio_out = usage.audio_output_tokens or 0
    return {
        "total_tokens": usage.total_tokens if usage.total_tokens is not None else given + made,
        "input_tokens": given,
        "output_tokens": made,
        "input_token_details": {
            "text_tokens": max(given - audio_in, 0),
            "audio_tokens": audio_in,
            "image_tokens": 0,
            "cached_tokens": usage.cache_read_tokens or 0,
        },
        "output_token_details": {
            "text_tokens": max(made - audio_out, 0),
            "audio_tokens": audio_out,
        },
    }


class Conversation:
    """The conversation's items, in order, and the output audio of each assistant item.

    Args:
        max_items: Most items kept (the oldest are dropped).
    """

    def __init__(self, max_items: int = 4096) -> None:
        self.max_items = max_items
        self.order: list[str] = []
        self.items: dict[str, dict[str, Any]] = {}
        self.audio: dict[str, int] = {}  # item -> bytes of output audio made
        self.truncated: set[str] = set()  # items cut at what was heard

    def add(self, item: dict[str, Any], previous_item_id: str | None = None) -> str | None:
        """Add an item after ``previous_item_id`` (``"root"``: first; None: last);
        returns the id of the item before it."""
        item_id = item["id"]
        if previous_item_id is None:
            before = self.order[-1] if self.order else None
            self.order.append(item_id)
        elif previous_item_id == "root":
            before = None
            self.order.insert(0, item_id)
        else:
            at = self.order.index(previous_item_id) + 1
            before = previous_item_id
            self.order.insert(at, item_id)
        self.items[item_id] = item
        self.truncated.discard(item_id)
        while len(self.order) > self.max_items:
            self.delete(self.order[0])
        return before

    def delete(self, item_id: str) -> None:
        self.order.remove(item_id)
        del self.items[item_id]
        self.audio.pop(item_id, None)
        self.truncated.discard(item_id)


class _Item:
    """An output item being made."""

    __slots__ = ("audio", "closed", "index", "item", "open", "text", "transcript")

    def __init__(self, item: dict[str, Any], index: int) -> None:
        self.item = item
        self.index = index
        self.text: list[str] = []  # text, transcript or arguments so far
        self.audio: int | None = None  # the audio block (an audio part)
        self.transcript: int | None = None  # its transcript block
        self.open: list[int] = []  # its blocks still open
        self.closed = False


class ResponseRun(ReplyRun):
    """A response written message by message.

    Args:
        response_id: Its id.
        events: The reply in unified terms (``StreamStart`` ... ``Finish``).
        tag: Handed back to whoever drives the run.
        ids: The connection's id maker (item and event ids).
        shape: The response object's fields besides its id, status, output and usage
            (``conversation_id``, ``output_modalities``, ``max_output_tokens``,
            ``audio``, ``metadata``).
        conversation: Where its items go (None: out-of-band).
        after_created: Messages sent right after ``response.created`` (rate limits).
        binary_audio: Its audio goes as bytes messages, the raw audio of each delta
            (xAI's ``transport: binary``), instead of ``response.output_audio.delta``.
        feed: Its events as they come, in place of ``events`` (:meth:`next` gives
            None while it waits for more).
    """

    def __init__(
        self,
        response_id: str,
        events: list[Event],
        tag: Any,
        *,
        ids: IdMaker,
        shape: dict[str, Any],
        conversation: Conversation | None,
        after_created: Callable[[Usage | None], list[str]] | None = None,
        binary_audio: bool = False,
        feed: EventFeed | None = None,
    ) -> None:
        self.response_id = response_id
        self.tag = tag
        self._feed = feed
        self._events: Iterator[Event] = iter(events)
        self._ids = ids
        self._shape = shape
        self.conversation = conversation
        self._after_created = after_created
        self._binary = binary_audio
        self._queue: deque[Message] = deque()
        self._items: list[_Item] = []
        self._blocks: dict[int, _Item | None] = {}  # unified block -> its item (None: left out)
        self._usage = _final_usage(events)
        self._error: ErrorInfo | None = None
        self._ended = False  # response.done queued

    @property
    def done(self) -> bool:
        return self._ended and not self._queue

    def next(self) -> Message | None:
        feed = self._feed
        while not self._queue and not self._ended:
            event = next(self._events, None) if feed is None else feed.take()
            if event is None:
                if feed is not None and not feed.ended:
                    break  # (waiting for the feed)
                self._end("completed", None)  # (a script without its Finish)
                break
            self._render(event)
        return self._queue.popleft() if self._queue else None

    def item_of(self, index: int) -> str | None:
        state = self._blocks.get(index)
        return state.item["id"] if state is not None else None

    def fail(self, error: ErrorInfo) -> None:
        if not self._ended:
            self._end("failed", {"type": "failed", "error": error_object(error)})

    def cancel(self, reason: str) -> list[str | bytes]:
        """Cut it now (``turn_detected``, ``client_cancelled``): the messages already
        made and those that end it, to send at once; nothing of it follows."""
        if not self._ended:
            self._end("cancelled", {"type": "cancelled", "reason": reason})
        out = [message.text for message in self._queue]
        self._queue.clear()
        return out

    # -- rendering ---------------------------------------------------------------------

    def _send(self, body: dict[str, Any], *, audio: bool = False) -> None:
        message = {"type": body.pop("type"), "event_id": self._ids.make("event_")}
        message.update(body)
        self._queue.append(Message(text=dump_message(message), audio=audio))

    def _response(
        self, status: str, details: dict[str, Any] | None, usage: Usage | None
    ) -> dict[str, Any]:
        shape = self._shape
        return {
            "object": "realtime.response",
            "id": self.response_id,
            "status": status,
            "status_details": details,
            "output": [copy.deepcopy(item.item) for item in self._items],
            "conversation_id": shape.get("conversation_id"),
            "output_modalities": shape.get("output_modalities"),
            "max_output_tokens": shape.get("max_output_tokens", "inf"),
            "audio": shape.get("audio"),
            "usage": usage_object(usage),
            "metadata": shape.get("metadata"),
        }

    def _render(self, event: Event) -> None:
        if isinstance(event, StreamStart):
            created = self._response("in_progress", None, None)
            self._send({"type": "response.created", "response": created})
            if self._after_created is not None:
                for text in self._after_created(self._usage):
                    self._queue.append(Message(text=text))
        elif isinstance(event, BlockStart):
            self._block_start(event)
        elif isinstance(event, TextDelta | DataDelta | ToolInputDelta):
            self._delta(event)
        elif isinstance(event, BlockEnd):
            self._block_end(event.index)
        elif isinstance(event, UsageUpdate):
            self._usage = event.usage
        elif isinstance(event, ErrorEvent):
            self._error = event.error
        elif isinstance(event, Finish):
            self._finish(event)

    def _block_start(self, event: BlockStart) -> None:
        if event.kind == "transcript":
            last = self._items[-1] if self._items else None
            joins = last is not None and last.audio is not None and last.transcript is None
            if joins and last is not None and not last.closed:
                last.transcript = event.index
                last.open.append(event.index)
                self._blocks[event.index] = last
                return
            # A transcript before its audio (Gemini Live's outputTranscription may come
            # first): the audio item begins with it, and the audio joins it.
            state = self._add_item(
                {"type": "message", "status": "in_progress", "role": "assistant", "content": []}
            )
            state.transcript = event.index
            self._part_added(state, {"type": "audio", "transcript": ""})
            state.open.append(event.index)
            self._blocks[event.index] = state
            return
        if event.kind == "audio":
            last = self._items[-1] if self._items else None
            if (
                last is not None
                and not last.closed
                and last.transcript is not None
                and last.audio is None
            ):
                last.audio = event.index
                last.open.append(event.index)
                self._blocks[event.index] = last
                return
        if event.kind in ("text", "audio"):
            state = self._add_item(
                {"type": "message", "status": "in_progress", "role": "assistant", "content": []}
            )
            audio = event.kind == "audio"
            if audio:
                state.audio = event.index
            part = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
            self._part_added(state, part)
        elif event.kind == "tool_call":
            state = self._add_item(
                {
                    "type": "function_call",
                    "status": "in_progress",
                    "name": event.name or "",
                    "call_id": event.call_id or event.id or self._ids.make("call_"),
                    "arguments": "",
                }
            )
        else:
            self._blocks[event.index] = None
            return
        state.open.append(event.index)
        self._blocks[event.index] = state

    def _part_added(self, state: _Item, part: dict[str, Any]) -> None:
        self._send(
            {
                "type": "response.content_part.added",
                "response_id": self.response_id,
                "item_id": state.item["id"],
                "output_index": state.index,
                "content_index": 0,
                "part": part,
            }
        )

    def _add_item(self, fields: dict[str, Any]) -> _Item:
        item = {"id": self._ids.make("item_"), **fields}
        state = _Item(item, len(self._items))
        self._items.append(state)
        self._send(
            {
                "type": "response.output_item.added",
                "response_id": self.response_id,
                "output_index": state.index,
                "item": copy.deepcopy(item),
            }
        )
        if self.conversation is not None:
            before = self.conversation.add(item)
            self._send(
                {
                    "type": "conversation.item.added",
                    "previous_item_id": before,
                    "item": copy.deepcopy(item),
                }
            )
        return state

    def _where(self, state: _Item) -> dict[str, Any]:
        return {
            "response_id": self.response_id,
            "item_id": state.item["id"],
            "output_index": state.index,
        }

    def _delta(self, event: TextDelta | DataDelta | ToolInputDelta) -> None:
        state = self._blocks.get(event.index)
        if state is None or state.closed:
            return
        where = self._where(state)
        if type(event) is ToolInputDelta:
            state.text.append(event.delta)
            body = {"type": "response.function_call_arguments.delta", **where}
            body["call_id"] = state.item["call_id"]
            body["delta"] = event.delta
            self._send(body)
        elif type(event) is DataDelta:
            if event.index != state.audio:
                return
            if self.conversation is not None:
                size = self.conversation.audio.get(state.item["id"], 0)
                self.conversation.audio[state.item["id"]] = size + _b64_size(event.delta)
            if self._binary:
                self._queue.append(Message(text=base64.b64decode(event.delta), audio=True))
                return
            self._send(
                {
                    "type": "response.output_audio.delta",
                    **where,
                    "content_index": 0,
                    "delta": event.delta,
                },
                audio=True,
            )
        else:
            name = (
                "response.output_audio_transcript.delta"
                if event.index == state.transcript
                else "response.output_text.delta"
            )
            state.text.append(event.delta)
            self._send({"type": name, **where, "content_index": 0, "delta": event.delta})

    def _block_end(self, index: int) -> None:
        state = self._blocks.get(index)
        if state is None or state.closed or index not in state.open:
            return
        self._block_done(state, index)
        if not state.open:
            self._close_item(state, "completed")

    def _block_done(self, state: _Item, index: int) -> None:
        """The ``.done`` message of one of an item's blocks."""
        state.open.remove(index)
        where = self._where(state)
        text = "".join(state.text)
        if state.item["type"] == "function_call":
            state.item["arguments"] = text
            self._send(
                {
                    "type": "response.function_call_arguments.done",
                    **where,
                    "call_id": state.item["call_id"],
                    "name": state.item["name"],
                    "arguments": text,
                }
            )
        elif index == state.audio:
            self._send({"type": "response.output_audio.done", **where, "content_index": 0})
        elif index == state.transcript:
            self._send(
                {
                    "type": "response.output_audio_transcript.done",
                    **where,
                    "content_index": 0,
                    "transcript": text,
                }
            )
        else:
            self._send(
                {"type": "response.output_text.done", **where, "content_index": 0, "text": text}
            )

    def _close_item(self, state: _Item, status: str) -> None:
        state.closed = True
        item = state.item
        item["status"] = status
        text = "".join(state.text)
        if self.conversation is not None and item["id"] in self.conversation.truncated:
            text = ""  # (the unheard transcript was deleted)
        if item["type"] == "message":
            spoken = state.audio is not None or state.transcript is not None
            part = (
                {"type": "audio", "transcript": text} if spoken else {"type": "text", "text": text}
            )
            item["content"] = [
                {"type": "output_audio", "transcript": text}
                if spoken
                else {"type": "output_text", "text": text}
            ]
            self._send(
                {
                    "type": "response.content_part.done",
                    **self._where(state),
                    "content_index": 0,
                    "part": part,
                }
            )
        else:
            item["arguments"] = text
        self._send(
            {
                "type": "response.output_item.done",
                "response_id": self.response_id,
                "output_index": state.index,
                "item": copy.deepcopy(item),
            }
        )
        if self.conversation is not None and item["id"] in self.conversation.items:
            self._send(
                {
                    "type": "conversation.item.done",
                    "previous_item_id": self._previous(item["id"]),
                    "item": copy.deepcopy(item),
                }
            )

    def _previous(self, item_id: str) -> str | None:
        assert self.conversation is not None
        order = self.conversation.order
        at = order.index(item_id)
        return order[at - 1] if at > 0 else None

    def _finish(self, event: Finish) -> None:
        usage = event.usage if event.usage is not None else self._usage
        if usage is not None:
            self._usage = usage
        if event.reason.unified == "cancelled" and event.status != "failed":
            # (Cut: by the client, or because the user spoke over it.)
            raw = event.reason.raw
            why = raw if raw in ("turn_detected", "client_cancelled") else "turn_detected"
            self._end("cancelled", {"type": "cancelled", "reason": why})
        elif event.status == "failed":
            error = event.error or self._error or ErrorInfo(kind="server", message="failed")
            self._end("failed", {"type": "failed", "error": error_object(error)})
        elif event.status == "incomplete":
            raw = _INCOMPLETE_REASONS.get(event.reason.unified, event.reason.raw)
            self._end("incomplete", {"type": "incomplete", "reason": raw or "max_output_tokens"})
        else:
            self._end("completed", None)

    def _end(self, status: str, details: dict[str, Any] | None) -> None:
        item_status = "completed" if status == "completed" else "incomplete"
        for state in self._items:
            if not state.closed:
                for index in list(state.open):
                    self._block_done(state, index)
                self._close_item(state, item_status)
        self._ended = True
        self._send(
            {"type": "response.done", "response": self._response(status, details, self._usage)}
        )


def _final_usage(events: list[Event]) -> Usage | None:
    for event in reversed(events):
        if type(event) is Finish and event.usage is not None:
            return event.usage
    for event in reversed(events):
        if type(event) is UsageUpdate:
            return event.usage
    return None


def _b64_size(text: str) -> int:
    """The bytes a base64 text holds."""
    return len(text) * 3 // 4 - (2 if text.endswith("==") else 1 if text.endswith("=") else 0)

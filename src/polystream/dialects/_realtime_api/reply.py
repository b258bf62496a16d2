"""One Realtime response as a unified stream.

``response.created`` opens the stream (``StreamStart``) and ``response.done`` ends it
(``Finish``, with the usage). Blocks:

* a ``message`` item's content parts: an ``audio`` part is two blocks, the ``audio``
  (base64 ``DataDelta`` of ``response.output_audio.delta``, its format in the block's
  ``media``) and its ``transcript`` (``TextDelta`` of
  ``response.output_audio_transcript.delta``); a ``text`` part is a ``text`` block;
  they open at ``response.content_part.added`` and end at
  ``response.content_part.done``;
* every other item is one block: ``function_call`` a ``tool_call`` (arguments as
  ``ToolInputDelta``), ``mcp_call`` a ``server_tool_call``, anything else ``other``;
  it opens at ``response.output_item.added`` and ends at ``response.output_item.done``.

Audio that comes as binary messages (xAI's ``transport: binary``) goes to the audio part
opened last and still open, else to an audio block of its own (implicit) that the
``response.done`` ends.

The ``.done`` events that restate what the deltas built, and the progress of MCP calls,
are status updates. A message about a function call names its item, or only its
``call_id`` (xAI). Each native message gives one unified event whose ``extra`` is the
message (its *carrier*); an event the message implies besides (the transcript block
opened with its audio part, a block the ``response.done`` had to close) has ``extra``
``{"implicit": true}``.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from polystream.dialects._realtime_api.finish_reason import finish_of
from polystream.dialects._realtime_api.usage import to_usage
from polystream.dialects._responses.errors import error_info
from polystream.errors import EventOrderError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    DataDelta,
    Event,
    Finish,
    MediaInfo,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
)

__all__ = ["Reply"]

IMPLICIT: Final[dict[str, Any]] = {"implicit": True}

_ITEM_KINDS: Final[dict[str, BlockKind]] = {
    "function_call": "tool_call",
    "mcp_call": "server_tool_call",
}
_AUDIO_PARTS: Final = frozenset({"audio", "output_audio"})
_TEXT_PARTS: Final = frozenset({"text", "output_text"})
_STATUS_DONE: Final = frozenset(
    {
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.output_text.done",
        "response.function_call_arguments.done",
        "response.mcp_call_arguments.done",
    }
)
_MCP_PROGRESS: Final = frozenset(
    {"response.mcp_call.in_progress", "response.mcp_call.completed", "response.mcp_call.failed"}
)


class _Item:
    __slots__ = ("block", "call_id", "id", "parts", "type")

    def __init__(self, item_id: str, type_: str, call_id: str | None) -> None:
        self.id = item_id
        self.type = type_
        self.call_id = call_id
        self.block: int | None = None  # the item's block (not for messages)
        self.parts: dict[int, tuple[int, int | None]] = {}  # content_index -> blocks


class Reply:
    """The state of one response while it runs.

    Args:
        dialect: The stream's dialect (its ``StreamStart``).
        response_id: The response's id.
    """

    def __init__(self, dialect: str, response_id: str) -> None:
        self.dialect = dialect
        self.response_id = response_id
        self._next_block = 0
        self._items: dict[str, _Item] = {}
        self._calls: dict[str, _Item] = {}  # function calls by call id
        self._open: dict[int, str] = {}  # open block -> the item it belongs to
        self._audio_parts: list[tuple[str, int, int]] = []  # (item, content index, block)
        self._loose_audio: int | None = None  # binary audio with no audio part open
        self.tool_calls = False
        self.finished = False

    @property
    def item_ids(self) -> list[str]:
        """The items the response added so far."""
        return list(self._items)

    @property
    def call_ids(self) -> list[str]:
        """The call ids of the function calls the response added so far."""
        return list(self._calls)

    def open_blocks(self) -> list[int]:
        """The blocks still open, in order."""
        return sorted(self._open)

    # -- messages ------------------------------------------------------------------------

    def start(self, payload: dict[str, Any], out: list[Event]) -> None:
        """``response.created``."""
        out.append(StreamStart(dialect=self.dialect, id=self.response_id, extra=payload))

    def handle(
        self, kind: str, payload: dict[str, Any], output: MediaInfo, out: list[Event]
    ) -> None:
        """One message of the response (but ``response.created``), ``kind`` its GA
        name; ``output`` is the session's output audio format."""
        if kind == "response.output_item.added":
            self._item_added(payload, out)
        elif kind == "response.output_item.done":
            self._item_done(payload, out)
        elif kind == "response.content_part.added":
            self._part_added(payload, output, out)
        elif kind == "response.content_part.done":
            self._part_done(payload, out)
        elif kind == "response.output_audio.delta":
            block = self._part_block(payload, kind, audio=True, which=0)
            out.append(DataDelta(index=block, delta=_delta(payload, kind), extra=payload))
        elif kind in ("response.output_audio_transcript.delta", "response.output_text.delta"):
            audio = kind == "response.output_audio_transcript.delta"
            block = self._part_block(payload, kind, audio=audio, which=1 if audio else 0)
            ci = payload.get("content_index")
            out.append(
                TextDelta(
                    index=block,
                    delta=_delta(payload, kind),
                    part=ci if type(ci) is int else None,
                    extra=payload,
                )
            )
        elif kind in (
            "response.function_call_arguments.delta",
            "response.mcp_call_arguments.delta",
        ):
            block = self._item_block(payload, kind)
            out.append(ToolInputDelta(index=block, delta=_delta(payload, kind), extra=payload))
        elif kind in _STATUS_DONE:
            self._known_item(payload, kind)
            out.append(StatusUpdate(status="done", extra=payload))
        elif kind in _MCP_PROGRESS or kind.startswith(("mcp_list_tools.", "output_audio_buffer.")):
            out.append(
                StatusUpdate(
                    status=kind.rsplit(".", 1)[1] if kind in _MCP_PROGRESS else kind, extra=payload
                )
            )
        elif kind == "response.done":
            self._done(payload, out)
        else:  # pragma: no cover - the session routes only the kinds above here
            raise RemoteProtocolError(f"{kind} is not a response message")

    def binary_audio(
        self, data: bytes, output: MediaInfo, out: list[Event]
    ) -> tuple[str, int] | None:
        """Audio received as a binary message: a ``DataDelta`` (base64, ``extra``
        ``{"transport": "binary"}``) in the audio part opened last and still open, else
        in an audio block of its own, opened (implicit) for it. Returns the part's item
        and content index, None for a block of its own."""
        for item_id, ci, block in reversed(self._audio_parts):
            if block in self._open:
                out.append(DataDelta(index=block, delta=_b64(data), extra=_BINARY))
                return item_id, ci
        if self._loose_audio is None or self._loose_audio not in self._open:
            self._loose_audio = self._new_block("")
            out.append(
                BlockStart(index=self._loose_audio, kind="audio", media=output, extra=IMPLICIT)
            )
        out.append(DataDelta(index=self._loose_audio, delta=_b64(data), extra=_BINARY))
        return None

    # -- items and parts ----------------------------------------------------------------

    def _item_added(self, payload: dict[str, Any], out: list[Event]) -> None:
        item = payload.get("item")
        if not isinstance(item, dict):
            raise RemoteProtocolError("response.output_item.added has no item")
        item_id, item_type = item.get("id"), item.get("type")
        if not isinstance(item_id, str) or not isinstance(item_type, str):
            raise RemoteProtocolError("response.output_item.added: the item has no id or type")
        if item_id in self._items:
            raise EventOrderError(f"item {item_id} added twice")
        call_id = item.get("call_id")
        call_id = call_id if isinstance(call_id, str) else None
        state = self._items[item_id] = _Item(item_id, item_type, call_id)
        if call_id is not None:
            self._calls[call_id] = state
        if item_type == "message":
            status = item.get("status")
            out.append(
                StatusUpdate(
                    status=status if isinstance(status, str) else "in_progress", extra=payload
                )
            )
            return
        kind = _ITEM_KINDS.get(item_type, "other")
        if kind == "tool_call":
            self.tool_calls = True
        name = item.get("name")
        state.block = self._new_block(item_id)
        out.append(
            BlockStart(
                index=state.block,
                kind=kind,
                id=item_id,
                call_id=call_id,
                name=name if isinstance(name, str) else item_type if kind == "other" else None,
                extra=payload,
            )
        )

    def _item_done(self, payload: dict[str, Any], out: list[Event]) -> None:
        item = payload.get("item")
        item_id = item.get("id") if isinstance(item, dict) else None
        state = self._items.get(item_id) if isinstance(item_id, str) else None
        if state is None or not isinstance(item, dict):
            raise EventOrderError(f"response.output_item.done for item {item_id!r}, never added")
        status = item.get("status")
        status = status if isinstance(status, str) else None
        if state.block is None:
            self._close_item(state, out)
            out.append(StatusUpdate(status=status or "completed", extra=payload))
            return
        if state.block not in self._open:
            raise EventOrderError(f"response.output_item.done twice for item {item_id}")
        del self._open[state.block]
        value: Any = item.get("arguments") if state.type == "function_call" else item
        out.append(BlockEnd(index=state.block, status=status, value=value, extra=payload))

    def _part_added(self, payload: dict[str, Any], output: MediaInfo, out: list[Event]) -> None:
        state = self._message(payload, "response.content_part.added")
        ci = payload.get("content_index")
        part = payload.get("part")
        if type(ci) is not int or not isinstance(part, dict):
            raise RemoteProtocolError("response.content_part.added has no content_index or part")
        if ci in state.parts:
            raise EventOrderError(f"content part {ci} of item {state.id} added twice")
        ptype = part.get("type")
        block = self._new_block(state.id)
        if ptype in _AUDIO_PARTS:
            transcript = self._new_block(state.id)
            state.parts[ci] = (block, transcript)
            self._audio_parts.append((state.id, ci, block))
            out.append(
                BlockStart(index=block, kind="audio", id=state.id, media=output, extra=payload)
            )
            out.append(BlockStart(index=transcript, kind="transcript", id=state.id, extra=IMPLICIT))
            return
        state.parts[ci] = (block, None)
        kind: BlockKind = "text" if ptype in _TEXT_PARTS else "other"
        out.append(
            BlockStart(
                index=block,
                kind=kind,
                id=state.id,
                name=None if kind == "text" else str(ptype),
                extra=payload,
            )
        )

    def _part_done(self, payload: dict[str, Any], out: list[Event]) -> None:
        state = self._message(payload, "response.content_part.done")
        ci = payload.get("content_index")
        blocks = state.parts.get(ci) if type(ci) is int else None
        if blocks is None:
            raise EventOrderError(f"response.content_part.done for content part {ci}, never added")
        block, transcript = blocks
        if block not in self._open:
            raise EventOrderError(f"response.content_part.done twice for content part {ci}")
        part = payload.get("part")
        part = part if isinstance(part, dict) else {}
        del self._open[block]
        if transcript is None:
            out.append(BlockEnd(index=block, value=part.get("text"), extra=payload))
            return
        out.append(BlockEnd(index=block, extra=payload))
        if transcript in self._open:
            del self._open[transcript]
            out.append(BlockEnd(index=transcript, value=part.get("transcript"), extra=IMPLICIT))

    def _done(self, payload: dict[str, Any], out: list[Event]) -> None:
        response = payload.get("response")
        if not isinstance(response, dict):
            raise RemoteProtocolError("response.done has no response")
        for block in list(self._open):
            del self._open[block]
            out.append(BlockEnd(index=block, extra=IMPLICIT))
        details = response.get("status_details")
        details = details if isinstance(details, dict) else {}
        status = response.get("status")
        reason = details.get("reason")
        finish_status, finish_reason = finish_of(
            status if isinstance(status, str) else None,
            reason if isinstance(reason, str) else None,
            tool_calls=self.tool_calls,
        )
        error = details.get("error")
        usage = response.get("usage")
        if usage is None:
            usage = payload.get("usage")  # xAI also states it beside the response
        self.finished = True
        out.append(
            Finish(
                status=finish_status,
                reason=finish_reason,
                usage=to_usage(usage),
                error=error_info(error, output_started=True) if isinstance(error, dict) else None,
                extra=payload,
            )
        )

    # -- helpers ---------------------------------------------------------------------------

    def _new_block(self, item_id: str) -> int:
        block = self._next_block
        self._next_block += 1
        self._open[block] = item_id
        return block

    def _close_item(self, state: _Item, out: list[Event]) -> None:
        """End the blocks of a message item still open (no ``content_part.done``)."""
        for block, transcript in state.parts.values():
            for index in (block, transcript):
                if index is not None and index in self._open:
                    del self._open[index]
                    out.append(BlockEnd(index=index, extra=IMPLICIT))

    def _known_item(self, payload: dict[str, Any], kind: str) -> _Item:
        item_id = payload.get("item_id")
        state = self._items.get(item_id) if isinstance(item_id, str) else None
        if state is None and item_id is None:
            call_id = payload.get("call_id")
            state = self._calls.get(call_id) if isinstance(call_id, str) else None
            if state is None:
                raise EventOrderError(f"{kind} for call {call_id!r}, never added")
        if state is None:
            raise EventOrderError(f"{kind} for item {item_id!r}, never added")
        return state

    def _message(self, payload: dict[str, Any], kind: str) -> _Item:
        state = self._known_item(payload, kind)
        if state.type != "message":
            raise EventOrderError(f"{kind} for a {state.type} item (it has no content parts)")
        return state

    def _part_block(self, payload: dict[str, Any], kind: str, *, audio: bool, which: int) -> int:
        """The block of a content part's delta: the audio (``which`` 0) or transcript
        (1) of an audio part, the block of a text part. A delta that names no content
        part (xAI's transcript deltas) is the item's last part of its kind."""
        state = self._message(payload, kind)
        ci = payload.get("content_index")
        if ci is None:  # (xAI names no part: the item's last of the kind)
            ci = next(
                (i for i, b in reversed(state.parts.items()) if (b[1] is not None) == audio), None
            )
        blocks = state.parts.get(ci) if type(ci) is int else None
        if blocks is None:
            raise EventOrderError(f"{kind} for content part {ci} of item {state.id}, never added")
        if (blocks[1] is not None) != audio:
            what = "a text" if audio else "an audio"
            raise EventOrderError(f"{kind} for content part {ci} of item {state.id}, {what} part")
        block = blocks[which]
        assert block is not None
        if block not in self._open:
            raise EventOrderError(f"{kind} after content part {ci} was done")
        return block

    def _item_block(self, payload: dict[str, Any], kind: str) -> int:
        state = self._known_item(payload, kind)
        if state.block is None or state.block not in self._open:
            raise EventOrderError(f"{kind} for item {state.id}, which has no open block")
        return state.block


_BINARY: Final[dict[str, Any]] = {"transport": "binary"}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _delta(payload: dict[str, Any], kind: str) -> str:
    delta = payload.get("delta")
    if type(delta) is not str:
        raise RemoteProtocolError(f"{kind} has no string delta")
    return delta

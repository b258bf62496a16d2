"""Events of another dialect -> Chat chunks, one chunk per content event (see
:mod:`polystream.dialects._chat.encode` for the shape and the carrier), and the state and
pieces both of the Chat encoder's paths share: the blocks it knows, the chunk writer and
the ``delta.polystream`` carrier entries.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Final

from polystream.dialects._base import DialectEncoder
from polystream.dialects._chat.finish_reason import map_finish_reason, to_wire_finish_reason
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects._chat.usage import usage_to_wire
from polystream.dialects._chat.wire import (
    CHUNK_OBJECT,
    ENCODER,
)
from polystream.dialects._free_form import is_free_form
from polystream.dialects._usage_fold import FoldsUsage
from polystream.errors import LocalProtocolError
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    Citation,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    KeepAlive,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import SSEEncoder

__all__ = [
    "MAX_CHOICES",
    "NO_INDEX",
    "SSE",
    "Block",
    "ForeignEncoding",
    "comment_line",
    "error_object",
]

_CHAT_KINDS: Final = frozenset({"text", "reasoning", "refusal", "tool_call"})
# The choices an encoder opens (indexes 0 to MAX_CHOICES - 1). Choices appear in index
# order (see _chunk), so a block of candidate N makes N + 1 of them; no provider sends
# more than a few, and a malformed source's huge index is refused, not filled in.
MAX_CHOICES: Final = 1024
SSE: Final = SSEEncoder()
NO_INDEX: Final = "-"

# Events of another dialect that may write bytes (the rest write nothing).
_WRITING: Final = frozenset(
    {
        StreamStart,
        BlockStart,
        TextDelta,
        ReasoningDelta,
        ToolInputDelta,
        BlockEnd,
        SignatureDelta,
        Citation,
        Metadata,
        UsageUpdate,
        ErrorEvent,
        Finish,
        KeepAlive,
    }
)


class Block:
    """A block the encoder was given (by its BlockStart) and what it wrote of it."""

    __slots__ = (
        "candidate",
        "custom",
        "fast",
        "has_args",
        "kind",
        "lost",
        "start",
        "tool_index",
        "written",
    )

    def __init__(self, start: BlockStart, tool_index: Any) -> None:
        self.start = start
        self.kind: BlockKind = start.kind
        self.candidate = start.candidate
        self.tool_index = tool_index
        self.lost = start.kind not in _CHAT_KINDS
        # A free-form (custom) tool call: its input goes in ``custom.input``, not in
        # ``function.arguments`` (see polystream.dialects._free_form).
        self.custom = is_free_form(start)
        self.has_args = False
        self.written = False  # a decoder of the output has opened this block
        # For another dialect's deltas of one type: the envelope and delta type it was
        # made for, the chunk's bytes around the value, and the choice's open kind after
        # it (None: tool input). See FastPaths._fast_entry (._fast).
        self.fast: tuple[Any, type, bytes, bytes, str | None] | None = None


class ForeignEncoding(FoldsUsage, DialectEncoder):
    """The Chat encoder's state, its writer and carrier, and its path for another
    dialect's events (:meth:`_foreign`); :class:`~.encode.ChatEncoder` adds the path for
    a Chat stream's own events and the fast paths."""

    quirks: ClassVar[Quirks]

    def __init__(
        self,
        *,
        id_factory: Callable[[], str] | None = None,
        clock: Callable[[], float] | None = None,
        record: bool = False,
    ) -> None:
        super().__init__()
        self._id_factory = id_factory
        self._clock = clock
        self.chunks: list[dict[str, Any]] | None = [] if record else None
        # own-chunk state
        self._env: dict[str, Any] = {}
        self._entries: list[dict[str, Any]] | None = None
        self._entry: dict[str, Any] | None = None
        self._entry_candidate: int | None = None
        self._frag: dict[str, Any] | None = None
        self._frag_block: int | None = None
        self._specials: dict[str, Any] = {}
        self._residual: dict[int, dict[str, Any]] = {}
        self._choice_fields: dict[str, Any] = self.quirks.choice_fields
        # every path
        self._blocks: dict[int, Block] = {}
        self._tool_count: dict[int, int] = {}
        self._foreign_env: dict[str, Any] | None = None
        self._start: StreamStart | None = None
        self._role_sent: set[int] = set()
        self._candidates: list[int] = []
        self._finished: set[int] = set()
        self._usage: Usage | None = None
        self._reasoning_noted: set[int] = set()
        self._carry_next: dict[int, int] = {}  # next polystream carrier index per choice
        # per choice: the kind of text-like block a decoder of this output has open
        self._open_kind: dict[int, str | None] = {}
        self._done = False
        self._error_written = False
        self._usage_written = False  # a usage object went out with a Chat stream's chunk

    # -- output -------------------------------------------------------------------------

    def _write(self, chunk: dict[str, Any], event_name: str | None = None) -> bytes:
        if self.chunks is not None:
            self.chunks.append(chunk)
        body = ENCODER.encode(chunk)
        if event_name is None:
            return b"data: " + body + b"\n\n"
        return SSE.event(body.decode(), event=event_name)

    # -- the carrier --------------------------------------------------------------------

    def _next_carry_index(self, candidate: int, index: Any) -> None:
        self._carry_next[candidate] = (
            index + 1 if type(index) is int else self._carry_next.get(candidate, 0) + 1
        )

    def _carry(self, event: Event, x: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``delta.polystream`` entry for an event Chat has no field for.

        Each entry has an ``index``, counting per choice: the openai SDK merges list
        entries of a delta by their ``index`` and rejects entries without one.
        """
        if isinstance(event, SignatureDelta | Citation):
            block = self._blocks.get(event.index) if event.index is not None else None
            candidate = block.candidate if block is not None else 0
        elif isinstance(event, BlockStart):
            candidate = event.candidate
        else:
            assert isinstance(event, Metadata)
            candidate = event.candidate
        if x is not None and "ci" in x:
            candidate = x["ci"]
        elif x is not None and self._entry_candidate is not None:
            candidate = self._entry_candidate
        index: Any = self._carry_next.get(candidate, 0)
        if x is not None and "pi" in x:
            index = x["pi"]
        if x is not None and isinstance(x.get("pe"), dict):
            # The entry as received (it was not in the shape written here).
            entry: dict[str, Any] = x["pe"]
            self._next_carry_index(candidate, entry.get("index", NO_INDEX))
            return entry
        self._next_carry_index(candidate, index)
        item: dict[str, Any] = {} if index is NO_INDEX or index == "-" else {"index": index}
        if isinstance(event, SignatureDelta):
            block = self._blocks.get(event.index)
            kind = block.kind if block is not None else "reasoning"
            item["type"] = "signature"
            item["target"] = kind
            if block is not None and kind == "tool_call" and block.tool_index is not None:
                item["tool_index"] = block.tool_index
            item["data"] = event.delta
            # The origin (see SignatureDelta): a Chat stream's own events name it only
            # when their entry did, so that such a stream is rewritten exactly.
            carrier = event.extra.get("carrier") if event.extra is not None else None
            if isinstance(carrier, str):
                item["origin"] = carrier
            elif x is None and self._start is not None:
                item["origin"] = self._start.dialect
            return item
        if isinstance(event, BlockStart):
            item["type"] = "start"
            item["kind"] = event.kind
            if event.name is not None:
                item["name"] = event.name
            if event.id is not None:
                item["id"] = event.id
            return item
        if isinstance(event, Citation):
            item["type"] = "citation"
            item["target"] = "text" if event.index is not None else None
            item["citation"] = event.citation
            return item
        item["type"] = "metadata"
        item["name"] = event.name
        item["value"] = event.value
        if event.merge:
            item["merge"] = True
        return item

    # -- events from another dialect ----------------------------------------------------

    def _envelope(self) -> dict[str, Any]:
        if self._foreign_env is None:
            if self._start is not None and self._env:
                self._foreign_env = {k: v for k, v in self._env.items() if k != "obfuscation"}
            else:
                self._foreign_env = self._synthesise(self._start)
        return self._foreign_env

    def _synthesise(self, start: StreamStart | None) -> dict[str, Any]:
        quirks = self.quirks
        source_id = start.id if start is not None else None
        if self._id_factory is not None:
            chunk_id = self._id_factory()
        elif source_id is not None:
            chunk_id = (
                source_id
                if source_id.startswith(quirks.id_prefix)
                else (quirks.id_prefix + source_id)
            )
        else:
            chunk_id = quirks.id_prefix + uuid.uuid4().hex
            self.default("id", start, "the source stream has no id: wrote a generated one")
        created = start.created if start is not None else None
        if created is None:
            created = 0 if quirks.created_zero or self._clock is None else int(self._clock())
            if not quirks.created_zero:  # (xAI's own streams say created 0)
                what = "created 0" if self._clock is None else "the time of writing"
                self.default(
                    "created", start, f"the source stream has no creation time: wrote {what}"
                )
        model = start.model if start is not None and start.model else quirks.model
        if start is None or not start.model:
            self.default("model", start, f"the source stream names no model: wrote {model!r}")
        return {
            "id": chunk_id,
            "object": CHUNK_OBJECT,
            "created": created,
            "model": model,
            "choices": [],
        }

    def _chunk(
        self, candidate: int, delta: dict[str, Any], finish_reason: str | None = None
    ) -> bytes:
        earlier = b""
        if candidate not in self._role_sent:
            if not 0 <= candidate < MAX_CHOICES:
                raise LocalProtocolError(
                    f"choice index {candidate} out of range (0 to {MAX_CHOICES - 1}): a Chat"
                    " stream opens every choice below the one it writes",
                    dialect=self.dialect,
                )
            # Choices first appear in index order, as in OpenAI's streams: the openai SDK's
            # accumulator fails on a choice whose lower indexes it has not seen (another
            # dialect's candidate 1 may have output before candidate 0). A dialect with a
            # role delta opens this choice with it too; else the role goes with ``delta``.
            opens = self.quirks.role_delta is not None
            earlier = b"".join(
                [self._open_choice(c) for c in range(candidate + opens) if c not in self._role_sent]
            )
            if not opens:
                self._role_sent.add(candidate)
                delta = {"role": "assistant", **delta}
        return earlier + self._one_entry(candidate, delta, finish_reason)

    def _open_choice(self, candidate: int) -> bytes:
        """The chunk that opens a choice before its first output: the dialect's role
        delta (see :class:`~polystream.dialects._chat.quirks.Quirks`), else the role
        alone."""
        self._role_sent.add(candidate)
        role = self.quirks.role_delta
        return self._one_entry(candidate, {"role": "assistant"} if role is None else dict(role))

    def _one_entry(
        self, candidate: int, delta: dict[str, Any], finish_reason: str | None = None
    ) -> bytes:
        """A chunk of one choice entry."""
        if candidate not in self._candidates:
            self._candidates.append(candidate)
        chunk = dict(self._envelope())
        entry: dict[str, Any] = {"index": candidate, "delta": delta}
        entry.update(self.quirks.choice_fields)
        if finish_reason is not None:
            entry["finish_reason"] = finish_reason
        chunk["choices"] = [entry]
        return self._write(chunk)

    def _foreign(self, event: Event) -> bytes:
        kind = type(event)
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            if event.error.kind == "protocol":
                # A decode error of the source stream: nothing to write (and no reason
                # to cut a chunk that is being gathered).
                self.lose("error:protocol", event, "a decode error of the source stream")
                return b""
        elif kind not in _WRITING:
            if kind is Unknown:
                self.lose("event:unknown", event, "an unknown event of another dialect")
            return b""
        prefix = self._close()
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._start = event
            self._foreign_env = self._synthesise(event)
            if self.quirks.role_delta is not None and 0 not in self._role_sent:
                # OpenAI's first chunk: the first choice opens before any output.
                return prefix + self._open_choice(0)
            return prefix
        if kind is BlockStart:
            assert isinstance(event, BlockStart)
            tool_index = None
            if event.kind == "tool_call":
                tool_index = self._tool_count.get(event.candidate, 0)
                self._tool_count[event.candidate] = tool_index + 1
            started = self._blocks[event.index] = Block(event, tool_index)
            if started.lost:
                self.lose(
                    f"block:{event.kind}",
                    event,
                    f"Chat Completions has no {event.kind} output",
                )
                return prefix
            if event.kind != "tool_call":
                # A decoder would continue the open block of the same kind (Chat shows
                # no boundary) and cannot know a block's name or id: carry the start.
                if (
                    event.name is not None
                    or event.id is not None
                    or self._open_kind.get(event.candidate) == event.kind
                ):
                    items: list[dict[str, Any]] = []
                    self._start_block(started, items)
                    return prefix + self._chunk(event.candidate, {"polystream": items})
                return prefix
            # A tool call: its first fragment, with the id to send the result back with
            # (``call_id`` where the source distinguishes it from the item id).
            call_id = event.call_id or event.id or f"call_{event.index}"
            self._open_kind[event.candidate] = None
            if started.custom:
                # A free-form call: Chat's custom tool call, its input as text.
                fragment = {
                    "index": tool_index,
                    "id": call_id,
                    "type": "custom",
                    "custom": {"name": event.name or "", "input": ""},
                }
            else:
                fragment = {
                    "index": tool_index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": event.name or "", "arguments": ""},
                }
            return prefix + self._chunk(event.candidate, {"tool_calls": [fragment]})
        if kind in (TextDelta, ReasoningDelta, ToolInputDelta):
            assert isinstance(event, TextDelta | ReasoningDelta | ToolInputDelta)
            block = self._blocks.get(event.index)
            if block is None or block.lost:
                return prefix
            if kind is ToolInputDelta or block.kind == "tool_call":
                self._open_kind[block.candidate] = None
                block.has_args = True
                fragment = _input_fragment(block, event.delta)
                return prefix + self._chunk(block.candidate, {"tool_calls": [fragment]})
            if kind is ReasoningDelta or block.kind == "reasoning":
                if not self.quirks.reasoning_native and event.index not in self._reasoning_noted:
                    self._reasoning_noted.add(event.index)
                    self.lose(
                        "reasoning",
                        event,
                        "OpenAI Chat streams no reasoning text; carried in delta.reasoning_content",
                        carried=True,
                    )
                if event.delta:
                    block.written = True
                    self._open_kind[block.candidate] = "reasoning"
                return prefix + self._chunk(block.candidate, {"reasoning_content": event.delta})
            if event.delta:
                block.written = True
                self._open_kind[block.candidate] = block.kind
            field = "refusal" if block.kind == "refusal" else "content"
            return prefix + self._chunk(block.candidate, {field: event.delta})
        if kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            block = self._blocks.get(event.index)
            if block is None or block.lost or block.kind != "tool_call" or block.has_args:
                return prefix
            # Arguments sent whole (Gemini functionCall, Responses item.done): one fragment.
            value = event.value if event.value is not None else block.start.value
            if value is None:
                return prefix
            arguments = value if isinstance(value, str) else ENCODER.encode(value).decode()
            block.has_args = True
            fragment = _input_fragment(block, arguments)
            return prefix + self._chunk(block.candidate, {"tool_calls": [fragment]})
        if kind is SignatureDelta:
            assert isinstance(event, SignatureDelta)
            block = self._blocks.get(event.index)
            if block is not None and block.lost:
                self.lose("signature", event, f"signature of a {block.kind} block, not carried")
                return prefix
            self.lose("signature", event, "Chat has no signature field", carried=True)
            candidate = block.candidate if block is not None else 0
            items = []
            if block is not None:
                self._start_block(block, items)
            items.append(self._carry(event))
            return prefix + self._chunk(candidate, {"polystream": items})
        if kind is Citation:
            assert isinstance(event, Citation)
            block = self._blocks.get(event.index) if event.index is not None else None
            if block is not None and block.lost:
                self.lose("citation", event, f"citation of a {block.kind} block, not carried")
                return prefix
            self.lose("citation", event, "Chat annotations are url_citation only", carried=True)
            candidate = block.candidate if block is not None else 0
            items = []
            if block is not None:
                self._start_block(block, items)
            items.append(self._carry(event))
            return prefix + self._chunk(candidate, {"polystream": items})
        if kind is Metadata:
            assert isinstance(event, Metadata)
            self.lose(f"metadata:{event.name}", event, "Chat has no such field", carried=True)
            return prefix + self._chunk(event.candidate, {"polystream": [self._carry(event)]})
        if kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            self._usage = event.usage if self._usage is None else self._usage.merged(event.usage)
            return prefix
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            self._error_written = True
            return prefix + self._write({"error": error_object(event.error)})
        if kind is Finish:
            assert isinstance(event, Finish)
            return prefix + self._finish(event)
        assert isinstance(event, KeepAlive)
        return prefix + comment_line(event)

    def _start_block(self, block: Block, items: list[dict[str, Any]]) -> None:
        """Carry a text-like block's start when a decoder of the output could not see
        it: it would continue the open block of the same kind, attach a signature to
        an older block, or lose the block's name or id."""
        if block.written or block.kind == "tool_call":
            return
        block.written = True
        self._open_kind[block.candidate] = block.kind
        self.lose("block-start", block.start, "Chat has no block boundaries", carried=True)
        items.append(self._carry(block.start))

    def _finish(self, event: Finish) -> bytes:
        self._done = True
        if event.status == "truncated":
            return b""
        parts: list[bytes] = []
        if event.status == "failed" and event.error is not None and not self._error_written:
            # A failure reported only on the terminal event (Responses response.failed):
            # Chat's only way to say it is an error line.
            self._error_written = True
            parts.append(self._write({"error": error_object(event.error)}))
        if event.status != "failed":
            reason = to_wire_finish_reason(event.reason)
            delta: dict[str, Any] = {}
            mapped, status = map_finish_reason(reason)
            if (
                mapped.unified != event.reason.unified
                or status != event.status
                or (event.reason.raw is not None and event.reason.raw != reason)
            ):
                # Chat has no word for this reason (pause_turn, refusal, a provider's
                # own value): carried, so that a decode restores the Finish exactly.
                self.lose(
                    f"finish_reason:{event.reason.unified}",
                    event,
                    f"Chat finish_reason has no {event.reason.raw or event.reason.unified!r}",
                    carried=True,
                )
                first = (self._candidates or [0])[0]
                item = {
                    "index": self._carry_next.get(first, 0),
                    "type": "finish",
                    "unified": event.reason.unified,
                    "raw": event.reason.raw,
                    "status": event.status,
                }
                self._next_carry_index(first, item["index"])
                delta = {"polystream": [item]}
            for candidate in self._candidates or [0]:
                if candidate not in self._finished:
                    self._finished.add(candidate)
                    parts.append(self._chunk(candidate, delta, reason))
                    delta = {}
        usage = self._usage
        if event.usage is not None:
            usage = event.usage if usage is None else usage.merged(event.usage)
        if usage is not None and not usage.is_empty() and not self._usage_written:
            chunk = dict(self._envelope())
            chunk["choices"] = []
            chunk["usage"] = usage_to_wire(usage, self.quirks)
            parts.append(self._write(chunk))
        if event.status != "failed":
            parts.append(b"data: [DONE]\n\n")
        return b"".join(parts)


def _input_fragment(block: Block, text: str) -> dict[str, Any]:
    """A continuation fragment of another dialect's tool call: ``text`` appended to a
    function call's arguments, or to a custom call's input."""
    if block.custom:
        return {"index": block.tool_index, "custom": {"input": text}}
    return {"index": block.tool_index, "function": {"arguments": text}}


def error_object(error: ErrorInfo) -> dict[str, Any]:
    """An OpenAI-shaped error object for an error of another dialect."""
    return {
        "message": error.message,
        "type": error.code or error.kind,
        "param": None,
        "code": error.code,
    }


def comment_line(event: KeepAlive) -> bytes:
    text = event.comment if event.comment is not None else (event.name or "")
    return SSE.comment(text) + b"\n"

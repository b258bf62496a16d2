"""Unified events -> Messages SSE (Anthropic Messages, xAI ``/v1/messages``).

Two cases:

* **Same family** (the events were decoded from ``anthropic_messages`` or
  ``xai_messages``): every native event is rebuilt from the unified events and their
  ``extra`` (see :mod:`.decode`), so the output reproduces the source stream event for
  event with the same JSON values, signatures byte for byte, without ``raw``.
* **Another dialect**: a valid stream the Anthropic SDK accepts is synthesised:
  ``message_start`` (a ``msg_…`` id, the model, usage), ``content_block_start`` of the
  right type (``tool_use`` ids ``toolu_…`` when the source has none), the deltas,
  ``content_block_stop``, ``message_delta`` (stop reason mapped from the unified
  reason, usage converted back) and ``message_stop``. A failed source ends with an
  ``error`` event, a truncated one without ``message_stop``.

What the Messages API cannot carry is reported with :meth:`DialectEncoder.lose`:
audio, images, reply-level metadata (Gemini grounding), citations of other dialects,
opaque state of a block that itself has no Messages form, provider-executed tool
blocks of other providers.

Signatures follow the origin rule of :class:`~polystream.events.SignatureDelta`: one
whose origin (``extra["carrier"]``, else the StreamStart's dialect) is this dialect is
written natively, without any prefix (an Anthropic signature that went through Chat
or Gemini comes back as a plain thinking ``signature``). One documented carrier exists:
**opaque state of another dialect** (OpenAI/xAI ``encrypted_content``, a Gemini thought
signature, and ``xai_messages`` state in an ``anthropic_messages`` stream and vice
versa) travels as a ``signature_delta`` of the block it belongs to (thinking, text or
tool_use; Gemini signs text and function-call parts), prefixed with
``polystream:v1:<origin dialect>:``. The Messages decoder recognises the prefix and
restores the original :class:`SignatureDelta` with ``extra["carrier"]`` = the origin,
so A -> Messages -> A (or A -> Messages -> C -> A) through polystream keeps it
(``carried=True`` in the loss report). The Anthropic SDK keeps a ``signature_delta``
on thinking blocks only (it skips one on a text or tool_use block), and Anthropic
rejects a carried signature if the thinking block is sent back to it; turn the carrier
off with ``carry_signatures=False``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, ClassVar, Final

import msgspec

from polystream.dialects._carrier import origin, wrap
from polystream.dialects._cursors import MarkingEncoder
from polystream.dialects._messages.error_kind import native_error_type
from polystream.dialects._messages.finish_reason import stop_reason_for
from polystream.dialects._messages.quirks import ANTHROPIC, Quirks, next_provider_index
from polystream.dialects._messages.usage import from_usage
from polystream.dialects._messages.wire import (
    CARRIER_PREFIX,
    TOOL_USE_TYPES,
    apply_diff,
    skeleton,
)
from polystream.dialects._usage_fold import FoldsUsage
from polystream.errors import LocalProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    Event,
    Finish,
    KeepAlive,
    Metadata,
    Raw,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)
from polystream.wire.jsondepth import decode_bounded
from polystream.wire.sse import SSEEncoder

__all__ = ["CARRIER_PREFIX", "FAMILY", "MessagesEncoder", "random_id"]

FAMILY: Final = frozenset({"anthropic_messages", "xai_messages"})

_CARRIER_BLOCKS: Final = frozenset({"thinking", "text", "tool_use"})
_NO_STOP_REASON: Final = frozenset({"other", "error", "cancelled"})
"""Unified finish reasons Messages has no stop reason for (``end_turn`` is written)."""
"""Blocks whose ``signature_delta`` may carry another dialect's state."""
"""Dialects whose ``extra`` fields this encoder understands."""


_JSON: Final = msgspec.json.Encoder()
_SSE: Final = SSEEncoder()
_WRITER_NAMES: Final[dict[type, str]] = {
    TextDelta: "_text",
    ToolInputDelta: "_tool_input",
    ReasoningDelta: "_reasoning",
    SignatureDelta: "_signature",
    BlockStart: "_block_start",
    BlockEnd: "_block_end",
    Citation: "_citation",
    UsageUpdate: "_usage_update",
    Finish: "_finish",
    ErrorEvent: "_error",
    KeepAlive: "_keep_alive",
    Unknown: "_unknown",
}
"""The events that write bytes, and the name of the method that writes each (the rest
are handled in ``_encode``). (Looked up on each call: a table of the instance's bound
methods would be a reference cycle, and a dropped encoder would wait for the cycle
collector instead of being freed at once.)"""


def random_id(prefix: str) -> str:
    """A fresh id like the provider's: ``msg_…`` / ``toolu_…`` with 24 random base62-ish chars."""
    return f"{prefix}_01{secrets.token_urlsafe(18).replace('-', 'x').replace('_', 'y')}"


class _Block:
    """What the encoder remembers of a block it opened."""

    __slots__ = ("content", "ended", "head", "held", "index", "mode", "native", "type", "value")

    def __init__(
        self, index: int, block_type: str, native: dict[str, Any] | None, value: Any = None
    ) -> None:
        self.index = index  # provider index
        self.type = block_type  # native block type
        self.native = native  # the block being built (blocks folded into message_start)
        self.value = value  # whole content another dialect sent at the start
        self.content = False  # a content delta was written
        self.ended = False
        # Tool input of another dialect: "json" (sent as is), "text" (not JSON: sent
        # inside {"input": "..."}), or None while only whitespace arrived (held).
        self.mode: str | None = None
        self.held: list[str] = []  # (in pieces: joined once, when the input begins)
        # The bytes of this block's content_block_delta up to the value, once the fast
        # path wrote one (its type, and the tool input's mode, no longer change).
        self.head: bytes | None = None


def _frame(name: str | None, payload: dict[str, Any]) -> bytes:
    """One SSE event: ``event: <name>`` + ``data: <compact JSON>``."""
    data = _JSON.encode(payload)
    if name is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def _with(payload: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    """Add the native top-level fields the decoder kept in ``extra["fields"]``."""
    if extra is not None:
        fields = extra.get("fields")
        if isinstance(fields, dict):
            payload.update(fields)
    return payload


def _name(default: str, extra: dict[str, Any] | None) -> str | None:
    """The SSE event name: the payload type, unless the source named it otherwise."""
    if extra is not None and "event" in extra:
        name = extra["event"]
        return name if isinstance(name, str) else None
    return default


class MessagesEncoder(FoldsUsage, MarkingEncoder):
    """Encoder for the Messages SSE stream; subclasses bind ``dialect`` and ``quirks``.

    Args:
        ping_after_first_block: Emit a ``ping`` after the first ``content_block_start``
            when the source is another dialect (Anthropic's own streams do; the SDK
            skips it). Same-family sources keep exactly their own pings.
        carry_signatures: Carry other dialects' opaque reasoning state in the thinking
            signature (see the module docstring).
        id_factory: Makes ids from a prefix (``msg``, ``toolu``); defaults to
            :func:`random_id`. Pass a deterministic one in tests.
    """

    dialect: ClassVar[str] = "anthropic_messages"
    quirks: ClassVar[Quirks] = ANTHROPIC

    def __init__(
        self,
        *,
        ping_after_first_block: bool = False,
        carry_signatures: bool = True,
        id_factory: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__()
        self._ping_after_first = ping_after_first_block
        self._carry = carry_signatures
        self._new_id = id_factory or random_id
        self._source: str | None = None
        self._family = False
        self._start: StreamStart | None = None
        self._message: dict[str, Any] | None = None  # message_start being built
        self._message_usage: dict[str, Any] | None = None
        self._in_start: list[dict[str, Any]] = []  # blocks folded into message_start
        self._started = False  # message_start written
        self._pending: tuple[str | None, dict[str, Any], int, str] | None = None
        self._blocks: dict[int, _Block] = {}  # unified index -> block
        self._open: dict[int, int] = {}  # provider index -> unified index
        self._opened = 0
        self._skipped: set[int] = set()
        self._usage: Usage | None = None
        self._error_sent = False
        self._stop_sent = False  # a stop reason was written (message_delta or message_start)
        self._refusal: list[str] = []  # text of another dialect's refusal blocks
        self._pinged = False
        self._done = False
        self._fast = True  # the byte-template delta path (False: always the general path)

    # -- the contract ----------------------------------------------------------------------

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates inside a block only go into the final
        ``message_delta`` (see :meth:`DialectEncoder.folds_usage`); a Messages
        dialect's may be a ``message_delta`` of their own."""
        return source not in FAMILY

    def encode(self, event: Event) -> bytes:
        """Encode one unified event; returns the bytes to send now (maybe none).

        Text and tool-input deltas without native residuals, the bulk of a stream, are
        written from a per-block byte template (what :meth:`_delta` writes, byte for
        byte); anything else takes the general path.
        """
        kind = type(event)
        if (
            (kind is TextDelta or kind is ToolInputDelta)
            and self._pending is None
            and self._message is None
            and self._fast
            and (event.extra is None or not self._family)
        ):
            data = self._fast_delta(event)  # type: ignore[arg-type]
            if data is not None:
                self.event_index += 1
                return data
        elif (
            kind is UsageUpdate
            and self._pending is None
            and self._message is None
            and self._fast
            and (not self._family or event.extra is None or "delta" not in event.extra)
        ):
            # Usage without a message_delta of its own: sent in the final one.
            return self._keep_usage(event.usage)  # type: ignore[union-attr,arg-type]
        return self._encode_pending(event)

    def _fast_delta(self, event: TextDelta | ToolInputDelta) -> bytes | None:
        block = self._blocks.get(event.index)
        if block is None:
            return None
        text = type(event) is TextDelta
        head = block.head
        if head is None:
            if text:
                if block.type != "text":
                    return None
            elif block.type not in TOOL_USE_TYPES or not (self._family or block.mode == "json"):
                return None
        elif text is not (block.type == "text"):
            return None  # (a text block's head is text_delta's, any other's input_json's)
        try:
            value = _JSON.encode(event.delta)
            if head is None:
                head = block.head = (
                    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
                    + _JSON.encode(block.index)
                    + (
                        b',"delta":{"type":"text_delta","text":'
                        if text
                        else b',"delta":{"type":"input_json_delta","partial_json":'
                    )
                )
                block.content = True
        except Exception:  # not encodable: the general path says how it fails
            return None
        data = head + value + b"}}\n\n"
        marks = self._marks
        if marks is not None:
            marks.append((None, data, None))
        return data

    def _write(self, name: str | None, payload: dict[str, Any]) -> bytes:
        """One SSE event (:func:`_frame`), marked for :meth:`encode_entries` (its cursor
        is the counter)."""
        data = _frame(name, payload)
        marks = self._marks
        if marks is not None:
            if name is not None and ("\n" in name or "\r" in name):
                self._mark_read(data)  # (a name that is more than one line)
            else:
                marks.append((None, data, None))
        return data

    def _encode(self, event: Event) -> bytes:
        if self._error_sent:
            return self._after_error(event)
        extra = event.extra
        parts: list[bytes] = []
        if self._pending is not None:
            if self._fold_pending(event, extra):
                return b""
            parts.append(self._flush_pending())
        if self._message is not None:
            if self._fold_message(event, extra):
                return b"".join(parts)
            parts.append(self._write_message_start())
        kind = type(event)
        writer = _WRITER_NAMES.get(kind)
        if writer is not None:
            parts.append(getattr(self, writer)(event))
        elif kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._stream_start(event)
        elif kind is DataDelta:
            assert isinstance(event, DataDelta)
            self._lose_block(event, "data", "the Messages API streams no audio or image output")
        elif kind is Metadata:
            assert isinstance(event, Metadata)
            self.lose_metadata(
                event, "the Messages API has no reply-level metadata (grounding, safety ratings)"
            )
        elif kind in (StatusUpdate, Warning, Raw):
            pass  # lifecycle words, decoding anomalies and raw views have no wire form
        return b"".join(parts)

    def _after_error(self, event: Event) -> bytes:
        """An event after the ``error`` event, which ends a Messages stream: nothing
        more is written (a reader stops at the error, and the SDK raises there)."""
        kind = type(event)
        if kind is Finish:
            if self._done:
                raise LocalProtocolError("a second Finish", dialect=self.dialect)
            self._done = True
        elif kind not in (KeepAlive, StatusUpdate, Warning, Raw):
            self.lose(
                "after_error", event, "a Messages stream ends at its error event: nothing follows"
            )
        return b""

    def _close(self) -> bytes:
        """End of the events: write whatever is still held back."""
        parts: list[bytes] = []
        if self._pending is not None:
            parts.append(self._flush_pending())
        if self._message is not None:
            parts.append(self._write_message_start())
        return b"".join(parts)

    # -- message_start -----------------------------------------------------------------------

    def _stream_start(self, event: StreamStart) -> None:
        if self._start is not None or self._started:
            raise LocalProtocolError("a second StreamStart", dialect=self.dialect)
        self._source = event.dialect
        self._family = event.dialect in FAMILY
        self._start = event
        self._message = {}

    def _fold_message(self, event: Event, extra: dict[str, Any] | None) -> bool:
        """Fold the usage and the continuation-form blocks into the held message_start."""
        kind = type(event)
        if kind is UsageUpdate:
            if self._in_start or (self._family and extra is not None and "delta" in extra):
                return False  # a message_delta's usage, or usage after in-start blocks
            assert isinstance(event, UsageUpdate)
            raw = event.usage.raw
            # Merged, as everywhere else: a later update while message_start is held
            # may leave out a count an earlier one reported.
            usage = event.usage if self._usage is None else self._usage.merged(event.usage)
            self._message_usage = (
                dict(raw) if self._family and isinstance(raw, dict) else from_usage(usage)
            )
            self._usage = usage
            return True
        if not (self._family and extra is not None and extra.get("in_start")):
            return False
        if kind is BlockStart:
            assert isinstance(event, BlockStart)
            native = self._native_block(event, extra)
            if native is None:
                return True
            block = _Block(len(self._in_start), str(native.get("type")), native)
            self._blocks[event.index] = block
            self._in_start.append(native)
            self._opened += 1
            return True
        if kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            if event.index in self._blocks:
                self._blocks[event.index].ended = True
            return True
        index = getattr(event, "index", None)
        held = self._blocks.get(index) if isinstance(index, int) else None
        if held is not None and held.native is not None:
            self._fold_into(held.native, event)
        return True

    def _write_message_start(self) -> bytes:
        start = self._start
        self._message = None
        self._started = True
        extra = start.extra if start is not None else None
        family = self._family
        if family and start is not None:
            message_id: Any = start.id
            model: Any = start.model
        else:
            given = start.id if start is not None else None
            message_id = given if given and given.startswith("msg_") else self._new_id("msg")
            if not given:
                self.default("id", start, "the source stream has no id: wrote a generated one")
            model = (start.model if start is not None else None) or "unknown"
            if start is None or not start.model:
                self.default("model", start, "the source stream names no model: wrote 'unknown'")
        usage = self._message_usage
        if usage is None:
            usage = from_usage(None)
        message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        if family and extra is not None:
            apply_diff(message, extra.get("message"))
        if self._in_start and isinstance(message.get("content"), list):
            message["content"] = message["content"] + self._in_start
        self._stop_sent = message.get("stop_reason") is not None
        payload = _with({"type": "message_start", "message": message}, extra if family else None)
        return self._write(_name("message_start", extra if family else None), payload)

    def _ensure_started(self) -> bytes:
        if self._started:
            return b""
        if self._message is None:
            self._message = {}
        return self._write_message_start()

    # -- held-back events ----------------------------------------------------------------------

    def _fold_pending(self, event: Event, extra: dict[str, Any] | None) -> bool:
        """Fold content sent inside a held native event (a block start, a compaction delta)."""
        assert self._pending is not None
        _, payload, index, what = self._pending
        if extra is None or getattr(event, "index", None) != index:
            return False
        if what == "block" and extra.get("start"):
            self._fold_into(payload["content_block"], event)
            return True
        if what == "compaction" and extra.get("joined") and type(event) is SignatureDelta:
            payload["delta"]["encrypted_content"] = event.delta
            return True
        return False

    def _flush_pending(self) -> bytes:
        assert self._pending is not None
        name, payload, _, what = self._pending
        self._pending = None
        data = self._write(name, payload)
        if what == "block":
            data += self._maybe_ping()
        return data

    def _fold_into(self, block: dict[str, Any], event: Event) -> None:
        """Put content that arrived as a unified delta back into a native block object."""
        kind = type(event)
        block_type = block.get("type")
        if kind is TextDelta:
            assert isinstance(event, TextDelta)
            key = "content" if block_type == "compaction" else "text"
            block[key] = (block.get(key) or "") + event.delta
        elif kind is ReasoningDelta:
            assert isinstance(event, ReasoningDelta)
            block["thinking"] = (block.get("thinking") or "") + event.delta
        elif kind is SignatureDelta:
            assert isinstance(event, SignatureDelta)
            key = {"redacted_thinking": "data", "compaction": "encrypted_content"}.get(
                str(block_type), "signature"
            )
            block[key] = (block.get(key) or "") + self._wrap(event)
        elif kind is Citation:
            assert isinstance(event, Citation)
            citations = block.get("citations")
            block["citations"] = [*citations, event.citation] if citations else [event.citation]
        elif kind is ToolInputDelta:
            assert isinstance(event, ToolInputDelta)
            try:
                block["input"] = (
                    decode_bounded(event.delta, what="tool input") if event.delta.strip() else {}
                )
            except msgspec.DecodeError:
                block["input"] = event.delta  # not JSON: kept as the text it was

    def _maybe_ping(self) -> bytes:
        if self._ping_after_first and not self._pinged and not self._family:
            self._pinged = True
            return self._write("ping", {"type": "ping"})
        return b""

    # -- blocks -----------------------------------------------------------------------------

    def _native_block(
        self, event: BlockStart, extra: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The ``content_block`` of a start, or None when the target cannot carry it."""
        kind = event.kind
        if self._family:
            base: dict[str, Any]
            if kind == "text":
                base = skeleton("text")
            elif kind == "reasoning":
                base = skeleton(
                    "redacted_thinking" if event.name == "redacted_thinking" else "thinking"
                )
            elif kind in ("tool_call", "server_tool_call"):
                base = skeleton(
                    "tool_use" if kind == "tool_call" else "server_tool_use", event.id, event.name
                )
                if event.value is not None:
                    base["input"] = event.value
            elif kind == "compaction":
                base = skeleton("compaction")
            elif isinstance(event.value, dict):
                return dict(event.value)
            else:
                self.lose(f"block:{kind}", event, f"a {kind} block without its native object")
                return None
            if extra is not None:
                apply_diff(base, extra.get("block"))
            return base
        if kind == "text":
            return skeleton("text")
        if kind == "reasoning":
            return skeleton("thinking")
        if kind == "tool_call":
            tool_id = event.call_id or event.id or self._new_id("toolu")
            return skeleton("tool_use", tool_id, event.name or "")
        self.lose(
            f"block:{kind}",
            event,
            f"the Messages API cannot carry a {kind} block from {self._source or 'elsewhere'}",
        )
        return None

    def _block_start(self, event: BlockStart) -> bytes:
        extra = event.extra if self._family else None
        parts = [self._ensure_started()]
        if event.index in self._blocks or event.index in self._skipped:
            raise LocalProtocolError(f"block {event.index} started twice", dialect=self.dialect)
        if event.candidate != 0:
            # Messages replies have one candidate (no ``n``): the others cannot travel.
            self.lose("candidate", event, f"candidate {event.candidate}: Messages has one reply")
            self._skipped.add(event.index)
            return b"".join(parts)
        if event.kind == "refusal" and not self._family:
            # Messages has no refusal block: a refusal is a stop reason, and its text
            # goes in the documented stop_details.explanation (written at the Finish).
            self.lose(
                "block:refusal",
                event,
                "sent as stop_reason refusal with the text in stop_details.explanation",
            )
            self._blocks[event.index] = _Block(-1, "refusal", None, event.value)
            return b"".join(parts)
        native = self._native_block(event, extra)
        if native is None:
            self._skipped.add(event.index)
            return b"".join(parts)
        if extra is not None and isinstance(extra.get("index"), int):
            index: int = extra["index"]
        else:
            index = next_provider_index(self.quirks, self._opened, self._open)
        self._opened += 1
        self._open[index] = event.index
        self._blocks[event.index] = _Block(
            index, str(native.get("type")), None, None if self._family else event.value
        )
        payload = _with(
            {"type": "content_block_start", "index": index, "content_block": native}, extra
        )
        name = _name("content_block_start", extra)
        if self._family:
            # Held back: content the native start carried follows as marked deltas.
            self._pending = (name, payload, event.index, "block")
            return b"".join(parts)
        parts.append(self._write(name, payload))
        parts.append(self._maybe_ping())
        return b"".join(parts)

    def _block_for(self, event: Event, index: int) -> _Block | None:
        block = self._blocks.get(index)
        if block is None:
            if index in self._skipped:
                return None
            raise LocalProtocolError(
                f"{type(event).__name__} for block {index}, which was never started",
                dialect=self.dialect,
            )
        return block

    def _delta(
        self, index: int, delta: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> bytes:
        if extra is not None:
            rest = extra.get("delta")
            if isinstance(rest, dict):
                delta.update(rest)
        payload = _with({"type": "content_block_delta", "index": index, "delta": delta}, extra)
        return self._write(_name("content_block_delta", extra), payload)

    def _text(self, event: TextDelta) -> bytes:
        block = self._block_for(event, event.index)
        if block is None:
            return b""
        extra = event.extra if self._family else None
        if block.type == "text":
            block.content = True
            return self._delta(block.index, {"type": "text_delta", "text": event.delta}, extra)
        if block.type == "refusal":
            block.content = True
            self._refusal.append(event.delta)
            return b""
        if block.type == "compaction" and self._family:
            delta: dict[str, Any] = {"type": "compaction_delta", "content": event.delta}
            if extra is not None and isinstance(extra.get("delta"), dict):
                delta.update(extra["delta"])
            payload = _with(
                {"type": "content_block_delta", "index": block.index, "delta": delta}, extra
            )
            self._pending = (
                _name("content_block_delta", extra),
                payload,
                event.index,
                "compaction",
            )
            return b""
        self.lose("text", event, f"text on a {block.type} block")
        return b""

    def _reasoning(self, event: ReasoningDelta) -> bytes:
        block = self._block_for(event, event.index)
        if block is None:
            return b""
        if block.type != "thinking":
            self.lose("reasoning", event, f"reasoning text on a {block.type} block")
            return b""
        extra = event.extra if self._family else None
        block.content = True
        return self._delta(block.index, {"type": "thinking_delta", "thinking": event.delta}, extra)

    def _tool_input(self, event: ToolInputDelta) -> bytes:
        block = self._block_for(event, event.index)
        if block is None:
            return b""
        if block.type not in TOOL_USE_TYPES:
            self.lose("tool_input", event, f"tool input on a {block.type} block")
            return b""
        if not self._family:
            return self._input_fragment(block, event.delta, event)
        block.content = True
        delta = {"type": "input_json_delta", "partial_json": event.delta}
        return self._delta(block.index, delta, event.extra)

    def _input_fragment(self, block: _Block, text: str, event: Event) -> bytes:
        """Another dialect's tool input: JSON objects stream as they are; any other text
        (an OpenAI custom tool's free-form input) streams inside ``{"input": "..."}``,
        because Messages tool input is a JSON object (the SDK raises otherwise)."""
        if block.mode is None:
            if not text.strip():
                block.held.append(text)
                return b""
            if block.held:
                text = "".join(block.held) + text
                block.held.clear()
            stripped = text.lstrip()
            block.content = True
            if stripped[0] == "{":
                block.mode = "json"
            else:
                block.mode = "text"
                self.lose(
                    "tool_input:text",
                    event,
                    'Messages tool input is a JSON object; the text is sent as {"input": text}',
                )
                text = '{"input": "' + _JSON.encode(text).decode()[1:-1]
                return self._delta(block.index, {"type": "input_json_delta", "partial_json": text})
        elif block.mode == "text":
            text = _JSON.encode(text).decode()[1:-1]
        return self._delta(block.index, {"type": "input_json_delta", "partial_json": text})

    def _origin(self, event: SignatureDelta) -> str | None:
        return origin(event.extra, self._source)

    def _wrap(self, event: SignatureDelta) -> str:
        """The signature to send: as is when it is this dialect's own, else in the carrier
        with its origin (a signature that already travelled keeps its first origin)."""
        source = self._origin(event)
        if source is None or source == self.dialect:
            return event.delta
        return wrap(source, event.delta)

    def _signature(self, event: SignatureDelta) -> bytes:
        block = self._block_for(event, event.index)
        if block is None:
            self.lose("signature", event, "its block has no Messages form (reported with it)")
            return b""
        extra = event.extra if self._family else None
        source = self._origin(event)
        own = source is None or source == self.dialect
        if self._family:
            if block.type == "compaction":
                # Only encrypted content in this compaction_delta (content null or absent):
                # the other keys first, as the API orders them.
                rest = extra.get("delta") if extra is not None else None
                delta: dict[str, Any] = {"type": "compaction_delta"}
                if isinstance(rest, dict):
                    delta.update(rest)
                delta["encrypted_content"] = event.delta
                payload = _with(
                    {"type": "content_block_delta", "index": block.index, "delta": delta}, extra
                )
                return self._write(_name("content_block_delta", extra), payload)
            if block.type == "redacted_thinking":
                self.lose("signature", event, "redacted_thinking data arrives only in its start")
                return b""
            if not own and self._source != self.dialect:
                self._carried(event, source)
            delta = {"type": "signature_delta", "signature": self._wrap(event)}
            return self._delta(block.index, delta, extra)
        # Natively only on a thinking block; in the carrier on the block it belongs to
        # (thinking, text or tool_use: the SDK keeps a signature_delta on a thinking
        # block only and skips it elsewhere, so the carrier never reaches its messages).
        if block.ended:
            why = "after the block ended"
        elif block.type not in (("thinking",) if own else _CARRIER_BLOCKS):
            why = f"on a {block.type} block"
        elif not own and not self._carry:
            why = "with the carrier turned off"
        else:
            if not own:
                self._carried(event, source, block.type)
            delta = {"type": "signature_delta", "signature": self._wrap(event)}
            return self._delta(block.index, delta)
        self.lose("signature", event, f"the Messages API cannot carry opaque state {why}")
        return b""

    def _carried(self, event: SignatureDelta, source: str | None, where: str = "thinking") -> None:
        self.lose(
            "signature",
            event,
            f"{source} opaque state is not an Anthropic signature; carried in a "
            f"signature_delta of the {where} block with the {CARRIER_PREFIX}{source}: prefix",
            carried=True,
        )

    def _citation(self, event: Citation) -> bytes:
        if event.index is None:
            self.lose("citation", event, "the Messages API has no reply-level citations")
            return b""
        block = self._block_for(event, event.index)
        if block is None:
            return b""
        if not self._family or block.type != "text":
            self.lose("citation", event, "citations of another dialect have no Messages form")
            return b""
        extra = event.extra
        return self._delta(
            block.index, {"type": "citations_delta", "citation": event.citation}, extra
        )

    def _block_end(self, event: BlockEnd) -> bytes:
        block = self._block_for(event, event.index)
        if block is None:
            return b""
        if block.ended:
            raise LocalProtocolError(f"block {event.index} ended twice", dialect=self.dialect)
        block.ended = True
        if block.type == "refusal":
            value = event.value if event.value is not None else block.value
            if not block.content and isinstance(value, str):
                self._refusal.append(value)
            return b""
        self._open.pop(block.index, None)
        extra = event.extra if self._family else None
        parts: list[bytes] = []
        if not self._family and not block.content:
            # Another dialect sent the whole content at the start or the end instead of
            # deltas (a Gemini functionCall, a restated text): send it as one delta, as
            # the accumulator would use it.
            value = event.value if event.value is not None else block.value
            if value is not None:
                parts.append(self._whole(block, value, event))
        if block.mode == "text":
            parts.append(
                self._delta(block.index, {"type": "input_json_delta", "partial_json": '"}'})
            )
        payload = _with({"type": "content_block_stop", "index": block.index}, extra)
        parts.append(self._write(_name("content_block_stop", extra), payload))
        return b"".join(parts)

    def _whole(self, block: _Block, value: Any, event: Event) -> bytes:
        """One delta holding a block's whole content (sources without deltas)."""
        if block.type in TOOL_USE_TYPES:
            text = value if isinstance(value, str) else _JSON.encode(value).decode()
            return self._input_fragment(block, text, event)
        if isinstance(value, str) and block.type == "text":
            return self._delta(block.index, {"type": "text_delta", "text": value})
        if isinstance(value, str) and block.type == "thinking":
            return self._delta(block.index, {"type": "thinking_delta", "thinking": value})
        return b""

    def _lose_block(self, event: DataDelta, what: str, reason: str) -> None:
        if event.index not in self._skipped:
            self.lose(what, event, reason)

    # -- message end ----------------------------------------------------------------------------

    def _usage_update(self, event: UsageUpdate) -> bytes:
        extra = event.extra if self._family else None
        self._usage = event.usage if self._usage is None else self._usage.merged(event.usage)
        if extra is None or "delta" not in extra:
            return b""  # another dialect's usage: sent in the final message_delta
        payload: dict[str, Any] = {
            "type": "message_delta",
            "delta": extra["delta"],
            "usage": event.usage.raw,
        }
        absent = extra.get("absent")
        if isinstance(absent, list):
            for key in absent:
                payload.pop(key, None)
        self._stop_sent = True
        return self._write(_name("message_delta", extra), _with(payload, extra))

    def _finish(self, event: Finish) -> bytes:
        if self._done:
            raise LocalProtocolError("a second Finish", dialect=self.dialect)
        self._done = True
        parts = [self._ensure_started()]
        if event.status == "truncated":
            return b"".join(parts)  # no terminal event: the reader sees the truncation
        if event.status == "failed":
            if not self._error_sent:
                error = event.error
                inner = (
                    {"type": native_error_type(error), "message": error.message}
                    if error is not None
                    else {"type": "api_error", "message": "the stream failed"}
                )
                parts.append(self._write("error", {"type": "error", "error": inner}))
            return b"".join(parts)
        if not self._family:
            for unified in list(self._open.values()):
                # Blocks the source never closed: close them, so the reply is whole.
                parts.append(self._block_end(BlockEnd(index=unified)))
        extra = event.extra
        if not self._stop_sent and not (self._family and extra and extra.get("no_delta")):
            # Another dialect, or same-family events built by hand (a decoded Messages
            # stream has its message_delta, its stop reason in message_start, or says
            # it had neither with extra["no_delta"]).
            usage = self._usage
            if event.usage is not None:
                usage = event.usage if usage is None else usage.merged(event.usage)
            if self._family and usage is not None and isinstance(usage.raw, dict):
                native_usage = usage.raw
            else:
                native_usage = from_usage(usage)
                self._default_usage(usage, event)
            stop: dict[str, Any] = {
                "stop_reason": stop_reason_for(event.reason, native=self._family),
                "stop_sequence": None,
            }
            if not self._family and event.reason.unified in _NO_STOP_REASON:
                # (Messages has no stop reason for these: end_turn stands in.)
                if event.reason.raw is None:
                    self.default(
                        "stop_reason",
                        event,
                        f"the source stream gives no finish reason ({event.reason.unified}): "
                        "wrote end_turn",
                    )
                else:
                    self.lose(
                        "finish_reason",
                        event,
                        f"Messages has no stop_reason for {event.reason.unified!r} "
                        f"({event.reason.raw!r}): wrote end_turn",
                    )
            if self._refusal:
                if event.reason.unified not in ("refusal", "content_filter"):
                    self.lose(
                        "finish_reason",
                        event,
                        f"a {event.reason.unified} reply holding a refusal block: "
                        "stop_reason refusal",
                    )
                stop["stop_reason"] = "refusal"
                stop["stop_details"] = {
                    "type": "refusal",
                    "category": None,
                    "explanation": "".join(self._refusal),
                }
            delta = {"type": "message_delta", "delta": stop, "usage": native_usage}
            parts.append(self._write("message_delta", delta))
        if not self._family:
            parts.append(self._write("message_stop", {"type": "message_stop"}))
            return b"".join(parts)
        parts.append(
            self._write(_name("message_stop", extra), _with({"type": "message_stop"}, extra))
        )
        return b"".join(parts)

    def _default_usage(self, usage: Usage | None, event: Finish) -> None:
        """Report the counts Messages requires that the source did not give (written
        as 0 by :func:`from_usage`)."""
        if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
            reason = "the source stream reports no usage: wrote 0 input and output tokens"
            self.default("usage", event, reason)
            return
        for count in ("input_tokens", "output_tokens"):
            if getattr(usage, count) is None:
                self.default(
                    f"usage.{count}", event, f"the source stream reports no {count}: wrote 0"
                )

    def _error(self, event: ErrorEvent) -> bytes:
        info = event.error
        if info.kind == "protocol":
            self.lose("error:protocol", event, "a decoding error of the source has no wire form")
            return b""
        self._error_sent = True
        self._fast = False  # what follows takes the general path, which writes nothing
        extra = event.extra if self._family else None
        if self._family and isinstance(info.raw, dict):
            inner: Any = info.raw
        else:
            inner = {"type": native_error_type(info), "message": info.message}
        return self._write(_name("error", extra), _with({"type": "error", "error": inner}, extra))

    def _keep_alive(self, event: KeepAlive) -> bytes:
        if event.name is None and event.comment is not None:
            data = _SSE.comment(event.comment)
            self._mark_read(data)
            return data
        extra = event.extra if self._family else None
        return self._write(_name("ping", extra), _with({"type": "ping"}, extra))

    def _unknown(self, event: Unknown) -> bytes:
        if self._family:
            data = _SSE.event(event.data, event=event.name)
            self._mark_read(data, one=True)
            return data
        self.lose(f"event:{event.name}", event, "an unknown event of another dialect")
        return b""

"""Unified events -> Gemini Interactions SSE bytes.

Two modes, chosen by the stream's :class:`~polystream.events.StreamStart`:

* **native** (``dialect == "gemini_interactions"``): the events came from this dialect's
  decoder. Each *primary* event is rebuilt into its native event from its fields and
  ``extra`` (``event_id`` = ``cursor``); events marked ``extra["derived"]`` produce nothing
  (their content is already in the primary event). The schema (steps or legacy) is the
  source's (``StreamStart.extra["schema"]``). The round trip reproduces every native
  event with the same JSON values.
  Events that name this dialect without the decoder's extras (built by hand) still get
  ``interaction.completed`` before ``done`` unless the decoder marked the Finish
  ``no_final`` (the source had none) or an ``error`` event ended the stream.
* **foreign** (any other dialect): a valid current-schema stream is synthesised:
  ``event_id`` values ``evt_<n>``, an interaction id (``StreamStart.id`` or ``int_<n>``),
  one step per unified block (provider step indices from 0), ``interaction.completed``
  with the final status and usage, then ``done``.

Carriers and losses (foreign mode; each recorded with :meth:`DialectEncoder.lose`):

* signatures follow the origin rule of :class:`~polystream.events.SignatureDelta`: this
  dialect's own (origin ``gemini_interactions``) are written natively as a
  ``thought_signature`` delta on their step; another dialect's (a Gemini
  ``generateContent`` thoughtSignature included) are carried in the same delta as
  ``polystream:v1:<origin dialect>:<original>`` (``carried=True``), which the decoder
  gives back as the same block's SignatureDelta with ``extra["carrier"]`` = the origin
  (also in native mode, so a carried signature round-trips exactly); a signature of a
  block that has no step is reported lost;
* a server tool this API does not have becomes a ``<name>_call`` / ``<name>_result`` step
  (``carried=True``; the SDK parses it as an unknown step);
* ``code`` blocks become ``code_execution_call`` steps and ``code_result`` blocks
  ``code_execution_result`` steps, their text sent whole at BlockEnd (never visible text);
  ``refusal`` blocks have no step and are dropped;
* a finish reason no interaction status means is sent by its Finish status
  (``finish_reason:<reason>``); statuses that are not the interaction's own non-terminal
  ones are not sent (``status:<word>``);
* raw (non-summary) reasoning is sent as ``thought_summary`` (recorded once per block);
* ``compaction`` and ``other`` blocks, reply-level citations, Metadata (grounding, safety),
  cache-write token counts, named keep-alives and Unknown events cannot be carried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeAlias

import msgspec

from polystream.dialects._carrier import CARRIER_PREFIX, origin, wrap
from polystream.dialects._cursors import MarkingEncoder, native_of
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
from polystream.wire.sse import SSEEncoder

from .decode import DIALECT, data_delta_type
from .finish_reason import carries_reason, native_status
from .usage import usage_to_native
from .wire import (
    NAMED_STEP_TYPES,
    SERVER_TOOL_FAMILIES,
    decode_any,
    encode_json,
    main_field,
    step_type_of,
)

__all__ = ["Encoder"]

_SSE: Final = SSEEncoder()
_JSON: Final = msgspec.json.Encoder().encode
_DONE: Final = b"event: done\ndata: [DONE]\n\n"
_FOREIGN_STATUSES: Final = frozenset({"in_progress", "queued", "idle"})
"""Foreign statuses sent as ``interaction.status_update``: the interaction's own
non-terminal statuses. A terminal one only comes with ``interaction.completed`` (from the
Finish); other words (an item's ``added`` / ``done`` ...) are not interaction statuses."""
_CODE_LANGUAGES: Final = {"code_interpreter": "python", "shell": "bash"}
"""Foreign code-block name -> ``CodeExecutionCallArguments.language`` (SDK: python, bash)."""


class _Block:
    __slots__ = ("buffer", "kind", "provider", "stype", "value")

    def __init__(self, provider: int, kind: str, stype: str) -> None:
        self.provider = provider
        self.kind = kind
        self.stype = stype
        # Foreign code / code-result blocks: their text, sent whole at the end (the
        # ``code_execution_*`` deltas carry whole objects, not fragments).
        self.buffer: list[str] | None = None
        self.value: Any = None


_Template: TypeAlias = tuple[_Block, bool, bytes, bytes, bytes]
"""A block's deltas: the block, whether text, the bytes before the value, after it up
to the event id (native) and after it with the event id's format."""


class Encoder(FoldsUsage, MarkingEncoder):
    """Encode unified events as a Gemini Interactions SSE stream (see the module docstring).

    Call :meth:`encode` per event and :meth:`close` once; ``losses`` lists what a foreign
    stream could not carry.
    """

    dialect = DIALECT

    def __init__(self) -> None:
        super().__init__()
        self._native = False  # until a StreamStart says the stream is this dialect
        self._source: str | None = None  # the stream's dialect (StreamStart)
        self._legacy = False
        self._interaction_id: str | None = None
        self._model: str | None = None
        self._blocks: dict[int, _Block] = {}
        self._skipped: set[int] = set()
        self._raw_reasoning: set[int] = set()  # blocks whose raw-reasoning loss is recorded
        self._next_step = 0
        self._next_event = 0
        self._usage: Usage | None = None
        self._final_sent = False
        self._error_sent = False
        self._status_sent: str | None = None  # last interaction status written (foreign)
        self._lost_statuses: set[str] = set()
        self._code_ids: dict[str, str] = {}  # foreign code block id / call_id -> step id
        self._last_code_id: str | None = None
        self._code_names: dict[int, str] = {}  # code step index -> foreign tool name
        self._fast = True  # the byte-template delta path (False: always the general path)
        # unified index -> (its block, whether the template is a text delta's, the
        # step.delta bytes before the value, those after it up to the event id, and
        # those after it with the event id of another dialect's stream to format in)
        self._heads: dict[int, _Template] = {}

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates only go into the final usage (see
        :meth:`DialectEncoder.folds_usage`); this dialect's are its native events'."""
        return source != DIALECT

    # -- fast path -------------------------------------------------------------------------

    def encode(self, event: Event) -> bytes:
        """Encode one unified event; returns the bytes to send now (maybe none).

        Text and tool-argument deltas without native residuals, the bulk of a stream,
        are written from a per-block byte template (what :meth:`_delta` and
        :meth:`_emit` write, byte for byte); anything else takes the general path.
        """
        kind = type(event)
        if kind is UsageUpdate:
            if self._fast and (not self._native or event.extra is None):
                return self._keep_usage(event.usage)  # type: ignore[union-attr,arg-type]
        elif (kind is TextDelta or kind is ToolInputDelta) and self._fast:
            # (What _delta and _emit write, from the block's template.)
            extra = event.extra
            native = self._native
            index: int = event.index  # type: ignore[union-attr,assignment]
            block = self._blocks.get(index)
            if (
                extra is None
                or not (native or "no_event_type" in extra or "no_event_name" in extra)
            ) and (block is not None and block.buffer is None):
                text = kind is TextDelta
                cached = self._heads.get(index)
                data: bytes | None
                try:
                    if cached is None or cached[0] is not block or cached[1] is not text:
                        cached = self._delta_template(index, block, text)
                    value = _JSON(event.delta)  # type: ignore[union-attr]
                    if native:
                        cursor = event.cursor
                        tail = (
                            b"}\n\n" if cursor is None else b',"event_id":%b}\n\n' % _JSON(cursor)
                        )
                        data = cached[2] + value + cached[3] + tail
                        if self._marks is not None:
                            self._mark(cursor, data, None)
                    else:
                        data = cached[2] + value + cached[4] % self._next_event
                        marks = self._marks
                        if marks is not None:
                            marks.append((f"evt_{self._next_event:06d}", data, None))
                        self._next_event += 1
                except Exception:  # not encodable: the general path says how it fails
                    data = None
                if data is not None:
                    self.event_index += 1
                    return data
        elif kind is StreamStart:
            self._heads.clear()  # the event names may change (the legacy schema)
        return self._encode_pending(event)

    def _delta_template(self, index: int, block: _Block, text: bool) -> _Template:
        """The bytes of ``block``'s text (or argument) deltas around the value, kept
        under its unified ``index``."""
        name = b"content.delta" if self._legacy else b"step.delta"
        after = b',"type":%b},"event_type":"%b"' % (
            b'"text"' if text else b'"arguments_delta"',
            name,
        )
        cached = self._heads[index] = (
            block,
            text,
            b'event: %b\ndata: {"index":%b,"delta":{%b:'
            % (name, _JSON(block.provider), b'"text"' if text else b'"arguments"'),
            after,
            after + b',"event_id":"evt_%06d"}\n\n',
        )
        return cached

    # -- helpers ---------------------------------------------------------------------------

    def _emit(self, name: str, payload: dict[str, Any], event: Event) -> bytes:
        """One native event: payload + ``event_type`` + ``event_id``."""
        extra = event.extra or {}
        if not extra.get("no_event_type"):
            payload["event_type"] = name
        if self._native:
            if event.cursor is not None:
                payload["event_id"] = event.cursor
        else:
            payload["event_id"] = f"evt_{self._next_event:06d}"
            self._next_event += 1
        data = _SSE.event(encode_json(payload), event=None if extra.get("no_event_name") else name)
        if self._marks is not None:
            self._mark(payload.get("event_id"), data, native_of(payload.get("interaction")))
        return data

    def _mark(self, event_id: Any, data: bytes, native: str | None) -> None:
        """Mark one event written (for :meth:`encode_entries`): its cursor is its
        ``event_id`` when that is a string (else it has none), its native id its
        ``interaction``'s."""
        assert self._marks is not None
        if type(event_id) is not str:
            self._marks.append(("", data, native))
        elif event_id:
            self._marks.append((event_id, data, native))
        else:
            self._mark_read(data, one=True)  # (an empty cursor: as the splitter reads it)

    def _ensure_id(self) -> str:
        if self._interaction_id is None:
            self._interaction_id = "int_000001"
        return self._interaction_id

    # -- dispatch --------------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        extra = event.extra
        if self._native and extra is not None and extra.get("derived"):
            return b""
        kind = type(event)
        if kind is TextDelta:
            if TYPE_CHECKING:
                assert isinstance(event, TextDelta)
            return self._text(event)
        if kind is ToolInputDelta:
            if TYPE_CHECKING:
                assert isinstance(event, ToolInputDelta)
            return self._tool_input(event)
        if kind is ReasoningDelta:
            if TYPE_CHECKING:
                assert isinstance(event, ReasoningDelta)
            return self._reasoning(event)
        if kind is SignatureDelta:
            if TYPE_CHECKING:
                assert isinstance(event, SignatureDelta)
            return self._signature(event)
        if kind is DataDelta:
            if TYPE_CHECKING:
                assert isinstance(event, DataDelta)
            return self._data(event)
        if kind is BlockStart:
            if TYPE_CHECKING:
                assert isinstance(event, BlockStart)
            return self._block_start(event)
        if kind is BlockEnd:
            if TYPE_CHECKING:
                assert isinstance(event, BlockEnd)
            return self._block_end(event)
        if kind is Citation:
            if TYPE_CHECKING:
                assert isinstance(event, Citation)
            return self._citation(event)
        if kind is StreamStart:
            if TYPE_CHECKING:
                assert isinstance(event, StreamStart)
            return self._stream_start(event)
        if kind is StatusUpdate:
            if TYPE_CHECKING:
                assert isinstance(event, StatusUpdate)
            return self._status(event)
        if isinstance(event, UsageUpdate):
            usage = event.usage
            self._usage = usage if self._usage is None else self._usage.merged(usage)
            return b""
        if kind is ErrorEvent:
            if TYPE_CHECKING:
                assert isinstance(event, ErrorEvent)
            return self._error(event)
        if kind is Finish:
            if TYPE_CHECKING:
                assert isinstance(event, Finish)
            return self._finish(event)
        if kind is KeepAlive:
            if TYPE_CHECKING:
                assert isinstance(event, KeepAlive)
            if event.comment is not None:
                data = _SSE.comment(event.comment)
                self._mark_read(data)
                return data
            self.lose("keep-alive", event, "Interactions streams have no named keep-alive event")
            return b""
        if kind is Unknown:
            assert isinstance(event, Unknown)
            if self._native:
                data = _SSE.event(event.data, event=event.name)
                self._mark_read(data, one=True)
                return data
            self.lose("event:unknown", event, "an unknown event of another dialect")
            return b""
        if kind is Metadata:
            assert isinstance(event, Metadata)
            self.lose_metadata(event, "Interactions has no reply-level metadata event")
        return b""

    # -- lifecycle -------------------------------------------------------------------------

    def _stream_start(self, event: StreamStart) -> bytes:
        extra = event.extra or {}
        self._native = event.dialect == DIALECT
        self._source = event.dialect
        self._legacy = self._native and extra.get("schema") == "legacy"
        self._interaction_id = event.id
        self._model = event.model
        if self._native and extra.get("resumed"):
            return b""
        if self._native:
            interaction: dict[str, Any] = {}
            if event.id is not None:
                interaction["id"] = event.id
            interaction.update(extra.get("interaction") or {})
            if event.model is not None:
                interaction["model"] = event.model
            payload = self._lifecycle(interaction, extra)
            name = "interaction.start" if self._legacy else "interaction.created"
            return self._emit(name, payload, event)
        if self._interaction_id is None:
            self.default("id", event, "the source stream has no id: wrote int_000001")
        interaction = {"id": self._ensure_id(), "status": "in_progress", "object": "interaction"}
        self._status_sent = "in_progress"
        if event.model is not None:
            interaction["model"] = event.model
        return self._emit("interaction.created", {"interaction": interaction}, event)

    def _lifecycle(self, interaction: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        if extra.get("bare"):
            return dict(interaction)
        payload = {"interaction": interaction}
        payload.update(extra.get("p") or {})
        return payload

    def _status(self, event: StatusUpdate) -> bytes:
        extra = event.extra or {}
        if not self._native:
            status = event.status
            if status not in _FOREIGN_STATUSES:
                if status not in self._lost_statuses:
                    self._lost_statuses.add(status)
                    self.lose(
                        f"status:{status}",
                        event,
                        "not an interaction status (a terminal one comes from the Finish)",
                    )
                return b""
            if status == self._status_sent:
                return b""
            self._status_sent = status
            payload = {"interaction_id": self._ensure_id(), "status": status}
            return self._emit("interaction.status_update", payload, event)
        name = extra.get("event", "interaction.status_update")
        if name in ("interaction.completed", "interaction.complete"):
            self._final_sent = True
            interaction = dict(extra.get("interaction") or {})
            if not extra.get("no_status"):
                interaction["status"] = event.status
            return self._emit(name, self._lifecycle(interaction, extra), event)
        payload = dict(extra.get("p") or {})
        if not extra.get("no_status"):
            payload["status"] = event.status
        return self._emit(name, payload, event)

    def _error(self, event: ErrorEvent) -> bytes:
        error = event.error
        if error.kind == "protocol" and error.dialect is not None:
            raw = error.raw
            if self._native and isinstance(raw, dict) and isinstance(raw.get("data"), str):
                # A malformed event skipped by a tolerant decoder: re-emitted as received.
                name = raw.get("event")
                data = _SSE.event(raw["data"], event=name if isinstance(name, str) else None)
                self._mark_read(data, one=True)
                return data
            self.lose("protocol-error", event, "a decoding error is not a provider event")
            return b""
        extra = event.extra or {}
        self._error_sent = True
        payload: dict[str, Any] = {}
        if isinstance(error.raw, dict) and self._native:
            payload["error"] = error.raw
        elif not (self._native and extra.get("no_error")):
            body: dict[str, Any] = {"code": error.code or error.kind, "message": error.message}
            payload["error"] = error.raw if self._native and error.raw is not None else body
        payload.update(extra.get("p") or {})
        return self._emit("error", payload, event)

    def _finish(self, event: Finish) -> bytes:
        extra = event.extra or {}
        if event.status == "truncated":
            # A stream cut off stays cut off: no terminal events are invented.
            return b""
        out = b""
        # A foreign stream always gets its final interaction (status and usage) before
        # ``done``; so does a same-dialect stream built without this decoder's extras
        # (the decoder marks the Finish of a source that had none: ``no_final``), unless
        # it failed with an ``error`` event, the API's own in-band failure (spec 1).
        synthesise = not self._native or not (
            extra.get("no_final") or self._error_sent or extra.get("done") is False
        )
        if synthesise and not self._final_sent:
            usage = event.usage
            if self._usage is not None:
                # Counts only a UsageUpdate reported are kept (the Finish's own win).
                usage = self._usage if usage is None else self._usage.merged(usage)
            interaction: dict[str, Any] = {
                "id": self._ensure_id(),
                "status": native_status(event.status, event.reason),
                "object": "interaction",
            }
            if not carries_reason(event.status, event.reason):
                self.lose(
                    f"finish_reason:{event.reason.unified}",
                    event,
                    f"no interaction status means {event.reason.unified!r}; "
                    f"sent as {interaction['status']!r}",
                )
            if self._model is not None:
                interaction["model"] = self._model
            if usage is not None:
                native, lost = usage_to_native(usage)
                interaction["usage"] = native
                for what in lost:
                    self.lose(f"usage.{what}", event, "Interactions usage has no such count")
            self._final_sent = True
            out = self._emit("interaction.completed", {"interaction": interaction}, event)
        if self._native and extra.get("done") is False:
            return out
        if self._native and ("data" in extra or "event" in extra):
            done = _SSE.event(str(extra.get("data", "[DONE]")), event=extra.get("event", "done"))
            self._mark_read(done, one=True)
            return out + done
        marks = self._marks
        if marks is not None:
            marks.append(("", _DONE, None))
        return out + _DONE

    # -- blocks --------------------------------------------------------------------------------

    def _block_start(self, event: BlockStart) -> bytes:
        extra = event.extra or {}
        if self._native:
            provider = extra.get("index", event.index)
            stype = extra.get("type") or step_type_of(event.kind, event.name, self._legacy)
            self._blocks[event.index] = _Block(provider, event.kind, stype)
            if extra.get("implicit"):
                return b""
            borrowed = extra.get("from_delta") or ()
            step: dict[str, Any] = {"type": stype}
            if event.id is not None and "id" not in borrowed:
                step["id"] = event.id
            if event.call_id is not None and "call_id" not in borrowed:
                step["call_id"] = event.call_id
            if event.name is not None and stype in NAMED_STEP_TYPES and "name" not in borrowed:
                step["name"] = event.name
            if event.value is not None:
                step[main_field(stype)] = event.value
            step.update(extra.get("step") or {})
            key = "content" if self._legacy else "step"
            payload: dict[str, Any] = {"index": provider, key: step}
            if extra.get("bare"):
                payload = {"index": provider, **step}
            payload.update(extra.get("p") or {})
            return self._emit("content.start" if self._legacy else "step.start", payload, event)
        return self._foreign_block_start(event)

    def _foreign_block_start(self, event: BlockStart) -> bytes:
        kind = event.kind
        if event.candidate != 0:
            self._skipped.add(event.index)
            self.lose("candidate", event, "Interactions streams have a single candidate")
            return b""
        step: dict[str, Any]
        code: _Block | None = None
        if kind in ("text", "image", "audio"):
            step = {"type": "model_output"}
        elif kind == "code":
            # Code the model wrote and the provider ran: a code_execution_call step
            # (arguments sent whole at BlockEnd), never visible text.
            step_id = event.call_id or event.id or f"call_{self._next_step}"
            for key in (event.id, event.call_id):
                if key is not None:
                    self._code_ids[key] = step_id
            self._last_code_id = step_id
            if event.name is not None:
                self._code_names[self._next_step] = event.name
            step = {"type": "code_execution_call", "id": step_id}
            code = _Block(self._next_step, kind, step["type"])
        elif kind == "code_result":
            call_id = self._code_ids.get(event.call_id or event.id or "", self._last_code_id)
            step = {"type": "code_execution_result", "call_id": call_id or ""}
            code = _Block(self._next_step, kind, step["type"])
        elif kind == "reasoning":
            step = {"type": "thought"}
        elif kind == "tool_call":
            step = {
                "type": "function_call",
                "id": event.call_id or event.id or f"call_{self._next_step}",
                "name": event.name or "",
                "arguments": event.value if isinstance(event.value, dict) else {},
            }
        elif kind in ("server_tool_call", "server_tool_result"):
            family = event.name or "tool"
            suffix = "_call" if kind == "server_tool_call" else "_result"
            if family not in SERVER_TOOL_FAMILIES:
                self.lose(
                    f"server-tool:{family}",
                    event,
                    "no such Interactions tool; sent as an unknown step type",
                    carried=True,
                )
            step = {"type": family + suffix}
            if kind == "server_tool_call":
                step["id"] = event.id or event.call_id or f"call_{self._next_step}"
                if event.value is not None:
                    step["arguments"] = event.value
            else:
                step["call_id"] = event.call_id or event.id or ""
                if event.value is not None:
                    step["result"] = event.value
        else:
            # refusal, compaction, other: no step type can hold them, and a refusal is
            # not the reply's text.
            self._skipped.add(event.index)
            self.lose(f"block-kind:{kind}", event, "Interactions has no such step")
            return b""
        provider = self._next_step
        self._next_step += 1
        if code is not None:
            code.buffer = []
            code.value = event.value
            self._blocks[event.index] = code
        else:
            self._blocks[event.index] = _Block(provider, kind, step["type"])
        return self._emit("step.start", {"index": provider, "step": step}, event)

    def _code_delta(self, block: _Block, event: BlockEnd) -> bytes:
        """The whole ``code_execution_call`` / ``code_execution_result`` delta of a
        foreign code block, from its streamed text (or its value)."""
        assert block.buffer is not None
        text = "".join(block.buffer)
        value = event.value if event.value is not None else block.value
        delta: dict[str, Any]
        if block.kind == "code":
            if not text and isinstance(value, str):
                text = value
            arguments: dict[str, Any] = {"code": text}
            language = _CODE_LANGUAGES.get(self._code_names.get(block.provider) or "")
            if language is not None:
                arguments["language"] = language
            delta = {"arguments": arguments}
            dtype = "code_execution_call"
        else:
            is_error: bool | None = None
            if not text:
                if isinstance(value, str):
                    text = value
                elif isinstance(value, dict):
                    # Gemini codeExecutionResult: {"outcome", "output"}.
                    output = value.get("output")
                    text = output if isinstance(output, str) else encode_json(value)
                    outcome = value.get("outcome")
                    if isinstance(outcome, str):
                        is_error = outcome != "OUTCOME_OK"
                elif value is not None:
                    text = encode_json(value)
            delta = {"result": text}
            if is_error is not None:
                delta["is_error"] = is_error
            dtype = "code_execution_result"
        return self._delta(block, dtype, delta, event)

    def _block(self, event: Event, index: int) -> _Block | None:
        block = self._blocks.get(index)
        if block is None:
            if index in self._skipped:
                return None
            if self._native:
                raise LocalProtocolError(
                    f"delta for block {index}, which was never started", dialect=DIALECT
                )
            self.lose("orphan-delta", event, f"block {index} was never started")
            return None
        return block

    def _delta(self, block: _Block, dtype: str, delta: dict[str, Any], event: Event) -> bytes:
        """A step.delta (content.delta); ``type`` goes last, as the API sends it."""
        extra = event.extra or {}
        if self._native:
            delta.update(extra.get("d") or {})
        delta["type"] = dtype
        payload: dict[str, Any] = {"index": block.provider, "delta": delta}
        if self._native:
            if extra.get("no_index"):
                del payload["index"]
            payload.update(extra.get("p") or {})
        return self._emit("content.delta" if self._legacy else "step.delta", payload, event)

    def _text(self, event: TextDelta) -> bytes:
        block = self._block(event, event.index)
        if block is None:
            return b""
        if block.buffer is not None:
            block.buffer.append(event.delta)
            return b""
        delta: dict[str, Any] = {}
        if not (self._native and (event.extra or {}).get("absent")):
            delta["text"] = event.delta
        return self._delta(block, "text", delta, event)

    def _reasoning(self, event: ReasoningDelta) -> bytes:
        block = self._block(event, event.index)
        if block is None:
            return b""
        extra = event.extra if self._native and event.extra else {}
        if not self._native and not event.summary and event.index not in self._raw_reasoning:
            self._raw_reasoning.add(event.index)
            self.lose(
                "reasoning.raw",
                event,
                "Interactions streams thought summaries only; raw reasoning sent as a summary",
            )
        delta: dict[str, Any] = {}
        if "content_raw" in extra:
            delta["content"] = extra["content_raw"]
        elif not extra.get("absent"):
            content = {"type": "text", "text": event.delta}
            content.update(extra.get("content") or {})
            delta["content"] = content
        return self._delta(block, "thought_summary", delta, event)

    def _signature(self, event: SignatureDelta) -> bytes:
        block = self._block(event, event.index)
        if block is None:
            if event.index in self._skipped:
                self.lose("signature", event, "its block has no Interactions step")
            return b""
        source = origin(event.extra, self._source)
        own = source is None or source == DIALECT
        if not own and not self._native:
            self.lose(
                "signature",
                event,
                f"{source} opaque state is not an Interactions signature; carried in a "
                f"thought_signature delta with the {CARRIER_PREFIX}{source}: prefix",
                carried=True,
            )
        delta: dict[str, Any] = {}
        if not (self._native and (event.extra or {}).get("absent")):
            delta["signature"] = event.delta if own else wrap(str(source), event.delta)
        return self._delta(block, "thought_signature", delta, event)

    def _tool_input(self, event: ToolInputDelta) -> bytes:
        block = self._block(event, event.index)
        if block is None:
            return b""
        if block.buffer is not None:
            block.buffer.append(event.delta)
            return b""
        extra = event.extra if self._native and event.extra else {}
        dtype = extra.get("dt")
        delta: dict[str, Any] = {}
        if dtype is None:
            dtype = "arguments_delta"
            if not extra.get("absent"):
                delta["arguments"] = event.delta
        elif not extra.get("absent"):
            delta[main_field(dtype)] = decode_any(event.delta)
        return self._delta(block, dtype, delta, event)

    def _data(self, event: DataDelta) -> bytes:
        block = self._block(event, event.index)
        if block is None:
            return b""
        if block.buffer is not None:
            self.lose("data", event, f"a {block.stype} step carries no media")
            return b""
        extra = event.extra if self._native and event.extra else {}
        delta: dict[str, Any] = {}
        if not extra.get("absent"):
            delta["data"] = event.delta
        if event.mime_type is not None:
            delta["mime_type"] = event.mime_type
        if event.replace and not self._native:
            self.lose("data.replace", event, "Interactions data deltas only append")
        dtype = extra.get("dt") or data_delta_type(block.kind)
        if not self._native and block.kind not in ("image", "audio") and event.mime_type:
            # A media part inside another block (Gemini inlineData): its type says which.
            major = event.mime_type.split("/", 1)[0]
            dtype = {"audio": "audio", "video": "video", "application": "document"}.get(
                major, "image"
            )
        return self._delta(block, dtype, delta, event)

    def _citation(self, event: Citation) -> bytes:
        if event.index is None:
            self.lose("citation", event, "Interactions annotations belong to a step")
            return b""
        block = self._block(event, event.index)
        if block is None:
            return b""
        extra = event.extra if self._native and event.extra else {}
        delta: dict[str, Any] = {}
        if "annotations_raw" in extra:
            delta["annotations"] = extra["annotations_raw"]
        elif not extra.get("absent"):
            delta["annotations"] = [event.citation, *(extra.get("more") or ())]
        return self._delta(block, "text_annotation_delta", delta, event)

    def _block_end(self, event: BlockEnd) -> bytes:
        block = self._block(event, event.index)
        if block is None:
            return b""
        extra = event.extra or {}
        out = b""
        if block.buffer is not None:
            out = self._code_delta(block, event)
        payload: dict[str, Any] = {"index": block.provider}
        if self._native:
            if extra.get("no_index"):
                del payload["index"]
            if event.status is not None:
                payload["status"] = event.status
            payload.update(extra.get("p") or {})
        return out + self._emit("content.stop" if self._legacy else "step.stop", payload, event)

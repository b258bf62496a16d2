"""Unified events -> Responses SSE bytes (``event: <type>`` + ``data: <json>``).

Two paths, chosen per event:

* **Native** (the stream was decoded from this very dialect, see
  :data:`.result.FAMILY`): each carrier's ``extra`` is the native payload; the encoder
  puts back ``sequence_number`` (the event's ``cursor``) and the one modelled field
  (``delta``, ``annotation``, ``partial_image_b64``). Events marked
  ``{"implicit": true}`` / ``{"resumed": true}`` had no native event and write nothing.
* **Foreign** (any other dialect): a complete stream is synthesised: ids,
  ``response.created`` + ``response.in_progress``, ``output_item.added`` /
  ``content_part.added`` per block, the deltas, every ``.done`` event, and
  ``response.completed|incomplete|failed`` with the whole ``Response`` built from what
  streamed (:class:`.result.Assembler`). ``sequence_number`` counts from 0. What
  cannot be carried is recorded with :meth:`lose`.

Signatures follow the origin rule of :class:`~polystream.events.SignatureDelta`: one
whose origin (``extra["carrier"]``, else the StreamStart's dialect) is this dialect is
written natively, as its reasoning item's ``encrypted_content``, also when the stream
comes from another dialect (state that travelled through a carrier and came back). Any
other signature is a loss: Responses has no carrier, and OpenAI and xAI state are
distinct origins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from polystream.dialects._carrier import origin
from polystream.dialects._cursors import Mark, MarkingEncoder, native_of
from polystream.dialects._responses.finish_reason import FINISH_REASONS, to_incomplete_reason
from polystream.dialects._responses.quirks import Quirks
from polystream.dialects._responses.result import FAMILY, Assembler, IdFactory, Out
from polystream.dialects._responses.wire import ENCODER, encode_payload
from polystream.dialects._usage_fold import fold
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
    UsageUpdate,
    Warning,
)
from polystream.wire.sse import SSEEncoder

__all__ = ["ResponsesEncoder"]

_SSE = SSEEncoder()

_Heads: TypeAlias = tuple[tuple[Out, int | None], bytes, bytes, bytes, Callable[[str], None] | None]
"""What :meth:`ResponsesEncoder._delta_heads` keeps for a block."""


class ResponsesEncoder(MarkingEncoder):
    """Encoder for the Responses SSE stream; subclasses bind ``dialect`` and ``quirks``.

    Each event's resume cursor (for :meth:`encode_entries`) is its ``sequence_number``,
    marked where the event is written."""

    quirks: ClassVar[Quirks]

    def __init__(self) -> None:
        super().__init__()
        self._asm = Assembler(self.quirks)
        self._seq = -1
        self._opened = False
        self._reasoning_parts: dict[int, set[tuple[bool, int]]] = {}
        self._partials: dict[int, int] = {}
        self._annotations: dict[int, int] = {}
        self._lost_blocks: set[int] = set()
        self._args_streamed: set[int] = set()
        self._fast = True  # the byte-template paths below (False: always the general path)
        # unified index -> (the block's (Out, content index), head before the sequence
        # number, head from after it up to the delta, tail) of its delta event, and
        # the append of its part's text (None for a tool call)
        self._heads: dict[int, _Heads] = {}
        # native event name -> ``event: <name>`` and the ``data:`` field name
        self._native_heads: dict[str, bytes] = {}

    def folds_usage(self, source: str) -> bool:
        """Another family's usage updates only go into the terminal Response (see
        :meth:`DialectEncoder.folds_usage`); a Responses dialect's are its native
        events'."""
        return source not in FAMILY

    # -- fast paths --------------------------------------------------------------------

    def encode(self, event: Event) -> bytes:
        """Encode one unified event; returns the bytes to send now (maybe none).

        Text, reasoning and tool-input deltas, the bulk of a stream, are written from
        byte templates when their output is certain to equal the general path's
        (same keys, order and escaping); anything else takes the general path.
        """
        kind = type(event)
        if kind is UsageUpdate:
            if self._fast and not (self._asm.native and event.extra is not None):
                # What the assembler does with it (the usage goes into the terminal
                # Response).
                return self._keep_usage(event.usage)  # type: ignore[union-attr,arg-type]
        elif (kind is TextDelta or kind is ToolInputDelta or kind is ReasoningDelta) and self._fast:
            asm = self._asm
            data: bytes | None = None
            if asm.native:
                # A same-dialect delta: ``{"type", "sequence_number", *extra, "delta"}``,
                # the payload :meth:`_native` builds, in one step.
                extra = event.extra
                cursor = event.cursor
                if extra is not None and type(cursor) is int and "delta" not in extra:
                    head: bytes | None
                    try:
                        head = self._native_heads[extra["type"]]
                    except (KeyError, TypeError):
                        head = self._native_head(extra)
                    if head is not None:
                        try:
                            body = ENCODER.encode(
                                {
                                    "type": extra["type"],
                                    "sequence_number": cursor,
                                    **extra,
                                    "delta": event.delta,  # type: ignore[union-attr]
                                }
                            )
                        except Exception:  # the general path says how it fails
                            body = None
                        if body is not None:
                            self._seq = cursor if cursor > self._seq else self._seq
                            data = head + body + b"\n\n"
                            if self._marks is not None:
                                self._mark_native(extra, cursor, data)
            else:
                # Another dialect's text or tool-input delta into an open item (what
                # _text_delta and _tool_delta write, and what the assembler keeps),
                # from the template kept for its block.
                index: int = event.index  # type: ignore[union-attr,assignment]
                found = asm.blocks.get(index)
                heads = self._heads.get(index)
                if heads is None or heads[0] is not found:
                    heads = self._delta_heads(index, found)
                if heads is not None and (
                    heads[4] is not None
                    if kind is TextDelta
                    else kind is ToolInputDelta
                    and heads[4] is None
                    and not self.quirks.one_shot_arguments
                ):
                    try:
                        delta = ENCODER.encode(event.delta)  # type: ignore[union-attr]
                    except Exception:  # not encodable: the general path says how it fails
                        pass
                    else:
                        append = heads[4]
                        if append is not None:
                            append(event.delta)  # type: ignore[union-attr]
                        else:
                            heads[0][0].args.append(event.delta)  # type: ignore[union-attr]
                            self._args_streamed.add(index)
                        self._seq = seq = self._seq + 1
                        data = b"%b%d%b%b%b" % (heads[1], seq, heads[2], delta, heads[3])
                        marks = self._marks
                        if marks is not None:
                            marks.append((str(seq), data, None))
            if data is not None:
                self.event_index += 1
                return data
        return self._encode_pending(event)

    def _fold_usage(self) -> None:
        """Fold the usage updates kept back into the assembler's (see
        :mod:`polystream.dialects._usage_fold`)."""
        usage = fold(self._asm.usage, self._usage_batch)
        assert usage is not None
        self._asm.usage = usage
        self._usage_batch.clear()

    def _native_head(self, extra: dict[str, Any]) -> bytes | None:
        """``event: <type>`` and the ``data:`` field name of a native payload (None when
        it has no string type: the general path says what then)."""
        name = extra.get("type")
        if type(name) is not str:
            return None
        try:
            head = b"event: " + name.encode() + b"\ndata: "
        except UnicodeEncodeError:
            return None
        self._native_heads[name] = head
        return head

    def _delta_heads(self, index: int, found: tuple[Out, int | None] | None) -> _Heads | None:
        """The constant bytes of the delta events of the block at ``index``, around the
        sequence number and the delta (the payloads of :meth:`_text_delta` and
        :meth:`_tool_delta`), and where a text delta goes (its part's ``text.append``;
        None for a tool call); kept under ``index``. None when there is no such block
        or its deltas take the general path."""
        if found is None:
            return None
        out, ci = found
        if ci is not None:
            name = (
                "response.refusal.delta" if out.kind == "refusal" else "response.output_text.delta"
            )
            where = b',"content_index":' + ENCODER.encode(ci)
            tail = b"}\n\n" if out.kind == "refusal" else b',"logprobs":[]}\n\n'
        elif out.kind == "tool_call":
            name = _input_delta(out)
            where = b""
            tail = b"}\n\n"
        else:
            return None
        try:
            middle = (
                b',"item_id":'
                + ENCODER.encode(out.id)
                + b',"output_index":'
                + ENCODER.encode(out.output_index)
                + where
                + b',"delta":'
            )
        except Exception:
            return None
        head = (
            b"event: "
            + name.encode()
            + b'\ndata: {"type":"'
            + name.encode()
            + b'","sequence_number":'
        )
        heads = found, head, middle, tail, None if ci is None else out.parts[ci].text.append
        self._heads[index] = heads
        return heads

    # -- plumbing ----------------------------------------------------------------------

    def _emit(self, name: str, fields: dict[str, Any]) -> bytes:
        self._seq += 1
        payload: dict[str, Any] = {"type": name, "sequence_number": self._seq}
        payload.update(fields)
        data = encode_payload(name, payload)
        marks = self._marks
        if marks is not None:
            named = native_of(fields["response"]) if "response" in fields else None
            marks.append((str(self._seq), data, named))
        return data

    def _mark_native(self, extra: dict[str, Any], cursor: Any, data: bytes) -> None:
        """Mark a native event: its cursor is the event's (``sequence_number``, unless
        its payload sets its own), its native id its ``response``'s."""
        assert self._marks is not None
        name = extra["type"]
        if "sequence_number" in extra or "\n" in name or "\r" in name:
            self._mark_read(data)  # (what the payload says, or more than one event)
            return
        mark: Mark = (
            str(cursor) if type(cursor) is int else "",
            data,
            native_of(extra["response"]) if "response" in extra else None,
        )
        self._marks.append(mark)

    def _native(self, event: Event, key: str | None = None, value: Any = None) -> bytes:
        extra = event.extra
        assert extra is not None
        name = extra["type"]
        payload: dict[str, Any] = {"type": name}
        cursor = event.cursor
        if type(cursor) is int:
            payload["sequence_number"] = cursor
            self._seq = max(self._seq, cursor)
        payload.update(extra)
        if key is not None and key not in extra:
            payload[key] = value
        data = encode_payload(name, payload)
        if self._marks is not None:
            self._mark_native(extra, cursor, data)
        return data

    def _open(self) -> bytes:
        """``response.created`` + ``response.in_progress`` (foreign streams)."""
        if self._opened:
            return b""
        self._opened = True
        asm = self._asm
        if asm.id is None:
            asm.id = IdFactory(self.quirks.id_style, asm.model or "polystream").make("response")
            self.default("id", None, "the source stream has no id: wrote a generated one")
        if asm.ids is None:
            asm.ids = IdFactory(self.quirks.id_style, asm.id)
        if asm.created is None:
            self.default("created_at", None, "the source stream has no creation time: wrote 0")
        if asm.model is None:
            self.default("model", None, "the source stream names no model: wrote 'unknown'")
        created = 0 if self.quirks.created_at_zero else None
        first = asm.skeleton("in_progress", created_at=created)
        return self._emit("response.created", {"response": first}) + self._emit(
            "response.in_progress", {"response": first}
        )

    # -- dispatch ----------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        asm = self._asm
        extra = event.extra
        if asm.native and extra is not None:
            # Same dialect: the carrier is the native event; nothing to assemble.
            if "type" in extra:
                return self._native_event(event)
            return b""  # implicit / resumed: no native event of its own
        asm.feed(event)
        if asm.native and extra is not None:  # the StreamStart that said so
            return self._native_event(event) if "type" in extra else b""
        etype = type(event)
        if etype is TextDelta:
            if TYPE_CHECKING:
                assert isinstance(event, TextDelta)
            return self._text_delta(event)
        if etype is ReasoningDelta:
            if TYPE_CHECKING:
                assert isinstance(event, ReasoningDelta)
            return self._reasoning_delta(event)
        if etype is ToolInputDelta:
            if TYPE_CHECKING:
                assert isinstance(event, ToolInputDelta)
            return self._tool_delta(event)
        if etype is StreamStart:
            return self._open()
        if etype is BlockStart:
            if TYPE_CHECKING:
                assert isinstance(event, BlockStart)
            return self._block_start(event)
        if etype is BlockEnd:
            if TYPE_CHECKING:
                assert isinstance(event, BlockEnd)
            return self._block_end(event)
        if etype is DataDelta:
            if TYPE_CHECKING:
                assert isinstance(event, DataDelta)
            return self._data_delta(event)
        if etype is Citation:
            if TYPE_CHECKING:
                assert isinstance(event, Citation)
            return self._citation(event)
        if etype is SignatureDelta:
            if TYPE_CHECKING:
                assert isinstance(event, SignatureDelta)
            return self._signature(event)
        if etype is Finish:
            if TYPE_CHECKING:
                assert isinstance(event, Finish)
            return self._finish(event)
        if etype is ErrorEvent:
            if TYPE_CHECKING:
                assert isinstance(event, ErrorEvent)
            return self._error(event)
        if etype is KeepAlive:
            if TYPE_CHECKING:
                assert isinstance(event, KeepAlive)
            data = _SSE.comment(event.comment or event.name or "keepalive")
            self._mark_read(data)
            return data
        if etype is Unknown:
            assert isinstance(event, Unknown)
            if asm.native:
                data = _SSE.event(event.data, event=event.name)
                self._mark_read(data, one=True)
                return data
            self.lose(f"event:unknown:{event.name}", event, "no Responses event for it")
            return b""
        if etype is Metadata:
            assert isinstance(event, Metadata)
            self.lose_metadata(event, "Responses has no reply-level metadata")
            return b""
        if etype is StatusUpdate or etype is UsageUpdate or etype is Warning or etype is Raw:
            return b""  # state only (usage goes into the terminal Response)
        return b""

    def _native_event(self, event: Event) -> bytes:
        etype = type(event)
        if etype is Citation:
            if TYPE_CHECKING:
                assert isinstance(event, Citation)
            return self._native(event, "annotation", event.citation)
        if etype is DataDelta:
            assert event.extra is not None
            key = (
                "partial_image_b64"
                if event.extra["type"] == "response.image_generation_call.partial_image"
                else "delta"
            )
            return self._native(event, key, event.delta)  # type: ignore[union-attr]
        if etype is TextDelta or etype is ReasoningDelta or etype is ToolInputDelta:
            return self._native(event, "delta", event.delta)  # type: ignore[union-attr]
        return self._native(event)

    # -- foreign blocks ----------------------------------------------------------------

    def _block(self, index: int) -> tuple[Out, int | None] | None:
        return self._asm.blocks.get(index)

    def _block_start(self, event: BlockStart) -> bytes:
        head = self._open()
        found = self._block(event.index)
        if found is None:
            self._lost_blocks.add(event.index)
            reason = (
                f"a Response has one answer: candidate {event.candidate} is dropped"
                if event.candidate
                else f"no Responses output item for a foreign {event.kind} block"
            )
            self.lose(f"block:{event.kind}", event, reason)
            return head
        out, ci = found
        item = dict(out.item)
        head += self._emit(
            "response.output_item.added", {"output_index": out.output_index, "item": item}
        )
        if item.get("type") == "web_search_call":
            where = {"item_id": out.id, "output_index": out.output_index}
            head += self._emit("response.web_search_call.in_progress", where)
            head += self._emit("response.web_search_call.searching", where)
        if ci is not None:
            head += self._emit(
                "response.content_part.added",
                {
                    "item_id": out.id,
                    "output_index": out.output_index,
                    "content_index": ci,
                    "part": dict(out.parts[ci].part),
                },
            )
        return head

    def _text_delta(self, event: TextDelta) -> bytes:
        found = self._block(event.index)
        if found is None or found[1] is None:
            return b""
        out, ci = found
        fields: dict[str, Any] = {
            "item_id": out.id,
            "output_index": out.output_index,
            "content_index": ci,
            "delta": event.delta,
        }
        if out.kind == "refusal":
            return self._emit("response.refusal.delta", fields)
        fields["logprobs"] = []
        return self._emit("response.output_text.delta", fields)

    def _reasoning_delta(self, event: ReasoningDelta) -> bytes:
        found = self._block(event.index)
        if found is None:
            return b""
        out = found[0]
        part = event.part if event.part is not None else 0
        opened = self._reasoning_parts.setdefault(event.index, set())
        head = b""
        where = {"item_id": out.id, "output_index": out.output_index}
        if (event.summary, part) not in opened:
            opened.add((event.summary, part))
            if event.summary:
                head = self._emit(
                    "response.reasoning_summary_part.added",
                    {**where, "summary_index": part, "part": {"type": "summary_text", "text": ""}},
                )
            else:
                head = self._emit(
                    "response.content_part.added",
                    {
                        **where,
                        "content_index": part,
                        "part": {"type": "reasoning_text", "text": ""},
                    },
                )
        if event.summary:
            return head + self._emit(
                "response.reasoning_summary_text.delta",
                {**where, "summary_index": part, "delta": event.delta},
            )
        return head + self._emit(
            "response.reasoning_text.delta", {**where, "content_index": part, "delta": event.delta}
        )

    def _tool_delta(self, event: ToolInputDelta) -> bytes:
        found = self._block(event.index)
        if found is None or found[0].kind != "tool_call" or self.quirks.one_shot_arguments:
            return b""  # xAI: one delta with the whole JSON, written at the block's end
        out = found[0]
        self._args_streamed.add(event.index)
        return self._emit(
            _input_delta(out),
            {"item_id": out.id, "output_index": out.output_index, "delta": event.delta},
        )

    def _data_delta(self, event: DataDelta) -> bytes:
        found = self._block(event.index)
        if found is None:
            return b""
        out = found[0]
        if out.kind != "image":
            # Binary data has an event only in an image generation item: written into
            # any other item, the stream would not decode.
            self.lose("data", event, f"Responses has no data delta for a {out.kind} item")
            return b""
        n = self._partials.get(event.index, 0)
        self._partials[event.index] = n + 1
        return self._emit(
            "response.image_generation_call.partial_image",
            {
                "item_id": out.id,
                "output_index": out.output_index,
                "partial_image_index": n,
                "partial_image_b64": event.delta,
            },
        )

    def _signature(self, event: SignatureDelta) -> bytes:
        """This dialect's own state goes in the reasoning item's ``encrypted_content``
        (written by ``output_item.done``, see :meth:`.result.Out.build`); Responses has
        no carrier for anything else."""
        found = self._block(event.index)
        if not self._asm.owns(event):
            self.lose(
                "signature",
                event,
                f"Responses encrypted_content is opaque state of {self.quirks.dialect} models; "
                f"{origin(event.extra, self._asm.source)} state would be rejected there",
            )
        elif found is None:
            self.lose("signature", event, "its block has no Responses output item")
        elif found[0].kind != "reasoning":
            self.lose("signature", event, f"a {found[0].kind} item has no encrypted_content")
        elif found[0].closed:
            self.lose("signature", event, "after its reasoning item's output_item.done")
        return b""

    def _citation(self, event: Citation) -> bytes:
        found = self._block(event.index) if event.index is not None else None
        citation = self._asm.last_citation
        if found is None or found[1] is None or citation is None:
            self.lose("citation", event, "Responses annotations belong to output text, with a URL")
            return b""
        if self._asm.last_citation_converted:
            self.lose(
                "citation.fields",
                event,
                "converted to url_citation; other fields of the citation are dropped",
            )
        out, ci = found
        n = self._annotations.get(event.index or 0, 0)
        self._annotations[event.index or 0] = n + 1
        return self._emit(
            "response.output_text.annotation.added",
            {
                "item_id": out.id,
                "output_index": out.output_index,
                "content_index": ci,
                "annotation_index": n,
                "annotation": citation,
            },
        )

    def _block_end(self, event: BlockEnd) -> bytes:
        found = self._block(event.index)
        if found is None:
            return b""
        out, ci = found
        item = out.build(finished=True)
        where = {"item_id": out.id, "output_index": out.output_index}
        chunks: list[bytes] = []
        if ci is not None:
            part = item["content"][ci]
            if part.get("type") == "refusal":
                chunks.append(
                    self._emit(
                        "response.refusal.done",
                        {**where, "content_index": ci, "refusal": part.get("refusal", "")},
                    )
                )
            else:
                chunks.append(
                    self._emit(
                        "response.output_text.done",
                        {
                            **where,
                            "content_index": ci,
                            "text": part.get("text", ""),
                            "logprobs": [],
                        },
                    )
                )
            chunks.append(
                self._emit(
                    "response.content_part.done", {**where, "content_index": ci, "part": part}
                )
            )
        elif out.kind == "reasoning":
            for si, summary in enumerate(_text_parts(item.get("summary"))):
                chunks.append(
                    self._emit(
                        "response.reasoning_summary_text.done",
                        {**where, "summary_index": si, "text": summary["text"]},
                    )
                )
                chunks.append(
                    self._emit(
                        "response.reasoning_summary_part.done",
                        {**where, "summary_index": si, "part": summary},
                    )
                )
            for rci, content in enumerate(_text_parts(item.get("content"))):
                chunks.append(
                    self._emit(
                        "response.reasoning_text.done",
                        {**where, "content_index": rci, "text": content["text"]},
                    )
                )
                chunks.append(
                    self._emit(
                        "response.content_part.done",
                        {**where, "content_index": rci, "part": content},
                    )
                )
        elif out.kind == "tool_call" and item.get("type") == "custom_tool_call":
            # A free-form call: its input as it came ("" stays "": it is not JSON).
            text = item.get("input") or ""
            if text and event.index not in self._args_streamed:
                chunks.append(
                    self._emit("response.custom_tool_call_input.delta", {**where, "delta": text})
                )
            chunks.append(
                self._emit("response.custom_tool_call_input.done", {**where, "input": text})
            )
        elif out.kind == "tool_call":
            arguments = item.get("arguments") or ""
            if not arguments:
                # A no-argument call: OpenAI streams "{}" (pain point 16: never "").
                arguments = "{}"
                item["arguments"] = arguments
                out.args[:] = [arguments]
                chunks.append(
                    self._emit(
                        "response.function_call_arguments.delta", {**where, "delta": arguments}
                    )
                )
            elif self.quirks.one_shot_arguments or event.index not in self._args_streamed:
                chunks.append(
                    self._emit(
                        "response.function_call_arguments.delta", {**where, "delta": arguments}
                    )
                )
            chunks.append(
                self._emit(
                    "response.function_call_arguments.done",
                    {**where, "name": item.get("name"), "arguments": arguments},
                )
            )
        elif out.kind == "image":
            chunks.append(self._emit("response.image_generation_call.completed", where))
        elif item.get("type") == "web_search_call":
            chunks.append(self._emit("response.web_search_call.completed", where))
        # Each foreign block is its own item (text and refusal: one-part messages).
        out.closed = True
        chunks.append(
            self._emit(
                "response.output_item.done",
                {"output_index": out.output_index, "item": out.build(finished=True)},
            )
        )
        return b"".join(chunks)

    # -- the end -----------------------------------------------------------------------

    def _error(self, event: ErrorEvent) -> bytes:
        error = event.error
        if error.kind == "protocol":
            self.lose("error:protocol", event, "a tolerated decoding error of the source stream")
            return b""
        return self._open() + self._emit(
            "error", {"code": error.code or error.kind, "message": error.message, "param": None}
        )

    def _finish(self, event: Finish) -> bytes:
        if event.status == "truncated":
            # The source was cut off: so is this stream. Usage has no event of its own.
            if not self._asm.usage.is_empty() and not self._asm.native:
                self.lose("usage", event, "Responses reports usage only in the terminal event")
            return b""
        head = self._open()
        asm = self._asm
        for index, (out, _ci) in list(asm.blocks.items()):
            if not out.closed and index not in self._lost_blocks:
                head += self._block_end(BlockEnd(index=index))
        name = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
            "failed": "response.failed",
        }[event.status]
        carried = self._carried_reason(event)
        if carried != event.reason.unified:
            self.lose(
                "finish_reason",
                event,
                f"Responses has no word for {event.reason.unified!r} "
                f"({event.reason.raw!r}): it reads as {carried!r}",
            )
        response = asm.response(prefer_terminal=False)
        if self.quirks.created_at_zero and asm.created:
            response["created_at"] = asm.created
        return head + self._emit(name, {"response": response})

    def _carried_reason(self, event: Finish) -> str:
        """The unified reason a decoder of this dialect will read back from the stream."""
        if event.status == "failed":
            return "cancelled" if event.reason.unified == "cancelled" else "error"
        if event.status == "incomplete":
            raw = to_incomplete_reason(event.reason)
            return FINISH_REASONS.get(raw, "other") if raw is not None else "other"
        kinds = {out.kind for out in self._asm.items.values()}
        if "tool_call" in kinds:
            return "tool_calls"
        if "refusal" in kinds and "text" not in kinds:
            return "refusal"
        return "stop"

    def _close(self) -> bytes:
        """Nothing follows the terminal event (Responses has no ``[DONE]``)."""
        return b""


def _text_parts(parts: Any) -> list[dict[str, Any]]:
    """The parts of a reasoning item's ``summary`` or ``content`` that have a text (a
    value of another shape, from a malformed stream, has none)."""
    if not isinstance(parts, list):
        return []
    return [p for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _input_delta(out: Out) -> str:
    """The delta event of a tool call item's input: a custom (free-form) call's text,
    or a function call's JSON arguments."""
    if out.item.get("type") == "custom_tool_call":
        return "response.custom_tool_call_input.delta"
    return "response.function_call_arguments.delta"

"""Unified events -> Gemini chunks, the general way: each event's part, block or field
gathered, and a chunk written per chunk-ending usage update (this dialect's events) or
per content event (another dialect's); see :mod:`.encode` for the rules."""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import msgspec

from polystream.dialects._base import DialectEncoder
from polystream.dialects._carrier import origin, wrap_base64
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
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.jsonarray import JSONArrayEncoder
from polystream.wire.jsondepth import decode_bounded

from ._blocks import Block, Candidate, Part
from .finish_reason import FINISH_REASONS, map_finish_reason, to_gemini_finish_reason
from .status import google_status
from .usage import to_usage_metadata
from .wire import (
    CANDIDATE_RANK,
    CHUNK_RANK,
    dumps_pretty,
    dumps_sse,
    ordered,
    tool_call_object,
)

__all__ = ["DIALECT", "GeneralEncoder", "is_base64"]

DIALECT: Final = "gemini_generate"
DECODE: Final = msgspec.json.Decoder()
_METADATA_FIELDS: Final = {
    "grounding": "groundingMetadata",
    "url_context": "urlContextMetadata",
    "safety_ratings": "safetyRatings",
}
# What ends a line of SSE data (an unknown event's data is written a line at a time).
_LINE_BREAK: Final = re.compile(rb"\r\n|\r|\n")
# Base64 as google-genai (pydantic) accepts it: one alphabet, standard or URL-safe,
# padding optional but never wrong, no stray bits in the last symbol.
_BASE64_CHARS: Final = re.compile(r"[A-Za-z0-9+/]*|[A-Za-z0-9_-]*")
_BASE64_VALUE: Final = {
    c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
} | {"-": 62, "_": 63}
_PARTLESS: Final = frozenset({"server_tool_call", "server_tool_result", "code_result", "other"})
"""Block kinds that have a part only when their value has a Gemini form (``slot``)."""


class GeneralEncoder(DialectEncoder):
    """The general path of :class:`~.encode.GeminiGenerateEncoder` (which adds its fast
    paths): its state, the framing, and each event's encoding.

    Args:
        framing: ``"sse"`` or ``"json_array"`` (see the encoder).
    """

    dialect = DIALECT

    def __init__(self, *, framing: Literal["sse", "json_array"] = "sse") -> None:
        super().__init__()
        if framing not in ("sse", "json_array"):
            raise ValueError(f"unknown framing {framing!r}")
        self.framing = framing
        self._array = JSONArrayEncoder() if framing == "json_array" else None
        self._same = False
        self._wrote_same = False  # a chunk of this dialect was written from its extras
        self._source: str | None = None
        self._model: str | None = None
        self._id: str | None = None
        self._blocks: dict[int, Block] = {}
        self._candidates: dict[int, Candidate] = {}
        # The candidates written to (another dialect's), and those whose finishReason
        # went out: at the Finish, each one that began is given one (a decoder reads a
        # candidate that never finishes as a cut stream).
        self._began: set[int] = set()
        self._ended: set[int] = set()
        self._chunk_fields: dict[str, Any] = {}
        self._usage = Usage()
        self._errored = False
        self._unterminated = False
        self._buffering = 0  # foreign tool-call / code blocks still open
        self._wrote_calls = False  # a functionCall part was written (STOP means tool_calls)
        self._refusal: list[str] = []  # another dialect's refusal text (-> finishMessage)
        self._fast = True  # the byte-template paths (False: always the general path)
        # Another dialect's text parts: (candidate, thought) -> the chunk's bytes around
        # the text (for the StreamStart seen last: the chunk names its model and id).
        self._templates: dict[tuple[int, bool], tuple[bytes, bytes] | None] = {}
        # This dialect's one-text-part chunks: (candidate, thought, the chunk residual's
        # JSON) -> the chunk's bytes before the text, between it and the usage, after it.
        self._same_templates: dict[tuple[int, bool, bytes], tuple[bytes, bytes, bytes] | None] = {}
        # usageMetadata's compact JSON without digits -> how to space it (_usage_way)
        self._usage_shapes: dict[bytes, int] = {}
        # A source usageMetadata text with its digits made 1s -> how to write every
        # text of that form (_learn_usage_form)
        self._usage_forms: dict[bytes, int] = {}
        # This dialect's text part held back while nothing else is pending in its chunk:
        # (block, text, thought). Whatever else comes first adds it as a part (_unhold).
        self._held: tuple[Block, str, bool] | None = None
        # The chunk-ending extra last written from a template (kept by identity), the
        # block and thought it was checked for, and the template's three pieces.
        self._held_cache: tuple[Any, Block, bool, bytes, bytes, bytes] | None = None

    @property
    def content_type(self) -> str:  # type: ignore[override]
        """``text/event-stream`` for SSE, ``application/json`` for the JSON array."""
        return "application/json" if self.framing == "json_array" else "text/event-stream"

    # -- framing ---------------------------------------------------------------------------

    def _frame(self, chunk: Any, *, bare: bool = False) -> bytes:
        if self._array is not None:
            return self._array.element(dumps_pretty(chunk))
        if bare:
            # Google writes an error after SSE events as bare pretty-printed JSON.
            return dumps_pretty(chunk) + b"\n"
        return b"data: " + dumps_sse(chunk) + b"\r\n\r\n"

    def _close(self) -> bytes:
        """End of the events: the closing ``]`` of the array (nothing for SSE, nor for
        an array whose stream was cut: the decoder's Finish says so)."""
        if self._usage_batch:
            self._fold_usage()
        if self._held is not None:
            self._unhold()
        out = b""
        if self._has_pending():
            # Content never flushed (another dialect's stream without a Finish, or a
            # same-dialect stream missing its chunk-ending events): write it anyway.
            out = self._flush_foreign()
        if self._array is not None and not self._unterminated:
            out += self._array.close()
        return out

    def _unhold(self) -> None:
        """Add the held text part, as :meth:`_fast_same_part` would have."""
        held = self._held
        assert held is not None
        self._held = None
        self._add_text(*held)

    def _add_text(self, block: Block, text: str, thought: bool) -> None:
        """Add a text (or thought) part of ``block``, without ``extra`` (:meth:`_add`)."""
        self._add(block, {"text": text, "thought": True} if thought else {"text": text}, None)

    def _fold_usage(self) -> None:
        """Fold the usage updates kept back (see :mod:`polystream.dialects._usage_fold`)."""
        usage = fold(self._usage, self._usage_batch)
        assert usage is not None
        self._usage = usage
        self._usage_batch.clear()

    # -- events ----------------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        kind = type(event)
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._source = event.dialect
            self._same = event.dialect == DIALECT
            self._templates.clear()  # they name the model and id
            self._model = event.model
            self._id = event.id
            return b""
        if kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            if self._same and event.extra is not None and "chunk" in event.extra:
                return self._flush_same(event)
            self._usage = self._usage.merged(event.usage)
            if event.usage.cache_write_tokens:
                self.lose("usage.cache_write_tokens", event, "Gemini reports no cache writes")
            return b""
        if kind is Finish:
            assert isinstance(event, Finish)
            return self._finish(event)
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            return self._error(event)
        if kind is KeepAlive:
            assert isinstance(event, KeepAlive)
            if self._same and self._array is None and event.comment is not None:
                return b":" + (b" " + event.comment.encode() if event.comment else b"") + b"\r\n"
            # Gemini sends no keep-alives, and google-genai parses every line that is not
            # ``data:`` as JSON: an SSE comment would break it.
            self.lose("keep-alive", event, "Gemini streams have no keep-alive")
            return b""
        if kind is Unknown:
            assert isinstance(event, Unknown)
            if self._same:
                data = event.data.encode()
                if self._array is not None:
                    return self._array.element(data)
                if b"\n" in data or b"\r" in data:
                    # One data line per line of the event's data (the decoder joined
                    # them with LF): written whole, a line would be bare text, and a
                    # blank one would end the event.
                    lines = _LINE_BREAK.split(data)
                    return b"".join([b"data: " + line + b"\r\n" for line in lines]) + b"\r\n"
                return b"data: " + data + b"\r\n\r\n"
            self.lose(f"event:{event.name}", event, "an unknown event of another dialect")
            return b""
        self._content(event)
        if not self._same and self._buffering == 0 and self._has_pending():
            return self._flush_foreign()
        return b""

    def _content(self, event: Event) -> None:
        if isinstance(event, BlockStart):
            self._block_start(event)
        elif isinstance(event, TextDelta):
            self._text(event)
        elif isinstance(event, ReasoningDelta):
            block = self._blocks.get(event.index)
            if block is not None:
                self._add(block, {"text": event.delta, "thought": True}, event.extra)
        elif isinstance(event, ToolInputDelta):
            self._tool_input(event)
        elif isinstance(event, DataDelta):
            self._data(event)
        elif isinstance(event, SignatureDelta):
            self._signature(event)
        elif isinstance(event, BlockEnd):
            self._block_end(event)
        elif isinstance(event, Citation):
            self._citation(event)
        elif isinstance(event, Metadata):
            self._metadata(event)
        # StatusUpdate, Warning and Raw have no Gemini form and carry no content.

    def _cand(self, number: int) -> Candidate:
        cand = self._candidates.get(number)
        if cand is None:
            cand = self._candidates[number] = Candidate()
            self._began.add(number)
        return cand

    def _add(self, block: Block, fields: dict[str, Any], extra: dict[str, Any] | None) -> Part:
        part = Part(block.index, fields, extra)
        self._cand(block.candidate).parts.append(part)
        return part

    def _block_start(self, event: BlockStart) -> None:
        block = Block(event)
        self._blocks[event.index] = block
        extra = event.extra
        kind = event.kind
        if kind == "tool_call":
            if self._same and not block.streamed:
                call: dict[str, Any] = {}
                if event.name is not None:
                    call["name"] = event.name
                if event.id is not None:
                    call["id"] = event.id
                if extra and isinstance(extra.get("functionCall"), dict):
                    call.update(extra["functionCall"])
                block.slot = self._add(block, {"functionCall": call}, extra)
                block.slot.inner_order = _list(extra, "functionCall_order")
                self._wrote_calls = True
            elif not self._same:
                block.args = []
                self._buffering += 1
        elif kind == "code":
            if self._same:
                code = dict(extra.get("executableCode", {})) if extra else {}
                block.slot = self._add(block, {"executableCode": code}, extra)
                block.slot.inner_order = _list(extra, "executableCode_order")
            else:
                block.args = []
                self._buffering += 1
        elif kind == "server_tool_call" and self._same:
            block.slot = self._add(block, {"toolCall": tool_call_object(event)}, extra)
            block.slot.inner_order = _list(extra, "toolCall_order")
        elif kind in ("code_result", "server_tool_call", "server_tool_result"):
            key = {
                "code_result": "codeExecutionResult",
                "server_tool_call": "toolCall",
                "server_tool_result": "toolResponse",
            }[kind]
            value = event.value
            if self._same and isinstance(value, dict):
                block.slot = self._add(block, {key: value}, extra)
            elif kind == "code_result" and isinstance(value, dict) and "outcome" in value:
                block.slot = self._add(block, {key: value}, None)
            else:
                self.lose(f"block:{kind}", event, "Gemini has no form for this server tool block")
        elif kind == "other":
            if self._same and isinstance(event.value, dict):
                block.slot = self._add(block, dict(event.value), extra)
            else:
                self.lose("block:other", event, "a block kind Gemini cannot carry")
        elif kind == "refusal":
            self.lose(
                "block:refusal",
                event,
                "Gemini has no refusal part: its text is written as the finishMessage",
            )
        elif kind == "compaction":
            self.lose("block:compaction", event, "Gemini has no compaction part")

    def _text(self, event: TextDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if block.kind == "text":
            self._add(block, {"text": event.delta}, event.extra)
        elif block.kind == "refusal":
            self._refusal.append(event.delta)
        elif block.kind == "reasoning":
            self._add(block, {"text": event.delta, "thought": True}, event.extra)
        elif block.kind == "code":
            if block.slot is not None:
                block.slot.fields["executableCode"]["code"] = event.delta
            elif block.args is not None:
                block.args.append(event.delta)
        elif block.kind != "compaction":
            self.lose(f"text:{block.kind}", event, "text in a block kind Gemini cannot carry")

    def _tool_input(self, event: ToolInputDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if block.streamed and event.extra and isinstance(event.extra.get("functionCall"), dict):
            block.slot = self._add(
                block, {"functionCall": event.extra["functionCall"]}, event.extra
            )
        elif block.slot is not None and "functionCall" in block.slot.fields:
            if event.delta:
                # This dialect's decoder gives a call's args whole, in one delta. Deltas
                # made another way may be fragments: they are joined until they parse.
                text = event.delta if block.pending is None else block.pending + event.delta
                try:
                    args = decode_bounded(text, DECODE, what="tool arguments")
                except msgspec.DecodeError:
                    args = None
                if isinstance(args, dict):
                    block.slot.fields["functionCall"]["args"] = args
                    block.pending = None
                else:
                    block.pending = text
        elif block.args is not None:
            block.args.append(event.delta)

    def _data(self, event: DataDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if not self._same:
            if event.replace:
                block.image = event  # written when the block ends
                return
            if not is_base64(event.delta):
                self.lose("data", event, "not base64: no Gemini client accepts it")
                return
        blob: dict[str, Any] = {}
        if event.extra and isinstance(event.extra.get("inlineData"), dict):
            blob.update(event.extra["inlineData"])
        if event.mime_type is not None:
            blob["mimeType"] = event.mime_type
        blob["data"] = event.delta
        part = self._add(block, {"inlineData": blob}, event.extra)
        part.inner_order = _list(event.extra, "inlineData_order")

    def _signature(self, event: SignatureDelta) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            self.lose("signature", event, f"block {event.index} was never started")
            return
        if block.kind in ("refusal", "compaction") or (
            block.kind in _PARTLESS and block.slot is None and block.args is None
        ):
            self.lose("signature", event, f"a {block.kind} block has no Gemini part")
            return
        # The origin rule (see SignatureDelta): Gemini's own state is written natively;
        # another dialect's goes in the base64-safe carrier, which records the origin.
        source = origin(event.extra, self._source)
        value = event.delta
        if source is not None and source != DIALECT:
            if not is_base64(value):
                # thoughtSignature is a bytes field: clients (google-genai) reject a value
                # that is not base64, so such a signature cannot be carried.
                self.lose("signature", event, "not base64: no Gemini client accepts it")
                return
            value = wrap_base64(source, value)
            if not self._same:
                self.lose(
                    "signature",
                    event,
                    f"{source} opaque state carried in thoughtSignature (marked with its "
                    "origin); restored by a hop back to that dialect",
                    carried=True,
                )
        extra = event.extra
        if extra and isinstance(extra.get("part"), dict):
            fields = dict(extra["part"])
            fields["thoughtSignature"] = value
            self._add(block, fields, {"part_order": extra.get("part_order")})
            return
        if block.args is not None:  # a buffered foreign tool call or code block
            block.signature = (block.signature or "") + value
            return
        parts = self._cand(block.candidate).parts
        index = event.index
        for part in reversed(parts):
            if part.block == index:
                part.fields["thoughtSignature"] = part.fields.get("thoughtSignature", "") + value
                return
        # A signature-only part after the block's parts; flagged as a thought for a
        # reasoning block, so that decoding attaches it to a reasoning block only.
        fields = {"text": "", "thoughtSignature": value}
        if block.kind == "reasoning":
            fields["thought"] = True
        self._add(block, fields, None)

    def _block_end(self, event: BlockEnd) -> None:
        block = self._blocks.get(event.index)
        if block is None:
            return
        if block.image is not None:
            # The last refinement of a partial image is the image.
            image, block.image = block.image, None
            self._data(msgspec.structs.replace(image, replace=False))
        if block.pending is not None:
            # As for another dialect's call below: never a call without its arguments.
            block.pending = None
            assert block.slot is not None
            self._unfinished(block.slot.fields["functionCall"], event)
        if block.args is None:
            return
        self._buffering -= 1
        joined = "".join(block.args)
        block.args = None
        if block.kind == "tool_call":
            call: dict[str, Any] = {}
            if block.name is not None:
                call["name"] = block.name
            args = _arguments(joined, block.value if event.value is None else event.value)
            if isinstance(args, dict):
                call["args"] = args
            else:
                self._unfinished(call, event)
            if block.id is not None:
                call["id"] = block.id
            self._wrote_calls = True
            fields: dict[str, Any] = {"functionCall": call}
        else:
            fields = {"executableCode": {"language": "PYTHON", "code": joined}}
        if block.signature is not None:
            fields["thoughtSignature"] = block.signature
        self._add(block, fields, None)

    def _unfinished(self, call: dict[str, Any], event: BlockEnd) -> None:
        """A call whose arguments are no JSON object. Gemini's args is an object: input
        that is not one (cut-off or free-text arguments) is written as a call still
        expecting fragments, which reads back as an incomplete call, never as a call
        without arguments."""
        self.lose("tool_call.arguments", event, "arguments are not a JSON object")
        call["willContinue"] = True

    def _citation(self, event: Citation) -> None:
        block = self._blocks.get(event.index) if event.index is not None else None
        number = block.candidate if block is not None else 0
        if block is None and event.extra and type(event.extra.get("candidate")) is int:
            number = event.extra["candidate"]
        source = event.citation
        if not self._same:
            mapped = _citation_source(source)
            if mapped is None:
                self.lose("citation", event, "no citationSources form for this citation")
                return
            source = mapped
        self._cand(number).citations.append(source)

    def _metadata(self, event: Metadata) -> None:
        if event.name == "finish" and isinstance(event.value, dict):
            self._cand(event.candidate).fields.update(event.value)
        elif event.name in _METADATA_FIELDS:
            self._cand(event.candidate).fields[_METADATA_FIELDS[event.name]] = event.value
        elif event.name == "prompt_feedback":
            self._chunk_fields["promptFeedback"] = event.value
        else:
            self.lose_metadata(event, "Gemini has no field for this metadata")

    def _error(self, event: ErrorEvent) -> bytes:
        error = event.error
        if error.kind == "protocol":
            self.lose("error:protocol", event, "a decoding error has no native form")
            return b""
        self._errored = True
        raw = error.raw
        if not (isinstance(raw, dict) and self._same):
            code, status = google_status(error.kind)
            raw = {
                "code": error.http_status or code,
                "message": error.message,
                "status": error.code if self._source == DIALECT and error.code else status,
            }
        self._chunk_fields["error"] = raw
        if self._same:
            return b""
        return self._flush_foreign()

    def _finish(self, event: Finish) -> bytes:
        if event.extra and event.extra.get("unterminated"):
            self._unterminated = True
        if event.status == "truncated":
            return b""
        if (
            self._same
            and (self._wrote_same or self._held_cache is not None)
            and not self._has_pending()
            and self._usage.is_empty()
        ):
            # This dialect's last chunk, written from its events' extras (by
            # _flush_same, or from a template: _held_cache), said it all. (Events that
            # name this dialect but carry none of its extras, as events made by hand
            # do, end as another dialect's would.)
            return b""
        if self._errored:
            return b""  # the error chunk ended the stream, as Gemini's would
        if event.usage is not None:
            self._usage = self._usage.merged(event.usage)
        error = event.error
        if (
            event.status == "failed"
            and error is not None
            and not self._errored
            and error.kind != "content_filter"
        ):
            # A failure without its in-band error event: write the error object.
            return self._error(ErrorEvent(error=error))
        reason = to_gemini_finish_reason(event.reason)
        if event.status == "completed" and FINISH_REASONS[reason].status != "completed":
            reason = "STOP"  # keep the stream's status when the reason has no word
        back, _ = map_finish_reason(reason, tool_calls=self._wrote_calls)
        if back.unified != event.reason.unified:
            self.lose(
                "finish_reason",
                event,
                f"Gemini has no finishReason for {event.reason.unified!r}; wrote {reason}",
            )
        if not self._candidates:
            self._cand(0)
        for number in self._began - self._ended:
            self._cand(number)
        for cand in self._candidates.values():
            cand.fields["finishReason"] = reason
        if self._refusal:
            self._cand(0).fields.setdefault("finishMessage", "".join(self._refusal))
        return self._flush_foreign(final=True)

    # -- chunks ----------------------------------------------------------------------------

    def _has_pending(self) -> bool:
        return bool(self._chunk_fields) or any(
            cand.parts or cand.fields or cand.citations for cand in self._candidates.values()
        )

    def _render_candidate(self, cand: Candidate, base: dict[str, Any]) -> dict[str, Any]:
        out = base
        out.update(cand.fields)
        if cand.citations:
            out["citationMetadata"] = {"citationSources": cand.citations}
        return out

    def _flush_same(self, event: UsageUpdate) -> bytes:
        self._wrote_same = True
        extra = event.extra or {}
        chunk: dict[str, Any] = {}
        residuals = extra.get("candidates")
        if isinstance(residuals, list):
            rendered = []
            for pos, residual in enumerate(residuals):
                if not isinstance(residual, dict) or "_literal" in residual:
                    rendered.append(
                        residual.get("_literal") if isinstance(residual, dict) else None
                    )
                    continue
                number = residual.get("index")
                if type(number) is not int:
                    number = pos
                cand = self._candidates.pop(number, None) or Candidate()
                parts = [part.render() for part in cand.parts]
                body: dict[str, Any] = {}
                if "_content" in residual:
                    template = residual["_content"]
                    if isinstance(template, dict):
                        body["content"] = {
                            k: (parts if k == "parts" and v is None else v)
                            for k, v in template.items()
                        }
                    elif isinstance(template, list) and template:
                        body["content"] = template[0]
                else:
                    body["content"] = {"parts": parts, "role": "model"}
                for key, value in residual.items():
                    if not key.startswith("_"):
                        body[key] = value
                body = self._render_candidate(cand, body)
                rendered.append(ordered(body, CANDIDATE_RANK, _list(residual, "_order")))
            chunk["candidates"] = rendered
        chunk.update(self._chunk_fields)
        self._chunk_fields = {}
        if event.usage.raw is not None:
            chunk["usageMetadata"] = event.usage.raw
        residual_chunk = extra.get("chunk")
        if isinstance(residual_chunk, dict):
            chunk.update(residual_chunk)
        self._candidates.clear()
        chunk = ordered(chunk, CHUNK_RANK, _list(extra, "order"))
        return self._frame(chunk, bare=bool(extra.get("bare")))

    def _flush_foreign(self, *, final: bool = False) -> bytes:
        chunk: dict[str, Any] = {}
        if self._candidates:
            rendered = []
            for number in sorted(self._candidates):
                cand = self._candidates[number]
                parts = [part.render() for part in cand.parts]
                body: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
                body = self._render_candidate(cand, body)
                body["index"] = number
                if "finishReason" in body:
                    self._ended.add(number)
                rendered.append(ordered(body, CANDIDATE_RANK))
            chunk["candidates"] = rendered
        chunk.update(self._chunk_fields)
        self._chunk_fields = {}
        self._candidates.clear()
        if final and not self._usage.is_empty():
            chunk["usageMetadata"] = to_usage_metadata(self._usage)
        if self._model is not None:
            chunk["modelVersion"] = self._model
        if self._id is not None:
            chunk["responseId"] = self._id
        return self._frame(ordered(chunk, CHUNK_RANK))


def is_base64(text: str) -> bool:
    """Whether google-genai accepts ``text`` as base64 bytes (see ``_BASE64_CHARS``)."""
    body = text.rstrip("=")
    pad = len(text) - len(body)
    rest = len(body) % 4
    if pad > 2 or rest == 1 or (pad and (len(body) + pad) % 4):
        return False
    if not _BASE64_CHARS.fullmatch(body):
        return False
    if rest == 2:
        return _BASE64_VALUE[body[-1]] & 0xF == 0
    if rest == 3:
        return _BASE64_VALUE[body[-1]] & 0x3 == 0
    return True


def _arguments(joined: str, value: Any) -> Any:
    """A tool call's arguments from its streamed text, else from its whole value;
    None when they are not JSON."""
    if joined.strip():
        try:
            return decode_bounded(joined, DECODE, what="tool arguments")
        except msgspec.DecodeError:
            return None
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            return decode_bounded(value, DECODE, what="tool arguments")
        except msgspec.DecodeError:
            return None
    return {} if value is None else value


def _list(extra: dict[str, Any] | None, key: str) -> list[str] | None:
    if not extra:
        return None
    value = extra.get(key)
    return value if isinstance(value, list) else None


def _citation_source(citation: Any) -> dict[str, Any] | None:
    """A Gemini ``citationSources`` entry for another dialect's citation, if it has a URL."""
    if not isinstance(citation, dict):
        return None
    uri = citation.get("uri") or citation.get("url")
    if not isinstance(uri, str):
        return None
    out: dict[str, Any] = {}
    start = citation.get("startIndex", citation.get("start_index"))
    end = citation.get("endIndex", citation.get("end_index"))
    if type(start) is int:
        out["startIndex"] = start
    if type(end) is int:
        out["endIndex"] = end
    out["uri"] = uri
    title = citation.get("title")
    if isinstance(title, str):
        out["title"] = title
    return out

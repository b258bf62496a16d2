"""Gemini chunks -> unified events, the general way: a chunk's fields, its candidates
and their parts (blocks, signatures, streamed function calls), and the usage (see
:mod:`.decode` for the rules)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.audio import media_of_type
from polystream.dialects._base import FramedDecoder
from polystream.dialects._carrier import unwrap_base64
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
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

from ._state import ENCODE, Candidate, Previous, StreamedCall
from ._template import USUAL_KEYS, same_meta
from .finish_reason import FINISH_REASONS
from .status import error_info
from .usage import convert as convert_usage
from .wire import (
    CANDIDATE_RANK,
    CHUNK_DECODER,
    CHUNK_RANK,
    EXECUTABLE_CODE_RANK,
    FUNCTION_CALL_RANK,
    INLINE_DATA_RANK,
    PART_RANK,
    TOOL_CALL_RANK,
    GoogleError,
    order_if_needed,
)

DIALECT: Final = "gemini_generate"

# Keys that say what a part is (exactly one per part, per the API reference).
_DATA_KEYS: Final = frozenset(
    {
        "text",
        "inlineData",
        "functionCall",
        "functionResponse",
        "fileData",
        "executableCode",
        "codeExecutionResult",
        "toolCall",
        "toolResponse",
    }
)
# Part kinds the API documents but the unified model has no block kind for.
_KNOWN_OTHER: Final = frozenset({"functionResponse", "fileData"})
_EMPTY_USAGE: Final = Usage()
_MISSING: Final[Any] = object()
# Key tuples seen at the top of chunks -> their recorded order (None: canonical). Real
# streams use a handful of key sets; the cache stops growing at a fixed size.
_ORDER_CACHE: dict[tuple[str, ...], list[str] | None] = {}
_ORDER_CACHE_SIZE: Final = 256


class ChunkDecoder(FramedDecoder):
    """The chunks of a Gemini stream, read the general way (``_chunk_fields``) or in one
    pass for the usual one (``_usual_chunk``): their candidates, parts, blocks and
    usage. :class:`~.decode.GeminiGenerateDecoder` is made of it."""

    _template_tries = 0
    """Attempts left at finding the template (:class:`~._inline.InlineDecoder`'s, which
    sets it): while some are, a usual chunk is handed to :meth:`_learn`."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._started = False
        self._next_index = 0
        self._candidates: dict[int, Candidate] = {}
        self._finished_order: list[int] = []
        # The merged usage is base.merged(last) (last: the newest non-empty usage, not
        # merged yet). Gemini restates the whole usageMetadata on every chunk, so a
        # newer usage nearly always reports every count the last one did, and then
        # the last one is replaced instead of merged (same result, no new object).
        self._usage_base = Usage()
        self._usage_last: Usage | None = None
        self._usage_mask = 0  # convert_usage's mask of _usage_last
        self._error: ErrorInfo | None = None
        self._blocked: tuple[str, str | None] | None = None
        self._previous = Previous()
        self._index_residuals: dict[int, dict[str, Any]] = {}

    def _learn(self, data: str | bytes, chunk: dict[str, Any]) -> None:
        """After a usual chunk with one text part, find the template it fits (see
        :class:`~._inline.InlineDecoder`; here, none)."""

    def _chunk(
        self,
        data: str | bytes,
        out: list[Event],
        *,
        bare: bool = False,
        parsed: Any = msgspec.UNSET,
    ) -> None:
        """Emit the events of one chunk (its JSON text ``data``, or already ``parsed``)."""
        if parsed is msgspec.UNSET:
            try:
                chunk = CHUNK_DECODER.decode(data)
            except msgspec.DecodeError as exc:
                text = data if isinstance(data, str) else data.decode("utf-8", "replace")
                out.append(Unknown(name="chunk", data=text))
                raise self.protocol_error(f"malformed JSON in chunk: {exc}") from None
        else:
            chunk = parsed
        if type(chunk) is not dict:
            if not isinstance(chunk, dict):
                text = data if isinstance(data, str) else data.decode("utf-8", "replace")
                out.append(Unknown(name="chunk", data=text))
                raise self.protocol_error(
                    f"chunk is not a JSON object (got {type(chunk).__name__})"
                )
        elif self._started and not bare and self._fast_paths:
            if self.keep_raw:
                self.raw_event(out, None, chunk)
            if self._usual_chunk(chunk, out):
                if self._template_tries and not self.keep_raw:
                    self._learn(data, chunk)
                return
            self._chunk_fields(chunk, out, bare)
            return
        if self.keep_raw:
            self.raw_event(out, None, chunk)
        self._chunk_fields(chunk, out, bare)

    def _usual_chunk(self, chunk: dict[str, Any], out: list[Event]) -> bool:
        """The usual chunk after the first, in one pass: ``candidates`` holding one
        candidate ``{"content": {"parts": [...], "role": "model"}, "index": n}``, then
        ``usageMetadata``, and the same ``modelVersion`` and ``responseId`` strings as
        the chunk before. Returns False, having done nothing, for any other chunk; the
        events are those :meth:`_chunk_fields` emits for it, step for step.
        """
        if tuple(chunk) != USUAL_KEYS:
            return False
        cands = chunk["candidates"]
        meta = chunk["usageMetadata"]
        model = chunk["modelVersion"]
        rid = chunk["responseId"]
        previous = self._previous
        residual = previous.residual
        if not (
            type(cands) is list
            and len(cands) == 1
            and type(meta) is dict
            and type(model) is str
            and type(rid) is str
            and residual is not None
            and len(residual) == 2
            and residual.get("modelVersion") == model
            and residual.get("responseId") == rid
        ):
            return False
        cand = cands[0]
        if type(cand) is not dict or len(cand) != 2:
            return False
        number = cand.get("index")
        content = cand.get("content")
        if not (
            type(number) is int
            and type(content) is dict
            and len(content) == 2
            and next(iter(cand)) == "content"
            and next(iter(content)) == "parts"
            and content.get("role") == "model"
        ):
            return False
        parts = content["parts"]
        if type(parts) is not list:
            return False
        # From here on, the steps of _chunk_fields and _candidate for this chunk.
        state = self._candidates.get(number)
        if state is None:
            state = self._state(number)
        for part in parts:
            # _part's own first test (a text fragment continuing the open text run).
            index = state.open
            if type(part) is dict and len(part) == 1 and index is not None:
                text = part.get("text")
                if type(text) is str and state.open_kind == "text":
                    out.append(TextDelta(index=index, delta=text))
                    continue
            self._part(part, number, state, out)
        self._usual_end(number, meta, residual, out)
        return True

    def _usual_end(
        self, number: int, meta: dict[str, Any], residual: dict[str, Any], out: list[Event]
    ) -> None:
        """The end of :meth:`_usual_chunk`: the chunk's UsageUpdate."""
        previous = self._previous
        cached = self._index_residuals.get(number)
        if cached is None:
            cached = self._index_residuals[number] = {"index": number}
        candidates = previous.candidates
        if (
            candidates is None
            or len(candidates) != 1
            or not (cached is candidates[0] or cached == candidates[0])
        ):
            candidates = previous.candidates = [cached]
        extra = previous.extra
        if (
            extra is None
            or residual is not previous.extra_residual
            or candidates is not previous.extra_candidates
        ):
            extra = previous.extra = {"chunk": residual, "candidates": candidates}
            previous.extra_residual = residual
            previous.extra_candidates = candidates
        usage = previous.usage
        if usage is None or not same_meta(meta, previous.meta):
            usage = self._new_usage(meta)
        out.append(UsageUpdate(usage=usage, extra=extra))

    def _new_usage(self, meta: dict[str, Any]) -> Usage:
        """Convert a ``usageMetadata`` that differs from the last one, and merge it."""
        usage, mask = convert_usage(meta)
        return self._merge_usage(meta, usage, mask)

    def _merge_usage(self, meta: dict[str, Any], usage: Usage, mask: int) -> Usage:
        """Merge a converted ``usageMetadata`` (see :meth:`_new_usage`)."""
        if mask:  # an empty usage never changes the merged one
            if self._usage_last is not None and self._usage_mask & ~mask:
                # The newer one omits a count the last one had: merge for real.
                self._usage_base = self._usage_base.merged(self._usage_last)
            self._usage_last = usage
            self._usage_mask = mask
        previous = self._previous
        previous.meta = meta
        previous.usage = usage
        return usage

    def _chunk_fields(self, chunk: dict[str, Any], out: list[Event], bare: bool) -> None:
        """Emit the events of one chunk object (the general path)."""
        if not self._started:
            self._started = True
            rid = chunk.get("responseId")
            model = chunk.get("modelVersion")
            out.append(
                StreamStart(
                    dialect=DIALECT,
                    id=rid if isinstance(rid, str) else None,
                    model=model if isinstance(model, str) else None,
                )
            )
        residual: dict[str, Any] = {}
        candidates: list[dict[str, Any]] | None = None
        usage_meta: dict[str, Any] | None = None
        for key, value in chunk.items():
            if key == "candidates" and isinstance(value, list):
                if len(value) == 1:  # the usual case: no comprehension frame
                    candidates = [self._candidate(value[0], 0, out)]
                else:
                    candidates = [self._candidate(c, pos, out) for pos, c in enumerate(value)]
            elif key == "usageMetadata" and isinstance(value, dict):
                usage_meta = value
            elif key == "promptFeedback" and isinstance(value, dict):
                out.append(Metadata(name="prompt_feedback", value=value))
                reason = value.get("blockReason")
                if isinstance(reason, str):
                    message = value.get("blockReasonMessage")
                    self._blocked = (reason, message if isinstance(message, str) else None)
            elif key == "error" and isinstance(value, dict):
                self._error_object(value, out)
            else:
                residual[key] = value
        # Gemini repeats the same chunk fields and usage on every chunk: equal values
        # reuse the previous objects (no new dicts, no second usage conversion).
        previous = self._previous
        if residual == previous.residual:
            residual = previous.residual
        else:
            previous.residual = residual
        if candidates is not None:
            if candidates == previous.candidates:
                candidates = previous.candidates
            else:
                previous.candidates = candidates
        keys = tuple(chunk)
        order = _ORDER_CACHE.get(keys, _MISSING)
        if order is _MISSING:
            order = order_if_needed(chunk, CHUNK_RANK)
            if len(_ORDER_CACHE) < _ORDER_CACHE_SIZE:
                _ORDER_CACHE[keys] = order
        if (
            order is None
            and not bare
            and residual is previous.extra_residual
            and candidates is previous.extra_candidates
            and previous.extra is not None
        ):
            extra = previous.extra
        else:
            extra = {"chunk": residual}
            if candidates is not None:
                extra["candidates"] = candidates
            if order is not None:
                extra["order"] = order
            if bare:
                extra["bare"] = True
            # Reused only by a chunk in the usual order and not bare: an extra that
            # records an order (or "bare") belongs to its own chunk alone.
            previous.extra = extra if order is None and not bare else None
            previous.extra_residual = residual
            previous.extra_candidates = candidates
        if usage_meta is None:
            usage = _EMPTY_USAGE
        elif previous.usage is not None and same_meta(usage_meta, previous.meta):
            usage = previous.usage  # same counts: merging it again changes nothing
        else:
            usage = self._new_usage(usage_meta)
        out.append(UsageUpdate(usage=usage, extra=extra))

    def _error_object(self, value: dict[str, Any], out: list[Event]) -> None:
        try:
            err = msgspec.convert(value, GoogleError)
        except msgspec.ValidationError:
            err = GoogleError(message=ENCODE.encode(value).decode())
        info = error_info(err.code, err.message, err.status, value)
        if self._error is None:
            self._error = info
        self._gave_error = True
        out.append(ErrorEvent(error=info))

    def _state(self, candidate: int) -> Candidate:
        state = self._candidates.get(candidate)
        if state is None:
            state = self._candidates[candidate] = Candidate()
        return state

    def _candidate(self, cand: Any, pos: int, out: list[Event]) -> dict[str, Any]:
        """Emit one candidate's events; return the fields no event carries."""
        if not isinstance(cand, dict):
            self.warn(out, "invalid_candidate", "a candidate is not a JSON object")
            return {"_literal": cand}
        number = cand.get("index")
        c = number if type(number) is int else pos
        state = self._candidates.get(c)
        if state is None:
            state = self._state(c)
        content = cand.get("content")
        if (
            len(cand) == 2
            and type(number) is int
            and type(content) is dict
            and len(content) == 2
            and next(iter(cand)) == "content"
            and next(iter(content)) == "parts"
            and content.get("role") == "model"
            and type(content.get("parts")) is list
        ):
            # The common chunk: {"content": {"parts": [...], "role": "model"}, "index": n}.
            for part in content["parts"]:
                self._part(part, c, state, out)
            cached = self._index_residuals.get(number)
            if cached is None:
                cached = self._index_residuals[number] = {"index": number}
            return cached
        residual: dict[str, Any] = {}
        grounding = url_context = safety = citations = None
        finish: dict[str, Any] = {}
        for key, value in cand.items():
            if key == "content":
                if isinstance(value, dict):
                    parts = value.get("parts")
                    if isinstance(parts, list):
                        for part in parts:
                            self._part(part, c, state, out)
                    if not (
                        isinstance(parts, list)
                        and len(value) == 2
                        and list(value) == ["parts", "role"]
                        and value["role"] == "model"
                    ):
                        residual["_content"] = {
                            k: (None if k == "parts" and isinstance(v, list) else v)
                            for k, v in value.items()
                        }
                else:
                    residual["_content"] = [value]
            elif key in ("finishReason", "finishMessage") and isinstance(value, str):
                finish[key] = value
            elif key == "groundingMetadata":
                grounding = value
            elif key == "urlContextMetadata":
                url_context = value
            elif key == "safetyRatings":
                safety = value
            elif key == "citationMetadata" and _plain_citations(value):
                citations = value["citationSources"]
            else:
                residual[key] = value
        if "content" not in cand:
            residual["_content"] = None
        order = order_if_needed(cand, CANDIDATE_RANK)
        if order is not None:
            residual["_order"] = order
        if citations is not None:
            target = state.last_text
            for source in citations:
                out.append(
                    Citation(
                        citation=source,
                        index=target,
                        extra={"candidate": c} if target is None and c != 0 else None,
                    )
                )
        if grounding is not None:
            out.append(Metadata(name="grounding", value=grounding, candidate=c, merge=True))
        if url_context is not None:
            out.append(Metadata(name="url_context", value=url_context, candidate=c))
        if safety is not None:
            out.append(Metadata(name="safety_ratings", value=safety, candidate=c))
        if finish:
            raw = finish.get("finishReason")
            if raw is not None:
                # A streamed call still expecting fragments was cut by the stop: its
                # block stays open (incomplete arguments), like a truncated stream's.
                self._close_open(state, out)
                if state.finish is None:
                    self._finished_order.append(c)
                state.finish = raw
                state.finish_message = finish.get("finishMessage")
            out.append(Metadata(name="finish", value=finish, candidate=c))
            if raw is not None and raw not in FINISH_REASONS and self.strict:
                raise self.protocol_error(f"unknown finishReason {raw!r}")
        return residual

    # -- parts -----------------------------------------------------------------------------

    def _new_block(
        self,
        state: Candidate,
        c: int,
        kind: BlockKind,
        out: list[Event],
        **fields: Any,
    ) -> int:
        self._close_open(state, out)
        index = self._next_index
        self._next_index += 1
        out.append(BlockStart(index=index, kind=kind, candidate=c, **fields))
        state.last = index
        state.last_signed = False
        state.last_textual = kind in ("text", "reasoning")
        state.last_reasoning = kind == "reasoning"
        if kind == "text":
            state.last_text = index
        return index

    def _close_open(self, state: Candidate, out: list[Event]) -> None:
        if state.open is not None:
            out.append(BlockEnd(index=state.open))
            state.open = None
            state.open_kind = None

    def _sign(self, state: Candidate, index: int, signature: str, out: list[Event]) -> None:
        out.append(_signature(index, signature, None))
        if state.last == index:
            state.last_signed = True

    def _part(self, part: Any, c: int, state: Candidate, out: list[Event]) -> None:
        if type(part) is dict and state.open is not None:
            # Fast path: a text or thought fragment continuing the open run.
            text = part.get("text")
            if type(text) is str:
                size = len(part)
                if size == 1 and state.open_kind == "text":
                    out.append(TextDelta(index=state.open, delta=text))
                    return
                if size == 2 and part.get("thought") is True and state.open_kind == "reasoning":
                    out.append(ReasoningDelta(index=state.open, delta=text, summary=True))
                    return
        if not isinstance(part, dict):
            self.warn(out, "invalid_part", "a part is not a JSON object")
            index = self._new_block(state, c, "other", out, value=part)
            out.append(BlockEnd(index=index))
            return
        signature = part.get("thoughtSignature")
        if not isinstance(signature, str):
            signature = None
        data_keys = [k for k in part if k in _DATA_KEYS]
        kind_key = data_keys[0] if len(data_keys) == 1 else None
        value = part.get(kind_key) if kind_key is not None else None
        if state.call is not None and kind_key != "functionCall":
            # A streamed call interrupted by another part: it ends here.
            out.append(BlockEnd(index=state.call.index))
            state.call = None
        if kind_key == "text" and isinstance(value, str):
            self._text_part(part, value, signature, c, state, out)
        elif kind_key == "functionCall" and isinstance(value, dict):
            self._function_call(part, value, signature, c, state, out)
        elif kind_key == "executableCode" and isinstance(value, dict):
            code = value.get("code")
            rest = {k: v for k, v in value.items() if k != "code" or not isinstance(code, str)}
            extra = _part_extra(part, kind_key, signature)
            extra["executableCode"] = rest
            inner = order_if_needed(value, EXECUTABLE_CODE_RANK)
            if inner is not None:
                extra["executableCode_order"] = inner
            index = self._new_block(state, c, "code", out, extra=extra)
            if isinstance(code, str):
                out.append(TextDelta(index=index, delta=code))
            self._end_whole(state, index, signature, out)
        elif kind_key == "inlineData" and isinstance(value, dict):
            self._inline_data(part, value, signature, c, state, out)
        elif kind_key == "toolCall" and isinstance(value, dict):
            # A built-in tool's call: its args are the block's value (like a function
            # call's), id and toolType its id and name; other fields stay in extra.
            ident = value.get("id")
            tool = value.get("toolType")
            ident = ident if isinstance(ident, str) else None
            tool = tool if isinstance(tool, str) else None
            extra = _part_extra(part, kind_key, signature)
            rest = {
                k: v
                for k, v in value.items()
                if not (k == "args" or (k == "id" and ident) or (k == "toolType" and tool))
            }
            if rest:
                extra["toolCall"] = rest
            inner = order_if_needed(value, TOOL_CALL_RANK)
            if inner is not None:
                extra["toolCall_order"] = inner
            if "args" not in value:
                extra["no_args"] = True
            index = self._new_block(
                state,
                c,
                "server_tool_call",
                out,
                id=ident,
                name=tool,
                value=value.get("args"),
                extra=extra or None,
            )
            self._end_whole(state, index, signature, out)
        elif kind_key in ("codeExecutionResult", "toolResponse") and isinstance(value, dict):
            kind: BlockKind = (
                "code_result" if kind_key == "codeExecutionResult" else "server_tool_result"
            )
            ident = value.get("id")
            tool = value.get("toolType")
            index = self._new_block(
                state,
                c,
                kind,
                out,
                id=ident if isinstance(ident, str) else None,
                name=tool if isinstance(tool, str) else None,
                value=value,
                extra=_part_extra(part, kind_key, signature) or None,
            )
            self._end_whole(state, index, signature, out)
        else:
            # functionResponse, fileData, unknown kinds, or a known kind of the wrong type.
            known = kind_key in _KNOWN_OTHER
            if self.strict and not known:
                raise self.protocol_error(f"unknown part kind: keys {sorted(part)}")
            body = {k: v for k, v in part.items() if k != "thoughtSignature" or signature is None}
            name = kind_key if kind_key is not None else next(iter(part), None)
            order = order_if_needed(part, PART_RANK)
            index = self._new_block(
                state,
                c,
                "other",
                out,
                name=name,
                value=body,
                extra={"part_order": order} if order is not None else None,
            )
            self._end_whole(state, index, signature, out)

    def _end_whole(
        self, state: Candidate, index: int, signature: str | None, out: list[Event]
    ) -> None:
        if signature is not None:
            self._sign(state, index, signature, out)
        out.append(BlockEnd(index=index))

    def _text_part(
        self,
        part: dict[str, Any],
        text: str,
        signature: str | None,
        c: int,
        state: Candidate,
        out: list[Event],
    ) -> None:
        thought = part.get("thought") is True
        if (
            text == ""
            and signature is not None
            and state.last is not None
            and state.last_textual
            and not state.last_signed
            and (not thought or state.last_reasoning)
            and len(part) <= 3
            and all(k in ("text", "thought", "thoughtSignature") for k in part)
        ):
            # Gemini 3's final empty-text part carrying the signature of the run before.
            extra: dict[str, Any] = {
                "part": {k: v for k, v in part.items() if k != "thoughtSignature"}
            }
            order = order_if_needed(part, PART_RANK)
            if order is not None:
                extra["part_order"] = order
            index = state.last
            out.append(_signature(index, signature, extra))
            state.last_signed = True
            if state.open == index:
                self._close_open(state, out)
            return
        kind: BlockKind = "reasoning" if thought else "text"
        if state.open is None or state.open_kind != kind:
            index = self._new_block(state, c, kind, out)
            state.open = index
            state.open_kind = kind
        else:
            index = state.open
        extra = _part_extra(part, "text", signature, thought=thought)
        if kind == "text":
            out.append(TextDelta(index=index, delta=text, extra=extra or None))
        else:
            out.append(ReasoningDelta(index=index, delta=text, summary=True, extra=extra or None))
        if signature is not None:
            self._sign(state, index, signature, out)
            self._close_open(state, out)

    def _function_call(
        self,
        part: dict[str, Any],
        call: dict[str, Any],
        signature: str | None,
        c: int,
        state: Candidate,
        out: list[Event],
    ) -> None:
        state.has_calls = True
        name = call.get("name")
        ident = call.get("id")
        name = name if isinstance(name, str) else None
        ident = ident if isinstance(ident, str) else None
        if state.call is None and "willContinue" not in call and "partialArgs" not in call:
            extra = _part_extra(part, "functionCall", signature)
            rest = {
                k: v
                for k, v in call.items()
                if not (k == "args" or (k == "name" and name) or (k == "id" and ident))
            }
            if rest:
                extra["functionCall"] = rest
            inner = order_if_needed(call, FUNCTION_CALL_RANK)
            if inner is not None:
                extra["functionCall_order"] = inner
            index = self._new_block(
                state, c, "tool_call", out, id=ident, name=name, extra=extra or None
            )
            if "args" in call:
                out.append(ToolInputDelta(index=index, delta=ENCODE.encode(call["args"]).decode()))
            self._end_whole(state, index, signature, out)
            return
        if state.call is None:
            index = self._new_block(
                state, c, "tool_call", out, id=ident, name=name, extra={"streamed": True}
            )
            state.call = StreamedCall(index)
        streamed = state.call
        if not streamed.fold(call):
            self.warn(out, "partial_args", "a partialArgs entry has a path that was not understood")
        ends = call.get("willContinue") is not True
        extra = _part_extra(part, "functionCall", signature)
        extra["functionCall"] = call
        out.append(
            ToolInputDelta(index=streamed.index, delta=streamed.json() if ends else "", extra=extra)
        )
        if signature is not None:
            self._sign(state, streamed.index, signature, out)
        if ends:
            out.append(BlockEnd(index=streamed.index))
            state.call = None

    def _inline_data(
        self,
        part: dict[str, Any],
        blob: dict[str, Any],
        signature: str | None,
        c: int,
        state: Candidate,
        out: list[Event],
    ) -> None:
        mime = blob.get("mimeType")
        data = blob.get("data")
        mime = mime if isinstance(mime, str) else None
        kind: BlockKind = "other"
        if mime is not None and mime.startswith("image/"):
            kind = "image"
        elif mime is not None and mime.startswith("audio/"):
            kind = "audio"
        extra = _part_extra(part, "inlineData", signature)
        rest = {
            k: v
            for k, v in blob.items()
            if not (
                (k == "mimeType" and mime is not None) or (k == "data" and isinstance(data, str))
            )
        }
        if rest:
            extra["inlineData"] = rest
        inner = order_if_needed(blob, INLINE_DATA_RANK)
        if inner is not None:
            extra["inlineData_order"] = inner
        # One block per part, audio included: base64 fragments do not concatenate as
        # text (each may end in padding), so each fragment stays a whole block.
        if kind == "audio":
            # Its format, sample rate and channels, from the media type
            # (``audio/L16;codec=pcm;rate=24000``: 24 kHz PCM, mono).
            index = self._new_block(state, c, kind, out, media=media_of_type(mime))
        else:
            index = self._new_block(
                state, c, kind, out, name="inlineData" if kind == "other" else None
            )
        out.append(
            DataDelta(
                index=index,
                delta=data if isinstance(data, str) else "",
                mime_type=mime,
                extra=extra or None,
            )
        )
        self._end_whole(state, index, signature, out)

    def _merged_usage(self) -> Usage:
        """Every usage of the stream so far, merged (see ``_usage_base``)."""
        if self._usage_last is None:
            return self._usage_base
        return self._usage_base.merged(self._usage_last)


def _plain_citations(value: Any) -> bool:
    """``citationMetadata`` that is exactly ``{"citationSources": [objects...]}``."""
    if not isinstance(value, dict) or list(value) != ["citationSources"]:
        return False
    sources = value["citationSources"]
    return (
        isinstance(sources, list)
        and bool(sources)
        and all(isinstance(source, dict) for source in sources)
    )


def _signature(index: int, value: str, extra: dict[str, Any] | None) -> SignatureDelta:
    """A SignatureDelta; another dialect's state in the base64-safe carrier (see
    :mod:`polystream.dialects._carrier`) becomes its original bytes with
    ``extra["carrier"]`` = its origin."""
    source, original = unwrap_base64(value, DIALECT)
    if source is None:
        return SignatureDelta(index=index, delta=value, extra=extra)
    return SignatureDelta(index=index, delta=original, extra={**(extra or {}), "carrier": source})


def _part_extra(
    part: dict[str, Any], kind_key: str, signature: str | None, *, thought: bool = False
) -> dict[str, Any]:
    """``extra`` for a part's event: the part fields no event models, and their order."""
    extra: dict[str, Any] = {}
    if len(part) > 1:
        rest = {
            k: v
            for k, v in part.items()
            if k != kind_key
            and not (k == "thoughtSignature" and signature is not None)
            and not (k == "thought" and thought)
        }
        if rest:
            extra["part"] = rest
        order = order_if_needed(part, PART_RANK)
        if order is not None:
            extra["part_order"] = order
    return extra

"""Rebuild the ``GenerateContentResponse`` that the non-streaming ``generateContent``
endpoint would return, from the unified events of a ``streamGenerateContent`` stream.

Merging rules:

* one part per unified block, in block order per candidate: consecutive text parts of
  the same kind were already joined into one block by the decoder, so their text is
  concatenated; a signature stays on the part of its block (``thoughtSignature``);
* function calls whole (``args`` parsed once; a streamed call's ``partialArgs``
  assembled), code, code results, images, built-in tool calls and responses, and
  unknown parts as they came; consecutive audio parts of one MIME type joined into one
  (their bytes, not their base64 text);
* ``groundingMetadata`` accumulated (lists extended: chunks carry only new grounding
  chunks), ``urlContextMetadata`` / ``safetyRatings`` / ``finishReason`` /
  ``finishMessage`` the last sent, citations gathered into ``citationMetadata``;
* ``usageMetadata``, ``modelVersion``, ``responseId`` (and other chunk fields) from
  the last chunk that had them; ``promptFeedback`` and an ``error`` object as sent.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from polystream.dialects._carrier import origin, wrap_base64
from polystream.events import (
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    Event,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    UsageUpdate,
)
from polystream.wire.jsondepth import decode_bounded

from .encode import DIALECT, is_base64
from .wire import (
    CANDIDATE_RANK,
    CHUNK_RANK,
    EXECUTABLE_CODE_RANK,
    FUNCTION_CALL_RANK,
    PART_RANK,
    ordered,
    tool_call_object,
)

__all__ = ["rebuild"]

_DECODE: Final = msgspec.json.Decoder()
_FIELDS: Final = {
    "url_context": "urlContextMetadata",
    "safety_ratings": "safetyRatings",
}
_WHOLE: Final = {
    "code_result": "codeExecutionResult",
    "server_tool_result": "toolResponse",
}


class _Block:
    __slots__ = ("data", "extra", "mime", "parts", "signature", "start")

    def __init__(self, start: BlockStart) -> None:
        self.start = start
        self.parts: list[str] = []
        self.data: list[str] = []
        self.mime: str | None = None
        self.signature: list[str] = []
        self.extra: dict[str, Any] | None = None  # the first delta's part fields


def _merge_grounding(old: Any, new: Any) -> Any:
    """``new`` merged into ``old``: lists extended, other values replaced. A dict
    returned is the rebuild's own, its lists too (extended in place: copied at each
    chunk, many grounding chunks were quadratic); ``new`` is an event's, never changed."""
    if not isinstance(new, dict):
        return new
    if not isinstance(old, dict):
        return {
            key: list(value) if isinstance(value, list) else value for key, value in new.items()
        }
    for key, value in new.items():
        previous = old.get(key)
        if isinstance(value, list) and isinstance(previous, list):
            previous.extend(value)
        else:
            old[key] = list(value) if isinstance(value, list) else value
    return old


def _part(block: _Block) -> dict[str, Any]:
    start = block.start
    joined = "".join(block.parts)
    fields: dict[str, Any]
    kind = start.kind
    if kind in ("text", "refusal", "reasoning"):
        fields = {"text": joined}
        if kind == "reasoning":
            fields["thought"] = True
    elif kind == "tool_call":
        call: dict[str, Any] = {}
        if start.name is not None:
            call["name"] = start.name
        if joined.strip():
            try:
                call["args"] = decode_bounded(joined, _DECODE, what="tool arguments")
            except msgspec.DecodeError:
                call["args"] = joined
        if start.id is not None:
            call["id"] = start.id
        rest = start.extra.get("functionCall") if start.extra else None
        if isinstance(rest, dict):
            call.update(rest)
        fields = {"functionCall": ordered(call, FUNCTION_CALL_RANK)}
    elif kind == "code":
        code = dict(start.extra.get("executableCode", {})) if start.extra else {}
        code["code"] = joined
        fields = {"executableCode": ordered(code, EXECUTABLE_CODE_RANK)}
    elif kind == "server_tool_call":
        fields = {"toolCall": tool_call_object(start)}
    elif kind in _WHOLE:
        fields = {_WHOLE[kind]: start.value}
    elif block.data or kind in ("image", "audio"):
        blob: dict[str, Any] = {}
        if block.mime is not None:
            blob["mimeType"] = block.mime
        blob["data"] = "".join(block.data)
        fields = {"inlineData": blob}
    elif isinstance(start.value, dict):
        fields = dict(start.value)
    else:
        fields = {"text": joined}
    rest = block.extra.get("part") if block.extra else None
    if isinstance(rest, dict):
        for key, value in rest.items():
            fields.setdefault(key, value)
    if block.signature:
        fields["thoughtSignature"] = "".join(block.signature)
    return ordered(fields, PART_RANK)


def _merge_audio(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive audio parts of one MIME type into one part, as the
    non-streaming endpoint returns a single audio part. The bytes are joined, not
    the base64 text (each streamed fragment is padded on its own), and once per run:
    decoded and encoded again at each part, the joined audio so far made a long
    stream's rebuild quadratic (2,000 parts of 4 KiB: 40 s)."""
    out: list[dict[str, Any]] = []
    run: list[bytes] = []  # the bytes of the run that out[-1] begins (empty: no run)

    def end_run() -> None:
        if len(run) > 1:
            first = out[-1]["inlineData"]
            joined = base64.b64encode(b"".join(run)).decode()
            out[-1] = {"inlineData": {**first, "data": joined}}
        run.clear()

    for part in parts:
        blob = part.get("inlineData")
        previous = out[-1].get("inlineData") if out else None
        if (
            len(part) == 1
            and isinstance(blob, dict)
            and isinstance(previous, dict)
            and len(out[-1]) == 1
            and str(blob.get("mimeType", "")).startswith("audio/")
            and blob.get("mimeType") == previous.get("mimeType")
            and isinstance(blob.get("data"), str)
            and isinstance(previous.get("data"), str)
        ):
            try:
                if not run:
                    run.append(base64.b64decode(previous["data"]))
                data = base64.b64decode(blob["data"])
            except ValueError:
                end_run()
                out.append(part)
                continue
            run.append(data)
        else:
            end_run()
            out.append(part)
    end_run()
    return out


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The merged ``GenerateContentResponse`` (see the module docstring).

    Args:
        events: The unified events of one stream (a ``gemini_generate`` stream gives
            the exact native fields; other dialects' streams give their content).

    Returns:
        The response as JSON-compatible builtins, keys in Google's order.
    """
    blocks: dict[int, _Block] = {}
    order: dict[int, list[int]] = {}
    cand_fields: dict[int, dict[str, Any]] = {}
    citations: dict[int, list[Any]] = {}
    top: dict[str, Any] = {}
    stream: str | None = None  # the stream's dialect: the origin of unmarked signatures
    for event in events:
        kind = type(event)
        if kind is TextDelta or kind is ReasoningDelta or kind is ToolInputDelta:
            assert isinstance(event, TextDelta | ReasoningDelta | ToolInputDelta)
            block = blocks.get(event.index)
            if block is not None:
                block.parts.append(event.delta)
                if block.extra is None and event.extra:
                    block.extra = event.extra
        elif kind is BlockStart:
            assert isinstance(event, BlockStart)
            blocks[event.index] = _Block(event)
            order.setdefault(event.candidate, []).append(event.index)
            cand_fields.setdefault(event.candidate, {})
        elif kind is DataDelta:
            assert isinstance(event, DataDelta)
            block = blocks.get(event.index)
            if block is not None:
                if event.replace:
                    block.data = [event.delta]
                else:
                    block.data.append(event.delta)
                block.mime = event.mime_type or block.mime
        elif kind is SignatureDelta:
            assert isinstance(event, SignatureDelta)
            block = blocks.get(event.index)
            source = origin(event.extra, stream)
            if block is not None and (source is None or source == DIALECT):
                block.signature.append(event.delta)
            elif block is not None and is_base64(event.delta):
                # Another origin's state, as the encoder writes it (the carrier).
                block.signature.append(wrap_base64(source or "", event.delta))
        elif kind is Citation:
            assert isinstance(event, Citation)
            number = 0
            if event.index is not None and event.index in blocks:
                number = blocks[event.index].start.candidate
            elif event.extra and type(event.extra.get("candidate")) is int:
                number = event.extra["candidate"]
            citations.setdefault(number, []).append(event.citation)
            cand_fields.setdefault(number, {})
        elif kind is Metadata:
            assert isinstance(event, Metadata)
            fields = cand_fields.setdefault(event.candidate, {})
            if event.name == "grounding":
                fields["groundingMetadata"] = _merge_grounding(
                    fields.get("groundingMetadata"), event.value
                )
            elif event.name == "finish" and isinstance(event.value, dict):
                fields.update(event.value)
            elif event.name in _FIELDS:
                fields[_FIELDS[event.name]] = event.value
            elif event.name == "prompt_feedback":
                top["promptFeedback"] = event.value
        elif kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            if event.usage.raw is not None and isinstance(event.usage.raw, dict):
                top["usageMetadata"] = event.usage.raw
            extra = event.extra or {}
            chunk = extra.get("chunk")
            if isinstance(chunk, dict):
                top.update(chunk)
            residuals = extra.get("candidates")
            if isinstance(residuals, list):
                for pos, residual in enumerate(residuals):
                    if not isinstance(residual, dict) or "_literal" in residual:
                        continue
                    native = residual.get("index")
                    number = native if type(native) is int else pos
                    fields = cand_fields.setdefault(number, {})
                    fields.update({k: v for k, v in residual.items() if not k.startswith("_")})
        elif kind is StreamStart:
            assert isinstance(event, StreamStart)
            stream = event.dialect
            if event.model is not None:
                top.setdefault("modelVersion", event.model)
            if event.id is not None:
                top.setdefault("responseId", event.id)
        elif kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            if event.error.kind != "protocol":
                top["error"] = (
                    event.error.raw
                    if event.error.raw is not None
                    else {"message": event.error.message}
                )
    if cand_fields:
        candidates = []
        for number in sorted(cand_fields):
            parts = _merge_audio([_part(blocks[i]) for i in order.get(number, [])])
            body: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
            body.update(cand_fields[number])
            if number in citations:
                body["citationMetadata"] = {"citationSources": citations[number]}
            candidates.append(ordered(body, CANDIDATE_RANK))
        top["candidates"] = candidates
    return ordered(top, CHUNK_RANK)

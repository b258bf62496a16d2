"""Scenario reply -> unified events, for one request.

:func:`reply_events` renders a :class:`~polystream.scenario.Reply` (or the default
reply) as the unified events of one stream in the requested dialect: ``StreamStart``,
then one block per output unit (reasoning, server tool call and result, text, tool
calls), the usage and exactly one ``Finish``. Deltas are cut as the scenario's
:class:`~polystream.scenario.Chunking` says. The dialect encoders turn these into wire
bytes; nothing here knows a wire format.

:func:`retarget` prepares events decoded from a recorded capture (any dialect) for
another dialect: it drops what belongs to the source dialect only (``extra``,
``cursor``, ``raw``, native finish values, unknown native events).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from polystream.dialects import DIALECTS
from polystream.dialects._spec import ReplySpec
from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Raw,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)
from polystream.scenario._format import AudioSpec, Chunking, ReasoningSpec, Reply, UsageSpec
from polystream.scenario._media import PCM_MIME
from polystream.scenario._media_blocks import (
    as_audio,
    as_image,
    audio_block,
    audio_tokens,
    image_block,
)
from polystream.scenario._request import RequestSummary

__all__ = [
    "ID_PREFIXES",
    "SCENARIO_SOURCE",
    "default_reply",
    "reply_events",
    "reply_id",
    "retarget",
    "split_text",
    "strip_usage",
]

ID_PREFIXES: Final[dict[str, str]] = {name: spec.reply.id_prefix for name, spec in DIALECTS.items()}
"""The shape of each dialect's reply id, so that SDKs and logs see familiar ids (from
each dialect's :class:`~polystream.dialects._spec.ReplySpec`)."""
_NO_REPLY_SPEC: Final = ReplySpec("", "call_", item_ids=False, signature_state=True)
"""The reply shape of a dialect the registry does not know."""


def _reply_spec(dialect: str) -> ReplySpec:
    spec = DIALECTS.get(dialect)
    return spec.reply if spec is not None else _NO_REPLY_SPEC


SCENARIO_SOURCE: Final = "scenario"
"""``StreamStart.dialect`` of synthetic streams: no wire dialect produced them."""
_WORDS: Final = re.compile(r"\s*\S+|\s+$")
_ARGUMENT_DELTA: Final = 16  # characters per tool-argument delta when no size is set
_json: Final = msgspec.json.Encoder()


def reply_id(dialect: str, seed: str, serial: int) -> str:
    """A deterministic reply id for the ``serial``-th answer (same inputs, same id)."""
    digest = hashlib.sha256(f"{seed}:{serial}".encode()).hexdigest()[:24]
    return ID_PREFIXES.get(dialect, "") + digest


def default_reply(summary: RequestSummary) -> Reply:
    """The reply given when no scenario matches: deterministic, and its text contains
    the last user message verbatim. A request for audio out (Gemini
    ``responseModalities: ["AUDIO"]``) gets the default audio instead of text."""
    if summary.media is not None and summary.media.audio_format is not None:
        return Reply(audio=True)
    # (A session may name an agent but no model.)
    speaker = summary.model or "the agent"
    if summary.user_text:
        text = f"Emulated reply from {speaker}. You said: {summary.user_text}"
    else:
        text = f"Emulated reply from {speaker}."
    return Reply(text=text)


def split_text(text: str, size: int | None) -> list[str]:
    """Cut text into deltas: ``size`` characters each, or word by word (each delta is a
    word with the whitespace before it; trailing whitespace joins the last delta)."""
    if not text:
        return []
    if size is not None:
        return [text[i : i + size] for i in range(0, len(text), size)]
    return _WORDS.findall(text)


def _count(text: str) -> int:
    """A deterministic token estimate: about one token per 4 characters, at least 1."""
    return max(1, (len(text) + 3) // 4)


def reply_events(
    reply: Reply | None,
    summary: RequestSummary,
    *,
    response_id: str,
    created: int = 0,
    chunking: Chunking | None = None,
) -> list[Event]:
    """Render a reply as the unified events of one stream in ``summary.dialect``.

    Args:
        reply: The scenario's reply (None: :func:`default_reply`).
        summary: The request being answered.
        response_id: The reply's id (see :func:`reply_id`).
        created: Creation time in Unix seconds (injected: this layer has no clock).
        chunking: How to cut deltas.

    Returns:
        The events, from ``StreamStart`` to the one ``Finish``.
    """
    if reply is None:
        reply = default_reply(summary)
    size = chunking.size if chunking is not None else None
    # The events come from a scenario, not from a decoder of the target dialect: the
    # StreamStart says so ("scenario"), so that encoders map every unified field to
    # their wire form instead of expecting the native extras a same-dialect decoder
    # would have attached.
    events: list[Event] = [
        StreamStart(dialect=SCENARIO_SOURCE, id=response_id, model=summary.model, created=created)
    ]
    index = 0
    generated: list[str] = []
    reasoning = reply.reasoning
    if isinstance(reasoning, str):
        reasoning = ReasoningSpec(text=reasoning)
    # Item ids exist in Responses only, and Chat has no place for opaque state: in a
    # dialect without them they would be written as polystream carriers, which no
    # provider sends.
    shape = _reply_spec(summary.dialect)
    item_ids = shape.item_ids
    if reasoning is not None:
        events.append(
            BlockStart(index=index, kind="reasoning", id=f"rs_{response_id}" if item_ids else None)
        )
        for piece in split_text(reasoning.text, size):
            events.append(ReasoningDelta(index=index, delta=piece, summary=reasoning.summary))
        if reasoning.signature is not None and shape.signature_state:
            # A scenario's opaque state is the answering provider's own: its origin is
            # the dialect being answered, so every encoder writes it natively.
            events.append(
                SignatureDelta(
                    index=index,
                    delta=reasoning.signature,
                    extra={"carrier": summary.dialect},
                )
            )
        events.append(BlockEnd(index=index))
        generated.append(reasoning.text)
        index += 1
    for number, tool in enumerate(reply.server_tools):
        call_id = tool.id or f"srvtoolu_{response_id[-12:]}{number}"
        arguments = _json.encode(tool.input).decode()
        events.append(BlockStart(index=index, kind="server_tool_call", id=call_id, name=tool.name))
        events.extend(
            ToolInputDelta(index=index, delta=piece)
            for piece in _cut(arguments, size or _ARGUMENT_DELTA)
        )
        events.append(BlockEnd(index=index))
        index += 1
        if tool.result is not None:
            events.append(
                BlockStart(
                    index=index,
                    kind="server_tool_result",
                    id=call_id,
                    name=tool.name,
                    value=tool.result,
                )
            )
            events.append(BlockEnd(index=index))
            index += 1
    texts: list[str]
    if isinstance(reply.text, list):
        texts = [piece for piece in reply.text if piece]
    else:
        texts = split_text(reply.text or "", size)
    if texts or reply.citations:
        text_id = f"msg_{response_id[-24:]}" if item_ids else None
        events.append(BlockStart(index=index, kind="text", id=text_id))
        events.extend(TextDelta(index=index, delta=piece) for piece in texts)
        events.extend(Citation(index=index, citation=c) for c in reply.citations)
        events.append(BlockEnd(index=index))
        generated.extend(texts)
        index += 1
    call_prefix = shape.call_id_prefix
    for number, call in enumerate(reply.tool_calls):
        call_id = call.id or f"{call_prefix}{_digest(response_id, number)}"
        arguments = (
            call.arguments
            if isinstance(call.arguments, str)
            else _json.encode(call.arguments).decode()
        )
        events.append(BlockStart(index=index, kind="tool_call", id=call_id, name=call.name))
        events.extend(
            ToolInputDelta(index=index, delta=piece)
            for piece in _cut(arguments, size or _ARGUMENT_DELTA)
        )
        events.append(BlockEnd(index=index))
        generated.append(arguments)
        index += 1
    audio = as_audio(reply.audio)
    media = summary.media
    if reply.audio is None and media is not None and media.audio_format is not None:
        audio = AudioSpec()  # (a request for audio out gets audio unless the reply says no)
    spoken = 0
    if audio is not None:
        blocks, seconds = audio_block(
            index,
            audio,
            speak=summary.user_text,
            audio_format=(media.audio_format if media is not None else None) or "pcm",
            mime_type=(media.mime_type if media is not None else None) or PCM_MIME,
        )
        events.extend(blocks)
        spoken = audio_tokens(seconds)
        index += 1
    image = as_image(reply.image)
    if image is not None:
        events.extend(image_block(index, image, prompt=summary.user_text))
        index += 1
    usage = _usage(reply.usage, summary, generated, reasoning, audio=spoken)
    finish = reply.finish
    unified = (finish.reason if finish is not None else None) or (
        "tool_calls" if reply.tool_calls else "stop"
    )
    events.append(
        Finish(
            status=finish.status if finish is not None else "completed",
            reason=FinishReason(unified=unified, raw=finish.raw if finish is not None else None),
            usage=usage,
        )
    )
    return events


def _digest(seed: str, number: int) -> str:
    return hashlib.sha256(f"{seed}/{number}".encode()).hexdigest()[:24]


def _cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


def _usage(
    spec: UsageSpec | None,
    summary: RequestSummary,
    generated: list[str],
    reasoning: ReasoningSpec | None,
    *,
    audio: int = 0,
) -> Usage:
    if spec is not None:
        total = spec.total_tokens
        if total is None and spec.input_tokens is not None and spec.output_tokens is not None:
            total = spec.input_tokens + spec.output_tokens
        return Usage(
            input_tokens=spec.input_tokens,
            output_tokens=spec.output_tokens,
            reasoning_tokens=spec.reasoning_tokens,
            cache_read_tokens=spec.cache_read_tokens,
            cache_write_tokens=spec.cache_write_tokens,
            total_tokens=total,
        )
    prompt = _count(summary.user_text) + 8
    output = sum(_count(text) for text in generated if text) + audio or 1
    reasoning_tokens = _count(reasoning.text) if reasoning is not None and reasoning.text else 0
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        reasoning_tokens=reasoning_tokens,
        audio_output_tokens=audio or None,
        total_tokens=prompt + output,
    )


def strip_usage(events: Iterable[Event]) -> list[Event]:
    """Drop usage from a stream (Chat Completions without ``include_usage``)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, UsageUpdate):
            continue
        if isinstance(event, Finish) and event.usage is not None:
            event = msgspec.structs.replace(event, usage=None)
        out.append(event)
    return out


_SOURCE_ONLY: Final = (Unknown, Raw, Warning)


def retarget(
    events: Iterable[Event], *, dialect: str, response_id: str, model: str | None = None
) -> list[Event]:
    """Prepare a recorded stream's events for encoding in ``dialect``.

    Same dialect: events are kept as decoded (``extra`` included, so the encoder
    reproduces the capture), with the new id. Another dialect: ``extra``, ``cursor``,
    ``raw``, the native finish value and the source-only events (unknown native
    events, raw events, decoder warnings) are dropped, since they describe the source
    dialect's wire format.
    """
    out: list[Event] = []
    source: str | None = None
    for event in events:
        if isinstance(event, StreamStart):
            source = event.dialect
            # The source dialect stays on the StreamStart: it tells the encoder whether
            # the extras are its own (same dialect) or foreign.
            out.append(
                msgspec.structs.replace(
                    event,
                    id=response_id,
                    model=model or event.model,
                    **_bare(same=source == dialect, event=event),
                )
            )
            continue
        same = source == dialect
        if not same and isinstance(event, _SOURCE_ONLY):
            continue
        if isinstance(event, ErrorEvent) and event.error.kind == "protocol":
            continue  # a decoding problem of the capture, not part of the reply
        changes: dict[str, Any] = _bare(same=same, event=event)
        if not same and isinstance(event, Finish):
            changes["reason"] = FinishReason(unified=event.reason.unified)
            if event.usage is not None:
                changes["usage"] = msgspec.structs.replace(event.usage, raw=None)
            if event.error is not None:
                changes["error"] = _bare_error(event.error)
        elif not same and isinstance(event, UsageUpdate):
            changes["usage"] = msgspec.structs.replace(event.usage, raw=None)
        elif not same and isinstance(event, ErrorEvent):
            changes["error"] = _bare_error(event.error)
        elif not same and isinstance(event, KeepAlive):
            continue
        out.append(msgspec.structs.replace(event, **changes) if changes else event)
    return out


def _bare(*, same: bool, event: Event) -> dict[str, Any]:
    if same:
        return {"raw": None} if event.raw is not None else {}
    changes: dict[str, Any] = {}
    if event.extra is not None:
        changes["extra"] = None
    if event.cursor is not None:
        changes["cursor"] = None
    if event.raw is not None:
        changes["raw"] = None
    return changes


def _bare_error(error: ErrorInfo) -> ErrorInfo:
    # The code is the source provider's word (``overloaded_error``); the target
    # encoder picks its own from the unified kind.
    return msgspec.structs.replace(
        error, raw=None, code=None, dialect=None, event_index=None, byte_offset=None
    )

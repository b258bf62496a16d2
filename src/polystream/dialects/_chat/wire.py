"""Wire shapes of the Chat Completions stream (``chat.completion.chunk``), shared by
``openai_chat`` and ``xai_chat``.

A chunk looks like this (OpenAI API reference, "The chat completion chunk object";
xAI docs, "Streaming")::

    data: {"id": "chatcmpl-…", "object": "chat.completion.chunk", "created": 1732000000,
           "model": "gpt-…", "system_fingerprint": "fp_…", "service_tier": "default",
           "choices": [{"index": 0,
                        "delta": {"role": "assistant", "content": "Hi", "refusal": null,
                                  "reasoning_content": "…",            # xAI
                                  "tool_calls": [{"index": 0, "id": "call_…", "type": "function",
                                                  "function": {"name": "f", "arguments": "{\\"a"}}],
                                  "annotations": [ … ]},
                        "logprobs": null, "finish_reason": null}],
           "usage": null, "obfuscation": "…"}

then an optional usage chunk with ``"choices": []``, then ``data: [DONE]``. An
in-band error is a data line ``{"error": {"message", "type", "code", "param"}}``.

Why chunks are decoded into builtins and not into Structs
--------------------------------------------------------
Chat chunks carry many fields this library does not model (``logprobs``,
``system_fingerprint``, ``service_tier``, ``obfuscation``, provider extensions such
as xAI ``citations``) and the same-dialect round trip must reproduce every one of them.
A ``msgspec.Struct`` silently drops unknown keys, so the chunk is decoded once, with
one reused untyped :class:`msgspec.json.Decoder`, and the modelled keys are read out
of it; everything else is kept, as *residuals*, in each event's ``extra["chat"]``
(see :mod:`polystream.dialects._chat.decode` for the layout). The typed Structs below
are used where the shape is fixed and nothing needs keeping: usage details, and
:class:`FastChunk`, the common chunk shape (one choice, a text, reasoning or argument
continuation), which declares every key it may hold and forbids any other; the decoder
tries it first, and any other chunk (an unknown key, another type) takes the general
path above.

Residual diffs
--------------
Most chunks of a stream repeat the same envelope (``id``, ``model``,
``system_fingerprint``…) and the same choice fields (``"logprobs": null,
"finish_reason": null``). Residuals therefore travel as *diffs* against the previous
chunk: :func:`diff` and :func:`apply` below. A diff is a mapping of the keys whose
value changed (or appeared), plus ``"-"``: the list of keys that disappeared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from polystream.events import StreamStart

__all__ = [
    "CHUNK_OBJECT",
    "DECODER",
    "DONE",
    "ENCODER",
    "ENVELOPE_DECODER",
    "EXTRA_KEY",
    "FAST_DECODER",
    "FAST_TAIL_DECODER",
    "TAIL_SHAPE_DECODER",
    "CompletionTokensDetails",
    "CompletionUsage",
    "EnvelopeChunk",
    "FastChunk",
    "FastTail",
    "PromptTokensDetails",
    "TailShape",
    "apply",
    "base_envelope",
    "decode_envelope",
    "decode_fast_chunk",
    "decode_fast_tail",
    "diff",
    "envelope",
    "envelope_text",
]

EXTRA_KEY: Final = "chat"
"""The key under which both Chat dialects keep their residuals in ``Event.extra``."""

CHUNK_OBJECT: Final = "chat.completion.chunk"
DONE: Final = "[DONE]"

DECODER: Final = msgspec.json.Decoder()
"""The one decoder for chunk payloads (builtins: see the module docstring)."""

ENCODER: Final = msgspec.json.Encoder()

_GONE: Final = "-"


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The shallow difference that turns ``old`` into ``new`` (see the module docstring).

    Returns an empty dict when they are equal. Values are compared with ``==`` after a
    type check, so ``0`` and ``False`` (or ``1`` and ``1.0``) stay distinct. Runs twice
    per chunk: one pass over ``new``, and a pass over ``old`` only when keys vanished.
    """
    # (No ``old == new`` shortcut: dict equality says 0 == False and 1 == 1.0.)
    out: dict[str, Any] = {}
    seen = 0
    for key, value in new.items():
        if key in old:
            seen += 1
            previous = old[key]
            if previous is value or (type(previous) is type(value) and previous == value):
                continue
        out[key] = value
    if seen != len(old):
        out[_GONE] = [key for key in old if key not in new]
    return out


def apply(old: dict[str, Any], change: dict[str, Any] | None) -> dict[str, Any]:
    """Apply a :func:`diff` to ``old``; returns a new dict (``old`` is not modified)."""
    if not change:
        return old
    new = dict(old)
    for key, value in change.items():
        if key == _GONE:
            for gone in value:
                new.pop(gone, None)
        else:
            new[key] = value
    return new


class FastFunction(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``function`` of a standard argument continuation: ``{"arguments": "..."}``."""

    arguments: str


class FastToolCall(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A standard tool-call continuation: ``{"index": n, "function": {"arguments": "..."}}``."""

    index: int
    function: FastFunction


class FastDelta(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A delta of the hot shapes: text only, reasoning only, or tool-call fragments only."""

    content: str | msgspec.UnsetType = msgspec.UNSET
    reasoning_content: str | msgspec.UnsetType = msgspec.UNSET
    tool_calls: list[FastToolCall] | msgspec.UnsetType = msgspec.UNSET


class FastChoice(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A choice with nothing besides its delta (``logprobs``/``finish_reason`` null)."""

    index: int
    delta: FastDelta
    logprobs: msgspec.UnsetType | None = msgspec.UNSET
    finish_reason: msgspec.UnsetType | None = msgspec.UNSET


class _FastEnvelope(msgspec.Struct, forbid_unknown_fields=True, gc=False, kw_only=True):
    """The envelope fields of the fast chunk shape (every key but ``choices``)."""

    id: str | msgspec.UnsetType = msgspec.UNSET
    object: str | msgspec.UnsetType = msgspec.UNSET
    created: int | msgspec.UnsetType = msgspec.UNSET
    model: str | msgspec.UnsetType = msgspec.UNSET
    service_tier: str | msgspec.UnsetType | None = msgspec.UNSET
    system_fingerprint: str | msgspec.UnsetType | None = msgspec.UNSET
    usage: msgspec.UnsetType | None = msgspec.UNSET
    obfuscation: str | msgspec.UnsetType = msgspec.UNSET


class FastChunk(_FastEnvelope, kw_only=True):
    """The common chunk shape, decoded first (see :mod:`polystream.dialects._chat.decode`).

    Every field the chunk may carry is declared: any other key (or another type) fails
    validation and the chunk takes the general path, which keeps everything.
    """

    choices: list[FastChoice]


class EnvelopeChunk(_FastEnvelope, kw_only=True):
    """A chunk of the fast envelope whatever its choices hold (OpenAI's first chunk:
    the role, an empty content, a null refusal), decoded so that the fast path can
    take the chunk after it."""

    choices: list[msgspec.Raw]


FAST_DECODER: Final = msgspec.json.Decoder(FastChunk)
"""The decoder tried first for every chunk: the hot shapes, typed (no dict per chunk)."""


class FastTail(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The members of a :class:`FastChunk` from ``choices`` on, when nothing else
    follows it: the decoder skips an envelope whose text it has seen (see
    :func:`polystream.dialects._chat.wire.envelope_text`)."""

    choices: list[FastChoice]
    usage: msgspec.UnsetType | None = msgspec.UNSET
    obfuscation: str | msgspec.UnsetType = msgspec.UNSET


class TailShape(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The members of a chunk from ``choices`` on, whatever its choices hold: what
    follows them is ``usage`` and ``obfuscation`` at most, as in a :class:`FastTail`."""

    choices: msgspec.Raw
    usage: msgspec.UnsetType | None = msgspec.UNSET
    obfuscation: str | msgspec.UnsetType = msgspec.UNSET


ENVELOPE_DECODER: Final = msgspec.json.Decoder(EnvelopeChunk)
"""Decodes a chunk's envelope whatever its choices hold (see :class:`EnvelopeChunk`)."""

TAIL_SHAPE_DECODER: Final = msgspec.json.Decoder(TailShape)
"""Decodes ``{`` + the members of a chunk from ``choices`` on (see :class:`TailShape`)."""

FAST_TAIL_DECODER: Final = msgspec.json.Decoder(FastTail)
"""Decodes ``{`` + the tail of a chunk whose envelope text is known."""


def decode_fast_chunk(data: str) -> FastChunk | None:
    """The chunk as a :class:`FastChunk`, or None when it has another shape (or is not
    JSON): the general path then decides, and reports what is wrong."""
    try:
        return FAST_DECODER.decode(data)
    except msgspec.DecodeError:
        return None


def decode_envelope(data: str) -> EnvelopeChunk | None:
    """The chunk as an :class:`EnvelopeChunk`, or None when its envelope is of another
    shape (or it is not JSON)."""
    try:
        return ENVELOPE_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None


def decode_fast_tail(text: str) -> FastTail | None:
    """``text`` (``{`` + a chunk's members from ``choices`` on) as a :class:`FastTail`,
    or None when anything else follows the choices (or it is not JSON)."""
    try:
        return FAST_TAIL_DECODER.decode(text)
    except msgspec.DecodeError:
        return None


def envelope(chunk: FastChunk | EnvelopeChunk) -> tuple[Any, ...]:
    """A fast-path chunk's envelope (typed values; ``UNSET`` for an absent key) less
    its ``obfuscation``, which changes on every chunk."""
    return (
        chunk.id,
        chunk.object,
        chunk.created,
        chunk.model,
        chunk.service_tier,
        chunk.system_fingerprint,
        chunk.usage,
    )


def envelope_text(data: str) -> str | None:
    """The text of a chunk of the fast envelope before its ``"choices":`` key, if that
    text holds every envelope key: nothing but ``choices`` (whatever they hold),
    ``usage`` and ``obfuscation`` after it (checked by decoding the tail), and neither
    of the last two before it.

    JSON strings cannot hold an unescaped quote, so ``"choices":`` (or ``"usage":``)
    found in the text is a key; the fast envelope has no unknown keys and no nested
    object, so it is the chunk's own. A later chunk whose text starts with the returned
    prefix therefore has exactly this envelope, less ``usage`` and ``obfuscation``,
    which its tail holds.
    """
    cut = data.find('"choices":')
    if cut == -1:
        return None
    prefix = data[:cut]
    if '"usage":' in prefix or '"obfuscation":' in prefix:
        return None
    try:
        TAIL_SHAPE_DECODER.decode("{" + data[cut:])
    except (msgspec.DecodeError, RecursionError):
        return None
    return prefix


def base_envelope(start: StreamStart) -> dict[str, Any]:
    """The envelope a chunk is diffed against before the first chunk: what
    :class:`StreamStart` models (the encoder starts from the same)."""
    env: dict[str, Any] = {}
    if start.id is not None:
        env["id"] = start.id
    env["object"] = CHUNK_OBJECT
    if start.created is not None:
        env["created"] = start.created
    if start.model is not None:
        env["model"] = start.model
    env["choices"] = []
    return env


class PromptTokensDetails(msgspec.Struct, kw_only=True):
    """``usage.prompt_tokens_details`` (parts of ``prompt_tokens``)."""

    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    audio_tokens: int | None = None


class CompletionTokensDetails(msgspec.Struct, kw_only=True):
    """``usage.completion_tokens_details``."""

    reasoning_tokens: int | None = None
    audio_tokens: int | None = None


class CompletionUsage(msgspec.Struct, kw_only=True):
    """The ``usage`` object of a chunk (only the counts this library maps)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None

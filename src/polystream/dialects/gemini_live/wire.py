"""The Gemini Live vocabulary: the keys of the messages, the finish reasons, the usage.

Sources: google-genai ``types.py`` (``LiveClientMessage``, ``LiveServerMessage``,
``LiveServerContent``, ``UsageMetadata``, ``TurnCompleteReason``) and ``live.py``; the
``gemini.live.*`` surfaces of the event catalog.
"""

from __future__ import annotations

import re
from typing import Any, Final

from polystream.events import FinishReason, FinishStatus, UnifiedFinishReason, Usage

__all__ = [
    "CLIENT_KEYS",
    "CLOSE_ERRORS",
    "SERVER_KEYS",
    "finish_of",
    "seconds_of",
    "to_usage",
]

SERVER_KEYS: Final = (
    "setupComplete",
    "serverContent",
    "toolCall",
    "toolCallCancellation",
    "usageMetadata",
    "goAway",
    "sessionResumptionUpdate",
    "voiceActivityDetectionSignal",
    "voiceActivity",
)
"""The keys of a server message (``LiveServerMessage``; several may come together)."""

CLIENT_KEYS: Final = ("setup", "clientContent", "realtimeInput", "toolResponse")
"""The keys of a client message (``LiveClientMessage``: exactly one a message)."""

CLOSE_ERRORS: Final[dict[int, tuple[str, bool]]] = {
    1007: ("invalid_request", False),  # invalid argument (a bad setup, a bad message)
    1008: ("permission", False),  # policy violation (a key or token refused, quota)
    1011: ("server", True),  # internal error, ``Deadline expired`` at the end of a connection
    1013: ("overloaded", True),  # try again later
}
"""The close codes that report an error: code -> (unified kind, retryable)."""

_REASONS: Final[dict[str, UnifiedFinishReason]] = {
    "TURN_COMPLETE_REASON_UNSPECIFIED": "stop",
    "MALFORMED_FUNCTION_CALL": "error",
    "RESPONSE_REJECTED": "refusal",
    "NEED_MORE_INPUT": "other",
}


def finish_of(
    reason: Any, *, tool_calls: bool, interrupted: bool = False
) -> tuple[FinishStatus, FinishReason]:
    """The finish of a model turn: its ``turnCompleteReason`` (absent: ``stop``, or
    ``tool_calls`` when the turn ended on tool calls); an interrupted turn is
    ``cancelled``. Blocked input or output (``*_PROHIBITED*``, ``*_SAFETY``,
    ``BLOCKLIST``, ``INPUT_*``) is ``content_filter``; any other value ``other``."""
    raw = reason if isinstance(reason, str) else None
    if interrupted:
        return "incomplete", FinishReason(unified="cancelled", raw=raw or "interrupted")
    if raw is None:
        return "completed", FinishReason(unified="tool_calls" if tool_calls else "stop")
    unified = _REASONS.get(raw)
    if unified is None:
        blocked = "PROHIBITED" in raw or "SAFETY" in raw or raw.startswith(("INPUT_", "BLOCKLIST"))
        unified = "content_filter" if blocked else "other"
    status: FinishStatus = "completed" if unified == "stop" else "incomplete"
    if unified == "error":
        status = "failed"
    return status, FinishReason(unified=unified, raw=raw)


_DURATION: Final = re.compile(r"^(-?\d+(?:\.\d+)?)s$")


def seconds_of(value: Any) -> float | None:
    """A protobuf duration (``"50s"``, ``"1.5s"``) in seconds; None when it is not one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(value) if isinstance(value, str) else None
    return float(match.group(1)) if match else None


def _count(meta: dict[str, Any], name: str) -> int | None:
    value = meta.get(name)
    return value if type(value) is int else None


def _audio(details: Any) -> int | None:
    if isinstance(details, list):
        for entry in details:
            if isinstance(entry, dict) and entry.get("modality") == "AUDIO":
                count = entry.get("tokenCount")
                return count if type(count) is int else None
    return None


def _plus(a: int | None, b: int | None) -> int | None:
    return a if b is None else (b if a is None else a + b)


def to_usage(meta: dict[str, Any]) -> Usage:
    """A ``usageMetadata`` as a :class:`~polystream.events.Usage`: input = prompt +
    tool-use prompt, output = response + thoughts, the parts stated as such, the
    object kept as ``raw``."""
    prompt, tool = _count(meta, "promptTokenCount"), _count(meta, "toolUsePromptTokenCount")
    response, thoughts = _count(meta, "responseTokenCount"), _count(meta, "thoughtsTokenCount")
    return Usage(
        input_tokens=_plus(prompt, tool),
        output_tokens=_plus(response, thoughts),
        reasoning_tokens=thoughts,
        cache_read_tokens=_count(meta, "cachedContentTokenCount"),
        tool_prompt_tokens=tool,
        audio_input_tokens=_audio(meta.get("promptTokensDetails")),
        audio_output_tokens=_audio(meta.get("responseTokensDetails")),
        total_tokens=_count(meta, "totalTokenCount"),
        raw=meta,
    )

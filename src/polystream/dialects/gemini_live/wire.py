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
    "FINISH_REASONS",
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

_FILTERED: Final = (
    "BLOCKLIST",
    "GENERATED_AUDIO_SAFETY",
    "GENERATED_CONTENT_BLOCKLIST",
    "GENERATED_CONTENT_PROHIBITED",
    "GENERATED_CONTENT_SAFETY",
    "GENERATED_IMAGE_CELEBRITY",
    "GENERATED_IMAGE_IDENTIFIABLE_PEOPLE",
    "GENERATED_IMAGE_MINORS",
    "GENERATED_IMAGE_PROHIBITED",
    "GENERATED_IMAGE_PROMINENT_PEOPLE_DETECTED_BY_REWRITER",
    "GENERATED_IMAGE_SAFETY",
    "GENERATED_OTHER",
    "GENERATED_VIDEO_SAFETY",
    "IMAGE_PROHIBITED_INPUT_CONTENT",
    "INPUT_IMAGE_CELEBRITY",
    "INPUT_IMAGE_PHOTO_REALISTIC_CHILD_PROHIBITED",
    "INPUT_IP_PROHIBITED",
    "INPUT_OTHER",
    "INPUT_TEXT_CONTAIN_PROMINENT_PERSON_PROHIBITED",
    "INPUT_TEXT_NCII_PROHIBITED",
    "OUTPUT_IMAGE_IP_PROHIBITED",
    "PROHIBITED_INPUT_CONTENT",
    "UNSAFE_PROMPT_FOR_IMAGE_GENERATION",
)

FINISH_REASONS: Final[dict[str, UnifiedFinishReason]] = {
    "TURN_COMPLETE_REASON_UNSPECIFIED": "stop",
    "MALFORMED_FUNCTION_CALL": "error",
    "RESPONSE_REJECTED": "refusal",
    "NEED_MORE_INPUT": "other",
    "MAX_REGENERATION_REACHED": "other",
    **dict.fromkeys(_FILTERED, "content_filter"),
}
"""``turnCompleteReason`` -> unified reason (every value google-genai's
``TurnCompleteReason`` lists; any other is ``other``)."""


def finish_of(
    reason: Any, *, tool_calls: bool, interrupted: bool = False
) -> tuple[FinishStatus, FinishReason]:
    """The finish of a model turn: its ``turnCompleteReason`` (absent: ``stop``, or
    ``tool_calls`` when the turn ended on tool calls), mapped by
    :data:`FINISH_REASONS`; an interrupted turn is ``cancelled``. A turn that stopped
    for any reason other than ``stop`` is ``incomplete`` (``failed`` for a malformed
    function call)."""
    raw = reason if isinstance(reason, str) else None
    if interrupted:
        return "incomplete", FinishReason(unified="cancelled", raw=raw or "interrupted")
    if raw is None:
        return "completed", FinishReason(unified="tool_calls" if tool_calls else "stop")
    unified = FINISH_REASONS.get(raw, "other")
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

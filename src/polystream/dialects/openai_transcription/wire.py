"""The transcription stream's wire shapes: event names, each event's fields in the order
the encoder writes them, the native fields an event keeps in ``extra``, and the usage and
error objects.

``extra`` of a decoded event holds the native fields it does not model under their own
names (``logprobs``, ``segment_id``, ``languages``, ...), plus two keys of the decoder's
own, present only where the event departs from what the encoder writes by default:

* ``_order``: the native fields in the order they came (when it is not the order below);
* ``_event``: True when the event came with an SSE ``event:`` line (the API writes only
  ``data:`` lines).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind, Usage
from polystream.wire.sse import SSEEncoder

__all__ = [
    "DELTA",
    "DONE",
    "ERROR",
    "ERROR_KINDS",
    "EVENT_LINES",
    "ORDER",
    "SEGMENT",
    "convert_usage",
    "error_info",
    "native_usage",
    "order_of",
    "ordered",
    "residuals",
    "write",
]

DELTA: Final = "transcript.text.delta"
SEGMENT: Final = "transcript.text.segment"
DONE: Final = "transcript.text.done"
ERROR: Final = "error"

EVENT_LINES: Final = False
"""Whether the API names each event on an ``event:`` line (it does not: ``data:`` only)."""

ORDER: Final[dict[str, tuple[str, ...]]] = {
    DELTA: ("type", "delta", "logprobs", "segment_id"),
    SEGMENT: ("type", "id", "start", "end", "speaker", "text"),
    DONE: ("type", "text", "logprobs", "languages", "usage"),
    ERROR: ("type", "error"),
}
"""Each event's fields in the order the encoder writes them (others follow, as they came)."""

_ENCODER: Final = msgspec.json.Encoder()
_SSE: Final = SSEEncoder()


def order_of(name: str, keys: list[str]) -> list[str]:
    """The order the encoder writes ``keys`` of event ``name`` in, by default."""
    canon = ORDER.get(name, ("type",))
    return [k for k in canon if k in keys] + [k for k in keys if k not in canon]


def residuals(
    name: str, payload: dict[str, Any], modelled: tuple[str, ...], event_line: bool
) -> dict[str, Any] | None:
    """The ``extra`` of a decoded event: the native fields not in ``modelled`` (nor
    ``type``), the field order when it is not the default, the ``event:`` line flag."""
    extra = {k: v for k, v in payload.items() if k != "type" and k not in modelled}
    keys = list(payload)
    if keys != order_of(name, keys):
        extra["_order"] = keys
    if event_line != EVENT_LINES:
        extra["_event"] = event_line
    return extra or None


def ordered(name: str, payload: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    """``payload`` (the modelled fields) with the native fields ``extra`` keeps, in the
    order the decoder saw them, or the default order."""
    if extra:
        for key, value in extra.items():
            if key[:1] != "_":
                payload[key] = value
        order = extra.get("_order")
        if isinstance(order, list) and sorted(order) == sorted(payload):
            return {k: payload[k] for k in order}
    return {k: payload[k] for k in order_of(name, list(payload))}


def write(name: str, payload: dict[str, Any], extra: dict[str, Any] | None) -> bytes:
    """One SSE event: ``payload`` ordered, with an ``event:`` line where the source had
    one (or, by default, as the API writes it)."""
    line = EVENT_LINES if not extra or "_event" not in extra else bool(extra["_event"])
    data = _ENCODER.encode(ordered(name, payload, extra)).decode()
    return _SSE.event(data, event=name if line else None)


def convert_usage(usage: dict[str, Any]) -> Usage:
    """The canonical :class:`Usage` of a ``transcript.text.done`` usage object.

    ``{"type": "tokens", input_tokens, output_tokens, total_tokens, input_token_details:
    {audio_tokens, text_tokens}}``: the counts as they are (the input is all prompt tokens,
    ``audio_input_tokens`` its audio part). ``{"type": "duration", "seconds"}``: no token
    count; the object stays in ``raw`` (an empty usage, see :meth:`Usage.is_empty`).
    """

    def count(obj: Any, key: str) -> int | None:
        value = obj.get(key) if isinstance(obj, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    if usage.get("type") == "duration":
        return Usage(raw=usage)
    return Usage(
        input_tokens=count(usage, "input_tokens"),
        output_tokens=count(usage, "output_tokens"),
        total_tokens=count(usage, "total_tokens"),
        audio_input_tokens=count(usage.get("input_token_details"), "audio_tokens"),
        raw=usage,
    )


def native_usage(usage: Usage) -> dict[str, Any] | None:
    """A token usage object of canonical ``usage`` (None when it reports no count)."""
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    inp = usage.input_tokens or 0
    out = usage.output_tokens or 0
    obj: dict[str, Any] = {
        "type": "tokens",
        "input_tokens": inp,
        "output_tokens": out,
        "total_tokens": usage.total_tokens if usage.total_tokens is not None else inp + out,
    }
    if usage.audio_input_tokens is not None:
        obj["input_token_details"] = {
            "audio_tokens": usage.audio_input_tokens,
            "text_tokens": inp - usage.audio_input_tokens,
        }
    return obj


ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    "server_error": "server",
    "internal_error": "server",
    "api_error": "server",
    "rate_limit_exceeded": "rate_limit",
    "insufficient_quota": "quota",
    "overloaded": "overloaded",
    "server_is_overloaded": "overloaded",
    "service_unavailable": "overloaded",
    "invalid_request_error": "invalid_request",
    "audio_too_short": "invalid_request",
    "invalid_value": "invalid_request",
    "timeout": "timeout",
    "invalid_api_key": "authentication",
    "authentication_error": "authentication",
    "permission_denied": "permission",
    "not_found": "not_found",
    "content_filter": "content_filter",
    "moderation_blocked": "content_filter",
    "cancelled": "cancelled",
}
"""An in-band error's ``code`` or ``type`` -> unified kind (default ``unknown``)."""


def error_info(obj: dict[str, Any], *, output_started: bool) -> ErrorInfo:
    """Type an ``error`` event's object: nested (``{"type": "error", "error": {type, code,
    message, param}}``, as the OpenAI SDK reads it) or flat (the fields beside ``type``).
    ``retryable`` holds only for a retryable kind before any output."""
    nested = obj.get("error")
    src = nested if isinstance(nested, dict) else obj
    code = src.get("code")
    etype = src.get("type")
    if etype == "error":
        etype = None
    kind: ErrorKind = "unknown"
    for key in (code, etype):
        if isinstance(key, str) and key in ERROR_KINDS:
            kind = ERROR_KINDS[key]
            break
    message = src.get("message")
    return ErrorInfo(
        kind=kind,
        message=message if isinstance(message, str) else "error",
        retryable=kind in RETRYABLE_KINDS and not output_started,
        code=code if isinstance(code, str) else (etype if isinstance(etype, str) else None),
        raw=src,
    )

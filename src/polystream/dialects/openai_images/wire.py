"""The image stream's wire shapes: event names of both vocabularies (generation and
edit), each event's fields in the order the encoder writes them, the native fields an event
keeps in ``extra``, and the usage and error objects.

``extra`` of a decoded event holds the native fields it does not model under their own
names (``created_at``; ``size``, ``quality``, ``background``, ``output_format`` where they
differ from the block's :class:`~polystream.events.MediaInfo`), plus two keys of the
decoder's own, present only where the event departs from what the encoder writes by
default:

* ``_order``: the native fields in the order they came (when it is not the order below);
* ``_event``: False when the event came without an SSE ``event:`` line (the encoder
  writes one, ``event: <type>``, by default).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind, Usage
from polystream.wire.sse import SSEEncoder

__all__ = [
    "COMPLETED",
    "ERROR",
    "ERROR_KINDS",
    "EVENT_LINES",
    "MIME_TYPES",
    "ORDER",
    "PARTIAL",
    "PREFIXES",
    "convert_usage",
    "error_info",
    "native_usage",
    "order_of",
    "ordered",
    "residuals",
    "write",
]

PREFIXES: Final = {"generation": "image_generation.", "edit": "image_edit."}
"""Each operation's event-name prefix."""
PARTIAL: Final = "partial_image"
COMPLETED: Final = "completed"
ERROR: Final = "error"

EVENT_LINES: Final = True
"""Whether the encoder names each event on an ``event:`` line by default."""

MIME_TYPES: Final = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
"""The media type of each ``output_format``."""

_MEDIA: Final = ("size", "quality", "background", "output_format")
ORDER: Final[dict[str, tuple[str, ...]]] = {
    PARTIAL: ("type", "b64_json", "created_at", *_MEDIA, "partial_image_index"),
    COMPLETED: ("type", "b64_json", "created_at", *_MEDIA, "usage"),
    ERROR: ("type", "error"),
}
"""Each event's fields in the order the encoder writes them (others follow, as they came)."""

_ENCODER: Final = msgspec.json.Encoder()
_SSE: Final = SSEEncoder()


def order_of(name: str, keys: list[str]) -> list[str]:
    """The order the encoder writes ``keys`` of event ``name`` in, by default."""
    canon = ORDER.get(name.rpartition(".")[2], ("type",))
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
    """The canonical :class:`Usage` of a ``completed`` event's usage object
    (``{input_tokens, input_tokens_details: {image_tokens, text_tokens}, output_tokens,
    total_tokens}``): the counts as they are (input tokens are the prompt's text and image
    tokens together; their split stays in ``raw``)."""

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        total_tokens=count("total_tokens"),
        raw=usage,
    )


def native_usage(usage: Usage) -> dict[str, Any] | None:
    """The usage object of canonical ``usage`` (None when it reports no count); another
    dialect's usage has no text / image split, so ``input_tokens_details`` is left out."""
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    inp = usage.input_tokens or 0
    out = usage.output_tokens or 0
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "total_tokens": usage.total_tokens if usage.total_tokens is not None else inp + out,
    }


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
    "image_generation_user_error": "invalid_request",
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

"""In-band ``error`` event types of the Messages API <-> unified error kinds.

Anthropic docs, "Errors" (HTTP errors) and "Streaming Messages" ("Error events": "we
may occasionally send errors in the event stream, e.g. during periods of high usage,
you may receive an ``overloaded_error``, which would normally correspond to an HTTP 529
in a non-streaming context"). The HTTP status is the one the same error would have had
before the stream began.
"""

from __future__ import annotations

from typing import Final

from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind

__all__ = ["error_info", "native_error_type"]

_TABLE: Final[dict[str, tuple[ErrorKind, int]]] = {
    "invalid_request_error": ("invalid_request", 400),
    "authentication_error": ("authentication", 401),
    "billing_error": ("quota", 402),
    "permission_error": ("permission", 403),
    "not_found_error": ("not_found", 404),
    "request_too_large": ("request_too_large", 413),
    "rate_limit_error": ("rate_limit", 429),
    "api_error": ("server", 500),
    "timeout_error": ("timeout", 504),
    "overloaded_error": ("overloaded", 529),
}

_REVERSE: Final[dict[str, str]] = {kind: name for name, (kind, _) in _TABLE.items()}


def error_info(error: object) -> ErrorInfo:
    """A typed :class:`ErrorInfo` for the ``error`` object of an ``error`` event.

    ``retryable`` follows the kind (overloaded, rate limit, server and timeout errors
    may succeed on a retry); the object is kept whole in ``raw``.
    """
    etype = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    entry = _TABLE.get(etype) if isinstance(etype, str) else None
    kind: ErrorKind = entry[0] if entry else "unknown"
    return ErrorInfo(
        kind=kind,
        message=message if isinstance(message, str) else str(etype or "error"),
        retryable=kind in RETRYABLE_KINDS,
        code=etype if isinstance(etype, str) else None,
        http_status=entry[1] if entry else None,
        raw=error,
    )


def native_error_type(info: ErrorInfo) -> str:
    """The ``error.type`` to send for a unified error (``api_error`` when unknown)."""
    if info.code is not None and info.code in _TABLE:
        return info.code
    return _REVERSE.get(info.kind, "api_error")

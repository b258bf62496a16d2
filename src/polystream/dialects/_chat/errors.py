"""Chat error objects (``{"message", "type", "param", "code"}``) -> typed errors.

An error reaches a Chat stream as a data line of its own (OpenAI) or inside a chunk
(OpenRouter, with ``finish_reason: "error"``); both are read by :func:`error_info`.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind

__all__ = ["error_info", "error_kind"]

# OpenAI error `type`/`code` values (API reference "Error codes") and the words other
# Chat servers use -> unified kind. Anything else is "unknown".
_ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    "server_error": "server",
    "internal_error": "server",
    "api_error": "server",
    "service_unavailable": "overloaded",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "tokens": "rate_limit",
    "requests": "rate_limit",
    "insufficient_quota": "quota",
    "invalid_request_error": "invalid_request",
    "context_length_exceeded": "invalid_request",
    "authentication_error": "authentication",
    "invalid_api_key": "authentication",
    "permission_error": "permission",
    "not_found_error": "not_found",
    "model_not_found": "not_found",
    "content_filter": "content_filter",
    "content_policy_violation": "content_filter",
    "timeout": "timeout",
    "request_timeout": "timeout",
}


# Numeric codes (OpenRouter sends HTTP-like ones in mid-stream errors) -> unified kind.
_STATUS_KINDS: Final[dict[int, ErrorKind]] = {
    400: "invalid_request",
    401: "authentication",
    402: "quota",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "request_too_large",
    429: "rate_limit",
    500: "server",
    502: "server",
    503: "overloaded",
    504: "timeout",
    529: "overloaded",
}


def error_kind(error: Any) -> ErrorKind:
    """The unified kind of a Chat error object (its ``code``, then its ``type``)."""
    if isinstance(error, dict):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and value in _ERROR_KINDS:
                return _ERROR_KINDS[value]
            if type(value) is int and value in _STATUS_KINDS:
                return _STATUS_KINDS[value]
    return "unknown"


def error_info(error: Any) -> ErrorInfo:
    """A typed error from a Chat error object (``{"message", "type", "param", "code"}``)."""
    message = error.get("message") if isinstance(error, dict) else None
    code = None
    if isinstance(error, dict):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str):
                code = value
                break
            if type(value) is int:
                code = str(value)  # OpenRouter sends numeric HTTP-like codes
                break
    kind = error_kind(error)
    status = error.get("code") if isinstance(error, dict) else None
    return ErrorInfo(
        kind=kind,
        message=message if isinstance(message, str) else "error in the stream",
        retryable=kind in RETRYABLE_KINDS,
        code=code,
        http_status=status if type(status) is int else None,
        raw=error,
    )

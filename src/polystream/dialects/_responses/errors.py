"""Responses in-band errors -> typed :class:`~polystream.events.ErrorInfo`.

Two shapes arrive in ``error`` events: the documented flat one
(``{"type": "error", "code", "message", "param"}``) and the one real streams send, with
the fields nested under ``error`` (``{"type": "error", "error": {"type", "code",
"message", "param"}}``; Effect-TS/effect#7262). ``response.failed`` carries
``response.error`` (``{code, message}``).
"""

from __future__ import annotations

from typing import Any, Final

from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind

__all__ = ["ERROR_KINDS", "error_info"]

ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    "server_error": "server",
    "internal_error": "server",
    "api_error": "server",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "insufficient_quota": "quota",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "server_is_overloaded": "overloaded",
    "slow_down": "overloaded",
    "invalid_request_error": "invalid_request",
    "invalid_prompt": "invalid_request",
    "context_length_exceeded": "invalid_request",
    "vector_store_timeout": "timeout",
    "timeout": "timeout",
    "authentication_error": "authentication",
    "invalid_api_key": "authentication",
    "permission_denied": "permission",
    "not_found": "not_found",
    "content_filter": "content_filter",
    "cancelled": "cancelled",
}
"""Provider error code or type -> unified kind (default ``unknown``)."""


def error_info(obj: dict[str, Any], *, output_started: bool) -> ErrorInfo:
    """Type an error object (flat or nested under ``error``).

    ``retryable`` holds only for retryable kinds while no output was delivered.
    """
    nested = obj.get("error")
    src = nested if isinstance(nested, dict) else obj
    code = src.get("code")
    etype = src.get("type")
    if etype == "error":  # the flat shape's ``type`` is the event type
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

"""Google RPC status names (``error.status``) -> unified :data:`ErrorKind`.

The status names are google.rpc.Code; the HTTP codes Google pairs with them are the
fallback when ``status`` is missing.
"""

from __future__ import annotations

from typing import Final

from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind

__all__ = ["error_info", "google_status", "kind_for"]

_BY_STATUS: Final[dict[str, ErrorKind]] = {
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "UNKNOWN": "server",
    "DATA_LOSS": "server",
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "UNIMPLEMENTED": "invalid_request",
    "ALREADY_EXISTS": "invalid_request",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "cancelled",
    "ABORTED": "server",
}

_BY_HTTP: Final[dict[int, ErrorKind]] = {
    400: "invalid_request",
    401: "authentication",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "request_too_large",
    429: "rate_limit",
    499: "cancelled",
    500: "server",
    503: "overloaded",
    504: "timeout",
}

_STATUS_FOR_KIND: Final[dict[str, tuple[int, str]]] = {
    "rate_limit": (429, "RESOURCE_EXHAUSTED"),
    "quota": (429, "RESOURCE_EXHAUSTED"),
    "overloaded": (503, "UNAVAILABLE"),
    "server": (500, "INTERNAL"),
    "invalid_request": (400, "INVALID_ARGUMENT"),
    "request_too_large": (400, "INVALID_ARGUMENT"),
    "content_filter": (400, "INVALID_ARGUMENT"),
    "authentication": (401, "UNAUTHENTICATED"),
    "permission": (403, "PERMISSION_DENIED"),
    "not_found": (404, "NOT_FOUND"),
    "timeout": (504, "DEADLINE_EXCEEDED"),
    "cancelled": (499, "CANCELLED"),
}


def kind_for(status: str | None, code: int | None) -> ErrorKind:
    """The unified kind of a Google error: by ``status`` first, then by HTTP code."""
    if status is not None and status in _BY_STATUS:
        return _BY_STATUS[status]
    if code is not None and code in _BY_HTTP:
        return _BY_HTTP[code]
    return "unknown"


def error_info(code: int | None, message: str, status: str | None, raw: object) -> ErrorInfo:
    """A typed :class:`ErrorInfo` for a Google error object."""
    kind = kind_for(status, code)
    return ErrorInfo(
        kind=kind,
        message=message,
        retryable=kind in RETRYABLE_KINDS,
        code=status,
        http_status=code,
        raw=raw,
    )


def google_status(kind: str) -> tuple[int, str]:
    """The (HTTP code, status name) Google would use for a unified error kind."""
    return _STATUS_FOR_KIND.get(kind, (500, "INTERNAL"))

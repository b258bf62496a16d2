"""Error answers in each provider's own shape, and any provider's error body read back.

One table set per :data:`~polystream.dialects._spec.ErrorShape`, used by the emulator and
the gateway alike:

* ``openai`` (OpenAI and xAI, read by the OpenAI SDK):
  ``{"error": {"message", "type", "param", "code"}}``;
* ``anthropic`` (Anthropic and xAI ``/v1/messages``):
  ``{"type": "error", "error": {"type", "message"}, "request_id"}``;
* ``google`` (Gemini): ``{"error": {"code", "message", "status"}}`` with the
  ``google.rpc.Code`` name.

The names per status follow each provider's error documentation (OpenAI "Error codes",
Anthropic "Errors", Google AIP-193): by the status, but for the few kinds a status does not
tell apart (an exhausted quota and a rate limit are both 429).
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._spec import ErrorShape, ErrorSpec
from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind, kind_for_status

__all__ = [
    "CODE_KINDS",
    "DEFAULT_MESSAGES",
    "error_body",
    "error_from_body",
    "openai_error_object",
    "status_for",
]

_OPENAI_BY_STATUS: Final[dict[int, tuple[str, str | None]]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("requests", "rate_limit_exceeded"),  # (the type names the limit: requests, tokens)
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "timeout"),
    529: ("server_error", "overloaded"),
}
_OPENAI_BY_KIND: Final[dict[str, tuple[str, str | None]]] = {
    # A kind the status does not tell apart (429 is a rate limit or an exhausted quota).
    "quota": ("insufficient_quota", "insufficient_quota"),
}
_ANTHROPIC_BY_STATUS: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_ANTHROPIC_BY_KIND: Final[dict[str, str]] = {
    # Kinds that name the error better than any status (an overload answered with 503).
    "overloaded": "overloaded_error",
    "quota": "billing_error",
    "timeout": "timeout_error",
}
_GOOGLE_BY_STATUS: Final[dict[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",  # (google.rpc has no "too large" code; Google answers 400/413)
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
_GOOGLE_BY_KIND: Final[dict[str, str]] = {
    "overloaded": "UNAVAILABLE",
    "quota": "RESOURCE_EXHAUSTED",
    "cancelled": "CANCELLED",
}
DEFAULT_MESSAGES: Final[dict[int, str]] = {
    400: "Invalid request.",
    401: "Invalid API key.",
    403: "Permission denied.",
    404: "Not found.",
    405: "Method not allowed.",
    413: "Request too large.",
    429: "Rate limit exceeded. Please retry after the time given in Retry-After.",
    500: "The server had an error while processing your request.",
    503: "The service is temporarily unavailable.",
    529: "Overloaded",
}
"""The message of an error answer that states none."""

_STATUS_FOR_KIND: Final[dict[str, int]] = {
    "invalid_request": 400,
    "content_filter": 400,
    "authentication": 401,
    "permission": 403,
    "not_found": 404,
    "request_too_large": 413,
    "rate_limit": 429,
    "quota": 429,
    "cancelled": 499,
    "server": 500,
    "overloaded": 503,
    "timeout": 504,
}


def status_for(kind: str, errors: ErrorSpec) -> int:
    """The HTTP status an error of ``kind`` is answered with in a dialect (an overloaded
    one with the dialect's :attr:`~ErrorSpec.overloaded_status`; an unknown kind: 502)."""
    if kind == "overloaded":
        return errors.overloaded_status
    return _STATUS_FOR_KIND.get(kind, 502)


def error_body(
    errors: ErrorSpec | ErrorShape,
    status: int,
    message: str | None = None,
    *,
    kind: str | None = None,
    param: str | None = None,
    code: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """The provider's own JSON error body.

    Args:
        errors: The dialect's error spec (or a bare shape, for a path under a provider's
            prefix that is no dialect's endpoint).
        status: The HTTP status it answers with.
        message: The message (default: :data:`DEFAULT_MESSAGES`).
        kind: The error's unified kind; names the error where the status does not.
        param: The offending parameter. Where the shape has no field for it, the
            message names it: ``"expected a string (messages[0].role)"``.
        code: OpenAI's ``code`` (default: per status).
        request_id: The request id (Anthropic's shape carries it in the body).
    """
    spec = errors if isinstance(errors, ErrorSpec) else ErrorSpec(errors, errors == "openai")
    text = message or DEFAULT_MESSAGES.get(status, f"HTTP {status}")
    if param and not spec.param_field:
        text = f"{text} ({param})"
    if spec.shape == "anthropic":
        name = _ANTHROPIC_BY_KIND.get(kind or "") or _ANTHROPIC_BY_STATUS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        body: dict[str, Any] = {"type": "error", "error": {"type": name, "message": text}}
        if request_id is not None:
            body["request_id"] = request_id
        return body
    if spec.shape == "google":
        state = _GOOGLE_BY_KIND.get(kind or "") or _GOOGLE_BY_STATUS.get(
            status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT"
        )
        return {"error": {"code": status, "message": text, "status": state}}
    name, default_code = _OPENAI_BY_KIND.get(kind or "") or _OPENAI_BY_STATUS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": text,
            "type": name,
            "param": param,
            "code": code if code is not None else default_code,
        }
    }


CODE_KINDS: Final[dict[str, ErrorKind]] = {
    # Anthropic error.type
    "invalid_request_error": "invalid_request",
    "authentication_error": "authentication",
    "permission_error": "permission",
    "not_found_error": "not_found",
    "request_too_large": "request_too_large",
    "rate_limit_error": "rate_limit",
    "billing_error": "quota",
    "api_error": "server",
    "overloaded_error": "overloaded",
    "timeout_error": "timeout",
    # OpenAI error.type / code
    "insufficient_quota": "quota",
    "rate_limit_exceeded": "rate_limit",
    "server_error": "server",
    "service_unavailable": "overloaded",
    "invalid_api_key": "authentication",
    # Google status
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "INTERNAL": "server",
    "UNAVAILABLE": "overloaded",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "cancelled",
}
"""The unified kind each provider's error name means (OpenAI's ``type``/``code``,
Anthropic's ``error.type``, Google's ``status``)."""


def error_from_body(status: int, body: Any) -> ErrorInfo:
    """Type a provider's HTTP error body (any of the three shapes).

    Args:
        status: The HTTP status.
        body: The parsed JSON body, or its text when it was not JSON.
    """
    message = f"HTTP {status}"
    code: str | None = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = str(error.get("message") or message)
            # The most specific field first: OpenAI's `code` (invalid_api_key) beats its
            # generic `type` (invalid_request_error); Google's `status` beats its number.
            values = [error.get(key) for key in ("code", "status", "type")]
            names = [v for v in values if isinstance(v, str) and v]
            known = [v for v in names if v in CODE_KINDS]
            code = known[0] if known else (names[0] if names else None)
        elif isinstance(error, str):
            message = error
    elif isinstance(body, str) and body.strip():
        message = body.strip()[:500]
    by_status = kind_for_status(status)
    kind = CODE_KINDS.get(code or "", by_status)
    if kind in ("server", "unknown", "invalid_request") and by_status not in (
        "server",
        "unknown",
        "invalid_request",
    ):
        # A generic code (server_error, invalid_request_error) says less than the
        # status: 503 is overloaded, 401 authentication, 429 a rate limit.
        kind = by_status
    return ErrorInfo(
        kind=kind,
        message=message,
        retryable=kind in RETRYABLE_KINDS or status in (408, 409, 429) or status >= 500,
        code=code,
        http_status=status,
        raw=body if isinstance(body, dict) else None,
    )


_OPENAI_TYPE_OF_KIND: Final[dict[str, str]] = {
    "invalid_request": "invalid_request_error",
    "authentication": "invalid_request_error",
    "permission": "invalid_request_error",
    "not_found": "invalid_request_error",
    "request_too_large": "invalid_request_error",
    "content_filter": "invalid_request_error",
    "rate_limit": "requests",
    "quota": "insufficient_quota",
}


def openai_error_object(error: ErrorInfo) -> dict[str, Any]:
    """The ``error`` object of an in-band error event in the OpenAI shape, for an error
    that came from another dialect (its type by kind; any other kind: ``server_error``)."""
    return {
        "type": _OPENAI_TYPE_OF_KIND.get(error.kind, "server_error"),
        "code": error.code,
        "message": error.message,
        "param": None,
    }

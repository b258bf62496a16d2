"""Where each dialect lives and how it authenticates; provider error bodies both ways.

Everything here is data and pure functions: the client and the gateway (shells) use
them to address upstreams, and the emulator and the gateway to answer errors in each
provider's own shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from polystream.events import RETRYABLE_KINDS, ErrorInfo, ErrorKind

__all__ = [
    "PROVIDERS",
    "ProviderInfo",
    "auth_headers",
    "error_body",
    "error_from_body",
    "kind_for_status",
    "provider_of",
]


@dataclass(frozen=True)
class ProviderInfo:
    """A provider's HTTP facts.

    Attributes:
        name: ``openai``, ``anthropic``, ``xai`` or ``gemini``.
        base_url: The default base URL (what the official SDK uses).
        env_key: The environment variable holding the API key.
        request_id_header: The response header carrying the request id.
    """

    name: str
    base_url: str
    env_key: str
    request_id_header: str


PROVIDERS: Final[dict[str, ProviderInfo]] = {
    "openai": ProviderInfo("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "x-request-id"),
    "xai": ProviderInfo("xai", "https://api.x.ai/v1", "XAI_API_KEY", "x-request-id"),
    "anthropic": ProviderInfo(
        "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", "request-id"
    ),
    "gemini": ProviderInfo(
        "gemini", "https://generativelanguage.googleapis.com", "GEMINI_API_KEY", "x-request-id"
    ),
}
"""Providers by name."""

_DIALECT_PROVIDER: Final = {
    "openai_responses": "openai",
    "openai_chat": "openai",
    "anthropic_messages": "anthropic",
    "xai_responses": "xai",
    "xai_chat": "xai",
    "xai_messages": "xai",
    "gemini_generate": "gemini",
    "gemini_interactions": "gemini",
}


def provider_of(dialect: str) -> ProviderInfo:
    """The provider that speaks ``dialect``."""
    return PROVIDERS[_DIALECT_PROVIDER[dialect]]


def auth_headers(dialect: str, api_key: str) -> dict[str, str]:
    """The headers that authenticate a request in ``dialect``."""
    provider = _DIALECT_PROVIDER[dialect]
    if dialect == "anthropic_messages":
        return {"x-api-key": api_key, "anthropic-version": "2023-06-01"}
    if provider == "gemini":
        return {"x-goog-api-key": api_key}
    # OpenAI and every xAI dialect (xAI's /v1/messages takes a bearer token too).
    return {"authorization": f"Bearer {api_key}"}


_STATUS_KIND: Final[dict[int, ErrorKind]] = {
    400: "invalid_request",
    401: "authentication",
    403: "permission",
    404: "not_found",
    408: "timeout",
    409: "server",
    413: "request_too_large",
    422: "invalid_request",
    429: "rate_limit",
    500: "server",
    502: "server",
    503: "overloaded",
    504: "timeout",
    529: "overloaded",
}

_CODE_KIND: Final[dict[str, ErrorKind]] = {
    # Anthropic error.type
    "invalid_request_error": "invalid_request",
    "authentication_error": "authentication",
    "permission_error": "permission",
    "not_found_error": "not_found",
    "request_too_large": "request_too_large",
    "rate_limit_error": "rate_limit",
    "api_error": "server",
    "overloaded_error": "overloaded",
    "timeout_error": "timeout",
    # OpenAI error.type / code
    "insufficient_quota": "quota",
    "rate_limit_exceeded": "rate_limit",
    "server_error": "server",
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


def kind_for_status(status: int) -> ErrorKind:
    """The unified error kind for an HTTP status."""
    if status in _STATUS_KIND:
        return _STATUS_KIND[status]
    return "server" if status >= 500 else "unknown"


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
            known = [v for v in names if v in _CODE_KIND]
            code = known[0] if known else (names[0] if names else None)
        elif isinstance(error, str):
            message = error
    elif isinstance(body, str) and body.strip():
        message = body.strip()[:500]
    by_status = kind_for_status(status)
    kind = _CODE_KIND.get(code or "", by_status)
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


_OPENAI_TYPE: Final[dict[str, str]] = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "rate_limit": "rate_limit_error",
    "request_too_large": "invalid_request_error",
    "overloaded": "server_error",
    "server": "server_error",
    "timeout": "server_error",
}
_ANTHROPIC_TYPE: Final[dict[str, str]] = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "rate_limit": "rate_limit_error",
    "request_too_large": "request_too_large",
    "overloaded": "overloaded_error",
    "server": "api_error",
    "timeout": "timeout_error",
}
_GOOGLE_STATUS: Final[dict[str, str]] = {
    "invalid_request": "INVALID_ARGUMENT",
    "authentication": "UNAUTHENTICATED",
    "permission": "PERMISSION_DENIED",
    "not_found": "NOT_FOUND",
    "rate_limit": "RESOURCE_EXHAUSTED",
    "request_too_large": "INVALID_ARGUMENT",
    "overloaded": "UNAVAILABLE",
    "server": "INTERNAL",
    "timeout": "DEADLINE_EXCEEDED",
}


def error_body(
    dialect: str, status: int, message: str, *, kind: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The provider's own JSON error body for ``dialect``.

    OpenAI/xAI ``{"error": {"message", "type", "param", "code"}}``; Anthropic
    ``{"type": "error", "error": {"type", "message"}}``; Gemini
    ``{"error": {"code", "message", "status"}}``. Where the shape has no ``param``
    field, the message names the parameter: ``"expected a string (messages[0].role)"``.
    """
    kind = kind or kind_for_status(status)
    provider = _DIALECT_PROVIDER.get(dialect, "openai")
    if param and (dialect in ("anthropic_messages", "xai_messages") or provider == "gemini"):
        message = f"{message} ({param})"  # (these shapes have no field for it)
    if dialect in ("anthropic_messages", "xai_messages"):
        return {
            "type": "error",
            "error": {"type": _ANTHROPIC_TYPE.get(kind, "api_error"), "message": message},
        }
    if provider == "gemini":
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _GOOGLE_STATUS.get(kind, "UNKNOWN"),
            }
        }
    return {
        "error": {
            "message": message,
            "type": _OPENAI_TYPE.get(kind, "server_error"),
            "param": param,
            "code": None,
        }
    }
